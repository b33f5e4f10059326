//! The real file system, with attribute files kept open and listings of what does not change
//! remembered: the agent's [`Fs`].
//!
//! sysfs runs an attribute's `show()` on every read at offset 0 of an open file
//! (`fs/kernfs/file.c`, `kernfs_fop_read_iter` → `seq_read_iter`, which starts over when the
//! position is 0), so a file opened once and re-read with `pread(fd, buf, 0)` gives a fresh
//! value every scrape for one system call instead of three (`openat`, `read`, `close`) plus
//! the path walk. [`KeptOpenFs`]:
//!
//! * keeps each attribute file it reads open, and reads it with one `pread` at offset 0 into a
//!   buffer larger than any attribute (an attribute is at most a page; a file that fills the
//!   buffer is refused with `EFBIG`, as before);
//! * drops a kept file when a read says its device changed (`ENODEV`, `ENOENT`, `ESTALE`,
//!   `EBADF`: kernfs answers `ENODEV` on an open file whose device was removed) and opens the
//!   path again once; outside a kernel file system (a fixture tree, a FUSE mirror) a kept
//!   file whose inode was unlinked or replaced is also dropped, since only sysfs and procfs
//!   guarantee that an open file follows its path (checked at most once per
//!   [`VERIFY_EVERY`] per file, so a file replaced there is seen within a second);
//! * counts, per device directory ([`crate::fs::base::device_key`]), the kept files found changed
//!   ([`Fs::changes`]), so a source that remembers what does not change (listings, identity)
//!   knows when a device was removed and added again under the same name;
//! * closes the kept files under a directory a source says is gone ([`Fs::release`]: a
//!   netdev that left), forgets every kept file that was not read for [`FORGET_AFTER`] (a
//!   device that went away), and never keeps more files than its capacity
//!   ([`KeptOpenFs::with_capacity`]; past it, reads open and close as before), so the
//!   descriptor count stays bounded (`railscope_open_files_kept`);
//! * raises the process's soft `RLIMIT_NOFILE` to its hard limit at start (as Go's runtime
//!   does for every Go exporter since Go 1.19) and keeps at most half of it.
//!
//! Listings, links and path resolution go straight to the kernel: in sysfs they never reach a
//! driver. Sources that list the same directories every scrape remember the listings
//! themselves and revalidate them with [`Fs::changes`] and on a slow cadence.

use std::collections::HashMap;
use std::fs::File;
use std::hash::BuildHasherDefault;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::fs::base::{PathHasher, Roots, coarse_now, device_prefix};
use crate::fs::{DirEntry, Fs, Kept, KeptFile, MAX_ATTRIBUTE_BYTES, RealFs};

/// Outside a kernel file system, how often a kept file is checked for having been replaced or
/// removed under its path.
pub const VERIFY_EVERY: Duration = Duration::from_secs(1);

/// The most device directories whose changes are counted; past it the counts start over
/// (every device then reads as changed once).
const MAX_CHANGED_DEVICES: usize = 4_096;

/// A kept file not read for this long is closed.
pub const FORGET_AFTER: Duration = Duration::from_secs(120);

/// The most files kept open, whatever the descriptor limit allows.
const MAX_KEPT: usize = 16_384;

/// How often the kept files are swept for ones not read lately.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// `statfs` magic numbers of the kernel file systems whose open files follow their path.
const SYSFS_MAGIC: i64 = 0x6265_6572;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Kept files by the bytes of their path.
type KeptMap = HashMap<Box<[u8]>, Arc<Kept>, BuildHasherDefault<PathHasher>>;

/// Changes seen, by device directory; `resets` counts the times the map was cleared.
#[derive(Debug, Default)]
struct Changes {
    by_device: HashMap<PathBuf, u64>,
    resets: u64,
}

/// The agent's file system; see the module docs.
#[derive(Debug)]
pub struct KeptOpenFs {
    kept: Mutex<KeptMap>,
    capacity: usize,
    roots: Roots,
    /// Roots on a kernel file system (sysfs, procfs): their open files follow their path.
    kernel_roots: Vec<PathBuf>,
    /// [`coarse_now`] when it was made.
    epoch: Duration,
    last_sweep: AtomicU64,
    opened: AtomicU64,
    changes: Mutex<Changes>,
}

fn key(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

impl KeptOpenFs {
    /// Keeps files open under `roots`, at most `capacity` of them.
    pub fn with_capacity(roots: &Roots, capacity: usize) -> Self {
        let kernel_roots = [&roots.sysfs, &roots.procfs]
            .into_iter()
            .filter(|root| is_kernel_fs(root))
            .cloned()
            .collect();
        KeptOpenFs {
            kept: Mutex::new(KeptMap::default()),
            capacity: capacity.min(MAX_KEPT),
            roots: roots.clone(),
            kernel_roots,
            epoch: coarse_now(),
            last_sweep: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            changes: Mutex::new(Changes::default()),
        }
    }

    /// Keeps files open under `roots`, as many as half the descriptor limit (raised to its
    /// hard limit first) allows.
    pub fn new(roots: &Roots) -> Self {
        let limit = raise_nofile_limit();
        Self::with_capacity(roots, usize::try_from(limit / 2).unwrap_or(MAX_KEPT))
    }

    /// How many files it keeps open now.
    pub fn kept(&self) -> usize {
        lock(&self.kept).len()
    }

    /// How many times a file was opened (rather than re-read while kept), since start.
    #[cfg(test)]
    pub fn opened_total(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    fn now(&self) -> u64 {
        coarse_now().saturating_sub(self.epoch).as_secs()
    }

    /// Whether an open file of `path` may have stopped following it.
    fn must_check(&self, path: &Path) -> bool {
        !self.kernel_roots.iter().any(|root| path.starts_with(root))
    }

    /// The kept file of `path`, and whether its inode is due for a check.
    fn take_kept(&self, path: &Path) -> Option<(Arc<File>, bool)> {
        let now = self.now();
        let kept = lock(&self.kept);
        let entry = kept.get(key(path))?;
        entry.used.store(now, Ordering::Relaxed);
        let due =
            now.saturating_sub(entry.verified.load(Ordering::Relaxed)) >= VERIFY_EVERY.as_secs();
        Some((Arc::clone(&entry.file), due))
    }

    fn verified(&self, path: &Path) {
        if let Some(entry) = lock(&self.kept).get(key(path)) {
            entry.verified.store(self.now(), Ordering::Relaxed);
        }
    }

    /// Drops the kept file of `path`, which was found changed, and counts the change against
    /// its device.
    fn changed(&self, path: &Path) {
        lock(&self.kept).remove(key(path));
        let device = device_prefix(&self.roots, path);
        let mut changes = lock(&self.changes);
        if !changes.by_device.contains_key(device.as_ref())
            && changes.by_device.len() >= MAX_CHANGED_DEVICES
        {
            changes.by_device.clear();
            changes.resets += 1;
        }
        *changes.by_device.entry(device.into_owned()).or_insert(0) += 1;
    }

    fn keep(&self, path: &Path, file: File) {
        let now = self.now();
        let mut kept = lock(&self.kept);
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= SWEEP_EVERY.as_secs() {
            self.last_sweep.store(now, Ordering::Relaxed);
            let forget = FORGET_AFTER.as_secs();
            kept.retain(|_, k| now.saturating_sub(k.used.load(Ordering::Relaxed)) < forget);
        }
        if kept.len() < self.capacity {
            kept.insert(
                key(path).into(),
                Arc::new(Kept {
                    file: Arc::new(file),
                    used: AtomicU64::new(now),
                    verified: AtomicU64::new(now),
                }),
            );
        }
    }
}

/// Gives a map's room back once it is mostly empty (devices that came and went), so
/// memory follows what is there now, not the most there ever was.
fn shrink_sparse<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut HashMap<K, V, S>,
) {
    if map.capacity() > 4 * map.len() + 64 {
        map.shrink_to_fit();
    }
}

/// Whether `err` says that an open file no longer stands for its path.
fn is_changed(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENODEV | libc::ENOENT | libc::ESTALE | libc::EBADF)
    )
}

/// One `pread` at offset 0 of a whole attribute, lent to `f` from a buffer of the reading
/// thread. A file that cannot seek (a pipe: never in sysfs, but a test or a mirror may have
/// one) is read in sequence instead.
fn read_whole(file: &File, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    thread_local! {
        // One buffer per reading thread, so a read allocates nothing. It starts one byte
        // larger than a page, which holds any sysfs attribute (`show()` writes at most a
        // page), and grows to the largest file read ([`MAX_ATTRIBUTE_BYTES`]) only on a
        // thread that meets a larger one (a long `/proc/net/dev`, a config space).
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let max = usize::try_from(MAX_ATTRIBUTE_BYTES).unwrap_or(usize::MAX) + 1;
    BUF.with(|cell| {
        let Ok(mut buf) = cell.try_borrow_mut() else {
            // `f` read another file on this thread: it gets a buffer of its own.
            let bytes = read_in_sequence(file)?;
            f(&bytes);
            return Ok(());
        };
        if buf.is_empty() {
            buf.resize(FIRST_BUFFER.min(max), 0);
        }
        loop {
            let size = buf.len();
            let n = match pread_start(file, &mut buf[..]) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) if err.raw_os_error() == Some(libc::ESPIPE) => {
                    drop(buf);
                    let bytes = read_in_sequence(file)?;
                    f(&bytes);
                    return Ok(());
                }
                other => other?,
            };
            if n < size {
                f(&buf[..n]);
                return Ok(());
            }
            if size >= max {
                return Err(io::Error::from_raw_os_error(libc::EFBIG));
            }
            // Filled: the file may be longer. Read it again, whole, into a larger buffer.
            buf.resize(max, 0);
        }
    })
}

/// `pread(fd, buf, len, 0)` as the bare system call. glibc's `pread` is a thread
/// cancellation point and marks the thread cancellable around every call, which is a tenth
/// of the cost of re-reading a small attribute; nothing here is ever cancelled.
#[allow(unsafe_code)]
fn pread_start(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the life of `file`, and `buf` is valid for writes of
    // `buf.len()` bytes.
    let n = unsafe {
        libc::syscall(
            libc::SYS_pread64,
            file.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
            0 as libc::off_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The reading buffer's first size: a page and one byte.
const FIRST_BUFFER: usize = 4097;

fn read_in_sequence(mut file: &File) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    (&mut file)
        .take(MAX_ATTRIBUTE_BYTES + 1)
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_ATTRIBUTE_BYTES {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    Ok(buf)
}

impl Fs for KeptOpenFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_with(path, &mut |bytes| out.extend_from_slice(bytes))?;
        Ok(out)
    }

    fn read_with(&self, path: &Path, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        if let Some((file, due)) = self.take_kept(path) {
            // Outside sysfs a file can be replaced under its path; the kept one then has no
            // link left.
            let check = due && self.must_check(path);
            if check && !file.metadata().is_ok_and(|m| m.nlink() > 0) {
                self.changed(path);
            } else {
                if check {
                    self.verified(path);
                }
                match read_whole(&file, f) {
                    Ok(()) => return Ok(()),
                    Err(err) if is_changed(&err) => self.changed(path),
                    Err(err) => return Err(err),
                }
            }
        }
        let file = File::open(path)?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        read_whole(&file, f)?;
        if file.metadata().is_ok_and(|m| m.file_type().is_file()) {
            self.keep(path, file);
        }
        Ok(())
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        RealFs.read_dir(path)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        RealFs.read_link(path)
    }

    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        canonicalize(path)
    }

    fn files_kept(&self) -> Option<usize> {
        Some(self.kept())
    }

    fn keep_handle(&self, path: &Path) -> Option<KeptFile> {
        lock(&self.kept).get(key(path)).cloned().map(KeptFile)
    }

    fn read_kept(&self, path: &Path, file: &KeptFile, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let kept = &file.0;
        let now = self.now();
        kept.used.store(now, Ordering::Relaxed);
        let due =
            now.saturating_sub(kept.verified.load(Ordering::Relaxed)) >= VERIFY_EVERY.as_secs();
        if due && self.must_check(path) {
            if !kept.file.metadata().is_ok_and(|m| m.nlink() > 0) {
                self.changed(path);
                return self.read_with(path, f);
            }
            kept.verified.store(now, Ordering::Relaxed);
        }
        match read_whole(&kept.file, f) {
            Err(err) if is_changed(&err) => {
                self.changed(path);
                self.read_with(path, f)
            }
            other => other,
        }
    }

    fn release(&self, dir: &Path) {
        let mut prefix = key(dir).to_vec();
        prefix.push(b'/');
        let mut kept = lock(&self.kept);
        kept.retain(|path, _| !path.starts_with(&prefix));
        shrink_sparse(&mut kept);
        drop(kept);
        let mut changes = lock(&self.changes);
        changes.by_device.remove(dir);
        shrink_sparse(&mut changes.by_device);
    }

    fn changes(&self, device: &Path) -> u64 {
        let changes = lock(&self.changes);
        changes.resets << 32 | changes.by_device.get(device).copied().unwrap_or(0)
    }
}

/// Resolves every symlink of `path` with one path walk in the kernel: open it with `O_PATH`
/// and read the link `/proc/self/fd/<fd>`. `realpath(3)` reads each component as a link in
/// turn, a system call and a walk from the root for each (16 for a PCI function under a
/// fixture tree). Where `/proc` cannot say, `realpath(3)` it is.
fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)?;
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(real) if real.is_absolute() => Ok(real),
        _ => RealFs.canonicalize(path),
    }
}

/// Whether `path` is on sysfs or procfs.
fn is_kernel_fs(path: &Path) -> bool {
    nix_statfs_magic(path).is_some_and(|m| m == SYSFS_MAGIC || m == PROC_SUPER_MAGIC)
}

#[allow(unsafe_code)]
fn nix_statfs_magic(path: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `buf` is a properly sized, writable statfs.
    let rc = unsafe { libc::statfs(c.as_ptr(), buf.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statfs returned 0, so it filled `buf`.
    let buf = unsafe { buf.assume_init() };
    #[allow(clippy::unnecessary_cast)]
    Some(buf.f_type as i64)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (once per process) and returns the
/// soft limit in force.
#[allow(unsafe_code)]
pub fn raise_nofile_limit() -> u64 {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: `raised` is a valid rlimit no higher than the hard limit.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        lim.rlim_cur
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs_in(dir: &Path, capacity: usize) -> KeptOpenFs {
        KeptOpenFs::with_capacity(
            &Roots {
                sysfs: dir.to_path_buf(),
                procfs: PathBuf::from("/proc"),
            },
            capacity,
        )
    }

    #[test]
    fn a_kept_file_is_read_again_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state");
        std::fs::write(&file, "4: ACTIVE\n").unwrap();
        let fs = fs_in(dir.path(), 8);
        assert_eq!(fs.read(&file).unwrap(), b"4: ACTIVE\n");
        // Changed in place (as an attribute's value changes): the kept file sees it.
        std::fs::write(&file, "1: DOWN\n").unwrap();
        assert_eq!(fs.read(&file).unwrap(), b"1: DOWN\n");
        assert_eq!(fs.read(&file).unwrap(), b"1: DOWN\n");
        assert_eq!(fs.opened_total(), 1);
        assert_eq!(fs.kept(), 1);
    }

    /// Makes every kept file due for its inode check, as a second later would.
    fn a_second_passes(fs: &KeptOpenFs) {
        for k in lock(&fs.kept).values() {
            k.verified.store(0, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_replaced_or_removed_file_is_not_read_through_its_old_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("class/infiniband/mlx5_0");
        std::fs::create_dir_all(device.join("ports/1")).unwrap();
        let file = device.join("ports/1/rate");
        std::fs::write(&file, "400 Gb/sec (4X NDR)\n").unwrap();
        let fs = KeptOpenFs {
            epoch: coarse_now().checked_sub(Duration::from_secs(5)).unwrap(),
            ..fs_in(dir.path(), 8)
        };
        fs.read(&file).unwrap();
        assert_eq!(fs.changes(&device), 0);
        let tmp = dir.path().join("rate.new");
        std::fs::write(&tmp, "200 Gb/sec (2X NDR)\n").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        a_second_passes(&fs);
        assert_eq!(fs.read(&file).unwrap(), b"200 Gb/sec (2X NDR)\n");
        assert_eq!(
            fs.changes(&device),
            1,
            "the change is counted against its device"
        );
        assert_eq!(fs.changes(&dir.path().join("class/infiniband/mlx5_1")), 0);
        std::fs::remove_file(&file).unwrap();
        a_second_passes(&fs);
        assert_eq!(fs.read(&file).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(fs.kept(), 0, "the removed file is forgotten");
        assert_eq!(fs.changes(&device), 2);
    }

    fn read_through(fs: &KeptOpenFs, path: &Path, file: &KeptFile) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        fs.read_kept(path, file, &mut |b| out.extend_from_slice(b))?;
        Ok(out)
    }

    /// A reader that holds the kept file reads through it, without a look-up by path, and
    /// under the same rules: a replaced file is read from its path again, and a removed one
    /// fails as its path does.
    #[test]
    fn a_held_kept_file_reads_without_a_look_up_and_follows_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let device = dir.path().join("class/infiniband/mlx5_0");
        std::fs::create_dir_all(device.join("ports/1/counters")).unwrap();
        let file = device.join("ports/1/counters/symbol_error");
        std::fs::write(&file, "3\n").unwrap();
        let fs = KeptOpenFs {
            epoch: coarse_now().checked_sub(Duration::from_secs(5)).unwrap(),
            ..fs_in(dir.path(), 8)
        };
        assert!(fs.keep_handle(&file).is_none(), "not read yet");
        fs.read(&file).unwrap();
        let held = fs.keep_handle(&file).unwrap();
        std::fs::write(&file, "4\n").unwrap();
        assert_eq!(read_through(&fs, &file, &held).unwrap(), b"4\n");
        // Forgotten by the map (as a release or a sweep does): the holder still reads it.
        lock(&fs.kept).clear();
        assert_eq!(read_through(&fs, &file, &held).unwrap(), b"4\n");
        assert_eq!(fs.opened_total(), 1);
        // Replaced under its path: once its check is due, the path is opened again.
        let tmp = dir.path().join("new");
        std::fs::write(&tmp, "9\n").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        held.0.verified.store(0, Ordering::Relaxed);
        assert_eq!(read_through(&fs, &file, &held).unwrap(), b"9\n");
        assert_eq!(fs.changes(&device), 1);
        assert_eq!(fs.opened_total(), 2);
        // Removed: the read fails as a read of the path does.
        std::fs::remove_file(&file).unwrap();
        held.0.verified.store(0, Ordering::Relaxed);
        assert_eq!(
            read_through(&fs, &file, &held).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // A file system that keeps nothing has no handle to give.
        assert!(RealFs.keep_handle(&file).is_none());
    }

    #[test]
    fn a_kept_file_is_checked_for_replacement_once_a_second() {
        let dir = tempfile::tempdir().unwrap();
        // The epoch a while back, so "a second later" is a time the clock has reached.
        let file = dir.path().join("fw_ver");
        std::fs::write(&file, "28.39.1002\n").unwrap();
        let fs = KeptOpenFs {
            epoch: coarse_now().checked_sub(Duration::from_secs(5)).unwrap(),
            ..fs_in(dir.path(), 8)
        };
        fs.read(&file).unwrap();
        let tmp = dir.path().join("fw_ver.new");
        std::fs::write(&tmp, "28.40.1000\n").unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        // Checked just now: the old descriptor still answers.
        for k in lock(&fs.kept).values() {
            k.verified.store(u64::MAX, Ordering::Relaxed);
        }
        assert_eq!(fs.read(&file).unwrap(), b"28.39.1002\n");
        a_second_passes(&fs);
        assert_eq!(fs.read(&file).unwrap(), b"28.40.1000\n");
    }

    #[test]
    fn files_under_a_released_directory_are_closed() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["veth1", "veth10"] {
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("mtu"), "1500\n").unwrap();
        }
        let fs = fs_in(dir.path(), 8);
        fs.read(&dir.path().join("veth1/mtu")).unwrap();
        fs.read(&dir.path().join("veth10/mtu")).unwrap();
        fs.release(&dir.path().join("veth1"));
        assert_eq!(fs.kept(), 1, "veth10's file is not under veth1");
        assert!(lock(&fs.kept).contains_key(key(&dir.path().join("veth10/mtu"))));
    }

    #[test]
    fn files_past_the_capacity_are_read_but_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let fs = fs_in(dir.path(), 2);
        for i in 0..5 {
            let file = dir.path().join(format!("f{i}"));
            std::fs::write(&file, format!("{i}\n")).unwrap();
            assert_eq!(fs.read(&file).unwrap(), format!("{i}\n").into_bytes());
        }
        assert_eq!(fs.kept(), 2);
    }

    #[test]
    fn files_not_read_for_a_while_are_closed() {
        let dir = tempfile::tempdir().unwrap();
        // A file system whose clock reads well past FORGET_AFTER.
        let fs = KeptOpenFs {
            epoch: coarse_now()
                .checked_sub(FORGET_AFTER + SWEEP_EVERY)
                .expect("the monotonic clock runs longer than three minutes"),
            ..fs_in(dir.path(), 8)
        };
        let old = dir.path().join("old");
        std::fs::write(&old, "1\n").unwrap();
        fs.read(&old).unwrap();
        // Last read at the epoch, and no sweep since: the next file kept sweeps it away.
        for k in lock(&fs.kept).values() {
            k.used.store(0, Ordering::Relaxed);
        }
        fs.last_sweep.store(0, Ordering::Relaxed);
        let new = dir.path().join("new");
        std::fs::write(&new, "2\n").unwrap();
        fs.read(&new).unwrap();
        assert_eq!(fs.kept(), 1, "only the file read lately is kept");
        assert!(lock(&fs.kept).contains_key(key(&new)));
    }

    #[test]
    fn a_file_longer_than_a_page_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dev");
        let text: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(&file, &text).unwrap();
        let fs = fs_in(dir.path(), 8);
        assert_eq!(fs.read(&file).unwrap(), text);
        // Kept, and read whole again through the grown buffer.
        assert_eq!(fs.read(&file).unwrap(), text);
        assert_eq!(fs.opened_total(), 1);
    }

    #[test]
    fn a_file_that_fills_the_buffer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        std::fs::write(&file, vec![b'x'; MAX_ATTRIBUTE_BYTES as usize + 10]).unwrap();
        let fs = fs_in(dir.path(), 8);
        assert_eq!(
            fs.read(&file).unwrap_err().raw_os_error(),
            Some(libc::EFBIG)
        );
    }

    #[test]
    fn paths_resolve_as_realpath_resolves_them() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir
            .path()
            .join("devices/pci0000:00/0000:00:01.0/0000:18:00.0");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(dir.path().join("bus/pci/devices")).unwrap();
        let link = dir.path().join("bus/pci/devices/0000:18:00.0");
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:01.0/0000:18:00.0",
            &link,
        )
        .unwrap();
        assert_eq!(
            canonicalize(&link).unwrap(),
            std::fs::canonicalize(&link).unwrap()
        );
        assert_eq!(
            canonicalize(&dir.path().join("bus/pci/devices/0000:19:00.0"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn proc_is_a_kernel_file_system() {
        assert!(is_kernel_fs(Path::new("/proc")));
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_kernel_fs(dir.path()));
        assert!(raise_nofile_limit() >= 64);
    }
}
