//! Plain data the `gpu` source reads from NVML. Every value a GPU may not support is an
//! `Option`.

/// Everything the `gpu` source read in one collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion` as `major.minor`.
    pub cuda_version: Option<String>,
    /// GPUs by NVML index.
    pub gpus: Vec<Gpu>,
}

/// How reading a GPU went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuState {
    /// Read.
    #[default]
    Ok,
    /// NVML says the GPU fell off the bus (`NVML_ERROR_GPU_IS_LOST`).
    Lost,
    /// Its worker did not answer before the deadline (a call hangs inside the driver).
    Timeout,
    /// The device handle could not be obtained.
    Error,
}

impl GpuState {
    /// Every state, for state-set export.
    pub const ALL: [GpuState; 4] = [
        GpuState::Ok,
        GpuState::Lost,
        GpuState::Timeout,
        GpuState::Error,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuState::Ok => "ok",
            GpuState::Lost => "lost",
            GpuState::Timeout => "timeout",
            GpuState::Error => "error",
        }
    }
}

/// What does not change while the driver is loaded (read once per GPU, again every
/// [`super::STATIC_REFRESH`] and when a GPU that was lost, timed out or failed answers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// `GPU-...`.
    pub uuid: Option<String>,
    /// `NVIDIA H100 80GB HBM3`.
    pub name: Option<String>,
    /// Board serial.
    pub serial: Option<String>,
    /// PCI address in sysfs form (`0000:18:00.0`).
    pub pci_address: Option<String>,
    /// NUMA node.
    pub numa_node: Option<u32>,
    /// The minor number of its device node (`/dev/nvidiaN`).
    pub minor_number: Option<u32>,
}

/// One NVLink.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NvLink {
    /// Link index.
    pub link: u32,
    /// `nvmlDeviceGetNvLinkState`.
    pub active: Option<bool>,
    /// `nvmlDeviceGetNvLinkVersion`, raw.
    pub version: Option<u32>,
    /// The remote end's PCI address (sysfs form).
    pub remote_pci_address: Option<String>,
    /// `gpu`, `switch`, `ibmnpu` or `unknown`.
    pub remote_type: Option<&'static str>,
    /// Error counters: `replay`, `recovery`, `crc_flit`, `crc_data`, and NVLink5's
    /// `malformed_packet`, `buffer_overrun`, `rcv`, `rcv_remote`, `rcv_general`,
    /// `local_link_integrity`, `xmit_discards`, `effective`, `symbol`.
    pub errors: Vec<(&'static str, u64)>,
    /// Data bytes sent (NVML field 138 with this link as scope; KiB in NVML, converted).
    pub tx_bytes: Option<u64>,
    /// Data bytes received (field 139).
    pub rx_bytes: Option<u64>,
    /// NVLink5 link recoveries by result (`successful`, `failed`: fields 213, 214).
    pub recoveries: Vec<(&'static str, u64)>,
    /// NVLink5 effective bit error rate (field 220, decoded).
    pub effective_ber: Option<f64>,
    /// NVLink5 symbol bit error rate (field 222, decoded).
    pub symbol_ber: Option<f64>,
}

/// GPU activity over the window between two GPM samples (`nvmlGpmMetricsGet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    /// How long the window was, in seconds.
    pub window_seconds: f64,
    /// `NVML_GPM_METRIC_*` id and value, as NVML reports it (percent, or MiB/s), for the
    /// metrics the GPU answered.
    pub metrics: Vec<(u32, f64)>,
}

/// A GPU's MIG configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mig {
    /// MIG mode now.
    pub enabled: bool,
    /// MIG mode after the next GPU reset.
    pub pending: bool,
    /// The MIG devices (one per compute instance).
    pub devices: Vec<MigDevice>,
    /// GPM activity per GPU instance: (GPU instance id, activity).
    pub activity: Vec<(u32, Activity)>,
}

/// One MIG device: a compute instance of a GPU instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MigDevice {
    /// GPU instance id.
    pub gpu_instance: u32,
    /// Compute instance id.
    pub compute_instance: u32,
    /// `MIG-...`, what a device plugin hands to a pod.
    pub uuid: Option<String>,
    /// `NVIDIA H100 80GB HBM3 MIG 1g.10gb`.
    pub name: Option<String>,
    /// Memory of its GPU instance: (used, total, reserved) bytes.
    pub memory: Option<(u64, u64, u64)>,
}

impl MigDevice {
    /// The profile, from the name the driver gives the device (`1g.10gb`, `3g.40gb+me`).
    pub fn profile(&self) -> Option<&str> {
        let name = self.name.as_deref()?;
        let (_, profile) = name.rsplit_once(" MIG ")?;
        Some(profile.trim())
    }
}

/// GPU fabric registration as `nvmlDeviceGetGpuFabricInfoV` (v3) reports it on NVSwitch
/// and NVL72 systems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricV3 {
    /// NVLink clique.
    pub clique_id: u32,
    /// The cluster UUID (`xxxxxxxx-xxxx-…`).
    pub cluster_uuid: String,
    /// `NVML_GPU_FABRIC_HEALTH_MASK_*` bit fields; 0 where the driver does not report them.
    pub health_mask: u32,
    /// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`: 0 not supported, 1 healthy, 2 unhealthy, 3
    /// limited capacity.
    pub health_summary: u8,
}

/// Grace-Blackwell NVLink-C2C (fields 170–172, 231–234).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C2c {
    /// How many C2C links the GPU has.
    pub links: u32,
    /// Per link: (link, up, max bandwidth in MB/s).
    pub link_state: Vec<(u32, Option<bool>, Option<u32>)>,
    /// Error counters: `intr`, `replay`, `replay_b2b`.
    pub errors: Vec<(&'static str, u64)>,
    /// Whether the links are in low-power state.
    pub low_power: Option<bool>,
}

/// One GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gpu {
    /// NVML index.
    pub index: u32,
    /// How reading it went.
    pub state: GpuState,
    /// Static identity (kept from the last successful read when the GPU is lost).
    pub identity: Identity,
    /// Persistence mode.
    pub persistence_mode: Option<bool>,
    /// GPU and memory utilization in percent.
    pub utilization: Option<(u32, u32)>,
    /// Memory used and total in bytes.
    pub memory: Option<(u64, u64)>,
    /// Memory the driver reserves, in bytes (`nvmlDeviceGetMemoryInfo_v2`).
    pub memory_reserved: Option<u64>,
    /// HBM temperature in °C (field 82).
    pub memory_temperature_c: Option<u32>,
    /// Encoder and decoder utilization in percent.
    pub codec_utilization: (Option<u32>, Option<u32>),
    /// Energy since the driver loaded, in mJ (read every [`super::ENERGY_EVERY`], the last
    /// value in between).
    pub energy_mj: Option<u64>,
    /// Time the clocks were held down, per reason, in ns (fields 74, 76 and the thermal and
    /// power-brake fields).
    pub clock_events_ns: Vec<(&'static str, u64)>,
    /// Time in violation per performance policy, in ns (`nvmlDeviceGetViolationStatus`,
    /// read every [`super::VIOLATIONS_EVERY`]).
    pub violations_ns: Vec<(&'static str, u64)>,
    /// Whether GPM can be read on this GPU (`None`: not asked, e.g. the GPU is lost).
    pub gpm_supported: Option<bool>,
    /// Activity since the previous collection (GPM).
    pub activity: Option<Activity>,
    /// MIG mode and devices; `None` where MIG is not supported.
    pub mig: Option<Mig>,
    /// Core temperature in °C.
    pub temperature_c: Option<u32>,
    /// Power draw in mW.
    pub power_mw: Option<u32>,
    /// Enforced power limit in mW.
    pub power_limit_mw: Option<u32>,
    /// (`sm`/`memory`, current MHz, max MHz); max is a static value (see [`super::kept`]).
    pub clocks: Vec<(&'static str, Option<u32>, Option<u32>)>,
    /// Every throttle (clock event) reason and whether it is active.
    pub throttle: Vec<(&'static str, bool)>,
    /// ECC errors: (`corrected`/`uncorrected`, `volatile`/`aggregate`, count).
    pub ecc: Vec<(&'static str, &'static str, u64)>,
    /// Remapped rows: correctable, uncorrectable, pending, failure.
    pub remapped_rows: Option<(u32, u32, bool, bool)>,
    /// What the driver says must be done to recover the GPU after an error
    /// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, `nvmlDeviceGpuRecoveryAction_t`: 0 none,
    /// 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset); `None` where the driver
    /// does not say (before r550).
    pub recovery_action: Option<u32>,
    /// Retired pages by cause (`single_bit_ecc`, `double_bit_ecc`).
    pub retired_pages: Vec<(&'static str, u64)>,
    /// PCIe generation and width: (current gen, max gen, current width, max width); the
    /// max ones are static values.
    pub pcie_link: Option<(u32, u32, u32, u32)>,
    /// PCIe replays (read every [`super::REPLAYS_EVERY`], the last value in between).
    pub pcie_replays: Option<u32>,
    /// PCIe throughput in KB/s: (tx, rx), NVML's 20 ms sample as the PCIe sampler last
    /// took it; only on GPUs without PCIe byte counters.
    pub pcie_throughput_kbps: Option<(u32, u32)>,
    /// PCIe bytes: (tx, rx), NVML's byte counters (fields 197/198) as the PCIe sampler last
    /// read them, carried over their 32-bit wraps.
    pub pcie_bytes: Option<(u64, u64)>,
    /// GPU fabric (state, status) on NVSwitch systems.
    pub fabric: Option<(u32, u32)>,
    /// Clique, cluster and health of the fabric, once registration completed.
    pub fabric_v3: Option<FabricV3>,
    /// NVLink-C2C; `None` where the GPU has none.
    pub c2c: Option<C2c>,
    /// NVLinks.
    pub nvlinks: Vec<NvLink>,
    /// Processes running compute work on it: (pid, GPU instance in MIG mode).
    pub processes: Vec<(u32, Option<u32>)>,
    /// XID errors seen since the agent started, by code.
    pub xid_errors: Vec<(u64, u64)>,
    /// Whether the XID event set of this GPU is registered: without it, no XID is seen.
    pub xid_events_registered: bool,
    /// Calls that failed other than with NotSupported: (what, NVML error).
    pub failures: Vec<(&'static str, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_profile_is_read_from_the_device_name() {
        let d = |name: &str| MigDevice {
            name: Some(name.to_owned()),
            ..MigDevice::default()
        };
        assert_eq!(
            d("NVIDIA H100 80GB HBM3 MIG 1g.10gb").profile(),
            Some("1g.10gb")
        );
        assert_eq!(
            d("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me").profile(),
            Some("1g.10gb+me")
        );
        assert_eq!(d("NVIDIA H100 80GB HBM3").profile(), None);
        assert_eq!(MigDevice::default().profile(), None);
    }
}
