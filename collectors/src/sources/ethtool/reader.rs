//! Reading one netdev's driver statistics: the three ioctls behind a seam, the parsers of
//! their replies, and the rule for a string set that changes between the calls.
//!
//! [`read_stats`] runs `ETHTOOL_GSSET_INFO` → `ETHTOOL_GSTRINGS` → `ETHTOOL_GSTATS` over any
//! [`EthtoolIoctls`]: the real socket, or the test double `fake::FakeEthtool` serving byte
//! fixtures. Requests carry the count from `GSSET_INFO` and buffers have [`SLACK`] entries
//! beyond it; the counts the kernel writes into each reply are the ones believed. When the set
//! changed between the calls (on mlx5 the PFC entries exist only for priorities with PFC
//! enabled, so `mlnx_qos`/`dcbtool` between two calls changes it) a newer kernel answers zero
//! entries, an older one the new number, or `EFAULT` when that outgrew the buffer (see
//! `ioctl`); any of these, or names and values of different numbers, reads the
//! netdev once more, and a second disagreement is an [`Error::SetChanged`] for that netdev
//! alone.

use std::io;

use super::ioctl::{ETH_GSTRING_LEN, EthtoolSocket, GSTATS_HEADER, GSTRINGS_HEADER};

/// Entries of room beyond the `GSSET_INFO` count in each reply buffer, so a set that grew a
/// little (mlx5: 5 per newly PFC-enabled priority) is still read in one go.
pub const SLACK: usize = 64;

/// Why a netdev's statistics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ethtool socket could not be opened.
    #[error("Failed to open an AF_INET socket for SIOCETHTOOL: {source}")]
    Socket {
        /// The errno.
        source: io::Error,
    },
    /// An ioctl failed.
    #[error("Failed to read {what} using {ioctl} on {netdev}: {source}")]
    Ioctl {
        /// The netdev.
        netdev: String,
        /// `ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS` or `ETHTOOL_GSTATS`.
        ioctl: &'static str,
        /// What was being read ("names of stats").
        what: &'static str,
        /// The errno.
        source: io::Error,
    },
    /// A reply was shorter than the count in its own header.
    #[error("Malformed {ioctl} reply for {netdev}: {detail}")]
    Malformed {
        /// The netdev.
        netdev: String,
        /// The ioctl.
        ioctl: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The names and values disagreed twice in a row.
    #[error("Stats of {netdev} changed while being read, twice: {detail}")]
    SetChanged {
        /// The netdev.
        netdev: String,
        /// How the last pass disagreed.
        detail: String,
    },
}

impl Error {
    /// The errno behind the error, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Socket { source } | Error::Ioctl { source, .. } => source.raw_os_error(),
            Error::Malformed { .. } | Error::SetChanged { .. } => None,
        }
    }

    /// The ioctl that failed, for error paths and logs.
    pub fn ioctl(&self) -> &'static str {
        match self {
            Error::Socket { .. } => "socket",
            Error::Ioctl { ioctl, .. } | Error::Malformed { ioctl, .. } => ioctl,
            Error::SetChanged { .. } => "ETHTOOL_GSTATS",
        }
    }
}

/// Reads a netdev's driver statistics: `(name, value)` in the driver's order, names trimmed.
/// A netdev whose driver has no statistics (`EOPNOTSUPP`, `lo`) reads as empty.
pub trait StatsReader: Send + Sync + std::fmt::Debug {
    /// Reads `netdev` once.
    fn read(&self, netdev: &str) -> Result<Vec<(String, u64)>, Error>;
}

/// The three ioctls, returning raw replies; implemented by the real socket and by the fake.
pub trait EthtoolIoctls {
    /// `ETHTOOL_GSSET_INFO` for `ETH_SS_STATS`; `None` when the set does not exist.
    fn stats_count(&self, netdev: &str) -> io::Result<Option<u32>>;
    /// The raw `ETHTOOL_GSTRINGS` reply, asking for `count` names with room for `count +`
    /// [`SLACK`] (`EFAULT` when an older kernel had more).
    fn strings(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>>;
    /// The raw `ETHTOOL_GSTATS` reply, asking for `count` values with room for `count +`
    /// [`SLACK`] (`EFAULT` when an older kernel had more).
    fn stats(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>>;
}

impl EthtoolIoctls for EthtoolSocket {
    fn stats_count(&self, netdev: &str) -> io::Result<Option<u32>> {
        EthtoolSocket::stats_count(self, netdev)
    }
    fn strings(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>> {
        EthtoolSocket::strings(self, netdev, count, count as usize + SLACK)
    }
    fn stats(&self, netdev: &str, count: u32) -> io::Result<Vec<u8>> {
        EthtoolSocket::stats(self, netdev, count, count as usize + SLACK)
    }
}

/// The real reader: a `SIOCETHTOOL` socket per read, in the agent's network namespace.
#[derive(Debug, Default, Clone, Copy)]
pub struct IoctlReader;

impl StatsReader for IoctlReader {
    fn read(&self, netdev: &str) -> Result<Vec<(String, u64)>, Error> {
        let socket = EthtoolSocket::open().map_err(|source| Error::Socket { source })?;
        read_stats(&socket, netdev)
    }
}

/// Parses an `ETHTOOL_GSTRINGS` reply: `struct ethtool_gstrings { u32 cmd, string_set, len; }`
/// then `len` names of `ETH_GSTRING_LEN` bytes, each NUL-padded (a name of exactly 32 bytes
/// has no NUL). Names are cut at the first NUL, decoded lossily and trimmed.
pub fn parse_strings(reply: &[u8]) -> Result<Vec<String>, String> {
    let header = reply
        .get(..GSTRINGS_HEADER)
        .ok_or_else(|| format!("{} bytes, shorter than the header", reply.len()))?;
    let len = u32::from_ne_bytes([header[8], header[9], header[10], header[11]]) as usize;
    let data = &reply[GSTRINGS_HEADER..];
    let need = len.saturating_mul(ETH_GSTRING_LEN);
    if data.len() < need {
        return Err(format!(
            "header says {len} names ({need} bytes), reply holds {} bytes",
            data.len()
        ));
    }
    Ok(data[..need]
        .chunks_exact(ETH_GSTRING_LEN)
        .map(|raw| {
            let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).trim().to_owned()
        })
        .collect())
}

/// Parses an `ETHTOOL_GSTATS` reply: `struct ethtool_stats { u32 cmd, n_stats; }` then
/// `n_stats` native-endian `u64` values.
pub fn parse_stats(reply: &[u8]) -> Result<Vec<u64>, String> {
    let header = reply
        .get(..GSTATS_HEADER)
        .ok_or_else(|| format!("{} bytes, shorter than the header", reply.len()))?;
    let n = u32::from_ne_bytes([header[4], header[5], header[6], header[7]]) as usize;
    let data = &reply[GSTATS_HEADER..];
    let need = n.saturating_mul(8);
    if data.len() < need {
        return Err(format!(
            "header says {n} values ({need} bytes), reply holds {} bytes",
            data.len()
        ));
    }
    Ok(data[..need]
        .chunks_exact(8)
        .map(|v| u64::from_ne_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]))
        .collect())
}

/// One pass over the three ioctls.
enum Pass {
    /// Names and values that belong together.
    Read(Vec<(String, u64)>),
    /// The set changed between the calls, as described.
    Changed(String),
}

fn is_errno(err: &io::Error, errno: i32) -> bool {
    err.raw_os_error() == Some(errno)
}

fn one_pass(io: &dyn EthtoolIoctls, netdev: &str) -> Result<Pass, Error> {
    let ioctl_error = |ioctl: &'static str, what: &'static str, source: io::Error| Error::Ioctl {
        netdev: netdev.to_owned(),
        ioctl,
        what,
        source,
    };
    let count = match io.stats_count(netdev) {
        Ok(Some(n)) => n,
        Ok(None) => return Ok(Pass::Read(Vec::new())),
        Err(err) if is_errno(&err, libc::EOPNOTSUPP) => return Ok(Pass::Read(Vec::new())),
        Err(err) => {
            return Err(ioctl_error(
                "ETHTOOL_GSSET_INFO",
                "the number of stats",
                err,
            ));
        }
    };
    if count == 0 {
        return Ok(Pass::Read(Vec::new()));
    }
    let names = match io.strings(netdev, count) {
        Ok(reply) => parse_strings(&reply).map_err(|detail| Error::Malformed {
            netdev: netdev.to_owned(),
            ioctl: "ETHTOOL_GSTRINGS",
            detail,
        })?,
        // An older kernel's set outgrew the buffer since GSSET_INFO (see the ioctl module).
        Err(err) if is_errno(&err, libc::EFAULT) => {
            return Ok(Pass::Changed(format!(
                "ETHTOOL_GSSET_INFO gave {count} names, ETHTOOL_GSTRINGS more than {}",
                count as usize + SLACK
            )));
        }
        Err(err) if is_errno(&err, libc::EOPNOTSUPP) => return Ok(Pass::Read(Vec::new())),
        Err(err) => return Err(ioctl_error("ETHTOOL_GSTRINGS", "names of stats", err)),
    };
    if names.is_empty() {
        // A kernel with the count check answers a changed set with nothing.
        return Ok(Pass::Changed(format!(
            "ETHTOOL_GSSET_INFO gave {count} names, ETHTOOL_GSTRINGS none"
        )));
    }
    let asked = u32::try_from(names.len()).unwrap_or(u32::MAX);
    let values = match io.stats(netdev, asked) {
        Ok(reply) => parse_stats(&reply).map_err(|detail| Error::Malformed {
            netdev: netdev.to_owned(),
            ioctl: "ETHTOOL_GSTATS",
            detail,
        })?,
        Err(err) if is_errno(&err, libc::EFAULT) => {
            return Ok(Pass::Changed(format!(
                "ETHTOOL_GSTRINGS gave {} names, ETHTOOL_GSTATS more than {} values",
                names.len(),
                names.len() + SLACK
            )));
        }
        Err(err) if is_errno(&err, libc::EOPNOTSUPP) => return Ok(Pass::Read(Vec::new())),
        Err(err) => return Err(ioctl_error("ETHTOOL_GSTATS", "values of stats", err)),
    };
    if names.len() != values.len() {
        return Ok(Pass::Changed(format!(
            "ETHTOOL_GSTRINGS gave {} names, ETHTOOL_GSTATS {} values",
            names.len(),
            values.len()
        )));
    }
    Ok(Pass::Read(names.into_iter().zip(values).collect()))
}

/// Reads `netdev`'s statistics through `io`, reading once more when the set changed between
/// `GSTRINGS` and `GSTATS`.
pub fn read_stats(io: &dyn EthtoolIoctls, netdev: &str) -> Result<Vec<(String, u64)>, Error> {
    let mut detail = String::new();
    for _ in 0..2 {
        match one_pass(io, netdev)? {
            Pass::Read(stats) => return Ok(stats),
            Pass::Changed(how) => detail = how,
        }
    }
    Err(Error::SetChanged {
        netdev: netdev.to_owned(),
        detail,
    })
}
