//! The read path: every file a source reads goes through it, and it is one stack of layers,
//! each an [`Fs`] over the one below or a reader over them all. From the bottom up:
//!
//! 1. `base`: the ground, importing nothing of the crate: the injectable [`Roots`] (the one
//!    place that knows the default locations of sysfs and procfs: `--path.sysfs
//!    tests/fixtures/<tree>/sys` runs the whole agent against a fixture tree), the device a
//!    path belongs to (`base::device_key`), `is_pci_address`, path maps and the coarse clock.
//! 2. This module: the [`Fs`] trait every layer implements, its [`DirEntry`], and the
//!    [`KeptFile`] handle it lends.
//! 3. `real`: [`RealFs`], the real file system, one `open`/`read`/`close` per read.
//! 4. `kept`: `KeptOpenFs`, the real file system with attribute files kept open and re-read
//!    with `pread` at offset 0 (the agent's file system).
//! 5. `refused`: the back-off of attributes the driver refuses (`EINVAL`, `EOPNOTSUPP`,
//!    `EACCES`), used by the guard.
//! 6. `guard`: [`GuardedFs`], which lets a collection give up a device whose read blocks in
//!    the kernel, and backs refused files off; the sources read through it.
//! 7. `attr`: the one reader of attribute files (text and errno rules, `attr::Attrs`), over
//!    any `Fs`.
//!
//! Beside the stack, `fault`: `FaultFs`, a test double over [`RealFs`] that fails chosen
//! paths with chosen errnos (`EINVAL` from a PMA counter, `ENODEV` from a vanished device) that
//! a plain directory of files cannot produce. Each layer imports only those below it; the
//! errors the guard and the back-off answer with instead of the kernel (`crate::error::Blocked`,
//! `crate::error::Refused`) are in `crate::error`, below them all.
//!
//! The layers are crate-private. Outside the crate the read path is [`Fs`] with its
//! [`DirEntry`] and [`KeptFile`], the [`Roots`] and their defaults ([`DEFAULT_SYSFS`],
//! [`DEFAULT_PROCFS`]), [`RealFs`], [`GuardedFs`] and the [`BlockedDevice`]s it reports, and,
//! with the `testing` feature, `FaultFs`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

pub(crate) mod attr;
pub(crate) mod base;
#[cfg(any(test, feature = "testing"))]
mod fault;
pub(crate) mod guard;
pub(crate) mod kept;
pub(crate) mod real;
pub(crate) mod refused;

pub(crate) use base::{ChildPath, PathHasher, PathMap, is_pci_address, natural_cmp};
pub use base::{DEFAULT_PROCFS, DEFAULT_SYSFS, Roots};
#[cfg(any(test, feature = "testing"))]
pub use fault::{Fault, FaultFs};
pub use guard::{BlockedDevice, GuardedFs};
pub(crate) use kept::KeptOpenFs;
pub use real::RealFs;

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

/// Read access to a file-system tree, implemented by every layer of the read path (see the
/// module docs): the sources read through [`GuardedFs`] over `KeptOpenFs`, and tests wrap
/// [`RealFs`] to inject failures.
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
    fn keep_handle(&self, _path: &Path) -> Option<KeptFile> {
        None
    }
    /// [`Fs::read_with`] of `path` through `file`, its [`Fs::keep_handle`]: a file system that
    /// keeps files reads it without looking the path up; any other reads the path.
    fn read_kept(&self, path: &Path, _file: &KeptFile, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.read_with(path, f)
    }
    /// A number that changes whenever a file it keeps open under the device directory
    /// `device` (`base::device_key`) is found to stand for its path no more (the
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

/// A file a file system keeps open (`KeptOpenFs`), held by a reader that reads the same
/// attribute every scrape ([`Fs::keep_handle`]): a read through it ([`Fs::read_kept`]) skips the
/// look-up by path. It follows the same rules as a read by path: outside sysfs and procfs its
/// inode is checked every `kept::VERIFY_EVERY`, and a read that says the file no longer
/// stands for its path opens the path again.
#[derive(Debug, Clone)]
pub struct KeptFile(Arc<Kept>);

/// What a [`KeptFile`] holds: the open file and when its file system last used and checked it.
#[derive(Debug)]
struct Kept {
    file: Arc<File>,
    /// Seconds after the epoch of its file system when it was last read.
    used: AtomicU64,
    /// Seconds after the epoch when its inode was last checked (outside kernel file systems).
    verified: AtomicU64,
}

/// Whether an I/O error means "not there" rather than "broken": `ENOENT`, or `ENOTDIR` (a
/// path through a file). The rule every read of an attribute follows ([`attr`]).
pub(crate) fn is_not_found(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ENOTDIR)
}
