//! Attributes the driver refuses: remembered, and not read again for a while.
//!
//! Some attributes fail on every read, by design of the device rather than by accident: on
//! ConnectX limited physical functions (HGX B200/B300) reading some of them makes the driver
//! send a firmware command that is refused, so every read fails with `EINVAL` and the driver
//! logs an `ACCESS_REG` error in the kernel log. An exporter that reads them every scrape
//! floods the kernel log and counts the same error forever. A read that fails with `EINVAL`,
//! `EOPNOTSUPP` or `EACCES` is remembered here: the failure is counted once (it is an
//! ordinary I/O error the first time), and the file is not read again for a back-off that
//! starts at [`FIRST_BACKOFF`] (`--sysfs.refused-backoff`) and doubles at every failed retry up
//! to [`MAX_DOUBLINGS`] times that. In
//! between, a read of it fails at once with a [`Refused`] error, which sources treat as the
//! file's series being absent and the agent neither counts nor logs. A retry that succeeds
//! forgets the file; so does the device leaving ([`Restricted::forget_under`], called from
//! [`crate::fs::Fs::release`]), so a device that comes back is read afresh.
//!
//! Every other errno (`ENOENT`, `ENODEV`, `EIO`, a timeout) is not remembered: those are
//! transient, and the sources' own handling of them stands. Nor are the files whose `EINVAL`
//! is the kernel's answer about a state that changes ([`answers_with_einval`]): the GID
//! attributes of an empty slot, the rate of an InfiniBand port and the speed, duplex and
//! carrier of a netdev whose link is down. Left alone for a back-off, a GID added to that slot
//! or a link coming up would go unseen for minutes.

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::error::Refused;
use crate::fs::base::{PathMap, coarse_now};

/// The first back-off after a file is refused, by default.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(60);
/// The longest back-off, in first back-offs: a refused file is tried at least this often, so
/// one that starts answering (a firmware update, a port that came up) is back within it.
pub const MAX_DOUBLINGS: u32 = 16;
/// The most files remembered; past it, new refusals are not remembered (and counted every
/// time, as without this module).
pub const MAX_REMEMBERED: usize = 4096;

/// Whether `path` is a file whose `EINVAL` says something about a state that changes (see
/// the module docs), never remembered.
pub fn answers_with_einval(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    matches!(
        name,
        "rate" | "speed" | "duplex" | "carrier" | "carrier_changes"
    ) || path
        .as_os_str()
        .as_encoded_bytes()
        .windows(b"/gid_attrs/".len())
        .any(|w| w == b"/gid_attrs/")
}

/// Whether `err` is a refusal worth remembering, and its errno.
pub fn refusing_errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error()
        .filter(|e| matches!(*e, libc::EINVAL | libc::EOPNOTSUPP | libc::EACCES))
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// When it may be read again ([`coarse_now`]).
    until: Duration,
    /// The back-off that set `until`.
    backoff: Duration,
    errno: i32,
}

/// The files that refused reads, and their back-offs.
#[derive(Debug)]
pub struct Restricted {
    /// How many files are remembered: read without the lock, so that a node where nothing
    /// refuses pays one atomic load per read.
    len: AtomicUsize,
    files: Mutex<PathMap<Entry>>,
    /// The first back-off, in milliseconds; 0 remembers nothing.
    first_ms: AtomicU64,
}

impl Default for Restricted {
    fn default() -> Self {
        Restricted {
            len: AtomicUsize::new(0),
            files: Mutex::new(PathMap::default()),
            first_ms: AtomicU64::new(FIRST_BACKOFF.as_millis() as u64),
        }
    }
}

/// What [`Restricted::check`] decided about a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Not remembered: read it.
    Read,
    /// Remembered, and its back-off is over: read it once more.
    Retry,
}

impl Restricted {
    /// Sets the first back-off; zero remembers nothing (and forgets what it remembered).
    pub fn set_first_backoff(&self, first: Duration) {
        let ms = u64::try_from(first.as_millis()).unwrap_or(u64::MAX);
        self.first_ms.store(ms, Ordering::Release);
        if ms == 0 {
            let mut files = lock(&self.files);
            files.retain(|_, _| false);
            self.len.store(0, Ordering::Release);
        }
    }

    fn first_backoff(&self) -> Duration {
        Duration::from_millis(self.first_ms.load(Ordering::Acquire))
    }

    /// Before reading `path`: a [`Refused`] error while it backs off.
    pub fn check(&self, path: &Path) -> io::Result<Check> {
        self.check_at(path, coarse_now())
    }

    fn check_at(&self, path: &Path, now: Duration) -> io::Result<Check> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Ok(Check::Read);
        }
        let files = lock(&self.files);
        match files.get(path) {
            None => Ok(Check::Read),
            Some(entry) if now >= entry.until => Ok(Check::Retry),
            Some(entry) => Err(io::Error::other(Refused {
                errno: entry.errno,
                retry_in: entry.until.saturating_sub(now),
            })),
        }
    }

    /// After reading `path`, whose [`Restricted::check`] said `check`: remembers a refusal,
    /// doubles the back-off of a retry refused again, forgets a retry that succeeded. A retry
    /// refused again answers the [`Refused`] error to return instead of the read's own: the
    /// file was counted when it first refused.
    pub fn after(&self, path: &Path, check: Check, err: Option<&io::Error>) -> Option<io::Error> {
        self.after_at(path, check, err, coarse_now())
    }

    fn after_at(
        &self,
        path: &Path,
        check: Check,
        err: Option<&io::Error>,
        now: Duration,
    ) -> Option<io::Error> {
        let first = self.first_backoff();
        let errno = err
            .and_then(refusing_errno)
            .filter(|_| !first.is_zero() && !answers_with_einval(path));
        match (check, errno) {
            (Check::Read, None) => None,
            (Check::Retry, None) => {
                let mut files = lock(&self.files);
                files.remove(path);
                self.len.store(files.len(), Ordering::Release);
                None
            }
            (check, Some(errno)) => {
                let mut files = lock(&self.files);
                let backoff = match (check, files.get(path)) {
                    (Check::Retry, Some(entry)) => (entry.backoff * 2).min(first * MAX_DOUBLINGS),
                    _ => first,
                };
                if files.get(path).is_none() && files.len() >= MAX_REMEMBERED {
                    return None;
                }
                files.insert(
                    path,
                    Entry {
                        until: now + backoff,
                        backoff,
                        errno,
                    },
                );
                self.len.store(files.len(), Ordering::Release);
                (check == Check::Retry).then(|| {
                    io::Error::other(Refused {
                        errno,
                        retry_in: backoff,
                    })
                })
            }
        }
    }

    /// Ends every back-off now, as if its time had passed (tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn expire(&self) {
        let mut files = lock(&self.files);
        files.retain(|_, entry| {
            entry.until = Duration::ZERO;
            true
        });
    }

    /// Forgets every file under `dir` (its device left: when it comes back, its files are
    /// read afresh).
    pub fn forget_under(&self, dir: &Path) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut files = lock(&self.files);
        files.retain(|path, _| !path.starts_with(dir));
        self.len.store(files.len(), Ordering::Release);
    }

    /// How many files are remembered.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether no file is remembered.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::is_refused;

    fn errno(e: i32) -> io::Error {
        io::Error::from_raw_os_error(e)
    }

    #[test]
    fn a_refused_file_backs_off_doubling_up_to_the_cap_and_recovers() {
        let r = Restricted::default();
        let path = Path::new("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/x");
        let t0 = Duration::from_secs(1000);
        assert_eq!(r.check_at(path, t0).unwrap(), Check::Read);
        r.after_at(path, Check::Read, Some(&errno(libc::EINVAL)), t0);
        assert_eq!(r.len(), 1);
        // Refused at once during the first back-off, with the errno and the time left.
        let err = r.check_at(path, t0 + Duration::from_secs(59)).unwrap_err();
        assert!(is_refused(&err));
        let refused = err.get_ref().unwrap().downcast_ref::<Refused>().unwrap();
        assert_eq!(
            (refused.errno, refused.retry_in),
            (libc::EINVAL, Duration::from_secs(1))
        );
        // Each retry refused again doubles the back-off, up to the cap.
        let mut now = t0 + FIRST_BACKOFF;
        let mut expected = FIRST_BACKOFF;
        for _ in 0..8 {
            assert_eq!(r.check_at(path, now).unwrap(), Check::Retry);
            let again = r.after_at(path, Check::Retry, Some(&errno(libc::EINVAL)), now);
            // Refused again: reported as a refusal, not as a new error.
            assert!(again.is_some_and(|e| is_refused(&e)));
            expected = (expected * 2).min(FIRST_BACKOFF * MAX_DOUBLINGS);
            assert!(
                r.check_at(path, now + expected - Duration::from_secs(1))
                    .is_err()
            );
            now += expected;
        }
        assert_eq!(expected, FIRST_BACKOFF * MAX_DOUBLINGS);
        // A retry that answers forgets the file.
        assert_eq!(r.check_at(path, now).unwrap(), Check::Retry);
        r.after_at(path, Check::Retry, None, now);
        assert!(r.is_empty());
        assert_eq!(r.check_at(path, now).unwrap(), Check::Read);
    }

    #[test]
    fn state_answers_are_never_remembered() {
        let r = Restricted::default();
        for p in [
            "/sys/class/infiniband/siw0/ports/1/gid_attrs/types/3",
            "/sys/class/infiniband/siw0/ports/1/gid_attrs/ndevs/3",
            "/sys/class/infiniband/mlx5_0/ports/1/rate",
            "/sys/class/net/ens1f0np0/speed",
            "/sys/class/net/ens1f0np0/carrier",
        ] {
            r.after_at(
                Path::new(p),
                Check::Read,
                Some(&errno(libc::EINVAL)),
                Duration::ZERO,
            );
        }
        assert!(r.is_empty());
    }

    #[test]
    fn a_zero_backoff_remembers_nothing() {
        let r = Restricted::default();
        let path = Path::new("/sys/x");
        r.after_at(
            path,
            Check::Read,
            Some(&errno(libc::EINVAL)),
            Duration::ZERO,
        );
        assert_eq!(r.len(), 1);
        r.set_first_backoff(Duration::ZERO);
        assert!(r.is_empty());
        r.after_at(
            path,
            Check::Read,
            Some(&errno(libc::EINVAL)),
            Duration::ZERO,
        );
        assert!(r.is_empty());
        assert_eq!(r.check_at(path, Duration::ZERO).unwrap(), Check::Read);
    }

    #[test]
    fn only_refusals_are_remembered() {
        let r = Restricted::default();
        let path = Path::new("/sys/x");
        for e in [libc::ENOENT, libc::ENODEV, libc::EIO, libc::EAGAIN] {
            r.after_at(path, Check::Read, Some(&errno(e)), Duration::ZERO);
        }
        assert!(r.is_empty());
        for e in [libc::EINVAL, libc::EOPNOTSUPP, libc::EACCES] {
            let p = format!("/sys/{e}");
            r.after_at(Path::new(&p), Check::Read, Some(&errno(e)), Duration::ZERO);
        }
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn a_device_that_leaves_is_forgotten() {
        let r = Restricted::default();
        for p in [
            "/sys/class/infiniband/mlx5_0/ports/1/counters/a",
            "/sys/class/infiniband/mlx5_0/ports/1/counters/b",
            "/sys/class/infiniband/mlx5_1/ports/1/counters/a",
        ] {
            r.after_at(
                Path::new(p),
                Check::Read,
                Some(&errno(libc::EINVAL)),
                Duration::ZERO,
            );
        }
        r.forget_under(Path::new("/sys/class/infiniband/mlx5_0"));
        assert_eq!(r.len(), 1);
        assert_eq!(
            r.check_at(
                Path::new("/sys/class/infiniband/mlx5_0/ports/1/counters/a"),
                Duration::ZERO
            )
            .unwrap(),
            Check::Read
        );
    }
}
