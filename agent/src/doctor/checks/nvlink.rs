//! Step 9, NVLink: links down among links up, data-link errors, and the fabric and NVLink-C2C
//! health of NVSwitch and Grace-Blackwell systems.

use std::collections::BTreeMap;

use super::rules::NVLINK_ERRORS_PER_SECOND;
use super::{Finding, Node, Severity, natural, ok, skip};
use crate::doctor::facts::Sample;

pub(super) fn nvlink(node: &Node) -> Vec<Finding> {
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
    let mut push = |s: &Sample, what: String| {
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
                .fix(format!("Watch the rate (RailscopeNVLinkErrors fires above {NVLINK_ERRORS_PER_SECOND}/s of data-link errors, or on any recovery or failed NVLink5 link recovery); nvidia-smi nvlink -e -i <gpu>."))
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
