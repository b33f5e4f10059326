//! The `phy` source: FEC mode and FEC counters (per lane, and the FEC histogram where the
//! kernel has it), the IEEE 802.3 PHY symbol-error counter, and the link state with the
//! driver's reason for a down link and its link-down count, of the selected netdevs, from
//! the ethtool generic netlink family.
//!
//! Kernel interface: generic netlink family `"ethtool"` (`include/uapi/linux/ethtool_netlink_generated.h`,
//! `Documentation/networking/ethtool-netlink.rst`), three requests per netdev and collection
//! ([`wire`] holds the bytes): `ETHTOOL_MSG_FEC_GET` with statistics, `ETHTOOL_MSG_STATS_GET`
//! of the eth-phy group and `ETHTOOL_MSG_LINKSTATE_GET` with statistics. None of the three
//! needs a privilege (`net/ethtool/netlink.c`: they carry no `GENL_UNS_ADMIN_PERM`, which
//! the SET and ACT operations and `MODULE_EEPROM_GET` do). The netdev is named by its `ifindex`, so only netdevs of the agent's
//! network namespace are asked (checked by name, `ifindex` and `address` against the sysfs
//! tree, as the `ethtool` and `dcb` sources do); when none is, the source reports itself
//! absent.
//!
//! **Cost.** Each request is one round trip to the kernel, answered under the RTNL lock by
//! the driver. mlx5 answers from its firmware on every call: `mlx5e_get_fecparam` reads the
//! PPLM register, `mlx5e_stats_fec_get` PPLM again and the PPCNT physical-layer
//! statistical and counters groups (and PPHCR for the histogram on kernels that have it),
//! `get_eth_phy_stats` the PPCNT physical-layer group, `get_link_ext_state` the PDDR register
//! but only while the carrier is down; the down count comes from the counters the last full
//! statistics update cached. That is 4-6 firmware commands per netdev per collection, the
//! same order as the `ethtool` source's `ETHTOOL_GSTATS` (which refreshes every PPCNT group);
//! both run on the scrape's cadence.
//!
//! Failure semantics: a netdev whose driver lacks the op answers `EOPNOTSUPP` (FEC and the
//! eth-phy group on veth; FEC, statistics and the extended state on IPoIB): that part is no
//! data, not an error. A netdev that went away answers `ENODEV`: it is skipped. A kernel
//! without the family (before 5.6, or `CONFIG_ETHTOOL_NETLINK` off) makes the source absent.
//! A kernel that refuses `ETHTOOL_FLAG_STATS` on `LINKSTATE_GET` (before the down count)
//! or on `FEC_GET` (before FEC statistics) answers `EINVAL`; the request is sent again
//! without it. Any other failure, and a
//! reply that cannot be decoded or names another device, costs that part of that netdev
//! and is a [`CollectError`]; the other netdevs and the netdev's other requests are read.
//! The source keeps no state per netdev ([`crate::netdevs::let_go`] as the `dcb` source).

#[cfg(test)]
mod tests;
mod types;
pub(crate) mod wire;

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::CollectError;
use crate::fs::Fs;
use crate::netdevs::{Departures, FILTER_OPTIONS, NetdevFilter, is_same_netdev, let_go};
use crate::netlink::genl::GenlSocket;
use crate::netlink::rtnl::{RtnlSocket, getlink_error};
use crate::netlink::{DecodeError, Flow, Message, ethtool};
use crate::run::{Run, gather, standalone};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

pub use types::{
    ExtState, Fec, FecMode, HistogramBin, LaneCounter, LinkState, NetdevPhy, PhyStats, Snapshot,
};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "phy",
    help: "FEC mode and FEC corrected/uncorrectable blocks and bits per lane, PHY symbol errors, link state with the extended down reason and down count, over ethtool netlink (FEC_GET, STATS_GET, LINKSTATE_GET).",
    default_enabled: true,
    options: &FILTER_OPTIONS,
};

/// How long one netlink receive may wait.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The protocol of this source's errors ([`Origin::Netlink`]).
pub const PROTOCOL: &str = "ethtool netlink";

/// Reads FEC, PHY statistics and link state over ethtool netlink. Cloning it is cheap.
#[derive(Debug, Clone)]
pub struct PhySource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    /// The netdevs of the last collection.
    departures: Arc<Departures>,
    /// The generic netlink socket, ethtool family resolved, kept between collections: a
    /// scrape asks nlctrl nothing and opens nothing. `None` until first needed, and again
    /// after a request on it failed in a way that could leave replies behind.
    socket: Arc<Mutex<Option<GenlSocket>>>,
}

impl PhySource {
    /// Reads every selected netdev of the agent's network namespace.
    pub fn read(&self) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// Reads every selected netdev, one unit of `run` per netdev.
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
        let links = match RtnlSocket::open(RECEIVE_TIMEOUT).and_then(|mut s| s.dump_links()) {
            Ok(links) => links,
            Err(err) => {
                report.errors.push(getlink_error(&err));
                return report;
            }
        };
        // No selected netdev of this namespace (a fixture tree, another namespace's sysfs):
        // nothing to ask ethtool netlink, so no socket either.
        if !links
            .iter()
            .any(|l| l.name.as_ref().is_some_and(|n| selected.contains(n)))
        {
            report.absent = Some(format!(
                "none of the selected netdevs under {} is in the agent's network namespace; ethtool netlink reaches only those",
                class.display()
            ));
            return report;
        }
        {
            let mut kept = self.socket.lock().unwrap_or_else(|e| e.into_inner());
            if kept.is_none() {
                match open() {
                    Ok(socket) => *kept = Some(socket),
                    Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                        report.absent = Some(
                            "the kernel has no ethtool generic netlink family (CONFIG_ETHTOOL_NETLINK)"
                                .into(),
                        );
                        return report;
                    }
                    Err(err) => {
                        report.errors.push(CollectError::netlink(
                            None,
                            PROTOCOL,
                            "CTRL_CMD_GETFAMILY ethtool",
                            &err,
                        ));
                        return report;
                    }
                }
            }
        }
        let family = match self
            .socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(|s| s.family(ethtool::FAMILY))
        {
            Some(Ok(f)) => f.id,
            Some(Err(err)) => {
                report.errors.push(CollectError::netlink(
                    None,
                    PROTOCOL,
                    "CTRL_CMD_GETFAMILY ethtool",
                    &err,
                ));
                return report;
            }
            None => return report,
        };
        // One socket for the units that run in turn, kept for the next collection; a unit
        // that finds it held (by a request stuck in a wedged driver) opens its own.
        let (src, links) = (self.clone(), Arc::new(links));
        let socket = Arc::clone(&self.socket);
        let units = run.each(selected, 1, move |name| {
            let mut errors = Vec::new();
            let link = links
                .iter()
                .find(|link| is_same_netdev(src.fs.as_ref(), &src.sysfs, name, link, &mut errors));
            let Some(link) = link else {
                return (None, errors);
            };
            let held = socket.try_lock();
            let read = match held {
                Ok(mut kept) if kept.is_some() => match kept.as_mut() {
                    Some(shared) => read_netdev(shared, family, name, link.index, &mut errors),
                    None => Some(None),
                },
                _ => match open() {
                    Ok(mut own) => read_netdev(&mut own, family, name, link.index, &mut errors),
                    Err(err) => {
                        errors.push(CollectError::netlink(
                            Some(name),
                            PROTOCOL,
                            "CTRL_CMD_GETFAMILY ethtool",
                            &err,
                        ));
                        Some(None)
                    }
                },
            };
            // Outer: in the namespace (None when it vanished); inner: what it answered.
            (read, errors)
        });
        let read = gather(units, &mut report.errors);
        let in_namespace = read.len();
        let netdevs: Vec<NetdevPhy> = read.into_iter().flatten().collect();
        if in_namespace == 0 {
            report.absent = Some(format!(
                "none of the selected netdevs under {} is in the agent's network namespace; ethtool netlink reaches only those",
                class.display()
            ));
        }
        report.data = Some(Snapshot { netdevs });
        report
    }
}

impl Source for PhySource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        Ok(PhySource {
            fs: Arc::clone(&from.fs),
            sysfs: from.roots.sysfs.clone(),
            filter: NetdevFilter::from_options(from.options)?,
            departures: Arc::default(),
            socket: Arc::default(),
        })
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// A generic netlink socket with the ethtool family resolved.
fn open() -> io::Result<GenlSocket> {
    let mut socket = GenlSocket::open(RECEIVE_TIMEOUT)?;
    socket.family(ethtool::FAMILY)?;
    Ok(socket)
}

/// The three requests for one netdev. `None` when the netdev went away (`ENODEV`), else
/// what it answered (`Some(None)` when nothing at all).
fn read_netdev(
    socket: &mut GenlSocket,
    family: u16,
    name: &str,
    ifindex: u32,
    errors: &mut Vec<CollectError>,
) -> Option<Option<NetdevPhy>> {
    let mut gone = false;
    let mut part = Settle {
        name,
        gone: &mut gone,
        errors,
    };
    let fec_get = |socket: &mut GenlSocket, stats| {
        ask(
            socket,
            |seq| wire::encode_fec_get(family, ifindex, stats, seq),
            |m| wire::decode_fec(m, family, ifindex),
        )
    };
    let fec = match fec_get(socket, true) {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => fec_get(socket, false),
        other => other,
    };
    let fec = part.settle("ETHTOOL_MSG_FEC_GET", fec);
    let phy = part
        .settle(
            "ETHTOOL_MSG_STATS_GET",
            ask(
                socket,
                |seq| wire::encode_stats_get(family, ifindex, seq),
                |m| wire::decode_stats(m, family, ifindex),
            ),
        )
        .filter(|p: &PhyStats| p.symbol_errors.is_some());
    let linkstate = |socket: &mut GenlSocket, stats| {
        ask(
            socket,
            |seq| wire::encode_linkstate_get(family, ifindex, stats, seq),
            |m| wire::decode_linkstate(m, family, ifindex),
        )
    };
    let link = match linkstate(socket, true) {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => linkstate(socket, false),
        other => other,
    };
    let link = part.settle("ETHTOOL_MSG_LINKSTATE_GET", link);
    if gone {
        return None;
    }
    if fec.is_none() && phy.is_none() && link.is_none() {
        return Some(None);
    }
    Some(Some(NetdevPhy {
        name: name.to_owned(),
        fec,
        phy,
        link,
    }))
}

/// Turns the answers of one netdev's requests into data, errors and "it went away".
struct Settle<'a> {
    name: &'a str,
    gone: &'a mut bool,
    errors: &'a mut Vec<CollectError>,
}

impl Settle<'_> {
    fn settle<T>(&mut self, command: &str, result: io::Result<Option<T>>) -> Option<T> {
        match result {
            Ok(v) => v,
            Err(err) if err.raw_os_error() == Some(libc::ENODEV) => {
                *self.gone = true;
                None
            }
            Err(err) => {
                let command = format!("{command} {}", self.name);
                self.errors.push(CollectError::netlink(
                    Some(self.name),
                    PROTOCOL,
                    command,
                    &err,
                ));
                None
            }
        }
    }
}

/// Sends one GET and decodes its one reply; `Ok(None)` when the driver lacks the op
/// (`EOPNOTSUPP`).
fn ask<T>(
    socket: &mut GenlSocket,
    encode: impl FnOnce(u32) -> Vec<u8>,
    mut decode: impl FnMut(&Message<'_>) -> Result<T, DecodeError>,
) -> io::Result<Option<T>> {
    let mut out = None;
    let budget = socket.timeout() * 2;
    let asked = socket.request(encode, budget, |message| {
        out = Some(decode(message)?);
        Ok(Flow::Done)
    });
    match asked {
        Ok(()) => Ok(out),
        Err(err) if err.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
        Err(err) => Err(err),
    }
}
