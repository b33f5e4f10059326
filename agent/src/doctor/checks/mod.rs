//! The checks, in the order an expert works through a node whose NCCL bandwidth is low:
//! hardware present and up, link rate and width, PCIe, MTU, GIDs, PFC, GPUDirect RDMA,
//! GPU↔NIC distance, NVLink, GPU health, the kernel log, the physical layer, the cabling. Each reads [`Facts`] only and
//! mirrors the alert of the same name (same condition, same severity), so what doctor says
//! on a node is what the alerts say about it.
//!
//! One module per step, each a function from the [`Node`] view to its [`Finding`]s; this
//! module holds what they share (findings, the node's ports and GPUs, naming helpers) and
//! [`run`]. The thresholds and XID classes a check shares with its alert are not written here:
//! `rules` is generated from the mixin's config (`python3 mixin/render.py`).

use std::collections::BTreeMap;

use super::facts::{Facts, Sample};

mod cabling;
mod devices;
mod gid;
mod gpu_health;
mod gpudirect;
mod kernel_log;
mod link;
mod mtu;
mod nccl;
mod nvlink;
mod pcie;
mod pfc;
mod physical;
mod rules;
#[cfg(test)]
mod tests;
mod topology;

use cabling::cabling;
use devices::devices;
use gid::gid;
use gpu_health::gpu_health;
use gpudirect::gpudirect;
use kernel_log::kernel_log;
use link::link;
use mtu::mtu;
use nccl::{nccl_environment, nccl_hints};
use nvlink::nvlink;
use pcie::pcie;
use pfc::pfc;
use physical::physical;
use topology::topology;

/// How bad a finding is. `Skip` says a step had nothing to check on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Skip,
    Ok,
    Warning,
    Critical,
}

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Skip => "skip",
            Severity::Ok => "ok",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One fact a finding rests on: what, its value, and the file or call it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Evidence {
    pub(crate) what: String,
    pub(crate) value: String,
    pub(crate) source: String,
}

/// What doctor found about one thing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    /// Stable identifier of the check (`port_down`, `roce_mtu`, ...).
    pub(crate) check: &'static str,
    /// The device, port, GPU or bridge, or empty for the node.
    pub(crate) subject: String,
    pub(crate) summary: String,
    pub(crate) evidence: Vec<Evidence>,
    /// What it means for a job (empty for ok).
    pub(crate) meaning: String,
    /// What to do (empty for ok).
    pub(crate) fix: String,
    /// The alert whose RUNBOOK entry covers it.
    pub(crate) alert: Option<&'static str>,
}

/// One step of the diagnosis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub(crate) id: &'static str,
    pub(crate) title: &'static str,
    pub(crate) findings: Vec<Finding>,
    /// What the step read, row by row, where a list says more than findings (the cabling).
    pub(crate) table: Option<Table>,
}

/// A table of a step: `(key, title)` per column (the key names the column in JSON), and
/// rows of as many cells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub(crate) columns: Vec<(&'static str, &'static str)>,
    pub(crate) rows: Vec<Vec<String>>,
}

/// The NCCL settings doctor derived, and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NcclHints {
    /// (variable, value, why), in the order to print.
    pub(crate) settings: Vec<(&'static str, String, String)>,
}

impl Finding {
    fn new(severity: Severity, check: &'static str, subject: impl Into<String>) -> Self {
        Finding {
            severity,
            check,
            subject: subject.into(),
            summary: String::new(),
            evidence: Vec::new(),
            meaning: String::new(),
            fix: String::new(),
            alert: None,
        }
    }
    fn summary(mut self, s: impl Into<String>) -> Self {
        self.summary = s.into();
        self
    }
    fn evidence(
        mut self,
        what: impl Into<String>,
        value: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        self.evidence.push(Evidence {
            what: what.into(),
            value: value.into(),
            source: source.into(),
        });
        self
    }
    fn meaning(mut self, s: impl Into<String>) -> Self {
        self.meaning = s.into();
        self
    }
    fn fix(mut self, s: impl Into<String>) -> Self {
        self.fix = s.into();
        self
    }
    fn alert(mut self, a: &'static str) -> Self {
        self.alert = Some(a);
        self
    }
}

fn ok(check: &'static str, summary: impl Into<String>) -> Finding {
    Finding::new(Severity::Ok, check, "").summary(summary)
}

fn skip(check: &'static str, summary: impl Into<String>) -> Finding {
    Finding::new(Severity::Skip, check, "").summary(summary)
}

/// Where a port attribute comes from.
fn port_file(device: &str, port: &str, file: &str) -> String {
    format!("/sys/class/infiniband/{device}/ports/{port}/{file}")
}

fn pci_file(address: &str, file: &str) -> String {
    format!("/sys/bus/pci/devices/{address}/{file}")
}

/// 10 → PIX, 20 → PXB, ... as `nvidia-smi topo -m` and NCCL_NET_GDR_LEVEL name them.
fn level_name(distance: f64) -> &'static str {
    match distance as u32 {
        0..=10 => "PIX",
        11..=20 => "PXB",
        21..=30 => "PHB",
        31..=40 => "NODE",
        _ => "SYS",
    }
}

fn gbps(bytes_per_second: f64) -> String {
    let g = bytes_per_second * 8.0 / 1e9;
    if (g - g.round()).abs() < 0.01 {
        format!("{} Gb/s", g.round())
    } else {
        format!("{g:.1} Gb/s")
    }
}

fn pcie_gen(transfers_per_second: f64) -> String {
    let gt = transfers_per_second / 1e9;
    let generation = match gt {
        g if g < 3.0 => 1,
        g if g < 6.0 => 2,
        g if g < 10.0 => 3,
        g if g < 20.0 => 4,
        g if g < 40.0 => 5,
        g if g < 80.0 => 6,
        _ => 7,
    };
    format!("Gen{generation} ({gt} GT/s)")
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// An RDMA port as the facts describe it.
#[derive(Debug, Clone)]
struct Port {
    device: String,
    port: String,
    link_layer: String,
    state: String,
    phys_state: String,
    netdev: String,
    model: String,
    rail: Option<u32>,
    mtu_source: String,
    /// An iWARP port (node type RNIC): Ethernet link layer, but no RoCE GIDs or IB MTU.
    iwarp: bool,
}

impl Port {
    fn name(&self) -> String {
        format!("{} port {}", self.device, self.port)
    }
    fn active(&self) -> bool {
        self.state == "ACTIVE"
    }
    fn roce(&self) -> bool {
        self.link_layer == "Ethernet" && !self.iwarp
    }
    fn key(&self) -> [(&str, &str); 2] {
        [("device", &self.device), ("port", &self.port)]
    }
}

/// The node as the checks see it.
struct Node<'a> {
    facts: &'a Facts,
    ports: Vec<Port>,
    /// Whether the node has rails at all (railscope_rail_info): without, every port counts.
    has_rails: bool,
}

impl<'a> Node<'a> {
    fn new(facts: &'a Facts) -> Self {
        // The adapter model: the HCA type, else the driver (rdma_rxe), else the node type.
        let models: BTreeMap<&str, (&str, bool)> = facts
            .all("railscope_ib_device_info")
            .map(|s| {
                let model = [s.label("hca_type"), s.label("driver"), s.label("node_type")]
                    .into_iter()
                    .find(|m| !m.is_empty())
                    .unwrap_or("");
                (s.label("device"), (model, s.label("node_type") == "RNIC"))
            })
            .collect();
        // On a node whose rails follow its GPUs, a port on a rail without a GPU is a NIC the
        // GPUs do not use (a front-end NIC): it is outside the rails.
        let gpu_rails = facts
            .all("railscope_rail_info")
            .any(|s| !s.label("gpu").is_empty());
        let rails: BTreeMap<(&str, &str), u32> = facts
            .all("railscope_rail_info")
            .filter(|s| !gpu_rails || !s.label("gpu").is_empty())
            .filter_map(|s| {
                Some((
                    (s.label("device"), s.label("port")),
                    s.label("rail").parse().ok()?,
                ))
            })
            .collect();
        let mut ports: Vec<Port> = facts
            .all("railscope_ib_port_info")
            .map(|s| Port {
                device: s.label("device").to_owned(),
                port: s.label("port").to_owned(),
                link_layer: s.label("link_layer").to_owned(),
                state: s.label("state").to_owned(),
                phys_state: s.label("phys_state").to_owned(),
                netdev: s.label("netdev").to_owned(),
                model: models
                    .get(s.label("device"))
                    .map(|m| m.0)
                    .unwrap_or("")
                    .to_owned(),
                iwarp: models.get(s.label("device")).is_some_and(|m| m.1),
                rail: rails.get(&(s.label("device"), s.label("port"))).copied(),
                mtu_source: s.label("mtu_source").to_owned(),
            })
            .collect();
        ports.sort_by(|a, b| {
            (a.rail.unwrap_or(u32::MAX), natural(&a.device), &a.port).cmp(&(
                b.rail.unwrap_or(u32::MAX),
                natural(&b.device),
                &b.port,
            ))
        });
        Node {
            facts,
            has_rails: !rails.is_empty(),
            ports,
        }
    }

    /// The ports that carry a job's traffic: on a rail, or all of them on a node without
    /// rails (no GPUs).
    fn fabric_ports(&self) -> impl Iterator<Item = &Port> {
        self.ports
            .iter()
            .filter(move |p| !self.has_rails || p.rail.is_some())
    }

    fn port_value(&self, name: &str, p: &Port) -> Option<f64> {
        self.facts.value(name, &p.key())
    }

    fn gpus(&self) -> Vec<&'a Sample> {
        let mut gpus: Vec<&Sample> = self.facts.all("railscope_gpu_info").collect();
        gpus.sort_by_key(|s| natural(s.label("gpu")));
        gpus
    }
}

/// Sorts `mlx5_10` after `mlx5_9`.
fn natural(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_owned(), tail.parse().unwrap_or(0))
}

/// Runs every check. `env` is the NCCL environment to compare with (empty for `--from`).
pub(crate) fn run(facts: &Facts, env: &[(String, String)]) -> (Vec<Step>, NcclHints) {
    let node = Node::new(facts);
    let mut hints = NcclHints::default();
    let step = |id, title, findings| Step {
        id,
        title,
        findings,
        table: None,
    };
    let (cabling_findings, cabling_table) = cabling(&node);
    let mut steps = vec![
        step(
            "devices",
            "Devices and ports present and up",
            devices(&node),
        ),
        step("link", "Link rate and width", link(&node)),
        step("pcie", "PCIe links of NICs and GPUs", pcie(&node)),
        step("mtu", "MTU end to end", mtu(&node)),
        step("gid", "RoCE GIDs", gid(&node, &mut hints)),
        step("pfc", "PFC and ECN", pfc(&node)),
        step("gpudirect", "GPUDirect RDMA", gpudirect(&node)),
        step("topology", "GPU↔NIC distance", topology(&node, &mut hints)),
        step("nvlink", "NVLink", nvlink(&node)),
        step(
            "gpu",
            "GPU health (XIDs, ECC, row remapping, throttling)",
            gpu_health(&node),
        ),
        step("kernel", "Kernel log", kernel_log(&node)),
        step(
            "physical",
            "Physical layer (transceivers, PHY link state, NIC firmware health)",
            physical(&node),
        ),
        Step {
            id: "cabling",
            title: "Cabling (who is at the far end of each port)",
            findings: cabling_findings,
            table: cabling_table,
        },
    ];
    nccl_hints(&node, &mut hints);
    let env_findings = nccl_environment(&node, &hints, env);
    if !env.is_empty() || !env_findings.is_empty() {
        steps.push(Step {
            id: "nccl",
            title: "NCCL environment",
            findings: env_findings,
            table: None,
        });
    }
    (steps, hints)
}
