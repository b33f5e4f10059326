//! The FUSE file system: a read-only mirror of a directory that applies the rules.
//!
//! The kernel caches entries and attributes; whoever changes the rules invalidates every
//! entry it may hold ([`known_entries`]), so the change takes effect on the next path walk
//! while a scrape of a steady tree costs no lookups. Files are opened with `FOPEN_DIRECT_IO`: like sysfs, every
//! regular file reports a size of 4096 and a read returns what the file holds now, however
//! long or short that is.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, Request,
};

use crate::rules::{Action, Rules};

/// The size every regular file reports, as sysfs attributes do.
const ATTRIBUTE_SIZE: u64 = 4096;

/// The rule file, read at start and again on [`RuleSource::reload`].
#[derive(Debug)]
pub struct RuleSource {
    path: Option<PathBuf>,
    rules: Mutex<Arc<Rules>>,
}

impl RuleSource {
    /// Loads `path` (no rules when `None`); a rule file that does not parse is an error.
    pub fn new(path: Option<PathBuf>) -> Result<RuleSource, String> {
        let source = RuleSource {
            path,
            rules: Mutex::new(Arc::new(Rules::default())),
        };
        source.reload()?;
        Ok(source)
    }

    /// The rules in force now.
    pub fn current(&self) -> Arc<Rules> {
        self.lock().clone()
    }

    /// Re-reads the rule file; on error the rules in force stay. A missing file is no rules.
    pub fn reload(&self) -> Result<(), String> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(err) => return Err(format!("{}: {err}", path.display())),
        };
        let rules = Rules::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        *self.lock() = Arc::new(rules);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Arc<Rules>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Inode numbers for relative paths (`""` is the root, inode 1), handed out on first sight
/// and kept for the life of the mount.
#[derive(Debug, Default)]
pub struct Inodes {
    by_path: HashMap<String, u64>,
    paths: Vec<String>,
}

/// The hostile mirror.
#[derive(Debug)]
pub struct HostileFs {
    source: PathBuf,
    rules: Arc<RuleSource>,
    inodes: Arc<Mutex<Inodes>>,
}

/// Every entry the kernel may have cached, as (parent inode, name): what to invalidate after
/// the rules change.
pub fn known_entries(inodes: &Mutex<Inodes>) -> Vec<(INodeNo, String)> {
    let inodes = inodes.lock().unwrap_or_else(|e| e.into_inner());
    inodes
        .paths
        .iter()
        .filter(|path| !path.is_empty())
        .map(|path| {
            let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
            let parent = inodes.by_path.get(parent).copied().unwrap_or(1);
            (INodeNo(parent), name.to_owned())
        })
        .collect()
}

impl HostileFs {
    /// A mirror of `source` under `rules`.
    pub fn new(source: PathBuf, rules: Arc<RuleSource>) -> HostileFs {
        let mut inodes = Inodes::default();
        inodes.by_path.insert(String::new(), 1);
        inodes.paths.push(String::new());
        HostileFs {
            source,
            rules,
            inodes: Arc::new(Mutex::new(inodes)),
        }
    }

    /// The inode table, shared with whoever invalidates the kernel's caches.
    pub fn inodes(&self) -> Arc<Mutex<Inodes>> {
        self.inodes.clone()
    }

    fn table(&self) -> MutexGuard<'_, Inodes> {
        self.inodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path_of(&self, ino: INodeNo) -> Option<String> {
        let index = usize::try_from(u64::from(ino)).ok()?.checked_sub(1)?;
        self.table().paths.get(index).cloned()
    }

    fn ino_of(&self, path: &str) -> INodeNo {
        let mut inodes = self.table();
        if let Some(ino) = inodes.by_path.get(path) {
            return INodeNo(*ino);
        }
        inodes.paths.push(path.to_owned());
        let ino = inodes.paths.len() as u64;
        inodes.by_path.insert(path.to_owned(), ino);
        INodeNo(ino)
    }

    fn real(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.source.clone()
        } else {
            self.source.join(path)
        }
    }

    fn attr(&self, path: &str, meta: &std::fs::Metadata) -> FileAttr {
        let kind = kind_of(meta.file_type());
        let (size, perm) = match kind {
            FileType::Directory => (0, 0o555),
            FileType::Symlink => (meta.len(), 0o777),
            _ => (ATTRIBUTE_SIZE, 0o444),
        };
        let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        FileAttr {
            ino: self.ino_of(path),
            size,
            blocks: 0,
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The path of `ino` and the rules in force, or ENOENT when the inode is unknown or a
    /// `vanish` rule covers it.
    fn visible(&self, ino: INodeNo) -> Result<(String, Arc<Rules>), Errno> {
        let path = self.path_of(ino).ok_or(Errno::ENOENT)?;
        let rules = self.rules.current();
        if rules.vanished(&path) {
            return Err(Errno::ENOENT);
        }
        Ok((path, rules))
    }
}

fn kind_of(t: std::fs::FileType) -> FileType {
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// Bytes that are neither UTF-8 nor a number, the same for a path on every read.
fn garbage(path: &str) -> Vec<u8> {
    // FNV-1a of the path seeds an xorshift generator.
    let mut x = path.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    }) | 1;
    let mut out = vec![0xff, 0xfe, 0x00, b'4', b':', 0xc3, 0x28];
    for _ in 0..57 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push((x >> 24) as u8);
    }
    out.push(b'\n');
    out
}

/// `len` bytes of `unit` repeated, from `offset`, at most `size` of them.
fn repeated(unit: &[u8], len: usize, offset: usize, size: usize) -> Vec<u8> {
    let unit: &[u8] = if unit.is_empty() { b"0\n" } else { unit };
    (offset..len.min(offset.saturating_add(size)))
        .map(|i| unit[i % unit.len()])
        .collect()
}

fn slice(data: &[u8], offset: u64, size: u32) -> &[u8] {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(size as usize).min(data.len());
    &data[start..end]
}

/// How long the kernel may cache entries and attributes. Path walks then cost no request;
/// after a rule change every known entry is invalidated (see `main.rs`).
const TTL: Duration = Duration::from_secs(3600);

impl Filesystem for HostileFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(parent) = self.path_of(parent) else {
            return reply.error(Errno::ENOENT);
        };
        let Some(name) = name.to_str() else {
            return reply.error(Errno::ENOENT);
        };
        let path = join(&parent, name);
        if self.rules.current().vanished(&path) {
            return reply.error(Errno::ENOENT);
        }
        match std::fs::symlink_metadata(self.real(&path)) {
            Ok(meta) => reply.entry(&TTL, &self.attr(&path, &meta), Generation(0)),
            Err(err) => reply.error(err.into()),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.visible(ino) {
            Ok((path, _)) => match std::fs::symlink_metadata(self.real(&path)) {
                Ok(meta) => reply.attr(&TTL, &self.attr(&path, &meta)),
                Err(err) => reply.error(err.into()),
            },
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.visible(ino) {
            Ok((path, _)) => match std::fs::read_link(self.real(&path)) {
                Ok(target) => reply.data(target.as_os_str().as_bytes()),
                Err(err) => reply.error(err.into()),
            },
            Err(errno) => reply.error(errno),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let (path, rules) = match self.visible(ino) {
            Ok(found) => found,
            Err(errno) => return reply.error(errno),
        };
        if let Some(Action::OpenErrno(errno)) = rules.action(&path) {
            return reply.error(Errno::from_i32(*errno));
        }
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(path) = self.path_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let rules = self.rules.current();
        if rules.vanished(&path) {
            // What sysfs answers on a file held open across its device's removal.
            return reply.error(Errno::ENODEV);
        }
        let real = || std::fs::read(self.real(&path));
        match rules.action(&path) {
            Some(Action::ReadErrno(errno)) => reply.error(Errno::from_i32(*errno)),
            // kernfs fails both the open and the reads of a file already open once its node
            // is deactivated (`kernfs_get_active`); other open errnos (permissions) do not
            // reach a file that is already open.
            Some(Action::OpenErrno(errno)) if *errno == Errno::ENODEV.code() => {
                reply.error(Errno::from_i32(*errno))
            }
            Some(Action::Garbage) => reply.data(slice(&garbage(&path), offset, size)),
            Some(Action::Big(len)) => match real() {
                Ok(unit) => reply.data(&repeated(
                    &unit,
                    *len,
                    usize::try_from(offset).unwrap_or(usize::MAX),
                    size as usize,
                )),
                Err(err) => reply.error(err.into()),
            },
            Some(Action::Block(wait)) if offset == 0 => {
                let wait = *wait;
                match real() {
                    // The reply travels to a thread of its own, so the session keeps serving
                    // every other request while this one sleeps.
                    Ok(data) => {
                        std::thread::spawn(move || {
                            std::thread::sleep(wait);
                            reply.data(slice(&data, 0, size));
                        });
                    }
                    Err(err) => reply.error(err.into()),
                }
            }
            _ => match real() {
                Ok(data) => reply.data(slice(&data, offset, size)),
                Err(err) => reply.error(err.into()),
            },
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.visible(ino) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // A vanished directory still lists: `vanish` hides entries from lookups only.
        let Some(path) = self.path_of(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let listing = match std::fs::read_dir(self.real(&path)) {
            Ok(listing) => listing,
            Err(err) => return reply.error(err.into()),
        };
        let parent = Path::new(&path)
            .parent()
            .and_then(Path::to_str)
            .unwrap_or_default()
            .to_owned();
        let mut entries = vec![
            (ino, FileType::Directory, ".".to_owned()),
            (self.ino_of(&parent), FileType::Directory, "..".to_owned()),
        ];
        let mut children: Vec<(FileType, String)> = listing
            .filter_map(Result::ok)
            .filter_map(|e| {
                let kind = kind_of(e.file_type().ok()?);
                Some((kind, e.file_name().into_string().ok()?))
            })
            .collect();
        children.sort_by(|a, b| a.1.cmp(&b.1));
        for (kind, name) in children {
            entries.push((self.ino_of(&join(&path, &name)), kind, name));
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(skip) {
            if reply.add(ino, i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_not_utf8_and_is_stable() {
        let a = garbage("class/infiniband/mlx5_0/ports/1/state");
        assert!(std::str::from_utf8(&a).is_err());
        assert_eq!(a, garbage("class/infiniband/mlx5_0/ports/1/state"));
        assert_ne!(a, garbage("class/infiniband/mlx5_1/ports/1/state"));
    }

    #[test]
    fn big_content_repeats_the_unit_up_to_its_length() {
        assert_eq!(repeated(b"ab\n", 7, 0, 100), b"ab\nab\na");
        assert_eq!(repeated(b"ab\n", 7, 5, 100), b"\na");
        assert_eq!(repeated(b"ab\n", 7, 2, 2), b"\na");
        assert_eq!(repeated(b"ab\n", 7, 9, 100), b"");
        assert_eq!(repeated(b"", 3, 0, 100), b"0\n0");
    }

    #[test]
    fn slices_stay_in_bounds() {
        assert_eq!(slice(b"hello", 1, 2), b"el");
        assert_eq!(slice(b"hello", 3, 100), b"lo");
        assert_eq!(slice(b"hello", 10, 1), b"");
    }
}
