//! The `ethtool` source: driver statistics of netdevs, as `ethtool -S` shows them.
//!
//! Kernel interface: the `SIOCETHTOOL` ioctl with `ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS` and
//! `ETHTOOL_GSTATS` for the `ETH_SS_STATS` string set (`net/ethtool/ioctl.c`,
//! `include/uapi/linux/ethtool.h`; `ioctl` holds the `unsafe`). Driver-private statistics
//! have no netlink equivalent, and the per-priority PFC counters of mlx5
//! (`drivers/net/ethernet/mellanox/mlx5/core/en_stats.c`) exist nowhere else.
//!
//! Which netdevs: [`NetdevFilter`] (the netdevs behind RDMA ports and the physical netdevs by
//! default; `device-include` / `device-exclude`), applied before anything of a netdev is read.
//! Which statistics: those [`names::parse`] knows (PFC pause frames, durations and transitions,
//! pause storms, global pause, per-priority traffic, discards and ECN marks, RoCE-relevant port
//! counters), plus any other statistic whose name `metrics-include` matches, untouched.
//!
//! Failure semantics: a netdev without statistics (`EOPNOTSUPP`) is no data. A netdev that is
//! not in the agent's network namespace (`ENODEV`: `--path.sysfs` names another namespace's
//! sysfs, or the netdev vanished after it was listed) is skipped quietly; when that is every
//! selected netdev, the source reports itself absent with the reason, logged once. Any other
//! failure, including a string set that changed between `GSTRINGS` and `GSTATS` twice in a
//! row, costs that netdev's series only and is a [`CollectError`].
//!
//! Nothing of a netdev outlives it: the source keeps no state per netdev (string sets are
//! read with the statistics, every time), and the identity files it read of a netdev that
//! left the selection are read once more in the next collection so that the file system
//! closes them ([`crate::netdevs::let_go`]).

#[cfg(any(test, feature = "testing"))]
pub mod fake;
pub(crate) mod ioctl;
pub mod names;
#[cfg(test)]
mod proptests;
pub mod reader;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use regex::Regex;

use crate::error::{CollectError, ErrorKind};
use crate::fs::{Fs, Roots};
use crate::netdevs::{Departures, FILTER_OPTIONS, NetdevFilter, is_same_netdev, let_go};
use crate::netlink::rtnl::{self, Link, RtnlSocket, getlink_error};
use crate::run::{Run, standalone};
use crate::source::{
    Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec, regex_option,
};
pub use names::Stat;
pub use reader::{Error, IoctlReader, StatsReader};

/// The options: the netdev filter and `metrics-include`.
pub const OPTIONS: [OptionSpec; 3] = [
    FILTER_OPTIONS[0],
    FILTER_OPTIONS[1],
    OptionSpec {
        name: "metrics-include",
        help: "Regular expression (unanchored) of other driver statistics (ethtool -S names) to export as railscope_ethtool_stat_total{netdev,stat}; none by default.",
        kind: OptionKind::Regex,
    },
];

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "ethtool",
    help: "Driver statistics over the SIOCETHTOOL ioctl (ethtool -S): per-priority PFC pause frames and durations, pause storms, per-priority traffic, discards and ECN marks.",
    default_enabled: true,
    options: &OPTIONS,
};

/// What the source read in one collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Netdevs whose driver reported statistics, sorted by name.
    pub netdevs: Vec<NetdevStats>,
}

/// The statistics of one netdev.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetdevStats {
    /// The netdev's name.
    pub name: String,
    /// How many statistics the driver reported in all.
    pub reported: usize,
    /// The statistics railscope knows, in the driver's order; each [`Stat`] at most once
    /// (the first wins).
    pub known: Vec<(Stat, u64)>,
    /// Other statistics `metrics-include` matched, named as the driver names them (trimmed),
    /// in the driver's order; each name at most once.
    pub other: Vec<(String, u64)>,
}

impl NetdevStats {
    /// Sorts a netdev's raw statistics into known ones and, when `include` matches, others.
    pub fn from_raw(name: &str, raw: Vec<(String, u64)>, include: Option<&Regex>) -> Self {
        let reported = raw.len();
        let mut known = Vec::new();
        let mut seen_known = BTreeSet::new();
        let mut other = Vec::new();
        let mut seen_other = BTreeSet::new();
        for (stat_name, value) in raw {
            match names::parse(&stat_name) {
                Some(stat) => {
                    if seen_known.insert(stat) {
                        known.push((stat, value));
                    }
                }
                None => {
                    if include.is_some_and(|re| re.is_match(&stat_name))
                        && seen_other.insert(stat_name.clone())
                    {
                        other.push((stat_name, value));
                    }
                }
            }
        }
        NetdevStats {
            name: name.to_owned(),
            reported,
            known,
            other,
        }
    }
}

/// Reads driver statistics of the selected netdevs.
#[derive(Debug, Clone)]
pub struct EthtoolSource {
    /// Ask only netdevs that are the same link in the agent's network namespace (same
    /// name, ifindex and address in rtnetlink as in `--path.sysfs`), so a fixture root or
    /// another namespace's sysfs never makes the ioctl reach a namesake here.
    live_namespace_only: bool,
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    metrics_include: Option<Regex>,
    reader: Arc<dyn StatsReader>,
    /// The netdevs of the last collection.
    departures: Arc<Departures>,
}

impl EthtoolSource {
    /// A source selecting netdevs under `roots` with `filter`, exporting the other statistics
    /// `metrics_include` matches, reading through `reader`.
    pub fn new(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        filter: NetdevFilter,
        metrics_include: Option<Regex>,
        reader: Arc<dyn StatsReader>,
    ) -> Self {
        EthtoolSource {
            live_namespace_only: false,
            fs,
            sysfs: roots.sysfs.clone(),
            filter,
            metrics_include,
            reader,
            departures: Arc::default(),
        }
    }

    /// Reads every selected netdev.
    pub fn read(&self) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// Reads one netdev's statistics, unless it is in another network namespace (not in
    /// `live`, the rtnetlink dump, when there is one).
    fn read_netdev(
        &self,
        name: &str,
        live: Option<&[Link]>,
        errors: &mut Vec<CollectError>,
    ) -> Read {
        if let Some(links) = live
            && !links
                .iter()
                .any(|link| is_same_netdev(self.fs.as_ref(), &self.sysfs, name, link, errors))
        {
            return Read::Elsewhere;
        }
        match self.reader.read(name) {
            Ok(raw) if raw.is_empty() => Read::Nothing,
            Ok(raw) => Read::Stats(NetdevStats::from_raw(
                name,
                raw,
                self.metrics_include.as_ref(),
            )),
            Err(err) if err.errno() == Some(libc::ENODEV) => Read::Elsewhere,
            Err(err) => {
                errors.push(collect_error(name, &err));
                Read::Nothing
            }
        }
    }

    /// Reads every selected netdev, one unit of `run` per netdev (an ioctl stuck in a wedged
    /// driver costs that netdev only).
    pub fn read_in(&self, run: &Run<'_>) -> Report<Snapshot> {
        let selected = self.filter.select(self.fs.as_ref(), &self.sysfs);
        let departed = self.departures.update(&selected);
        let_go(self.fs.as_ref(), &self.sysfs, &departed);
        let mut netdevs = Vec::new();
        let mut errors = Vec::new();
        let mut elsewhere = 0;
        let live = if self.live_namespace_only && !selected.is_empty() {
            match RtnlSocket::open(rtnl::RECEIVE_TIMEOUT).and_then(|mut s| s.dump_links()) {
                Ok(links) => Some(links),
                Err(err) => {
                    errors.push(getlink_error(&err));
                    return Report {
                        data: Some(Snapshot { netdevs }),
                        errors,
                        absent: None,
                    };
                }
            }
        } else {
            None
        };
        let count = selected.len();
        let (src, live) = (self.clone(), Arc::new(live));
        let units = run.each(selected, 1, move |name| {
            let mut errors = Vec::new();
            let read = src.read_netdev(name, live.as_deref(), &mut errors);
            (read, errors)
        });
        for (_, unit) in units {
            let Some((read, mut unit_errors)) = unit.done() else {
                continue; // late: its timeout is the run's error
            };
            errors.append(&mut unit_errors);
            match read {
                Read::Stats(stats) => netdevs.push(stats),
                Read::Elsewhere => elsewhere += 1,
                Read::Nothing => {}
            }
        }
        let absent = (elsewhere > 0 && elsewhere == count).then(|| {
            format!(
                "none of the {elsewhere} selected netdevs under {} exists in the agent's network namespace (ENODEV); --path.sysfs may be another namespace's sysfs",
                self.sysfs.join("class/net").display()
            )
        });
        Report {
            data: Some(Snapshot { netdevs }),
            errors,
            absent,
        }
    }
}

impl Source for EthtoolSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs, options) = (from.roots, Arc::clone(&from.fs), from.options);
        let mut source = EthtoolSource::new(
            roots,
            fs,
            NetdevFilter::from_options(options)?,
            regex_option(options, "metrics-include")?,
            Arc::new(IoctlReader),
        );
        source.live_namespace_only = true;
        Ok(source)
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// What reading one netdev found.
enum Read {
    Stats(NetdevStats),
    /// Not in the agent's network namespace.
    Elsewhere,
    /// No statistics (or a failure, recorded).
    Nothing,
}

/// A [`CollectError`] for a netdev whose read failed, naming the netdev and the ioctl, so
/// each netdev and ioctl is logged once.
fn collect_error(netdev: &str, err: &Error) -> CollectError {
    let kind = match err {
        Error::Socket { .. } | Error::Ioctl { .. } => ErrorKind::Io,
        Error::Malformed { .. } => ErrorKind::Parse,
        Error::SetChanged { .. } => ErrorKind::Unavailable,
    };
    CollectError::ioctl(netdev, err.ioctl(), kind, err.errno(), err.to_string())
}
