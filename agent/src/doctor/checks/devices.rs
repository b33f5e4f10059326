//! Step 1, devices and ports: the collectors completed, every RDMA port is ACTIVE / LinkUp, every
//! GPU answers NVML, and the expected inventory (the config file's `expected` section) is there.

use std::collections::BTreeSet;

use super::{Finding, Node, Severity, count, ok, port_file, skip};
use crate::doctor::facts::Facts;

pub(super) fn devices(node: &Node) -> Vec<Finding> {
    let mut out = Vec::new();
    collectors(node.facts, &mut out);
    ports(node, &mut out);
    inventory(node.facts, &mut out);
    gpus(node, &mut out);
    out
}

/// Collectors that failed or could not read some files: the facts of later steps are missing.
fn collectors(facts: &Facts, out: &mut Vec<Finding>) {
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
}

/// Every RDMA port ACTIVE / LinkUp.
fn ports(node: &Node, out: &mut Vec<Finding>) {
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
}

/// Every GPU answers NVML.
fn gpus(node: &Node, out: &mut Vec<Finding>) {
    let facts = node.facts;
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
