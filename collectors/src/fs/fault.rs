//! [`FaultFs`], the test double of the read path: a file system over [`RealFs`] that fails
//! chosen paths with chosen errnos. Built for tests and with the `testing` feature only.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::fs::{DirEntry, Fs, RealFs};

/// A fault [`FaultFs`] injects.
#[derive(Debug, Clone)]
pub enum Fault {
    /// The operation fails with this errno.
    Errno(i32),
    /// A read returns these bytes instead of the file's.
    Content(Vec<u8>),
}

type Hook = Box<dyn Fn(&Path) + Send + Sync>;

/// A file system over [`RealFs`] that fails chosen paths with chosen errnos, and records every
/// path it was asked for. Sysfs returns errnos (`EINVAL` from a PMA counter, `ENODEV` from a
/// removed device) that plain files cannot, so tests of failure handling use this. A test
/// double: built for tests and with the `testing` feature only.
#[derive(Default)]
pub struct FaultFs {
    faults: HashMap<PathBuf, Fault>,
    accessed: Mutex<Vec<PathBuf>>,
    hook: Option<Hook>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFs")
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

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
