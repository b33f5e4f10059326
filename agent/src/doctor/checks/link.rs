//! Step 2, link rate and width: each fabric port against its peers of the same adapter model (or
//! the expected rate and width), and PMA counters stuck at their maximum.

use std::collections::BTreeMap;

use super::{Finding, Node, Severity, count, gbps, ok, port_file, skip};

pub(super) fn link(node: &Node) -> Vec<Finding> {
    let mut out = Vec::new();
    // Peers: fabric ports of the same adapter model and link layer that are ACTIVE.
    let mut peers: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    for p in node.fabric_ports().filter(|p| p.active()) {
        let rate = node.port_value("railscope_ib_port_rate_bytes_per_second", p);
        let width = node.port_value("railscope_ib_port_link_width_lanes", p);
        let e = peers
            .entry((p.model.as_str(), p.link_layer.as_str()))
            .or_insert((0.0, 0.0));
        e.0 = e.0.max(rate.unwrap_or(0.0));
        e.1 = e.1.max(width.unwrap_or(0.0));
    }
    let expected_rate = node.facts.value(
        "railscope_inventory_expected_port_rate_bytes_per_second",
        &[],
    );
    let expected_width = node
        .facts
        .value("railscope_inventory_expected_port_width_lanes", &[]);
    let mut fine = BTreeMap::<String, usize>::new();
    for p in node.fabric_ports().filter(|p| p.active()) {
        let (Some(rate), Some(width)) = (
            node.port_value("railscope_ib_port_rate_bytes_per_second", p),
            node.port_value("railscope_ib_port_link_width_lanes", p),
        ) else {
            continue;
        };
        let (mut best_rate, mut best_width) = peers[&(p.model.as_str(), p.link_layer.as_str())];
        let model = if p.model.is_empty() {
            "same model".to_owned()
        } else {
            p.model.clone()
        };
        let peers_source = "the other fabric ports of the adapter model";
        let expected_source = "the config file's expected section";
        let mut rate_alert = "RailscopePortRateBelowPeers";
        let mut width_alert = "RailscopePortWidthBelowPeers";
        // An expected rate and width (the config file's expected section) are the yardstick
        // when given: they also catch every port of a node trained low together.
        if let Some(r) = expected_rate {
            best_rate = r;
            rate_alert = "RailscopePortRateBelowExpected";
        }
        if let Some(w) = expected_width {
            best_width = w;
            width_alert = "RailscopePortWidthBelowExpected";
        }
        let mut degraded = false;
        if rate < best_rate {
            degraded = true;
            out.push(
                Finding::new(Severity::Warning, "port_rate", p.name())
                    .summary(if expected_rate.is_some() { format!("{} trained at {}, expected {}", p.name(), gbps(rate), gbps(best_rate)) } else { format!("{} trained at {}, its {} peers at {}", p.name(), gbps(rate), model, gbps(best_rate)) })
                    .evidence("rate", gbps(rate), port_file(&p.device, &p.port, "rate"))
                    .evidence(if expected_rate.is_some() { "expected rate" } else { "peers' rate" }, gbps(best_rate), if expected_rate.is_some() { expected_source } else { peers_source })
                    .meaning("The port carries a fraction of its siblings' bandwidth: every collective that crosses it runs at its speed.")
                    .fix("Reseat or replace the cable or transceiver; check the switch port's speed (mlxlink -d <device> -p <port>) and the NIC firmware.")
                    .alert(rate_alert),
            );
        }
        if width < best_width {
            degraded = true;
            out.push(
                Finding::new(Severity::Warning, "port_width", p.name())
                    .summary(if expected_width.is_some() { format!("{} runs {}X, expected {}X", p.name(), width, best_width) } else { format!("{} runs {}X, its {} peers {}X", p.name(), width, model, best_width) })
                    .evidence("width", format!("{width}X"), port_file(&p.device, &p.port, "rate"))
                    .evidence(if expected_width.is_some() { "expected width" } else { "peers' width" }, format!("{best_width}X"), if expected_width.is_some() { expected_source } else { peers_source })
                    .meaning("Lanes failed to train: the port runs a fraction of its bandwidth.")
                    .fix("A lane is bad in the cable, the transceiver or the switch port: swap them one at a time (mlxlink shows per-lane state).")
                    .alert(width_alert),
            );
        }
        if !degraded {
            *fine
                .entry(format!("{} {}X", gbps(rate), width))
                .or_default() += 1;
        }
    }
    pma_saturated(node, &mut out);
    if fine.is_empty() && out.is_empty() {
        out.push(skip("link", "no ACTIVE fabric port to check"));
    }
    for (what, n) in fine {
        out.push(ok(
            "link",
            format!("{} at {}", count(n, "port", "ports"), what),
        ));
    }
    out
}

/// PMA counters stuck at their maximum, on any port.
fn pma_saturated(node: &Node, out: &mut Vec<Finding>) {
    for p in &node.ports {
        let saturated: Vec<&str> = node
            .facts
            .matching("railscope_ib_port_pma_saturated", &p.key())
            .filter(|s| s.value == 1.0)
            .map(|s| s.label("counter"))
            .collect();
        if !saturated.is_empty() {
            out.push(
                Finding::new(Severity::Warning, "pma_saturated", p.name())
                    .summary(format!("{}: {} at their maximum", p.name(), count(saturated.len(), "PMA counter", "PMA counters")))
                    .evidence("saturated counters", saturated.join(", "), port_file(&p.device, &p.port, "counters/<counter>"))
                    .meaning("A saturated PMA counter no longer moves: new errors on this port are invisible to it and to the error alerts.")
                    .fix(format!("Read the history, then reset the port's counters (perfquery -R -C {} -P {}); a counter that saturates again soon is a link fault.", p.device, p.port))
                    .alert("RailscopePmaCounterSaturated"),
            );
        }
    }
}
