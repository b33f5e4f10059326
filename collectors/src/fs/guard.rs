//! A file system that does not let one wedged device hold up a collection.
//!
//! A sysfs read can block in the kernel for as long as the driver behind it is stuck (a
//! firmware command that never completes, a device in error recovery). The thread that made
//! the read cannot be interrupted. [`GuardedFs`] lets the collection give that thread up:
//!
//! * Every unit of per-device work ([`crate::run`]) runs as an *attempt* on a worker thread.
//!   File-system operations run inline on that thread; each records what it is doing.
//! * When the runner finds a unit past its wait, it *fences* the unit's attempt
//!   (`GuardedFs::fence`): the device its current operation belongs to
//!   (`class/infiniband/mlx5_0`, `bus/pci/devices/0000:17:00.0`, a PCI function under
//!   `devices/`) is marked blocked and the attempt is abandoned.
//! * Every read of a file under a blocked device fails at once with
//!   [`io::ErrorKind::ResourceBusy`] until the blocked operation returns; so does every further
//!   operation of an abandoned attempt, which lets its thread end as soon as the kernel lets go.
//!   Listing directories, reading links and resolving paths under the device still work: in
//!   sysfs they never reach the driver (only an attribute's `show` does), so the PCI function
//!   and the rail of a blocked NIC stay known. If one of those blocks all the same (another
//!   file system), every operation under the device is refused until it returns.
//!
//! So a blocked device holds exactly one thread however many scrapes come, the number of
//! blocked devices is capped ([`MAX_BLOCKED`]), `railscope_sysfs_blocked_seconds` names the
//! path that blocked, and the device comes back by itself in the first collection after its
//! read returns. A read that does not block takes no lock the guard's other threads take: it
//! records itself in its attempt's own slot, and the guard's state is locked only while some
//! device is blocked.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
#[cfg(test)]
use std::time::Instant;

use crate::error::Blocked;
use crate::fs::base::{Roots, coarse_now, device_key, device_prefix};
use crate::fs::refused::Restricted;
use crate::fs::{DirEntry, Fs, KeptFile};

/// The most devices that may be blocked at once. Past this, operations on devices that are not
/// yet blocked fail at once too, so blocked threads stay bounded.
pub const MAX_BLOCKED: usize = 32;

/// Past this many attempts with an operation entry, the idle entries are dropped (the runner
/// drops each when its attempt finishes; this bounds attempts made without one).
const MAX_IDLE_OPS: usize = 256;

static NEXT_ATTEMPT: AtomicU64 = AtomicU64::new(1);

/// Tells guards apart in [`SLOT`].
static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static ATTEMPT: Cell<Option<u64>> = const { Cell::new(None) };
    /// The slot this thread's attempt last used: (guard, attempt, slot).
    static SLOT: RefCell<Option<(u64, u64, Arc<Slot>)>> = const { RefCell::new(None) };
}

/// A fresh attempt id, for [`with_attempt`] and [`GuardedFs::fence`].
pub(crate) fn next_attempt() -> u64 {
    NEXT_ATTEMPT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `f` as attempt `id`: the [`GuardedFs`] operations it makes on this thread can be
/// fenced off by [`GuardedFs::fence`].
pub(crate) fn with_attempt<R>(id: u64, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<u64>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ATTEMPT.with(|a| a.set(self.0));
        }
    }
    let _restore = Restore(ATTEMPT.with(|a| a.replace(Some(id))));
    f()
}

/// One device with a blocked operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedDevice {
    /// The device's directory, relative to the root it is under (`class/infiniband/mlx5_0`).
    pub device: String,
    /// The path of the operation that blocked.
    pub path: PathBuf,
    /// How long it has been blocked.
    pub blocked_for: Duration,
}

/// An attempt's place in the guard: the operation it is in, written by the attempt's thread
/// around every operation under the slot's own lock, and read by [`GuardedFs::fence`].
#[derive(Debug)]
struct Slot {
    op: Mutex<Op>,
}

/// The operation an attempt is in, if any. One per attempt, reused from operation to operation
/// (its path buffer too), so an operation allocates nothing here.
#[derive(Debug)]
struct Op {
    /// 0 between operations.
    id: u64,
    path: PathBuf,
    /// [`coarse_now`] when it started.
    started: Duration,
    /// Whether it reads a file (rather than listing, resolving or testing a path).
    read: bool,
    /// The attempt was given up: its operations fail at once.
    abandoned: bool,
    /// The slot is in the guard's state (an idle one may be dropped from it, and is then
    /// added again by its next operation).
    listed: bool,
}

impl Op {
    /// Makes operation `id` on `path` the current one.
    fn start(&mut self, id: u64, path: &Path, read: bool) {
        self.id = id;
        self.path.as_mut_os_string().clear();
        self.path.as_mut_os_string().push(path.as_os_str());
        self.started = coarse_now();
        self.read = read;
    }
}

#[derive(Debug)]
struct Entry {
    op: u64,
    path: PathBuf,
    /// [`coarse_now`] when it started.
    since: Duration,
}

#[derive(Debug, Default)]
struct State {
    /// The slot of each attempt that has made an operation and not finished.
    ops: HashMap<u64, Arc<Slot>>,
    /// Blocked devices, by directory and whether the blocked operation was a file read
    /// (`true`: only reads are refused) or not (`false`: everything is).
    blocked: HashMap<(PathBuf, bool), Entry>,
    /// Attempts given up whose thread has not returned.
    abandoned: HashSet<u64>,
}

/// A [`Fs`] that lets the agent give up a collection blocked in one device; see the module
/// docs.
#[derive(Debug)]
pub struct GuardedFs {
    inner: Arc<dyn Fs>,
    roots: Roots,
    state: Mutex<State>,
    /// How many devices are blocked (`state.blocked.len()`), read without the lock.
    blocked_len: AtomicUsize,
    /// This guard, in [`SLOT`].
    instance: u64,
    next_op: AtomicU64,
    timeouts: AtomicU64,
    /// Files that refused reads, backing off ([`crate::fs::refused`]).
    restricted: Restricted,
}

impl GuardedFs {
    /// Guards `inner`, whose paths are under `roots`.
    pub fn new(inner: Arc<dyn Fs>, roots: Roots) -> Self {
        GuardedFs {
            inner,
            roots,
            state: Mutex::new(State::default()),
            blocked_len: AtomicUsize::new(0),
            instance: NEXT_GUARD.fetch_add(1, Ordering::Relaxed),
            next_op: AtomicU64::new(1),
            timeouts: AtomicU64::new(0),
            restricted: Restricted::default(),
        }
    }

    /// How long a file that refused reads is left unread at first (`crate::fs::refused`).
    pub fn set_refused_backoff(&self, first: Duration) {
        self.restricted.set_first_backoff(first);
    }

    /// How many files refused reads and are backing off now.
    pub fn refused_files(&self) -> usize {
        self.restricted.len()
    }

    /// A file read, unless the file refused reads before and backs off
    /// ([`crate::fs::refused`]).
    fn read_file<T>(
        &self,
        path: &Path,
        op: impl FnOnce(&dyn Fs, &Path) -> io::Result<T>,
    ) -> io::Result<T> {
        let check = self.restricted.check(path)?;
        let result = self.run(path, true, op);
        match self.restricted.after(path, check, result.as_ref().err()) {
            Some(refused) => Err(refused),
            None => result,
        }
    }

    /// Ends the back-off of every file that refused reads (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn expire_refusals(&self) {
        self.restricted.expire();
    }

    /// The devices that have a blocked operation now.
    pub fn blocked(&self) -> Vec<BlockedDevice> {
        let now = coarse_now();
        let state = lock(&self.state);
        // The longest-blocked operation of each device.
        let mut by_device: HashMap<&PathBuf, &Entry> = HashMap::new();
        for ((device, _), entry) in &state.blocked {
            let oldest = by_device.entry(device).or_insert(entry);
            if entry.since < oldest.since {
                *oldest = entry;
            }
        }
        let mut out: Vec<BlockedDevice> = by_device
            .into_iter()
            .map(|(device, entry)| BlockedDevice {
                device: self.relative(device),
                path: entry.path.clone(),
                blocked_for: now.saturating_sub(entry.since),
            })
            .collect();
        out.sort_by(|a, b| a.device.cmp(&b.device));
        out
    }

    /// Operations that did not return in time, since start.
    pub fn timeouts_total(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Abandoned attempts whose thread is still blocked.
    pub fn abandoned(&self) -> usize {
        lock(&self.state).abandoned.len()
    }

    /// Gives attempt `id` up: its further operations fail at once. If it is inside an
    /// operation now, that operation's device is marked blocked (its reads fail at once until
    /// the operation returns), the timeout is counted, and the blocked device is returned.
    pub(crate) fn fence(&self, id: u64) -> Option<BlockedDevice> {
        let now = coarse_now();
        let mut state = lock(&self.state);
        state.abandoned.insert(id);
        let slot = Arc::clone(state.ops.get(&id)?);
        let (op_id, path, started, read) = {
            let mut op = lock(&slot.op);
            op.abandoned = true;
            if op.id == 0 {
                return None;
            }
            (op.id, op.path.clone(), op.started, op.read)
        };
        let device = self.device_of(&path);
        let key = (device.clone(), read);
        if state.blocked.len() < MAX_BLOCKED || state.blocked.contains_key(&key) {
            state.blocked.entry(key).or_insert(Entry {
                op: op_id,
                path: path.clone(),
                since: started,
            });
        }
        self.blocked_len
            .store(state.blocked.len(), Ordering::Release);
        drop(state);
        self.timeouts.fetch_add(1, Ordering::Relaxed);
        Some(BlockedDevice {
            device: self.relative(&device),
            path,
            blocked_for: now.saturating_sub(started),
        })
    }

    /// Forgets attempt `id` once its thread has returned.
    pub(crate) fn finish_attempt(&self, id: u64) {
        let mut state = lock(&self.state);
        state.abandoned.remove(&id);
        if let Some(slot) = state.ops.remove(&id) {
            lock(&slot.op).listed = false;
        }
    }

    fn relative(&self, device: &Path) -> String {
        device
            .strip_prefix(&self.roots.sysfs)
            .or_else(|_| device.strip_prefix(&self.roots.procfs))
            .unwrap_or(device)
            .display()
            .to_string()
    }

    /// The directory of the device `path` belongs to.
    pub fn device_of(&self, path: &Path) -> PathBuf {
        device_key(&self.roots, path)
    }

    fn run<T>(
        &self,
        path: &Path,
        read: bool,
        op: impl FnOnce(&dyn Fs, &Path) -> io::Result<T>,
    ) -> io::Result<T> {
        let attempt = ATTEMPT.with(Cell::get);
        let op_id = self.next_op.fetch_add(1, Ordering::Relaxed);
        if self.blocked_len.load(Ordering::Acquire) > 0 {
            let state = lock(&self.state);
            if let Some(why) = self.refused(&state, path, read) {
                return Err(skip(why));
            }
        }
        let slot = match attempt {
            Some(id) => Some(self.begin(id, op_id, path, read)?),
            None => None,
        };
        let result = op(self.inner.as_ref(), path);
        let mut abandoned = false;
        if let Some(slot) = &slot {
            let mut current = lock(&slot.op);
            if current.id == op_id {
                current.id = 0;
            }
            abandoned = current.abandoned;
        }
        if self.blocked_len.load(Ordering::Acquire) > 0 {
            let mut state = lock(&self.state);
            let key = (self.device_of(path), read);
            if state.blocked.get(&key).is_some_and(|e| e.op == op_id) {
                state.blocked.remove(&key);
                self.blocked_len
                    .store(state.blocked.len(), Ordering::Release);
            }
        }
        if abandoned {
            // Too late: the agent has moved on without this answer.
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                Blocked::TimedOut {
                    waited: Duration::ZERO,
                },
            ));
        }
        result
    }

    /// Records operation `op_id` of attempt `id` in the attempt's slot, unless the attempt was
    /// given up. The slot this thread used last is taken without the guard's lock.
    fn begin(&self, id: u64, op_id: u64, path: &Path, read: bool) -> io::Result<Arc<Slot>> {
        let cached = SLOT.with(|cell| match &*cell.borrow() {
            Some((guard, attempt, slot)) if *guard == self.instance && *attempt == id => {
                Some(Arc::clone(slot))
            }
            _ => None,
        });
        if let Some(slot) = cached {
            let mut current = lock(&slot.op);
            if current.abandoned {
                return Err(skip(Blocked::Abandoned));
            }
            if current.listed {
                current.start(op_id, path, read);
                drop(current);
                return Ok(slot);
            }
        }
        let mut state = lock(&self.state);
        if state.abandoned.contains(&id) {
            return Err(skip(Blocked::Abandoned));
        }
        if state.ops.len() >= MAX_IDLE_OPS && !state.ops.contains_key(&id) {
            // Attempts run outside a runner that finishes them: drop the idle ones.
            state.ops.retain(|_, slot| {
                let mut op = lock(&slot.op);
                op.listed = op.id != 0;
                op.listed
            });
        }
        let slot = Arc::clone(state.ops.entry(id).or_insert_with(|| {
            Arc::new(Slot {
                op: Mutex::new(Op {
                    id: 0,
                    path: PathBuf::new(),
                    started: Duration::ZERO,
                    read,
                    abandoned: false,
                    listed: true,
                }),
            })
        }));
        {
            let mut current = lock(&slot.op);
            current.listed = true;
            current.start(op_id, path, read);
        }
        drop(state);
        SLOT.with(|cell| *cell.borrow_mut() = Some((self.instance, id, Arc::clone(&slot))));
        Ok(slot)
    }

    /// Why an operation on `path` must fail at once, with some device blocked.
    fn refused(&self, state: &State, path: &Path, read: bool) -> Option<Blocked> {
        let device = device_prefix(&self.roots, path).into_owned();
        let blocked = state
            .blocked
            .get(&(device.clone(), false))
            .or_else(|| read.then(|| state.blocked.get(&(device.clone(), true)))?);
        if let Some(entry) = blocked {
            return Some(Blocked::Device {
                device: PathBuf::from(self.relative(&device)),
                for_: coarse_now().saturating_sub(entry.since),
            });
        }
        (state.blocked.len() >= MAX_BLOCKED).then_some(Blocked::TooMany)
    }
}

fn skip(why: Blocked) -> io::Error {
    io::Error::new(io::ErrorKind::ResourceBusy, why)
}

impl Fs for GuardedFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.read_file(path, |fs, p| fs.read(p))
    }

    fn read_with(&self, path: &Path, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.read_file(path, |fs, p| fs.read_with(p, f))
    }

    fn keep_handle(&self, path: &Path) -> Option<KeptFile> {
        // A look-up, no I/O: nothing to guard.
        self.inner.keep_handle(path)
    }

    fn read_kept(&self, path: &Path, file: &KeptFile, f: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.read_file(path, |fs, p| fs.read_kept(p, file, f))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.run(path, false, |fs, p| fs.read_dir(p))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.run(path, false, |fs, p| fs.read_link(p))
    }

    fn exists(&self, path: &Path) -> bool {
        self.run(path, false, |fs, p| Ok(fs.exists(p)))
            .unwrap_or(false)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.run(path, false, |fs, p| fs.canonicalize(p))
    }

    fn files_kept(&self) -> Option<usize> {
        self.inner.files_kept()
    }

    fn changes(&self, device: &Path) -> u64 {
        self.inner.changes(device)
    }

    fn release(&self, dir: &Path) {
        self.restricted.forget_under(dir);
        self.inner.release(dir);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{is_skipped, is_timed_out};
    use crate::fs::RealFs;
    use std::sync::Condvar;
    use std::sync::atomic::AtomicUsize;

    /// A file system whose reads of paths ending in `blocking` block until released.
    #[derive(Debug, Default)]
    struct Gate {
        open: Mutex<bool>,
        cv: Condvar,
        entered: AtomicUsize,
    }

    impl Gate {
        fn release(&self) {
            *lock(&self.open) = true;
            self.cv.notify_all();
        }
    }

    impl Fs for Gate {
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            if path.ends_with("blocking") {
                self.entered.fetch_add(1, Ordering::SeqCst);
                let mut open = lock(&self.open);
                while !*open {
                    open = self.cv.wait(open).unwrap_or_else(|e| e.into_inner());
                }
                return Ok(b"late\n".to_vec());
            }
            Ok(path.display().to_string().into_bytes())
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
            if path.ends_with("blocking") {
                let mut open = lock(&self.open);
                while !*open {
                    open = self.cv.wait(open).unwrap_or_else(|e| e.into_inner());
                }
                return Ok(Vec::new());
            }
            RealFs.read_dir(path)
        }
        fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
            RealFs.read_link(path)
        }
        fn exists(&self, _: &Path) -> bool {
            true
        }
        fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
            Ok(path.to_path_buf())
        }
    }

    fn roots() -> Roots {
        Roots {
            sysfs: PathBuf::from("/s"),
            procfs: PathBuf::from("/p"),
        }
    }

    /// Starts attempt `id` reading `path` on its own thread, waits until the read is inside
    /// the file system, and fences the attempt.
    fn stall(
        fs: &Arc<GuardedFs>,
        gate: &Gate,
        path: &str,
    ) -> (std::thread::JoinHandle<io::Result<Vec<u8>>>, BlockedDevice) {
        let id = next_attempt();
        let before = gate.entered.load(Ordering::SeqCst);
        let thread = {
            let fs = Arc::clone(fs);
            let path = PathBuf::from(path);
            std::thread::spawn(move || with_attempt(id, || fs.read(&path)))
        };
        let until = Instant::now() + Duration::from_secs(10);
        while gate.entered.load(Ordering::SeqCst) == before {
            assert!(Instant::now() < until, "never entered");
            std::thread::sleep(Duration::from_millis(2));
        }
        // The gate counts the read before the guard records it as current: wait for both.
        loop {
            if lock(&fs.state)
                .ops
                .get(&id)
                .is_some_and(|slot| lock(&slot.op).id != 0)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let blocked = fs.fence(id).expect("inside a read");
        (thread, blocked)
    }

    #[test]
    fn a_blocked_read_skips_its_device_until_it_returns() {
        let gate = Arc::new(Gate::default());
        let fs = Arc::new(GuardedFs::new(gate.clone(), roots()));
        let (thread, blocked) = stall(&fs, &gate, "/s/class/infiniband/mlx5_1/ports/1/blocking");
        assert_eq!(blocked.device, "class/infiniband/mlx5_1");
        assert_eq!(
            blocked.path,
            Path::new("/s/class/infiniband/mlx5_1/ports/1/blocking")
        );
        // A fresh attempt skips the blocked device without trying and reads every other one.
        with_attempt(next_attempt(), || {
            let err = fs
                .read(Path::new("/s/class/infiniband/mlx5_1/ports/1/blocking"))
                .unwrap_err();
            assert!(is_skipped(&err), "{err}");
            assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
            assert!(is_skipped(
                &fs.read(Path::new("/s/class/infiniband/mlx5_1/ports/1/rate"))
                    .unwrap_err()
            ));
            // Links and paths under it still resolve: in sysfs they never reach the driver.
            assert_eq!(
                fs.canonicalize(Path::new("/s/class/infiniband/mlx5_1/device"))
                    .unwrap(),
                Path::new("/s/class/infiniband/mlx5_1/device")
            );
            assert!(fs.exists(Path::new("/s/class/infiniband/mlx5_1/ports")));
            assert_eq!(
                fs.read(Path::new("/s/class/infiniband/mlx5_0/ports/1/rate"))
                    .unwrap(),
                b"/s/class/infiniband/mlx5_0/ports/1/rate"
            );
        });
        assert_eq!(gate.entered.load(Ordering::SeqCst), 1);
        assert_eq!(fs.timeouts_total(), 1);
        assert_eq!(fs.abandoned(), 1);
        assert_eq!(fs.blocked().len(), 1);

        gate.release();
        // The abandoned attempt's answer is too late: it gets a timeout, not the value.
        let late = thread.join().unwrap().unwrap_err();
        assert!(is_timed_out(&late), "{late}");
        assert!(fs.blocked().is_empty(), "the device is back");
        with_attempt(next_attempt(), || {
            assert_eq!(
                fs.read(Path::new("/s/class/infiniband/mlx5_1/ports/1/blocking"))
                    .unwrap(),
                b"late\n"
            );
        });
    }

    #[test]
    fn a_blocked_listing_refuses_everything_under_its_device() {
        let gate = Arc::new(Gate::default());
        let fs = Arc::new(GuardedFs::new(gate.clone(), roots()));
        let id = next_attempt();
        let thread = {
            let fs = Arc::clone(&fs);
            std::thread::spawn(move || {
                with_attempt(id, || fs.read_dir(Path::new("/s/class/net/eth0/blocking")))
            })
        };
        let until = Instant::now() + Duration::from_secs(10);
        while !lock(&fs.state).ops.contains_key(&id) {
            assert!(Instant::now() < until, "never entered");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(fs.fence(id).is_some());
        with_attempt(next_attempt(), || {
            for err in [
                fs.read_dir(Path::new("/s/class/net/eth0/queues"))
                    .unwrap_err(),
                fs.canonicalize(Path::new("/s/class/net/eth0/device"))
                    .unwrap_err(),
                fs.read(Path::new("/s/class/net/eth0/mtu")).unwrap_err(),
            ] {
                assert!(is_skipped(&err), "{err}");
            }
            assert!(!fs.exists(Path::new("/s/class/net/eth0/mtu")));
            assert!(fs.read(Path::new("/s/class/net/eth1/mtu")).is_ok());
        });
        gate.release();
        assert!(thread.join().unwrap().is_err(), "abandoned: too late");
        assert!(fs.blocked().is_empty());
    }

    #[test]
    fn fencing_an_attempt_outside_any_operation_blocks_no_device() {
        let fs = GuardedFs::new(Arc::new(Gate::default()), roots());
        let id = next_attempt();
        assert!(fs.fence(id).is_none());
        assert!(fs.blocked().is_empty());
        assert_eq!(fs.timeouts_total(), 0);
        with_attempt(id, || {
            assert!(is_skipped(
                &fs.read(Path::new("/s/class/net/eth0/mtu")).unwrap_err()
            ));
        });
    }

    #[test]
    fn an_abandoned_attempt_reads_nothing_more() {
        let fs = GuardedFs::new(Arc::new(Gate::default()), roots());
        let id = next_attempt();
        lock(&fs.state).abandoned.insert(id);
        with_attempt(id, || {
            let err = fs.read(Path::new("/s/class/net/eth0/mtu")).unwrap_err();
            assert!(is_skipped(&err), "{err}");
        });
        fs.finish_attempt(id);
        assert_eq!(fs.abandoned(), 0);
    }

    #[test]
    fn operations_outside_attempts_and_errors_pass_through() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "1\n").unwrap();
        let fs = GuardedFs::new(
            Arc::new(RealFs),
            Roots {
                sysfs: dir.path().to_path_buf(),
                procfs: PathBuf::from("/proc"),
            },
        );
        assert_eq!(fs.read(&file).unwrap(), b"1\n");
        with_attempt(next_attempt(), || {
            assert_eq!(fs.read(&file).unwrap(), b"1\n");
            let err = fs.read(&dir.path().join("missing")).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::NotFound);
            assert!(!is_skipped(&err) && !is_timed_out(&err));
            assert!(fs.exists(&file));
        });
        assert!(
            lock(&fs.state)
                .ops
                .values()
                .all(|slot| lock(&slot.op).id == 0),
            "finished operations are not current"
        );
    }

    #[test]
    fn blocked_devices_are_capped() {
        let gate = Arc::new(Gate::default());
        let fs = Arc::new(GuardedFs::new(gate.clone(), roots()));
        let mut threads = Vec::new();
        for i in 0..MAX_BLOCKED {
            let (thread, _) = stall(&fs, &gate, &format!("/s/class/net/eth{i}/blocking"));
            threads.push(thread);
        }
        assert_eq!(fs.blocked().len(), MAX_BLOCKED);
        with_attempt(next_attempt(), || {
            let err = fs.read(Path::new("/s/class/net/other/mtu")).unwrap_err();
            assert!(is_skipped(&err), "{err}");
        });
        gate.release();
        for thread in threads {
            assert!(thread.join().unwrap().is_err());
        }
        assert!(fs.blocked().is_empty());
    }
}
