//! Maps a [`Collection`] to metric families: the agent's own metrics first, then each
//! source's families in registry order. Mapping never touches the file system; the process
//! statistics are read before and passed in.
//!
//! A scrape may ask for some collectors only (`collect[]`, `exclude[]`): [`Selection`]. Its
//! collection then holds those collectors and what their mapping needs ([`Selection::runs`]:
//! `workload` resolves GPU and RDMA devices through the `gpu` and `infiniband` snapshots), and
//! only the chosen collectors' families and `railscope_collector_*` series are exposed. The
//! agent's own series stay: build info, collections and scrape requests, the file-system
//! guard's series, process statistics, the OTLP push's counters and the expected inventory
//! (whose present counts are exposed only for a chosen collector, as for a failed one).

pub mod dcb;
pub mod devlink;
pub mod ethtool;
pub mod gpu;
pub mod hwmon;
pub mod infiniband;
pub mod kmsg;
pub mod neighbour;
pub mod netdev;
pub mod pci;
pub mod phy;
pub mod transceiver;
pub mod workload;

use std::collections::BTreeSet;

use railscope_collectors::{Collection, SourceData, Totals};

use crate::build_info;
use crate::cli::expected::Inventory;
use crate::exposition::Family;
use crate::process::ProcessStats;

/// Which collectors one scrape exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Every enabled collector.
    All,
    /// These (enabled) collectors only.
    Only(BTreeSet<&'static str>),
}

impl Selection {
    /// Whether collector `name`'s series are exposed.
    pub(crate) fn admits(&self, name: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(names) => names.contains(name),
        }
    }

    /// The collectors to run for it among `enabled`: the chosen ones and those whose data
    /// their mapping reads (`None`: every one).
    pub(crate) fn runs(&self, enabled: &[&'static str]) -> Option<Vec<&'static str>> {
        let Selection::Only(names) = self else {
            return None;
        };
        let mut runs: BTreeSet<&'static str> = names.clone();
        for name in names {
            runs.extend(needs(name));
        }
        Some(
            enabled
                .iter()
                .copied()
                .filter(|n| runs.contains(n))
                .collect(),
        )
    }
}

/// The collectors whose data the mapping of collector `name` reads.
fn needs(name: &str) -> &'static [&'static str] {
    match name {
        "workload" => &["gpu", "infiniband"],
        _ => &[],
    }
}

/// What `/metrics` serves and OTLP pushes for one collection: its families, the agent's
/// own process statistics (read now; absent, and logged at debug, when they cannot be), and
/// `extra`, the families of the agent's other parts (the push's counters when the push runs).
pub(crate) fn exposed(
    collection: &Collection,
    totals: &Totals,
    expected: &Inventory,
    extra: Vec<Family>,
    selection: &Selection,
) -> Vec<Family> {
    let process = match crate::process::read() {
        Ok(p) => Some(p),
        Err(error) => {
            tracing::debug!(%error, "Failed to read the agent's own process statistics.");
            None
        }
    };
    let mut out = families(collection, totals, process.as_ref(), expected, selection);
    out.extend(extra);
    out
}

/// Every family of one scrape (of the collectors `selection` admits), with the expected
/// inventory's families when one is configured.
pub(crate) fn families(
    collection: &Collection,
    totals: &Totals,
    process: Option<&ProcessStats>,
    expected: &Inventory,
    selection: &Selection,
) -> Vec<Family> {
    let mut out = self_families(collection, totals, selection);
    if let Some(process) = process {
        out.extend(process_families(process));
    }
    for outcome in &collection.outcomes {
        if !selection.admits(outcome.name) {
            continue;
        }
        match &outcome.data {
            Some(SourceData::Infiniband(snapshot)) => out.extend(infiniband::families(snapshot)),
            Some(SourceData::Netdev(snapshot)) => out.extend(netdev::families(snapshot)),
            Some(SourceData::Ethtool(snapshot)) => out.extend(ethtool::families(snapshot)),
            Some(SourceData::Dcb(snapshot)) => out.extend(dcb::families(snapshot)),
            Some(SourceData::Devlink(snapshot)) => out.extend(devlink::families(snapshot)),
            Some(SourceData::Gpu(snapshot)) => out.extend(gpu::families(snapshot)),
            Some(SourceData::Pci(snapshot)) => out.extend(pci::pci_families(snapshot)),
            Some(SourceData::Hwmon(snapshot)) => out.extend(hwmon::families(snapshot)),
            Some(SourceData::Neighbour(snapshot)) => out.extend(neighbour::families(snapshot)),
            Some(SourceData::Transceiver(snapshot)) => out.extend(transceiver::families(snapshot)),
            Some(SourceData::Topology(snapshot)) => out.extend(pci::topology_families(snapshot)),
            Some(SourceData::Host(snapshot)) => out.extend(pci::host_families(snapshot)),
            Some(SourceData::Kmsg(snapshot)) => out.extend(kmsg::families(snapshot)),
            Some(SourceData::Phy(snapshot)) => out.extend(phy::families(snapshot)),
            Some(SourceData::Workload(snapshot)) => out.extend(workload::families(
                snapshot,
                collection.outcomes.iter().find_map(|o| match &o.data {
                    Some(SourceData::Gpu(s)) => Some(s),
                    _ => None,
                }),
                collection.outcomes.iter().find_map(|o| match &o.data {
                    Some(SourceData::Infiniband(s)) => Some(s),
                    _ => None,
                }),
            )),
            None => {}
        }
    }
    let inventory = crate::inventory::families(expected, collection, &out, &|source| {
        selection.admits(source)
    });
    out.extend(inventory);
    out
}

fn self_families(collection: &Collection, totals: &Totals, selection: &Selection) -> Vec<Family> {
    let mut build = Family::info(
        "railscope_build",
        "railscope's version and the source revision it was built from.",
    );
    build.push(
        [
            ("version", build_info::VERSION.to_owned()),
            ("revision", build_info::REVISION.to_owned()),
        ],
        1u64,
    );
    let mut success = Family::gauge(
        "railscope_collector_success",
        "1 when the collector ran to completion within the scrape deadline in the last collection.",
    );
    let mut duration = Family::gauge(
        "railscope_collector_duration_seconds",
        "How long the collector ran in the last collection.",
    );
    let mut errors = Family::counter(
        "railscope_collector_errors",
        "Read, parse and deadline errors of the collector since start; each cost only its own series.",
    );
    let mut last_errors = Family::gauge(
        "railscope_collector_last_errors",
        "Errors the collector reported in the last collection.",
    );
    let mut runs = Family::counter(
        "railscope_collector_runs",
        "Times the collector ran since start; concurrent scrapes (with or without collect[] and exclude[] filters) share a run.",
    );
    for outcome in collection
        .outcomes
        .iter()
        .filter(|o| selection.admits(o.name))
    {
        let labels = vec![("collector", outcome.name.to_owned())];
        success.push(labels.clone(), outcome.success);
        duration.push(labels.clone(), outcome.duration.as_secs_f64());
        last_errors.push(labels, outcome.errors as u64);
    }
    for (name, total) in totals.errors.iter().filter(|(n, _)| selection.admits(n)) {
        errors.push([("collector", (*name).to_owned())], *total);
    }
    for (name, total) in totals.runs.iter().filter(|(n, _)| selection.admits(n)) {
        runs.push([("collector", (*name).to_owned())], *total);
    }
    let mut collections = Family::counter(
        "railscope_collections",
        "Collections run since start; concurrent scrapes share one collection.",
    );
    collections.push_unlabelled(totals.collections);
    let mut requests = Family::counter(
        "railscope_scrape_requests",
        "Scrapes of the metrics endpoint since start, including those that shared a running collection.",
    );
    requests.push_unlabelled(totals.requests);
    let mut blocked = Family::gauge(
        "railscope_sysfs_blocked_seconds",
        "How long a read under this device directory has been blocked in the kernel; the device's series are skipped until it returns.",
    );
    // Blocked now, and blocked when this collection started (its series were skipped even if
    // the read returned since).
    let earlier = collection
        .blocked_at_start
        .iter()
        .filter(|d| !totals.blocked.iter().any(|now| now.device == d.device));
    for device in totals.blocked.iter().chain(earlier) {
        blocked.push(
            [("path", device.device.clone())],
            device.blocked_for.as_secs_f64(),
        );
    }
    let mut timeouts = Family::counter(
        "railscope_sysfs_read_timeouts",
        "File-system reads that blocked in the kernel past their wait (half the time left to the deadline), since start.",
    );
    timeouts.push_unlabelled(totals.fs_timeouts);
    let mut kept = Family::gauge(
        "railscope_open_files_kept",
        "sysfs and procfs attribute files kept open between scrapes and re-read in place (bounded by half the descriptor limit; closed when not read for two minutes).",
    );
    if let Some(n) = totals.files_kept {
        kept.push_unlabelled(n as u64);
    }
    let mut refused = Family::gauge(
        "railscope_sysfs_refused_files",
        "Attribute files that failed with EINVAL, EOPNOTSUPP or EACCES (the driver refuses them) and are not read again for a back-off (1 minute, doubling to 16): counted once in railscope_collector_errors_total, their series absent.",
    );
    refused.push_unlabelled(totals.refused_files as u64);
    vec![
        build,
        success,
        duration,
        errors,
        last_errors,
        runs,
        collections,
        requests,
        blocked,
        timeouts,
        kept,
        refused,
    ]
}

fn process_families(p: &ProcessStats) -> Vec<Family> {
    let mut cpu = Family::counter(
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
    );
    cpu.push_unlabelled(p.cpu_seconds);
    let mut rss = Family::gauge(
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
    );
    rss.push_unlabelled(p.resident_memory_bytes);
    let mut vsz = Family::gauge(
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
    );
    vsz.push_unlabelled(p.virtual_memory_bytes);
    let mut open = Family::gauge("process_open_fds", "Number of open file descriptors.");
    open.push_unlabelled(p.open_fds);
    let mut max = Family::gauge(
        "process_max_fds",
        "Maximum number of open file descriptors.",
    );
    if let Some(m) = p.max_fds {
        max.push_unlabelled(m);
    }
    let mut start = Family::gauge(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
    );
    start.push_unlabelled(p.start_time_seconds);
    let mut threads = Family::gauge("process_threads", "Number of OS threads in the process.");
    threads.push_unlabelled(p.threads);
    vec![cpu, rss, vsz, open, max, start, threads]
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use railscope_collectors::BlockedDevice;

    use super::*;

    fn blocked(device: &str, secs: u64) -> BlockedDevice {
        BlockedDevice {
            device: device.to_owned(),
            path: PathBuf::from(format!("{device}/ports/1/state")),
            blocked_for: Duration::from_secs(secs),
        }
    }

    fn blocked_paths(collection: &Collection, totals: &Totals) -> Vec<(String, f64)> {
        let families = self_families(collection, totals, &Selection::All);
        let family = families
            .iter()
            .find(|f| f.name == "railscope_sysfs_blocked_seconds")
            .unwrap();
        family
            .samples
            .iter()
            .map(|s| (s.labels[0].1.as_str().to_owned(), s.value.as_f64()))
            .collect()
    }

    /// A read that returns while a collection runs: the collection skipped the device, so the
    /// scrape still names it as blocked, although the guard has cleared it by then (a scrape
    /// showed neither the device nor its blocked series).
    #[test]
    fn a_device_blocked_when_the_collection_started_is_named_though_it_returned_since() {
        let collection = Collection {
            outcomes: Vec::new(),
            sequence: 1,
            blocked_at_start: vec![blocked("class/infiniband/mlx5_1", 3)],
        };
        let cleared = Totals::default();
        assert_eq!(
            blocked_paths(&collection, &cleared),
            [("class/infiniband/mlx5_1".to_owned(), 3.0)]
        );
        // Blocked still: named once, for as long as it is blocked now.
        let still = Totals {
            blocked: vec![blocked("class/infiniband/mlx5_1", 5)],
            ..Totals::default()
        };
        assert_eq!(
            blocked_paths(&collection, &still),
            [("class/infiniband/mlx5_1".to_owned(), 5.0)]
        );
        // Neither then nor now: nothing.
        let clean = Collection {
            blocked_at_start: Vec::new(),
            ..collection
        };
        assert!(blocked_paths(&clean, &cleared).is_empty());
    }
}
