//! Step 4, MTU: the RoCE active MTU against the rules' floor, and one active MTU across the fabric
//! ports.

use std::collections::BTreeMap;

use super::rules::ROCE_MTU_BYTES;
use super::{Finding, Node, Severity, count, ok, skip};

pub(super) fn mtu(node: &Node) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut values: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut unknown = 0;
    for p in node.fabric_ports().filter(|p| p.active()) {
        let Some(active) = node.port_value("railscope_ib_port_active_mtu_bytes", p) else {
            unknown += 1;
            continue;
        };
        values.entry(active as u64).or_default().push(p.name());
        if p.roce() && active < ROCE_MTU_BYTES {
            let netdev_mtu = node.port_value("railscope_ib_port_netdev_mtu_bytes", p);
            let mut f = Finding::new(Severity::Warning, "roce_mtu", p.name())
                .summary(format!(
                    "{} has an active RoCE MTU of {}{}",
                    p.name(),
                    active,
                    match netdev_mtu {
                        Some(m) => format!(" (netdev {} at MTU {m})", p.netdev),
                        None => String::new(),
                    }
                ))
                .evidence(
                    "active MTU",
                    format!("{active}"),
                    match p.mtu_source.as_str() {
                        "netdev" => {
                            "the netdev's MTU as the RoCE driver maps it (ibv_devinfo: active_mtu)"
                        }
                        _ => "verbs (ibv_query_port: active_mtu)",
                    },
                );
            if let Some(m) = netdev_mtu {
                f = f.evidence(
                    "netdev MTU",
                    format!("{m}"),
                    format!("/sys/class/net/{}/mtu", p.netdev),
                );
            }
            out.push(
                f.meaning("RoCE uses the largest IB MTU (256 to 4096) that fits the netdev's MTU: a netdev at 1500 gives 1024, which costs RDMA throughput and message rate.")
                    .fix(format!("Set the netdev's MTU to 4200 or more, on the node and every switch port on the path (ip link set dev {} mtu 9000; make it persistent in the network configuration).", if p.netdev.is_empty() { "<netdev>" } else { &p.netdev }))
                    .alert("RailscopeRoCEMTUBelow4096"),
            );
        }
    }
    if values.len() > 1 {
        let evidence: Vec<String> = values
            .iter()
            .map(|(m, ports)| format!("{m}: {}", ports.join(", ")))
            .collect();
        out.push(
            Finding::new(Severity::Warning, "mtu_mismatch", "")
                .summary(format!("the fabric ports do not share one active MTU ({})", values.keys().map(u64::to_string).collect::<Vec<_>>().join(", ")))
                .evidence("active MTU by port", evidence.join("; "), "each port's active MTU")
                .meaning("Ports with a smaller MTU carry the rail's traffic in smaller packets; between nodes the path MTU is the smallest.")
                .fix("Give every fabric port the same MTU (the netdev MTU on RoCE, the subnet manager's MTU on InfiniBand).")
                .alert("RailscopeMTUMismatch"),
        );
    }
    if out.is_empty() {
        if let Some((m, ports)) = values.iter().next() {
            out.push(ok(
                "mtu",
                format!("{} at active MTU {m}", count(ports.len(), "port", "ports")),
            ));
        } else if unknown > 0 {
            out.push(skip(
                "mtu",
                format!(
                    "the active MTU of {} is not known (it comes from verbs on a live node)",
                    count(unknown, "port", "ports")
                ),
            ));
        } else {
            out.push(skip("mtu", "no ACTIVE fabric port to check"));
        }
    }
    out
}
