//! The `dcb` source: Priority Flow Control (IEEE 802.1Qbb) configuration and per-priority
//! PFC frame counts of the selected netdevs, from the kernel's DCB netlink interface.
//!
//! Kernel interface: rtnetlink `RTM_GETDCB` with `DCB_CMD_IEEE_GET` (`NETLINK_ROUTE`;
//! `include/uapi/linux/dcbnl.h`, `net/dcb/dcbnl.c`), one request per netdev, answered by
//! the driver's `ieee_getpfc` op with a `struct ieee_pfc`: `pfc_cap`, the `pfc_en` bitmap of
//! priorities with PFC enabled, `mbc`, `delay`, and `requests[8]` / `indications[8]`. It
//! needs no privilege (`dcb_doit()` checks `CAP_NET_ADMIN` for `RTM_SETDCB` only). iproute2's
//! `dcb pfc show dev X` reads the same structure. `wire` holds the bytes.
//!
//! **The direction of the counters depends on the driver.** The uapi header says
//! `requests` counts sent PFC frames and `indications` received ones; mlx5
//! (`mlx5e_dcbnl_ieee_getpfc`: `tx_pause` / `rx_pause`), ice and i40e
//! (`priority_xoff_tx` / `priority_xoff_rx`) and hns3 follow it; **ixgbe** (`pxoffrxc` /
//! `pxofftxc`) and **kvx** swap them. The values are passed through as the driver reports
//! them; the netdev's driver is on `railscope_netdev_info{driver}`. **mlx5** fills them from
//! its cached port counters, which only a full statistics update refreshes (an
//! `ETHTOOL_GSTATS`, i.e. `ethtool -S` or the `ethtool` source): without one, they do not
//! move.
//!
//! Failure semantics: a netdev without DCB ops answers `EOPNOTSUPP` (so does a kernel
//! without `CONFIG_DCB`), one that vanished `ENODEV`, and kernels before network-namespace
//! support in dcbnl answer `EINVAL` outside the initial namespace: all of these are "no
//! data", not errors. A reply without `DCB_ATTR_IEEE_PFC` is no data too. Any other failure
//! costs that netdev and is a [`CollectError`]. DCB is reached only through rtnetlink, so
//! only netdevs of the agent's own network namespace (checked by name, `ifindex` and
//! `address` against the sysfs tree, as the `netdev` source does) are asked; when none is,
//! the source reports itself absent.
//!
//! Nothing of a netdev outlives it: the source keeps no state per netdev, and the identity
//! files it read of a netdev that left the selection are read once more in the next
//! collection so that the file system closes them ([`crate::netdevs::let_go`]).

#[cfg(test)]
mod proptests;
pub(crate) mod wire;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{CollectError, Origin};
use crate::fs::Fs;
use crate::netdevs::{Departures, FILTER_OPTIONS, NetdevFilter, is_same_netdev, let_go};
use crate::netlink::Flow;
use crate::netlink::rtnl::{RtnlSocket, getlink_error};
use crate::run::{Run, gather, standalone};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};
use wire::Reply;

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "dcb",
    help: "PFC-enabled priorities and per-priority PFC request/indication counts over DCB netlink (RTM_GETDCB, DCB_CMD_IEEE_GET).",
    default_enabled: true,
    options: &FILTER_OPTIONS,
};

/// How long one rtnetlink receive may wait.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Errnos that mean "this netdev has no DCB", not a failure.
pub const NO_DCB_ERRNOS: [i32; 3] = [libc::EOPNOTSUPP, libc::ENODEV, libc::EINVAL];

/// What the source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The netdevs whose driver reported PFC, sorted by name.
    pub netdevs: Vec<NetdevPfc>,
}

/// One netdev's PFC state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetdevPfc {
    /// The netdev's name.
    pub name: String,
    /// What its driver reported.
    pub pfc: IeeePfc,
}

/// `struct ieee_pfc`, as the driver filled it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IeeePfc {
    /// How many traffic classes may have PFC enabled at once.
    pub pfc_cap: u8,
    /// Bitmap of priorities with PFC enabled: bit *p* is priority *p*.
    pub pfc_en: u8,
    /// MACsec bypass capability.
    pub mbc: u8,
    /// Allowance made for a round-trip propagation delay, in bit times (mlx5: the cable
    /// length in metres).
    pub delay: u16,
    /// PFC frames per priority; sent by the uapi's definition (mlx5, ice, i40e, hns3),
    /// received on ixgbe and kvx.
    pub requests: [u64; wire::IEEE_8021QAZ_MAX_TCS],
    /// PFC frames per priority; received by the uapi's definition, sent on ixgbe and kvx.
    pub indications: [u64; wire::IEEE_8021QAZ_MAX_TCS],
}

impl IeeePfc {
    /// Whether PFC is enabled on `priority` (0–7).
    pub fn enabled(&self, priority: usize) -> bool {
        priority < 8 && self.pfc_en & (1 << priority) != 0
    }
}

/// Reads DCB PFC state over rtnetlink. Cloning it is cheap (shared handles).
#[derive(Debug, Clone)]
pub struct DcbSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    /// The netdevs of the last collection.
    departures: Arc<Departures>,
}

impl DcbSource {
    /// Reads every selected netdev of the agent's network namespace.
    pub fn read(&self) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// Reads the PFC state of every selected netdev, one unit of `run` per netdev.
    pub fn read_in(&self, run: &Run<'_>) -> Report<Snapshot> {
        let class = self.sysfs.join("class/net");
        let mut report = Report {
            data: Some(Snapshot::default()),
            errors: Vec::new(),
            absent: None,
        };
        if !self.fs.exists(&class) {
            report.absent = Some(format!("{} does not exist", class.display()));
            return report;
        }
        let selected = self.filter.select(self.fs.as_ref(), &self.sysfs);
        let departed = self.departures.update(&selected);
        let_go(self.fs.as_ref(), &self.sysfs, &departed);
        if selected.is_empty() {
            return report;
        }
        let mut socket = match RtnlSocket::open(RECEIVE_TIMEOUT) {
            Ok(socket) => socket,
            Err(err) => {
                report.errors.push(getlink_error(&err));
                return report;
            }
        };
        let links = match socket.dump_links() {
            Ok(links) => links,
            Err(err) => {
                report.errors.push(getlink_error(&err));
                return report;
            }
        };
        // One socket for the units that run in turn; a unit that finds it held (by a query
        // stuck in a wedged driver) opens its own.
        let (src, links) = (self.clone(), Arc::new(links));
        let socket = Arc::new(Mutex::new(socket));
        let units = run.each(selected, 1, move |name| {
            let mut errors = Vec::new();
            let live = links
                .iter()
                .any(|link| is_same_netdev(src.fs.as_ref(), &src.sysfs, name, link, &mut errors));
            if !live {
                return (None, errors);
            }
            let answer = match socket.try_lock() {
                Ok(mut shared) => query(&mut shared, name),
                Err(_) => {
                    RtnlSocket::open(RECEIVE_TIMEOUT).and_then(|mut own| query(&mut own, name))
                }
            };
            let pfc = match answer {
                Ok(pfc) => pfc,
                Err(err) => {
                    errors.push(query_error(name, &err));
                    None
                }
            };
            // In the namespace: Some, with the PFC state where the driver has DCB.
            let netdev = pfc.map(|pfc| NetdevPfc {
                name: name.to_owned(),
                pfc,
            });
            (Some(netdev), errors)
        });
        let read = gather(units, &mut report.errors);
        let in_namespace = read.len();
        let netdevs: Vec<NetdevPfc> = read.into_iter().flatten().collect();
        if in_namespace == 0 {
            report.absent = Some(format!(
                "none of the selected netdevs under {} is in the agent's network namespace; DCB is read over rtnetlink only",
                class.display()
            ));
        }
        report.data = Some(Snapshot { netdevs });
        report
    }
}

impl Source for DcbSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs, options) = (from.roots, Arc::clone(&from.fs), from.options);
        Ok(DcbSource {
            fs,
            sysfs: roots.sysfs.clone(),
            filter: NetdevFilter::from_options(options)?,
            departures: Arc::default(),
        })
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// Asks for one netdev's IEEE DCB state; `Ok(None)` when it has no DCB or no PFC.
fn query(socket: &mut RtnlSocket, name: &str) -> io::Result<Option<IeeePfc>> {
    let mut pfc = None;
    let asked = socket.request(
        |seq| wire::encode_ieee_get(name, seq),
        RECEIVE_TIMEOUT * 2,
        |message| {
            if let Reply::Ieee { pfc: reply, .. } = wire::decode_reply(message)? {
                pfc = reply;
            }
            Ok(Flow::Done)
        },
    );
    match asked {
        Ok(()) => Ok(pfc),
        Err(err)
            if err
                .raw_os_error()
                .is_some_and(|e| NO_DCB_ERRNOS.contains(&e)) =>
        {
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// The error of a failed `DCB_CMD_IEEE_GET` of `netdev`.
fn query_error(netdev: &str, err: &io::Error) -> CollectError {
    let command = format!("RTM_GETDCB DCB_CMD_IEEE_GET {netdev}");
    CollectError::netlink(Some(netdev), Origin::RTNETLINK, command, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use std::path::Path;

    fn source(sysfs: &Path, include: &str) -> DcbSource {
        DcbSource {
            fs: Arc::new(RealFs),
            sysfs: sysfs.to_path_buf(),
            filter: NetdevFilter {
                include: Some(regex::Regex::new(include).unwrap()),
                exclude: None,
            },
            departures: Arc::default(),
        }
    }

    #[test]
    fn loopback_has_no_dcb_and_that_is_not_an_error() {
        // `lo` of the live namespace: the kernel answers EOPNOTSUPP (no dcbnl_ops).
        let report = source(Path::new(crate::fs::DEFAULT_SYSFS), "^lo$").read();
        assert_eq!(report.errors, vec![]);
        assert_eq!(report.absent, None);
        assert!(
            matches!(&report.data, Some(s) if s.netdevs.is_empty()),
            "no data"
        );
    }

    #[test]
    fn netdevs_of_another_namespace_are_not_asked() {
        let dir = tempfile::tempdir().unwrap();
        let nd = dir.path().join("class/net/ens9f0np0");
        std::fs::create_dir_all(&nd).unwrap();
        std::fs::write(nd.join("ifindex"), "42\n").unwrap();
        let report = source(dir.path(), ".").read();
        assert_eq!(report.errors, vec![]);
        assert!(report.absent.is_some());
        assert!(matches!(&report.data, Some(s) if s.netdevs.is_empty()));
    }
}
