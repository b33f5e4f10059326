//! Errors a source meets while reading the node.
//!
//! A source never fails as a whole because one file is bad: it records a [`CollectError`] that
//! names the path, the errno and what was wrong, skips that file's series, and carries on. The
//! agent counts these errors per collector and logs each distinct one once.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What kind of failure a [`CollectError`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// `open`/`read`/`readdir`/`readlink` failed with an errno.
    Io,
    /// The file was read but its content does not have the kernel's format.
    Parse,
    /// The kernel said the value is not available (for example `N/A (no PMA)`).
    Unavailable,
    /// A device was listed but disappeared before it could be read.
    Vanished,
    /// The read did not return before the collection's deadline; its device is skipped until it
    /// does (see [`crate::guard`]).
    Timeout,
    /// Not read, because an earlier read of the same device is still blocked. Such errors are
    /// not counted one by one: the blocked device is reported once, by the timeout and by
    /// `railscope_sysfs_blocked_seconds`.
    Skipped,
}

impl ErrorKind {
    /// A short lower-case name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::Parse => "parse",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Vanished => "vanished",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Skipped => "skipped",
        }
    }
}

/// One failure met while reading the node; it costs only the series of what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectError {
    /// The device the failure belongs to, when it belongs to one.
    pub device: Option<String>,
    /// The path (under the configured root) that failed.
    pub path: PathBuf,
    /// The errno of an I/O failure.
    pub errno: Option<i32>,
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// A human-readable explanation.
    pub detail: String,
}

impl CollectError {
    /// An I/O failure on `path`.
    pub fn io(device: Option<&str>, path: &Path, err: &io::Error) -> Self {
        let kind = if crate::guard::is_skipped(err) {
            ErrorKind::Skipped
        } else if crate::guard::is_timed_out(err) {
            ErrorKind::Timeout
        } else {
            ErrorKind::Io
        };
        CollectError {
            device: device.map(str::to_owned),
            path: path.to_path_buf(),
            errno: err.raw_os_error(),
            kind,
            detail: err.to_string(),
        }
    }

    /// A failure of kind `kind` on `path`, described by `detail`.
    pub fn new(
        device: Option<&str>,
        path: &Path,
        kind: ErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        CollectError {
            device: device.map(str::to_owned),
            path: path.to_path_buf(),
            errno: None,
            kind,
            detail: detail.into(),
        }
    }

    /// The errno's symbolic name (`EINVAL`), when there is an errno.
    pub fn errno_name(&self) -> Option<String> {
        self.errno.map(errno_name)
    }
}

impl fmt::Display for CollectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.kind, self.errno) {
            (ErrorKind::Io, Some(errno)) => write!(
                f,
                "failed to read {}: {} ({})",
                self.path.display(),
                self.detail,
                errno_name(errno)
            ),
            (ErrorKind::Io, None) => {
                write!(f, "failed to read {}: {}", self.path.display(), self.detail)
            }
            (ErrorKind::Parse, _) => write!(
                f,
                "failed to parse {}: {}",
                self.path.display(),
                self.detail
            ),
            (ErrorKind::Unavailable, _) => {
                write!(
                    f,
                    "value not available in {}: {}",
                    self.path.display(),
                    self.detail
                )
            }
            (ErrorKind::Timeout | ErrorKind::Skipped, _) => {
                write!(f, "{}: {}", self.path.display(), self.detail)
            }
            (ErrorKind::Vanished, _) => {
                write!(
                    f,
                    "device vanished while reading {}: {}",
                    self.path.display(),
                    self.detail
                )
            }
        }
    }
}

impl std::error::Error for CollectError {}

/// The symbolic name of the errnos a sysfs read can return; `errno <number>` for the rest.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EFBIG => "EFBIG",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ELOOP => "ELOOP",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}
