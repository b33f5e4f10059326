//! Maps the `netdev` source's snapshot to metric families.
//!
//! Names: `railscope_netdev_*`, one series per netdev (`netdev` label), traffic counters with
//! a `direction` label (`rx`/`tx`). Values in base units: MTU in bytes, speed in bytes per
//! second (sysfs `speed` is Mb/s, ×125 000). Descriptive strings (operstate, address,
//! driver, where the values came from) sit on `railscope_netdev_info`.

use railscope_collectors::sources::netdev::{Netdev, Snapshot, Traffic};

use crate::exposition::Family;

fn netdev(nd: &Netdev) -> Vec<(&'static str, String)> {
    vec![("netdev", nd.name.clone())]
}

fn directed(nd: &Netdev, direction: &str) -> Vec<(&'static str, String)> {
    vec![
        ("netdev", nd.name.clone()),
        ("direction", direction.to_owned()),
    ]
}

/// The `netdev` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_netdev",
        "Netdev description: operational state (as sysfs names it), hardware address, driver of its device (empty for virtual netdevs), and whether the values came from rtnetlink or, for netdevs outside the agent's network namespace, from sysfs.",
    );
    let mut up = Family::gauge(
        "railscope_netdev_up",
        "1 when the netdev's operational state is up.",
    );
    let mut carrier = Family::gauge(
        "railscope_netdev_carrier",
        "1 when the netdev has carrier, 0 when not; absent when unknown (administratively down).",
    );
    let mut mtu = Family::gauge("railscope_netdev_mtu_bytes", "MTU of the netdev.");
    let mut speed = Family::gauge(
        "railscope_netdev_speed_bytes_per_second",
        "Link speed from sysfs class/net/<netdev>/speed; absent when the kernel reports it unknown (-1, or EINVAL for a link that is down).",
    );
    let mut bytes = Family::counter(
        "railscope_netdev_bytes",
        "Bytes received and transmitted by the netdev (rtnl_link_stats64 rx_bytes/tx_bytes).",
    );
    let mut packets = Family::counter(
        "railscope_netdev_packets",
        "Packets received and transmitted by the netdev (rtnl_link_stats64 rx_packets/tx_packets).",
    );
    let mut errors = Family::counter(
        "railscope_netdev_errors",
        "Bad packets received and packet transmit problems (rtnl_link_stats64 rx_errors/tx_errors).",
    );
    let mut drops = Family::counter(
        "railscope_netdev_drops",
        "Packets dropped by the netdev (rtnl_link_stats64 rx_dropped/tx_dropped).",
    );
    let mut carrier_changes = Family::counter(
        "railscope_netdev_carrier_changes",
        "Times the netdev's carrier went up or down since it was created: a flapping link.",
    );

    for nd in &snapshot.netdevs {
        let labels = netdev(nd);
        info.push(
            [
                ("netdev", nd.name.clone()),
                ("operstate", nd.operstate.clone().unwrap_or_default()),
                ("address", nd.address.clone().unwrap_or_default()),
                ("driver", nd.driver.clone().unwrap_or_default()),
                ("source", nd.origin.as_str().to_owned()),
            ],
            1u64,
        );
        if let Some(state) = &nd.operstate {
            up.push(labels.clone(), state == "up");
        }
        if let Some(c) = nd.carrier {
            carrier.push(labels.clone(), c);
        }
        if let Some(v) = nd.mtu {
            mtu.push(labels.clone(), v);
        }
        if let Some(mbps) = nd.speed_mbps {
            speed.push(labels.clone(), mbps.saturating_mul(125_000));
        }
        for (direction, traffic) in [("rx", &nd.rx), ("tx", &nd.tx)] {
            let push = |family: &mut Family, value: fn(&Traffic) -> Option<u64>| {
                if let Some(v) = value(traffic) {
                    family.push(directed(nd, direction), v);
                }
            };
            push(&mut bytes, |t| t.bytes);
            push(&mut packets, |t| t.packets);
            push(&mut errors, |t| t.errors);
            push(&mut drops, |t| t.dropped);
        }
        if let Some(v) = nd.carrier_changes {
            carrier_changes.push(labels, v);
        }
    }
    vec![
        info,
        up,
        carrier,
        mtu,
        speed,
        bytes,
        packets,
        errors,
        drops,
        carrier_changes,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};
    use railscope_collectors::sources::netdev::Origin;

    #[test]
    fn series_of_one_netdev() {
        let snapshot = Snapshot {
            netdevs: vec![Netdev {
                name: "ens1f0np0".into(),
                origin: Origin::Sysfs,
                driver: Some("mlx5_core".into()),
                address: Some("0c:42:a1:78:91:f4".into()),
                operstate: Some("up".into()),
                carrier: Some(true),
                mtu: Some(4200),
                speed_mbps: Some(100_000),
                carrier_changes: Some(2),
                rx: Traffic {
                    bytes: Some(10),
                    packets: Some(1),
                    errors: Some(0),
                    dropped: Some(0),
                },
                tx: Traffic {
                    bytes: Some(20),
                    packets: None,
                    errors: None,
                    dropped: None,
                },
            }],
        };
        let text = encode(families(&snapshot), Format::Prometheus);
        for line in [
            "railscope_netdev_info{netdev=\"ens1f0np0\",operstate=\"up\",address=\"0c:42:a1:78:91:f4\",driver=\"mlx5_core\",source=\"sysfs\"} 1",
            "railscope_netdev_up{netdev=\"ens1f0np0\"} 1",
            "railscope_netdev_carrier{netdev=\"ens1f0np0\"} 1",
            "railscope_netdev_mtu_bytes{netdev=\"ens1f0np0\"} 4200",
            "railscope_netdev_speed_bytes_per_second{netdev=\"ens1f0np0\"} 12500000000",
            "railscope_netdev_bytes_total{netdev=\"ens1f0np0\",direction=\"rx\"} 10",
            "railscope_netdev_bytes_total{netdev=\"ens1f0np0\",direction=\"tx\"} 20",
            "railscope_netdev_packets_total{netdev=\"ens1f0np0\",direction=\"rx\"} 1",
            "railscope_netdev_carrier_changes_total{netdev=\"ens1f0np0\"} 2",
        ] {
            assert!(
                text.contains(&format!("{line}\n")),
                "missing {line} in\n{text}"
            );
        }
        assert!(
            !text.contains("railscope_netdev_packets_total{netdev=\"ens1f0np0\",direction=\"tx\"}")
        );
    }
}
