//! Maps the `gpu` source's snapshot to metric families: `railscope_gpu_*` per GPU and
//! `railscope_nvlink_*` per link. Watts, hertz, bytes and ratios are base units.

use railscope_collectors::sources::gpu::{Gpu, GpuState, Snapshot};

use crate::exposition::{Family, Label, Labels};

/// The `gpu` source's families.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut families = identity_families(snapshot);
    families.extend(usage_families(&snapshot.gpus));
    families.extend(memory_health_families(&snapshot.gpus));
    families.extend(pcie_families(&snapshot.gpus));
    families.extend(error_and_fabric_families(&snapshot.gpus));
    families.extend(nvlink_families(&snapshot.gpus));
    families
}

/// An XID code's label (most are below 128).
fn xid_label(code: u64) -> Label {
    match u32::try_from(code) {
        Ok(code) => Label::number(code),
        Err(_) => Label::from(code.to_string()),
    }
}

/// The GPU's own label.
fn gpu_labels(gpu: &Gpu) -> Labels {
    smallvec::smallvec![("gpu", Label::number(gpu.index))]
}

/// The GPU's label and one more, whose value is known when the agent is built.
fn gpu_labels_with(gpu: &Gpu, name: &'static str, value: &'static str) -> Labels {
    gpu_labels_and(gpu, name, Label::Static(value))
}

/// The GPU's label and one more.
fn gpu_labels_and(gpu: &Gpu, name: &'static str, value: Label) -> Labels {
    smallvec::smallvec![("gpu", Label::number(gpu.index)), (name, value)]
}

/// Which GPUs there are and whether they answer: `railscope_gpu_info`, `_up`, `_state`.
fn identity_families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_gpu",
        "GPU identity: index, UUID, name, serial, PCI address (sysfs form), NUMA node, driver and CUDA versions, persistence mode.",
    );
    let mut up = Family::gauge(
        "railscope_gpu_up",
        "1 when the GPU answered NVML in this collection; 0 when it is lost, timed out or failed.",
    );
    let mut state = Family::gauge(
        "railscope_gpu_state",
        "How reading the GPU went, one series per state (ok, lost, timeout, error), 1 for the current one. lost is NVML's GPU_IS_LOST (XID 79); timeout a call hanging in the driver.",
    );
    for gpu in &snapshot.gpus {
        let id = &gpu.identity;
        info.push(
            [
                ("gpu", gpu.index.to_string()),
                ("uuid", id.uuid.clone().unwrap_or_default()),
                ("name", id.name.clone().unwrap_or_default()),
                ("serial", id.serial.clone().unwrap_or_default()),
                ("pci_address", id.pci_address.clone().unwrap_or_default()),
                (
                    "numa_node",
                    id.numa_node.map(|n| n.to_string()).unwrap_or_default(),
                ),
                (
                    "driver_version",
                    snapshot.driver_version.clone().unwrap_or_default(),
                ),
                (
                    "cuda_version",
                    snapshot.cuda_version.clone().unwrap_or_default(),
                ),
                (
                    "persistence_mode",
                    gpu.persistence_mode
                        .map(|p| if p { "enabled" } else { "disabled" })
                        .unwrap_or_default()
                        .to_owned(),
                ),
            ],
            1u64,
        );
        up.push(gpu_labels(gpu), gpu.state == GpuState::Ok);
        for s in GpuState::ALL {
            state.push(gpu_labels_with(gpu, "state", s.as_str()), s == gpu.state);
        }
    }
    vec![info, up, state]
}

/// What the GPU is doing: utilization, memory in use, temperature, power, clocks and
/// throttle reasons.
fn usage_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut util = Family::gauge(
        "railscope_gpu_utilization_ratio",
        "Fraction of time a kernel ran on the GPU in the last sample period.",
    );
    let mut mem_util = Family::gauge(
        "railscope_gpu_memory_utilization_ratio",
        "Fraction of time device memory was read or written in the last sample period.",
    );
    let mut mem_used = Family::gauge("railscope_gpu_memory_used_bytes", "Device memory in use.");
    let mut mem_total = Family::gauge(
        "railscope_gpu_memory_total_bytes",
        "Device memory installed.",
    );
    let mut temp = Family::gauge("railscope_gpu_temperature_celsius", "GPU core temperature.");
    let mut power = Family::gauge("railscope_gpu_power_watts", "Power draw.");
    let mut power_limit = Family::gauge("railscope_gpu_power_limit_watts", "Enforced power limit.");
    let mut clock = Family::gauge(
        "railscope_gpu_clock_hertz",
        "Current clock by domain (sm, memory).",
    );
    let mut clock_max = Family::gauge(
        "railscope_gpu_clock_max_hertz",
        "Maximum clock by domain (sm, memory).",
    );
    let mut throttle = Family::gauge(
        "railscope_gpu_throttle_reason",
        "1 when the clock throttle (event) reason is active: sw_power_cap, hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, ...",
    );
    for gpu in gpus {
        let g = || gpu_labels(gpu);
        if let Some((u, m)) = gpu.utilization {
            util.push(g(), f64::from(u) / 100.0);
            mem_util.push(g(), f64::from(m) / 100.0);
        }
        if let Some((used, total)) = gpu.memory {
            mem_used.push(g(), used);
            mem_total.push(g(), total);
        }
        if let Some(t) = gpu.temperature_c {
            temp.push(g(), t);
        }
        if let Some(p) = gpu.power_mw {
            power.push(g(), f64::from(p) / 1000.0);
        }
        if let Some(p) = gpu.power_limit_mw {
            power_limit.push(g(), f64::from(p) / 1000.0);
        }
        for (domain, cur, max) in &gpu.clocks {
            if let Some(c) = cur {
                clock.push(
                    gpu_labels_with(gpu, "clock", domain),
                    u64::from(*c) * 1_000_000,
                );
            }
            if let Some(m) = max {
                clock_max.push(
                    gpu_labels_with(gpu, "clock", domain),
                    u64::from(*m) * 1_000_000,
                );
            }
        }
        for (reason, active) in &gpu.throttle {
            throttle.push(gpu_labels_with(gpu, "reason", reason), *active);
        }
    }
    vec![
        util,
        mem_util,
        mem_used,
        mem_total,
        temp,
        power,
        power_limit,
        clock,
        clock_max,
        throttle,
    ]
}

/// `nvmlDeviceGpuRecoveryAction_t`, by value.
const RECOVERY_ACTIONS: [&str; 5] = [
    "none",
    "gpu_reset",
    "node_reboot",
    "drain_p2p",
    "drain_and_reset",
];

/// The health of device memory: ECC errors, remapped rows and retired pages, and the
/// recovery action the driver asks for.
fn memory_health_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut ecc = Family::counter(
        "railscope_gpu_ecc_errors",
        "ECC errors by type (corrected, uncorrected) and scope (volatile since driver load, aggregate over the GPU's life).",
    );
    let mut remapped = Family::gauge(
        "railscope_gpu_remapped_rows",
        "Rows remapped by cause (correctable, uncorrectable).",
    );
    let mut remap_pending = Family::gauge(
        "railscope_gpu_remapped_rows_pending",
        "1 when a row remap is pending (takes effect on GPU reset).",
    );
    let mut remap_failure = Family::gauge(
        "railscope_gpu_remapped_rows_failure",
        "1 when a row remap failed: the GPU needs service.",
    );
    let mut retired = Family::gauge(
        "railscope_gpu_retired_pages",
        "Retired framebuffer pages by cause (single_bit_ecc, double_bit_ecc).",
    );
    let mut recovery = Family::gauge(
        "railscope_gpu_recovery_action",
        "1 for the recovery action the driver asks for after an error (none, gpu_reset, node_reboot, drain_p2p, drain_and_reset); it holds until the action is done.",
    );
    for gpu in gpus {
        for (kind, scope, n) in &gpu.ecc {
            ecc.push(
                [
                    ("gpu", gpu.index.to_string()),
                    ("type", (*kind).to_owned()),
                    ("scope", (*scope).to_owned()),
                ],
                *n,
            );
        }
        if let Some((corr, unc, pending, failure)) = gpu.remapped_rows {
            remapped.push(gpu_labels_with(gpu, "cause", "correctable"), corr);
            remapped.push(gpu_labels_with(gpu, "cause", "uncorrectable"), unc);
            remap_pending.push(gpu_labels(gpu), pending);
            remap_failure.push(gpu_labels(gpu), failure);
        }
        for (cause, n) in &gpu.retired_pages {
            retired.push(gpu_labels_with(gpu, "cause", cause), *n);
        }
        if let Some(action) = gpu.recovery_action {
            let known = usize::try_from(action)
                .ok()
                .filter(|a| *a < RECOVERY_ACTIONS.len());
            for (i, name) in RECOVERY_ACTIONS.iter().enumerate() {
                recovery.push(gpu_labels_with(gpu, "action", name), known == Some(i));
            }
            if known.is_none() {
                // A value of a newer driver: shown, not lost.
                recovery.push(
                    gpu_labels_and(gpu, "action", Label::Owned(format!("unknown_{action}"))),
                    true,
                );
            }
        }
    }
    vec![
        ecc,
        remapped,
        remap_pending,
        remap_failure,
        retired,
        recovery,
    ]
}

/// The GPU's PCIe link as NVML sees it: generation, width, replays, and traffic (byte
/// counters where the driver has them, the 20 ms throughput sample elsewhere).
fn pcie_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut pcie_gen = Family::gauge(
        "railscope_gpu_pcie_link_generation",
        "Current PCIe generation (GPUs lower it at idle).",
    );
    let mut pcie_gen_max = Family::gauge(
        "railscope_gpu_pcie_link_max_generation",
        "Maximum PCIe generation of the GPU and system.",
    );
    let mut pcie_width = Family::gauge(
        "railscope_gpu_pcie_link_width_lanes",
        "Current PCIe link width.",
    );
    let mut pcie_width_max = Family::gauge(
        "railscope_gpu_pcie_link_max_width_lanes",
        "Maximum PCIe link width.",
    );
    let mut replays = Family::counter(
        "railscope_gpu_pcie_replays",
        "PCIe replays (retransmitted TLPs) of the GPU's link.",
    );
    let mut pcie_tput = Family::gauge(
        "railscope_gpu_pcie_throughput_bytes_per_second",
        "PCIe throughput by direction over NVML's 20 ms sample.",
    );
    let mut pcie_bytes = Family::counter(
        "railscope_gpu_pcie_bytes",
        "PCIe bytes by direction from NVML's byte counters, where the driver has them (railscope_gpu_pcie_throughput_bytes_per_second elsewhere).",
    );
    for gpu in gpus {
        let g = || gpu_labels(gpu);
        if let Some((cur, max, w, wmax)) = gpu.pcie_link {
            pcie_gen.push(g(), cur);
            pcie_gen_max.push(g(), max);
            pcie_width.push(g(), w);
            pcie_width_max.push(g(), wmax);
        }
        if let Some(r) = gpu.pcie_replays {
            replays.push(g(), r);
        }
        if let Some((tx, rx)) = gpu.pcie_bytes {
            pcie_bytes.push(gpu_labels_with(gpu, "direction", "tx"), tx);
            pcie_bytes.push(gpu_labels_with(gpu, "direction", "rx"), rx);
        }
        if let Some((tx, rx)) = gpu.pcie_throughput_kbps {
            pcie_tput.push(
                gpu_labels_with(gpu, "direction", "tx"),
                u64::from(tx) * 1000,
            );
            pcie_tput.push(
                gpu_labels_with(gpu, "direction", "rx"),
                u64::from(rx) * 1000,
            );
        }
    }
    vec![
        pcie_gen,
        pcie_gen_max,
        pcie_width,
        pcie_width_max,
        replays,
        pcie_tput,
        pcie_bytes,
    ]
}

/// XID errors and whether they can be seen, and fabric registration on NVSwitch systems.
fn error_and_fabric_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut xid = Family::counter(
        "railscope_gpu_xid_errors",
        "XID errors since the agent started, by code (48 double-bit ECC, 79 fallen off the bus, 74 NVLink error, ...).",
    );
    let mut xid_registered = Family::gauge(
        "railscope_gpu_xid_events_registered",
        "1 when the agent is registered for XID events of this GPU; 0 means XIDs on it cannot be seen (tried again every minute), not that none happened.",
    );
    let mut fabric = Family::gauge(
        "railscope_gpu_fabric_state",
        "GPU fabric registration on NVSwitch systems: 1 not started, 2 in progress, 3 completed.",
    );
    let mut fabric_status = Family::gauge(
        "railscope_gpu_fabric_status",
        "NVML return code of the fabric registration once completed (0 is success).",
    );
    for gpu in gpus {
        for (code, n) in &gpu.xid_errors {
            xid.push(gpu_labels_and(gpu, "xid", xid_label(*code)), *n);
        }
        xid_registered.push(gpu_labels(gpu), gpu.xid_events_registered);
        if let Some((s, status)) = gpu.fabric {
            fabric.push(gpu_labels(gpu), s);
            fabric_status.push(gpu_labels(gpu), status);
        }
    }
    vec![xid, xid_registered, fabric, fabric_status]
}

/// `railscope_nvlink_*`: one series set per NVLink of each GPU.
fn nvlink_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut nv_up = Family::gauge("railscope_nvlink_up", "1 when the NVLink is active.");
    let mut nv_version = Family::gauge(
        "railscope_nvlink_version",
        "NVLink version as NVML reports it.",
    );
    let mut nv_remote = Family::info(
        "railscope_nvlink_remote",
        "The far end of an NVLink: its PCI address and type (gpu, switch, ibmnpu, unknown).",
    );
    let mut nv_errors = Family::counter(
        "railscope_nvlink_errors",
        "NVLink data-link errors by type: replay, recovery, crc_flit, crc_data.",
    );
    let mut nv_bytes = Family::counter(
        "railscope_nvlink_data_bytes",
        "NVLink data (payload) bytes by direction.",
    );
    let links: usize = gpus.iter().map(|g| g.nvlinks.len()).sum();
    nv_up.reserve(links);
    nv_version.reserve(links);
    nv_remote.reserve(links);
    nv_errors.reserve(links * 4);
    nv_bytes.reserve(links * 2);
    for gpu in gpus {
        for link in &gpu.nvlinks {
            let base = gpu_labels_and(gpu, "link", Label::number(link.link));
            let l = || base.clone();
            if let Some(a) = link.active {
                nv_up.push(l(), a);
            }
            if let Some(v) = link.version {
                nv_version.push(l(), v);
            }
            if link.remote_pci_address.is_some() || link.remote_type.is_some() {
                let mut labels = l();
                labels.push((
                    "remote_pci_address",
                    Label::from(link.remote_pci_address.clone().unwrap_or_default()),
                ));
                labels.push((
                    "remote_type",
                    Label::Static(link.remote_type.unwrap_or_default()),
                ));
                nv_remote.push(labels, 1u64);
            }
            for (kind, n) in &link.errors {
                let mut labels = l();
                labels.push(("type", Label::Static(kind)));
                nv_errors.push(labels, *n);
            }
            for (direction, bytes) in [("tx", link.tx_bytes), ("rx", link.rx_bytes)] {
                if let Some(b) = bytes {
                    let mut labels = l();
                    labels.push(("direction", Label::Static(direction)));
                    nv_bytes.push(labels, b);
                }
            }
        }
    }
    vec![nv_up, nv_version, nv_remote, nv_errors, nv_bytes]
}
