//! The InfiniBand side of the `neighbour` source: who is at the far end of each IB port,
//! asked with three directed-route SMPs one hop out of the port, over the kernel's user MAD
//! interface (`/dev/infiniband/umadN`, `include/uapi/rdma/ib_user_mad.h`).
//!
//! A directed-route SMP needs no LID and no subnet manager: it leaves the local port
//! (`initial_path[1]`), the node at the other end of the cable answers it, and the reply comes
//! back the same way. One query asks, in this order:
//!
//! 1. NodeInfo (0x0011): node type, NodeGUID and LocalPortNum, the number of the switch
//!    port this host's cable is plugged into;
//! 2. NodeDescription (0x0010): the switch's name (`MF0;sw-ib-leaf07:MQM9700/U1`);
//! 3. PortInfo (0x0015) with attribute modifier LocalPortNum: the switch port's active
//!    width and speed, to compare with the host end's `rate`.
//!
//! The kernel ABI is used directly, not rdma-core's `libibumad`: umad is three ioctls and
//! read/write/poll on one device file, `libibumad` is a thin wrapper over exactly that, and
//! the ABI (version 5, `IB_USER_MAD_REGISTER_AGENT2` since Linux 3.17) is stable uapi; loading
//! the library would add a package on every node and an FFI surface larger than the ioctls.
//!
//! [`mad`] holds the pure encoding and decoding, [`umad`] the device I/O (and all of the
//! `unsafe`), this module the query and the error kinds a caller maps to
//! `railscope_neighbour_status` ([`ErrorKind::status`]). Cadence, back-off of ports that are
//! refused or have no QP0, and the series are the caller's: [`query_port`] asks once.

pub mod mad;
pub mod umad;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{self, CollectError, Origin};
use crate::fs::Fs;

pub use mad::{Attr, LaneSpeed, NodeInfo, NodeType, PortInfo, ReplyError};
pub use umad::{Transport, UmadDevice, UmadError, UmadPort, find_umad};

/// The source name errors of this reader carry in [`Origin::Device`].
const SOURCE: &str = "neighbour";

/// How long the kernel waits for each SMP's reply by default (`timeout_ms` of the umad
/// header; `smpquery` waits 1 s, a one-hop reply takes microseconds).
pub const DEFAULT_SMP_TIMEOUT: Duration = Duration::from_millis(500);

/// How much longer than the kernel's own timeout a read waits for the kernel's `ETIMEDOUT`
/// answer before it gives up by itself.
const KERNEL_ANSWER_SLACK: Duration = Duration::from_millis(100);

/// The far end of one InfiniBand port, as it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// NodeDescription, sanitised to printable ASCII (at most 64 bytes).
    pub description: String,
    /// NodeInfo.
    pub node: NodeInfo,
    /// PortInfo of the neighbour's port this link arrives on (LocalPortNum).
    pub port: PortInfo,
}

impl Neighbour {
    /// The `neighbour_id` label: NodeGUID as `0x%016x`.
    pub fn neighbour_id(&self) -> String {
        format!("{:#018x}", self.node.node_guid)
    }

    /// The `neighbour_port` label: LocalPortNum in decimal.
    pub fn neighbour_port(&self) -> String {
        self.node.local_port_num.to_string()
    }

    /// `railscope_neighbour_link_width_lanes`: the far port's active width in lanes.
    pub fn link_width_lanes(&self) -> Option<u32> {
        self.port.width_lanes()
    }

    /// `railscope_neighbour_rate_bytes_per_second`: the far port's active width × lane
    /// speed, in the arithmetic of the kernel's `rate` attribute.
    pub fn rate_bytes_per_second(&self) -> Option<u64> {
        self.port.rate_bytes_per_second()
    }
}

/// What kind of failure a query met, in the terms of `railscope_neighbour_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No SMPs on this port: no umad device for it (iWARP, `ib_umad` not loaded, no
    /// `/dev/infiniband` in the container) or no QP0 (RoCE; `EPROTONOSUPPORT`). It does
    /// not change until the device does: ask again on the slow cadence only.
    NotAvailable,
    /// The device could not be opened or the agent registered: `EACCES`/`EPERM`.
    NoPermission,
    /// The neighbour answered with error bits in the MAD status.
    Refused,
    /// No answer in time: the kernel's `ETIMEDOUT`, or the caller's deadline. M_Key
    /// protection (protect bits 2 and 3 on a Get) drops the SMP without an answer; so do
    /// down links and many virtualised functions.
    Timeout,
    /// Anything else: a reply that is not one, a write the kernel refused, an I/O error.
    Failed,
}

impl ErrorKind {
    /// The `status` label of `railscope_neighbour_status` this failure sets; `None` for
    /// [`ErrorKind::Failed`], which is counted as a collector error and leaves the status
    /// as it was.
    pub fn status(self) -> Option<&'static str> {
        match self {
            ErrorKind::NotAvailable => Some("not_available"),
            ErrorKind::NoPermission => Some("no_permission"),
            ErrorKind::Refused => Some("refused"),
            ErrorKind::Timeout => Some("timeout"),
            ErrorKind::Failed => None,
        }
    }
}

/// A failed query of one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmpError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The RDMA device asked (`mlx5_0`).
    pub device: String,
    /// Its port.
    pub port: u32,
    /// The umad device node, once known.
    pub dev_path: Option<PathBuf>,
    /// The attribute being asked when it failed, if one was.
    pub attr: Option<Attr>,
    /// The errno, for an I/O failure.
    pub errno: Option<i32>,
    /// The MAD status of a refused SMP ([`ErrorKind::Refused`]).
    pub mad_status: Option<u16>,
    /// What happened.
    pub detail: String,
}

impl SmpError {
    fn new(kind: ErrorKind, device: &str, port: u32, detail: impl Into<String>) -> Self {
        SmpError {
            kind,
            device: device.to_owned(),
            port,
            dev_path: None,
            attr: None,
            errno: None,
            mad_status: None,
            detail: detail.into(),
        }
    }

    fn from_umad(err: UmadError, device: &str, port: u32, dev_path: &Path) -> Self {
        let (kind, call, io_err) = match err {
            UmadError::NotAvailable(e) => (ErrorKind::NotAvailable, None, e),
            UmadError::Permission(e) => (ErrorKind::NoPermission, None, e),
            UmadError::Io { call, err } => (ErrorKind::Failed, Some(call), err),
        };
        let detail = match call {
            Some(call) => format!("{call}: {io_err}"),
            None => io_err.to_string(),
        };
        SmpError {
            dev_path: Some(dev_path.to_path_buf()),
            errno: io_err.raw_os_error(),
            ..SmpError::new(kind, device, port, detail)
        }
    }

    /// The failure as the collector error it is counted as: origin the umad device node
    /// (or the RDMA device before one was found), kind `unavailable` for
    /// [`ErrorKind::NotAvailable`] and [`ErrorKind::Refused`], `parse` for a reply that is
    /// not one, `io` otherwise.
    pub fn to_collect_error(&self) -> CollectError {
        let origin = match &self.dev_path {
            Some(path) => Origin::File(path.clone()),
            None => Origin::Device {
                source: SOURCE,
                device: format!("{} port {}", self.device, self.port),
            },
        };
        let kind = match self.kind {
            ErrorKind::NotAvailable | ErrorKind::Refused => error::ErrorKind::Unavailable,
            ErrorKind::Failed if self.errno.is_none() => error::ErrorKind::Parse,
            ErrorKind::NoPermission | ErrorKind::Timeout | ErrorKind::Failed => {
                error::ErrorKind::Io
            }
        };
        CollectError {
            errno: self.errno,
            ..CollectError::at(Some(&self.device), origin, kind, self.to_string())
        }
    }
}

impl fmt::Display for SmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.device, self.port)?;
        if let Some(path) = &self.dev_path {
            write!(f, " ({})", path.display())?;
        }
        if let Some(attr) = self.attr {
            write!(f, ": SMP {attr}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

impl std::error::Error for SmpError {}

/// Low words of transaction ids, unique within this process. The kernel gives every agent
/// its own high word, so ids of other processes cannot collide with these.
static NEXT_TID: AtomicU32 = AtomicU32::new(1);

/// Asks the neighbour of `device` port `port` once: finds its umad device under `sysfs`
/// (node under `dev_root`, normally `/dev`), registers an agent, sends the three SMPs one
/// after the other (one outstanding at a time), each waited for at most `smp_timeout` and
/// all of them by `deadline`, and closes the device.
pub fn query_port(
    fs: &dyn Fs,
    sysfs: &Path,
    dev_root: &Path,
    device: &str,
    port: u32,
    smp_timeout: Duration,
    deadline: Instant,
) -> Result<Neighbour, SmpError> {
    let local_port = u8::try_from(port).map_err(|_| {
        SmpError::new(
            ErrorKind::NotAvailable,
            device,
            port,
            "port number beyond a directed route's 8 bits",
        )
    })?;
    let umad = match find_umad(fs, sysfs, dev_root, device, port) {
        Ok(Some(umad)) => umad,
        Ok(None) => {
            return Err(SmpError::new(
                ErrorKind::NotAvailable,
                device,
                port,
                "no umad device for this port (no ib_umad module, or a port without MADs such as iWARP)",
            ));
        }
        Err(err) => {
            return Err(SmpError {
                errno: err.errno,
                ..SmpError::new(ErrorKind::Failed, device, port, err.to_string())
            });
        }
    };
    let mut transport = UmadPort::open(&umad.dev_path)
        .map_err(|err| SmpError::from_umad(err, device, port, &umad.dev_path))?;
    let first_tid = NEXT_TID.fetch_add(3, Ordering::Relaxed);
    query(&mut transport, local_port, first_tid, smp_timeout, deadline).map_err(|mut err| {
        err.device = device.to_owned();
        err.port = port;
        err.dev_path = Some(umad.dev_path.clone());
        err
    })
}

/// One query of the far end of `port` through the umad device `dev_path` (found by the
/// caller, [`find_umad`]): [`query`] over a freshly opened [`UmadPort`], closed after.
pub fn query_umad(
    dev_path: &Path,
    port: u32,
    smp_timeout: Duration,
    deadline: Instant,
) -> Result<Neighbour, SmpError> {
    let local_port = u8::try_from(port).map_err(|_| {
        SmpError::new(
            ErrorKind::NotAvailable,
            "",
            port,
            "port number beyond a directed route's 8 bits",
        )
    })?;
    let mut transport =
        UmadPort::open(dev_path).map_err(|err| SmpError::from_umad(err, "", port, dev_path))?;
    let first_tid = NEXT_TID.fetch_add(3, Ordering::Relaxed);
    query(&mut transport, local_port, first_tid, smp_timeout, deadline).map_err(|mut err| {
        err.port = port;
        err.dev_path = Some(dev_path.to_owned());
        err
    })
}

/// The three SMPs of one query over `transport`, with transaction ids `first_tid`,
/// `first_tid + 1`, `first_tid + 2`. The error's device and port are left empty for the
/// caller to fill in.
pub fn query<T: Transport>(
    transport: &mut T,
    local_port: u8,
    first_tid: u32,
    smp_timeout: Duration,
    deadline: Instant,
) -> Result<Neighbour, SmpError> {
    let mut ask = Asker {
        transport,
        local_port,
        next_tid: first_tid,
        smp_timeout,
        deadline,
    };
    let node = mad::decode_node_info(&ask.get(Attr::NodeInfo, 0)?);
    if node.local_port_num == 0
        || (node.node_type == NodeType::Switch && node.local_port_num > node.num_ports)
    {
        return Err(SmpError {
            attr: Some(Attr::NodeInfo),
            ..SmpError::new(
                ErrorKind::Failed,
                "",
                0,
                format!(
                    "implausible NodeInfo: LocalPortNum {} of {} ports",
                    node.local_port_num, node.num_ports
                ),
            )
        });
    }
    let description = mad::decode_node_description(&ask.get(Attr::NodeDescription, 0)?);
    let port = mad::decode_port_info(&ask.get(Attr::PortInfo, u32::from(node.local_port_num))?);
    Ok(Neighbour {
        description,
        node,
        port,
    })
}

/// Sends one SMP at a time and waits for its reply.
struct Asker<'a, T: Transport> {
    transport: &'a mut T,
    local_port: u8,
    next_tid: u32,
    smp_timeout: Duration,
    deadline: Instant,
}

impl<T: Transport> Asker<'_, T> {
    fn get(&mut self, attr: Attr, attr_mod: u32) -> Result<[u8; mad::SMP_DATA_LEN], SmpError> {
        let fail = |kind, detail: String| SmpError {
            attr: Some(attr),
            ..SmpError::new(kind, "", 0, detail)
        };
        let now = Instant::now();
        let left = self.deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Err(fail(
                ErrorKind::Timeout,
                "the collection's deadline passed".into(),
            ));
        }
        let timeout = self.smp_timeout.min(left);
        let tid = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1);
        let req = mad::Request {
            agent_id: self.transport.agent_id(),
            tid: u64::from(tid),
            attr,
            attr_mod,
            local_port: self.local_port,
            timeout_ms: u32::try_from(timeout.as_millis())
                .unwrap_or(u32::MAX)
                .max(1),
        };
        let umad_fail = |err: UmadError| {
            let (kind, io_err) = match err {
                UmadError::NotAvailable(e) => (ErrorKind::NotAvailable, e),
                UmadError::Permission(e) => (ErrorKind::NoPermission, e),
                UmadError::Io { err, .. } => (ErrorKind::Failed, err),
            };
            SmpError {
                errno: io_err.raw_os_error(),
                ..fail(kind, io_err.to_string())
            }
        };
        self.transport
            .send(&mad::encode_get(&req))
            .map_err(umad_fail)?;
        let wait_until = (now + timeout + KERNEL_ANSWER_SLACK).min(self.deadline);
        let mut buf = [0u8; mad::PACKET_LEN];
        loop {
            let Some(len) = self
                .transport
                .recv(&mut buf, wait_until)
                .map_err(umad_fail)?
            else {
                return Err(fail(
                    ErrorKind::Timeout,
                    format!(
                        "no reply within {} ms",
                        wait_until.saturating_duration_since(now).as_millis()
                    ),
                ));
            };
            match mad::decode_reply(&buf[..len.min(buf.len())], &req) {
                Ok(data) => return Ok(data),
                // A late reply to an earlier request of this agent: not ours, wait on.
                Err(ReplyError::OtherTid { .. }) => continue,
                Err(err @ ReplyError::Timeout) => {
                    return Err(fail(
                        ErrorKind::Timeout,
                        format!("{err} ({} ms)", req.timeout_ms),
                    ));
                }
                Err(err @ ReplyError::Status(status)) => {
                    return Err(SmpError {
                        mad_status: Some(status),
                        ..fail(ErrorKind::Refused, err.to_string())
                    });
                }
                Err(err) => return Err(fail(ErrorKind::Failed, err.to_string())),
            }
        }
    }
}
