//! The NCCL settings the node implies (NCCL_IB_HCA, NCCL_SOCKET_IFNAME), and the NCCL environment
//! compared with them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{Finding, NcclHints, Node, Port, Severity, ok};

pub(super) fn nccl_hints(node: &Node, hints: &mut NcclHints) {
    let fabric: Vec<&Port> = node.fabric_ports().filter(|p| p.active()).collect();
    if !fabric.is_empty() {
        let list: Vec<String> = fabric
            .iter()
            .map(|p| format!("{}:{}", p.device, p.port))
            .collect();
        let why = if node.has_rails {
            "the ACTIVE ports on a GPU's rail, in rail order; '=' makes NCCL match the names exactly (mlx5_1 would also match mlx5_10)".to_owned()
        } else {
            "the ACTIVE RDMA ports; '=' makes NCCL match the names exactly".to_owned()
        };
        hints
            .settings
            .insert(0, ("NCCL_IB_HCA", format!("={}", list.join(",")), why));
    }
    // The bootstrap interface: netdevs of the RDMA ports outside the rails (front-end NICs),
    // else nothing is suggested.
    let mut front: Vec<String> = node
        .ports
        .iter()
        .filter(|p| node.has_rails && p.rail.is_none() && p.active() && !p.netdev.is_empty())
        .map(|p| p.netdev.clone())
        .collect();
    front.dedup();
    if !front.is_empty() {
        let at = hints.settings.len().min(1);
        hints.settings.insert(at, (
            "NCCL_SOCKET_IFNAME",
            format!("={}", front.join(",")),
            "the netdevs of the front-end NICs (RDMA ports on no GPU's rail), for NCCL's bootstrap and socket traffic".to_owned(),
        ));
    }
}

pub(super) fn nccl_environment(
    node: &Node,
    hints: &NcclHints,
    env: &[(String, String)],
) -> Vec<Finding> {
    let mut out = Vec::new();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let hint = |k: &str| {
        hints
            .settings
            .iter()
            .find(|(n, _, _)| *n == k)
            .map(|(_, v, _)| v.as_str())
    };
    if let Some(v) = get("NCCL_IB_DISABLE")
        && v.trim() == "1"
        && !node.ports.is_empty()
    {
        out.push(
            Finding::new(Severity::Warning, "nccl_env", "NCCL_IB_DISABLE")
                .summary("NCCL_IB_DISABLE=1 while the node has RDMA ports")
                .evidence("NCCL_IB_DISABLE", v, "environment")
                .meaning(
                    "NCCL falls back to TCP sockets: inter-node bandwidth drops to a fraction.",
                )
                .fix("Unset NCCL_IB_DISABLE."),
        );
    }
    if let Some(v) = get("NCCL_IB_HCA") {
        ib_hca(node, v, hint("NCCL_IB_HCA"), &mut out);
    }
    if let (Some(v), Some(h)) = (get("NCCL_IB_GID_INDEX"), hint("NCCL_IB_GID_INDEX"))
        && v.trim() != h
    {
        out.push(
            Finding::new(Severity::Warning, "nccl_env", "NCCL_IB_GID_INDEX")
                .summary(format!("NCCL_IB_GID_INDEX={v}, but the RoCE v2 GID of the ports' address is at index {h}"))
                .evidence("NCCL_IB_GID_INDEX", v, "environment")
                .meaning("NCCL would use a RoCE v1 or link-local GID: traffic fails to route or runs without ECN-capable RoCE v2.")
                .fix(format!("Use NCCL_IB_GID_INDEX={h}")),
        );
    }
    if let Some(v) = get("NCCL_NET_GDR_LEVEL") {
        let rank = |l: &str| {
            ["LOC", "PIX", "PXB", "PHB", "NODE", "SYS"]
                .iter()
                .position(|x| x.eq_ignore_ascii_case(l.trim()))
        };
        if let (Some(have), Some(h)) = (rank(v), hint("NCCL_NET_GDR_LEVEL"))
            && let Some(need) = rank(h)
            && have < need
        {
            out.push(
                Finding::new(Severity::Warning, "nccl_env", "NCCL_NET_GDR_LEVEL")
                    .summary(format!("NCCL_NET_GDR_LEVEL={v} is below the node's NIC↔GPU distance {h}"))
                    .evidence("NCCL_NET_GDR_LEVEL", v, "environment")
                    .meaning("NCCL turns GPUDirect RDMA off for the NICs further than the level: their traffic is staged through host memory.")
                    .fix(format!("Use NCCL_NET_GDR_LEVEL={h}")),
            );
        }
    }
    if let Some(v) = get("NCCL_SOCKET_IFNAME") {
        socket_ifname(node, v, hint("NCCL_SOCKET_IFNAME"), &mut out);
    }
    if out.is_empty() && !env.is_empty() {
        let mut set: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        set.sort();
        let mut s = String::new();
        let _ = write!(
            s,
            "the NCCL settings in the environment agree with the node ({})",
            set.join(" ")
        );
        out.push(ok("nccl_env", s));
    }
    out
}

/// NCCL_IB_HCA (`v`) against the node's RDMA devices and the rail devices of the hint.
fn ib_hca(node: &Node, v: &str, hint: Option<&str>, out: &mut Vec<Finding>) {
    let devices: BTreeSet<&str> = node.ports.iter().map(|p| p.device.as_str()).collect();
    let list = v.trim_start_matches(['^', '=']);
    let named: Vec<&str> = list
        .split(',')
        .map(|t| t.split(':').next().unwrap_or("").trim())
        .filter(|t| !t.is_empty())
        .collect();
    let missing: Vec<&str> = named
        .iter()
        .copied()
        .filter(|d| {
            if v.starts_with('=') || v.starts_with("^=") {
                !devices.contains(d)
            } else {
                !devices.iter().any(|have| have.starts_with(d))
            }
        })
        .collect();
    if !v.starts_with('^') && !missing.is_empty() {
        out.push(
            Finding::new(Severity::Warning, "nccl_env", "NCCL_IB_HCA")
                .summary(format!("NCCL_IB_HCA names {} the node does not have", missing.join(", ")))
                .evidence("NCCL_IB_HCA", v, "environment")
                .meaning("NCCL skips devices it cannot find; a job may run on fewer rails than it should.")
                .fix(format!("Use {}", hint.unwrap_or("the node's RDMA devices"))),
        );
    } else if let Some(h) = hint
        && !v.starts_with('^')
    {
        let want: BTreeSet<&str> = h
            .trim_start_matches('=')
            .split(',')
            .map(|t| t.split(':').next().unwrap_or(""))
            .collect();
        let have: BTreeSet<&str> = named.iter().copied().collect();
        let left_out: Vec<&&str> = want
            .iter()
            .filter(|d| !have.iter().any(|h| d.starts_with(h)))
            .collect();
        if !left_out.is_empty() {
            out.push(
                Finding::new(Severity::Warning, "nccl_env", "NCCL_IB_HCA")
                    .summary(format!("NCCL_IB_HCA leaves out rail devices: {}", left_out.iter().map(|d| **d).collect::<Vec<_>>().join(", ")))
                    .evidence("NCCL_IB_HCA", v, "environment")
                    .meaning("NCCL uses fewer rails than the node has: inter-node bandwidth drops by their share.")
                    .fix(format!("Use NCCL_IB_HCA={h}")),
            );
        }
    }
}

/// NCCL_SOCKET_IFNAME (`v`) against the netdevs railscope sees.
fn socket_ifname(node: &Node, v: &str, hint: Option<&str>, out: &mut Vec<Finding>) {
    let known: BTreeSet<&str> = node
        .facts
        .all("railscope_netdev_info")
        .map(|s| s.label("netdev"))
        .collect();
    let exact = v.starts_with('=');
    let names: Vec<&str> = v
        .trim_start_matches(['^', '='])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if !v.starts_with('^')
        && !known.is_empty()
        && !names.iter().any(|n| {
            known
                .iter()
                .any(|k| if exact { k == n } else { k.starts_with(n) })
        })
    {
        out.push(
            Finding::new(Severity::Warning, "nccl_env", "NCCL_SOCKET_IFNAME")
                .summary(format!("NCCL_SOCKET_IFNAME={v} matches no netdev railscope sees"))
                .evidence("NCCL_SOCKET_IFNAME", v, "environment")
                .meaning("NCCL's bootstrap finds no interface and the job fails at init (or picks another).")
                .fix(match hint { Some(h) => format!("Use NCCL_SOCKET_IFNAME={h}"), None => "Name the node's front-end netdev.".to_owned() }),
        );
    }
}
