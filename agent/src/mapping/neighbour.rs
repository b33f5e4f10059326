//! Maps the `neighbour` source's snapshot to metric families.
//!
//! Every series of a link is labelled `device`, `port` (its RDMA port; empty when the netdev
//! has none), `netdev` (empty for an InfiniBand port without one) and `protocol` (`smp`,
//! `lldp`, `lldpd`). `railscope_neighbour_info` adds the neighbour's identity: `neighbour`
//! (LLDP System Name / IB NodeDescription), `neighbour_id` (LLDP Chassis ID / IB NodeGUID),
//! `neighbour_port` (LLDP Port ID / IB LocalPortNum) and `neighbour_port_description` (LLDP
//! Port Description); one series per link at most. `railscope_neighbour_status` is one
//! series per link, labelled with the current status (value 1), none while nothing is known
//! yet: a port without SMPs costs one series, not one per status. A link where the protocol
//! is not available has no change counter either.

use railscope_collectors::sources::neighbour::{Link, Snapshot, Status};

use crate::exposition::Family;

fn labels(link: &Link) -> Vec<(&'static str, String)> {
    vec![
        ("device", link.device.clone()),
        ("port", link.port.clone()),
        ("netdev", link.netdev.clone()),
        (
            "protocol",
            link.protocol.map_or("", |p| p.as_str()).to_owned(),
        ),
    ]
}

fn labels_and(link: &Link, name: &'static str, value: String) -> Vec<(&'static str, String)> {
    let mut l = labels(link);
    l.push((name, value));
    l
}

/// The `neighbour` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_neighbour",
        "The switch at the far end of the link: LLDP System Name / IB NodeDescription (neighbour), LLDP Chassis ID / IB NodeGUID (neighbour_id), LLDP Port ID / IB LocalPortNum (neighbour_port), LLDP Port Description.",
    );
    let mut status = Family::gauge(
        "railscope_neighbour_status",
        "What is known of the link's far end: one series, the current status as its label (value 1): ok, no_frames (LLDP: nothing heard within the LLDP timeout, or the neighbour left), not_available (no SMPs possible on the port), refused (SMP answered with an error status), no_permission (no CAP_NET_RAW / no umad access), timeout.",
    );
    let mut changes = Family::counter(
        "railscope_neighbour_changes",
        "Times the neighbour's identity (name, id, port, port description) changed since the agent started.",
    );
    let mut last_seen = Family::gauge(
        "railscope_neighbour_last_seen_timestamp_seconds",
        "Unix time the neighbour was last heard from (LLDPDU) or answered (SMP).",
    );
    let mut ttl = Family::gauge(
        "railscope_neighbour_ttl_seconds",
        "LLDP TTL of the last LLDPDU received (0: a shutdown LLDPDU).",
    );
    let mut frame = Family::gauge(
        "railscope_neighbour_max_frame_size_bytes",
        "The switch port's IEEE 802.3 Maximum Frame Size (LLDP), to compare with railscope_netdev_mtu_bytes plus the Ethernet headers.",
    );
    let mut pfc = Family::gauge(
        "railscope_neighbour_pfc_enabled",
        "1 when the switch port's IEEE 802.1Qaz PFC Configuration TLV enables PFC on the priority (only when the TLV was received); compare with railscope_dcb_pfc_enabled.",
    );
    let mut willing = Family::gauge(
        "railscope_neighbour_pfc_willing",
        "1 when the switch port's PFC Configuration TLV has the willing bit set.",
    );
    let mut width = Family::gauge(
        "railscope_neighbour_link_width_lanes",
        "The IB far end's LinkWidthActive in lanes (SMP PortInfo); compare with railscope_ib_port_link_width_lanes.",
    );
    let mut rate = Family::gauge(
        "railscope_neighbour_rate_bytes_per_second",
        "The IB far end's active width times active per-lane speed (SMP PortInfo), as the kernel's rate attribute; compare with railscope_ib_port_rate_bytes_per_second.",
    );
    for link in &snapshot.links {
        if let Some(n) = &link.neighbour {
            let mut l = labels(link);
            l.extend([
                ("neighbour", n.name.clone()),
                ("neighbour_id", n.id.clone()),
                ("neighbour_port", n.port.clone()),
                ("neighbour_port_description", n.port_description.clone()),
            ]);
            info.push(l, 1u64);
        }
        if let Some(current) = link.status {
            status.push(
                labels_and(link, "status", current.as_str().to_owned()),
                1u64,
            );
        }
        if link.status != Some(Status::NotAvailable) {
            changes.push(labels(link), link.changes);
        }
        if let Some(t) = link.last_seen {
            last_seen.push(labels(link), t);
        }
        if let Some(t) = link.ttl {
            ttl.push(labels(link), u64::from(t));
        }
        if let Some(m) = link.max_frame_size {
            frame.push(labels(link), u64::from(m));
        }
        if let Some(p) = link.pfc {
            for prio in 0..8u8 {
                pfc.push(
                    labels_and(link, "priority", prio.to_string()),
                    u64::from(p.is_enabled(prio)),
                );
            }
            willing.push(labels(link), u64::from(p.willing));
        }
        if let Some(w) = link.link_width_lanes {
            width.push(labels(link), u64::from(w));
        }
        if let Some(r) = link.rate_bytes_per_second {
            rate.push(labels(link), r);
        }
    }
    vec![
        info, status, changes, last_seen, ttl, frame, pfc, willing, width, rate,
    ]
}

#[cfg(test)]
mod tests {
    use railscope_collectors::sources::neighbour::{Identity, Pfc, Protocol};

    use super::*;

    fn sample_values(families: &[Family], name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        families
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .samples
            .iter()
            .map(|s| {
                (
                    s.labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.as_str().to_owned()))
                        .collect(),
                    s.value.as_f64(),
                )
            })
            .collect()
    }

    #[test]
    fn a_roce_link_with_pfc_and_an_ib_port_without_smps() {
        let snapshot = Snapshot {
            links: vec![
                Link {
                    device: "mlx5_0".into(),
                    port: "1".into(),
                    netdev: "ens1f0np0".into(),
                    protocol: Some(Protocol::Lldp),
                    status: Some(Status::Ok),
                    neighbour: Some(Identity {
                        name: "leaf-07".into(),
                        id: "aa:bb:cc:dd:ee:ff".into(),
                        port: "Ethernet12".into(),
                        port_description: "to gpu-node-3".into(),
                    }),
                    changes: 2,
                    last_seen: Some(1.7e9),
                    ttl: Some(120),
                    max_frame_size: Some(9216),
                    pfc: Some(Pfc {
                        willing: false,
                        mbc: false,
                        capability: 8,
                        enabled: 0x08,
                    }),
                    ..Link::default()
                },
                Link {
                    device: "mlx5_1".into(),
                    port: "1".into(),
                    protocol: Some(Protocol::Smp),
                    status: Some(Status::NotAvailable),
                    ..Link::default()
                },
            ],
        };
        let f = families(&snapshot);
        let info = sample_values(&f, "railscope_neighbour");
        assert_eq!(info.len(), 1);
        assert!(info[0].0.contains(&("neighbour".into(), "leaf-07".into())));
        let status = sample_values(&f, "railscope_neighbour_status");
        assert_eq!(status.len(), 2, "one series per link: {status:?}");
        assert!(status.iter().all(|(_, v)| *v == 1.0));
        assert!(status[0].0.contains(&("status".into(), "ok".into())));
        assert!(
            status[1]
                .0
                .contains(&("status".into(), "not_available".into()))
        );
        let pfc = sample_values(&f, "railscope_neighbour_pfc_enabled");
        let enabled: Vec<_> = pfc
            .iter()
            .filter(|(_, v)| *v == 1.0)
            .map(|(l, _)| l[4].1.clone())
            .collect();
        assert_eq!(enabled, ["3"]);
        assert_eq!(
            sample_values(&f, "railscope_neighbour_max_frame_size_bytes")[0].1,
            9216.0
        );
        // The port without SMPs has no change counter.
        let changes = sample_values(&f, "railscope_neighbour_changes");
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].1, 2.0);
        assert!(sample_values(&f, "railscope_neighbour_rate_bytes_per_second").is_empty());
    }
}
