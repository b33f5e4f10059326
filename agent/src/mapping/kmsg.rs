//! The `kmsg` source's families: kernel-log events by kind, with a fixed label set, and which
//! reader reads the log.

use railscope_collectors::sources::kmsg::Snapshot;

use crate::exposition::Family;

/// Events by kind, with their identifiers (`pci_address`; `device` and `port`: the RDMA port
/// of a link down; `code`: the XID or SXID number; `severity`: AER and SXID), and the time of
/// the last of each; records read and dropped; gaps; the reader in use.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    if !snapshot.reading {
        return Vec::new();
    }
    let mut events = Family::counter(
        "railscope_kmsg_events",
        "Kernel-log events by kind (xid, sxid, mlx5_cmd_timeout, mlx5_cmd_failed, mlx5_health, mlx5_module, pcie_link_down, pcie_aer, pcie_power, ib_link_down), read from the kernel log (/dev/kmsg or syslog(2)) since the agent started, the boot's backlog included.",
    );
    let mut last = Family::gauge(
        "railscope_kmsg_event_last_seen_seconds",
        "When the kernel logged the last event of this kind and labels, in seconds since the Unix epoch: unlike the counter, an agent restart that re-reads the backlog does not move it.",
    );
    events.reserve(snapshot.events.len());
    last.reserve(snapshot.events.len());
    for event in &snapshot.events {
        let label = |name: &str| {
            event
                .labels
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let code = match event.kind {
            "xid" => label("xid"),
            "sxid" => label("sxid"),
            _ => String::new(),
        };
        let labels = [
            ("kind", event.kind.to_owned()),
            ("pci_address", label("pci_address")),
            ("device", label("device")),
            ("port", label("port")),
            ("code", code),
            ("severity", label("severity")),
        ];
        events.push(labels.clone(), event.count);
        last.push(labels, event.last_seen);
    }
    let mut records = Family::counter(
        "railscope_kmsg_records",
        "Kernel-log records read, matching or not.",
    );
    records.push_unlabelled(snapshot.records);
    let mut dropped = Family::counter(
        "railscope_kmsg_dropped_events",
        "Matching records not counted because the most event series (4096) already exist.",
    );
    dropped.push_unlabelled(snapshot.dropped);
    let mut gaps = Family::counter(
        "railscope_kmsg_gaps",
        "Times the reader found that records had left the kernel's ring buffer before it read them (EPIPE from /dev/kmsg; a syslog(2) read without the last record seen): events in between may be uncounted.",
    );
    gaps.push_unlabelled(snapshot.gaps);
    let mut families = vec![events, last, records, dropped, gaps];
    if let Some(reader) = snapshot.reader {
        let mut info = Family::info(
            "railscope_kmsg_reader",
            "Which way the kernel log is read: device (/dev/kmsg or a file of its records) or syslog (syslog(2) SYSLOG_ACTION_READ_ALL, where /dev/kmsg cannot be opened or --collector.kmsg.reader=syslog).",
        );
        info.push([("reader", reader.as_str())], 1u64);
        families.push(info);
    }
    families
}
