//! The checks, in the order an expert works through a node whose NCCL bandwidth is low:
//! hardware present and up, link rate and width, PCIe, MTU, GIDs, PFC, GPUDirect RDMA,
//! GPU↔NIC distance, NVLink, GPU health, the kernel log. Each reads [`Facts`] only and
//! mirrors the alert of the same name (same condition, same severity), so what doctor says
//! on a node is what the alerts say about it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::facts::{Facts, Sample};

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
    };
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
    ];
    nccl_hints(&node, &mut hints);
    let env_findings = nccl_environment(&node, &hints, env);
    if !env.is_empty() || !env_findings.is_empty() {
        steps.push(Step {
            id: "nccl",
            title: "NCCL environment",
            findings: env_findings,
        });
    }
    (steps, hints)
}

// ---------------------------------------------------------------------------------------
// 1. Devices and ports

fn devices(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    for s in facts.all("railscope_collector_success") {
        if s.value == 0.0 {
            let c = s.label("collector");
            out.push(
                Finding::new(Severity::Warning, "collector_failing", format!("collector {c}"))
                    .summary(format!("the {c} collector did not complete: its facts are missing or partial"))
                    .evidence("railscope_collector_success", "0", format!("collector {c}"))
                    .meaning("Checks that need this collector's facts may pass for lack of evidence.")
                    .fix(format!("Run the agent with --log.level=debug and read the {c} collector's errors (a blocked sysfs read, a driver refusing a file, NVML failing)."))
                    .alert("RailscopeCollectorFailing"),
            );
        }
    }
    for s in facts.all("railscope_collector_last_errors") {
        if s.value > 0.0 {
            let c = s.label("collector");
            out.push(
                Finding::new(Severity::Warning, "collector_errors", format!("collector {c}"))
                    .summary(format!("the {c} collector could not read or parse {}: their facts are missing", count(s.value as usize, "file", "files")))
                    .evidence("railscope_collector_last_errors", format!("{}", s.value), format!("collector {c}"))
                    .meaning("Each unreadable file costs only its own series; checks that need them see nothing.")
                    .fix(format!("The agent's log names each file and error (railscope --log.level=debug); a file that is a directory, holds garbage or fails with EIO points at the driver or the {c} hardware."))
                    .alert("RailscopeCollectorErrors"),
            );
        }
    }
    let mut up = 0;
    for p in &node.ports {
        let state = node.port_value("railscope_ib_port_state", p);
        let phys = node.port_value("railscope_ib_port_phys_state", p);
        // A driver that does not report a physical state prints "0: <unknown>" (iWARP on
        // old kernels): the port state alone says whether it is up.
        if state == Some(4.0) && matches!(phys, Some(5.0) | Some(0.0)) {
            up += 1;
            continue;
        }
        let where_ = match p.rail {
            Some(r) => format!(" (rail {r})"),
            None if node.has_rails => " (outside the rails)".to_owned(),
            None => String::new(),
        };
        out.push(
            Finding::new(Severity::Critical, "port_down", p.name())
                .summary(format!(
                    "{}{} is {} / {}, not ACTIVE / LinkUp",
                    p.name(),
                    where_,
                    p.state,
                    p.phys_state
                ))
                .evidence(
                    "state",
                    format!("{} ({})", state.unwrap_or(f64::NAN), p.state),
                    port_file(&p.device, &p.port, "state"),
                )
                .evidence(
                    "physical state",
                    format!("{} ({})", phys.unwrap_or(f64::NAN), p.phys_state),
                    port_file(&p.device, &p.port, "phys_state"),
                )
                .meaning(if p.phys_state == "LinkUp" {
                    "The link is up but the port is not ACTIVE: on InfiniBand the subnet manager has not brought it up (INIT/ARMED); NCCL cannot use it.".to_owned()
                } else {
                    "No link: the port carries no traffic, and a job that lists it in NCCL_IB_HCA fails or runs without it.".to_owned()
                })
                .fix("Check the cable, transceiver and switch port (ibstat, mlxlink -d <device> -m); on InfiniBand with the link up, check the subnet manager. A port nobody cables should be excluded with --collector.infiniband.device-exclude.")
                .alert("RailscopePortDown"),
        );
    }
    if node.ports.is_empty() {
        out.push(skip(
            "ports",
            "no RDMA devices (/sys/class/infiniband is empty or absent)",
        ));
    } else if up > 0 {
        let devices: BTreeSet<&str> = node.ports.iter().map(|p| p.device.as_str()).collect();
        out.push(ok(
            "ports",
            format!(
                "{} of {} on {} ACTIVE / LinkUp",
                up,
                count(node.ports.len(), "RDMA port", "RDMA ports"),
                count(devices.len(), "device", "devices")
            ),
        ));
    }
    inventory(facts, &mut out);
    let gpus = node.gpus();
    let mut healthy = 0;
    for g in &gpus {
        let id = g.label("gpu");
        let state = facts
            .all("railscope_gpu_state")
            .find(|s| s.label("gpu") == id && s.value == 1.0)
            .map(|s| s.label("state"))
            .unwrap_or("ok");
        if state == "lost" || state == "timeout" {
            out.push(
                Finding::new(Severity::Critical, "gpu_lost", format!("GPU {id}"))
                    .summary(format!("GPU {id}{} is {}", match g.label("pci_address") { "" => String::new(), a => format!(" ({a})") }, if state == "lost" { "lost: fallen off the bus" } else { "hung: NVML calls time out" }))
                    .evidence("state", state, "NVML (nvmlDeviceGetHandleByIndex, nvmlDeviceGet*)")
                    .meaning("The GPU is unusable until reset; a job on it fails.")
                    .fix("Drain the node; nvidia-smi -r -i <gpu> or a reboot, then check the XID in the kernel log (79 is fallen off the bus).")
                    .alert("RailscopeGPULost"),
            );
        } else {
            healthy += 1;
        }
    }
    if gpus.is_empty() {
        out.push(skip(
            "gpus",
            "no GPUs (no NVML, or the gpu collector is off)",
        ));
    } else if healthy > 0 {
        out.push(ok(
            "gpus",
            format!(
                "{} of {} answer NVML",
                healthy,
                count(gpus.len(), "GPU", "GPUs")
            ),
        ));
    }
    out
}

/// The expected inventory (the config file's `expected` section, as the agent exports it)
/// against what the collection found.
fn inventory(facts: &Facts, out: &mut Vec<Finding>) {
    for s in facts.all("railscope_inventory_expected") {
        let kind = s.label("kind");
        let want = s.value;
        let (what, severity, alert) = match kind {
            "gpu" => ("GPUs", Severity::Critical, "RailscopeInventoryMissing"),
            "rdma_port" => (
                "RDMA ports",
                Severity::Critical,
                "RailscopeInventoryMissing",
            ),
            "rdma_port_up" => (
                "RDMA ports up at the expected rate and width",
                Severity::Warning,
                "RailscopeInventoryDegraded",
            ),
            "nvlink_up" => (
                "NVLinks up",
                Severity::Warning,
                "RailscopeInventoryDegraded",
            ),
            _ => continue,
        };
        match facts.value("railscope_inventory_present", &[("kind", kind)]) {
            Some(have) if have < want => out.push(
                Finding::new(severity, "inventory", kind)
                    .summary(format!("{have} {what}, the node must have {want}"))
                    .evidence("present", format!("{have}"), format!("railscope_inventory_present{{kind=\"{kind}\"}}"))
                    .evidence("expected", format!("{want}"), "the config file's expected section")
                    .meaning(match kind {
                        "gpu" | "rdma_port" => "A device the node must have is not there: it fell off the bus, its driver did not bind, or the node booted without it. Its own series are gone, so only the inventory shows it.",
                        _ => "Ports or links the node has are down or below the expected rate and width: a job gets fewer rails or less bandwidth than the node is built for.",
                    })
                    .fix(match kind {
                        "gpu" => "nvidia-smi -L and lspci | grep -i nvidia; the kernel log for XID 79 or a PCIe link down; reseat or replace, or drain the node.",
                        "rdma_port" => "rdma link and lspci | grep -i mellanox; the kernel log for mlx5 errors or a PCIe link down; check the driver and firmware, reseat the NIC.",
                        _ => "The port and link findings of the next steps name them; fix those.",
                    })
                    .alert(alert),
            ),
            Some(have) => out.push(ok("inventory", format!("{have} {what}, as expected ({want})"))),
            None => out.push(skip("inventory", format!("the count of {what} is not known: its collector did not complete"))),
        }
    }
}

// ---------------------------------------------------------------------------------------
// 2. Link rate and width

fn link(node: &Node) -> Vec<Finding> {
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

// ---------------------------------------------------------------------------------------
// 3. PCIe

fn pcie(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut fine = 0;
    let mut seen = 0;
    let mut functions: Vec<&Sample> = facts
        .all("railscope_pci_device_info")
        .filter(|s| matches!(s.label("role"), "nic" | "gpu"))
        .collect();
    functions.sort_by(|a, b| a.label("pci_address").cmp(b.label("pci_address")));
    let expected_pcie_width =
        facts.value("railscope_inventory_expected_pcie_link_width_lanes", &[]);
    let expected_pcie_speed = facts.value(
        "railscope_inventory_expected_pcie_link_speed_transfers_per_second",
        &[],
    );
    for f in functions {
        let addr = f.label("pci_address");
        let key = [("pci_address", addr)];
        let who = match f.label("role") {
            "gpu" => format!("GPU {} ({addr})", f.label("gpu")),
            _ if !f.label("rdma_device").is_empty() => {
                format!("{} ({addr})", f.label("rdma_device"))
            }
            _ => format!("NIC {addr}"),
        };
        let width = facts.value("railscope_pci_link_width_lanes", &key);
        let max_width = facts.value("railscope_pci_link_max_width_lanes", &key);
        let speed = facts.value("railscope_pci_link_speed_transfers_per_second", &key);
        let max_speed = facts.value("railscope_pci_link_max_speed_transfers_per_second", &key);
        seen += 1;
        let mut bad = false;
        if let (Some(w), Some(m)) = (width, max_width)
            && w < m
        {
            bad = true;
            out.push(
                Finding::new(Severity::Warning, "pcie_width", who.clone())
                    .summary(format!("{who} runs PCIe x{w}, its maximum is x{m}"))
                    .evidence("width", format!("x{w}"), pci_file(addr, "current_link_width"))
                    .evidence("maximum", format!("x{m}"), pci_file(addr, "max_link_width"))
                    .meaning("Half the lanes halve the host and GPUDirect bandwidth of this device; NCCL cannot see it.")
                    .fix("Reseat the card or its riser; check the slot's bifurcation setting in the BIOS. lspci -vv -s <address> shows LnkSta against LnkCap.")
                    .alert("RailscopePCIeWidthDegraded"),
            );
        }
        // A GPU lowers its link speed at idle to save power: only a NIC's speed is checked.
        if f.label("role") == "nic"
            && let (Some(s), Some(m)) = (speed, max_speed)
            && s < m
        {
            bad = true;
            out.push(
                Finding::new(Severity::Warning, "pcie_speed", who.clone())
                    .summary(format!("{who} runs PCIe {}, its maximum is {}", pcie_gen(s), pcie_gen(m)))
                    .evidence("speed", pcie_gen(s), pci_file(addr, "current_link_speed"))
                    .evidence("maximum", pcie_gen(m), pci_file(addr, "max_link_speed"))
                    .meaning("The NIC trained at a lower PCIe generation: its host bandwidth is below its network bandwidth.")
                    .fix("Reseat the card; check the slot's generation setting in the BIOS and the riser. lspci -vv -s <address>.")
                    .alert("RailscopePCIeSpeedDegraded"),
            );
        }
        // A card in a slot wired x8 trains x8 of an x8 maximum: only an expectation shows it.
        if !bad
            && let (Some(w), Some(want)) = (width, expected_pcie_width)
            && w < want
        {
            bad = true;
            out.push(
                Finding::new(Severity::Warning, "pcie_width_expected", who.clone())
                    .summary(format!("{who} runs PCIe x{w}, expected x{want}"))
                    .evidence("width", format!("x{w}"), pci_file(addr, "current_link_width"))
                    .evidence("expected", format!("x{want}"), "the config file's expected section")
                    .meaning("The device trained at its slot's width, below what the node must have: a card in the wrong slot, or a riser wired narrower.")
                    .fix("Move the card to a full-width slot, or check the riser and the slot's bifurcation in the BIOS.")
                    .alert("RailscopePCIeWidthDegraded"),
            );
        }
        if !bad
            && f.label("role") == "nic"
            && let (Some(sp), Some(want)) = (speed, expected_pcie_speed)
            && sp < want
        {
            bad = true;
            out.push(
                Finding::new(Severity::Warning, "pcie_speed_expected", who.clone())
                    .summary(format!("{who} runs PCIe {}, expected {}", pcie_gen(sp), pcie_gen(want)))
                    .evidence("speed", pcie_gen(sp), pci_file(addr, "current_link_speed"))
                    .evidence("expected", pcie_gen(want), "the config file's expected section")
                    .meaning("The NIC trained below the generation the node must have: its host bandwidth is below its network bandwidth.")
                    .fix("Check the slot's generation in the BIOS and the riser, and that the card is the expected model.")
                    .alert("RailscopePCIeSpeedDegraded"),
            );
        }
        for sev in ["fatal", "nonfatal"] {
            if let Some(n) = facts.value(
                "railscope_pci_aer_errors_total",
                &[("pci_address", addr), ("severity", sev)],
            ) && n > 0.0
            {
                bad = true;
                out.push(
                    Finding::new(Severity::Critical, "pcie_aer_uncorrectable", who.clone())
                        .summary(format!("{who} has {n} uncorrectable ({sev}) AER errors since boot"))
                        .evidence(format!("AER {sev}"), format!("{n}"), pci_file(addr, &format!("aer_dev_{sev}")))
                        .meaning("Uncorrectable PCIe errors corrupt or drop transactions; the device may be reset or fall off the bus.")
                        .fix("Drain the node and reseat or replace the device; the kernel log names the error type.")
                        .alert("RailscopePCIeAERUncorrectable"),
                );
            }
        }
        if !bad {
            fine += 1;
        }
    }
    if seen == 0 {
        out.push(skip(
            "pcie",
            "no NIC or GPU PCI functions (the pci collector is off, or none found)",
        ));
    } else if fine > 0 {
        out.push(ok(
            "pcie",
            format!(
                "{} of {} at full width{}",
                fine,
                count(seen, "NIC and GPU function", "NIC and GPU functions"),
                " and (NICs) full speed"
            ),
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------
// 4. MTU

fn mtu(node: &Node) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut values: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut unknown = 0;
    for p in node.fabric_ports().filter(|p| p.active()) {
        let Some(active) = node.port_value("railscope_ib_port_active_mtu_bytes", p) else {
            unknown += 1;
            continue;
        };
        values.entry(active as u64).or_default().push(p.name());
        if p.roce() && active < 4096.0 {
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

// ---------------------------------------------------------------------------------------
// 5. GIDs

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

fn gid(node: &Node, hints: &mut NcclHints) -> Vec<Finding> {
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

// ---------------------------------------------------------------------------------------
// 6. PFC and ECN

fn pfc(node: &Node) -> Vec<Finding> {
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

// ---------------------------------------------------------------------------------------
// 7. GPUDirect RDMA

fn gpudirect(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let has_gpus = facts.has("railscope_topology_gpu_info") || facts.has("railscope_gpu_info");
    if !has_gpus || node.ports.is_empty() {
        out.push(skip(
            "gpudirect",
            "GPUDirect RDMA needs GPUs and RDMA NICs on the node",
        ));
        return out;
    }
    let peermem = facts.value("railscope_host_gpudirect_rdma_module_loaded", &[]);
    let dmabuf = facts.value("railscope_host_gpudirect_rdma_dmabuf_capable", &[]);
    if peermem == Some(0.0) && dmabuf != Some(1.0) {
        out.push(
            Finding::new(Severity::Warning, "peermem", "")
                .summary("neither nvidia_peermem is loaded nor is the NVIDIA module dma-buf capable")
                .evidence("nvidia_peermem loaded", "0", "/proc/modules")
                .evidence("dma-buf capable", format!("{}", dmabuf.unwrap_or(0.0)), "/proc/driver/nvidia/params, /proc/kallsyms")
                .meaning("NCCL cannot register GPU memory with the NIC: RDMA traffic is staged through host memory (GPUDirect RDMA off), at a fraction of the bandwidth.")
                .fix("modprobe nvidia_peermem (and add it to /etc/modules-load.d), or use the open NVIDIA kernel module on a 5.12+ kernel for dma-buf.")
                .alert("RailscopePeermemMissing"),
        );
    } else if peermem.is_some() {
        out.push(ok(
            "peermem",
            if peermem == Some(1.0) {
                "nvidia_peermem is loaded"
            } else {
                "GPU memory registers through dma-buf"
            },
        ));
    }
    if facts.value("railscope_host_iommu_mode", &[("mode", "translated")]) == Some(1.0) {
        out.push(
            Finding::new(Severity::Warning, "iommu", "")
                .summary("the IOMMU translates DMA (not passthrough)")
                .evidence("IOMMU mode", "translated", "/sys/kernel/iommu_groups/*/type, /proc/cmdline")
                .meaning("Peer-to-peer DMA between a NIC and a GPU goes through the IOMMU (or is blocked): GPUDirect RDMA runs slow or fails.")
                .fix("Boot with iommu=pt (and intel_iommu=on or amd_iommu=on as needed).")
                .alert("RailscopeIOMMUTranslated"),
        );
    } else if facts.has("railscope_host_iommu_mode") {
        let mode = facts
            .all("railscope_host_iommu_mode")
            .find(|s| s.value == 1.0)
            .map(|s| s.label("mode").to_owned())
            .unwrap_or_default();
        out.push(ok("iommu", format!("IOMMU {mode}")));
    }
    let mut redirect: Vec<&str> = facts
        .matching("railscope_pci_acs_state", &[("state", "redirect")])
        .filter(|s| s.value == 1.0)
        .map(|s| s.label("pci_address"))
        .collect();
    redirect.sort();
    if !redirect.is_empty() {
        out.push(
            Finding::new(Severity::Warning, "acs", redirect.join(", "))
                .summary(format!("ACS redirects peer-to-peer traffic on {} above a NIC or GPU", count(redirect.len(), "bridge", "bridges")))
                .evidence("bridges with ACS P2P redirect", redirect.join(", "), "PCI config space, ACS control (setpci -s <bridge> ECAP_ACS+6.w)")
                .meaning("NIC↔GPU traffic under a shared switch is sent up to the root complex instead of across the switch: GPUDirect RDMA loses its bandwidth.")
                .fix("Disable ACS on those bridges (in the BIOS, or setpci -s <bridge> ECAP_ACS+6.w=0000 at boot) on bare metal; keep it where VMs need isolation.")
                .alert("RailscopeACSRedirect"),
        );
    } else if facts.has("railscope_pci_acs_state") {
        out.push(ok(
            "acs",
            "no bridge above a NIC or GPU redirects peer-to-peer traffic",
        ));
    }
    if let Some(limit) = facts.value(
        "railscope_host_memlock_limit_bytes",
        &[("process", "init"), ("limit", "soft")],
    ) {
        if limit < 1073741824.0 {
            out.push(
                Finding::new(Severity::Warning, "memlock", "")
                    .summary(format!("the locked-memory limit is {} bytes", limit))
                    .evidence("RLIMIT_MEMLOCK (soft) of init", format!("{limit}"), "/proc/1/limits")
                    .meaning("Services and jobs started under this limit cannot register enough memory for RDMA: NCCL fails with ibv_reg_mr errors.")
                    .fix("Set LimitMEMLOCK=infinity for the services that start jobs (systemd: DefaultLimitMEMLOCK=infinity) and memlock unlimited in /etc/security/limits.conf.")
                    .alert("RailscopeMemlockLimitSmall"),
            );
        } else {
            out.push(ok(
                "memlock",
                if limit.is_infinite() {
                    "locked memory unlimited".to_owned()
                } else {
                    format!("locked memory limit {limit} bytes")
                },
            ));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// 8. Topology

/// Each rail NIC's nearest GPU distance: (device, distance, gpu).
fn nearest(node: &Node) -> Vec<(String, f64, String)> {
    let mut best: BTreeMap<&str, (f64, &str)> = BTreeMap::new();
    for s in node.facts.all("railscope_topology_nic_gpu_distance") {
        let e = best.entry(s.label("device")).or_insert((f64::INFINITY, ""));
        if s.value < e.0 {
            *e = (s.value, s.label("gpu"));
        }
    }
    let rail_devices: BTreeSet<&str> = node.fabric_ports().map(|p| p.device.as_str()).collect();
    let mut out: Vec<(String, f64, String)> = best
        .into_iter()
        .filter(|(d, _)| rail_devices.contains(d))
        .map(|(d, (v, g))| (d.to_owned(), v, g.to_owned()))
        .collect();
    out.sort_by_key(|(d, _, _)| natural(d));
    out
}

fn topology(node: &Node, hints: &mut NcclHints) -> Vec<Finding> {
    let mut out = Vec::new();
    let near = nearest(node);
    if near.is_empty() {
        out.push(skip(
            "topology",
            "no GPU↔NIC distances (no GPUs, or the topology collector is off)",
        ));
        return out;
    }
    for (device, d, gpu) in &near {
        if *d >= 40.0 {
            out.push(
                Finding::new(Severity::Warning, "nic_far_from_gpu", device.clone())
                    .summary(format!("{device}'s nearest GPU ({gpu}) is {} away", level_name(*d)))
                    .evidence("nearest GPU distance", format!("{} ({d})", level_name(*d)), "PCI topology under /sys/bus/pci/devices (nvidia-smi topo -m)")
                    .meaning("GPUDirect RDMA between this NIC and any GPU crosses the CPU interconnect: NCCL either stages through host memory or runs GDR slowly.")
                    .fix("Check that the NIC sits in the slot the platform intends (under the GPU's PCIe switch); a NIC in the wrong slot needs moving.")
                    .alert("RailscopeNICFarFromGPU"),
            );
        }
    }
    let worst = near.iter().map(|(_, d, _)| *d).fold(0.0, f64::max);
    if worst < 40.0 {
        hints.settings.push((
            "NCCL_NET_GDR_LEVEL",
            level_name(worst).to_owned(),
            format!(
                "every rail NIC has a GPU within {} (GPUDirect RDMA for all of them)",
                level_name(worst)
            ),
        ));
    }
    if out.is_empty() {
        let by: Vec<String> = near
            .iter()
            .map(|(d, v, g)| format!("{d}: GPU {g} {}", level_name(*v)))
            .collect();
        out.push(
            ok(
                "topology",
                format!("every rail NIC has a GPU within {}", level_name(worst)),
            )
            .evidence(
                "nearest GPU by NIC",
                by.join("; "),
                "PCI topology under /sys/bus/pci/devices (nvidia-smi topo -m)",
            ),
        );
    }
    out
}

// ---------------------------------------------------------------------------------------
// 9. NVLink

fn nvlink(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut per_gpu: BTreeMap<(String, u64), Vec<(String, f64)>> = BTreeMap::new();
    for s in facts.all("railscope_nvlink_up") {
        per_gpu
            .entry(natural(s.label("gpu")))
            .or_default()
            .push((s.label("link").to_owned(), s.value));
    }
    if per_gpu.is_empty() {
        out.push(skip("nvlink", "no NVLinks reported"));
        return out;
    }
    let mut links_up = 0;
    let mut links = 0;
    for ((prefix, n), mut ls) in per_gpu {
        let gpu = format!("{prefix}{n}");
        ls.sort_by_key(|(l, _)| natural(l));
        links += ls.len();
        let up = ls.iter().filter(|(_, v)| *v == 1.0).count();
        links_up += up;
        if up == 0 {
            continue;
        }
        for (link, v) in ls.iter().filter(|(_, v)| *v == 0.0) {
            let _ = v;
            out.push(
                Finding::new(Severity::Warning, "nvlink_inactive", format!("GPU {gpu} link {link}"))
                    .summary(format!("GPU {gpu} NVLink {link} is down while {} of its links are up", up))
                    .evidence("NVLink state", "inactive", "NVML nvmlDeviceGetNvLinkState")
                    .meaning("The GPU's peer traffic runs at reduced bandwidth; on NVSwitch systems the fabric reports degraded bandwidth.")
                    .fix("nvidia-smi nvlink -s -i <gpu>; a link that stays down needs the GPU baseboard or NVSwitch serviced.")
                    .alert("RailscopeNVLinkInactive"),
            );
        }
    }
    let mut errors: BTreeMap<(String, u64, String, u64), Vec<String>> = BTreeMap::new();
    let mut push = |s: &crate::doctor::facts::Sample, what: String| {
        let (gp, gn) = natural(s.label("gpu"));
        let (lp, ln) = natural(s.label("link"));
        errors.entry((gp, gn, lp, ln)).or_default().push(what);
    };
    for s in facts.all("railscope_nvlink_errors_total") {
        // Symbol errors are corrected by FEC and count on healthy NVLink5 links too.
        if s.value > 0.0 && NVLINK_ERROR_TYPES.contains(&s.label("type")) {
            push(s, format!("{} {}", s.label("type"), s.value));
        }
    }
    for s in facts.matching(
        "railscope_nvlink_link_recovery_events_total",
        &[("result", "failed")],
    ) {
        if s.value > 0.0 {
            push(s, format!("failed link recoveries {}", s.value));
        }
    }
    for ((gp, gn, lp, ln), what) in errors {
        out.push(
            Finding::new(Severity::Warning, "nvlink_errors", format!("GPU {gp}{gn} link {lp}{ln}"))
                .summary(format!("GPU {gp}{gn} NVLink {lp}{ln} error counters since the driver loaded: {}", what.join(", ")))
                .evidence("NVLink error counters", what.join(", "), "NVML nvmlDeviceGetNvLinkErrorCounter, NVLink5 fields 206-215, 219")
                .meaning("Replays cost bandwidth and recoveries stall traffic; a link that keeps counting is failing.")
                .fix("Watch the rate (RailscopeNVLinkErrors fires above 1/s of data-link errors, or on any recovery or failed NVLink5 link recovery); nvidia-smi nvlink -e -i <gpu>.")
                .alert("RailscopeNVLinkErrors"),
        );
    }
    out.extend(fabric_and_c2c(node));
    if out.is_empty() {
        out.push(ok(
            "nvlink",
            format!("{links_up} of {links} NVLinks up, no replay or recovery errors"),
        ));
    }
    out
}

/// The NVLink error types that count against a link (`symbol` does not: FEC corrects them
/// on healthy NVLink5 links too).
const NVLINK_ERROR_TYPES: &[&str] = &[
    "recovery",
    "replay",
    "effective",
    "malformed_packet",
    "buffer_overrun",
    "rcv",
    "rcv_remote",
    "rcv_general",
    "local_link_integrity",
    "xmit_discards",
];

/// Fabric health (NVSwitch and NVL72 systems) and NVLink-C2C links (Grace-Blackwell).
fn fabric_and_c2c(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut by_gpu: BTreeMap<(String, u64), (Vec<String>, Vec<String>)> = BTreeMap::new();
    for s in facts.all("railscope_gpu_fabric_health") {
        if s.value == 1.0 {
            let entry = by_gpu.entry(natural(s.label("gpu"))).or_default();
            match s.label("condition") {
                c @ ("route_unhealthy" | "incorrect_configuration") => entry.0.push(c.to_owned()),
                c @ "degraded_bandwidth" => entry.1.push(c.to_owned()),
                _ => {}
            }
        }
    }
    for s in facts.all("railscope_gpu_fabric_health_state") {
        if s.value == 1.0 {
            let entry = by_gpu.entry(natural(s.label("gpu"))).or_default();
            match s.label("state") {
                "unhealthy" => entry.0.push("summary unhealthy".to_owned()),
                "limited_capacity" => entry.1.push("summary limited_capacity".to_owned()),
                _ => {}
            }
        }
    }
    for ((gp, gn), (unhealthy, degraded)) in by_gpu {
        if !unhealthy.is_empty() {
            let what = unhealthy
                .iter()
                .chain(&degraded)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            out.push(
                Finding::new(Severity::Critical, "fabric_unhealthy", format!("GPU {gp}{gn}"))
                    .summary(format!("GPU {gp}{gn}'s NVLink fabric reports it unhealthy: {what}"))
                    .evidence("fabric health", what, "NVML nvmlDeviceGetGpuFabricInfoV (v3 health mask and summary)")
                    .meaning("Traffic to some peers of the NVLink domain has no healthy route or the GPU is misconfigured for its partition; collectives across the domain fail or hang.")
                    .fix("nvidia-smi -q | grep -A12 Fabric; check the NVSwitch trays and the fabric manager (NMX) for the domain; drain the node until the fabric reports healthy.")
                    .alert("RailscopeGPUFabricUnhealthy"),
            );
        } else if !degraded.is_empty() {
            let what = degraded.join(", ");
            out.push(
                Finding::new(Severity::Warning, "fabric_degraded", format!("GPU {gp}{gn}"))
                    .summary(format!("GPU {gp}{gn}'s NVLink fabric runs at reduced bandwidth: {what}"))
                    .evidence("fabric health", what, "NVML nvmlDeviceGetGpuFabricInfoV (v3 health mask and summary)")
                    .meaning("The GPU reaches its peers with fewer links than it should; every collective across the NVLink domain runs at the slowest GPU's bandwidth.")
                    .fix("nvidia-smi nvlink -s; nvidia-smi -q | grep -A12 Fabric; find the down links or NVSwitch ports and schedule service.")
                    .alert("RailscopeGPUFabricDegraded"),
            );
        }
    }
    for s in facts.all("railscope_gpu_c2c_link_up") {
        if s.value == 0.0 {
            let (gp, gn) = natural(s.label("gpu"));
            let link = s.label("link");
            out.push(
                Finding::new(Severity::Warning, "c2c_link_down", format!("GPU {gp}{gn} C2C link {link}"))
                    .summary(format!("GPU {gp}{gn} NVLink-C2C link {link} to its Grace CPU is down"))
                    .evidence("C2C link status", "inactive", "NVML field 171 (C2C_LINK_GET_STATUS)")
                    .meaning("CPU-GPU transfers (host memory, offload, checkpoints) run on the remaining links at reduced bandwidth.")
                    .fix("nvidia-smi c2c -s -i <gpu>; a link that stays down needs the compute tray serviced.")
                    .alert("RailscopeGPUC2CLinkDown"),
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// 10. GPU health

/// XIDs by class, as the mixin's `xids` (hardware: drain and replace; warning).
const XID_HARDWARE: &[u32] = &[
    46, 48, 64, 74, 79, 95, 119, 120, 136, 140, 143, 155, 156, 158,
];
const XID_WARNING: &[u32] = &[92, 94, 154];

fn xid_severity(code: u32) -> (Severity, Option<&'static str>) {
    if XID_HARDWARE.contains(&code) {
        (Severity::Critical, Some("RailscopeGPUXidHardware"))
    } else if XID_WARNING.contains(&code) {
        (Severity::Warning, Some("RailscopeGPUXidWarning"))
    } else {
        (Severity::Ok, Some("RailscopeGPUXidApplication"))
    }
}

fn gpu_health(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let gpus = node.gpus();
    if gpus.is_empty() {
        out.push(skip("gpu", "no GPUs"));
        return out;
    }
    for g in &gpus {
        let id = g.label("gpu");
        let subject = format!("GPU {id}");
        let key = [("gpu", id)];
        let mut xids: Vec<(u32, f64)> = facts
            .matching("railscope_gpu_xid_errors_total", &key)
            .filter(|s| s.value > 0.0)
            .filter_map(|s| Some((s.label("xid").parse().ok()?, s.value)))
            .collect();
        xids.sort_by_key(|(c, _)| *c);
        for (code, n) in xids {
            let (severity, alert) = xid_severity(code);
            let mut f = Finding::new(severity, "xid", subject.clone())
                .summary(format!(
                    "GPU {id} logged XID {code} ({} seen through NVML events)",
                    count(n as usize, "event", "events")
                ))
                .evidence(
                    format!("XID {code}"),
                    format!("{n}"),
                    "NVML events (nvmlEventSetWait)",
                );
            if severity > Severity::Ok {
                f = f
                    .meaning(if severity == Severity::Critical { "A hardware XID: the GPU needs a reset or replacement; jobs on it fail or silently corrupt." } else { "The GPU recovered, but asks for attention (a reset at the next opportunity)." })
                    .fix("Look the code up in NVIDIA's XID catalogue; drain the node for a hardware XID and follow the recovery action.");
            }
            if let Some(a) = alert {
                f = f.alert(a);
            }
            out.push(f);
        }
        if let Some(n) = facts.value(
            "railscope_gpu_ecc_errors_total",
            &[("gpu", id), ("type", "uncorrected"), ("scope", "volatile")],
        ) && n > 0.0
        {
            out.push(
                Finding::new(Severity::Critical, "ecc_uncorrected", subject.clone())
                    .summary(format!("GPU {id} has {} since the driver loaded", count(n as usize, "uncorrected ECC error", "uncorrected ECC errors")))
                    .evidence("volatile uncorrected ECC errors", format!("{n}"), "NVML nvmlDeviceGetTotalEccErrors")
                    .meaning("Uncorrectable memory errors kill the process that hit them and may corrupt results.")
                    .fix("Drain the node and reset the GPU (row remapping takes effect then); replace it if errors return.")
                    .alert("RailscopeGPUECCUncorrectable"),
            );
        }
        if facts.value("railscope_gpu_remapped_rows_failure", &key) == Some(1.0) {
            out.push(
                Finding::new(Severity::Critical, "row_remap_failure", subject.clone())
                    .summary(format!("GPU {id}: a row remapping failed"))
                    .evidence("row remap failure", "1", "NVML nvmlDeviceGetRemappedRows")
                    .meaning("The GPU ran out of spare rows: its memory can no longer be repaired.")
                    .fix("Replace the GPU.")
                    .alert("RailscopeGPURowRemapFailure"),
            );
        } else if facts.value("railscope_gpu_remapped_rows_pending", &key) == Some(1.0) {
            out.push(
                Finding::new(Severity::Warning, "row_remap_pending", subject.clone())
                    .summary(format!("GPU {id}: a row remap is pending"))
                    .evidence("row remap pending", "1", "NVML nvmlDeviceGetRemappedRows")
                    .meaning("A bad memory row is remapped only at the next GPU reset; until then it may raise ECC errors.")
                    .fix("Reset the GPU when the node is drained (nvidia-smi -r -i <gpu>).")
                    .alert("RailscopeGPURowRemapPending"),
            );
        }
        if let Some(a) = facts
            .matching("railscope_gpu_recovery_action", &key)
            .find(|s| s.value == 1.0 && s.label("action") != "none")
        {
            out.push(
                Finding::new(Severity::Critical, "recovery_action", subject.clone())
                    .summary(format!(
                        "GPU {id}: the driver asks for {}",
                        a.label("action")
                    ))
                    .evidence(
                        "recovery action",
                        a.label("action"),
                        "NVML field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                    )
                    .meaning("The driver will not trust this GPU until the action is done.")
                    .fix("Drain the node and do what the driver asks (GPU reset or node reboot).")
                    .alert("RailscopeGPURecoveryActionRequired"),
            );
        }
        let throttles: Vec<&str> = facts
            .matching("railscope_gpu_throttle_reason", &key)
            .filter(|s| {
                s.value == 1.0
                    && matches!(
                        s.label("reason"),
                        "hw_slowdown"
                            | "hw_thermal_slowdown"
                            | "sw_thermal_slowdown"
                            | "hw_power_brake_slowdown"
                    )
            })
            .map(|s| s.label("reason"))
            .collect();
        if !throttles.is_empty() {
            out.push(
                Finding::new(Severity::Warning, "throttling", subject.clone())
                    .summary(format!("GPU {id} is throttled: {}", throttles.join(", ")))
                    .evidence("clock event reasons", throttles.join(", "), "NVML nvmlDeviceGetCurrentClocksEventReasons")
                    .meaning("Thermal or power-brake slowdown runs the GPU below its clocks: the whole job waits for the slowest GPU.")
                    .fix("Check the node's cooling and power supply (nvidia-smi -q -d PERFORMANCE,TEMPERATURE).")
                    .alert("RailscopeGPUThrottling"),
            );
        }
        let lost = facts
            .matching("railscope_gpu_state", &key)
            .any(|s| s.value == 1.0 && matches!(s.label("state"), "lost" | "timeout"));
        if !lost && facts.value("railscope_gpu_xid_events_registered", &key) == Some(0.0) {
            out.push(
                Finding::new(Severity::Warning, "xid_events", subject.clone())
                    .summary(format!("GPU {id}: XID events could not be registered"))
                    .evidence("XID events registered", "0", "NVML nvmlDeviceRegisterEvents")
                    .meaning("XIDs of this GPU are seen only in the kernel log.")
                    .fix("Run the agent with the rights NVML events need; the kmsg collector still reads XIDs from /dev/kmsg.")
                    .alert("RailscopeGPUXidEventsUnavailable"),
            );
        }
    }
    if !out.iter().any(|f| f.severity > Severity::Ok) {
        out.push(ok(
            "gpu",
            format!(
                "{}: no hardware XID, uncorrected ECC error, pending remap or throttling",
                count(gpus.len(), "GPU", "GPUs")
            ),
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------
// 11. Kernel log

fn kernel_log(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    if !facts.has("railscope_kmsg_records_total") {
        out.push(skip(
            "kernel",
            "the kernel log is not read (the kmsg collector is off or cannot open /dev/kmsg)",
        ));
        return out;
    }
    let mut events: Vec<&Sample> = facts
        .all("railscope_kmsg_events_total")
        .filter(|s| s.value > 0.0)
        .collect();
    events.sort_by(|a, b| {
        (
            a.label("kind"),
            a.label("device"),
            a.label("pci_address"),
            a.label("code"),
        )
            .cmp(&(
                b.label("kind"),
                b.label("device"),
                b.label("pci_address"),
                b.label("code"),
            ))
    });
    for e in events {
        let kind = e.label("kind");
        let (severity, alert, meaning): (Severity, Option<&'static str>, &str) = match kind {
            "mlx5_cmd_timeout" => (
                Severity::Critical,
                Some("RailscopeNICFirmwareUnresponsive"),
                "The NIC's firmware stopped answering commands: the port may be hung.",
            ),
            "sxid" if e.label("severity") == "fatal" => (
                Severity::Critical,
                Some("RailscopeNVSwitchFatalSXid"),
                "A fatal NVSwitch error: NVLink traffic through it is lost until the fabric is reset.",
            ),
            "sxid" => (
                Severity::Warning,
                Some("RailscopeNVSwitchSXid"),
                "An NVSwitch error the switch recovered from.",
            ),
            "xid" => {
                let (s, a) = e
                    .label("code")
                    .parse()
                    .map(xid_severity)
                    .unwrap_or((Severity::Warning, None));
                (s, a, "An XID the GPU driver logged.")
            }
            "mlx5_module" => (
                Severity::Warning,
                Some("RailscopeNICModuleError"),
                "The NIC reported a cable or transceiver module problem.",
            ),
            "pcie_link_down" => (
                Severity::Warning,
                Some("RailscopePCIeSlotLinkDown"),
                "A PCIe slot's link went down: the device behind it left the bus.",
            ),
            "pcie_power" => (
                Severity::Warning,
                Some("RailscopePCIeSlotPowerInsufficient"),
                "A PCIe slot reported insufficient power.",
            ),
            _ => (
                Severity::Warning,
                None,
                "A kernel-log event railscope watches for.",
            ),
        };
        let subject = [e.label("device"), e.label("pci_address")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let code = if e.label("code").is_empty() {
            String::new()
        } else {
            format!(" {}", e.label("code"))
        };
        let mut f = Finding::new(severity, "kernel_log", subject.clone())
            .summary(format!(
                "{kind}{code}{}: {}",
                if subject.is_empty() {
                    String::new()
                } else {
                    format!(" on {subject}")
                },
                count(e.value as usize, "event", "events")
            ))
            .evidence(
                format!("{kind}{code} events"),
                format!("{}", e.value),
                "/dev/kmsg",
            );
        if severity > Severity::Ok {
            f = f.meaning(meaning).fix("Read the kernel log around the event (journalctl -k) and follow the RUNBOOK entry.");
        }
        if let Some(a) = alert {
            f = f.alert(a);
        }
        out.push(f);
    }
    if out.is_empty() {
        out.push(ok(
            "kernel",
            "no XID, SXID, NIC firmware, module or PCIe slot event in the kernel log",
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------
// NCCL

fn nccl_hints(node: &Node, hints: &mut NcclHints) {
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

fn nccl_environment(node: &Node, hints: &NcclHints, env: &[(String, String)]) -> Vec<Finding> {
    let mut out = Vec::new();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let hint = |k: &str| {
        hints
            .settings
            .iter()
            .find(|(n, _, _)| *n == k)
            .map(|(_, v, _)| v.as_str())
    };
    let devices: BTreeSet<&str> = node.ports.iter().map(|p| p.device.as_str()).collect();
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
                    .fix(format!("Use {}", hint("NCCL_IB_HCA").unwrap_or("the node's RDMA devices"))),
            );
        } else if let Some(h) = hint("NCCL_IB_HCA")
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
                    .fix(match hint("NCCL_SOCKET_IFNAME") { Some(h) => format!("Use NCCL_SOCKET_IFNAME={h}"), None => "Name the node's front-end netdev.".to_owned() }),
            );
        }
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
