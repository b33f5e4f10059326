//! Maps the `pci`, `topology` and `host` snapshots to metric families.

use railscope_collectors::sources::host::{self, IommuMode};
use railscope_collectors::sources::pci::{self, AcsState};
use railscope_collectors::sources::topology;

use crate::exposition::Family;

fn hex(v: Option<u32>, width: usize) -> String {
    v.map(|v| format!("0x{v:0width$x}")).unwrap_or_default()
}

/// The `pci` source's families.
pub(crate) fn pci_families(snapshot: &pci::Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_pci_device",
        "A PCI function railscope watches: an RDMA NIC, an NVIDIA GPU, or a bridge above one; ids, role, driver, NUMA node.",
    );
    let mut speed = Family::gauge(
        "railscope_pci_link_speed_transfers_per_second",
        "Current PCIe link speed per lane (current_link_speed; 32e9 is Gen5). GPUs lower it at idle to save power.",
    );
    let mut max_speed = Family::gauge(
        "railscope_pci_link_max_speed_transfers_per_second",
        "Maximum PCIe link speed per lane the function supports (max_link_speed).",
    );
    let mut width = Family::gauge(
        "railscope_pci_link_width_lanes",
        "Current PCIe link width (current_link_width).",
    );
    let mut max_width = Family::gauge(
        "railscope_pci_link_max_width_lanes",
        "Maximum PCIe link width (max_link_width).",
    );
    let mut aer_total = Family::counter(
        "railscope_pci_aer_errors",
        "PCIe Advanced Error Reporting errors the kernel counted for the function, by severity (aer_dev_*: TOTAL_ERR_*).",
    );
    let mut aer_type = Family::counter(
        "railscope_pci_aer_errors_by_type",
        "PCIe AER errors by severity and error type, as the kernel names them (RxErr, BadTLP, CmpltTO, ...); a type appears once it has counted an error.",
    );
    let mut acs = Family::gauge(
        "railscope_pci_acs_state",
        "ACS of a bridge above a GPU or NIC, one series per state, 1 for the current one: redirect sends GPU-NIC peer-to-peer traffic through the root complex.",
    );
    for d in &snapshot.devices {
        let addr = || vec![("pci_address", d.address.clone())];
        info.push(
            [
                ("pci_address", d.address.clone()),
                ("role", d.role.as_str().to_owned()),
                ("vendor_id", hex(d.vendor, 4)),
                ("device_id", hex(d.device, 4)),
                ("class_id", hex(d.class, 6)),
                ("driver", d.driver.clone().unwrap_or_default()),
                (
                    "numa_node",
                    d.numa_node.map(|n| n.to_string()).unwrap_or_default(),
                ),
                ("rdma_device", d.rdma_devices.join(",")),
                (
                    "gpu",
                    d.gpu_index.map(|i| i.to_string()).unwrap_or_default(),
                ),
            ],
            1u64,
        );
        if let Some(v) = d.current_speed {
            speed.push(addr(), v);
        }
        if let Some(v) = d.max_speed {
            max_speed.push(addr(), v);
        }
        if let Some(v) = d.current_width {
            width.push(addr(), v);
        }
        if let Some(v) = d.max_width {
            max_width.push(addr(), v);
        }
        for aer in &d.aer {
            if let Some(total) = aer.total {
                aer_total.push(
                    [
                        ("pci_address", d.address.clone()),
                        ("severity", aer.severity.to_owned()),
                    ],
                    total,
                );
            }
            // Only types that have counted anything: a node has dozens of functions with some
            // thirty error types each, nearly all zero forever.
            for (name, count) in aer.by_type.iter().filter(|(_, c)| *c > 0) {
                aer_type.push(
                    [
                        ("pci_address", d.address.clone()),
                        ("severity", aer.severity.to_owned()),
                        ("type", name.clone()),
                    ],
                    *count,
                );
            }
        }
        if let Some(state) = d.acs {
            for s in AcsState::ALL {
                acs.push(
                    [
                        ("pci_address", d.address.clone()),
                        ("state", s.as_str().to_owned()),
                    ],
                    s == state,
                );
            }
        }
    }
    vec![
        info, speed, max_speed, width, max_width, aer_total, aer_type, acs,
    ]
}

/// The `topology` source's families.
pub(crate) fn topology_families(snapshot: &topology::Snapshot) -> Vec<Family> {
    let mut gpus = Family::info(
        "railscope_topology_gpu",
        "An NVIDIA GPU found on the PCI bus; gpu is its index in PCI order, as nvidia-smi numbers GPUs.",
    );
    for g in &snapshot.gpus {
        gpus.push(
            [
                ("gpu", g.index.to_string()),
                ("pci_address", g.address.clone()),
                (
                    "numa_node",
                    g.numa_node.map(|n| n.to_string()).unwrap_or_default(),
                ),
            ],
            1u64,
        );
    }
    let mut distance = Family::gauge(
        "railscope_topology_nic_gpu_distance",
        "PCIe distance between an RDMA NIC and a GPU as nvidia-smi topo -m names it (level label) and NVML numbers it: 10 PIX, 20 PXB, 30 PHB, 40 NODE, 50 SYS.",
    );
    let mut nearest = Family::info(
        "railscope_topology_nic_nearest_gpu",
        "The GPUs closest to an RDMA NIC over PCIe, with that distance.",
    );
    for nic in &snapshot.nics {
        for (gpu, level) in nic.distances.iter().enumerate() {
            distance.push(
                [
                    ("device", nic.device.clone()),
                    ("gpu", gpu.to_string()),
                    ("level", level.as_str().to_owned()),
                ],
                *level as u64,
            );
        }
        if let Some((level, gpus)) = nic.nearest() {
            for gpu in gpus {
                nearest.push(
                    [
                        ("device", nic.device.clone()),
                        ("pci_address", nic.address.clone()),
                        ("gpu", gpu.to_string()),
                        ("level", level.as_str().to_owned()),
                    ],
                    1u64,
                );
            }
        }
    }
    let mut rails = Family::info(
        "railscope_rail",
        "The rail of an RDMA port; join on (device, port). source is configured, derived (from its GPU) or pci_order.",
    );
    for r in &snapshot.rails {
        rails.push(
            [
                ("device", r.device.clone()),
                ("port", r.port.to_string()),
                ("rail", r.rail.to_string()),
                ("pci_address", r.address.clone()),
                ("gpu", r.gpu.map(|g| g.to_string()).unwrap_or_default()),
                ("source", r.source.as_str().to_owned()),
            ],
            1u64,
        );
    }
    vec![gpus, distance, nearest, rails]
}

/// The `host` source's families.
pub(crate) fn host_families(snapshot: &host::Snapshot) -> Vec<Family> {
    let mut modules = Family::gauge(
        "railscope_host_kernel_module_loaded",
        "1 when the kernel module is loaded (/sys/module/<module>).",
    );
    for (module, loaded) in &snapshot.modules {
        modules.push([("module", (*module).to_owned())], *loaded);
    }
    let mut peermem = Family::gauge(
        "railscope_host_gpudirect_rdma_module_loaded",
        "1 when nvidia_peermem (or the older nv_peer_mem) is loaded, so RDMA NICs can register GPU memory (GPUDirect RDMA).",
    );
    let loaded = snapshot
        .modules
        .iter()
        .any(|(m, l)| *l && (*m == "nvidia_peermem" || *m == "nv_peer_mem"));
    peermem.push_unlabelled(loaded);
    let mut units = Family::gauge(
        "railscope_host_iommu_units",
        "IOMMU units the kernel registered (/sys/class/iommu).",
    );
    units.push_unlabelled(snapshot.iommu_units as u64);
    let mut mode = Family::gauge(
        "railscope_host_iommu_mode",
        "IOMMU translation mode for devices, one series per mode, 1 for the current one: translated costs or breaks GPU-NIC peer-to-peer DMA.",
    );
    if let Some(current) = snapshot.iommu_mode {
        for m in IommuMode::ALL {
            mode.push([("mode", m.as_str().to_owned())], m == current);
        }
    }
    let mut iommu_info = Family::info(
        "railscope_host_iommu",
        "Where the IOMMU mode was read (iommu_groups, cmdline or sysfs) and the kernel's IOMMU command-line parameters.",
    );
    iommu_info.push(
        [
            ("source", snapshot.iommu_mode_source.to_owned()),
            ("cmdline", snapshot.iommu_cmdline.clone()),
        ],
        1u64,
    );
    let mut memlock = Family::gauge(
        "railscope_host_memlock_limit_bytes",
        "RLIMIT_MEMLOCK of PID 1 (what services inherit) and of the agent; +Inf is unlimited. RDMA memory registration fails beyond it.",
    );
    for (process, limit) in &snapshot.memlock {
        for (which, value) in [("soft", limit.soft), ("hard", limit.hard)] {
            let v = value.map_or(f64::INFINITY, |v| v as f64);
            memlock.push(
                [
                    ("process", (*process).to_owned()),
                    ("limit", which.to_owned()),
                ],
                v,
            );
        }
    }
    let mut nvidia = Family::info(
        "railscope_host_nvidia_kernel_module",
        "The NVIDIA kernel module: open (GPL-compatible, /sys/module/nvidia/taint without P) or proprietary, and its version.",
    );
    if let Some(module) = &snapshot.nvidia {
        nvidia.push(
            [
                ("flavor", module.flavor.as_str().to_owned()),
                ("version", module.version.clone()),
            ],
            1u64,
        );
    }
    let mut dmabuf = Family::gauge(
        "railscope_host_gpudirect_rdma_dmabuf_capable",
        "1 when RDMA NICs can register GPU memory through dma-buf without nvidia_peermem: the open NVIDIA kernel module on a 5.12+ kernel. Absent without the NVIDIA module or the kernel release.",
    );
    if let Some(capable) = snapshot.dmabuf_capable() {
        dmabuf.push_unlabelled(capable);
    }
    vec![
        modules, peermem, dmabuf, nvidia, units, mode, iommu_info, memlock,
    ]
}
