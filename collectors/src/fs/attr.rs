//! The one reader of sysfs (and procfs) attribute files, used by every source that reads them.
//!
//! Kernel interface: an attribute's `show` function prints its value followed by a newline
//! (`Documentation/filesystems/sysfs.rst`; `sysfs_emit()`), some with padding before it. Two
//! rules hold for every attribute, whichever source reads it:
//!
//! * **Text:** an attribute's value is the kernel's text minus its trailing newline, white
//!   space and NULs ([`attribute_text`]); leading white space and the content are left alone
//!   (parsers that accept padding trim for themselves).
//! * **Errno:** `ENOENT` and `ENOTDIR` ([`is_not_found`]) mean the kernel does not provide the
//!   attribute: `Ok(None)`, no error. Every other errno is a [`CollectError`] naming the file,
//!   so a broken attribute costs exactly its own series. Some attributes answer a state rather
//!   than a failure with an errno (`speed` of a link that is down fails with `EINVAL`); the
//!   caller says so with [`Attrs::unknown_on`].
//!
//! The free functions return `Result<Option<T>, CollectError>`; [`Attrs`] records the errors
//! of a device's reads in the source's error list and hands back `Option<T>`.

use std::path::Path;
use std::str::FromStr;

use crate::error::{CollectError, ErrorKind};
use crate::fs::{DirEntry, Fs, KeptFile, is_not_found};

/// How long what does not change while a device exists (GUIDs, firmware, ids, links,
/// directory listings) is kept before it is read again, by every source that keeps it.
pub const KNOWN_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// An attribute's value: the kernel's text (lossy UTF-8) without its trailing newline, white
/// space and NULs.
pub fn attribute_text(bytes: &[u8]) -> String {
    trim_attribute(&String::from_utf8_lossy(bytes)).to_owned()
}

/// The text of [`attribute_text`], borrowed.
fn trim_attribute(text: &str) -> &str {
    text.trim_end_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// Reads a file's bytes as they are (binary attributes such as PCI `config`).
pub fn read_bytes(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
) -> Result<Option<Vec<u8>>, CollectError> {
    errno_rule(device, path, fs.read(path))
}

/// Reads an attribute's value ([`attribute_text`]).
pub fn read_string(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
) -> Result<Option<String>, CollectError> {
    Ok(read_bytes(fs, device, path)?.map(|bytes| attribute_text(&bytes)))
}

/// Reads an attribute and parses its value with `parse`; a value `parse` refuses is a
/// [`CollectError`] of the kind and with the explanation the [`Invalid`] gives.
pub fn read_parsed<T, E: Into<Invalid>>(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<Option<T>, CollectError> {
    read_parsed_via(fs, device, path, None, parse)
}

/// [`read_parsed`] through `file`, the file system's kept file of `path` when there is one.
pub fn read_parsed_via<T, E: Into<Invalid>>(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
    file: Option<&KeptFile>,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Result<Option<T>, CollectError> {
    let mut parse = Some(parse);
    let mut parsed = None;
    let mut lend = |bytes: &[u8]| {
        if let Some(parse) = parse.take() {
            let text = String::from_utf8_lossy(bytes);
            parsed = Some(parse(trim_attribute(&text)).map_err(Into::into));
        }
    };
    let read = match file {
        Some(file) => fs.read_kept(path, file, &mut lend),
        None => fs.read_with(path, &mut lend),
    };
    if errno_rule(device, path, read)?.is_none() {
        return Ok(None);
    }
    match parsed {
        Some(Ok(value)) => Ok(Some(value)),
        Some(Err(Invalid { kind, detail })) => Err(CollectError::new(device, path, kind, detail)),
        // A file system that answered without lending the bytes: nothing to parse.
        None => Ok(None),
    }
}

/// Reads a decimal number (padding around it allowed); anything else is a parse error
/// "expected a number, found ...".
pub fn read_number<T: FromStr>(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
) -> Result<Option<T>, CollectError> {
    read_parsed(fs, device, path, |text| {
        text.trim()
            .parse()
            .map_err(|_| Invalid::expected("a number", text))
    })
}

/// The file name of a symbolic link's target (`device/driver` → `mlx5_core`).
pub fn read_link_name(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
) -> Result<Option<String>, CollectError> {
    let target = errno_rule(device, path, fs.read_link(path))?;
    Ok(target.and_then(|t| {
        t.file_name()
            .and_then(|name| name.to_str())
            .map(str::to_owned)
    }))
}

/// An attribute read only to decide something (which netdevs to read, which functions are
/// GPUs): any failure is no value here, reported, if at all, by the source that reads the
/// device.
pub fn peek(fs: &dyn Fs, path: &Path) -> Option<String> {
    read_string(fs, None, path).ok().flatten()
}

/// [`read_link_name`] where a link that cannot be read is no link (software devices have no
/// `device` link, virtual netdevs no driver).
pub fn peek_link(fs: &dyn Fs, path: &Path) -> Option<String> {
    read_link_name(fs, None, path).ok().flatten()
}

/// Lists a directory; a directory the kernel does not provide is `Ok(None)`.
pub fn list(
    fs: &dyn Fs,
    device: Option<&str>,
    path: &Path,
) -> Result<Option<Vec<DirEntry>>, CollectError> {
    errno_rule(device, path, fs.read_dir(path))
}

/// The errno rule of every read: not there ([`is_not_found`]) is `Ok(None)`, any other
/// failure a [`CollectError`] for `path`.
fn errno_rule<T>(
    device: Option<&str>,
    path: &Path,
    result: std::io::Result<T>,
) -> Result<Option<T>, CollectError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(err) if is_not_found(&err) => Ok(None),
        Err(err) => Err(CollectError::io(device, path, &err)),
    }
}

/// Why a parser refused an attribute's text: the kind of error it is and its explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// [`ErrorKind::Parse`], or [`ErrorKind::Unavailable`] when the kernel printed that the
    /// value is not available.
    pub kind: ErrorKind,
    /// The explanation.
    pub detail: String,
}

impl Invalid {
    /// A parse error "expected `what`, found `text`".
    pub fn expected(what: &str, text: &str) -> Self {
        Invalid {
            kind: ErrorKind::Parse,
            detail: format!("expected {what}, found {text:?}"),
        }
    }
}

impl From<String> for Invalid {
    fn from(detail: String) -> Self {
        Invalid {
            kind: ErrorKind::Parse,
            detail,
        }
    }
}

/// Reads the attributes of one device, recording every error in the source's list.
#[derive(Debug)]
pub struct Attrs<'a> {
    fs: &'a dyn Fs,
    device: Option<&'a str>,
    errors: &'a mut Vec<CollectError>,
    unknown: &'static [i32],
}

impl<'a> Attrs<'a> {
    /// Reads through `fs`, naming `device` in errors, which go to `errors`.
    pub fn new(fs: &'a dyn Fs, device: Option<&'a str>, errors: &'a mut Vec<CollectError>) -> Self {
        Attrs {
            fs,
            device,
            errors,
            unknown: &[],
        }
    }

    /// Treats a read failing with one of `errnos` as the kernel's "unknown": `None`, no error
    /// (`EINVAL` from `speed` or `carrier` of a link that is down, from the GID attributes of
    /// an empty slot).
    pub fn unknown_on(mut self, errnos: &'static [i32]) -> Self {
        self.unknown = errnos;
        self
    }

    /// The value of a read; its error, unless it is an "unknown" errno, is recorded.
    pub fn keep<T>(&mut self, read: Result<Option<T>, CollectError>) -> Option<T> {
        match read {
            Ok(value) => value,
            Err(err) if err.errno.is_some_and(|e| self.unknown.contains(&e)) => None,
            Err(err) => {
                self.errors.push(err);
                None
            }
        }
    }

    /// [`read_string`].
    pub fn string(&mut self, path: &Path) -> Option<String> {
        let read = read_string(self.fs, self.device, path);
        self.keep(read)
    }

    /// [`read_number`].
    pub fn number<T: FromStr>(&mut self, path: &Path) -> Option<T> {
        let read = read_number(self.fs, self.device, path);
        self.keep(read)
    }

    /// [`read_parsed`].
    pub fn parsed<T, E: Into<Invalid>>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Option<T> {
        let read = read_parsed(self.fs, self.device, path, parse);
        self.keep(read)
    }

    /// [`read_parsed_via`]: a read through `file`, the kept file of `path`, when there is
    /// one.
    pub fn parsed_via<T, E: Into<Invalid>>(
        &mut self,
        path: &Path,
        file: Option<&KeptFile>,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Option<T> {
        let read = read_parsed_via(self.fs, self.device, path, file, parse);
        self.keep(read)
    }

    /// [`read_parsed`] with a parser that answers `None` for text it refuses, reported as
    /// "expected `what`, found ...".
    pub fn expect<T>(
        &mut self,
        path: &Path,
        what: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        self.parsed(path, |text| {
            parse(text).ok_or_else(|| Invalid::expected(what, text))
        })
    }

    /// [`read_bytes`].
    pub fn bytes(&mut self, path: &Path) -> Option<Vec<u8>> {
        let read = read_bytes(self.fs, self.device, path);
        self.keep(read)
    }

    /// [`list`].
    pub fn list(&mut self, path: &Path) -> Option<Vec<DirEntry>> {
        let read = list(self.fs, self.device, path);
        self.keep(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fault, FaultFs, RealFs};

    #[test]
    fn text_loses_only_its_trailing_newline_white_space_and_nuls() {
        assert_eq!(attribute_text(b"4: ACTIVE\n"), "4: ACTIVE");
        assert_eq!(attribute_text(b"MT4129\0\n"), "MT4129");
        assert_eq!(attribute_text(b"  padded  \t\n\n"), "  padded");
        assert_eq!(attribute_text(b"a\nb\n"), "a\nb");
        assert_eq!(attribute_text(b"\n"), "");
    }

    #[test]
    fn absent_is_none_and_every_other_errno_is_an_error_for_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mtu");
        std::fs::write(&file, "4200\n").unwrap();
        let eio = dir.path().join("eio");
        let fs = FaultFs::new().fault(eio.clone(), Fault::Errno(libc::EIO));
        assert_eq!(read_number::<u32>(&fs, None, &file), Ok(Some(4200)));
        assert_eq!(read_string(&fs, None, &dir.path().join("none")), Ok(None));
        // A path through a file: ENOTDIR, not there either.
        assert_eq!(read_string(&fs, None, &file.join("x")), Ok(None));
        let err = read_string(&fs, Some("eth0"), &eio).unwrap_err();
        assert_eq!(
            (err.path(), err.errno, err.kind, err.device.as_deref()),
            (
                Some(eio.as_path()),
                Some(libc::EIO),
                ErrorKind::Io,
                Some("eth0")
            )
        );
    }

    #[test]
    fn parse_failures_name_the_file_and_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("speed");
        std::fs::write(&file, "fast\n").unwrap();
        let err = read_number::<u64>(&RealFs, None, &file).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Parse);
        assert_eq!(err.detail, "expected a number, found \"fast\"");
        let mut errors = Vec::new();
        let mut attrs = Attrs::new(&RealFs, None, &mut errors);
        assert_eq!(
            attrs.expect(&file, "a speed", |t| t.parse::<u8>().ok()),
            None
        );
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn unknown_errnos_are_quiet_others_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let speed = dir.path().join("speed");
        let fs = FaultFs::new()
            .fault(speed.clone(), Fault::Errno(libc::EINVAL))
            .fault(dir.path().join("mtu"), Fault::Errno(libc::EIO));
        let mut errors = Vec::new();
        let mut attrs = Attrs::new(&fs, None, &mut errors).unknown_on(&[libc::EINVAL]);
        assert_eq!(attrs.number::<u64>(&speed), None);
        assert_eq!(attrs.number::<u64>(&dir.path().join("mtu")), None);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].errno, Some(libc::EIO));
    }

    #[test]
    fn links_give_their_target_name() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("driver");
        std::os::unix::fs::symlink("../../bus/pci/drivers/mlx5_core", &link).unwrap();
        assert_eq!(
            read_link_name(&RealFs, None, &link),
            Ok(Some("mlx5_core".to_owned()))
        );
        assert_eq!(
            read_link_name(&RealFs, None, &dir.path().join("none")),
            Ok(None)
        );
    }
}
