//! Maps the `workload` source's snapshot to `railscope_workload_*`: one info series per
//! device a container holds, with the device resolved against the same collection's GPUs
//! (GPU and MIG UUIDs to the `gpu` index and GPU instance) and RDMA devices (a VF's PCI
//! address to its RDMA device), so that an alert on a device joins to the pod on it.

use railscope_collectors::sources::gpu;
use railscope_collectors::sources::infiniband;
use railscope_collectors::sources::workload::{Assignment, SharedRdma, Snapshot};

use crate::exposition::Family;

/// What a device id resolves to on this node.
#[derive(Debug, Default, PartialEq, Eq)]
struct Resolved {
    gpu: String,
    gpu_instance: String,
    pci_address: String,
    rdma_device: String,
    netdev: String,
}

/// A PCI address as the SR-IOV device plugin writes it (`0000:3b:02.1`), in sysfs form.
fn pci_address(id: &str) -> Option<String> {
    let (domain, rest) = id.split_once(':')?;
    let (bus, devfn) = rest.split_once(':')?;
    let (dev, func) = devfn.split_once('.')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (matches!(domain.len(), 4..=8)
        && domain.bytes().all(|b| b.is_ascii_hexdigit())
        && hex(bus, 2)
        && hex(dev, 2)
        && func.len() == 1
        && func.as_bytes()[0].is_ascii_digit())
    .then(|| {
        let domain = u32::from_str_radix(domain, 16).unwrap_or(0);
        format!("{domain:04x}:{}", rest.to_ascii_lowercase())
    })
}

/// The netdev of an RDMA device's port: `port`'s, or the first port's with one.
fn netdev_of(d: &infiniband::Device) -> String {
    d.ports
        .iter()
        .find_map(|p| p.netdev.clone())
        .unwrap_or_default()
}

/// Whether RDMA device `d` is one the shared plugin's selectors pick. At least one of the
/// selectors railscope can check (interface names, drivers, link types) must be set.
fn selected(s: &SharedRdma, d: &infiniband::Device) -> bool {
    if s.if_names.is_empty() && s.drivers.is_empty() && s.link_types.is_empty() {
        return false;
    }
    let if_ok = s.if_names.is_empty()
        || d.ports
            .iter()
            .any(|p| p.netdev.as_ref().is_some_and(|n| s.if_names.contains(n)))
        || d.pci_address.as_ref().is_some_and(|a| s.if_pci.contains(a));
    let driver_ok =
        s.drivers.is_empty() || d.driver.as_ref().is_some_and(|dr| s.drivers.contains(dr));
    let link_ok = s.link_types.is_empty()
        || d.ports.iter().any(|p| {
            let layer = p
                .link_layer
                .as_deref()
                .unwrap_or_default()
                .to_ascii_lowercase();
            s.link_types.iter().any(|t| {
                let t = t.to_ascii_lowercase();
                layer == t || (t == "ether" && layer == "ethernet")
            })
        });
    if_ok && driver_ok && link_ok
}

/// What an assignment's device is on this node: one entry, or one per RDMA device a shared
/// resource stands for.
fn resolve(
    a: &Assignment,
    gpus: Option<&gpu::Snapshot>,
    rdma: Option<&infiniband::Snapshot>,
    shared: &[SharedRdma],
) -> Vec<Resolved> {
    if let Some(s) = shared.iter().find(|s| s.resource == a.resource) {
        let picked: Vec<Resolved> = rdma
            .into_iter()
            .flat_map(|r| &r.devices)
            .filter(|d| selected(s, d))
            .map(|d| Resolved {
                pci_address: d.pci_address.clone().unwrap_or_default(),
                rdma_device: d.name.clone(),
                netdev: netdev_of(d),
                ..Resolved::default()
            })
            .collect();
        if !picked.is_empty() {
            return picked;
        }
    }
    vec![resolve_one(a, gpus, rdma)]
}

fn resolve_one(
    a: &Assignment,
    gpus: Option<&gpu::Snapshot>,
    rdma: Option<&infiniband::Snapshot>,
) -> Resolved {
    let mut r = Resolved::default();
    let id = a.device_id.as_str();
    if id.starts_with("GPU-") {
        // Time-slicing and MPS hand out replicas as `GPU-…::N`.
        let uuid = id.split("::").next().unwrap_or(id);
        if let Some(g) = gpus
            .into_iter()
            .flat_map(|s| &s.gpus)
            .find(|g| g.identity.uuid.as_deref() == Some(uuid))
        {
            r.gpu = g.index.to_string();
        }
    } else if id.starts_with("MIG-") {
        let uuid = id.split("::").next().unwrap_or(id);
        for g in gpus.into_iter().flat_map(|s| &s.gpus) {
            if let Some(d) = g
                .mig
                .iter()
                .flat_map(|m| &m.devices)
                .find(|d| d.uuid.as_deref() == Some(uuid))
            {
                r.gpu = g.index.to_string();
                r.gpu_instance = d.gpu_instance.to_string();
            }
        }
    } else if let Some(pci) = pci_address(id) {
        if let Some(d) = rdma
            .into_iter()
            .flat_map(|s| &s.devices)
            .find(|d| d.pci_address.as_deref() == Some(pci.as_str()))
        {
            r.rdma_device = d.name.clone();
            r.netdev = netdev_of(d);
        }
        r.pci_address = pci;
    }
    r
}

/// The `workload` source's families.
pub(crate) fn families(
    snapshot: &Snapshot,
    gpus: Option<&gpu::Snapshot>,
    rdma: Option<&infiniband::Snapshot>,
) -> Vec<Family> {
    let mut out = process_families(snapshot, gpus);
    let Some(kubelet) = &snapshot.kubelet else {
        return out;
    };
    let mut up = Family::gauge(
        "railscope_workload_kubelet_up",
        "1 when the kubelet's PodResources API answered in this collection.",
    );
    up.push_unlabelled(snapshot.kubelet_up);
    let mut pods = Family::gauge(
        "railscope_workload_kubelet_pods",
        "Pods the kubelet listed in this collection, with devices or not.",
    );
    let mut allocatable = Family::gauge(
        "railscope_workload_allocatable_devices",
        "Devices the kubelet can allocate, by resource (GetAllocatableResources, asked every minute): fewer than the node has means a device plugin lost or marked unhealthy a device.",
    );
    let mut info = Family::info(
        "railscope_workload_device",
        "One per device a container holds, from the kubelet: the pod, the resource and the device id, with the device resolved on this node (gpu and gpu_instance for GPU and MIG UUIDs, pci_address and rdma_device for an SR-IOV VF). Join on (instance, gpu) or (instance, rdma_device).",
    );
    if snapshot.kubelet_up {
        pods.push_unlabelled(kubelet.pods as u64);
        for (resource, n) in &kubelet.allocatable {
            allocatable.push([("resource", resource.clone())], *n as u64);
        }
    }
    info.reserve(kubelet.assignments.len());
    for a in &kubelet.assignments {
        let (claim_namespace, claim) = a.claim.clone().unwrap_or_default();
        for r in resolve(a, gpus, rdma, &snapshot.shared_rdma) {
            info.push(
                [
                    ("namespace", a.namespace.clone()),
                    ("pod", a.pod.clone()),
                    ("container", a.container.clone()),
                    ("resource", a.resource.clone()),
                    ("device_id", a.device_id.clone()),
                    ("claim_namespace", claim_namespace.clone()),
                    ("claim", claim.clone()),
                    ("gpu", r.gpu),
                    ("gpu_instance", r.gpu_instance),
                    ("pci_address", r.pci_address),
                    ("rdma_device", r.rdma_device),
                    ("netdev", r.netdev),
                ],
                1u64,
            );
        }
    }
    out.extend([up, pods, allocatable, info]);
    out
}

/// `railscope_workload_process_device_info`: one per workload and device node its processes
/// hold, the GPU resolved by the node's minor number (and, in MIG mode, the GPU instance
/// NVML runs the process on), the RDMA device by its `uverbs` node.
fn process_families(snapshot: &Snapshot, gpus: Option<&gpu::Snapshot>) -> Vec<Family> {
    use std::collections::BTreeSet;
    let processes = &snapshot.processes;
    let mut scanned = Family::gauge(
        "railscope_workload_processes_scanned",
        "Processes the last scan of /proc looked at (every 30 s).",
    );
    scanned.push_unlabelled(processes.scanned as u64);
    let mut info = Family::info(
        "railscope_workload_process_device",
        "One per workload (Slurm job, Kubernetes pod UID, systemd unit, login session) and device node (nvidiaN, uverbsN) its processes hold, from /proc and the processes' cgroups; gpu and gpu_instance resolved through NVML, rdma_device through the uverbs node.",
    );
    let all_gpus: Vec<&gpu::Gpu> = gpus.into_iter().flat_map(|s| &s.gpus).collect();
    let mut rows: BTreeSet<[String; 6]> = BTreeSet::new();
    // NVML's compute processes place a process on its GPU (and GPU instance) even when its
    // open files could not be read.
    for g in &all_gpus {
        for (pid, gi) in &g.processes {
            let Some(p) = processes.list.iter().find(|p| p.pid == *pid) else {
                continue;
            };
            rows.insert([
                p.kind.as_str().to_owned(),
                p.workload.clone(),
                g.identity
                    .minor_number
                    .map(|m| format!("nvidia{m}"))
                    .unwrap_or_default(),
                g.index.to_string(),
                gi.map(|gi| gi.to_string()).unwrap_or_default(),
                String::new(),
            ]);
        }
    }
    for p in &processes.list {
        for minor in &p.nvidia {
            let g = all_gpus
                .iter()
                .find(|g| g.identity.minor_number == Some(*minor));
            let instances: BTreeSet<String> = g
                .into_iter()
                .flat_map(|g| &g.processes)
                .filter(|(pid, _)| *pid == p.pid)
                .filter_map(|(_, gi)| gi.map(|gi| gi.to_string()))
                .collect();
            let gpu = g.map(|g| g.index.to_string()).unwrap_or_default();
            let instances = if instances.is_empty() {
                vec![String::new()]
            } else {
                instances.into_iter().collect()
            };
            for gi in instances {
                rows.insert([
                    p.kind.as_str().to_owned(),
                    p.workload.clone(),
                    format!("nvidia{minor}"),
                    gpu.clone(),
                    gi,
                    String::new(),
                ]);
            }
        }
        for n in &p.uverbs {
            let rdma = processes
                .uverbs
                .iter()
                .find(|(u, _)| u == n)
                .map(|(_, d)| d.clone())
                .unwrap_or_default();
            rows.insert([
                p.kind.as_str().to_owned(),
                p.workload.clone(),
                format!("uverbs{n}"),
                String::new(),
                String::new(),
                rdma,
            ]);
        }
    }
    for [kind, workload, device, gpu, gpu_instance, rdma_device] in rows {
        info.push(
            [
                ("kind", kind),
                ("workload", workload),
                ("device_node", device),
                ("gpu", gpu),
                ("gpu_instance", gpu_instance),
                ("rdma_device", rdma_device),
            ],
            1u64,
        );
    }
    vec![scanned, info]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vf_pci_addresses_are_recognised_in_sysfs_form() {
        assert_eq!(pci_address("0000:3b:02.1").as_deref(), Some("0000:3b:02.1"));
        assert_eq!(pci_address("0000:AF:00.7").as_deref(), Some("0000:af:00.7"));
        assert_eq!(
            pci_address("00000000:3b:02.1").as_deref(),
            Some("0000:3b:02.1")
        );
        for not in [
            "GPU-1",
            "0",
            "hca_shared_0",
            "0000:3b:02",
            "0000:3b:2.1",
            "zz00:3b:02.1",
        ] {
            assert_eq!(pci_address(not), None, "{not}");
        }
    }
}
