//! The file-system seam and the injectable roots.
//!
//! This is the one module that knows the default locations of sysfs and procfs. Every source
//! resolves its paths under [`Roots`], so `--path.sysfs tests/fixtures/<tree>/sys` runs the whole
//! agent against a fixture tree, and reads go through the [`Fs`] trait so tests can make chosen
//! paths fail with a chosen errno (`EINVAL` from a PMA counter, `ENODEV` from a vanished device)
//! that a plain directory of files cannot produce.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the kernel's pseudo file systems are mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// The sysfs mount point (`--path.sysfs`).
    pub sysfs: PathBuf,
    /// The procfs mount point (`--path.procfs`).
    pub procfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sysfs: PathBuf::from(DEFAULT_SYSFS),
            procfs: PathBuf::from(DEFAULT_PROCFS),
        }
    }
}

/// The default sysfs mount point.
pub const DEFAULT_SYSFS: &str = "/sys";
/// The default procfs mount point.
pub const DEFAULT_PROCFS: &str = "/proc";

/// The most bytes read from one attribute file. sysfs attributes are at most one page
/// (4096 bytes); anything much larger is not a kernel attribute and is refused rather than
/// buffered.
pub const MAX_ATTRIBUTE_BYTES: u64 = 64 * 1024;

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's file name.
    pub name: String,
    /// Whether the entry is a directory (symlinks are not followed).
    pub is_dir: bool,
}

/// Read access to a file-system tree. The agent uses [`RealFs`]; tests wrap it to inject
/// failures.
pub trait Fs: Send + Sync + std::fmt::Debug {
    /// Reads a whole attribute file, at most [`MAX_ATTRIBUTE_BYTES`] (larger files fail with
    /// `EFBIG`).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Lists a directory, in natural order (`mlx5_2` before `mlx5_10`, `gids/2` before `gids/10`).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    /// Reads the target of a symbolic link.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// Whether `path` exists (following symlinks).
    fn exists(&self, path: &Path) -> bool;
    /// Resolves every symlink of `path` (`realpath`).
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// Reads `path` and lends its bytes to `f`, for a reader that parses them at once: a file
    /// system that reads into a buffer of its own lends that instead of a copy. `f` is called
    /// once when the read succeeds, never when it fails.
    fn read_with(&self, path: &Path, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let bytes = self.read(path)?;
        f(&bytes);
        Ok(())
    }
    /// How many files it keeps open between reads, for a file system that does.
    fn files_kept(&self) -> Option<usize> {
        None
    }
    /// The file it keeps open for `path` (read at least once), for a reader that reads it
    /// again every scrape with [`Fs::read_kept`]; `None` when it keeps none.
    fn keep_handle(&self, _path: &Path) -> Option<crate::files::KeptFile> {
        None
    }
    /// [`Fs::read_with`] of `path` through `file`, its [`Fs::keep_handle`]: a file system that
    /// keeps files reads it without looking the path up; any other reads the path.
    fn read_kept(
        &self,
        path: &Path,
        _file: &crate::files::KeptFile,
        f: &mut dyn FnMut(&[u8]),
    ) -> io::Result<()> {
        self.read_with(path, f)
    }
    /// A number that changes whenever a file it keeps open under the device directory
    /// `device` ([`crate::guard::device_key`]) is found to stand for its path no more (the
    /// device was removed, or removed and added again under the same name). A source that
    /// remembers a device's listings or identity reads them again when it changes. A file
    /// system that keeps nothing open answers 0.
    fn changes(&self, _device: &Path) -> u64 {
        0
    }
    /// Closes every file it keeps open under the directory `dir`, whose device or netdev
    /// left: the next read of one opens it again. A file system that keeps nothing open has
    /// nothing to do.
    fn release(&self, _dir: &Path) {}
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl Fs for RealFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = File::open(path)?;
        let mut buf = Vec::with_capacity(64);
        file.take(MAX_ATTRIBUTE_BYTES + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > MAX_ATTRIBUTE_BYTES {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        Ok(buf)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue; // the kernel names its attributes in ASCII
            };
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            entries.push(DirEntry { name, is_dir });
        }
        entries.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        Ok(entries)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// FxHash (rustc's hasher) over a path's bytes, for maps looked up on every read: `Path`'s own
/// `Hash` walks its components through SipHash.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathHasher(u64);

impl Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by path, hashed over the path's bytes ([`PathHasher`]): two spellings of one
/// path are two keys, which is right for paths a source builds the same way every time.
#[derive(Debug, Clone)]
pub struct PathMap<V> {
    map: HashMap<Box<[u8]>, V, BuildHasherDefault<PathHasher>>,
}

impl<V> Default for PathMap<V> {
    fn default() -> Self {
        PathMap {
            map: HashMap::default(),
        }
    }
}

impl<V> PathMap<V> {
    /// The value of `path`.
    pub fn get(&self, path: &Path) -> Option<&V> {
        self.map.get(path.as_os_str().as_bytes())
    }

    /// Sets the value of `path`.
    pub fn insert(&mut self, path: &Path, value: V) -> Option<V> {
        self.map.insert(path.as_os_str().as_bytes().into(), value)
    }

    /// Removes `path`.
    pub fn remove(&mut self, path: &Path) -> Option<V> {
        self.map.remove(path.as_os_str().as_bytes())
    }

    /// Keeps the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&Path, &mut V) -> bool) {
        self.map
            .retain(|k, v| keep(Path::new(std::ffi::OsStr::from_bytes(k)), v));
    }

    /// Moves every entry of `other` in, replacing entries of the same path.
    pub fn extend(&mut self, other: PathMap<V>) {
        self.map.extend(other.map);
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many entries it has.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// A directory's path with one name after it, changed without parsing the path again
/// (`PathBuf::push` and `pop` walk the components each time): for reading every file of a
/// directory.
#[derive(Debug)]
pub struct ChildPath {
    buf: Vec<u8>,
    base: usize,
}

impl ChildPath {
    /// Paths under `dir`.
    pub fn new(dir: &Path) -> Self {
        let mut buf = Vec::with_capacity(dir.as_os_str().len() + 48);
        buf.extend_from_slice(dir.as_os_str().as_bytes());
        if buf.last() != Some(&b'/') {
            buf.push(b'/');
        }
        ChildPath {
            base: buf.len(),
            buf,
        }
    }

    /// `dir/name`.
    pub fn of(&mut self, name: &str) -> &Path {
        self.buf.truncate(self.base);
        self.buf.extend_from_slice(name.as_bytes());
        Path::new(std::ffi::OsStr::from_bytes(&self.buf))
    }
}

/// Compares names so that runs of digits compare by value: `mlx5_2 < mlx5_10`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (trim_zeros(&a[..da]), trim_zeros(&b[..db]));
                let ord = na
                    .len()
                    .cmp(&nb.len())
                    .then_with(|| na.cmp(nb))
                    .then(da.cmp(&db));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let zeros = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[zeros..]
}

/// Whether an I/O error means "not there" rather than "broken": `ENOENT`, or `ENOTDIR` (a
/// path through a file). The rule every read of an attribute follows ([`crate::sysfs`]).
pub fn is_not_found(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ENOTDIR)
}

/// A fault [`FaultFs`] injects.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Clone)]
pub enum Fault {
    /// The operation fails with this errno.
    Errno(i32),
    /// A read returns these bytes instead of the file's.
    Content(Vec<u8>),
}

#[cfg(any(test, feature = "testing"))]
type Hook = Box<dyn Fn(&Path) + Send + Sync>;

/// A file system over [`RealFs`] that fails chosen paths with chosen errnos, and records every
/// path it was asked for. Sysfs returns errnos (`EINVAL` from a PMA counter, `ENODEV` from a
/// removed device) that plain files cannot, so tests of failure handling use this. A test
/// double: built for tests and with the `testing` feature only.
#[cfg(any(test, feature = "testing"))]
#[derive(Default)]
pub struct FaultFs {
    faults: std::collections::HashMap<PathBuf, Fault>,
    accessed: std::sync::Mutex<Vec<PathBuf>>,
    hook: Option<Hook>,
}

#[cfg(any(test, feature = "testing"))]
impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFs")
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

#[cfg(any(test, feature = "testing"))]
impl FaultFs {
    /// A file system with no faults.
    pub fn new() -> Self {
        FaultFs::default()
    }

    /// Makes every operation on `path` fail or return other content.
    pub fn fault(mut self, path: impl Into<PathBuf>, fault: Fault) -> Self {
        self.faults.insert(path.into(), fault);
        self
    }

    /// Runs `hook` before every operation, with the operation's path (to remove a device
    /// mid-collection, say).
    pub fn hook(mut self, hook: impl Fn(&Path) + Send + Sync + 'static) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }

    /// Every path an operation was asked for, in order.
    pub fn accessed(&self) -> Vec<PathBuf> {
        self.accessed.lock().map(|a| a.clone()).unwrap_or_default()
    }

    fn enter(&self, path: &Path) -> Option<&Fault> {
        if let Ok(mut accessed) = self.accessed.lock() {
            accessed.push(path.to_path_buf());
        }
        if let Some(hook) = &self.hook {
            hook(path);
        }
        self.faults.get(path)
    }
}

#[cfg(any(test, feature = "testing"))]
impl Fs for FaultFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self.enter(path) {
            Some(Fault::Errno(errno)) => Err(io::Error::from_raw_os_error(*errno)),
            Some(Fault::Content(bytes)) => Ok(bytes.clone()),
            None => RealFs.read(path),
        }
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        match self.enter(path) {
            Some(Fault::Errno(errno)) => Err(io::Error::from_raw_os_error(*errno)),
            _ => RealFs.read_dir(path),
        }
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        match self.enter(path) {
            Some(Fault::Errno(errno)) => Err(io::Error::from_raw_os_error(*errno)),
            _ => RealFs.read_link(path),
        }
    }

    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        match self.enter(path) {
            Some(Fault::Errno(errno)) => Err(io::Error::from_raw_os_error(*errno)),
            _ => RealFs.canonicalize(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_sorts_numbers_by_value() {
        let mut names = vec!["mlx5_10", "mlx5_2", "mlx5_1", "irdma0", "mlx5_0", "gid"];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            ["gid", "irdma0", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"]
        );
    }

    #[test]
    fn oversized_file_is_refused_with_efbig() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge");
        std::fs::write(&path, vec![b'1'; (MAX_ATTRIBUTE_BYTES + 10) as usize]).unwrap();
        let err = RealFs.read(&path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFBIG));
        std::fs::write(&path, b"4: ACTIVE\n").unwrap();
        assert_eq!(RealFs.read(&path).unwrap(), b"4: ACTIVE\n");
    }
}
