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
    /// `nvmlDeviceGetEncoderUtilization`, percent (sampling period 167 000 µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoder_utilization: Option<u32>,
    /// `nvmlDeviceGetDecoderUtilization`, percent (sampling period 167 000 µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder_utilization: Option<u32>,
    /// GPU Performance Monitoring (Hopper and later): what `nvmlGpmMetricsGet` reports
    /// for a window of two `nvmlGpmSampleGet` samples. Absent: `nvmlGpmQueryDeviceSupport`
    /// says not supported and the sample calls answer `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpm: Option<Gpm>,
    /// `nvmlDeviceGetViolationStatus`, per policy. Absent (or a policy not listed):
    /// `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<Violations>,
    /// Multi-Instance GPU mode and devices. Absent: `nvmlDeviceGetMigMode` and
    /// `nvmlDeviceGetMaxMigDeviceCount` answer `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<Mig>,
    /// NVLink-C2C to the Grace CPU (fields 170–172, 231–234, `nvmlDeviceGetC2cModeInfoV`).
    /// Absent: the fields answer `NOT_SUPPORTED`, the mode `isC2cEnabled` 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2c: Option<C2c>,
    /// Where the GPU sits in its rack (`nvmlDeviceGetPlatformInfo`, Blackwell and later).
    /// Absent: `NOT_SUPPORTED`, as on every GPU before Blackwell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// `nvmlDeviceGetModuleId`. Absent: `platform.module_id` where there is a `platform`,
    /// else `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_id: Option<u32>,
    /// Processes with a compute context on this GPU, in the order
    /// `nvmlDeviceGetComputeRunningProcesses{,_v2,_v3}` lists them (a MIG device handle
    /// lists those of its GPU instance and compute instance). Empty: an idle GPU, the
    /// calls answer an empty list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
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
    /// `nvmlDeviceGetEncoderUtilization`.
    EncoderUtilization,
    /// `nvmlDeviceGetDecoderUtilization`.
    DecoderUtilization,
    /// `nvmlGpmQueryDeviceSupport`, `nvmlGpmSampleGet`, `nvmlGpmMigSampleGet`,
    /// `nvmlGpmQueryIfStreamingEnabled`, `nvmlGpmSetStreamingEnabled`: `not_supported`
    /// acts as if `gpm` were absent, an `errors` code is every one of these calls' answer.
    Gpm,
    /// `nvmlDeviceGetViolationStatus`.
    Violations,
    /// Every MIG call: mode, device count, MIG handles and what is asked of them.
    Mig,
    /// C2C fields 170–172 and 231–234, `nvmlDeviceGetC2cModeInfoV`.
    C2c,
    /// `nvmlDeviceGetComputeRunningProcesses{,_v2,_v3}`,
    /// `nvmlDeviceGetGraphicsRunningProcesses_v3`.
    Processes,
    /// `nvmlDeviceGetPlatformInfo`.
    Platform,
    /// `nvmlDeviceGetModuleId`.
    ModuleId,
}

/// `nvmlPlatformInfo_v2_t` (and `_v1_t`, the same bytes under older names): where a GPU
/// sits in its rack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// `chassisSerialNumber` (v1: `rackGuid`): printable ASCII, at most 16 bytes, written
    /// NUL-padded (a Blackwell serial is 13 bytes, so bytes 13–15 are zero).
    pub chassis_serial: String,
    /// The 16 bytes written instead of `chassis_serial`, for a malformed answer (bytes
    /// that are not NUL-padded ASCII).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chassis_serial_bytes: Option<Vec<u8>>,
    /// `ibGuid` as hex (`0x` optional): at most 16 bytes, in order, zero-padded at the end
    /// (a Blackwell GUID is 8 bytes, so bytes 8–15 are zero).
    pub ib_guid: String,
    /// `slotNumber` (v1 `chassisPhysicalSlotNumber`): the slot in the chassis, switch trays
    /// counted.
    pub slot_number: u8,
    /// `trayIndex` (v1 `computeSlotIndex`): the index among the compute trays.
    pub tray_index: u8,
    /// `hostId` (v1 `nodeIndex`): the node within the tray.
    pub host_id: u8,
    /// `peerType`: the platform's NVLink peer type.
    pub peer_type: u8,
    /// `moduleId`: the GPU within the node.
    pub module_id: u8,
    /// The struct versions the driver accepts (1, 2); any other version, or one not
    /// listed, answers `ARGUMENT_VERSION_MISMATCH`. Default both.
    #[serde(default = "Platform::all_versions")]
    pub versions: Vec<u32>,
}

impl Platform {
    fn all_versions() -> Vec<u32> {
        vec![1, 2]
    }

    /// The 16 bytes of `chassisSerialNumber` as written.
    pub fn serial_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        let src = self
            .chassis_serial_bytes
            .as_deref()
            .unwrap_or(self.chassis_serial.as_bytes());
        for (o, b) in out.iter_mut().zip(src) {
            *o = *b;
        }
        out
    }

    /// The 16 bytes of `ibGuid`.
    pub fn guid_bytes(&self) -> Result<[u8; 16], String> {
        let hex = self.ib_guid.trim_start_matches("0x");
        if !hex.len().is_multiple_of(2) || hex.len() > 32 {
            return Err(format!(
                "ib_guid: {:?} is not up to 16 bytes of hex",
                self.ib_guid
            ));
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().take(hex.len() / 2).enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("ib_guid: {:?} is not hex", self.ib_guid))?;
        }
        Ok(out)
    }

    fn validate(&self) -> Result<(), String> {
        if self.chassis_serial.len() > 16
            || !self
                .chassis_serial
                .bytes()
                .all(|b| b.is_ascii_graphic() || b == b' ')
        {
            return Err(format!(
                "chassis_serial: {:?} is not up to 16 printable ASCII characters",
                self.chassis_serial
            ));
        }
        if self
            .chassis_serial_bytes
            .as_ref()
            .is_some_and(|b| b.len() > 16)
        {
            return Err("chassis_serial_bytes: more than 16 bytes".to_owned());
        }
        self.guid_bytes()?;
        if self.versions.is_empty() || self.versions.iter().any(|v| !matches!(v, 1 | 2)) {
            return Err(format!(
                "versions: {:?} is not a non-empty list of 1 and 2",
                self.versions
            ));
        }
        Ok(())
    }
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

/// GPU Performance Monitoring of a GPU or of one MIG GPU instance.
///
/// The fake integrates the listed values over time between `nvmlGpmSampleGet` calls, so
/// `nvmlGpmMetricsGet` over two samples reports, for each id both samples carry, the
/// time-weighted mean of what the fixture said during the window: a fixture replaced
/// between two samples shows whole in the first window that ends after the change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpm {
    /// `NVML_GPM_METRIC_*` id (1–255; a decimal string in JSON) → the value
    /// `nvmlGpmMetricsGet` reports: percent for `*_UTIL` and `SM_OCCUPANCY`, MiB/s for
    /// `*_PER_SEC`. An id not listed answers `NOT_SUPPORTED` in its `nvmlReturn`.
    #[serde(default)]
    pub metrics: BTreeMap<u32, f64>,
}

impl Gpm {
    /// The largest metric id a fixture may list.
    pub const MAX_METRIC_ID: u32 = 255;

    fn validate(&self) -> Result<(), String> {
        for (id, v) in &self.metrics {
            if !(1..=Self::MAX_METRIC_ID).contains(id) {
                return Err(format!(
                    "metrics: id {id} is not between 1 and {}",
                    Self::MAX_METRIC_ID
                ));
            }
            if !v.is_finite() {
                return Err(format!("metrics.{id}: {v} is not a finite number"));
            }
        }
        Ok(())
    }
}

/// `nvmlDeviceGetViolationStatus` per `nvmlPerfPolicyType_t`: nanoseconds the GPU was held
/// back by that policy since the driver loaded (`referenceTime` is the time of the call).
/// A policy not listed answers `NOT_SUPPORTED`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Violations {
    /// `NVML_PERF_POLICY_POWER` (0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<u64>,
    /// `NVML_PERF_POLICY_THERMAL` (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal: Option<u64>,
    /// `NVML_PERF_POLICY_SYNC_BOOST` (2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_boost: Option<u64>,
    /// `NVML_PERF_POLICY_BOARD_LIMIT` (3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_limit: Option<u64>,
    /// `NVML_PERF_POLICY_LOW_UTILIZATION` (4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_utilization: Option<u64>,
    /// `NVML_PERF_POLICY_RELIABILITY` (5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reliability: Option<u64>,
    /// `NVML_PERF_POLICY_TOTAL_APP_CLOCKS` (10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_app_clocks: Option<u64>,
    /// `NVML_PERF_POLICY_TOTAL_BASE_CLOCKS` (11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_base_clocks: Option<u64>,
}

impl Violations {
    /// The value for an `nvmlPerfPolicyType_t`: `Err` for a policy NVML does not define,
    /// `Ok(None)` for one the fixture does not list.
    pub(crate) fn by_policy(&self, policy: u32) -> Result<Option<u64>, ()> {
        Ok(match policy {
            0 => self.power,
            1 => self.thermal,
            2 => self.sync_boost,
            3 => self.board_limit,
            4 => self.low_utilization,
            5 => self.reliability,
            10 => self.total_app_clocks,
            11 => self.total_base_clocks,
            _ => return Err(()),
        })
    }
}

/// Multi-Instance GPU: the mode and the MIG devices (one per compute instance).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mig {
    /// `nvmlDeviceGetMigMode` `currentMode`: 0 disabled, 1 enabled.
    pub current_mode: u32,
    /// `nvmlDeviceGetMigMode` `pendingMode` (after the next GPU reset): 0 or 1.
    pub pending_mode: u32,
    /// `nvmlDeviceGetMaxMigDeviceCount` (7 on A100/H100/H200 with MIG on; 0 with it off).
    /// At most [`Mig::MAX_DEVICES`].
    pub max_devices: u32,
    /// MIG devices by `nvmlDeviceGetMigDeviceHandleByIndex` index (position in the list;
    /// at most `max_devices`). An index below `max_devices` without an entry answers
    /// `NOT_FOUND`, one at or above it `INVALID_ARGUMENT`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<MigDevice>,
}

impl Mig {
    /// The largest `max_devices`.
    pub const MAX_DEVICES: u32 = 16;

    fn validate(&self) -> Result<(), String> {
        for (what, v) in [
            ("current_mode", self.current_mode),
            ("pending_mode", self.pending_mode),
        ] {
            if v > 1 {
                return Err(format!("{what}: {v} is neither 0 nor 1"));
            }
        }
        if self.max_devices > Self::MAX_DEVICES {
            return Err(format!(
                "max_devices: {} is more than {}",
                self.max_devices,
                Self::MAX_DEVICES
            ));
        }
        if self.devices.len() > self.max_devices as usize {
            return Err(format!(
                "devices: {} devices but max_devices is {}",
                self.devices.len(),
                self.max_devices
            ));
        }
        if self.current_mode == 0 && !self.devices.is_empty() {
            return Err("devices: listed while current_mode is 0".into());
        }
        for (i, d) in self.devices.iter().enumerate() {
            let at = |e: String| format!("devices[{i}].{e}");
            let rest = d
                .uuid
                .strip_prefix("MIG-")
                .ok_or_else(|| at(format!("uuid: {:?} does not start with MIG-", d.uuid)))?;
            if rest.len() != 36 {
                return Err(at(format!(
                    "uuid: {:?} is not MIG- and 36 characters",
                    d.uuid
                )));
            }
            parse_uuid(rest).map_err(|e| at(format!("uuid: {e}")))?;
            if let Some(gpm) = &d.gpm {
                gpm.validate().map_err(|e| at(format!("gpm.{e}")))?;
            }
            let earlier = &self.devices[..i];
            if earlier.iter().any(|o| o.uuid == d.uuid) {
                return Err(at(format!("uuid: {} is not unique", d.uuid)));
            }
            if earlier.iter().any(|o| {
                o.gpu_instance_id == d.gpu_instance_id
                    && o.compute_instance_id == d.compute_instance_id
            }) {
                return Err(at(format!(
                    "compute_instance_id: GPU instance {} already has compute instance {}",
                    d.gpu_instance_id, d.compute_instance_id
                )));
            }
            if d.gpm.is_some()
                && earlier
                    .iter()
                    .any(|o| o.gpu_instance_id == d.gpu_instance_id && o.gpm.is_some())
            {
                return Err(at(format!(
                    "gpm: GPU instance {} already has gpm (GPM samples a GPU instance)",
                    d.gpu_instance_id
                )));
            }
        }
        Ok(())
    }

    /// The GPM of GPU instance `gpu_instance_id`: `None` when no MIG device is in that
    /// instance, `Some(None)` when none of its devices carries `gpm`.
    pub fn instance_gpm(&self, gpu_instance_id: u32) -> Option<Option<&Gpm>> {
        let mut devices = self
            .devices
            .iter()
            .filter(|d| d.gpu_instance_id == gpu_instance_id)
            .peekable();
        devices.peek()?;
        Some(devices.find_map(|d| d.gpm.as_ref()))
    }
}

/// One MIG device (a compute instance of a GPU instance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    /// `nvmlDeviceGetGpuInstanceId` on the MIG handle.
    pub gpu_instance_id: u32,
    /// `nvmlDeviceGetComputeInstanceId` on the MIG handle.
    pub compute_instance_id: u32,
    /// `nvmlDeviceGetUUID` on the MIG handle: `MIG-` and 36 characters, unique.
    pub uuid: String,
    /// `nvmlDeviceGetName` on the MIG handle (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`).
    pub name: String,
    /// `nvmlDeviceGetMemoryInfo{,_v2}` on the MIG handle; absent: `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// What `nvmlGpmMigSampleGet(parent, gpu_instance_id)` windows report (one device per
    /// GPU instance may carry it). Absent: those samples answer `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpm: Option<Gpm>,
}

/// One process with a compute context on a GPU (`nvmlProcessInfo_t`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// `pid`, in the host's PID namespace (as the driver reports it). Not 0.
    pub pid: u32,
    /// `usedGpuMemory`, bytes. Absent: `NVML_VALUE_NOT_AVAILABLE` (`u64::MAX`), what the
    /// driver writes when it cannot tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_gpu_memory: Option<u64>,
    /// `gpuInstanceId`: the MIG GPU instance the context is in. Absent: `0xFFFFFFFF`, as on
    /// a GPU not in MIG mode. Required when the GPU is in MIG mode (`mig.current_mode` 1),
    /// with `compute_instance_id`, the pair naming one of `mig.devices`; not allowed when
    /// it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    /// `computeInstanceId`: the compute instance within that GPU instance; absent:
    /// `0xFFFFFFFF`. Present exactly when `gpu_instance_id` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_instance_id: Option<u32>,
}

impl Process {
    /// `gpuInstanceId` / `computeInstanceId` for "none" (`nvml-wrapper` reads it as `None`).
    pub const NO_INSTANCE: u32 = 0xFFFF_FFFF;

    /// Checks a GPU's process list against its MIG state: pids not 0, no (pid, instance)
    /// twice; in MIG mode both instance ids, naming one of `mig.devices`; out of it, none.
    fn validate_list(processes: &[Self], mig: Option<&Mig>) -> Result<(), String> {
        let mig_on = mig.filter(|m| m.current_mode == 1);
        for (i, p) in processes.iter().enumerate() {
            let at = |e: String| format!("processes[{i}].{e}");
            if p.pid == 0 {
                return Err(at("pid: 0 is not a process".into()));
            }
            let key = |q: &Self| (q.pid, q.gpu_instance_id, q.compute_instance_id);
            if processes[..i].iter().any(|q| key(q) == key(p)) {
                return Err(at(format!("pid: {} is listed twice", p.pid)));
            }
            let Some(m) = mig_on else {
                if let Some(gi) = p.gpu_instance_id {
                    return Err(at(format!(
                        "gpu_instance_id: {gi} on a GPU not in MIG mode"
                    )));
                }
                if let Some(ci) = p.compute_instance_id {
                    return Err(at(format!(
                        "compute_instance_id: {ci} on a GPU not in MIG mode"
                    )));
                }
                continue;
            };
            let (Some(gi), Some(ci)) = (p.gpu_instance_id, p.compute_instance_id) else {
                return Err(at(
                    "gpu_instance_id, compute_instance_id: both required while the GPU is in \
                     MIG mode"
                        .into(),
                ));
            };
            if !m.devices.iter().any(|d| d.gpu_instance_id == gi) {
                return Err(at(format!(
                    "gpu_instance_id: {gi} is no GPU instance of mig.devices"
                )));
            }
            if !m.devices.iter().any(|d| p.runs_in(d)) {
                return Err(at(format!(
                    "compute_instance_id: GPU instance {gi} has no compute instance {ci} in \
                     mig.devices"
                )));
            }
        }
        Ok(())
    }

    /// Whether this process runs in MIG device `d` (its GPU instance and compute
    /// instance).
    pub fn runs_in(&self, d: &MigDevice) -> bool {
        self.gpu_instance_id == Some(d.gpu_instance_id)
            && self.compute_instance_id == Some(d.compute_instance_id)
    }
}

/// NVLink-C2C between a Blackwell GPU and its Grace CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct C2c {
    /// The C2C links, link 0 first: field 170 (`C2C_LINK_COUNT`) is their number.
    #[serde(default)]
    pub links: Vec<C2cLink>,
    /// Error counters, fields 231–233.
    #[serde(default)]
    pub errors: C2cErrors,
    /// Field 234 (`C2C_LINK_POWER_STATE`): 0 full power, 1 low power.
    #[serde(default)]
    pub power_state: u32,
}

impl C2c {
    fn validate(&self) -> Result<(), String> {
        if self.power_state > 1 {
            return Err(format!(
                "power_state: {} is neither 0 nor 1",
                self.power_state
            ));
        }
        Ok(())
    }
}

/// One C2C link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct C2cLink {
    /// Field 171 (`C2C_LINK_GET_STATUS`, scope = link): 1 up, 0 down.
    pub active: bool,
    /// Field 172 (`C2C_LINK_GET_MAX_BW`, scope = link), MB/s.
    pub max_bw_mbps: u32,
}

/// C2C error counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct C2cErrors {
    /// Field 231 `C2C_LINK_ERROR_INTR`.
    #[serde(default)]
    pub intr: u64,
    /// Field 232 `C2C_LINK_ERROR_REPLAY`.
    #[serde(default)]
    pub replay: u64,
    /// Field 233 `C2C_LINK_ERROR_REPLAY_B2B`.
    #[serde(default)]
    pub replay_b2b: u64,
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
    /// NVLink5 (Blackwell) counters, fields 201–222 with `scopeId` = this link. Absent:
    /// those fields answer `NOT_SUPPORTED` (as on Hopper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink5: Option<NvLink5>,
}

/// NVLink5 counters of one link (`NVML_FI_DEV_NVLINK_COUNT_*`). Fields 201–205
/// (packet and byte counts, VL15 drops) and 216–218 (raw BER, deprecated) are not modelled
/// and answer `NOT_SUPPORTED`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLink5 {
    /// Field 206 `MALFORMED_PACKET_ERRORS`.
    #[serde(default)]
    pub malformed_packet_errors: u64,
    /// Field 207 `BUFFER_OVERRUN_ERRORS`.
    #[serde(default)]
    pub buffer_overrun_errors: u64,
    /// Field 208 `RCV_ERRORS`.
    #[serde(default)]
    pub rcv_errors: u64,
    /// Field 209 `RCV_REMOTE_ERRORS`.
    #[serde(default)]
    pub rcv_remote_errors: u64,
    /// Field 210 `RCV_GENERAL_ERRORS`.
    #[serde(default)]
    pub rcv_general_errors: u64,
    /// Field 211 `LOCAL_LINK_INTEGRITY_ERRORS`.
    #[serde(default)]
    pub local_link_integrity_errors: u64,
    /// Field 212 `XMIT_DISCARDS`.
    #[serde(default)]
    pub xmit_discards: u64,
    /// Field 213 `LINK_RECOVERY_SUCCESSFUL_EVENTS`.
    #[serde(default)]
    pub link_recovery_successful_events: u64,
    /// Field 214 `LINK_RECOVERY_FAILED_EVENTS`.
    #[serde(default)]
    pub link_recovery_failed_events: u64,
    /// Field 215 `LINK_RECOVERY_EVENTS`.
    #[serde(default)]
    pub link_recovery_events: u64,
    /// Field 219 `EFFECTIVE_ERRORS`.
    #[serde(default)]
    pub effective_errors: u64,
    /// Field 220 `EFFECTIVE_BER`, as a ratio (`1e-15`); written NVML's way, see
    /// [`encode_ber`]. At most [`NvLink5::MAX_BER`].
    #[serde(default)]
    pub effective_ber: f64,
    /// Field 221 `SYMBOL_ERRORS`.
    #[serde(default)]
    pub symbol_errors: u64,
    /// Field 222 `SYMBOL_BER`, encoded like `effective_ber`.
    #[serde(default)]
    pub symbol_ber: f64,
    /// Fields 235–250 `COUNT_FEC_HISTORY_0` … `_15`: per bin *n*, the FEC codewords in
    /// which the decoder corrected *n* symbol errors. Absent: those fields answer
    /// `NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fec_history: Option<[u64; 16]>,
}

impl NvLink5 {
    /// The largest BER the encoding holds: mantissa 15, exponent 0.
    pub const MAX_BER: f64 = 15.0;

    fn validate(&self) -> Result<(), String> {
        for (what, v) in [
            ("effective_ber", self.effective_ber),
            ("symbol_ber", self.symbol_ber),
        ] {
            if !(0.0..=Self::MAX_BER).contains(&v) {
                return Err(format!(
                    "{what}: {v} is not between 0 and {}",
                    Self::MAX_BER
                ));
            }
        }
        Ok(())
    }
}

/// NVML's encoding of a bit error rate in an NVLink5 BER field:
/// `(mantissa << NVML_NVLINK_BER_MANTISSA_SHIFT) | (exponent << NVML_NVLINK_BER_EXP_SHIFT)`
/// with `BER = mantissa × 10^-exponent`, mantissa 0–15 (shift 8), exponent 0–255 (shift 0).
/// Returns the representable value closest to `ber` (the smaller exponent on a tie, so
/// `1e-15` is mantissa 1, exponent 15); negative, NaN and zero give 0, anything above 15
/// gives 15 × 10^0.
pub fn encode_ber(ber: f64) -> u32 {
    if ber.is_nan() || ber <= 0.0 {
        return 0;
    }
    let mut best = (0u32, 0u32, ber);
    for exponent in 0..=255u32 {
        let scale = pow10(exponent);
        let mantissa = (ber * scale).round().clamp(0.0, 15.0);
        let error = (mantissa / scale - ber).abs();
        // Relative slack so that 10 × 10^-16 does not beat 1 × 10^-15 on rounding noise.
        if error < best.2 * (1.0 - 1e-9) {
            best = (mantissa as u32, exponent, error);
        }
    }
    (best.0 << 8) | best.1
}

/// The BER an NVLink5 BER field's value stands for (the inverse of [`encode_ber`]).
pub fn decode_ber(value: u32) -> f64 {
    let mantissa = (value >> 8) & 0xf;
    let exponent = value & 0xff;
    f64::from(mantissa) / pow10(exponent)
}

/// 10^e for e in 0..=255, each the double closest to it (parsed once, not multiplied).
fn pow10(e: u32) -> f64 {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (0..=255)
            .map(|e| format!("1e{e}").parse().unwrap_or(f64::INFINITY))
            .collect()
    });
    table.get(e as usize).copied().unwrap_or(f64::INFINITY)
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

    /// Checks what the types cannot: bus ids, cpulists, UUIDs, unique GPU and MIG
    /// identities, GPM metric ids, MIG device counts, BER ranges.
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
                if let Some(n5) = &link.nvlink5 {
                    n5.validate()
                        .map_err(|e| at(&format!("nvlinks[{l}].nvlink5"), e))?;
                }
            }
            if self.gpus[..i].iter().any(|g| g.uuid == gpu.uuid) {
                return Err(at("uuid", format!("{} is not unique", gpu.uuid)));
            }
            if let Some(gpm) = &gpu.gpm {
                gpm.validate().map_err(|e| format!("gpus[{i}].gpm.{e}"))?;
            }
            if let Some(mig) = &gpu.mig {
                mig.validate().map_err(|e| format!("gpus[{i}].mig.{e}"))?;
                for (m, d) in mig.devices.iter().enumerate() {
                    let clash = self.gpus.iter().enumerate().any(|(j, g)| {
                        g.uuid == d.uuid
                            || (j < i
                                && g.mig
                                    .as_ref()
                                    .is_some_and(|o| o.devices.iter().any(|o| o.uuid == d.uuid)))
                    });
                    if clash {
                        return Err(format!(
                            "gpus[{i}].mig.devices[{m}].uuid: {} is not unique",
                            d.uuid
                        ));
                    }
                }
            }
            if let Some(platform) = &gpu.platform {
                platform
                    .validate()
                    .map_err(|e| format!("gpus[{i}].platform.{e}"))?;
            }
            if let Some(c2c) = &gpu.c2c {
                c2c.validate().map_err(|e| format!("gpus[{i}].c2c.{e}"))?;
            }
            Process::validate_list(&gpu.processes, gpu.mig.as_ref())
                .map_err(|e| format!("gpus[{i}].{e}"))?;
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
        assert_eq!(names.len(), 9, "{names:?}");
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
        let e = invalid(r#"{"overrides": {"nvmlDeviceGetBAR1MemoryInfo": {"wall_us": 1}}}"#);
        assert!(
            e.starts_with("costs.overrides") && e.contains("BAR1MemoryInfo"),
            "{e}"
        );
        assert!(invalid(r#"{"scale": -1}"#).starts_with("costs.scale"));
        assert!(invalid(r#"{"scale": 1e9}"#).starts_with("costs.scale"));
        let e = invalid(r#"{"fields": {"83": {"cpu_us": -5}}}"#);
        assert!(e.starts_with("costs.fields.83: cpu_us"), "{e}");
        let e = invalid(r#"{"overrides": {"nvmlInit_v2": {"wall_us": 1e300}}}"#);
        assert!(e.starts_with("costs.overrides.nvmlInit_v2: wall_us"), "{e}");
    }

    /// A one-GPU fixture whose GPU carries `extra` (JSON members, comma-led).
    fn one_gpu(extra: &str) -> Result<Fixture, String> {
        let text = format!(
            r#"{{"driver_version": "580.159.04", "nvml_version": "13.580.159.04",
                "cuda_driver_version": 13000, "gpus": [{{"name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-00000000-0000-0000-0000-000000000001",
                "pci": {{"bus_id": "00000000:1B:00.0", "device_id": "0x233010DE"}}{extra}}}]}}"#
        );
        let f: Fixture = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        f.validate()?;
        Ok(f)
    }

    const MIG_DEVICE: &str = r#"{"gpu_instance_id": 7, "compute_instance_id": 0,
        "uuid": "MIG-5c89a1f2-0000-4000-8000-000000000007",
        "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
        "memory": {"total": 10200547328, "reserved": 0, "used": 0},
        "gpm": {"metrics": {"1": 50.0, "2": 48.0}}}"#;

    #[test]
    fn new_keys_as_the_contract_writes_them() {
        let f = one_gpu(&format!(
            r#", "encoder_utilization": 3, "decoder_utilization": 0,
            "gpm": {{"metrics": {{"1": 99.99, "2": 96.6, "3": 14.3, "5": 93.8, "10": 16.1,
                                  "20": 4.5, "21": 13.2}}}},
            "violations": {{"power": 3128307968, "thermal": 0, "low_utilization": 21602789600}},
            "mig": {{"current_mode": 1, "pending_mode": 1, "max_devices": 7,
                     "devices": [{MIG_DEVICE}]}},
            "c2c": {{"links": [{{"active": true, "max_bw_mbps": 45000}}],
                     "errors": {{"intr": 0, "replay": 0, "replay_b2b": 0}}, "power_state": 0}},
            "nvlinks": [{{"active": true, "version": 5, "nvlink5": {{
                "malformed_packet_errors": 1, "effective_ber": 1e-15, "symbol_ber": 1e-12}}}}],
            "not_supported": ["encoder_utilization", "decoder_utilization", "gpm",
                              "violations", "mig", "c2c"]"#
        ))
        .unwrap();
        let g = &f.gpus[0];
        assert_eq!(g.encoder_utilization, Some(3));
        assert_eq!(g.gpm.as_ref().unwrap().metrics[&21], 13.2);
        let v = g.violations.as_ref().unwrap();
        assert_eq!(v.by_policy(0), Ok(Some(3_128_307_968)));
        assert_eq!(v.by_policy(5), Ok(None));
        assert_eq!(v.by_policy(6), Err(()));
        let mig = g.mig.as_ref().unwrap();
        assert_eq!(mig.devices[0].gpu_instance_id, 7);
        assert!(mig.instance_gpm(7).unwrap().is_some());
        assert!(mig.instance_gpm(8).is_none());
        assert_eq!(g.c2c.as_ref().unwrap().links[0].max_bw_mbps, 45_000);
        assert_eq!(g.nvlinks[0].nvlink5.as_ref().unwrap().effective_ber, 1e-15);
        assert_eq!(g.not_supported.len(), 6);
        let back: Fixture = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn new_keys_reject_what_cannot_be() {
        let err = |extra: &str| one_gpu(extra).unwrap_err();
        // Typos are load errors.
        assert!(err(r#", "violations": {"powr": 1}"#).contains("powr"));
        assert!(err(r#", "gpm": {"metric": {}}"#).contains("metric"));
        assert!(err(r#", "gpm": {"metrics": {"x": 1}}"#).contains("invalid"));
        assert!(err(r#", "c2c": {"link": []}"#).contains("link"));
        assert!(err(r#", "mig": {"current_mode": 1, "pending_mode": 1}"#).contains("max_devices"));
        // Values out of range.
        assert!(err(r#", "gpm": {"metrics": {"0": 1}}"#).starts_with("gpus[0].gpm.metrics"));
        assert!(err(r#", "gpm": {"metrics": {"256": 1}}"#).contains("256"));
        let mig = |mode: u32, max: u32, devices: &str| {
            format!(
                r#", "mig": {{"current_mode": {mode}, "pending_mode": 1, "max_devices": {max},
                    "devices": [{devices}]}}"#
            )
        };
        assert!(one_gpu(&mig(1, 7, MIG_DEVICE)).is_ok());
        assert!(err(&mig(1, 0, MIG_DEVICE)).contains("max_devices is 0"));
        assert!(err(&mig(0, 7, MIG_DEVICE)).contains("current_mode is 0"));
        assert!(err(&mig(2, 7, "")).contains("current_mode"));
        assert!(err(&mig(1, 17, "")).contains("max_devices"));
        let bad_uuid = MIG_DEVICE.replace("MIG-5c89", "GPU-5c89");
        assert!(err(&mig(1, 7, &bad_uuid)).contains("MIG-"));
        let short = MIG_DEVICE.replace("-000000000007", "-0007");
        assert!(err(&mig(1, 7, &short)).contains("36 characters"));
        let twice = format!("{MIG_DEVICE}, {MIG_DEVICE}");
        assert!(err(&mig(1, 7, &twice)).contains("not unique"));
        let same_ci = MIG_DEVICE.replace("-000000000007", "-000000000008");
        assert!(
            err(&mig(1, 7, &format!("{MIG_DEVICE}, {same_ci}"))).contains("compute instance 0")
        );
        let second_gpm =
            same_ci.replace(r#""compute_instance_id": 0"#, r#""compute_instance_id": 1"#);
        assert!(err(&mig(1, 7, &format!("{MIG_DEVICE}, {second_gpm}"))).contains("gpm"));
        let bad_ber =
            r#", "nvlinks": [{"active": true, "version": 5, "nvlink5": {"symbol_ber": 16}}]"#;
        assert!(err(bad_ber).starts_with("gpus[0].nvlinks[0].nvlink5: symbol_ber"));
        assert!(err(r#", "c2c": {"power_state": 2}"#).contains("power_state"));
    }

    #[test]
    fn processes_must_fit_the_gpus_mig_state() {
        let err = |extra: &str| one_gpu(extra).unwrap_err();
        let plain = one_gpu(
            r#", "processes": [{"pid": 4242, "used_gpu_memory": 1073741824}, {"pid": 4243}]"#,
        )
        .unwrap();
        let p = &plain.gpus[0].processes;
        assert_eq!((p[0].pid, p[0].used_gpu_memory), (4242, Some(1 << 30)));
        assert_eq!((p[1].used_gpu_memory, p[1].gpu_instance_id), (None, None));
        assert!(err(r#", "processes": [{"pid": 1, "memory": 5}]"#).contains("memory"));
        assert!(err(r#", "processes": [{"pid": 0}]"#).starts_with("gpus[0].processes[0].pid"));
        let twice = err(r#", "processes": [{"pid": 7}, {"pid": 7, "used_gpu_memory": 1}]"#);
        assert!(
            twice.contains("processes[1].pid: 7 is listed twice"),
            "{twice}"
        );
        // Instance ids only in MIG mode.
        let e =
            err(r#", "processes": [{"pid": 7, "gpu_instance_id": 7, "compute_instance_id": 0}]"#);
        assert!(
            e.contains("gpu_instance_id: 7 on a GPU not in MIG mode"),
            "{e}"
        );
        let e = err(r#", "processes": [{"pid": 7, "compute_instance_id": 0}]"#);
        assert!(e.contains("compute_instance_id"), "{e}");

        let on_mig = |processes: &str| {
            one_gpu(&format!(
                r#", "mig": {{"current_mode": 1, "pending_mode": 1, "max_devices": 7,
                    "devices": [{MIG_DEVICE}]}}, "processes": [{processes}]"#
            ))
        };
        let ok = on_mig(r#"{"pid": 7, "gpu_instance_id": 7, "compute_instance_id": 0}"#).unwrap();
        assert!(ok.gpus[0].processes[0].runs_in(&ok.gpus[0].mig.as_ref().unwrap().devices[0]));
        assert!(
            on_mig(r#"{"pid": 7}"#)
                .unwrap_err()
                .contains("both required")
        );
        let e =
            on_mig(r#"{"pid": 7, "gpu_instance_id": 8, "compute_instance_id": 0}"#).unwrap_err();
        assert!(e.contains("8 is no GPU instance of mig.devices"), "{e}");
        let e =
            on_mig(r#"{"pid": 7, "gpu_instance_id": 7, "compute_instance_id": 1}"#).unwrap_err();
        assert!(
            e.contains("GPU instance 7 has no compute instance 1"),
            "{e}"
        );
        // MIG off (mode 0): as on a GPU without MIG.
        let off = one_gpu(
            r#", "mig": {"current_mode": 0, "pending_mode": 1, "max_devices": 7},
               "processes": [{"pid": 7, "gpu_instance_id": 7, "compute_instance_id": 0}]"#,
        );
        assert!(off.unwrap_err().contains("not in MIG mode"));
    }

    #[test]
    fn ber_encoding_is_nvmls() {
        // (mantissa << 8) | exponent, BER = mantissa × 10^-exponent.
        assert_eq!(encode_ber(1e-15), (1 << 8) | 15);
        assert_eq!(encode_ber(1.2e-12), (12 << 8) | 13);
        assert_eq!(encode_ber(3e-9), (3 << 8) | 9);
        assert_eq!(encode_ber(0.0), 0);
        assert_eq!(encode_ber(-1.0), 0);
        assert_eq!(encode_ber(15.0), 15 << 8);
        assert_eq!(encode_ber(99.0), 15 << 8);
        // The closest representable value: 1.23e-12 is 12 × 10^-13.
        assert_eq!(encode_ber(1.23e-12), (12 << 8) | 13);
        // Two significant digits fit when they make at most 15; else one: 2.5e-7 is as
        // close to 2e-7 as to 3e-7 (the worst case, 20 % off).
        for ber in [1e-15, 2.5e-7, 7e-3, 1.5, 1.6e-9, 1e-200, 9.9e-254] {
            let back = decode_ber(encode_ber(ber));
            assert!((back - ber).abs() <= ber * 0.2 + 1e-300, "{ber} -> {back}");
        }
        assert_eq!(encode_ber(1.6e-9), (15 << 8) | 10);
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
