//! Step 7, GPUDirect RDMA: peer memory (nvidia_peermem or dma-buf), the IOMMU mode, ACS on the
//! bridges and the locked-memory limit.

use super::rules::MEMLOCK_BYTES;
use super::{Finding, Node, Severity, count, ok, skip};

pub(super) fn gpudirect(node: &Node) -> Vec<Finding> {
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
        if limit < MEMLOCK_BYTES {
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
