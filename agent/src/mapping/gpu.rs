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
    families.extend(counter_families(&snapshot.gpus));
    families.extend(activity_families(&snapshot.gpus));
    families.extend(mig_families(&snapshot.gpus));
    families.extend(fabric_c2c_families(&snapshot.gpus));
    families.extend(nvlink_families(&snapshot.gpus));
    families
}

/// A percentage as NVML gives it, as a ratio.
fn ratio(percent: f64) -> f64 {
    percent / 100.0
}

/// MiB per second, as GPM gives bandwidth, in bytes per second.
fn mib_per_second(v: f64) -> f64 {
    v * 1_048_576.0
}

/// What the GPU counts between scrapes: energy, clock events, violations; and reserved
/// memory, HBM temperature, encoder and decoder utilization.
fn counter_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut energy = Family::counter(
        "railscope_gpu_energy_joules",
        "Energy the GPU used since the driver loaded (read every 60 s: the call costs milliseconds of CPU). rate() over 2 minutes or more is watts; increase() over a job is its joules.",
    );
    let mut reserved = Family::gauge(
        "railscope_gpu_memory_reserved_bytes",
        "Device memory the driver reserves (neither used nor free).",
    );
    let mut mem_temp = Family::gauge(
        "railscope_gpu_memory_temperature_celsius",
        "HBM temperature.",
    );
    let mut encoder = Family::gauge(
        "railscope_gpu_encoder_utilization_ratio",
        "Fraction of time the video encoder was busy in the last sample period.",
    );
    let mut decoder = Family::gauge(
        "railscope_gpu_decoder_utilization_ratio",
        "Fraction of time the video decoder was busy in the last sample period.",
    );
    let mut clock_events = Family::counter(
        "railscope_gpu_clock_event_seconds",
        "Time the GPU's clocks were held down, by reason (sw_power_cap, sync_boost, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown). rate() is the fraction of time, including events shorter than a scrape.",
    );
    let mut violations = Family::counter(
        "railscope_gpu_violation_seconds",
        "Time the GPU was held below its target clocks, by performance policy (power, thermal, sync_boost, board_limit, low_utilization, reliability, total_app_clocks, total_base_clocks); read every 5 minutes.",
    );
    for gpu in gpus {
        let g = || gpu_labels(gpu);
        if let Some(mj) = gpu.energy_mj {
            energy.push(g(), mj as f64 / 1000.0);
        }
        if let Some(r) = gpu.memory_reserved {
            reserved.push(g(), r);
        }
        if let Some(t) = gpu.memory_temperature_c {
            mem_temp.push(g(), t);
        }
        if let Some(u) = gpu.codec_utilization.0 {
            encoder.push(g(), ratio(f64::from(u)));
        }
        if let Some(u) = gpu.codec_utilization.1 {
            decoder.push(g(), ratio(f64::from(u)));
        }
        for (reason, ns) in &gpu.clock_events_ns {
            clock_events.push(gpu_labels_with(gpu, "reason", reason), *ns as f64 / 1e9);
        }
        for (policy, ns) in &gpu.violations_ns {
            violations.push(gpu_labels_with(gpu, "policy", policy), *ns as f64 / 1e9);
        }
    }
    vec![
        energy,
        reserved,
        mem_temp,
        encoder,
        decoder,
        clock_events,
        violations,
    ]
}

/// An extra label: (name, value).
type ExtraLabel = Option<(&'static str, &'static str)>;

/// Where each GPM metric goes: (metric id, family index in [`activity_families`], extra
/// label, whether it is a bandwidth in MiB/s rather than a percentage).
const GPM_SERIES: [(u32, usize, ExtraLabel, bool); 19] = [
    (1, 0, None, false),
    (2, 1, None, false),
    (3, 2, None, false),
    (5, 3, None, false),
    (10, 4, None, false),
    (4, 5, Some(("pipe", "integer")), false),
    (6, 5, Some(("pipe", "tensor_dfma")), false),
    (7, 5, Some(("pipe", "tensor_hmma")), false),
    (8, 5, Some(("pipe", "tensor_dmma")), false),
    (9, 5, Some(("pipe", "tensor_imma")), false),
    (11, 5, Some(("pipe", "fp64")), false),
    (12, 5, Some(("pipe", "fp32")), false),
    (13, 5, Some(("pipe", "fp16")), false),
    (20, 6, Some(("direction", "tx")), true),
    (21, 6, Some(("direction", "rx")), true),
    (60, 7, Some(("direction", "rx")), true),
    (61, 7, Some(("direction", "tx")), true),
    (100, 8, Some(("direction", "tx")), true),
    (101, 8, Some(("direction", "rx")), true),
];

/// GPU activity from GPM (Hopper and later) over the window between two collections.
fn activity_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut families = vec![
        Family::gauge(
            "railscope_gpu_graphics_active_ratio",
            "Fraction of time the graphics or compute engine was active (GPM; DCGM's GR_ENGINE_ACTIVE), over railscope_gpu_gpm_window_seconds.",
        ),
        Family::gauge(
            "railscope_gpu_sm_active_ratio",
            "Fraction of time an SM had at least one warp resident, averaged over all SMs (GPM; DCGM's SM_ACTIVE).",
        ),
        Family::gauge(
            "railscope_gpu_sm_occupancy_ratio",
            "Resident warps as a fraction of the maximum, averaged over all SMs (GPM; DCGM's SM_OCCUPANCY).",
        ),
        Family::gauge(
            "railscope_gpu_tensor_active_ratio",
            "Fraction of cycles any tensor pipe was active (GPM; DCGM's PIPE_TENSOR_ACTIVE).",
        ),
        Family::gauge(
            "railscope_gpu_dram_active_ratio",
            "Fraction of cycles device memory was sending or receiving data (GPM; DCGM's DRAM_ACTIVE).",
        ),
        Family::gauge(
            "railscope_gpu_pipe_active_ratio",
            "Fraction of cycles a pipe was active, by pipe (fp64, fp32, fp16, integer, tensor_hmma, tensor_imma, tensor_dfma, tensor_dmma) (GPM).",
        ),
        Family::gauge(
            "railscope_gpu_gpm_pcie_bytes_per_second",
            "PCIe traffic by direction over the window (GPM; DCGM's PCIE_TX/RX_BYTES).",
        ),
        Family::gauge(
            "railscope_gpu_gpm_nvlink_bytes_per_second",
            "NVLink traffic of all links by direction over the window (GPM; DCGM's NVLINK_TX/RX_BYTES).",
        ),
        Family::gauge(
            "railscope_gpu_gpm_c2c_bytes_per_second",
            "NVLink-C2C traffic by direction over the window (GPM, Grace-Blackwell).",
        ),
    ];
    let mut supported = Family::gauge(
        "railscope_gpu_gpm_supported",
        "1 when the GPU's activity can be read through GPM (Hopper and later); 0 means the activity series cannot exist on this GPU, not that it is idle.",
    );
    let mut window = Family::gauge(
        "railscope_gpu_gpm_window_seconds",
        "The window the GPM activity series cover: the time between the two samples they are computed from.",
    );
    for gpu in gpus {
        if let Some(s) = gpu.gpm_supported {
            supported.push(gpu_labels(gpu), s);
        }
        let Some(activity) = &gpu.activity else {
            continue;
        };
        window.push(gpu_labels(gpu), activity.window_seconds);
        for (id, value) in &activity.metrics {
            let Some((_, family, label, bandwidth)) = GPM_SERIES.iter().find(|s| s.0 == *id) else {
                continue;
            };
            let labels = match label {
                Some((name, value)) => gpu_labels_with(gpu, name, value),
                None => gpu_labels(gpu),
            };
            let v = if *bandwidth {
                mib_per_second(*value)
            } else {
                ratio(*value)
            };
            families[*family].push(labels, v);
        }
    }
    families.push(supported);
    families.push(window);
    families
}

/// MIG mode, the MIG devices with their UUIDs and profiles, their memory, and the activity
/// of each GPU instance.
fn mig_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut enabled = Family::gauge(
        "railscope_gpu_mig_enabled",
        "1 when the GPU is in MIG mode.",
    );
    let mut pending = Family::gauge(
        "railscope_gpu_mig_pending_enabled",
        "The MIG mode the GPU takes at its next reset.",
    );
    let mut info = Family::info(
        "railscope_gpu_mig_device",
        "One per MIG device (a compute instance of a GPU instance): its UUID (what a device plugin hands to pods), profile and name.",
    );
    let mut used = Family::gauge(
        "railscope_gpu_mig_memory_used_bytes",
        "Memory of the MIG device's GPU instance in use.",
    );
    let mut total = Family::gauge(
        "railscope_gpu_mig_memory_total_bytes",
        "Memory of the MIG device's GPU instance.",
    );
    let mut reserved = Family::gauge(
        "railscope_gpu_mig_memory_reserved_bytes",
        "Memory of the MIG device's GPU instance that the driver reserves.",
    );
    let mut activity = [
        (
            1,
            Family::gauge(
                "railscope_gpu_mig_graphics_active_ratio",
                "Fraction of time the GPU instance's graphics or compute engine was active (GPM).",
            ),
        ),
        (
            2,
            Family::gauge(
                "railscope_gpu_mig_sm_active_ratio",
                "Fraction of time the GPU instance's SMs had a warp resident (GPM).",
            ),
        ),
        (
            3,
            Family::gauge(
                "railscope_gpu_mig_sm_occupancy_ratio",
                "Resident warps as a fraction of the maximum on the GPU instance's SMs (GPM).",
            ),
        ),
        (
            5,
            Family::gauge(
                "railscope_gpu_mig_tensor_active_ratio",
                "Fraction of cycles a tensor pipe of the GPU instance was active (GPM).",
            ),
        ),
        (
            10,
            Family::gauge(
                "railscope_gpu_mig_dram_active_ratio",
                "Fraction of cycles the GPU instance's memory was sending or receiving data (GPM).",
            ),
        ),
    ];
    for gpu in gpus {
        let Some(mig) = &gpu.mig else {
            continue;
        };
        enabled.push(gpu_labels(gpu), mig.enabled);
        pending.push(gpu_labels(gpu), mig.pending);
        for d in &mig.devices {
            let instance = || -> Labels {
                smallvec::smallvec![
                    ("gpu", Label::number(gpu.index)),
                    ("gpu_instance", Label::number(d.gpu_instance)),
                    ("compute_instance", Label::number(d.compute_instance)),
                ]
            };
            let mut labels = instance();
            labels.push(("mig_uuid", Label::from(d.uuid.clone().unwrap_or_default())));
            labels.push((
                "profile",
                Label::from(d.profile().unwrap_or_default().to_owned()),
            ));
            labels.push(("name", Label::from(d.name.clone().unwrap_or_default())));
            info.push(labels, 1u64);
            if let Some((u, t, r)) = d.memory {
                used.push(instance(), u);
                total.push(instance(), t);
                reserved.push(instance(), r);
            }
        }
        for (gi, a) in &mig.activity {
            for (id, value) in &a.metrics {
                if let Some((_, family)) = activity.iter_mut().find(|(i, _)| i == id) {
                    family.push(
                        gpu_labels_and(gpu, "gpu_instance", Label::number(*gi)),
                        ratio(*value),
                    );
                }
            }
        }
    }
    let mut families = vec![enabled, pending, info, used, total, reserved];
    families.extend(activity.into_iter().map(|(_, f)| f));
    families
}

/// Fabric health conditions: (label, shift in the health mask).
const FABRIC_CONDITIONS: [(&str, u32); 4] = [
    ("degraded_bandwidth", 0),
    ("route_recovery", 2),
    ("route_unhealthy", 4),
    ("access_timeout_recovery", 6),
];

/// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*` from 1.
const FABRIC_SUMMARIES: [&str; 3] = ["healthy", "unhealthy", "limited_capacity"];

/// The fabric's clique, cluster and health (NVSwitch and NVL72 systems), and NVLink-C2C
/// (Grace-Blackwell).
fn fabric_c2c_families(gpus: &[Gpu]) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_gpu_fabric",
        "The GPU's NVLink fabric once registered: clique id and cluster UUID (GPUs of one NVLink domain share them).",
    );
    let mut health = Family::gauge(
        "railscope_gpu_fabric_health",
        "1 when the fabric reports the condition (degraded_bandwidth, route_recovery, route_unhealthy, access_timeout_recovery, incorrect_configuration), 0 when it reports it absent; no series where the driver does not report it.",
    );
    let mut summary = Family::gauge(
        "railscope_gpu_fabric_health_state",
        "The fabric's health summary, one series per state (healthy, unhealthy, limited_capacity), 1 for the current one.",
    );
    let mut c2c_enabled = Family::gauge(
        "railscope_gpu_c2c_enabled",
        "1 when the GPU's C2C mode is on (NVLink-C2C to its CPU, Grace-Hopper and Grace-Blackwell), 0 when off (a PCIe or SXM GPU); no series where the driver does not say. Read with the static values.",
    );
    let mut c2c_links = Family::gauge(
        "railscope_gpu_c2c_links",
        "NVLink-C2C links between the GPU and its CPU (Grace-Blackwell).",
    );
    let mut c2c_up = Family::gauge(
        "railscope_gpu_c2c_link_up",
        "1 when the C2C link is active.",
    );
    let mut c2c_bw = Family::gauge(
        "railscope_gpu_c2c_link_max_bandwidth_bytes_per_second",
        "The C2C link's maximum bandwidth.",
    );
    let mut c2c_errors = Family::counter(
        "railscope_gpu_c2c_errors",
        "NVLink-C2C errors by type (intr, replay, replay_b2b).",
    );
    let mut c2c_low_power = Family::gauge(
        "railscope_gpu_c2c_low_power",
        "1 when the C2C links are in their low-power state.",
    );
    for gpu in gpus {
        if let Some(f) = &gpu.fabric_v3 {
            info.push(
                [
                    ("gpu", gpu.index.to_string()),
                    ("clique_id", f.clique_id.to_string()),
                    ("cluster_uuid", f.cluster_uuid.clone()),
                ],
                1u64,
            );
            for (name, shift) in FABRIC_CONDITIONS {
                // 1 true, 2 false, 0 not reported.
                match (f.health_mask >> shift) & 0x3 {
                    1 => health.push(gpu_labels_with(gpu, "condition", name), 1u64),
                    2 => health.push(gpu_labels_with(gpu, "condition", name), 0u64),
                    _ => {}
                }
            }
            // 1 none, 2 and up: what is wrong; 0 not reported.
            match (f.health_mask >> 8) & 0xf {
                0 => {}
                v => health.push(
                    gpu_labels_with(gpu, "condition", "incorrect_configuration"),
                    v > 1,
                ),
            }
            if let Some(current) = usize::from(f.health_summary).checked_sub(1)
                && current < FABRIC_SUMMARIES.len()
            {
                for (i, name) in FABRIC_SUMMARIES.iter().enumerate() {
                    summary.push(gpu_labels_with(gpu, "state", name), i == current);
                }
            }
        }
        if let Some(on) = gpu.c2c_enabled {
            c2c_enabled.push(gpu_labels(gpu), on);
        }
        if let Some(c) = &gpu.c2c {
            c2c_links.push(gpu_labels(gpu), c.links);
            for (link, up, bw) in &c.link_state {
                let l = || gpu_labels_and(gpu, "link", Label::number(*link));
                if let Some(up) = up {
                    c2c_up.push(l(), *up);
                }
                if let Some(bw) = bw {
                    c2c_bw.push(l(), u64::from(*bw) * 1_000_000);
                }
            }
            for (kind, n) in &c.errors {
                c2c_errors.push(gpu_labels_with(gpu, "type", kind), *n);
            }
            if let Some(low) = c.low_power {
                c2c_low_power.push(gpu_labels(gpu), low);
            }
        }
    }
    vec![
        info,
        health,
        summary,
        c2c_enabled,
        c2c_links,
        c2c_up,
        c2c_bw,
        c2c_errors,
        c2c_low_power,
    ]
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
        "GPU identity: index, UUID, name, serial, PCI address (sysfs form), NUMA node, driver and CUDA versions, persistence mode; the module id (the GPU on its baseboard) where the driver gives it.",
    );
    let mut up = Family::gauge(
        "railscope_gpu_up",
        "1 when the GPU answered NVML in this collection; 0 when it is lost, timed out or failed.",
    );
    let mut state = Family::gauge(
        "railscope_gpu_state",
        "How reading the GPU went, one series per state (ok, lost, timeout, error), 1 for the current one. lost is NVML's GPU_IS_LOST (XID 79); timeout a call hanging in the driver.",
    );
    let mut platform = Family::info(
        "railscope_gpu_platform",
        "Where the GPU sits in its rack (NVML platform info, Blackwell and later): chassis serial number, slot in the chassis (switch trays counted), compute tray index, module (the GPU in its node), host (the node in its slot), NVLink peer type and the GPU's fabric GUID. Kept while the GPU is lost.",
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
            ]
            .into_iter()
            // Only where the driver says: a label that every GPU before it lacks.
            .chain(id.module_id.map(|m| ("module_id", m.to_string()))),
            1u64,
        );
        if let Some(p) = &id.platform {
            platform.push(
                [
                    ("gpu", gpu.index.to_string()),
                    ("chassis_serial", p.chassis_serial.clone()),
                    ("slot", p.slot.to_string()),
                    ("tray", p.tray.to_string()),
                    ("module_id", p.module_id.to_string()),
                    ("host_id", p.host_id.to_string()),
                    ("peer_type", p.peer_type.to_string()),
                    ("ib_guid", p.ib_guid.clone()),
                ],
                1u64,
            );
        }
        up.push(gpu_labels(gpu), gpu.state == GpuState::Ok);
        for s in GpuState::ALL {
            state.push(gpu_labels_with(gpu, "state", s.as_str()), s == gpu.state);
        }
    }
    vec![info, up, state, platform]
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
const RECOVERY_ACTIONS: [&str; 6] = [
    "none",
    "gpu_reset",
    "node_reboot",
    "drain_p2p",
    "drain_and_reset",
    "recover_imex_domain",
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
        "1 for the recovery action the driver asks for after an error (none, gpu_reset, node_reboot, drain_p2p, drain_and_reset, recover_imex_domain); it holds until the action is done.",
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
        "NVLink errors by type: replay, recovery, crc_flit, crc_data; on NVLink5 malformed_packet, buffer_overrun, rcv, rcv_remote, rcv_general, local_link_integrity, xmit_discards, effective, symbol.",
    );
    let mut nv_recoveries = Family::counter(
        "railscope_nvlink_link_recovery_events",
        "NVLink5 link recoveries by result (successful, failed).",
    );
    let mut nv_effective_ber = Family::gauge(
        "railscope_nvlink_effective_ber",
        "NVLink5 effective bit error rate (after forward error correction).",
    );
    let mut nv_symbol_ber = Family::gauge(
        "railscope_nvlink_symbol_ber",
        "NVLink5 symbol bit error rate (before forward error correction).",
    );
    let mut nv_fec = Family::counter(
        "railscope_nvlink_fec_history",
        "NVLink5 FEC history by bin (0-15): codewords in which forward error correction corrected that many symbol errors; counts moving into the high bins mean a link near the limit of what FEC can correct. Active links only.",
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
            for (result, n) in &link.recoveries {
                let mut labels = l();
                labels.push(("result", Label::Static(result)));
                nv_recoveries.push(labels, *n);
            }
            if let Some(ber) = link.effective_ber {
                nv_effective_ber.push(l(), ber);
            }
            if let Some(ber) = link.symbol_ber {
                nv_symbol_ber.push(l(), ber);
            }
            for (bin, n) in &link.fec_history {
                let mut labels = l();
                labels.push(("bin", Label::number(u32::from(*bin))));
                nv_fec.push(labels, *n);
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
    vec![
        nv_up,
        nv_version,
        nv_remote,
        nv_errors,
        nv_recoveries,
        nv_effective_ber,
        nv_symbol_ber,
        nv_fec,
        nv_bytes,
    ]
}
