//! A file system that does not let one wedged device hold up a collection.
//!
//! A sysfs read can block in the kernel for as long as the driver behind it is stuck (a
//! firmware command that never completes, a device in error recovery). The thread that made
//! the read cannot be interrupted. [`GuardedFs`] therefore runs every operation on a small pool
//! of worker threads and waits for it only as long as the collection's deadline allows. An
//! operation that does not return in time fails with [`io::ErrorKind::TimedOut`], and the
//! *device* it belongs to (`class/infiniband/mlx5_0`, `bus/pci/devices/0000:17:00.0`, a PCI
//! function under `devices/`) is marked blocked: every later operation under that device fails
//! at once with [`io::ErrorKind::ResourceBusy`] until the blocked operation returns. So:
//!
//! * the rest of the node is still read and exported in the same scrape;
//! * a blocked device holds exactly one thread, however many scrapes come, and the number of
//!   blocked devices is capped ([`MAX_BLOCKED`]);
//! * the device comes back by itself in the first collection after its read returns.
//!
//! The wait for one operation is half the time left until the deadline the agent set for the
//! current thread with [`with_deadline`] (at least [`MIN_WAIT`]), so several devices blocking
//! in one collection still leave time for the rest. Operations on threads without a deadline
//! wait [`DEFAULT_WAIT`].

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::fs::{DirEntry, Fs, Roots};

/// The shortest wait for one operation, even when the deadline has passed.
pub const MIN_WAIT: Duration = Duration::from_millis(50);
/// The wait for one operation on a thread without a deadline.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(2);
/// The most devices that may be blocked at once. Past this, operations on devices that are not
/// yet blocked fail at once too, so blocked threads stay bounded.
pub const MAX_BLOCKED: usize = 32;
/// How long an idle worker thread lives.
const IDLE_LIFETIME: Duration = Duration::from_secs(60);

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with `deadline` as the deadline of every [`GuardedFs`] operation it makes on this
/// thread.
pub fn with_deadline<R>(deadline: Instant, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEADLINE.with(|d| d.replace(Some(deadline))));
    f()
}

fn wait_now() -> Duration {
    match DEADLINE.with(Cell::get) {
        Some(deadline) => (deadline.saturating_duration_since(Instant::now()) / 2).max(MIN_WAIT),
        None => DEFAULT_WAIT,
    }
}

/// Why a [`GuardedFs`] operation failed without an errno.
#[derive(Debug)]
pub enum Blocked {
    /// This operation did not return in time; its device is now blocked.
    TimedOut {
        /// How long the operation was waited for.
        waited: Duration,
    },
    /// An earlier operation on the same device has not returned; this one was not tried.
    DeviceBlocked {
        /// The blocked device's directory.
        device: PathBuf,
        /// Since when it has been blocked.
        for_: Duration,
    },
    /// Too many devices are blocked; this one was not tried.
    TooManyBlocked,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::TimedOut { waited } => write!(
                f,
                "the read did not return within {:.3}s; the device is skipped until it does",
                waited.as_secs_f64()
            ),
            Blocked::DeviceBlocked { device, for_ } => write!(
                f,
                "skipped: a read under {} has been blocked for {:.1}s",
                device.display(),
                for_.as_secs_f64()
            ),
            Blocked::TooManyBlocked => write!(
                f,
                "skipped: {MAX_BLOCKED} devices already have a blocked read"
            ),
        }
    }
}

impl std::error::Error for Blocked {}

/// Whether `err` is a [`GuardedFs`] skip: the operation was not tried because its device is
/// blocked (the first, timed-out operation is not a skip).
pub fn is_skipped(err: &io::Error) -> bool {
    matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<Blocked>()),
        Some(Blocked::DeviceBlocked { .. } | Blocked::TooManyBlocked)
    )
}

/// Whether `err` is a [`GuardedFs`] timeout.
pub fn is_timed_out(err: &io::Error) -> bool {
    matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<Blocked>()),
        Some(Blocked::TimedOut { .. })
    )
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

#[derive(Debug)]
struct Entry {
    job: u64,
    path: PathBuf,
    since: Instant,
}

/// A [`Fs`] whose operations give up at the collection's deadline; see the module docs.
#[derive(Debug)]
pub struct GuardedFs {
    inner: Arc<dyn Fs>,
    roots: Roots,
    pool: Arc<Pool>,
    blocked: Arc<Mutex<HashMap<PathBuf, Entry>>>,
    next_job: AtomicU64,
    timeouts: AtomicU64,
}

impl GuardedFs {
    /// Guards `inner`, whose paths are under `roots`.
    pub fn new(inner: Arc<dyn Fs>, roots: Roots) -> Self {
        GuardedFs {
            inner,
            roots,
            pool: Arc::new(Pool::default()),
            blocked: Arc::new(Mutex::new(HashMap::new())),
            next_job: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    /// The devices that have a blocked operation now.
    pub fn blocked(&self) -> Vec<BlockedDevice> {
        let now = Instant::now();
        let mut out: Vec<BlockedDevice> = lock(&self.blocked)
            .iter()
            .map(|(device, entry)| BlockedDevice {
                device: self.relative(device),
                path: entry.path.clone(),
                blocked_for: now.saturating_duration_since(entry.since),
            })
            .collect();
        out.sort_by(|a, b| a.device.cmp(&b.device));
        out
    }

    /// Operations that did not return in time, since start.
    pub fn timeouts_total(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Worker threads alive now, blocked ones included.
    pub fn threads(&self) -> usize {
        lock(&self.pool.state).threads
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

    fn run<T: Send + 'static>(
        &self,
        path: &Path,
        op: impl FnOnce(&dyn Fs, &Path) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let device = self.device_of(path);
        {
            let blocked = lock(&self.blocked);
            if let Some(entry) = blocked.get(&device) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    Blocked::DeviceBlocked {
                        device: PathBuf::from(self.relative(&device)),
                        for_: entry.since.elapsed(),
                    },
                ));
            }
            if blocked.len() >= MAX_BLOCKED {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    Blocked::TooManyBlocked,
                ));
            }
        }
        let wait = wait_now();
        let job = self.next_job.fetch_add(1, Ordering::Relaxed);
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel(1);
        let inner = Arc::clone(&self.inner);
        let owned = path.to_path_buf();
        let blocked = Arc::clone(&self.blocked);
        let key = device.clone();
        let finished = Arc::clone(&done);
        self.pool.submit(Box::new(move || {
            let result = op(inner.as_ref(), &owned);
            {
                let mut blocked = lock(&blocked);
                finished.store(true, Ordering::Release);
                if blocked.get(&key).is_some_and(|e| e.job == job) {
                    blocked.remove(&key);
                }
            }
            let _ = tx.send(result);
        }));
        match rx.recv_timeout(wait) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::other(
                "the read's worker thread ended without an answer",
            )),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let mut blocked = lock(&self.blocked);
                if done.load(Ordering::Acquire) {
                    drop(blocked);
                    return rx.recv().unwrap_or_else(|_| {
                        Err(io::Error::other(
                            "the read's worker thread ended without an answer",
                        ))
                    });
                }
                blocked.insert(
                    device,
                    Entry {
                        job,
                        path: path.to_path_buf(),
                        since: Instant::now() - wait,
                    },
                );
                drop(blocked);
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    Blocked::TimedOut { waited: wait },
                ))
            }
        }
    }
}

impl Fs for GuardedFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.run(path, |fs, p| fs.read(p))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.run(path, |fs, p| fs.read_dir(p))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.run(path, |fs, p| fs.read_link(p))
    }

    fn exists(&self, path: &Path) -> bool {
        self.run(path, |fs, p| Ok(fs.exists(p))).unwrap_or(false)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.run(path, |fs, p| fs.canonicalize(p))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Class directories whose entries are devices, under `class/` and inside `devices/` paths.
const DEVICE_CLASSES: &[&str] = &["infiniband", "infiniband_verbs", "net", "nvme", "hwmon"];

fn is_pci_address(name: &str) -> bool {
    // 0000:17:00.0
    let b = name.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The directory of the device `path` belongs to: `class/<class>/<name>`,
/// `bus/<bus>/devices/<name>`, or under `devices/` the class entry or the deepest PCI function.
/// Paths under procfs map to their first two components; other paths to their parent.
pub fn device_key(roots: &Roots, path: &Path) -> PathBuf {
    let (root, rel) = if let Ok(rel) = path.strip_prefix(&roots.sysfs) {
        (&roots.sysfs, rel)
    } else if let Ok(rel) = path.strip_prefix(&roots.procfs) {
        let parts: Vec<_> = normal(rel).take(2).collect();
        return parts.iter().fold(roots.procfs.clone(), |p, c| p.join(c));
    } else {
        return path.parent().unwrap_or(path).to_path_buf();
    };
    let parts: Vec<&str> = normal(rel).collect();
    let take = match parts.first().copied() {
        Some("class") => 3,
        Some("bus") if parts.get(2) == Some(&"devices") => 4,
        Some("devices") => {
            let class = parts
                .iter()
                .position(|p| DEVICE_CLASSES.contains(p))
                .filter(|&i| i + 1 < parts.len());
            match class {
                Some(i) => i + 2,
                None => parts
                    .iter()
                    .rposition(|p| is_pci_address(p))
                    .map_or(2, |i| i + 1),
            }
        }
        _ => 3,
    };
    parts.iter().take(take).fold(root.clone(), |p, c| p.join(c))
}

fn normal(path: &Path) -> impl Iterator<Item = &str> {
    path.components().filter_map(|c| match c {
        Component::Normal(s) => s.to_str(),
        _ => None,
    })
}

type Job = Box<dyn FnOnce() + Send>;

/// Worker threads that run operations; a thread is added whenever none is idle, and an idle one
/// ends after [`IDLE_LIFETIME`].
#[derive(Debug, Default)]
struct Pool {
    state: Mutex<PoolState>,
    ready: Condvar,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    idle: usize,
    threads: usize,
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolState")
            .field("queued", &self.queue.len())
            .field("idle", &self.idle)
            .field("threads", &self.threads)
            .finish()
    }
}

impl Pool {
    fn submit(self: &Arc<Self>, job: Job) {
        let mut state = lock(&self.state);
        state.queue.push_back(job);
        if state.idle >= state.queue.len() {
            self.ready.notify_one();
            return;
        }
        state.threads += 1;
        drop(state);
        let pool = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("railscope-fs".into())
            .spawn(move || pool.work());
        if spawned.is_err() {
            // No thread to be had: run queued jobs here rather than lose them.
            let mut state = lock(&self.state);
            state.threads -= 1;
            let jobs: Vec<Job> = state.queue.drain(..).collect();
            drop(state);
            for job in jobs {
                job();
            }
        }
    }

    fn work(&self) {
        let mut state = lock(&self.state);
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job();
                state = lock(&self.state);
                continue;
            }
            state.idle += 1;
            let (next, timeout) = self
                .ready
                .wait_timeout(state, IDLE_LIFETIME)
                .unwrap_or_else(|e| e.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                state.threads -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use std::sync::atomic::AtomicUsize;

    /// A file system whose reads of one path block until released.
    #[derive(Debug, Default)]
    struct Gate {
        path: PathBuf,
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
            if path == self.path {
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

    #[test]
    fn device_keys() {
        let r = roots();
        let key = |p: &str| device_key(&r, Path::new(p)).display().to_string();
        assert_eq!(
            key("/s/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"),
            "/s/class/infiniband/mlx5_0"
        );
        assert_eq!(key("/s/class/infiniband"), "/s/class/infiniband");
        assert_eq!(
            key("/s/bus/pci/devices/0000:17:00.0/current_link_speed"),
            "/s/bus/pci/devices/0000:17:00.0"
        );
        assert_eq!(
            key("/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/infiniband/mlx5_0/ports/1/state"),
            "/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/infiniband/mlx5_0"
        );
        assert_eq!(
            key("/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0/aer_dev_correctable"),
            "/s/devices/pci0000:16/0000:16:01.0/0000:17:00.0"
        );
        assert_eq!(
            key("/s/devices/system/node/node0/cpulist"),
            "/s/devices/system"
        );
        assert_eq!(key("/p/net/dev"), "/p/net/dev");
        assert_eq!(key("/elsewhere/file"), "/elsewhere");
    }

    #[test]
    fn a_blocked_read_skips_its_device_until_it_returns() {
        let gate = Arc::new(Gate {
            path: PathBuf::from("/s/class/infiniband/mlx5_1/ports/1/state"),
            ..Gate::default()
        });
        let fs = GuardedFs::new(gate.clone(), roots());
        let deadline = Instant::now() + Duration::from_millis(400);
        with_deadline(deadline, || {
            let err = fs.read(&gate.path).unwrap_err();
            assert!(is_timed_out(&err), "{err}");
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            // The same device is skipped without trying ...
            let err = fs
                .read(Path::new("/s/class/infiniband/mlx5_1/ports/1/rate"))
                .unwrap_err();
            assert!(is_skipped(&err), "{err}");
            // ... every other device is read.
            assert_eq!(
                fs.read(Path::new("/s/class/infiniband/mlx5_0/ports/1/rate"))
                    .unwrap(),
                b"/s/class/infiniband/mlx5_0/ports/1/rate"
            );
        });
        // Repeated collections do not start another blocked read.
        for _ in 0..20 {
            with_deadline(Instant::now() + Duration::from_millis(100), || {
                assert!(fs.read(&gate.path).is_err());
            });
        }
        assert_eq!(gate.entered.load(Ordering::SeqCst), 1);
        assert_eq!(fs.timeouts_total(), 1);
        let blocked = fs.blocked();
        assert_eq!(blocked.len(), 1);
        assert_eq!(blocked[0].device, "class/infiniband/mlx5_1");
        assert!(fs.threads() <= 3, "threads: {}", fs.threads());

        gate.release();
        let until = Instant::now() + Duration::from_secs(5);
        while !fs.blocked().is_empty() {
            assert!(Instant::now() < until, "the device never came back");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(fs.read(&gate.path).unwrap(), b"late\n");
    }

    #[test]
    fn errors_pass_through_and_threads_are_reused() {
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
        for _ in 0..200 {
            assert_eq!(fs.read(&file).unwrap(), b"1\n");
        }
        let err = fs.read(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!is_skipped(&err) && !is_timed_out(&err));
        assert!(fs.exists(&file));
        assert!(fs.threads() <= 2, "threads: {}", fs.threads());
    }

    #[test]
    fn blocked_devices_are_capped() {
        #[derive(Debug)]
        struct Forever;
        impl Fs for Forever {
            fn read(&self, _: &Path) -> io::Result<Vec<u8>> {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(vec![])
            }
            fn read_dir(&self, _: &Path) -> io::Result<Vec<DirEntry>> {
                Ok(vec![])
            }
            fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
                Ok(p.to_path_buf())
            }
            fn exists(&self, _: &Path) -> bool {
                true
            }
            fn canonicalize(&self, p: &Path) -> io::Result<PathBuf> {
                Ok(p.to_path_buf())
            }
        }
        let fs = GuardedFs::new(Arc::new(Forever), roots());
        with_deadline(Instant::now(), || {
            for i in 0..(MAX_BLOCKED + 10) {
                let err = fs
                    .read(Path::new(&format!("/s/class/net/eth{i}/mtu")))
                    .unwrap_err();
                if i < MAX_BLOCKED {
                    assert!(is_timed_out(&err), "{i}: {err}");
                } else {
                    assert!(is_skipped(&err), "{i}: {err}");
                }
            }
        });
        assert_eq!(fs.blocked().len(), MAX_BLOCKED);
        assert!(fs.threads() <= MAX_BLOCKED + 1);
    }
}
