//! `fixtures/h200-matrix.json` answers what a real NVIDIA H200 answered
//! (`reference/nvml-matrix-h200.json`, `reference/gpm-h200.json`, parsed here at test
//! time): every field id 1–300 (return code, value type, value, with `scopeId` 0), every
//! call of the matrix that the fake exports (value or error), the idle GPM metrics and
//! violation times.
//!
//! The calls are made raw, through `libloading`, so each one is the C function the matrix
//! names (nvidia-ml-py's helpers resolved to the function they call) and the field values
//! show their `valueType`. Which of the matrix's calls are not checked, and why, is listed
//! in [`NOT_CHECKED`]; a test asserts that the checked and the unchecked calls are exactly
//! the matrix's, so a call the fake starts to export cannot go unchecked unnoticed.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, c_char, c_uint, c_ulonglong};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::Fake;
use libloading::{Library, Symbol};
use nvml_wrapper_sys::bindings::{
    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION, nvmlC2cModeInfo_v1_t, nvmlDevice_t,
    nvmlFieldValue_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t, nvmlMemory_t,
    nvmlPciInfo_t, nvmlProcessInfo_t, nvmlUtilization_t, nvmlViolationTime_t,
};
use serde_json::{Value, json};

const FIXTURE: &str = "h200-matrix.json";

/// `NVML_ERROR_INSUFFICIENT_SIZE`: a process list's size query when there are processes.
const INSUFFICIENT_SIZE: u32 = 7;

/// How a checked call is made and its answer put in the matrix's form.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// `(device, unsigned int *)`; enums and enable states too.
    U32,
    /// `(device, unsigned long long *)`.
    U64,
    /// `(device, char *, unsigned int length)`.
    Text,
    /// `(device, unsigned int *, unsigned int *)`: `[a, b]`.
    Pair,
    /// The first of a pair (`nvmlDeviceGetCurrentEccMode` is `nvmlDeviceGetEccMode[0]`).
    PairFirst,
    /// The second of a pair (`nvmlDeviceGetPendingEccMode`).
    PairSecond,
    /// `nvmlDeviceGetRemappedRows`: four `unsigned int *`.
    Quad,
    /// `(device, nvmlMemory_t *)` (v1).
    Memory,
    /// `(device, nvmlPciInfo_t *)`.
    Pci,
    /// `(device, nvmlUtilization_t *)`.
    Utilization,
    /// `(device, nvmlC2cModeInfo_v1_t *)`.
    C2cMode,
    /// `(device, nvmlDevice_t *)`: a handle, which the matrix only has as an error.
    Handle,
    /// `(device, unsigned int *infoCount, nvmlProcessInfo_t *)`: asked for the count with
    /// a null buffer, then read; a list of `{pid, usedGpuMemory, gpuInstanceId,
    /// computeInstanceId}` (`usedGpuMemory` null when not available, as nvidia-ml-py has
    /// it).
    Processes,
}

/// The matrix's calls that are checked, and how.
const CHECKED: &[(&str, Shape)] = &[
    ("nvmlDeviceGetC2cModeInfoV", Shape::C2cMode),
    ("nvmlDeviceGetC2cModeInfoV1", Shape::C2cMode),
    ("nvmlDeviceGetComputeInstanceId", Shape::U32),
    ("nvmlDeviceGetComputeRunningProcesses", Shape::Processes),
    ("nvmlDeviceGetComputeRunningProcesses_v2", Shape::Processes),
    ("nvmlDeviceGetComputeRunningProcesses_v3", Shape::Processes),
    ("nvmlDeviceGetCurrPcieLinkGeneration", Shape::U32),
    ("nvmlDeviceGetCurrPcieLinkWidth", Shape::U32),
    ("nvmlDeviceGetCurrentClocksEventReasons", Shape::U64),
    ("nvmlDeviceGetCurrentClocksThrottleReasons", Shape::U64),
    ("nvmlDeviceGetCurrentEccMode", Shape::PairFirst),
    ("nvmlDeviceGetDecoderUtilization", Shape::Pair),
    (
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        Shape::Handle,
    ),
    ("nvmlDeviceGetEccMode", Shape::Pair),
    ("nvmlDeviceGetEncoderUtilization", Shape::Pair),
    ("nvmlDeviceGetEnforcedPowerLimit", Shape::U32),
    ("nvmlDeviceGetGpuInstanceId", Shape::U32),
    ("nvmlDeviceGetGpuMaxPcieLinkGeneration", Shape::U32),
    ("nvmlDeviceGetGraphicsRunningProcesses", Shape::Processes),
    ("nvmlDeviceGetGraphicsRunningProcesses_v3", Shape::Processes),
    ("nvmlDeviceGetIndex", Shape::U32),
    ("nvmlDeviceGetMaxMigDeviceCount", Shape::U32),
    ("nvmlDeviceGetMaxPcieLinkGeneration", Shape::U32),
    ("nvmlDeviceGetMaxPcieLinkWidth", Shape::U32),
    ("nvmlDeviceGetMemoryInfo", Shape::Memory),
    ("nvmlDeviceGetMigMode", Shape::Pair),
    ("nvmlDeviceGetMinorNumber", Shape::U32),
    ("nvmlDeviceGetModuleId", Shape::U32),
    ("nvmlDeviceGetName", Shape::Text),
    ("nvmlDeviceGetNumaNodeId", Shape::U32),
    ("nvmlDeviceGetPciInfo", Shape::Pci),
    ("nvmlDeviceGetPciInfo_v3", Shape::Pci),
    ("nvmlDeviceGetPcieLinkMaxSpeed", Shape::U32),
    ("nvmlDeviceGetPcieReplayCounter", Shape::U32),
    ("nvmlDeviceGetPcieSpeed", Shape::U32),
    ("nvmlDeviceGetPendingEccMode", Shape::PairSecond),
    ("nvmlDeviceGetPersistenceMode", Shape::U32),
    ("nvmlDeviceGetPowerManagementLimit", Shape::U32),
    ("nvmlDeviceGetPowerUsage", Shape::U32),
    ("nvmlDeviceGetRemappedRows", Shape::Quad),
    ("nvmlDeviceGetRetiredPagesPendingStatus", Shape::U32),
    ("nvmlDeviceGetSerial", Shape::Text),
    ("nvmlDeviceGetSupportedClocksEventReasons", Shape::U64),
    ("nvmlDeviceGetSupportedClocksThrottleReasons", Shape::U64),
    ("nvmlDeviceGetSupportedEventTypes", Shape::U64),
    ("nvmlDeviceGetTotalEnergyConsumption", Shape::U64),
    ("nvmlDeviceGetUUID", Shape::Text),
    ("nvmlDeviceGetUtilizationRates", Shape::Utilization),
];

/// Why a call of the matrix is not checked. Each reason includes "the fake does not
/// export the C function", which the test verifies: once it does, the call belongs in
/// [`CHECKED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// The fake does not export it (nothing that railscope's tests need).
    NotExported,
    /// A list of processes or sessions (none at idle); not exported.
    Processes,
    /// vGPU and virtualization; not exported.
    Vgpu,
    /// The real driver did not have it either (`FUNCTION_NOT_FOUND`); not exported, so a
    /// caller resolving it finds it missing, as there.
    NotInDriver,
}
use Why::{NotExported, NotInDriver, Processes, Vgpu};

/// The matrix's calls that are not checked.
const NOT_CHECKED: &[(&str, Why)] = &[
    ("nvmlDeviceGetAccountingBufferSize", NotExported),
    ("nvmlDeviceGetAccountingMode", NotExported),
    ("nvmlDeviceGetAccountingPids", Processes),
    ("nvmlDeviceGetActiveVgpus", Vgpu),
    ("nvmlDeviceGetAdaptiveClockInfoStatus", NotExported),
    ("nvmlDeviceGetAddressingMode", NotExported),
    ("nvmlDeviceGetArchitecture", NotExported),
    ("nvmlDeviceGetAttributes", NotExported),
    ("nvmlDeviceGetAttributes_v2", NotExported),
    ("nvmlDeviceGetAutoBoostedClocksEnabled", NotExported),
    ("nvmlDeviceGetBAR1MemoryInfo", NotExported),
    ("nvmlDeviceGetBBXTimeData_v1", NotInDriver),
    ("nvmlDeviceGetBoardId", NotExported),
    ("nvmlDeviceGetBoardPartNumber", NotExported),
    ("nvmlDeviceGetBrand", NotExported),
    ("nvmlDeviceGetBridgeChipInfo", NotExported),
    ("nvmlDeviceGetBusType", NotExported),
    ("nvmlDeviceGetClkMonStatus", NotExported),
    ("nvmlDeviceGetComputeMode", NotExported),
    ("nvmlDeviceGetConfComputeGpuCertificate", NotExported),
    ("nvmlDeviceGetConfComputeMemSizeInfo", NotExported),
    ("nvmlDeviceGetConfComputeProtectedMemoryUsage", NotExported),
    ("nvmlDeviceGetCoolerInfo", NotExported),
    ("nvmlDeviceGetCreatableVgpus", Vgpu),
    ("nvmlDeviceGetCudaComputeCapability", NotExported),
    ("nvmlDeviceGetCurrentClockFreqs", NotExported),
    ("nvmlDeviceGetCurrentDramEncryptionMode", NotExported),
    ("nvmlDeviceGetCurrentDriverModel", NotExported),
    ("nvmlDeviceGetCurrentGpuOperationMode", NotExported),
    ("nvmlDeviceGetDefaultEccMode", NotExported),
    ("nvmlDeviceGetDisplayActive", NotExported),
    ("nvmlDeviceGetDisplayMode", NotExported),
    ("nvmlDeviceGetDramEncryptionMode", NotExported),
    ("nvmlDeviceGetDriverModel", NotExported),
    ("nvmlDeviceGetDriverModel_v1", NotExported),
    ("nvmlDeviceGetDriverModel_v2", NotExported),
    ("nvmlDeviceGetDynamicPstatesInfo", NotExported),
    ("nvmlDeviceGetEncoderSessions", Processes),
    ("nvmlDeviceGetEncoderStats", NotExported),
    ("nvmlDeviceGetFBCSessions", Processes),
    ("nvmlDeviceGetFBCStats", NotExported),
    ("nvmlDeviceGetFanSpeed", NotExported),
    ("nvmlDeviceGetFanSpeedRPM", NotExported),
    ("nvmlDeviceGetGpcClkMinMaxVfOffset", NotExported),
    ("nvmlDeviceGetGpcClkVfOffset", NotExported),
    ("nvmlDeviceGetGpuOperationMode", NotExported),
    ("nvmlDeviceGetGraphicsRunningProcesses_v2", Processes),
    ("nvmlDeviceGetGridLicensableFeatures", Vgpu),
    ("nvmlDeviceGetGridLicensableFeatures_v4", Vgpu),
    ("nvmlDeviceGetGspFirmwareMode", NotExported),
    ("nvmlDeviceGetGspFirmwareVersion", NotExported),
    ("nvmlDeviceGetHostVgpuMode", Vgpu),
    ("nvmlDeviceGetHostname_v1", NotExported),
    ("nvmlDeviceGetInforomConfigurationChecksum", NotExported),
    ("nvmlDeviceGetInforomImageVersion", NotExported),
    ("nvmlDeviceGetIrqNum", NotExported),
    ("nvmlDeviceGetJpgUtilization", NotExported),
    ("nvmlDeviceGetLastBBXFlushTime", NotExported),
    ("nvmlDeviceGetMPSComputeRunningProcesses", Processes),
    ("nvmlDeviceGetMPSComputeRunningProcesses_v2", Processes),
    ("nvmlDeviceGetMPSComputeRunningProcesses_v3", Processes),
    ("nvmlDeviceGetMarginTemperature", NotExported),
    ("nvmlDeviceGetMemClkMinMaxVfOffset", NotExported),
    ("nvmlDeviceGetMemClkVfOffset", NotExported),
    ("nvmlDeviceGetMemoryBusWidth", NotExported),
    ("nvmlDeviceGetMinMaxFanSpeed", NotExported),
    ("nvmlDeviceGetMultiGpuBoard", NotExported),
    ("nvmlDeviceGetNumFans", NotExported),
    ("nvmlDeviceGetNumGpuCores", NotExported),
    ("nvmlDeviceGetOfaUtilization", NotExported),
    ("nvmlDeviceGetPdi", NotExported),
    ("nvmlDeviceGetPendingDramEncryptionMode", NotExported),
    ("nvmlDeviceGetPendingDriverModel", NotExported),
    ("nvmlDeviceGetPendingGpuOperationMode", NotExported),
    ("nvmlDeviceGetPerformanceModes", NotExported),
    ("nvmlDeviceGetPerformanceState", NotExported),
    ("nvmlDeviceGetPgpuMetadataString", Vgpu),
    ("nvmlDeviceGetPowerManagementDefaultLimit", NotExported),
    ("nvmlDeviceGetPowerManagementLimitConstraints", NotExported),
    ("nvmlDeviceGetPowerManagementMode", NotExported),
    ("nvmlDeviceGetPowerSource", NotExported),
    ("nvmlDeviceGetPowerState", NotExported),
    ("nvmlDeviceGetRepairStatus", NotExported),
    ("nvmlDeviceGetRowRemapperHistogram", NotExported),
    ("nvmlDeviceGetSupportedMemoryClocks", NotExported),
    ("nvmlDeviceGetSupportedPerformanceStates", NotExported),
    ("nvmlDeviceGetSupportedVgpus", Vgpu),
    ("nvmlDeviceGetUnrepairableMemoryFlag_v1", NotExported),
    ("nvmlDeviceGetVbiosVersion", NotExported),
    ("nvmlDeviceGetVgpuHeterogeneousMode", Vgpu),
    ("nvmlDeviceGetVgpuMetadata", Vgpu),
    ("nvmlDeviceGetVgpuSchedulerCapabilities", Vgpu),
    ("nvmlDeviceGetVgpuSchedulerLog", Vgpu),
    ("nvmlDeviceGetVgpuSchedulerState", Vgpu),
    ("nvmlDeviceGetVirtualizationMode", Vgpu),
];

/// nvidia-ml-py functions of the matrix that call a C function of another name.
const C_FUNCTION: &[(&str, &str)] = &[
    ("nvmlDeviceGetC2cModeInfoV1", "nvmlDeviceGetC2cModeInfoV"),
    ("nvmlDeviceGetCurrentEccMode", "nvmlDeviceGetEccMode"),
    ("nvmlDeviceGetPendingEccMode", "nvmlDeviceGetEccMode"),
    ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"),
    ("nvmlDeviceGetAttributes", "nvmlDeviceGetAttributes_v2"),
    (
        "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetComputeRunningProcesses_v3",
    ),
    (
        "nvmlDeviceGetCurrentDramEncryptionMode",
        "nvmlDeviceGetDramEncryptionMode",
    ),
    (
        "nvmlDeviceGetCurrentDriverModel",
        "nvmlDeviceGetDriverModel",
    ),
    (
        "nvmlDeviceGetCurrentGpuOperationMode",
        "nvmlDeviceGetGpuOperationMode",
    ),
    (
        "nvmlDeviceGetGraphicsRunningProcesses",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    ),
    (
        "nvmlDeviceGetGridLicensableFeatures",
        "nvmlDeviceGetGridLicensableFeatures_v4",
    ),
    (
        "nvmlDeviceGetMPSComputeRunningProcesses",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
    ),
    (
        "nvmlDeviceGetPendingDramEncryptionMode",
        "nvmlDeviceGetDramEncryptionMode",
    ),
    (
        "nvmlDeviceGetPendingDriverModel",
        "nvmlDeviceGetDriverModel",
    ),
    (
        "nvmlDeviceGetPendingGpuOperationMode",
        "nvmlDeviceGetGpuOperationMode",
    ),
];

/// Checked calls whose answer the fake fixes in its code, where it differs from the real
/// H200's and no fixture key can change it: `(call, the H200's answer, the fake's)`. The
/// test asserts that exactly these differ, as written here.
const KNOWN_DIFFERENCES: &[(&str, &str, &str)] = &[
    // The sampling period is a constant of the fake (167 000 µs); the H200 reported
    // 100 000 µs for the encoder, decoder, JPEG and OFA alike.
    (
        "nvmlDeviceGetDecoderUtilization",
        "[0,100000]",
        "[0,167000]",
    ),
    (
        "nvmlDeviceGetEncoderUtilization",
        "[0,100000]",
        "[0,167000]",
    ),
    // The driver answers an `NVML_PCIE_LINK_MAX_SPEED_*` value (5 = 32000 MBPS, what
    // nvml-wrapper's `max_pcie_link_speed` decodes); the fake answers the MT/s themselves.
    ("nvmlDeviceGetPcieLinkMaxSpeed", "5", "32000"),
    // The fake's supported event mask is a constant (ECC single and double bit, P-state,
    // XID, clock: 0x1F); the H200 reported 0xFF9F.
    ("nvmlDeviceGetSupportedEventTypes", "65439", "31"),
];

/// The C function an nvidia-ml-py function of the matrix calls.
fn c_function(call: &str) -> &str {
    C_FUNCTION
        .iter()
        .find(|(py, _)| *py == call)
        .map_or(call, |(_, c)| c)
}

/// The NVML return code of an nvidia-ml-py error class (`NVMLError_NotSupported`).
fn error_code(text: &str) -> u32 {
    let class = text
        .strip_prefix("ERR:NVMLError_")
        .and_then(|t| t.split(':').next())
        .unwrap_or_else(|| panic!("{text:?} is not an NVML error"));
    match class {
        "Uninitialized" => 1,
        "InvalidArgument" => 2,
        "NotSupported" => 3,
        "NoPermission" => 4,
        "NotFound" => 6,
        "InsufficientSize" => 7,
        "FunctionNotFound" => 13,
        "GpuIsLost" => 15,
        "NoData" => 21,
        "NotReady" => 27,
        "Unknown" => 999,
        other => panic!("NVML error class {other:?} has no code here"),
    }
}

/// What the matrix says a call answered: a value in nvidia-ml-py's form, or a code.
fn expected(answer: &Value) -> Result<Value, u32> {
    match answer.as_str() {
        Some(text) if text.starts_with("ERR:") => Err(error_code(text)),
        _ => Ok(answer.clone()),
    }
}

fn reference_dir() -> PathBuf {
    nvidia_ml_fake::fixtures_dir().join("../reference")
}

fn reference(name: &str) -> Value {
    let path = reference_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The fake, initialised, with GPU 0's handle, called raw.
struct Raw {
    lib: Library,
    device: nvmlDevice_t,
    _fake: Fake,
}

impl Raw {
    fn new() -> Self {
        let fake = Fake::shipped(FIXTURE);
        // SAFETY: our own test library; the same copy `fake` loaded and pointed at the
        // fixture (dlopen of one path gives one instance).
        let lib = unsafe { Library::new(&fake.lib_path) }.unwrap();
        let mut raw = Self {
            lib,
            device: std::ptr::null_mut(),
            _fake: fake,
        };
        // SAFETY: the NVML signatures.
        unsafe {
            let init: Symbol<unsafe extern "C" fn() -> u32> = raw.sym("nvmlInit_v2");
            assert_eq!(init(), 0);
            let by_index: Symbol<unsafe extern "C" fn(c_uint, *mut nvmlDevice_t) -> u32> =
                raw.sym("nvmlDeviceGetHandleByIndex_v2");
            let mut device = std::ptr::null_mut();
            assert_eq!(by_index(0, &mut device), 0);
            raw.device = device;
        }
        raw
    }

    fn exports(&self, name: &str) -> bool {
        let symbol = format!("{name}\0");
        // SAFETY: only resolving, not calling.
        unsafe { self.lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_ok()
    }

    /// # Safety
    /// `T` must be the function's C signature.
    unsafe fn sym<T>(&self, name: &str) -> Symbol<'_, T> {
        let symbol = format!("{name}\0");
        // SAFETY: the caller's.
        unsafe { self.lib.get(symbol.as_bytes()) }.unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Calls `function` as `shape` says and returns its answer in nvidia-ml-py's form.
    fn call(&self, function: &str, shape: Shape) -> Result<Value, u32> {
        type Out<T> = unsafe extern "C" fn(nvmlDevice_t, *mut T) -> u32;
        fn ok(rc: u32, v: Value) -> Result<Value, u32> {
            if rc == 0 { Ok(v) } else { Err(rc) }
        }
        let d = self.device;
        // SAFETY: each shape is the C signature of the functions listed with it in
        // CHECKED (nvml.h); every out-pointer points at a local of the right type.
        unsafe {
            match shape {
                Shape::U32 => {
                    let mut v: c_uint = 0;
                    let rc = self.sym::<Out<c_uint>>(function)(d, &mut v);
                    ok(rc, json!(v))
                }
                Shape::U64 => {
                    let mut v: c_ulonglong = 0;
                    let rc = self.sym::<Out<c_ulonglong>>(function)(d, &mut v);
                    ok(rc, json!(v))
                }
                Shape::Text => {
                    let mut buf = [0 as c_char; 96];
                    let f = self
                        .sym::<unsafe extern "C" fn(nvmlDevice_t, *mut c_char, c_uint) -> u32>(
                            function,
                        );
                    let rc = f(d, buf.as_mut_ptr(), buf.len() as c_uint);
                    let text = CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned();
                    ok(rc, json!(text))
                }
                Shape::Pair | Shape::PairFirst | Shape::PairSecond => {
                    let (mut a, mut b): (c_uint, c_uint) = (0, 0);
                    let f = self
                        .sym::<unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut c_uint) -> u32>(
                            function,
                        );
                    let rc = f(d, &mut a, &mut b);
                    ok(
                        rc,
                        match shape {
                            Shape::PairFirst => json!(a),
                            Shape::PairSecond => json!(b),
                            _ => json!([a, b]),
                        },
                    )
                }
                Shape::Quad => {
                    let mut v = [0 as c_uint; 4];
                    let [a, b, c, e] = &mut v;
                    type F = unsafe extern "C" fn(
                        nvmlDevice_t,
                        *mut c_uint,
                        *mut c_uint,
                        *mut c_uint,
                        *mut c_uint,
                    ) -> u32;
                    let rc = self.sym::<F>(function)(d, a, b, c, e);
                    ok(rc, json!(v))
                }
                Shape::Memory => {
                    let mut m: nvmlMemory_t = std::mem::zeroed();
                    let rc = self.sym::<Out<nvmlMemory_t>>(function)(d, &mut m);
                    ok(
                        rc,
                        json!({"total": m.total, "free": m.free, "used": m.used}),
                    )
                }
                Shape::Pci => {
                    let mut p: nvmlPciInfo_t = std::mem::zeroed();
                    let rc = self.sym::<Out<nvmlPciInfo_t>>(function)(d, &mut p);
                    let text =
                        |s: &[c_char]| CStr::from_ptr(s.as_ptr()).to_string_lossy().into_owned();
                    ok(
                        rc,
                        json!({
                            "busIdLegacy": text(&p.busIdLegacy),
                            "domain": p.domain,
                            "bus": p.bus,
                            "device": p.device,
                            "pciDeviceId": p.pciDeviceId,
                            "pciSubSystemId": p.pciSubSystemId,
                            "busId": text(&p.busId),
                        }),
                    )
                }
                Shape::Utilization => {
                    let mut u: nvmlUtilization_t = std::mem::zeroed();
                    let rc = self.sym::<Out<nvmlUtilization_t>>(function)(d, &mut u);
                    ok(rc, json!({"gpu": u.gpu, "memory": u.memory}))
                }
                Shape::C2cMode => {
                    let mut c: nvmlC2cModeInfo_v1_t = std::mem::zeroed();
                    let rc = self.sym::<Out<nvmlC2cModeInfo_v1_t>>(function)(d, &mut c);
                    ok(rc, json!({"isC2cEnabled": c.isC2cEnabled}))
                }
                Shape::Handle => {
                    let mut h: nvmlDevice_t = std::ptr::null_mut();
                    let rc = self.sym::<Out<nvmlDevice_t>>(function)(d, &mut h);
                    ok(rc, json!("a device handle"))
                }
                Shape::Processes => {
                    type F = unsafe extern "C" fn(
                        nvmlDevice_t,
                        *mut c_uint,
                        *mut nvmlProcessInfo_t,
                    ) -> u32;
                    let f = self.sym::<F>(function);
                    let mut count: c_uint = 0;
                    let rc = f(d, &mut count, std::ptr::null_mut());
                    if rc != 0 && rc != INSUFFICIENT_SIZE {
                        return Err(rc);
                    }
                    let mut infos: Vec<nvmlProcessInfo_t> =
                        vec![std::mem::zeroed(); count as usize];
                    let rc = if count == 0 {
                        rc
                    } else {
                        f(d, &mut count, infos.as_mut_ptr())
                    };
                    infos.truncate(count as usize);
                    let list: Vec<Value> = infos
                        .iter()
                        .map(|p| {
                            let memory = (p.usedGpuMemory != u64::MAX).then_some(p.usedGpuMemory);
                            json!({
                                "pid": p.pid,
                                "usedGpuMemory": memory,
                                "gpuInstanceId": p.gpuInstanceId,
                                "computeInstanceId": p.computeInstanceId,
                            })
                        })
                        .collect();
                    ok(rc, json!(list))
                }
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: no arguments.
        unsafe {
            let shutdown: Symbol<unsafe extern "C" fn() -> u32> = self.sym("nvmlShutdown");
            shutdown();
        }
    }
}

#[test]
fn every_call_of_the_matrix_is_checked_or_listed_with_a_reason() {
    let matrix = reference("nvml-matrix-h200.json");
    let calls: BTreeSet<&str> = matrix["calls"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let checked: BTreeSet<&str> = CHECKED.iter().map(|(c, _)| *c).collect();
    let unchecked: BTreeSet<&str> = NOT_CHECKED.iter().map(|(c, _)| *c).collect();
    assert_eq!(checked.len(), CHECKED.len(), "CHECKED lists a call twice");
    assert_eq!(
        unchecked.len(),
        NOT_CHECKED.len(),
        "NOT_CHECKED lists a call twice"
    );
    let both: Vec<_> = checked.intersection(&unchecked).collect();
    assert!(
        both.is_empty(),
        "checked and listed as not checked: {both:?}"
    );
    let difference: BTreeSet<&str> = calls.difference(&checked).copied().collect();
    assert_eq!(
        unchecked, difference,
        "NOT_CHECKED must be exactly the matrix's calls less CHECKED"
    );

    let raw = Raw::new();
    for (call, _) in CHECKED {
        let function = c_function(call);
        assert!(
            raw.exports(function),
            "{call}: the fake does not export {function}"
        );
    }
    for (call, why) in NOT_CHECKED {
        let function = c_function(call);
        assert!(
            !raw.exports(function),
            "{call} ({why:?}): the fake exports {function} now; check it (move it to CHECKED)"
        );
        if *why == NotInDriver {
            assert_eq!(expected(&matrix["calls"][call]), Err(13), "{call}");
        }
    }
}

#[test]
fn every_exported_call_answers_what_the_h200_answered() {
    let matrix = reference("nvml-matrix-h200.json");
    let raw = Raw::new();
    let mut differences = BTreeMap::new();
    for (call, shape) in CHECKED {
        let want = expected(&matrix["calls"][call]);
        let got = raw.call(c_function(call), *shape);
        if got != want {
            let show = |r: &Result<Value, u32>| match r {
                Ok(v) => v.to_string(),
                Err(code) => format!("error {code}"),
            };
            differences.insert(*call, (show(&want), show(&got)));
        }
    }
    let known: BTreeMap<&str, (String, String)> = KNOWN_DIFFERENCES
        .iter()
        .map(|(c, want, got)| (*c, ((*want).to_owned(), (*got).to_owned())))
        .collect();
    assert_eq!(
        differences, known,
        "calls whose answer differs from the H200's (call: (H200, fake))"
    );
}

#[test]
fn every_field_id_answers_what_the_h200_answered() {
    let matrix = reference("nvml-matrix-h200.json");
    let raw = Raw::new();
    let mut values: Vec<nvmlFieldValue_t> = (1..=300)
        .map(|id| {
            // SAFETY: plain old data; all-zero is a valid value.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v.scopeId = 0;
            v
        })
        .collect();
    // SAFETY: the C signature; `values` holds `len` initialised entries.
    let rc = unsafe {
        let f: Symbol<unsafe extern "C" fn(nvmlDevice_t, i32, *mut nvmlFieldValue_t) -> u32> =
            raw.sym("nvmlDeviceGetFieldValues");
        f(raw.device, values.len() as i32, values.as_mut_ptr())
    };
    assert_eq!(rc, 0);
    let mut wrong = Vec::new();
    for v in &values {
        let want = &matrix["fields"][v.fieldId.to_string()];
        let ret = want["ret"].as_u64().unwrap();
        if u64::from(v.nvmlReturn) != ret {
            wrong.push(format!("{}: ret {} (H200 {ret})", v.fieldId, v.nvmlReturn));
            continue;
        }
        if ret != 0 {
            continue;
        }
        let kind = want["type"].as_u64().unwrap();
        if u64::from(v.valueType) != kind {
            wrong.push(format!(
                "{}: valueType {} (H200 {kind})",
                v.fieldId, v.valueType
            ));
            continue;
        }
        let w = &want["value"];
        // SAFETY: the union member read is the one `valueType` names.
        let same = unsafe {
            match kind {
                0 => Some(v.value.dVal) == w["dVal"].as_f64(),
                1 => Some(u64::from(v.value.uiVal)) == w["uiVal"].as_u64(),
                2 => Some(v.value.ulVal) == w["ulVal"].as_u64(),
                3 => Some(v.value.ullVal) == w["ullVal"].as_u64(),
                4 => Some(v.value.sllVal) == w["sllVal"].as_i64(),
                5 => Some(i64::from(v.value.siVal)) == w["siVal"].as_i64(),
                6 => Some(u64::from(v.value.usVal)) == w["usVal"].as_u64(),
                _ => false,
            }
        };
        if !same {
            wrong.push(format!("{}: value differs from the H200's {w}", v.fieldId));
        }
    }
    assert!(
        wrong.is_empty(),
        "field ids that differ:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn gpm_answers_the_idle_metrics_the_h200_answered() {
    let gpm = reference("gpm-h200.json");
    let idle: BTreeMap<u32, f64> = gpm["idle"]["gpm"]["metrics"]
        .as_object()
        .unwrap()
        .values()
        .filter(|m| m["ret"] == 0)
        .map(|m| {
            (
                m["id"].as_u64().unwrap() as u32,
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let asked: Vec<u32> = gpm["idle"]["gpm"]["metrics"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m["id"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(idle.len(), 181);

    let raw = Raw::new();
    // SAFETY: the C signatures (nvml.h); every pointer points at a local of its type.
    let answered = unsafe {
        let mut support: nvmlGpmSupport_t = std::mem::zeroed();
        support.version = NVML_GPM_SUPPORT_VERSION;
        let query: Symbol<unsafe extern "C" fn(nvmlDevice_t, *mut nvmlGpmSupport_t) -> u32> =
            raw.sym("nvmlGpmQueryDeviceSupport");
        assert_eq!(query(raw.device, &mut support), 0);
        assert_eq!(
            u64::from(support.isSupportedDevice),
            gpm["gpm_supported"].as_u64().unwrap()
        );
        let alloc: Symbol<unsafe extern "C" fn(*mut nvmlGpmSample_t) -> u32> =
            raw.sym("nvmlGpmSampleAlloc");
        let get: Symbol<unsafe extern "C" fn(nvmlDevice_t, nvmlGpmSample_t) -> u32> =
            raw.sym("nvmlGpmSampleGet");
        let metrics_get: Symbol<unsafe extern "C" fn(*mut nvmlGpmMetricsGet_t) -> u32> =
            raw.sym("nvmlGpmMetricsGet");
        let free: Symbol<unsafe extern "C" fn(nvmlGpmSample_t) -> u32> =
            raw.sym("nvmlGpmSampleFree");
        let (mut s1, mut s2) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(alloc(&mut s1), 0);
        assert_eq!(alloc(&mut s2), 0);
        assert_eq!(get(raw.device, s1), 0);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(get(raw.device, s2), 0);
        let mut answered = BTreeMap::new();
        // The request holds at most 210 metrics; the H200 was asked 302 ids.
        let mut request: Box<nvmlGpmMetricsGet_t> = Box::new(std::mem::zeroed());
        for chunk in asked.chunks(request.metrics.len()) {
            *request = std::mem::zeroed();
            request.version = NVML_GPM_METRICS_GET_VERSION;
            request.numMetrics = chunk.len() as c_uint;
            request.sample1 = s1;
            request.sample2 = s2;
            for (m, id) in request.metrics.iter_mut().zip(chunk) {
                m.metricId = *id;
            }
            assert_eq!(metrics_get(&mut *request), 0);
            for m in &request.metrics[..chunk.len()] {
                if m.nvmlReturn == 0 {
                    answered.insert(m.metricId, m.value);
                }
            }
        }
        assert_eq!(free(s1), 0);
        assert_eq!(free(s2), 0);
        answered
    };
    assert_eq!(
        answered.keys().collect::<Vec<_>>(),
        idle.keys().collect::<Vec<_>>(),
        "the metric ids that answer"
    );
    for (id, want) in &idle {
        let got = answered[id];
        assert!(
            (got - want).abs() <= want.abs() * 1e-9,
            "metric {id}: {got} (H200 idle {want})"
        );
    }
}

#[test]
fn violation_status_answers_the_idle_times() {
    let gpm = reference("gpm-h200.json");
    let raw = Raw::new();
    let policies = [
        ("NVML_PERF_POLICY_POWER", 0),
        ("NVML_PERF_POLICY_THERMAL", 1),
        ("NVML_PERF_POLICY_SYNC_BOOST", 2),
        ("NVML_PERF_POLICY_BOARD_LIMIT", 3),
        ("NVML_PERF_POLICY_LOW_UTILIZATION", 4),
        ("NVML_PERF_POLICY_RELIABILITY", 5),
        ("NVML_PERF_POLICY_TOTAL_APP_CLOCKS", 10),
        ("NVML_PERF_POLICY_TOTAL_BASE_CLOCKS", 11),
    ];
    let idle = gpm["idle"]["violations"].as_object().unwrap();
    assert_eq!(idle.len(), policies.len());
    for (name, policy) in policies {
        let mut t: nvmlViolationTime_t = nvmlViolationTime_t {
            referenceTime: 0,
            violationTime: 0,
        };
        // SAFETY: the C signature; `t` is one nvmlViolationTime_t.
        let rc = unsafe {
            let f: Symbol<
                unsafe extern "C" fn(nvmlDevice_t, c_uint, *mut nvmlViolationTime_t) -> u32,
            > = raw.sym("nvmlDeviceGetViolationStatus");
            f(raw.device, policy, &mut t)
        };
        assert_eq!(rc, 0, "{name}");
        assert_eq!(
            t.violationTime,
            idle[name]["violation_time"].as_u64().unwrap(),
            "{name}"
        );
        assert!(t.referenceTime > 0, "{name}");
    }
}

#[test]
fn fixture_is_fast_and_is_what_its_script_writes() {
    assert_eq!(
        common::shipped(FIXTURE).costs,
        None,
        "h200-matrix has no costs"
    );
    let script = nvidia_ml_fake::fixtures_dir().join("generate-h200-matrix.py");
    let mut command = Command::new("python3");
    command.arg(script).arg("--check");
    // Where the project's shared reference lies beside the checkout, the copies must be
    // verbatim.
    let shared = nvidia_ml_fake::fixtures_dir().join("../../../../shared/reference/h200-nvml");
    if shared.join("nvml-matrix-h200.json").is_file() {
        command.arg("--reference").arg(&shared);
    }
    let out = command.output().expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
