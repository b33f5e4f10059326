//! Step 13, the cabling: who is at the far end of each port (the `neighbour` collector's LLDP
//! and SMP series), as a table, and the far end's settings against this end's, as the alerts
//! of the same names compare them: the InfiniBand far end's rate and width against the port's
//! (`RailscopeNeighbourPortSlower`), the switch port's Maximum Frame Size against the netdev's
//! MTU (`RailscopeNeighbourFrameSizeBelowMTU`), the switch port's PFC priorities against the
//! host's (`RailscopeNeighbourPFCMismatch`), and the neighbour's name against the pattern the
//! config file's `expected.rail-neighbours` gives the port's rail (`RailscopeRailMiscabled`).
//! A link whose far end is not known (no permission, no SMPs on the port, no LLDP frames) is a
//! row of the table, not a finding: the collector's status says why.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use super::{Finding, Node, Severity, Table, count, gbps, natural, ok, skip};

const INFO: &str = "railscope_neighbour_info";
const STATUS: &str = "railscope_neighbour_status";
const CHANGES: &str = "railscope_neighbour_changes_total";
const RATE: &str = "railscope_neighbour_rate_bytes_per_second";
const WIDTH: &str = "railscope_neighbour_link_width_lanes";
const FRAME: &str = "railscope_neighbour_max_frame_size_bytes";
const PFC: &str = "railscope_neighbour_pfc_enabled";
/// Where the alerts' expected pattern per rail comes from.
pub(super) const RAIL_PATTERN: &str = "railscope_inventory_expected_rail_neighbour_info";

/// The Ethernet header and FCS a frame adds to the netdev's MTU (no VLAN tag), as the alert
/// counts it (`_config.thresholds.neighbourFrameOverheadBytes`).
const ETHERNET_OVERHEAD_BYTES: f64 = super::rules::NEIGHBOUR_FRAME_OVERHEAD_BYTES;

const SMP: &str = "SMP (directed route, PortInfo of the far end)";
const LLDP: &str = "LLDP (IEEE 802.1AB)";

/// One link of the neighbour collector: its labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Link {
    device: String,
    port: String,
    netdev: String,
    protocol: String,
}

impl Link {
    fn key(&self) -> [(&str, &str); 4] {
        [
            ("device", &self.device),
            ("port", &self.port),
            ("netdev", &self.netdev),
            ("protocol", &self.protocol),
        ]
    }

    /// `mlx5_0 port 1`, as the other steps name a port; the netdev for one without an RDMA
    /// port.
    fn name(&self) -> String {
        if self.device.is_empty() {
            self.netdev.clone()
        } else {
            format!("{} port {}", self.device, self.port)
        }
    }

    fn lldp(&self) -> bool {
        self.protocol == "lldp" || self.protocol == "lldpd"
    }
}

/// The columns of the table, in order.
const COLUMNS: [(&str, &str); 9] = [
    ("device", "device"),
    ("port", "port"),
    ("rail", "rail"),
    ("netdev", "netdev"),
    ("neighbour", "neighbour"),
    ("neighbour_port", "neighbour port"),
    ("protocol", "protocol"),
    ("far_end", "far end"),
    ("status", "status"),
];

/// The PFC priorities set in `samples` of `name` with `labels`, as `3,4`; `None` without any.
fn priorities(node: &Node, name: &str, labels: &[(&str, &str)]) -> Option<BTreeSet<u8>> {
    let mut any = false;
    let mut on = BTreeSet::new();
    for s in node.facts.matching(name, labels) {
        any = true;
        if s.value == 1.0
            && let Ok(p) = s.label("priority").parse::<u8>()
        {
            on.insert(p);
        }
    }
    any.then_some(on)
}

fn list(set: &BTreeSet<u8>) -> String {
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
    }
}

pub(super) fn cabling(node: &Node) -> (Vec<Finding>, Option<Table>) {
    let facts = node.facts;
    let mut links: BTreeSet<Link> = BTreeSet::new();
    for name in [INFO, STATUS, CHANGES] {
        for s in facts.all(name) {
            links.insert(Link {
                device: s.label("device").to_owned(),
                port: s.label("port").to_owned(),
                netdev: s.label("netdev").to_owned(),
                protocol: s.label("protocol").to_owned(),
            });
        }
    }
    let mut out = Vec::new();
    if links.is_empty() {
        out.push(skip(
            "cabling",
            "no neighbour facts (the neighbour collector is off, has no selected netdev or InfiniBand port, or has heard nothing yet)",
        ));
        return (out, None);
    }
    let rail_of = |l: &Link| {
        node.ports
            .iter()
            .find(|p| p.device == l.device && p.port == l.port && !l.device.is_empty())
            .and_then(|p| p.rail)
    };
    let mut links: Vec<Link> = links.into_iter().collect();
    links.sort_by(|a, b| {
        (
            rail_of(a).unwrap_or(u32::MAX),
            natural(&a.device),
            &a.port,
            natural(&a.netdev),
            &a.protocol,
        )
            .cmp(&(
                rail_of(b).unwrap_or(u32::MAX),
                natural(&b.device),
                &b.port,
                natural(&b.netdev),
                &b.protocol,
            ))
    });
    // The expected neighbour per rail; a pattern that does not compile (an agent of another
    // version behind `--from`) is said once and checks nothing.
    let mut patterns: BTreeMap<u32, (String, Regex)> = BTreeMap::new();
    for s in facts.all(RAIL_PATTERN) {
        let Ok(rail) = s.label("rail").parse::<u32>() else {
            continue;
        };
        match Regex::new(s.label("pattern")) {
            Ok(re) => {
                patterns.insert(rail, (s.label("pattern").to_owned(), re));
            }
            Err(e) => out.push(
                Finding::new(
                    Severity::Warning,
                    "rail_pattern_invalid",
                    format!("rail {rail}"),
                )
                .summary(format!(
                    "the expected neighbour pattern of rail {rail} is not a regular expression: {e}"
                ))
                .evidence("pattern", s.label("pattern"), RAIL_PATTERN)
                .fix("Correct expected.rail-neighbours in the agent's config file."),
            ),
        }
    }
    let mut rows = Vec::new();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    let mut known = 0;
    let mut matched = 0;
    for l in &links {
        let key = l.key();
        let info = facts.matching(INFO, &key).next();
        let status = facts
            .matching(STATUS, &key)
            .find(|s| s.value == 1.0)
            .map(|s| s.label("status").to_owned())
            // No status series yet: the collector has heard nothing and not yet given up (an
            // LLDP link within its timeout, as in doctor's own short collection).
            .unwrap_or_else(|| if info.is_some() { "ok" } else { "pending" }.to_owned());
        *statuses.entry(status.clone()).or_default() += 1;
        let rail = rail_of(l);
        let neighbour = info.map_or("", |s| s.label("neighbour"));
        let neighbour_port = info.map_or("", |s| s.label("neighbour_port"));
        let mut far_end = Vec::new();
        let far_rate = facts.value(RATE, &key);
        let far_width = facts.value(WIDTH, &key);
        if let Some(r) = far_rate {
            far_end.push(gbps(r));
        }
        if let Some(w) = far_width {
            far_end.push(format!("{w}x"));
        }
        let frame = facts.value(FRAME, &key);
        if let Some(m) = frame {
            far_end.push(format!("frame {m} B"));
        }
        let far_pfc = priorities(node, PFC, &key);
        if let Some(p) = &far_pfc {
            far_end.push(format!("PFC {}", list(p)));
        }
        rows.push(vec![
            l.device.clone(),
            l.port.clone(),
            rail.map(|r| r.to_string()).unwrap_or_default(),
            l.netdev.clone(),
            neighbour.to_owned(),
            neighbour_port.to_owned(),
            l.protocol.clone(),
            far_end.join(", "),
            status.clone(),
        ]);
        if info.is_none() {
            continue;
        }
        known += 1;
        let subject = l.name();
        // The far end trained slower or narrower than this end.
        if !l.device.is_empty() && !l.lldp() {
            let port_key = [("device", l.device.as_str()), ("port", l.port.as_str())];
            let here_rate = facts.value("railscope_ib_port_rate_bytes_per_second", &port_key);
            let here_width = facts.value("railscope_ib_port_link_width_lanes", &port_key);
            let slower = matches!((far_rate, here_rate), (Some(f), Some(h)) if f < h);
            let narrower = matches!((far_width, here_width), (Some(f), Some(h)) if f < h);
            if slower || narrower {
                let mut f = Finding::new(Severity::Warning, "neighbour_rate_lower", subject.clone())
                    .summary(format!(
                        "the far end of {subject} ({neighbour} port {neighbour_port}) runs at {}, this end at {}",
                        speed(far_rate, far_width),
                        speed(here_rate, here_width),
                    ));
                if let Some(r) = far_rate {
                    f = f.evidence("far end rate", gbps(r), SMP);
                }
                if let Some(w) = far_width {
                    f = f.evidence("far end width", format!("{w}x"), SMP);
                }
                if let Some(r) = here_rate {
                    f = f.evidence(
                        "this end's rate",
                        gbps(r),
                        super::port_file(&l.device, &l.port, "rate"),
                    );
                }
                out.push(
                    f.meaning("The switch port reports a slower or narrower link than this port sees: the two ends disagree on what trained, a sign of a marginal cable or module, or a switch port configured to a lower speed.")
                        .fix("Compare with the switch's view (ibportstate, the switch CLI); reseat or replace the cable; check the switch port's configured speeds and widths.")
                        .alert("RailscopeNeighbourPortSlower"),
                );
            }
        }
        // The switch port drops frames the netdev's MTU allows.
        if let (Some(mfs), false) = (frame, l.netdev.is_empty())
            && let Some(mtu) = facts.value("railscope_netdev_mtu_bytes", &[("netdev", &l.netdev)])
            && mtu + ETHERNET_OVERHEAD_BYTES > mfs
        {
            out.push(
                Finding::new(Severity::Warning, "neighbour_frame_size", subject.clone())
                    .summary(format!(
                        "{} has MTU {mtu} ({} B frames) but its switch port {neighbour} {neighbour_port} takes frames of at most {mfs} B",
                        l.netdev,
                        mtu + ETHERNET_OVERHEAD_BYTES
                    ))
                    .evidence("netdev MTU", format!("{mtu}"), format!("/sys/class/net/{}/mtu", l.netdev))
                    .evidence("switch port Maximum Frame Size", format!("{mfs}"), LLDP)
                    .meaning("Frames larger than the switch port's maximum are dropped there: large RDMA and IP packets vanish while small ones pass, which looks like a hang or a retransmission storm.")
                    .fix(format!("Raise the switch port's MTU to at least {} (MTU + {ETHERNET_OVERHEAD_BYTES}, + 4 per VLAN tag), or lower the netdev's MTU to match.", mtu + ETHERNET_OVERHEAD_BYTES))
                    .alert("RailscopeNeighbourFrameSizeBelowMTU"),
            );
        }
        // PFC on other priorities than the host's, where the switch sent its PFC TLV.
        if let (Some(far), false) = (&far_pfc, l.netdev.is_empty())
            && let Some(here) = priorities(
                node,
                "railscope_dcb_pfc_enabled",
                &[("netdev", l.netdev.as_str())],
            )
            && *far != here
        {
            out.push(
                Finding::new(Severity::Warning, "neighbour_pfc_mismatch", subject.clone())
                    .summary(format!(
                        "{} enables PFC on priority {} but its switch port {neighbour} {neighbour_port} on {}",
                        l.netdev,
                        list(&here),
                        list(far)
                    ))
                    .evidence("PFC priorities of the netdev", list(&here), "DCB netlink (DCB_ATTR_IEEE_PFC pfc_en)")
                    .evidence("PFC priorities of the switch port", list(far), LLDP)
                    .meaning("A priority that is lossless on one end only is not lossless: the switch drops what the host expects it to pause, or the host ignores pauses the switch sends.")
                    .fix("Apply the same PFC priorities on the host (mlnx_qos -i <netdev> --pfc ...) and on the switch port; a switch port that is willing takes the host's when the host's DCBX agent advertises them.")
                    .alert("RailscopeNeighbourPFCMismatch"),
            );
        }
        // The neighbour against the rail's expected pattern.
        if let Some((pattern, re)) = rail.and_then(|r| patterns.get(&r)) {
            if re.is_match(neighbour) {
                matched += 1;
            } else {
                let rail = rail.unwrap_or_default();
                out.push(
                    Finding::new(Severity::Warning, "rail_miscabled", subject.clone())
                        .summary(format!(
                            "{subject} is on rail {rail} but its neighbour {neighbour:?} (port {neighbour_port}) does not match the rail's expected pattern {pattern:?}"
                        ))
                        .evidence("neighbour", neighbour, if l.lldp() { LLDP } else { SMP })
                        .evidence("expected pattern of the rail", pattern.as_str(), "the config file's expected.rail-neighbours")
                        .meaning("The port is cabled to a switch of another rail (or the rails are numbered differently from the cabling plan): rail-optimized traffic takes extra switch hops, and NCCL's rail-local rings cross the spine.")
                        .fix("Compare the cabling with the plan: swap the cables at the switch or the node, or correct expected.rail-neighbours if the plan changed.")
                        .alert("RailscopeRailMiscabled"),
                );
            }
        }
    }
    if out.is_empty() {
        let by_status: Vec<String> = statuses.iter().map(|(s, n)| format!("{n} {s}")).collect();
        if known == 0 {
            out.push(skip(
                "cabling",
                format!(
                    "no neighbour known on {} ({}): the table says why",
                    count(links.len(), "link", "links"),
                    by_status.join(", ")
                ),
            ));
        } else {
            let mut summary = format!(
                "{} of {} known, the far ends' settings match this end's",
                count(known, "neighbour", "neighbours"),
                count(links.len(), "link", "links"),
            );
            if !patterns.is_empty() {
                summary.push_str(&format!(
                    "; {} its rail's expected pattern",
                    if matched == 1 {
                        "1 matches".to_owned()
                    } else {
                        format!("{matched} match")
                    }
                ));
            }
            out.push(ok("cabling", summary).evidence(
                "links by status",
                by_status.join(", "),
                STATUS,
            ));
        }
    }
    let table = Table {
        columns: COLUMNS.to_vec(),
        rows,
    };
    (out, Some(table))
}

/// `400 Gb/s 4x`, either part where known.
fn speed(rate: Option<f64>, width: Option<f64>) -> String {
    match (rate, width) {
        (Some(r), Some(w)) => format!("{} {w}x", gbps(r)),
        (Some(r), None) => gbps(r),
        (None, Some(w)) => format!("{w}x"),
        (None, None) => "an unknown rate".to_owned(),
    }
}
