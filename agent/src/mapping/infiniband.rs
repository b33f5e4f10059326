//! Maps the `infiniband` source's snapshot to metric families.
//!
//! Names: `railscope_ib_device_*` and `railscope_ib_port_*` for what the InfiniBand core
//! exposes for every RDMA device, `railscope_rdma_*_hw_stat_total{counter}` for driver
//! counters, whose names differ by driver and are passed through untouched. Descriptive
//! strings sit on `*_info` series. Values are converted to base units: PMA data counters
//! count 4-byte words (×4, from the collector's PMA table `pma::bytes_per_unit`), rates are
//! bytes per second, `lifespan` is seconds.

use std::sync::Arc;

use railscope_collectors::sources::infiniband::{PmaCounter, Port, Snapshot, pma};

use crate::exposition::{Family, Label, Labels};

/// How a known PMA counter is exported.
struct PmaFamily {
    counter: &'static str,
    family: &'static str,
    help: &'static str,
    direction: Option<&'static str>,
}

const fn pma(
    counter: &'static str,
    family: &'static str,
    help: &'static str,
    direction: Option<&'static str>,
) -> PmaFamily {
    PmaFamily {
        counter,
        family,
        help,
        direction,
    }
}

const RX: Option<&str> = Some("rx");
const TX: Option<&str> = Some("tx");

/// Known PMA counters. Pairs that differ only in direction share a family with a
/// `direction` label.
const PMA_FAMILIES: &[PmaFamily] = &[
    pma(
        "port_rcv_data",
        "railscope_ib_port_data_bytes",
        "Data octets received and transmitted on the port (PMA PortRcvData/PortXmitData, which count 4-byte words; converted to bytes).",
        RX,
    ),
    pma("port_xmit_data", "railscope_ib_port_data_bytes", "", TX),
    pma(
        "port_rcv_packets",
        "railscope_ib_port_packets",
        "Packets received and transmitted on the port (PMA PortRcvPkts/PortXmitPkts).",
        RX,
    ),
    pma("port_xmit_packets", "railscope_ib_port_packets", "", TX),
    pma(
        "unicast_rcv_packets",
        "railscope_ib_port_unicast_packets",
        "Unicast packets received and transmitted (PMA PortCountersExtended).",
        RX,
    ),
    pma(
        "unicast_xmit_packets",
        "railscope_ib_port_unicast_packets",
        "",
        TX,
    ),
    pma(
        "multicast_rcv_packets",
        "railscope_ib_port_multicast_packets",
        "Multicast packets received and transmitted (PMA PortCountersExtended).",
        RX,
    ),
    pma(
        "multicast_xmit_packets",
        "railscope_ib_port_multicast_packets",
        "",
        TX,
    ),
    pma(
        "symbol_error",
        "railscope_ib_port_symbol_errors",
        "Minor link errors detected on one or more physical lanes (PMA SymbolErrorCounter, 16-bit, saturates).",
        None,
    ),
    pma(
        "link_error_recovery",
        "railscope_ib_port_link_error_recovery",
        "Successful link error recovery processes (PMA LinkErrorRecoveryCounter, 8-bit, saturates).",
        None,
    ),
    pma(
        "link_downed",
        "railscope_ib_port_link_downed",
        "Times the link error recovery process failed and the link went down (PMA LinkDownedCounter, 8-bit, saturates).",
        None,
    ),
    pma(
        "port_rcv_errors",
        "railscope_ib_port_receive_errors",
        "Packets with errors received on the port (PMA PortRcvErrors, 16-bit, saturates).",
        None,
    ),
    pma(
        "port_rcv_remote_physical_errors",
        "railscope_ib_port_receive_remote_physical_errors",
        "Packets received marked with the EBP delimiter (PMA PortRcvRemotePhysicalErrors, 16-bit, saturates).",
        None,
    ),
    pma(
        "port_rcv_switch_relay_errors",
        "railscope_ib_port_receive_switch_relay_errors",
        "Packets discarded because they could not be forwarded by the switch relay (PMA PortRcvSwitchRelayErrors, 16-bit, saturates).",
        None,
    ),
    pma(
        "port_xmit_discards",
        "railscope_ib_port_transmit_discards",
        "Outbound packets discarded because the port was down or congested (PMA PortXmitDiscards, 16-bit, saturates).",
        None,
    ),
    pma(
        "port_xmit_constraint_errors",
        "railscope_ib_port_transmit_constraint_errors",
        "Packets not transmitted because of outbound raw filtering (PMA PortXmitConstraintErrors, 8-bit, saturates).",
        None,
    ),
    pma(
        "port_rcv_constraint_errors",
        "railscope_ib_port_receive_constraint_errors",
        "Packets discarded because of inbound raw filtering (PMA PortRcvConstraintErrors, 8-bit, saturates).",
        None,
    ),
    pma(
        "local_link_integrity_errors",
        "railscope_ib_port_local_link_integrity_errors",
        "Times local physical errors exceeded the threshold (PMA LocalLinkIntegrityErrors, 4-bit, saturates).",
        None,
    ),
    pma(
        "excessive_buffer_overrun_errors",
        "railscope_ib_port_excessive_buffer_overrun_errors",
        "Times consecutive flow control update periods had buffer overrun (PMA ExcessiveBufferOverrunErrors, 4-bit, saturates).",
        None,
    ),
    pma(
        "VL15_dropped",
        "railscope_ib_port_vl15_dropped",
        "Incoming VL15 (subnet management) packets dropped for lack of buffers (PMA VL15Dropped, 16-bit, saturates).",
        None,
    ),
    pma(
        "port_xmit_wait",
        "railscope_ib_port_transmit_wait",
        "Ticks during which the port had data to transmit but no flow-control credits (PMA PortXmitWait, 32-bit, saturates).",
        None,
    ),
];

fn device_port(device: &str, port: &Port) -> Labels {
    smallvec::smallvec![
        ("device", Label::shared(device)),
        ("port", Label::shared(&port.number.to_string())),
    ]
}

/// A port's labels (shared) and `extra` ones.
fn with(labels: &[(&'static str, Label)], extra: &[(&'static str, &str)]) -> Labels {
    let mut out = Labels::from(labels);
    out.extend(extra.iter().map(|(k, v)| (*k, Label::from(*v))));
    out
}

/// A port's labels (shared) and its `counter` label (shared with the snapshot).
fn with_counter(labels: &[(&'static str, Label)], counter: &Arc<str>) -> Labels {
    let mut out = Labels::from(labels);
    out.push(("counter", Label::Shared(Arc::clone(counter))));
    out
}

/// Maps a snapshot to its families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let ports: Vec<(&Port, Labels)> = ports(snapshot).collect();
    let mut out = device_families(snapshot);
    out.extend(port_link_families(&ports));
    out.extend(pma_families(&ports));
    out.extend(port_hw_families(&ports));
    out.extend(gid_families(&ports));
    out
}

/// Every port of every device with its `device` and `port` labels, in snapshot order.
fn ports(snapshot: &Snapshot) -> impl Iterator<Item = (&Port, Labels)> {
    snapshot.devices.iter().flat_map(|device| {
        device
            .ports
            .iter()
            .map(move |port| (port, device_port(&device.name, port)))
    })
}

/// Per device: identity, read errors and device-level driver counters.
fn device_families(snapshot: &Snapshot) -> Vec<Family> {
    let mut device_info = Family::info(
        "railscope_ib_device",
        "RDMA device identity from /sys/class/infiniband; labels absent on this device are empty.",
    );
    let mut device_errors = Family::gauge(
        "railscope_ib_device_read_errors",
        "Files of this RDMA device that failed to read or parse in the last collection.",
    );
    let mut device_hw = Family::counter(
        "railscope_rdma_device_hw_stat",
        "Device-level driver counter from <device>/hw_counters, named as the driver names it.",
    );
    let mut device_lifespan = Family::gauge(
        "railscope_rdma_device_hw_stats_lifespan_seconds",
        "How long the kernel caches device-level hw_counters values (hw_counters/lifespan).",
    );
    for device in &snapshot.devices {
        let name = device.name.as_str();
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        device_info.push(
            [
                ("device", name.to_owned()),
                ("driver", opt(&device.driver)),
                (
                    "node_type",
                    device
                        .node_type
                        .as_ref()
                        .map(|t| t.name.clone())
                        .unwrap_or_default(),
                ),
                ("node_guid", opt(&device.node_guid)),
                ("sys_image_guid", opt(&device.sys_image_guid)),
                ("fw_ver", opt(&device.fw_ver)),
                ("hca_type", opt(&device.hca_type)),
                ("board_id", opt(&device.board_id)),
                ("pci_address", opt(&device.pci_address)),
                (
                    "numa_node",
                    device.numa_node.map(|n| n.to_string()).unwrap_or_default(),
                ),
            ],
            1u64,
        );
        device_errors.push([("device", name.to_owned())], device.errors);
        let device_label = Label::shared(name);
        for counter in &device.hw_counters {
            device_hw.push(
                [
                    ("device", device_label.clone()),
                    ("counter", Label::Shared(Arc::clone(&counter.name))),
                ],
                counter.value,
            );
        }
        if let Some(ms) = device.hw_counters_lifespan_ms {
            device_lifespan.push([("device", name.to_owned())], ms as f64 / 1000.0);
        }
    }
    vec![device_info, device_errors, device_hw, device_lifespan]
}

/// Per port: its description, states, rate and width, LIDs and MTUs.
fn port_link_families(ports: &[(&Port, Labels)]) -> Vec<Family> {
    let mut port_info = Family::info(
        "railscope_ib_port",
        "RDMA port description: link layer, state and physical state names, lane speed name, netdev, and where driver counters (netlink, sysfs) and the active MTU (verbs, netdev) came from.",
    );
    let mut state = Family::gauge(
        "railscope_ib_port_state",
        "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.",
    );
    let mut phys_state = Family::gauge(
        "railscope_ib_port_phys_state",
        "Physical port state: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 Phy Test.",
    );
    let mut rate = Family::gauge(
        "railscope_ib_port_rate_bytes_per_second",
        "Active data rate of the port (all lanes) from ports/<N>/rate.",
    );
    let mut width = Family::gauge(
        "railscope_ib_port_link_width_lanes",
        "Active link width of the port in lanes (1X, 2X, 4X, 8X, 12X).",
    );
    let mut lid = Family::gauge("railscope_ib_port_lid", "Base LID of an InfiniBand port.");
    let mut sm_lid = Family::gauge(
        "railscope_ib_port_sm_lid",
        "LID of the subnet manager an InfiniBand port reports to.",
    );
    let mut netdev_mtu = Family::gauge(
        "railscope_ib_port_netdev_mtu_bytes",
        "MTU of the netdev behind a RoCE or iWARP port.",
    );
    let mut active_mtu = Family::gauge(
        "railscope_ib_port_active_mtu_bytes",
        "Active RDMA MTU of the port: from ibv_query_port when libibverbs can open the device, else (RoCE, iWARP) derived from the netdev MTU with the driver's rule.",
    );
    let mut max_mtu = Family::gauge(
        "railscope_ib_port_max_mtu_bytes",
        "Largest RDMA MTU the port supports, from ibv_query_port.",
    );
    for (port, labels) in ports {
        port_info.push(with(labels, &port_description(port)), 1u64);
        if let Some(s) = &port.state {
            state.push(labels.clone(), s.value);
        }
        if let Some(s) = &port.phys_state {
            phys_state.push(labels.clone(), s.value);
        }
        if let Some(r) = &port.rate {
            rate.push(labels.clone(), r.bits_per_second / 8);
            width.push(labels.clone(), r.width);
        }
        if let Some(v) = port.lid {
            lid.push(labels.clone(), v);
        }
        if let Some(v) = port.sm_lid {
            sm_lid.push(labels.clone(), v);
        }
        if let Some(v) = port.netdev_mtu {
            netdev_mtu.push(labels.clone(), v);
        }
        if let Some(v) = port.active_mtu {
            active_mtu.push(labels.clone(), v);
        }
        if let Some(v) = port.max_mtu {
            max_mtu.push(labels.clone(), v);
        }
    }
    vec![
        port_info, state, phys_state, rate, width, lid, sm_lid, active_mtu, max_mtu, netdev_mtu,
    ]
}

/// The labels of `railscope_ib_port_info` after device and port; absent ones are empty.
fn port_description(port: &Port) -> [(&'static str, &str); 7] {
    [
        ("link_layer", port.link_layer.as_deref().unwrap_or_default()),
        (
            "state",
            port.state
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or_default(),
        ),
        (
            "phys_state",
            port.phys_state
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or_default(),
        ),
        (
            "speed",
            port.rate
                .as_ref()
                .and_then(|r| r.speed.as_deref())
                .unwrap_or_default(),
        ),
        ("netdev", port.netdev.as_deref().unwrap_or_default()),
        (
            "hw_counters_source",
            port.hw_counters_source.unwrap_or_default(),
        ),
        ("mtu_source", port.mtu_source.unwrap_or_default()),
    ]
}

/// PMA counters: the known ones in their own families (in [`PMA_FAMILIES`] order), the
/// rest in `railscope_ib_port_pma_other`, and which of known width have saturated.
fn pma_families(ports: &[(&Port, Labels)]) -> Vec<Family> {
    let mut named: Vec<Family> = Vec::new();
    for spec in PMA_FAMILIES {
        if !named.iter().any(|f| f.name == spec.family) {
            named.push(Family::counter(spec.family, spec.help));
        }
    }
    let mut pma_other = Family::counter(
        "railscope_ib_port_pma_other",
        "A counters/ file the kernel or OFED provides beyond the standard PMA set, raw value.",
    );
    let mut saturated = Family::gauge(
        "railscope_ib_port_pma_saturated",
        "1 when a PMA counter of known width sits at its maximum: it saturates instead of wrapping and can no longer count.",
    );
    for (port, labels) in ports {
        for counter in &port.pma {
            map_pma(counter, labels, &mut named, &mut pma_other);
            if counter.bits.is_some() {
                saturated.push(with_counter(labels, &counter.name), counter.saturated());
            }
        }
    }
    named.extend([pma_other, saturated]);
    named
}

/// Port-level driver counters and how long the kernel caches them.
fn port_hw_families(ports: &[(&Port, Labels)]) -> Vec<Family> {
    let mut port_hw = Family::counter(
        "railscope_rdma_port_hw_stat",
        "Port-level driver counter from ports/<N>/hw_counters, named as the driver names it.",
    );
    let mut port_lifespan = Family::gauge(
        "railscope_rdma_port_hw_stats_lifespan_seconds",
        "How long the kernel caches port-level hw_counters values (hw_counters/lifespan).",
    );
    for (port, labels) in ports {
        for counter in &port.hw_counters {
            port_hw.push(with_counter(labels, &counter.name), counter.value);
        }
        if let Some(ms) = port.hw_counters_lifespan_ms {
            port_lifespan.push(labels.clone(), ms as f64 / 1000.0);
        }
    }
    vec![port_hw, port_lifespan]
}

/// The GID table of ports that have one: each non-empty entry, and the count by type
/// (both RoCE types always, 0 when absent).
fn gid_families(ports: &[(&Port, Labels)]) -> Vec<Family> {
    let mut gid_info = Family::info(
        "railscope_ib_port_gid",
        "A non-empty GID table entry with its index, type and netdev.",
    );
    let mut gid_entries = Family::gauge(
        "railscope_ib_port_gid_entries",
        "Non-empty GID table entries of the port by GID type.",
    );
    for (port, labels) in ports {
        let Some(gids) = &port.gids else { continue };
        let mut types: Vec<(&str, u64)> = vec![("IB/RoCE v1", 0), ("RoCE v2", 0)];
        for gid in gids {
            let gid_type = gid.gid_type.as_deref().unwrap_or_default();
            match types.iter_mut().find(|(t, _)| *t == gid_type) {
                Some((_, n)) => *n += 1,
                None => types.push((gid_type, 1)),
            }
            gid_info.push(
                with(
                    labels,
                    &[
                        ("index", &gid.index.to_string()),
                        ("gid", &gid.gid),
                        ("type", gid_type),
                        ("netdev", gid.netdev.as_deref().unwrap_or_default()),
                    ],
                ),
                1u64,
            );
        }
        for (gid_type, n) in types {
            gid_entries.push(with(labels, &[("type", gid_type)]), n);
        }
    }
    vec![gid_info, gid_entries]
}

fn map_pma(
    counter: &PmaCounter,
    labels: &[(&'static str, Label)],
    named: &mut [Family],
    other: &mut Family,
) {
    match PMA_FAMILIES.iter().find(|s| s.counter == &*counter.name) {
        Some(spec) => {
            let mut labels = Labels::from(labels);
            if let Some(direction) = spec.direction {
                labels.push(("direction", Label::Static(direction)));
            }
            let value = counter
                .value
                .saturating_mul(pma::bytes_per_unit(&counter.name));
            if let Some(family) = named.iter_mut().find(|f| f.name == spec.family) {
                family.push(labels, value);
            }
        }
        None => other.push(with_counter(labels, &counter.name), counter.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railscope_collectors::sources::infiniband::{Device, Enumerated, Gid, PmaDir, Rate};

    fn find<'a>(families: &'a [Family], name: &str) -> &'a Family {
        families
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no family {name}"))
    }

    #[test]
    fn maps_units_directions_and_saturation() {
        let port = Port {
            number: 1,
            state: Some(Enumerated {
                value: 4,
                name: "ACTIVE".into(),
            }),
            rate: Some(Rate {
                bits_per_second: 400_000_000_000,
                width: 4,
                speed: Some("NDR".into()),
            }),
            pma: vec![
                PmaCounter {
                    name: "port_rcv_data".into(),
                    value: 10,
                    bits: Some(64),
                    dir: PmaDir::Counters,
                },
                PmaCounter {
                    name: "link_downed".into(),
                    value: 255,
                    bits: Some(8),
                    dir: PmaDir::Counters,
                },
                PmaCounter {
                    name: "port_rcv_discards".into(),
                    value: 3,
                    bits: None,
                    dir: PmaDir::Counters,
                },
            ],
            gids: Some(vec![Gid {
                index: 0,
                gid: "fe80:0000:0000:0000:0000:0000:0000:0001".into(),
                gid_type: Some("RoCE v2".into()),
                netdev: Some("eth0".into()),
            }]),
            ..Port::default()
        };
        let snapshot = Snapshot {
            devices: vec![Device {
                name: "mlx5_0".into(),
                ports: vec![port],
                ..Device::default()
            }],
        };
        let families = families(&snapshot);
        let data = find(&families, "railscope_ib_port_data_bytes");
        assert_eq!(data.samples[0].value, 40u64.into());
        assert_eq!(data.samples[0].labels[2], ("direction", Label::from("rx")));
        assert_eq!(
            find(&families, "railscope_ib_port_rate_bytes_per_second").samples[0].value,
            50_000_000_000u64.into()
        );
        let sat = find(&families, "railscope_ib_port_pma_saturated");
        let by_counter: Vec<_> = sat
            .samples
            .iter()
            .map(|s| (s.labels[2].1.as_str(), s.value))
            .collect();
        assert_eq!(
            by_counter,
            [("port_rcv_data", 0u64.into()), ("link_downed", 1u64.into())]
        );
        assert_eq!(
            find(&families, "railscope_ib_port_pma_other").samples[0].labels[2],
            ("counter", Label::from("port_rcv_discards"))
        );
        let entries: Vec<_> = find(&families, "railscope_ib_port_gid_entries")
            .samples
            .iter()
            .map(|s| (s.labels[2].1.to_string(), s.value))
            .collect();
        assert_eq!(
            entries,
            [
                ("IB/RoCE v1".to_owned(), 0u64.into()),
                ("RoCE v2".to_owned(), 1u64.into())
            ]
        );
    }

    #[test]
    fn every_family_name_is_unique_and_counters_do_not_end_in_total() {
        let families = families(&Snapshot::default());
        let mut names: Vec<_> = families.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(
            names
                .iter()
                .all(|n| !n.ends_with("_total") && n.starts_with("railscope_"))
        );
    }
}
