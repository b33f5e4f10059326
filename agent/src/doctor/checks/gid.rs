//! Step 5, GIDs: a routable RoCE v2 GID on every RoCE fabric port, at one index NCCL can use.

use std::collections::BTreeMap;

use super::{Finding, NcclHints, Node, Port, Severity, count, ok, port_file, skip};

/// The GID NCCL should use on a RoCE port: RoCE v2 with an IPv4-mapped address first, then a
/// routable IPv6 address, then link-local. (index, gid, why).
fn roce_gid(node: &Node, p: &Port) -> Option<(u32, String, &'static str)> {
    let mut best: Option<(u8, u32, String)> = None;
    for s in node.facts.matching("railscope_ib_port_gid_info", &p.key()) {
        if s.label("type") != "RoCE v2" {
            continue;
        }
        let gid = s.label("gid").to_ascii_lowercase();
        let Ok(index) = s.label("index").parse::<u32>() else {
            continue;
        };
        let rank = if gid.starts_with("0000:0000:0000:0000:0000:ffff:") {
            0
        } else if gid.starts_with("fe80:") {
            2
        } else {
            1
        };
        if best
            .as_ref()
            .is_none_or(|(r, i, _)| (rank, index) < (*r, *i))
        {
            best = Some((rank, index, gid));
        }
    }
    best.map(|(rank, index, gid)| {
        (
            index,
            gid,
            match rank {
                0 => "RoCE v2, IPv4",
                1 => "RoCE v2, IPv6",
                _ => "RoCE v2, link-local IPv6 only",
            },
        )
    })
}

fn ipv4_of(gid: &str) -> Option<String> {
    let tail = gid.strip_prefix("0000:0000:0000:0000:0000:ffff:")?;
    let hex: String = tail.chars().filter(|c| *c != ':').collect();
    let n = u32::from_str_radix(&hex, 16).ok()?;
    Some(std::net::Ipv4Addr::from(n).to_string())
}

pub(super) fn gid(node: &Node, hints: &mut NcclHints) -> Vec<Finding> {
    let mut out = Vec::new();
    let roce: Vec<&Port> = node
        .fabric_ports()
        .filter(|p| p.roce() && p.active())
        .collect();
    if roce.is_empty() {
        out.push(skip(
            "gid",
            "no ACTIVE RoCE fabric port (InfiniBand needs no GID index)",
        ));
        return out;
    }
    let mut chosen: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut good = Vec::new();
    for p in &roce {
        let source = port_file(&p.device, &p.port, "gids/<index>, gid_attrs/types/<index>");
        match roce_gid(node, p) {
            None => out.push(
                Finding::new(Severity::Warning, "roce_v2_gid", p.name())
                    .summary(format!("{} ({}) has no RoCE v2 GID", p.name(), p.netdev))
                    .evidence("RoCE v2 GIDs", "0", source)
                    .meaning("Without a RoCE v2 GID, traffic cannot be routed across IP subnets and NCCL has no GID index to use on this port.")
                    .fix(format!("Give the netdev {} an IP address (the kernel adds the RoCE v2 GIDs for it), or check that the RoCE mode is not v1 only (cma_roce_mode).", if p.netdev.is_empty() { "<netdev>" } else { &p.netdev }))
                    .alert("RailscopeRoCEPortWithoutV2GID"),
            ),
            Some((index, gid, kind)) => {
                chosen.entry(index).or_default().push(p.name());
                let address = ipv4_of(&gid).map(|a| format!(" ({a})")).unwrap_or_default();
                good.push(format!("{}: index {index}, {kind}{address}", p.name()));
                if kind.contains("link-local") {
                    out.push(
                        Finding::new(Severity::Warning, "roce_v2_gid_link_local", p.name())
                            .summary(format!("{} has only a link-local RoCE v2 GID (index {index})", p.name()))
                            .evidence("GID", format!("{index}: {gid}"), source)
                            .meaning("A link-local GID does not route: traffic to nodes in other subnets fails.")
                            .fix(format!("Give the netdev {} an IPv4 or global IPv6 address.", p.netdev))
                            .alert("RailscopeRoCEPortWithoutV2GID"),
                    );
                }
            }
        }
    }
    let only = if chosen.len() == 1 {
        chosen.keys().next().copied()
    } else {
        None
    };
    match (chosen.len(), only) {
        (0, _) => {}
        (_, Some(index)) => {
            hints.settings.push((
                "NCCL_IB_GID_INDEX",
                index.to_string(),
                format!("the RoCE v2 GID of the ports' IP address is at index {index} on every RoCE port"),
            ));
            out.push(
                ok(
                    "gid",
                    format!(
                        "RoCE v2 GID at index {index} on {}",
                        count(roce.len(), "port", "ports")
                    ),
                )
                .evidence(
                    "RoCE v2 GID by port",
                    good.join("; "),
                    "/sys/class/infiniband/<device>/ports/<port>/gids and gid_attrs/types",
                ),
            );
        }
        _ => {
            let evidence: Vec<String> = chosen
                .iter()
                .map(|(i, ports)| format!("{i}: {}", ports.join(", ")))
                .collect();
            out.push(
                Finding::new(Severity::Warning, "gid_index_differs", "")
                    .summary(format!("the RoCE v2 GID is at different indexes on different ports ({})", chosen.keys().map(u32::to_string).collect::<Vec<_>>().join(", ")))
                    .evidence("RoCE v2 GID index by port", evidence.join("; "), "/sys/class/infiniband/<device>/ports/<port>/gids")
                    .meaning("NCCL_IB_GID_INDEX is one number for every port: on the others NCCL would use the wrong GID (RoCE v1 or link-local).")
                    .fix("Leave NCCL_IB_GID_INDEX unset and let NCCL pick by type and address family (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET), or give every netdev its addresses in the same order so the indexes agree."),
            );
        }
    }
    out
}
