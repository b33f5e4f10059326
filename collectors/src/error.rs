//! Errors a source meets while reading the node.
//!
//! A source never fails as a whole because one file is bad: it records a [`CollectError`] that
//! names where it failed (its [`Origin`]: a file, a netlink command, an ioctl, a library
//! call), the errno and what was wrong, skips that value's series, and carries on. The agent
//! counts these errors per collector and logs each distinct one once.
//!
//! The read path answers some operations itself, in place of the kernel, with an I/O error
//! whose payload says why: [`Blocked`] from the guard (a device whose read blocked, an
//! attempt given up) and [`Refused`] from the back-off of refused attributes. Both live here,
//! with the tests for them ([`is_skipped`], [`is_timed_out`], [`is_refused`]), so a
//! [`CollectError`]'s kind is decided without reaching up into the read path: this module
//! imports nothing of the crate.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// does (see `crate::fs::guard`).
    Timeout,
    /// Not read, because an earlier read of the same device is still blocked. Such errors are
    /// not counted one by one: the blocked device is reported once, by the timeout and by
    /// `railscope_sysfs_blocked_seconds`.
    Skipped,
    /// Not read, because the file refused reads before (`EINVAL`, `EOPNOTSUPP`, `EACCES`) and
    /// backs off (see `crate::fs::refused`). Not counted: the first refusal was.
    Refused,
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
            ErrorKind::Refused => "refused",
        }
    }
}

/// Where a [`CollectError`] happened: what was read or called.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A file (an attribute, a directory, a link) under the configured root.
    File(PathBuf),
    /// A netlink request.
    Netlink {
        /// The netlink family: `rtnetlink` (`NETLINK_ROUTE`) or `rdma` (`NETLINK_RDMA`).
        protocol: &'static str,
        /// The command and what it asked about (`RTM_GETLINK`,
        /// `RDMA_NLDEV_CMD_STAT_GET mlx5_0 port 1`, `DCB_CMD_IEEE_GET ens1f0np0`), so each
        /// distinct failure is logged once.
        command: String,
    },
    /// An ioctl on a netdev.
    Ioctl {
        /// The netdev asked.
        netdev: String,
        /// The command (`ETHTOOL_GSSET_INFO`).
        command: &'static str,
    },
    /// A call into NVML.
    Nvml {
        /// The function (`nvmlDeviceGetPowerUsage`).
        call: &'static str,
    },
    /// A gRPC call (`PodResourcesLister/List` of the kubelet).
    Grpc {
        /// The service and method.
        call: &'static str,
    },
    /// A call into libibverbs.
    Verbs {
        /// The function (`ibv_get_device_list`).
        call: &'static str,
    },
    /// A device's unit of work as a whole (it did not answer in time; no file read was
    /// inside the kernel when it was given up, as with a GPU hung in NVML).
    Device {
        /// The source.
        source: &'static str,
        /// The device (`gpu6`).
        device: String,
    },
}

impl Origin {
    /// The `rtnetlink` protocol of [`Origin::Netlink`].
    pub const RTNETLINK: &'static str = "rtnetlink";
    /// The RDMA netlink protocol of [`Origin::Netlink`].
    pub const RDMA: &'static str = "rdma";

    /// A netlink request of `protocol` ([`Origin::RTNETLINK`], [`Origin::RDMA`]).
    pub fn netlink(protocol: &'static str, command: impl Into<String>) -> Self {
        Origin::Netlink {
            protocol,
            command: command.into(),
        }
    }

    /// The file, for a file origin.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Origin::File(path) => Some(path),
            _ => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Netlink {
                protocol: Origin::RDMA,
                command,
            } => write!(f, "RDMA netlink {command}"),
            Origin::Netlink { protocol, command } => write!(f, "{protocol} {command}"),
            Origin::Ioctl { netdev, command } => write!(f, "ioctl {command} on {netdev}"),
            Origin::Nvml { call } => write!(f, "NVML {call}"),
            Origin::Verbs { call } => write!(f, "libibverbs {call}"),
            Origin::Grpc { call } => write!(f, "gRPC {call}"),
            Origin::Device { source, device } => write!(f, "{source} device {device}"),
        }
    }
}

/// One failure met while reading the node; it costs only the series of what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectError {
    /// The device the failure belongs to, when it belongs to one.
    pub device: Option<String>,
    /// What failed: a path under the configured root, or the call that failed.
    pub origin: Origin,
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
        CollectError::failed(device, Origin::File(path.to_path_buf()), err)
    }

    /// A failure of kind `kind` on `path`, described by `detail`.
    pub fn new(
        device: Option<&str>,
        path: &Path,
        kind: ErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        CollectError::at(device, Origin::File(path.to_path_buf()), kind, detail)
    }

    /// An I/O failure of any origin; a `crate::fs::guard` timeout or skip is of that kind.
    pub fn failed(device: Option<&str>, origin: Origin, err: &io::Error) -> Self {
        let kind = if is_skipped(err) {
            ErrorKind::Skipped
        } else if is_refused(err) {
            ErrorKind::Refused
        } else if is_timed_out(err) {
            ErrorKind::Timeout
        } else {
            ErrorKind::Io
        };
        CollectError {
            errno: err.raw_os_error(),
            ..CollectError::at(device, origin, kind, err.to_string())
        }
    }

    /// A failure of kind `kind` of any origin, without an errno.
    pub fn at(
        device: Option<&str>,
        origin: Origin,
        kind: ErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        CollectError {
            device: device.map(str::to_owned),
            origin,
            errno: None,
            kind,
            detail: detail.into(),
        }
    }

    /// A failed netlink request of `protocol` ([`Origin::RTNETLINK`], [`Origin::RDMA`]).
    pub fn netlink(
        device: Option<&str>,
        protocol: &'static str,
        command: impl Into<String>,
        err: &io::Error,
    ) -> Self {
        CollectError::failed(device, Origin::netlink(protocol, command), err)
    }

    /// A failed ioctl `command` on `netdev`, of kind `kind`, with the errno when there is one.
    pub fn ioctl(
        netdev: &str,
        command: &'static str,
        kind: ErrorKind,
        errno: Option<i32>,
        detail: impl Into<String>,
    ) -> Self {
        let origin = Origin::Ioctl {
            netdev: netdev.to_owned(),
            command,
        };
        CollectError {
            errno,
            ..CollectError::at(Some(netdev), origin, kind, detail)
        }
    }

    /// A failed NVML call; NVML errors have no errno.
    pub fn nvml(
        device: Option<&str>,
        call: &'static str,
        kind: ErrorKind,
        detail: impl Into<String>,
    ) -> Self {
        CollectError::at(device, Origin::Nvml { call }, kind, detail)
    }

    /// A failed libibverbs call.
    pub fn verbs(device: Option<&str>, call: &'static str, err: &io::Error) -> Self {
        CollectError::failed(device, Origin::Verbs { call }, err)
    }

    /// The file that failed, for errors of a file.
    pub fn path(&self) -> Option<&Path> {
        self.origin.path()
    }

    /// The errno's symbolic name (`EINVAL`), when there is an errno.
    pub fn errno_name(&self) -> Option<String> {
        self.errno.map(errno_name)
    }
}

impl fmt::Display for CollectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (origin, detail) = (&self.origin, &self.detail);
        let file = matches!(origin, Origin::File(_));
        match self.kind {
            ErrorKind::Io if file => write!(f, "failed to read {origin}: {detail}")?,
            ErrorKind::Io => write!(f, "{origin} failed: {detail}")?,
            ErrorKind::Parse if file => write!(f, "failed to parse {origin}: {detail}")?,
            ErrorKind::Parse => write!(f, "failed to parse the reply of {origin}: {detail}")?,
            ErrorKind::Unavailable if file => {
                write!(f, "value not available in {origin}: {detail}")?
            }
            ErrorKind::Unavailable => write!(f, "value not available from {origin}: {detail}")?,
            ErrorKind::Timeout | ErrorKind::Skipped | ErrorKind::Refused => {
                write!(f, "{origin}: {detail}")?
            }
            ErrorKind::Vanished => write!(f, "device vanished while reading {origin}: {detail}")?,
        }
        match (self.kind, self.errno) {
            (ErrorKind::Io, Some(errno)) => write!(f, " ({})", errno_name(errno)),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for CollectError {}

/// The symbolic name of the errnos a sysfs read, a netlink socket or an ioctl can return;
/// `errno <number>` for the rest.
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
        libc::ENOBUFS => "ENOBUFS",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}

/// Why a guarded file-system operation ([`crate::fs::GuardedFs`]) failed without an errno.
#[derive(Debug)]
pub enum Blocked {
    /// This operation did not return in time; its device is now blocked.
    TimedOut {
        /// How long the operation was waited for.
        waited: Duration,
    },
    /// An earlier operation on the same device has not returned; this one was not tried.
    Device {
        /// The blocked device's directory.
        device: PathBuf,
        /// Since when it has been blocked.
        for_: Duration,
    },
    /// Too many devices are blocked; this one was not tried.
    TooMany,
    /// The attempt this operation belongs to was given up; it was not tried.
    Abandoned,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::TimedOut { waited } => write!(
                f,
                "the read did not return within {:.3}s; the device is skipped until it does",
                waited.as_secs_f64()
            ),
            Blocked::Device { device, for_ } => write!(
                f,
                "skipped: a read under {} has been blocked for {:.1}s",
                device.display(),
                for_.as_secs_f64()
            ),
            Blocked::TooMany => write!(
                f,
                "skipped: the most devices that may have a blocked read already have one"
            ),
            Blocked::Abandoned => write!(
                f,
                "skipped: this device's work was given up (it did not answer in time)"
            ),
        }
    }
}

impl std::error::Error for Blocked {}

/// The error of a read not tried because the file refused it before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The errno the file answered with.
    pub errno: i32,
    /// How long until it is tried again.
    pub retry_in: Duration,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not read: it failed with {} before; tried again in {}s",
            io::Error::from_raw_os_error(self.errno),
            self.retry_in.as_secs()
        )
    }
}

impl std::error::Error for Refused {}

/// Whether `err` is a [`Refused`] read.
pub fn is_refused(err: &io::Error) -> bool {
    err.get_ref()
        .and_then(|e| e.downcast_ref::<Refused>())
        .is_some()
}

/// Whether `err` is a guarded file system's skip: the operation was not tried because its device is
/// blocked.
pub fn is_skipped(err: &io::Error) -> bool {
    matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<Blocked>()),
        Some(Blocked::Device { .. } | Blocked::TooMany | Blocked::Abandoned)
    )
}

/// Whether `err` is a guarded file system's timeout.
pub fn is_timed_out(err: &io::Error) -> bool {
    matches!(
        err.get_ref().and_then(|e| e.downcast_ref::<Blocked>()),
        Some(Blocked::TimedOut { .. })
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_read_as_before_and_calls_are_named() {
        let einval = io::Error::from_raw_os_error(libc::EINVAL);
        let file = CollectError::io(Some("mlx5_0"), Path::new("/sys/x/rate"), &einval);
        assert_eq!(file.origin.to_string(), "/sys/x/rate");
        assert_eq!(
            file.to_string(),
            format!("failed to read /sys/x/rate: {einval} (EINVAL)")
        );
        let stat = CollectError::netlink(
            Some("mlx5_0"),
            Origin::RDMA,
            "RDMA_NLDEV_CMD_STAT_GET mlx5_0 port 1",
            &einval,
        );
        assert_eq!(stat.path(), None);
        assert_eq!(
            stat.to_string(),
            format!("RDMA netlink RDMA_NLDEV_CMD_STAT_GET mlx5_0 port 1 failed: {einval} (EINVAL)")
        );
        let link = CollectError::netlink(None, Origin::RTNETLINK, "RTM_GETLINK", &einval);
        assert_eq!(link.origin.to_string(), "rtnetlink RTM_GETLINK");
        let gstats = CollectError::ioctl(
            "eth0",
            "ETHTOOL_GSTATS",
            ErrorKind::Parse,
            None,
            "short reply",
        );
        assert_eq!(
            gstats.to_string(),
            "failed to parse the reply of ioctl ETHTOOL_GSTATS on eth0: short reply"
        );
        let nvml = CollectError::nvml(
            Some("0"),
            "nvmlDeviceGetPowerUsage",
            ErrorKind::Io,
            "Unknown Error",
        );
        assert_eq!(
            nvml.to_string(),
            "NVML nvmlDeviceGetPowerUsage failed: Unknown Error"
        );
        let verbs = CollectError::verbs(None, "ibv_get_device_list", &einval);
        assert_eq!(verbs.origin.to_string(), "libibverbs ibv_get_device_list");
    }
}
