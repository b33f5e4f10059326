//! The JSON fixture that drives the fake library: one node's NVIDIA driver and GPUs.
//!
//! Every type here is plain data with `serde` derives and `deny_unknown_fields`, so a typo
//! in a fixture is a load error that names the key instead of a silently missing value.
//! The rule for values: **an absent optional value answers `NVML_ERROR_NOT_SUPPORTED`**
//! (as NVML does for a feature the GPU lacks). `not_supported` forces that for a present
//! value, `errors` makes a feature answer any other NVML return code.
//!
//! Numbers that NVML documents in hex (PCI ids, clock event reason masks) may be written as
//! a JSON number or as a `"0x…"` string.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A whole fixture file: the driver and every GPU NVML enumerates, in index order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// Free text saying what the fixture models; ignored by the library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `nvmlSystemGetDriverVersion`, e.g. `550.127.05`. nvml-wrapper reads it at init to
    /// choose its field-id numbering (≥ 580.82 renumbers ids 251–273); the fake implements
    /// no field in that range, so any version works.
    pub driver_version: String,
    /// `nvmlSystemGetNVMLVersion`, e.g. `12.550.127.05`.
    pub nvml_version: String,
    /// `nvmlSystemGetCudaDriverVersion{,_v2}`: `major * 1000 + minor * 10` (12.4 = 12040).
    pub cuda_driver_version: i32,
    /// When set, `nvmlInit_v2`/`nvmlInitWithFlags` fail with this code (9 =
    /// `DRIVER_NOT_LOADED`, 18 = `LIB_RM_VERSION_MISMATCH`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_error: Option<u32>,
    /// Every call except `nvmlErrorString`, `nvmlShutdown` and `nvmlEventSetFree` sleeps
    /// this long first: a driver whose global lock is held.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hang_ms: u64,
    /// How long each call takes, as on real hardware (`"h200"` or a [`Costs`] object).
    /// Absent: every call answers at once (unless `RAILSCOPE_FAKE_NVML_COSTS` says
    /// otherwise, see [`crate::costs`]).
    #[serde(default, with = "costs_form", skip_serializing_if = "Option::is_none")]
    pub costs: Option<Costs>,
    /// The GPUs, index 0 first.
    pub gpus: Vec<Gpu>,
}

/// What the fake's calls cost: a measured profile, scaled, with exceptions. In a fixture,
/// the profile's name alone (`"costs": "h200"`) is short for `{"profile": "h200"}`.
///
/// A cost is wall time and the CPU time within it: the CPU time is burned on the calling
/// thread, the rest of the wall time slept (see [`crate::costs`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Costs {
    /// The measured table.
    #[serde(default)]
    pub profile: CostProfile,
    /// Multiplies every cost the profile gives (not the overrides): 0.1 runs ten times
    /// faster in the same proportions, 0 leaves only the overrides. At most
    /// [`Costs::MAX_SCALE`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub scale: f64,
    /// Per exported NVML function (`nvmlDeviceGetPcieThroughput`): its cost instead of the
    /// profile's, not scaled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, CallCost>,
    /// Per field id of `nvmlDeviceGetFieldValues` (which pays the sum of the ids asked
    /// for): its cost instead of the profile's, not scaled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<u32, CallCost>,
}

impl Costs {
    /// The largest `scale`.
    pub const MAX_SCALE: f64 = 1000.0;

    /// Written as the bare profile name when nothing else is set.
    fn is_plain(&self) -> bool {
        self.scale == 1.0 && self.overrides.is_empty() && self.fields.is_empty()
    }

    /// Checks what the types cannot: the scale's range, that every override names a
    /// function the fake exports, and that every cost is a sane duration.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=Self::MAX_SCALE).contains(&self.scale) {
            return Err(format!(
                "scale: {} is not between 0 and {}",
                self.scale,
                Self::MAX_SCALE
            ));
        }
        for (name, cost) in &self.overrides {
            if !crate::costs::is_call(name) {
                return Err(format!(
                    "overrides: {name:?} is not an NVML function the fake exports"
                ));
            }
            cost.validate()
                .map_err(|e| format!("overrides.{name}: {e}"))?;
        }
        for (id, cost) in &self.fields {
            cost.validate().map_err(|e| format!("fields.{id}: {e}"))?;
        }
        Ok(())
    }
}

impl Default for Costs {
    fn default() -> Self {
        Self::from(CostProfile::default())
    }
}

impl From<CostProfile> for Costs {
    fn from(profile: CostProfile) -> Self {
        Self {
            profile,
            scale: 1.0,
            overrides: BTreeMap::new(),
            fields: BTreeMap::new(),
        }
    }
}

/// A measured cost table (`tests/fake-nvml/src/costs/`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostProfile {
    /// One NVIDIA H200, driver 580.159.04 (`shared/reference/h200-nvml/nvml-profile.json`).
    #[default]
    H200,
}

/// One call's cost, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallCost {
    /// From entry to return; the part beyond `cpu_us` is slept.
    #[serde(default)]
    pub wall_us: f64,
    /// Burned on the calling thread.
    #[serde(default)]
    pub cpu_us: f64,
}

impl CallCost {
    /// The longest cost: one minute.
    pub const MAX_US: f64 = 60e6;

    fn validate(&self) -> Result<(), String> {
        for (what, v) in [("wall_us", self.wall_us), ("cpu_us", self.cpu_us)] {
            if !(0.0..=Self::MAX_US).contains(&v) {
                return Err(format!("{what}: {v} is not between 0 and {}", Self::MAX_US));
            }
        }
        Ok(())
    }
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// `nvmlDeviceGetName`, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `nvmlDeviceGetUUID`, `GPU-` and 36 characters.
    pub uuid: String,
    /// `nvmlDeviceGetSerial`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// `nvmlDeviceGetMinorNumber` (`/dev/nvidiaN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_number: Option<u32>,
    /// `nvmlDeviceGetPciInfo_v3`.
    pub pci: Pci,
    /// `nvmlDeviceGetNumaNodeId`, and the only bit of `nvmlDeviceGetMemoryAffinity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// `nvmlDeviceGetCpuAffinity{,WithinScope}` as a kernel cpulist (`0-55,112-167`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<String>,
    /// `nvmlDeviceGetPersistenceMode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// `nvmlDeviceGetUtilizationRates`, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization: Option<Utilization>,
    /// `nvmlDeviceGetMemoryInfo{,_v2}`, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// `nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)`, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// `nvmlDeviceGetPowerUsage`, milliwatts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_usage_mw: Option<u32>,
    /// `nvmlDeviceGetEnforcedPowerLimit` and `nvmlDeviceGetPowerManagementLimit`, mW.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_mw: Option<u32>,
    /// `nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_mj: Option<u64>,
    /// `nvmlDeviceGetClockInfo`, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks_mhz: Option<Clocks>,
    /// `nvmlDeviceGetMaxClockInfo`, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_clocks_mhz: Option<Clocks>,
    /// `nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons`: `nvmlClocksEventReason*` bits.
    #[serde(default, with = "hex_opt", skip_serializing_if = "Option::is_none")]
    pub clock_event_reasons: Option<u64>,
    /// `nvmlDeviceGetSupportedClocks{Event,Throttle}Reasons`.
    #[serde(default, with = "hex_opt", skip_serializing_if = "Option::is_none")]
    pub supported_clock_event_reasons: Option<u64>,
    /// ECC mode and counts (`nvmlDeviceGetEccMode`, `nvmlDeviceGetTotalEccErrors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<Ecc>,
    /// `nvmlDeviceGetRemappedRows` (Ampere and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<RemappedRows>,
    /// `nvmlDeviceGetRetiredPages{,_v2}`, `nvmlDeviceGetRetiredPagesPendingStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages: Option<RetiredPages>,
    /// PCIe link and counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<Pcie>,
    /// `nvmlDeviceGetGpuFabricInfo{,V}` (NVSwitch systems only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<Fabric>,
    /// The NVLinks, link 0 first. Empty: every NVLink call and field answers
    /// `NOT_SUPPORTED` (a GPU without NVLink).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlinks: Vec<NvLink>,
    /// Extra or overriding `nvmlDeviceGetFieldValues` answers, checked before the built-in
    /// fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldOverride>,
    /// XID codes this GPU reports, each delivered once to every event set registered for
    /// `nvmlEventTypeXidCriticalError` on this GPU (in list order; an event is known by
    /// its position, so a fixture that appends delivers only the new ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xid_events: Vec<u64>,
    /// Fallen off the bus: every call on this GPU, handle lookups included, answers
    /// `NVML_ERROR_GPU_IS_LOST` (15).
    #[serde(default, skip_serializing_if = "is_false")]
    pub lost: bool,
    /// A wedged driver: every call on this GPU, handle lookups included, sleeps this long
    /// before it answers. Other GPUs are not held up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hang_ms: u64,
    /// Features that answer `NVML_ERROR_NOT_SUPPORTED` (3) even where a value is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_supported: Vec<Feature>,
    /// Features that answer the given NVML return code (4 = `NO_PERMISSION`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<Feature, u32>,
}

/// A group of NVML calls that a fixture can fail as a whole (`not_supported`, `errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// `nvmlDeviceGetSerial`.
    Serial,
    /// `nvmlDeviceGetMinorNumber`.
    MinorNumber,
    /// `nvmlDeviceGetNumaNodeId`, `nvmlDeviceGetMemoryAffinity`.
    NumaNode,
    /// `nvmlDeviceGetCpuAffinity{,WithinScope}`.
    CpuAffinity,
    /// `nvmlDeviceGetPersistenceMode`.
    PersistenceMode,
    /// `nvmlDeviceGetUtilizationRates`.
    Utilization,
    /// `nvmlDeviceGetMemoryInfo{,_v2}`.
    Memory,
    /// `nvmlDeviceGetTemperature`.
    Temperature,
    /// `nvmlDeviceGetPowerUsage`.
    PowerUsage,
    /// `nvmlDeviceGetEnforcedPowerLimit`, `nvmlDeviceGetPowerManagementLimit`.
    PowerLimit,
    /// `nvmlDeviceGetTotalEnergyConsumption`.
    Energy,
    /// `nvmlDeviceGetClockInfo`.
    Clocks,
    /// `nvmlDeviceGetMaxClockInfo`.
    MaxClocks,
    /// `nvmlDeviceGetCurrentClocks{Event,Throttle}Reasons`.
    ClockEventReasons,
    /// `nvmlDeviceGetSupportedClocks{Event,Throttle}Reasons`.
    SupportedClockEventReasons,
    /// `nvmlDeviceGetEccMode`, `nvmlDeviceGetTotalEccErrors`, ECC fields.
    Ecc,
    /// `nvmlDeviceGetRemappedRows`, fields 142–145.
    RemappedRows,
    /// `nvmlDeviceGetRetiredPages{,_v2}`, `…PendingStatus`, fields 29–31.
    RetiredPages,
    /// Link generation and width, current and max, `nvmlDeviceGetPcieSpeed`.
    PcieLink,
    /// `nvmlDeviceGetPcieReplayCounter`, field 94.
    PcieReplay,
    /// `nvmlDeviceGetPcieThroughput`.
    PcieThroughput,
    /// `nvmlDeviceGetGpuFabricInfo{,V}`.
    Fabric,
    /// Every `nvmlDeviceGetNvLink*` call and NVLink field.
    Nvlink,
    /// `nvmlDeviceGetFieldValues` as a whole.
    FieldValues,
    /// `nvmlDeviceGetSupportedEventTypes`, `nvmlDeviceRegisterEvents`.
    Events,
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The serde name, so messages use the fixture's spelling.
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(s)) => f.write_str(&s),
            _ => write!(f, "{self:?}"),
        }
    }
}

/// PCI identity of a GPU or of an NVLink's remote end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pci {
    /// As NVML prints it: 8-digit domain, upper-case hex (`00000000:1B:00.0`). Domain,
    /// bus and device numbers and the 16-byte legacy form are derived from it.
    pub bus_id: String,
    /// `pciDeviceId`: device id in the high 16 bits, vendor in the low (`0x233010DE`).
    #[serde(with = "hex32")]
    pub device_id: u32,
    /// `pciSubSystemId` (`0x16C110DE`); NVML leaves it 0 for an NVLink's remote end.
    #[serde(default, with = "hex32")]
    pub subsystem_id: u32,
}

/// `nvmlUtilization_t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    /// Percent of time a kernel ran.
    pub gpu: u32,
    /// Percent of time device memory was read or written.
    pub memory: u32,
}

/// `nvmlMemory_v2_t`; `free` is `total - reserved - used`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// Bytes.
    pub total: u64,
    /// Bytes the driver reserves (v2 only; v1 counts them as used).
    #[serde(default)]
    pub reserved: u64,
    /// Bytes allocated.
    pub used: u64,
}

/// Clock frequencies by `nvmlClockType_t`, MHz.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clocks {
    /// `NVML_CLOCK_GRAPHICS` (0).
    pub graphics: u32,
    /// `NVML_CLOCK_SM` (1).
    pub sm: u32,
    /// `NVML_CLOCK_MEM` (2).
    pub mem: u32,
    /// `NVML_CLOCK_VIDEO` (3).
    pub video: u32,
}

/// ECC mode and error counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ecc {
    /// Current (and pending) ECC mode.
    pub enabled: bool,
    /// Since the driver loaded (`NVML_VOLATILE_ECC`).
    pub volatile: EccCounts,
    /// Over the GPU's life (`NVML_AGGREGATE_ECC`).
    pub aggregate: EccCounts,
}

/// Corrected (single-bit) and uncorrected (double-bit) error totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccCounts {
    /// `NVML_MEMORY_ERROR_TYPE_CORRECTED`.
    pub corrected: u64,
    /// `NVML_MEMORY_ERROR_TYPE_UNCORRECTED`.
    pub uncorrected: u64,
}

/// `nvmlDeviceGetRemappedRows`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    pub correctable: u32,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u32,
    /// A remap waits for a GPU reset.
    #[serde(default)]
    pub pending: bool,
    /// A remap failed (no spare rows left).
    #[serde(default)]
    pub failure: bool,
}

/// Retired pages by cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredPages {
    /// `NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS` (0).
    #[serde(default)]
    pub single_bit: Vec<RetiredPage>,
    /// `NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR` (1).
    #[serde(default)]
    pub double_bit: Vec<RetiredPage>,
    /// `nvmlDeviceGetRetiredPagesPendingStatus`.
    #[serde(default)]
    pub pending: bool,
}

/// One retired page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetiredPage {
    /// Page address.
    #[serde(with = "hex64")]
    pub address: u64,
    /// Retirement time, µs since the epoch.
    pub timestamp: u64,
}

/// PCIe link of the GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pcie {
    /// `nvmlDeviceGetCurrPcieLinkGeneration`; `nvmlDeviceGetPcieSpeed` derives MT/s from it.
    #[serde(rename = "gen")]
    pub generation: u32,
    /// `nvmlDeviceGetCurrPcieLinkWidth`, lanes.
    pub width: u32,
    /// `nvmlDeviceGetMaxPcieLinkGeneration` (the system's limit) and
    /// `nvmlDeviceGetGpuMaxPcieLinkGeneration` (unless `gpu_max_gen` is given).
    pub max_gen: u32,
    /// `nvmlDeviceGetMaxPcieLinkWidth`, lanes.
    pub max_width: u32,
    /// `nvmlDeviceGetGpuMaxPcieLinkGeneration` when it differs from `max_gen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_max_gen: Option<u32>,
    /// `nvmlDeviceGetPcieReplayCounter`, field 94.
    #[serde(default)]
    pub replay_counter: u32,
    /// `nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_TX_BYTES)`, KB/s.
    #[serde(default)]
    pub tx_kbps: u32,
    /// `nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_RX_BYTES)`, KB/s.
    #[serde(default)]
    pub rx_kbps: u32,
}

/// `nvmlGpuFabricInfo_v3_t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// `NVML_GPU_FABRIC_STATE_*`: 0 not supported, 1 not started, 2 in progress, 3 completed.
    pub state: u8,
    /// Probe result (an NVML return code), meaningful when `state` is 3.
    #[serde(default)]
    pub status: u32,
    /// 16 bytes as a UUID (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`); zero when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_uuid: Option<String>,
    /// NVLink clique.
    #[serde(default)]
    pub clique_id: u32,
    /// `NVML_GPU_FABRIC_HEALTH_MASK_*` bit fields.
    #[serde(default, with = "hex32")]
    pub health_mask: u32,
    /// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`: 0 n/a, 1 healthy, 2 unhealthy, 3 limited capacity.
    #[serde(default)]
    pub health_summary: u8,
}

/// One NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLink {
    /// `nvmlDeviceGetNvLinkState`, field 165.
    pub active: bool,
    /// `nvmlDeviceGetNvLinkVersion`, field 166 (4 on H100, 3 on A100).
    pub version: u32,
    /// Per-link speed in MB/s (fields 84–90, 132–137, 164); absent: not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u32>,
    /// The far end; absent: `nvmlDeviceGetNvLinkRemote*` answer `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<Remote>,
    /// Replay errors (`NVML_NVLINK_ERROR_DL_REPLAY`).
    #[serde(default)]
    pub replay: u64,
    /// Recovery errors (`NVML_NVLINK_ERROR_DL_RECOVERY`).
    #[serde(default)]
    pub recovery: u64,
    /// CRC flit errors (`NVML_NVLINK_ERROR_DL_CRC_FLIT`, field 163).
    #[serde(default)]
    pub crc_flit: u64,
    /// CRC data errors (`NVML_NVLINK_ERROR_DL_CRC_DATA`).
    #[serde(default)]
    pub crc_data: u64,
    /// ECC data errors (`NVML_NVLINK_ERROR_DL_ECC_DATA`, fields 148–160).
    #[serde(default)]
    pub ecc_data: u64,
    /// Payload sent, KiB (field 138 `THROUGHPUT_DATA_TX`).
    #[serde(default)]
    pub tx_kib: u64,
    /// Payload received, KiB (field 139).
    #[serde(default)]
    pub rx_kib: u64,
    /// Payload and protocol sent, KiB (field 140); defaults to `tx_kib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_tx_kib: Option<u64>,
    /// Payload and protocol received, KiB (field 141); defaults to `rx_kib`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_rx_kib: Option<u64>,
}

/// The far end of an NVLink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remote {
    /// `nvmlDeviceGetNvLinkRemoteDeviceType`.
    #[serde(rename = "type")]
    pub kind: RemoteKind,
    /// `nvmlDeviceGetNvLinkRemotePciInfo_v2` (NVML leaves `pciSubSystemId` 0 here).
    pub bus_id: String,
    /// `pciDeviceId` of the far end (`0x22A310DE` for an NVSwitch 3).
    #[serde(with = "hex32")]
    pub device_id: u32,
    /// The far end's link number (field 146 `NVLINK_REMOTE_NVLINK_ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<u32>,
}

/// `nvmlIntNvLinkDeviceType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteKind {
    /// `NVML_NVLINK_DEVICE_TYPE_GPU` (0).
    Gpu,
    /// `NVML_NVLINK_DEVICE_TYPE_IBMNPU` (1).
    Ibmnpu,
    /// `NVML_NVLINK_DEVICE_TYPE_SWITCH` (2).
    Switch,
    /// `NVML_NVLINK_DEVICE_TYPE_UNKNOWN` (255).
    Unknown,
}

/// A field value the fixture supplies directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldOverride {
    /// `NVML_FI_*` id, in the v12 numbering of `nvml-wrapper-sys` 0.10.
    pub id: u32,
    /// `scopeId` it answers; absent: every scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u32>,
    /// The value; written as `value_type`.
    #[serde(default)]
    pub value: f64,
    /// How the value is written.
    #[serde(default)]
    pub value_type: FieldType,
    /// When set, the entry's `nvmlReturn` instead of a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<u32>,
}

/// `nvmlValueType_t`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldType {
    /// `NVML_VALUE_TYPE_DOUBLE` (0).
    Double,
    /// `NVML_VALUE_TYPE_UNSIGNED_INT` (1).
    Uint,
    /// `NVML_VALUE_TYPE_UNSIGNED_LONG` (2).
    Ulong,
    /// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG` (3).
    #[default]
    Ull,
    /// `NVML_VALUE_TYPE_SIGNED_LONG_LONG` (4).
    Sll,
    /// `NVML_VALUE_TYPE_SIGNED_INT` (5).
    Sint,
}

/// Why a fixture could not be used.
#[derive(Debug)]
pub enum FixtureError {
    /// The file could not be read.
    Read(std::path::PathBuf, std::io::Error),
    /// The file is not a valid fixture (JSON error with line and column).
    Parse(std::path::PathBuf, serde_json::Error),
    /// A value is malformed (bad bus id, cpulist, UUID, …).
    Invalid(std::path::PathBuf, String),
}

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(p, e) => write!(f, "failed to read fixture {}: {e}", p.display()),
            Self::Parse(p, e) => write!(f, "failed to parse fixture {}: {e}", p.display()),
            Self::Invalid(p, e) => write!(f, "invalid fixture {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for FixtureError {}

impl Fixture {
    /// Reads, parses and validates a fixture file.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        let text = std::fs::read_to_string(path).map_err(|e| FixtureError::Read(path.into(), e))?;
        let fixture: Self =
            serde_json::from_str(&text).map_err(|e| FixtureError::Parse(path.into(), e))?;
        fixture
            .validate()
            .map_err(|e| FixtureError::Invalid(path.into(), e))?;
        Ok(fixture)
    }

    /// Writes the fixture as pretty JSON (atomically, through a rename, so a library
    /// that re-reads it never sees half a file).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")?;
        std::fs::rename(&tmp, path)
    }

    /// Checks what the types cannot: bus ids, cpulists, UUIDs, unique GPU identities.
    pub fn validate(&self) -> Result<(), String> {
        if self.gpus.len() > crate::MAX_GPUS {
            return Err(format!("at most {} GPUs", crate::MAX_GPUS));
        }
        if let Some(costs) = &self.costs {
            costs.validate().map_err(|e| format!("costs.{e}"))?;
        }
        for (i, gpu) in self.gpus.iter().enumerate() {
            let at = |what: &str, e: String| format!("gpus[{i}].{what}: {e}");
            parse_bus_id(&gpu.pci.bus_id).map_err(|e| at("pci.bus_id", e))?;
            if let Some(list) = &gpu.cpu_affinity {
                parse_cpulist(list).map_err(|e| at("cpu_affinity", e))?;
            }
            if let Some(u) = gpu.fabric.as_ref().and_then(|f| f.cluster_uuid.as_ref()) {
                parse_uuid(u).map_err(|e| at("fabric.cluster_uuid", e))?;
            }
            for (l, link) in gpu.nvlinks.iter().enumerate() {
                if let Some(r) = &link.remote {
                    parse_bus_id(&r.bus_id).map_err(|e| at(&format!("nvlinks[{l}].remote"), e))?;
                }
            }
            if self.gpus[..i].iter().any(|g| g.uuid == gpu.uuid) {
                return Err(at("uuid", format!("{} is not unique", gpu.uuid)));
            }
        }
        Ok(())
    }
}

/// A PCI address as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusId {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u32,
    /// Device number.
    pub device: u32,
    /// Function number.
    pub function: u32,
}

/// Parses `DDDDDDDD:BB:DD.F` or `DDDD:BB:DD.F` (any case), as NVML accepts.
pub fn parse_bus_id(text: &str) -> Result<BusId, String> {
    let bad = || format!("{text:?} is not a PCI address like 00000000:1B:00.0");
    let (domain, rest) = text.split_once(':').ok_or_else(bad)?;
    let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
    let (device, function) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |s: &str, max: usize| {
        // Digits only: `from_str_radix` alone also takes a sign (`+1b`).
        if s.is_empty() || s.len() > max || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u32::from_str_radix(s, 16).map_err(|_| bad())
    };
    Ok(BusId {
        domain: hex(domain, 8)?,
        bus: hex(bus, 2)?,
        device: hex(device, 2)?,
        function: hex(function, 1)?,
    })
}

/// Parses a kernel cpulist (`0-3,8,10-11`) into CPU numbers.
pub fn parse_cpulist(text: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} in {text:?} is not a CPU or a range");
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        let lo: u32 = lo.parse().map_err(|_| bad())?;
        let hi: u32 = hi.parse().map_err(|_| bad())?;
        if hi < lo || hi >= 8192 {
            return Err(bad());
        }
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

/// Parses a textual UUID (hyphens optional) into its 16 bytes.
pub fn parse_uuid(text: &str) -> Result<[u8; 16], String> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    let bad = || format!("{text:?} is not a UUID");
    // Digits only: `from_str_radix` alone also takes a sign (`+f`).
    if hex.len() != 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// A number written as JSON number or `"0x…"` string.
#[derive(Deserialize)]
#[serde(untagged)]
enum HexOrNum {
    Num(u64),
    Text(String),
}

impl HexOrNum {
    fn value<E: serde::de::Error>(self) -> Result<u64, E> {
        match self {
            Self::Num(n) => Ok(n),
            Self::Text(s) => {
                let digits = s
                    .strip_prefix("0x")
                    .or_else(|| s.strip_prefix("0X"))
                    .ok_or_else(|| E::custom(format!("{s:?}: hex numbers start with 0x")))?;
                let digits = digits.replace('_', "");
                // Digits only: `from_str_radix` alone also takes a sign (`0x+1`).
                if let Some(c) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
                    return Err(E::custom(format!("{s:?}: {c:?} is not a hex digit")));
                }
                u64::from_str_radix(&digits, 16).map_err(|e| E::custom(format!("{s:?}: {e}")))
            }
        }
    }
}

mod hex32 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:08X}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let v = super::HexOrNum::deserialize(d)?.value::<D::Error>()?;
        u32::try_from(v).map_err(|_| D::Error::custom(format!("{v:#x} does not fit 32 bits")))
    }
}

mod hex64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("0x{v:X}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        super::HexOrNum::deserialize(d)?.value::<D::Error>()
    }
}

/// `costs`: a profile name or a [`Costs`] object (whose unknown keys stay errors).
mod costs_form {
    use std::fmt;

    use serde::de::{self, IntoDeserializer, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{CostProfile, Costs};

    pub fn serialize<S: Serializer>(v: &Option<Costs>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(c) if c.is_plain() => c.profile.serialize(s),
            Some(c) => c.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Costs>, D::Error> {
        d.deserialize_any(Form)
    }

    struct Form;

    impl<'de> Visitor<'de> for Form {
        type Value = Option<Costs>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a cost profile name (\"h200\") or a costs object")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            CostProfile::deserialize(v.into_deserializer()).map(|p| Some(Costs::from(p)))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            Costs::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
}

mod hex_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&format!("0x{v:016X}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<super::HexOrNum>::deserialize(d)?
            .map(super::HexOrNum::value::<D::Error>)
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_in_nvml_and_sysfs_form() {
        let want = BusId {
            domain: 0,
            bus: 0x1b,
            device: 0,
            function: 0,
        };
        assert_eq!(parse_bus_id("00000000:1B:00.0"), Ok(want));
        assert_eq!(parse_bus_id("0000:1b:00.0"), Ok(want));
        assert!(parse_bus_id("1b:00.0").is_err());
        assert!(parse_bus_id("0000:1b:00").is_err());
        assert!(parse_bus_id("0000:1bb:00.0").is_err());
    }

    #[test]
    fn cpulists() {
        assert_eq!(parse_cpulist("0-2,8"), Ok(vec![0, 1, 2, 8]));
        assert_eq!(parse_cpulist(""), Ok(vec![]));
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn uuids() {
        let u = parse_uuid("01234567-89ab-cdef-0123-456789abcdef").unwrap();
        assert_eq!(u[0], 0x01);
        assert_eq!(u[15], 0xef);
        assert!(parse_uuid("0123").is_err());
        // Found by the property tests: a sign was taken as part of a hex byte.
        assert!(parse_uuid("A0+aa0AaA00aaa+0A0aaA0aa0A0AA000").is_err());
        assert!(parse_bus_id("+0000000:1b:00.0").is_err());
    }

    /// Found by the property tests: without serde_json's `float_roundtrip`, a saved field
    /// value could read back one ULP off.
    #[test]
    fn field_values_survive_save_and_load() {
        let value = 1.2627632417156264e-115;
        let field = FieldOverride {
            id: 1,
            scope: None,
            value,
            value_type: FieldType::Double,
            error: None,
        };
        let back: FieldOverride =
            serde_json::from_str(&serde_json::to_string(&field).unwrap()).unwrap();
        assert_eq!(back.value.to_bits(), value.to_bits());
    }

    #[test]
    fn every_shipped_fixture_loads_and_round_trips() {
        let dir = crate::fixtures_dir();
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        names.sort();
        assert_eq!(names.len(), 6, "{names:?}");
        for path in names {
            let f = Fixture::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let text = serde_json::to_string(&f).unwrap();
            let back: Fixture = serde_json::from_str(&text).unwrap();
            assert_eq!(back, f, "{}", path.display());
            // Every shipped fixture is described in the README.
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(readme.contains(name), "{name} is not in fixtures/README.md");
        }
    }

    #[test]
    fn costs_in_short_and_long_form() {
        let parse = |costs: &str| {
            serde_json::from_str::<Fixture>(&format!(
                r#"{{"driver_version": "580.159.04", "nvml_version": "13.580.159.04",
                    "cuda_driver_version": 13000, "costs": {costs}, "gpus": []}}"#
            ))
        };
        let short = parse(r#""h200""#).unwrap();
        assert_eq!(short.costs, Some(Costs::default()));
        let text = serde_json::to_string(&short).unwrap();
        assert!(text.contains(r#""costs":"h200""#), "{text}");
        assert_eq!(parse("null").unwrap().costs, None);

        let long = parse(
            r#"{"profile": "h200", "scale": 0.5,
                "overrides": {"nvmlDeviceGetPcieThroughput": {"wall_us": 21000, "cpu_us": 50}},
                "fields": {"83": {"cpu_us": 4300}}}"#,
        )
        .unwrap();
        long.validate().unwrap();
        let costs = long.costs.clone().unwrap();
        assert_eq!(costs.scale, 0.5);
        assert_eq!(
            costs.overrides["nvmlDeviceGetPcieThroughput"],
            CallCost {
                wall_us: 21000.0,
                cpu_us: 50.0
            }
        );
        assert_eq!(costs.fields[&83].wall_us, 0.0);
        let back: Fixture = serde_json::from_str(&serde_json::to_string(&long).unwrap()).unwrap();
        assert_eq!(back, long);

        // Typos are load errors that name what is wrong.
        let err = |costs: &str| parse(costs).unwrap_err().to_string();
        assert!(err(r#""h100""#).contains("h200"), "{}", err(r#""h100""#));
        assert!(err(r#"{"overides": {}}"#).contains("overides"));
        assert!(err(r#"{"fields": {"83": {"cpu_ms": 1}}}"#).contains("cpu_ms"));
        assert!(err("7").contains("cost profile name"));
        let invalid = |costs: &str| parse(costs).unwrap().validate().unwrap_err();
        let e = invalid(r#"{"overrides": {"nvmlDeviceGetViolationStatus": {"wall_us": 1}}}"#);
        assert!(
            e.starts_with("costs.overrides") && e.contains("ViolationStatus"),
            "{e}"
        );
        assert!(invalid(r#"{"scale": -1}"#).starts_with("costs.scale"));
        assert!(invalid(r#"{"scale": 1e9}"#).starts_with("costs.scale"));
        let e = invalid(r#"{"fields": {"83": {"cpu_us": -5}}}"#);
        assert!(e.starts_with("costs.fields.83: cpu_us"), "{e}");
        let e = invalid(r#"{"overrides": {"nvmlInit_v2": {"wall_us": 1e300}}}"#);
        assert!(e.starts_with("costs.overrides.nvmlInit_v2: wall_us"), "{e}");
    }

    #[test]
    fn hex_or_number_and_unknown_keys() {
        let pci: Pci = serde_json::from_str(
            r#"{"bus_id": "00000000:1B:00.0", "device_id": "0x233010DE", "subsystem_id": 5}"#,
        )
        .unwrap();
        assert_eq!(pci.device_id, 0x2330_10de);
        assert_eq!(pci.subsystem_id, 5);
        let typo = serde_json::from_str::<Pci>(
            r#"{"bus_id": "00000000:1B:00.0", "device_id": 1, "subsytem_id": 5}"#,
        );
        assert!(typo.unwrap_err().to_string().contains("subsytem_id"));
        // Found by the property tests: a sign was read as part of a hex number.
        let signed = serde_json::from_str::<Pci>(
            r#"{"bus_id": "00000000:1B:00.0", "device_id": "0x+0", "subsystem_id": 5}"#,
        );
        assert!(signed.is_err());
    }
}
