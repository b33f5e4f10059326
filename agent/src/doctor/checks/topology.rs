//! Step 8, topology: each rail NIC's nearest GPU, and the NCCL_NET_GDR_LEVEL it implies.

use std::collections::{BTreeMap, BTreeSet};

use super::rules::NIC_GPU_DISTANCE;
use super::{Finding, NcclHints, Node, Severity, level_name, natural, ok, skip};

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

pub(super) fn topology(node: &Node, hints: &mut NcclHints) -> Vec<Finding> {
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
        if *d >= NIC_GPU_DISTANCE {
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
    if worst < NIC_GPU_DISTANCE {
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
