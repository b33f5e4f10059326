//! A fake ethtool that serves byte fixtures (`tests/fixtures/ethtool/*.gstrings` /
//! `*.gstats`: replies exactly as the kernel writes them), so the reader's parsing and its
//! changed-set rule, and the mapping to metrics, are tested without hardware.
//!
//! Each netdev has a timeline of [`Reply`]s; every ioctl call is answered from the current
//! entry and then moves to the next one (the last entry repeats). A timeline `[A, A, B]` makes
//! `GSSET_INFO` and `GSTRINGS` see set `A` and `GSTATS` see set `B`: a set that changed
//! between the calls.
//!
//! By default the fake answers like a kernel with the count check of upstream commit
//! 7b07be1ff1cb (a request whose count differs from the driver's gets zero entries);
//! [`FakeEthtool::older_kernel`] answers like the kernels before it (the driver's current
//! entries whatever the count, `EFAULT` when they outgrow the caller's buffer, as the guard
//! page makes the real ioctl do).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Mutex;

use super::ioctl::ETH_GSTRING_LEN;
use super::reader::{Error, EthtoolIoctls, SLACK, StatsReader, parse_strings, read_stats};

/// What one ioctl call of a netdev is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A string set: the raw `GSTRINGS` and `GSTATS` replies.
    Set {
        /// The `ETHTOOL_GSTRINGS` reply.
        strings: Vec<u8>,
        /// The `ETHTOOL_GSTATS` reply.
        stats: Vec<u8>,
    },
    /// Every call fails with this errno.
    Errno(i32),
}

impl Reply {
    /// A set read from `<dir>/<name>.gstrings` and `<dir>/<name>.gstats`.
    pub fn fixture(dir: &Path, name: &str) -> io::Result<Reply> {
        Ok(Reply::Set {
            strings: std::fs::read(dir.join(format!("{name}.gstrings")))?,
            stats: std::fs::read(dir.join(format!("{name}.gstats")))?,
        })
    }

    /// The number of names of a set (from its `GSTRINGS` header).
    fn count(&self) -> io::Result<u32> {
        match self {
            Reply::Set { strings, .. } => {
                let header = strings
                    .get(8..12)
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
                Ok(u32::from_ne_bytes([
                    header[0], header[1], header[2], header[3],
                ]))
            }
            Reply::Errno(errno) => Err(io::Error::from_raw_os_error(*errno)),
        }
    }
}

/// Fake netdevs answering ethtool ioctls from fixtures.
#[derive(Debug, Default)]
pub struct FakeEthtool {
    netdevs: Mutex<BTreeMap<String, (Vec<Reply>, usize)>>,
    older_kernel: bool,
}

impl FakeEthtool {
    /// No netdevs: every read fails with `ENODEV`.
    pub fn new() -> Self {
        FakeEthtool::default()
    }

    /// Answers like a kernel without the count check (before v6.19 and its stable backports).
    pub fn older_kernel(mut self) -> Self {
        self.older_kernel = true;
        self
    }

    /// Whether a request for `count` entries of a set that has `actual` is answered with
    /// them (`Ok(true)`), with none (`Ok(false)`), or faults.
    fn answers(&self, count: u32, actual: u32) -> io::Result<bool> {
        if !self.older_kernel {
            return Ok(count == 0 || count == actual);
        }
        if actual as usize > count as usize + SLACK {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        Ok(true)
    }

    /// Adds `netdev`, answering from `timeline` (at least one entry).
    pub fn with(self, netdev: &str, timeline: Vec<Reply>) -> Self {
        self.netdevs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(netdev.to_owned(), (timeline, 0));
        self
    }

    /// The reply for the next call to `netdev`.
    fn next(&self, netdev: &str) -> io::Result<Reply> {
        let mut netdevs = self.netdevs.lock().unwrap_or_else(|e| e.into_inner());
        let (timeline, cursor) = netdevs
            .get_mut(netdev)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        let reply = timeline
            .get((*cursor).min(timeline.len().saturating_sub(1)))
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        *cursor += 1;
        Ok(reply)
    }
}

impl EthtoolIoctls for FakeEthtool {
    fn stats_count(&self, netdev: &str) -> io::Result<Option<u32>> {
        self.next(netdev)?.count().map(Some)
    }

    fn strings(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>> {
        let reply = self.next(netdev)?;
        let answered = self.answers(count, reply.count()?)?;
        match reply {
            Reply::Set { strings, .. } if answered => Ok(strings),
            Reply::Set { .. } => Ok([
                super::ioctl::ETHTOOL_GSTRINGS.to_ne_bytes(),
                super::ioctl::ETH_SS_STATS.to_ne_bytes(),
                0u32.to_ne_bytes(),
            ]
            .concat()),
            Reply::Errno(errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }

    fn stats(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>> {
        let reply = self.next(netdev)?;
        let answered = self.answers(count, reply.count()?)?;
        match reply {
            Reply::Set { stats, .. } if answered => Ok(stats),
            Reply::Set { .. } => Ok([
                super::ioctl::ETHTOOL_GSTATS.to_ne_bytes(),
                0u32.to_ne_bytes(),
            ]
            .concat()),
            Reply::Errno(errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

impl StatsReader for FakeEthtool {
    fn read(&self, netdev: &str) -> Result<Vec<(String, u64)>, Error> {
        read_stats(self, netdev)
    }
}

/// Builds the raw replies of a set from `(name, value)` pairs, as the kernel lays them out:
/// 32-byte NUL-padded names (a name of 32 bytes or more is cut to 32 without a NUL, as the
/// kernel's `strscpy`/`sprintf` into `ETH_GSTRING_LEN` slots would), native-endian values.
pub fn set_of(stats: &[(&str, u64)]) -> Reply {
    let mut strings = Vec::with_capacity(12 + stats.len() * ETH_GSTRING_LEN);
    let n = u32::try_from(stats.len()).unwrap_or(u32::MAX);
    strings.extend_from_slice(&super::ioctl::ETHTOOL_GSTRINGS.to_ne_bytes());
    strings.extend_from_slice(&super::ioctl::ETH_SS_STATS.to_ne_bytes());
    strings.extend_from_slice(&n.to_ne_bytes());
    let mut values = Vec::with_capacity(8 + stats.len() * 8);
    values.extend_from_slice(&super::ioctl::ETHTOOL_GSTATS.to_ne_bytes());
    values.extend_from_slice(&n.to_ne_bytes());
    for (name, value) in stats {
        let mut slot = [0u8; ETH_GSTRING_LEN];
        let bytes = name.as_bytes();
        let len = bytes.len().min(ETH_GSTRING_LEN);
        slot[..len].copy_from_slice(&bytes[..len]);
        strings.extend_from_slice(&slot);
        values.extend_from_slice(&value.to_ne_bytes());
    }
    debug_assert!(parse_strings(&strings).is_ok());
    Reply::Set {
        strings,
        stats: values,
    }
}
