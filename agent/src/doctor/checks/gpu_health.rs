//! Step 10, GPU health: XIDs by class, uncorrected ECC errors, row remapping, recovery actions,
//! throttling and XID event registration; each GPU named with its tray, slot and module where
//! platform info gives them.

use super::rules::{XID_HARDWARE, XID_WARNING};
use super::{Finding, Node, Severity, count, ok, skip};
use crate::doctor::facts::Facts;

/// The severity and alert of an XID by its class in the mixin's `xids` (hardware: drain and
/// replace; warning; anything else is the application's).
pub(super) fn xid_severity(code: u32) -> (Severity, Option<&'static str>) {
    if XID_HARDWARE.contains(&code) {
        (Severity::Critical, Some("RailscopeGPUXidHardware"))
    } else if XID_WARNING.contains(&code) {
        (Severity::Warning, Some("RailscopeGPUXidWarning"))
    } else {
        (Severity::Ok, Some("RailscopeGPUXidApplication"))
    }
}

pub(super) fn gpu_health(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let gpus = node.gpus();
    if gpus.is_empty() {
        out.push(skip("gpu", "no GPUs"));
        return out;
    }
    for g in &gpus {
        let id = g.label("gpu");
        xids(facts, id, &mut out);
        memory(facts, id, &mut out);
        driver(facts, id, &mut out);
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

/// How GPU `id` is named in findings: with its compute tray, slot and module where platform
/// info gives them (Blackwell and later), so a technician finds it in the rack.
fn gpu_name(facts: &Facts, id: &str) -> String {
    match facts
        .matching("railscope_gpu_platform_info", &[("gpu", id)])
        .next()
    {
        Some(p) => format!(
            "GPU {id} (tray {}, slot {}, module {})",
            p.label("tray"),
            p.label("slot"),
            p.label("module_id")
        ),
        None => format!("GPU {id}"),
    }
}

/// The XIDs NVML events counted for GPU `id`, by class.
fn xids(facts: &Facts, id: &str, out: &mut Vec<Finding>) {
    let subject = gpu_name(facts, id);
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
                "{subject} logged XID {code} ({} seen through NVML events)",
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
}

/// Uncorrected ECC errors and row remapping of GPU `id`.
fn memory(facts: &Facts, id: &str, out: &mut Vec<Finding>) {
    let subject = gpu_name(facts, id);
    let key = [("gpu", id)];
    if let Some(n) = facts.value(
        "railscope_gpu_ecc_errors_total",
        &[("gpu", id), ("type", "uncorrected"), ("scope", "volatile")],
    ) && n > 0.0
    {
        out.push(
            Finding::new(Severity::Critical, "ecc_uncorrected", subject.clone())
                .summary(format!("{subject} has {} since the driver loaded", count(n as usize, "uncorrected ECC error", "uncorrected ECC errors")))
                .evidence("volatile uncorrected ECC errors", format!("{n}"), "NVML nvmlDeviceGetTotalEccErrors")
                .meaning("Uncorrectable memory errors kill the process that hit them and may corrupt results.")
                .fix("Drain the node and reset the GPU (row remapping takes effect then); replace it if errors return.")
                .alert("RailscopeGPUECCUncorrectable"),
        );
    }
    if facts.value("railscope_gpu_remapped_rows_failure", &key) == Some(1.0) {
        out.push(
            Finding::new(Severity::Critical, "row_remap_failure", subject.clone())
                .summary(format!("{subject}: a row remapping failed"))
                .evidence("row remap failure", "1", "NVML nvmlDeviceGetRemappedRows")
                .meaning("The GPU ran out of spare rows: its memory can no longer be repaired.")
                .fix("Replace the GPU.")
                .alert("RailscopeGPURowRemapFailure"),
        );
    } else if facts.value("railscope_gpu_remapped_rows_pending", &key) == Some(1.0) {
        out.push(
            Finding::new(Severity::Warning, "row_remap_pending", subject.clone())
                .summary(format!("{subject}: a row remap is pending"))
                .evidence("row remap pending", "1", "NVML nvmlDeviceGetRemappedRows")
                .meaning("A bad memory row is remapped only at the next GPU reset; until then it may raise ECC errors.")
                .fix("Reset the GPU when the node is drained (nvidia-smi -r -i <gpu>).")
                .alert("RailscopeGPURowRemapPending"),
        );
    }
}

/// What the driver says of GPU `id`: a recovery action, throttling, XID events it cannot deliver.
fn driver(facts: &Facts, id: &str, out: &mut Vec<Finding>) {
    let subject = gpu_name(facts, id);
    let key = [("gpu", id)];
    if let Some(a) = facts
        .matching("railscope_gpu_recovery_action", &key)
        .find(|s| s.value == 1.0 && s.label("action") != "none")
    {
        out.push(
            Finding::new(Severity::Critical, "recovery_action", subject.clone())
                .summary(format!(
                    "{subject}: the driver asks for {}",
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
                .summary(format!("{subject} is throttled: {}", throttles.join(", ")))
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
                .summary(format!("{subject}: XID events could not be registered"))
                .evidence("XID events registered", "0", "NVML nvmlDeviceRegisterEvents")
                .meaning("XIDs of this GPU are seen only in the kernel log.")
                .fix("Run the agent with the rights NVML events need; the kmsg collector still reads XIDs from /dev/kmsg.")
                .alert("RailscopeGPUXidEventsUnavailable"),
        );
    }
}
