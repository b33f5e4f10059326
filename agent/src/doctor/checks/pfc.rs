//! Step 6, PFC and ECN: PFC on, and on the same priorities, on every RoCE fabric netdev.

use std::collections::BTreeMap;

use super::{Finding, Node, Severity, count, ok, skip};
use crate::doctor::facts::Sample;

pub(super) fn pfc(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut sets: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for p in node
        .fabric_ports()
        .filter(|p| p.roce() && !p.netdev.is_empty())
    {
        let enabled: Vec<&Sample> = facts
            .matching("railscope_dcb_pfc_enabled", &[("netdev", &p.netdev)])
            .collect();
        if enabled.is_empty() {
            continue;
        }
        let on: Vec<String> = enabled
            .iter()
            .filter(|s| s.value == 1.0)
            .map(|s| s.label("priority").to_owned())
            .collect();
        sets.entry(on).or_default().push(p.netdev.clone());
    }
    if sets.is_empty() {
        out.push(skip("pfc", "no PFC state for a RoCE fabric netdev (InfiniBand, or the dcb collector is off or has no DCB netlink)"));
        return out;
    }
    if let Some(off) = sets.get(&Vec::new()) {
        out.push(
            Finding::new(Severity::Warning, "pfc_off", off.join(", "))
                .summary(format!("PFC is off on every priority of {}", off.join(", ")))
                .evidence("PFC enabled priorities", "none", "DCB netlink (DCB_ATTR_IEEE_PFC pfc_en)")
                .meaning("RoCE traffic on these netdevs is lossy: a drop costs a go-back-N retransmission. Fine only on a fabric designed for lossy RoCE with ECN.")
                .fix("Enable PFC on the RoCE priority on the node and the switches (mlnx_qos -i <netdev> --pfc 0,0,0,1,0,0,0,0 for priority 3) and mark RoCE traffic with that priority."),
        );
    }
    if sets.len() > 1 {
        let evidence: Vec<String> = sets
            .iter()
            .map(|(on, nds)| format!("[{}]: {}", on.join(","), nds.join(", ")))
            .collect();
        out.push(
            Finding::new(Severity::Warning, "pfc_differs", "")
                .summary("the RoCE fabric netdevs do not enable PFC on the same priorities")
                .evidence("PFC priorities by netdev", evidence.join("; "), "DCB netlink (DCB_ATTR_IEEE_PFC pfc_en)")
                .meaning("Traffic of one priority is lossless on some rails and lossy on others.")
                .fix("Apply the same QoS configuration to every RoCE netdev (mlnx_qos, or the NIC's QoS configuration at boot)."),
        );
    }
    if let (true, Some((on, nds))) = (out.is_empty(), sets.iter().next()) {
        let ecn: f64 = facts
            .all("railscope_netdev_ecn_marked_packets_total")
            .filter(|s| nds.iter().any(|n| n == s.label("netdev")))
            .map(|s| s.value)
            .sum();
        out.push(
            ok(
                "pfc",
                format!(
                    "PFC on priority {} of {}",
                    on.join(","),
                    count(nds.len(), "RoCE netdev", "RoCE netdevs")
                ),
            )
            .evidence(
                "ECN-marked packets received",
                format!("{ecn}"),
                "ethtool -S (rx_ecn_mark)",
            ),
        );
    }
    out
}
