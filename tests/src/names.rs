//! The `railscope_*` names railscope exports, and the names the rest of the repository
//! (rules, dashboards, doctor, OTLP, the inventory) refers to: a name referred to is a family
//! some golden exposition holds, a live-only family below, or one of the agent's volatile
//! families ([`VOLATILE_FAMILIES`]).

use std::collections::BTreeSet;

use crate::{VOLATILE_FAMILIES, workspace};

/// Series every agent exports that no golden file holds, each with the reason. The manual
/// must document each of them (checked below). Panels built only on these return no data on an
/// agent that reads a fixture tree, so an end-to-end run against fixture agents sees them empty:
/// * the `ethtool` and `dcb` collectors ask only netdevs of the agent's own network namespace
///   (fixture netdevs are not), and the netdev traffic counters come from rtnetlink alone;
/// * XID counts arrive from NVML event threads and are left out of the goldens (`gpu.rs`), though
///   the fake NVML's fault fixtures produce them;
/// * the agent's own volatile families (`VOLATILE_FAMILIES`) are exported by every agent and only
///   left out of the goldens because their values change.
pub const LIVE_ONLY: &[&str] = &[
    "railscope_pfc_pause_duration_seconds_total",
    "railscope_pfc_pause_frames_total",
    "railscope_pfc_pause_storm_events_total",
    "railscope_netdev_priority_discards_total",
    "railscope_netdev_out_of_buffer_discards_total",
    "railscope_netdev_phy_fec_corrected_bit_errors_total",
    "railscope_netdev_phy_symbol_errors_total",
    "railscope_netdev_phy_received_bits_total",
    "railscope_netdev_bytes_total",
    "railscope_netdev_errors_total",
    "railscope_netdev_drops_total",
    "railscope_netdev_carrier_changes_total",
    "railscope_dcb_pfc_enabled",
    "railscope_netdev_ecn_marked_packets_total",
    // The `phy` collector asks ethtool netlink of the agent's own namespace only, as `ethtool`.
    "railscope_phy_fec_info",
    "railscope_phy_fec_corrected_blocks_total",
    "railscope_phy_fec_uncorrectable_blocks_total",
    "railscope_phy_fec_corrected_bits_total",
    "railscope_phy_fec_lane_corrected_blocks_total",
    "railscope_phy_fec_lane_uncorrectable_blocks_total",
    "railscope_phy_fec_lane_corrected_bits_total",
    "railscope_phy_fec_codewords_total",
    "railscope_phy_symbol_errors_total",
    "railscope_phy_link_up",
    "railscope_phy_link_down_events_total",
    "railscope_phy_link_ext_state",
    // The kernel log: no fixture tree has one (tests/tests/exposition/kmsg.rs reads a file of
    // records, kmsg_syslog.rs the machine's own log).
    "railscope_kmsg_events_total",
    "railscope_kmsg_records_total",
    "railscope_kmsg_event_last_seen_seconds",
    "railscope_kmsg_dropped_events_total",
    "railscope_kmsg_gaps_total",
    "railscope_kmsg_reader_info",
    "railscope_gpu_xid_errors_total",
    // Present only while a sysfs read is blocked in the kernel.
    "railscope_sysfs_blocked_seconds",
    // Present only with an `expected` section in the config file (no fixture agent has one).
    "railscope_inventory_expected",
    "railscope_inventory_present",
    "railscope_inventory_expected_port_rate_bytes_per_second",
    "railscope_inventory_expected_port_width_lanes",
    "railscope_inventory_expected_pcie_link_speed_transfers_per_second",
    "railscope_inventory_expected_pcie_link_width_lanes",
    "railscope_inventory_expected_rail_neighbour_info",
    // The physical layer: module EEPROM, FEC and link state over ethtool netlink, devlink
    // health reporters. Fixture trees have no netdev with a module, a PHY or a devlink device
    // (the collectors ask the kernel's genetlink families of the agent's own namespace).
    "railscope_transceiver_info",
    "railscope_transceiver_lanes",
    "railscope_transceiver_supply_voltage_volts",
    "railscope_transceiver_rx_power_watts",
    "railscope_transceiver_rx_power_threshold_watts",
    "railscope_transceiver_tx_power_watts",
    "railscope_transceiver_tx_power_threshold_watts",
    "railscope_transceiver_tx_bias_amperes",
    "railscope_transceiver_tx_bias_threshold_amperes",
    "railscope_transceiver_temperature_celsius",
    "railscope_transceiver_temperature_threshold_celsius",
    "railscope_transceiver_lane_flag",
    "railscope_transceiver_module_flag",
    "railscope_transceiver_up",
    "railscope_transceiver_read_errors_total",
    "railscope_devlink_health_reporter_healthy",
    "railscope_devlink_health_reporter_errors_total",
    "railscope_devlink_health_reporter_recoveries_total",
    "railscope_devlink_health_reporter_last_dump_timestamp_seconds",
    "railscope_devlink_version_info",
    // The neighbour collector: fixture trees have no umad device and their netdevs hear no
    // LLDP (tests/tests/net/lldp.rs runs against lldpd; the SMP reader's tests on byte
    // replies), so their goldens hold the status of each link only; a cabled node has these.
    "railscope_neighbour_info",
    "railscope_neighbour_changes_total",
    "railscope_neighbour_last_seen_timestamp_seconds",
    "railscope_neighbour_ttl_seconds",
    "railscope_neighbour_max_frame_size_bytes",
    "railscope_neighbour_pfc_enabled",
    "railscope_neighbour_pfc_willing",
    "railscope_neighbour_link_width_lanes",
    "railscope_neighbour_rate_bytes_per_second",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
];

/// Every series name the golden files hold, the recording rules define, or the manual documents
/// as live-only.
pub fn known_series() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut exported = BTreeSet::new();
    for e in std::fs::read_dir(workspace().join("tests/golden")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "prom") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let name = line
                    .strip_prefix("# TYPE ")
                    .unwrap_or(line)
                    .split(['{', ' '])
                    .next()
                    .unwrap();
                if !name.is_empty() && !name.starts_with('#') {
                    exported.insert(name.to_string());
                }
            }
        }
    }
    assert!(exported.contains("railscope_rail_info"), "no golden files?");
    let mut readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let mut dirs = vec![workspace().join("docs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                readme += &std::fs::read_to_string(&path).unwrap();
            }
        }
    }
    for name in LIVE_ONLY {
        assert!(
            readme.contains(&format!("`{name}")) || readme.contains(&format!("{name}`")),
            "{name} is not documented in README.md or docs/"
        );
        exported.insert(name.to_string());
    }
    for family in VOLATILE_FAMILIES {
        if !family.ends_with('_') {
            exported.insert(family.to_string());
        }
    }
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();
    let recorded: BTreeSet<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .map(|r| r.trim().to_string())
        .collect();
    assert!(recorded.contains("railscope:port_rail:info"));
    (exported, recorded)
}

/// Words that look like metric names but are Rust crates of this workspace.
const CRATES: &[&str] = &[
    "railscope_collectors",
    "railscope_fake_nvml",
    "railscope_podresources",
    "railscope_tests",
];

/// Every `railscope_[a-z0-9_]+` word of `text` that is not part of a longer word or a
/// recording rule's name (`railscope:...`), nor a crate's name.
pub fn references(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut found = BTreeSet::new();
    for (i, _) in text.match_indices("railscope_") {
        if i > 0 && matches!(bytes[i - 1], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b':') {
            continue;
        }
        let len = text[i..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(text.len() - i);
        let name = &text[i..i + len];
        if !CRATES.contains(&name) {
            found.insert(name.to_owned());
        }
    }
    found
}

/// Whether `name` is a family `exported` holds: as a sample name, or as the agent's code names
/// a family (a counter without `_total`, an info family without `_info`). A name ending in `_`
/// is a prefix (of a regular expression, or a pattern in prose) and must begin some family.
pub fn is_exported(name: &str, exported: &BTreeSet<String>) -> bool {
    if name.ends_with('_') {
        return exported.iter().any(|e| e.starts_with(name));
    }
    let family = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|f| exported.contains(&format!("{f}_bucket")))
        .unwrap_or(name);
    ["", "_total", "_info"]
        .iter()
        .any(|suffix| exported.contains(&format!("{family}{suffix}")))
}

/// The names of `text` that are no family railscope exports.
pub fn unknown(text: &str, exported: &BTreeSet<String>) -> Vec<String> {
    references(text)
        .into_iter()
        .filter(|n| !is_exported(n, exported))
        .collect()
}
