//! The exported NVML C functions.
//!
//! Signatures are those of `nvml.h` as bound by `nvml-wrapper-sys` 0.10 (whose types are
//! used, so layouts match the consumer's). Every function:
//! * runs inside [`guard`]: a panic becomes `NVML_ERROR_UNKNOWN`, never an unwind across C;
//! * answers `NVML_ERROR_UNINITIALIZED` before `nvmlInit*` (except `nvmlErrorString`);
//! * answers `NVML_ERROR_INVALID_ARGUMENT` for a null output pointer, an unknown handle,
//!   event set or GPM sample, a MIG device handle where the call takes none (see the MIG
//!   section), or an out-of-range enum or link;
//! * for a device: sleeps its `hang_ms`, then answers `GPU_IS_LOST` if it is `lost`, then
//!   pays the call's cost (when costs are on, [`crate::costs`]), then answers
//!   `NOT_SUPPORTED` (or the fixture's code) for an unsupported feature;
//! * names itself to [`state::pay`] (or [`state::with_gpu`]) with its exported name, so the
//!   deprecated and current names of one function are priced separately.
//!
//! # Safety
//!
//! The C callers' contract is NVML's: every non-null pointer points to memory valid for
//! the size NVML documents (a `length`-byte buffer, `cpuSetSize` words, `valuesCount`
//! field values, one struct otherwise). Null pointers are checked, never dereferenced.

// Patterns match on the NVML enum constants under the names bindgen gives them.
#![allow(non_upper_case_globals)]

use std::ffi::{CStr, OsStr, c_char, c_int, c_uint, c_ulong, c_ulonglong};
use std::os::unix::ffi::OsStrExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nvml_wrapper_sys::bindings::*;

use crate::fixture::{
    C2c, Feature, FieldType, Fixture, Gpm, Gpu, Memory, NvLink, Pci, Process, RemoteKind,
    encode_ber, parse_bus_id, parse_cpulist, parse_uuid,
};
use crate::gpm::{self, Scope};
use crate::state::{self, Device, Ret};

const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
const INVALID_ARGUMENT: Ret = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
const NOT_SUPPORTED: Ret = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
const NOT_FOUND: Ret = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
const INSUFFICIENT_SIZE: Ret = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const TIMEOUT: Ret = nvmlReturn_enum_NVML_ERROR_TIMEOUT;
const VERSION_MISMATCH: Ret = nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
const UNKNOWN: Ret = nvmlReturn_enum_NVML_ERROR_UNKNOWN;

/// Event types `nvmlDeviceGetSupportedEventTypes` reports (only XIDs are ever delivered).
const SUPPORTED_EVENTS: u64 = (nvmlEventTypeSingleBitEccError
    | nvmlEventTypeDoubleBitEccError
    | nvmlEventTypePState
    | nvmlEventTypeXidCriticalError
    | nvmlEventTypeClock) as u64;
const XID_EVENT: u64 = nvmlEventTypeXidCriticalError as u64;

/// `scopeId` meaning "all links" for the NVLink throughput fields.
const ALL_LINKS: u32 = u32::MAX;

/// Runs one exported call: maps `Ok` to `NVML_SUCCESS`, `Err(code)` to `code` and a panic
/// to `NVML_ERROR_UNKNOWN`, so no unwind ever crosses the C ABI.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Ret>) -> nvmlReturn_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => UNKNOWN,
    }
}

/// Writes `value` through an output pointer.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, value: T) -> Result<(), Ret> {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and valid for writes per this function's contract.
    unsafe { p.write(value) };
    Ok(())
}

/// Copies `s` and a NUL into a caller's buffer; `INSUFFICIENT_SIZE` when it does not fit.
///
/// # Safety
/// `buf` is null or valid for `len` bytes of writes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), Ret> {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: `buf` holds `len` ≥ s.len() + 1 bytes per the contract; the source is a
    // distinct Rust string, so the ranges do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}

/// The fixture's answer for `feature`: its error code, `NOT_SUPPORTED`, or `Ok`.
fn check(gpu: &Gpu, feature: Feature) -> Result<(), Ret> {
    if let Some(code) = gpu.errors.get(&feature) {
        return Err(*code);
    }
    if gpu.not_supported.contains(&feature) {
        return Err(NOT_SUPPORTED);
    }
    Ok(())
}

/// `check`, then the value itself (absent: `NOT_SUPPORTED`).
fn value<T: Clone>(gpu: &Gpu, feature: Feature, v: Option<&T>) -> Result<T, Ret> {
    check(gpu, feature)?;
    v.cloned().ok_or(NOT_SUPPORTED)
}

/// The GPU's links, `NOT_SUPPORTED` for a GPU without NVLink.
fn links(gpu: &Gpu) -> Result<&[NvLink], Ret> {
    check(gpu, Feature::Nvlink)?;
    if gpu.nvlinks.is_empty() {
        return Err(NOT_SUPPORTED);
    }
    Ok(&gpu.nvlinks)
}

fn link(gpu: &Gpu, link: c_uint) -> Result<&NvLink, Ret> {
    links(gpu)?.get(link as usize).ok_or(INVALID_ARGUMENT)
}

fn c_chars<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

fn pci_info(pci_bus_id: &str, device_id: u32, subsystem_id: u32) -> Result<nvmlPciInfo_t, Ret> {
    let id = parse_bus_id(pci_bus_id).map_err(|_| UNKNOWN)?;
    let legacy = format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        id.domain, id.bus, id.device, id.function
    );
    Ok(nvmlPciInfo_t {
        busIdLegacy: c_chars(&legacy),
        domain: id.domain,
        bus: id.bus,
        device: id.device,
        pciDeviceId: device_id,
        pciSubSystemId: subsystem_id,
        busId: c_chars(pci_bus_id),
    })
}

fn gpu_pci(pci: &Pci) -> Result<nvmlPciInfo_t, Ret> {
    pci_info(&pci.bus_id, pci.device_id, pci.subsystem_id)
}

fn pcie_mts(generation: u32) -> Option<u32> {
    match generation {
        1 => Some(2500),
        2 => Some(5000),
        3 => Some(8000),
        4 => Some(16000),
        5 => Some(32000),
        6 => Some(64000),
        _ => None,
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Looks up a device by a predicate and applies its hang, loss and cost like any device
/// call (`call`).
fn find_device(
    call: &'static str,
    device: *mut nvmlDevice_t,
    matches: impl Fn(&Gpu) -> bool,
) -> Result<(), Ret> {
    let fixture = state::snapshot()?;
    let index = fixture.gpus.iter().position(matches).ok_or(NOT_FOUND)?;
    state::gate(&fixture.gpus[index])?;
    state::pay(call);
    // SAFETY: NVML contract (module docs): null or one writable nvmlDevice_t.
    unsafe { put(device, state::handle(index)) }
}

// ---------------------------------------------------------------------------------------
// Library and system

/// `nvmlReturn_t nvmlInit_v2(void)`: loads the fixture; fails with its `init_error`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guard(|| state::init("nvmlInit_v2"))
}

/// `nvmlReturn_t nvmlInit(void)`: the v1 name of `nvmlInit_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> nvmlReturn_t {
    guard(|| state::init("nvmlInit"))
}

/// `nvmlReturn_t nvmlInitWithFlags(unsigned int flags)`: flags are accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    guard(|| state::init("nvmlInitWithFlags"))
}

/// `nvmlReturn_t nvmlShutdown(void)`: never hangs (a test's `Drop` must finish).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guard(state::shutdown)
}

/// `const char *nvmlErrorString(nvmlReturn_t result)`: a static string for every code.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    state::pay("nvmlErrorString");
    error_string(result).as_ptr()
}

/// NVML's messages for its return codes.
pub(crate) fn error_string(result: nvmlReturn_t) -> &'static CStr {
    match result {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt Request Issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires restart",
        17 => c"The operating system has blocked the request.",
        18 => c"RM has detected an NVML/RM version mismatch.",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vgpu operation is not available on target device, because ECC is enabled",
        23 => c"Insufficient resources",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        30 => c"Reset type not supported",
        _ => c"Unknown Error",
    }
}

/// `nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        state::pay("nvmlSystemGetDriverVersion");
        // SAFETY: NVML contract (module docs): `length` writable bytes.
        unsafe { put_str(version, length, &fixture.driver_version) }
    })
}

/// `nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        state::pay("nvmlSystemGetNVMLVersion");
        // SAFETY: NVML contract (module docs): `length` writable bytes.
        unsafe { put_str(version, length, &fixture.nvml_version) }
    })
}

/// Both names of the CUDA driver version getter (`call`).
///
/// # Safety
/// `version` is null or valid for one write.
unsafe fn cuda_driver_version(call: &'static str, version: *mut c_int) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        state::pay(call);
        // SAFETY: per this function's contract.
        unsafe { put(version, fixture.cuda_driver_version) }
    })
}

/// `nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { cuda_driver_version("nvmlSystemGetCudaDriverVersion_v2", version) }
}

/// `nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { cuda_driver_version("nvmlSystemGetCudaDriverVersion", version) }
}

// ---------------------------------------------------------------------------------------
// Enumeration and identity

/// Both names of the device count (`call`): lost and hung GPUs are counted.
///
/// # Safety
/// `count` is null or valid for one write.
unsafe fn device_count(call: &'static str, count: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        state::pay(call);
        let n = c_uint::try_from(fixture.gpus.len()).map_err(|_| UNKNOWN)?;
        // SAFETY: per this function's contract.
        unsafe { put(count, n) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)`: lost and hung GPUs
/// are counted.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { device_count("nvmlDeviceGetCount_v2", count) }
}

/// `nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)`: the v1 name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { device_count("nvmlDeviceGetCount", count) }
}

/// Both names of the handle-by-index lookup (`call`): hangs and fails like any call on
/// that GPU.
///
/// # Safety
/// `device` is null or valid for one write.
unsafe fn handle_by_index(
    call: &'static str,
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        let gpu = fixture.gpus.get(index as usize).ok_or(INVALID_ARGUMENT)?;
        state::gate(gpu)?;
        state::pay(call);
        // SAFETY: per this function's contract.
        unsafe { put(device, state::handle(index as usize)) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)`:
/// hangs and fails like any call on that GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device) }
}

/// `nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { handle_by_index("nvmlDeviceGetHandleByIndex", index, device) }
}

/// `nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        if uuid.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null; NVML contract: a NUL-terminated string.
        let uuid = unsafe { CStr::from_ptr(uuid) }.to_bytes();
        find_device("nvmlDeviceGetHandleByUUID", device, |g| {
            g.uuid.as_bytes() == uuid
        })
    })
}

/// Both names of the handle-by-PCI-address lookup (`call`): any case, 4- or 8-digit
/// domain.
///
/// # Safety
/// `bus_id` is null or a NUL-terminated string; `device` is null or valid for one write.
unsafe fn handle_by_pci_bus_id(
    call: &'static str,
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        if bus_id.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: non-null; per this function's contract a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(bus_id) }.to_string_lossy();
        let want = parse_bus_id(&text).map_err(|_| INVALID_ARGUMENT)?;
        find_device(call, device, |g| parse_bus_id(&g.pci.bus_id) == Ok(want))
    })
}

/// `nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)`:
/// any case, 4- or 8-digit domain.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { handle_by_pci_bus_id("nvmlDeviceGetHandleByPciBusId_v2", bus_id, device) }
}

/// `nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId(
    bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { handle_by_pci_bus_id("nvmlDeviceGetHandleByPciBusId", bus_id, device) }
}

/// `nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        let i = state::index_of(device, &fixture)?;
        state::gate(&fixture.gpus[i])?;
        state::pay("nvmlDeviceGetIndex");
        let i = c_uint::try_from(i).map_err(|_| UNKNOWN)?;
        // SAFETY: NVML contract (module docs).
        unsafe { put(index, i) }
    })
}

/// `nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)`:
/// also on a MIG device handle (the MIG device's name).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceGetName", device, |d, _| {
            let text = match d {
                Device::Gpu(g) => &g.name,
                Device::Mig { mig, .. } => &mig.name,
            };
            // SAFETY: NVML contract (module docs): `length` writable bytes.
            unsafe { put_str(name, length, text) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)`:
/// also on a MIG device handle (`MIG-…`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceGetUUID", device, |d, _| {
            let text = match d {
                Device::Gpu(g) => &g.uuid,
                Device::Mig { mig, .. } => &mig.uuid,
            };
            // SAFETY: NVML contract (module docs): `length` writable bytes.
            unsafe { put_str(uuid, length, text) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetSerial", device, |g, _| {
            let s = value(g, Feature::Serial, g.serial.as_ref())?;
            // SAFETY: NVML contract (module docs): `length` writable bytes.
            unsafe { put_str(serial, length, &s) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: nvmlDevice_t,
    minor: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetMinorNumber", device, |g, _| {
            let v = value(g, Feature::MinorNumber, g.minor_number.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(minor, v) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetPciInfo_v3", device, |g, _| {
            let info = gpu_pci(&g.pci)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(pci, info) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNumaNodeId(
    device: nvmlDevice_t,
    node: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNumaNodeId", device, |g, _| {
            let v = value(g, Feature::NumaNode, g.numa_node.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(node, v) }
        })
    })
}

/// Fills a caller's `unsigned long` bitmask with `bits`.
///
/// # Safety
/// `set` is null or valid for `words` writes.
unsafe fn put_mask(set: *mut c_ulong, words: c_uint, bits: &[u32]) -> Result<(), Ret> {
    if set.is_null() || words == 0 {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null and valid for `words` elements per the contract.
    let out = unsafe { std::slice::from_raw_parts_mut(set, words as usize) };
    out.fill(0);
    let per = c_ulong::BITS;
    for bit in bits {
        if let Some(word) = out.get_mut((bit / per) as usize) {
            *word |= 1 << (bit % per);
        }
    }
    Ok(())
}

fn cpu_affinity(g: &Gpu) -> Result<Vec<u32>, Ret> {
    let list = value(g, Feature::CpuAffinity, g.cpu_affinity.as_ref())?;
    parse_cpulist(&list).map_err(|_| UNKNOWN)
}

/// `nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
/// unsigned long *cpuSet)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCpuAffinity(
    device: nvmlDevice_t,
    size: c_uint,
    set: *mut c_ulong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetCpuAffinity", device, |g, _| {
            let cpus = cpu_affinity(g)?;
            // SAFETY: NVML contract (module docs): `size` words.
            unsafe { put_mask(set, size, &cpus) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device, unsigned int
/// cpuSetSize, unsigned long *cpuSet, nvmlAffinityScope_t scope)`: the same set for both
/// scopes (node, socket).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCpuAffinityWithinScope(
    device: nvmlDevice_t,
    size: c_uint,
    set: *mut c_ulong,
    scope: nvmlAffinityScope_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetCpuAffinityWithinScope", device, |g, _| {
            if scope > 1 {
                return Err(INVALID_ARGUMENT);
            }
            let cpus = cpu_affinity(g)?;
            // SAFETY: NVML contract (module docs): `size` words.
            unsafe { put_mask(set, size, &cpus) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
/// unsigned long *nodeSet, nvmlAffinityScope_t scope)`: the GPU's NUMA node.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryAffinity(
    device: nvmlDevice_t,
    size: c_uint,
    set: *mut c_ulong,
    scope: nvmlAffinityScope_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetMemoryAffinity", device, |g, _| {
            if scope > 1 {
                return Err(INVALID_ARGUMENT);
            }
            let node = value(g, Feature::NumaNode, g.numa_node.as_ref())?;
            // SAFETY: NVML contract (module docs): `size` words.
            unsafe { put_mask(set, size, &[node]) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetPersistenceMode", device, |g, _| {
            let on = value(g, Feature::PersistenceMode, g.persistence_mode.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(mode, nvmlEnableState_t::from(on)) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// Utilization, memory, thermal, power, clocks

/// `nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetUtilizationRates", device, |g, _| {
            let u = value(g, Feature::Utilization, g.utilization.as_ref())?;
            let out = nvmlUtilization_t {
                gpu: u.gpu,
                memory: u.memory,
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(utilization, out) }
        })
    })
}

/// The memory of a GPU or of a MIG device (whose parent's `memory` feature faults apply).
fn memory_of(d: Device<'_>) -> Result<Memory, Ret> {
    match d {
        Device::Gpu(g) => value(g, Feature::Memory, g.memory.as_ref()),
        Device::Mig { parent, mig, .. } => value(parent, Feature::Memory, mig.memory.as_ref()),
    }
}

/// `nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)`:
/// `memory->version` must be `nvmlMemory_v2` (`0x2000028`). Also on a MIG device handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    const V2: c_uint = (size_of::<nvmlMemory_v2_t>() as c_uint) | (2 << 24);
    guard(|| {
        state::with_device("nvmlDeviceGetMemoryInfo_v2", device, |d, _| {
            let m = memory_of(d)?;
            if memory.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: non-null; NVML contract: one nvmlMemory_v2_t, whose first field is
            // the version the caller set.
            let version = unsafe { std::ptr::addr_of!((*memory).version).read() };
            if version != V2 {
                return Err(VERSION_MISMATCH);
            }
            let out = nvmlMemory_v2_t {
                version,
                total: m.total,
                reserved: m.reserved,
                free: m.total.saturating_sub(m.reserved).saturating_sub(m.used),
                used: m.used,
            };
            // SAFETY: as above.
            unsafe { put(memory, out) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)`:
/// v1 counts reserved memory as used. Also on a MIG device handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceGetMemoryInfo", device, |d, _| {
            let m = memory_of(d)?;
            let used = m.used.saturating_add(m.reserved);
            let out = nvmlMemory_t {
                total: m.total,
                free: m.total.saturating_sub(used),
                used,
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(memory, out) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t
/// sensorType, unsigned int *temp)`: only `NVML_TEMPERATURE_GPU`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetTemperature", device, |g, _| {
            if sensor != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
                return Err(INVALID_ARGUMENT);
            }
            let t = value(g, Feature::Temperature, g.temperature_c.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(temp, t) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)`, mW.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetPowerUsage", device, |g, _| {
            let v = value(g, Feature::PowerUsage, g.power_usage_mw.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(power, v) }
        })
    })
}

/// The enforced and the management power limit (`call`): one value in the fixture.
///
/// # Safety
/// `limit` is null or valid for one write.
unsafe fn power_limit(
    call: &'static str,
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu(call, device, |g, _| {
            let v = value(g, Feature::PowerLimit, g.power_limit_mw.as_ref())?;
            // SAFETY: per this function's contract.
            unsafe { put(limit, v) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { power_limit("nvmlDeviceGetEnforcedPowerLimit", device, limit) }
}

/// `nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimit(
    device: nvmlDevice_t,
    limit: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe { power_limit("nvmlDeviceGetPowerManagementLimit", device, limit) }
}

/// `nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
/// unsigned long long *energy)`, mJ.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetTotalEnergyConsumption", device, |g, _| {
            let v = value(g, Feature::Energy, g.energy_mj.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(energy, v) }
        })
    })
}

fn clock_of(c: &crate::fixture::Clocks, kind: nvmlClockType_t) -> Result<u32, Ret> {
    match kind {
        nvmlClockType_enum_NVML_CLOCK_GRAPHICS => Ok(c.graphics),
        nvmlClockType_enum_NVML_CLOCK_SM => Ok(c.sm),
        nvmlClockType_enum_NVML_CLOCK_MEM => Ok(c.mem),
        nvmlClockType_enum_NVML_CLOCK_VIDEO => Ok(c.video),
        _ => Err(INVALID_ARGUMENT),
    }
}

/// `nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
/// unsigned int *clock)`, MHz.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetClockInfo", device, |g, _| {
            let c = value(g, Feature::Clocks, g.clocks_mhz.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(clock, clock_of(&c, kind)?) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
/// unsigned int *clock)`, MHz.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    kind: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetMaxClockInfo", device, |g, _| {
            let c = value(g, Feature::MaxClocks, g.max_clocks_mhz.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(clock, clock_of(&c, kind)?) }
        })
    })
}

/// A clock event reason mask, for the export `call` (current or supported, under the
/// current or the deprecated name).
///
/// # Safety
/// `out` is null or valid for one write.
unsafe fn reasons_mask(
    call: &'static str,
    device: nvmlDevice_t,
    out: *mut c_ulonglong,
    feature: Feature,
    mask: fn(&Gpu) -> Option<u64>,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu(call, device, |g, _| {
            let v = value(g, feature, mask(g).as_ref())?;
            // SAFETY: per this function's contract.
            unsafe { put(out, v) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
/// unsigned long long *clocksEventReasons)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        reasons_mask(
            "nvmlDeviceGetCurrentClocksEventReasons",
            device,
            reasons,
            Feature::ClockEventReasons,
            |g| g.clock_event_reasons,
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(…)`: the deprecated name that
/// nvml-wrapper 0.13 calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        reasons_mask(
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            device,
            reasons,
            Feature::ClockEventReasons,
            |g| g.clock_event_reasons,
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device,
/// unsigned long long *supportedClocksEventReasons)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedClocksEventReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        reasons_mask(
            "nvmlDeviceGetSupportedClocksEventReasons",
            device,
            reasons,
            Feature::SupportedClockEventReasons,
            |g| g.supported_clock_event_reasons,
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(…)`: the deprecated name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        reasons_mask(
            "nvmlDeviceGetSupportedClocksThrottleReasons",
            device,
            reasons,
            Feature::SupportedClockEventReasons,
            |g| g.supported_clock_event_reasons,
        )
    }
}

// ---------------------------------------------------------------------------------------
// ECC, remapped rows, retired pages

/// `nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
/// nvmlEnableState_t *pending)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetEccMode", device, |g, _| {
            let e = value(g, Feature::Ecc, g.ecc.as_ref())?;
            if current.is_null() || pending.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            let mode = nvmlEnableState_t::from(e.enabled);
            // SAFETY: NVML contract (module docs).
            unsafe {
                put(current, mode)?;
                put(pending, mode)
            }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t
/// errorType, nvmlEccCounterType_t counterType, unsigned long long *eccCounts)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetTotalEccErrors", device, |g, _| {
            let e = value(g, Feature::Ecc, g.ecc.as_ref())?;
            let c = match counter_type {
                nvmlEccCounterType_enum_NVML_VOLATILE_ECC => &e.volatile,
                nvmlEccCounterType_enum_NVML_AGGREGATE_ECC => &e.aggregate,
                _ => return Err(INVALID_ARGUMENT),
            };
            let v = match error_type {
                nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => c.corrected,
                nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => c.uncorrected,
                _ => return Err(INVALID_ARGUMENT),
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(counts, v) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
/// unsigned int *uncRows, unsigned int *isPending, unsigned int *failureOccurred)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetRemappedRows", device, |g, _| {
            let r = value(g, Feature::RemappedRows, g.remapped_rows.as_ref())?;
            if corr.is_null() || unc.is_null() || pending.is_null() || failure.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: NVML contract (module docs).
            unsafe {
                put(corr, r.correctable)?;
                put(unc, r.uncorrectable)?;
                put(pending, c_uint::from(r.pending))?;
                put(failure, c_uint::from(r.failure))
            }
        })
    })
}

fn retired(g: &Gpu, cause: nvmlPageRetirementCause_t) -> Result<Vec<(u64, u64)>, Ret> {
    let r = value(g, Feature::RetiredPages, g.retired_pages.as_ref())?;
    let pages = match cause {
        nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS => {
            &r.single_bit
        }
        nvmlPageRetirementCause_enum_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR => {
            &r.double_bit
        }
        _ => return Err(INVALID_ARGUMENT),
    };
    Ok(pages.iter().map(|p| (p.address, p.timestamp)).collect())
}

/// Writes retired pages NVML-style: a too-small `*count` gets the needed count and
/// `INSUFFICIENT_SIZE`.
///
/// # Safety
/// `count` is null or valid; `addresses` and `timestamps` are null or valid for `*count`
/// writes.
unsafe fn put_pages(
    pages: &[(u64, u64)],
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> Result<(), Ret> {
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, valid per the contract.
    let room = unsafe { count.read() } as usize;
    let n = c_uint::try_from(pages.len()).map_err(|_| UNKNOWN)?;
    // SAFETY: as above.
    unsafe { count.write(n) };
    if pages.is_empty() {
        return Ok(());
    }
    if room < pages.len() {
        return Err(INSUFFICIENT_SIZE);
    }
    if addresses.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    for (i, (address, timestamp)) in pages.iter().enumerate() {
        // SAFETY: i < pages.len() ≤ room = the caller's buffer length.
        unsafe {
            addresses.add(i).write(*address);
            if !timestamps.is_null() {
                timestamps.add(i).write(*timestamp);
            }
        }
    }
    Ok(())
}

/// `nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t
/// cause, unsigned int *pageCount, unsigned long long *addresses)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetRetiredPages", device, |g, _| {
            let pages = retired(g, cause)?;
            // SAFETY: NVML contract (module docs): `*count` addresses.
            unsafe { put_pages(&pages, count, addresses, std::ptr::null_mut()) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, nvmlPageRetirementCause_t
/// cause, unsigned int *pageCount, unsigned long long *addresses, unsigned long long
/// *timestamps)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetRetiredPages_v2", device, |g, _| {
            let pages = retired(g, cause)?;
            // SAFETY: NVML contract (module docs): `*count` addresses and timestamps.
            unsafe { put_pages(&pages, count, addresses, timestamps) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
/// nvmlEnableState_t *isPending)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetRetiredPagesPendingStatus", device, |g, _| {
            let r = value(g, Feature::RetiredPages, g.retired_pages.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(pending, nvmlEnableState_t::from(r.pending)) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// PCIe

/// One `unsigned int` PCIe getter (the export `call`): `f` picks the value from the
/// fixture's `pcie`.
///
/// # Safety
/// `out` is null or valid for one write.
unsafe fn pcie_value(
    call: &'static str,
    device: nvmlDevice_t,
    feature: Feature,
    out: *mut c_uint,
    f: impl FnOnce(&crate::fixture::Pcie) -> Result<u32, Ret>,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu(call, device, |g, _| {
            let p = value(g, feature, g.pcie.as_ref())?;
            // SAFETY: per this function's contract.
            unsafe { put(out, f(&p)?) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetCurrPcieLinkGeneration",
            device,
            Feature::PcieLink,
            out,
            |p| Ok(p.generation),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetCurrPcieLinkWidth",
            device,
            Feature::PcieLink,
            out,
            |p| Ok(p.width),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetMaxPcieLinkGeneration",
            device,
            Feature::PcieLink,
            out,
            |p| Ok(p.max_gen),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int
/// *maxLinkGenDevice)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuMaxPcieLinkGeneration(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetGpuMaxPcieLinkGeneration",
            device,
            Feature::PcieLink,
            out,
            |p| Ok(p.gpu_max_gen.unwrap_or(p.max_gen)),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetMaxPcieLinkWidth",
            device,
            Feature::PcieLink,
            out,
            |p| Ok(p.max_width),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int *pcieSpeed)`:
/// MT/s per lane of the current generation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieSpeed(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetPcieSpeed",
            device,
            Feature::PcieLink,
            out,
            |p| pcie_mts(p.generation).ok_or(UNKNOWN),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, unsigned int
/// *maxSpeed)`: the `NVML_PCIE_LINK_MAX_SPEED_*` value (MT/s) of the max generation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieLinkMaxSpeed(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        pcie_value(
            "nvmlDeviceGetPcieLinkMaxSpeed",
            device,
            Feature::PcieLink,
            out,
            |p| pcie_mts(p.gpu_max_gen.unwrap_or(p.max_gen)).ok_or(UNKNOWN),
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(
    device: nvmlDevice_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetPcieReplayCounter", device, |g, _| {
            let p = value(g, Feature::PcieReplay, g.pcie.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(out, p.replay_counter) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t
/// counter, unsigned int *value)`, KB/s. The real one samples a 20 ms window; the fake
/// answers at once unless costs are on ([`crate::costs`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    out: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetPcieThroughput", device, |g, _| {
            let p = value(g, Feature::PcieThroughput, g.pcie.as_ref())?;
            let v = match counter {
                nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES => p.tx_kbps,
                nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES => p.rx_kbps,
                _ => return Err(INVALID_ARGUMENT),
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(out, v) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// Fabric

fn fabric_v3(g: &Gpu) -> Result<nvmlGpuFabricInfo_v3_t, Ret> {
    let f = value(g, Feature::Fabric, g.fabric.as_ref())?;
    let uuid = match &f.cluster_uuid {
        Some(u) => parse_uuid(u).map_err(|_| UNKNOWN)?,
        None => [0; 16],
    };
    Ok(nvmlGpuFabricInfo_v3_t {
        version: (size_of::<nvmlGpuFabricInfo_v3_t>() as c_uint) | (3 << 24),
        clusterUuid: uuid,
        status: f.status,
        cliqueId: f.clique_id,
        state: f.state,
        healthMask: f.health_mask,
        healthSummary: f.health_summary,
    })
}

/// `nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t
/// *gpuFabricInfo)`: the unversioned v1 struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetGpuFabricInfo", device, |g, _| {
            let v3 = fabric_v3(g)?;
            let out = nvmlGpuFabricInfo_t {
                clusterUuid: v3.clusterUuid,
                status: v3.status,
                cliqueId: v3.cliqueId,
                state: v3.state,
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(info, out) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t
/// *gpuFabricInfo)`: `version` must be `nvmlGpuFabricInfo_v2` (`0x2000024`, no health
/// summary) or `_v3` (`0x3000028`); only that version's bytes are written.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfoV_t,
) -> nvmlReturn_t {
    const V2: c_uint = (size_of::<nvmlGpuFabricInfo_v2_t>() as c_uint) | (2 << 24);
    const V3: c_uint = (size_of::<nvmlGpuFabricInfo_v3_t>() as c_uint) | (3 << 24);
    guard(|| {
        state::with_gpu("nvmlDeviceGetGpuFabricInfoV", device, |g, _| {
            let v3 = fabric_v3(g)?;
            if info.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: non-null; every version starts with the `unsigned int version`
            // its caller set, so reading 4 bytes is in bounds whatever the version.
            let version = unsafe { info.cast::<c_uint>().read() };
            match version {
                // SAFETY: the caller's buffer is a v3 struct.
                V3 => unsafe { put(info, v3) },
                V2 => {
                    let v2 = nvmlGpuFabricInfo_v2_t {
                        version: V2,
                        clusterUuid: v3.clusterUuid,
                        status: v3.status,
                        cliqueId: v3.cliqueId,
                        state: v3.state,
                        healthMask: v3.healthMask,
                    };
                    // SAFETY: the caller's buffer is a (smaller) v2 struct; only its
                    // size is written.
                    unsafe { put(info.cast::<nvmlGpuFabricInfo_v2_t>(), v2) }
                }
                _ => Err(VERSION_MISMATCH),
            }
        })
    })
}

// ---------------------------------------------------------------------------------------
// NVLink

/// `nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
/// nvmlEnableState_t *isActive)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link_no: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkState", device, |g, _| {
            let l = link(g, link_no)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(active, nvmlEnableState_t::from(l.active)) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
/// unsigned int *version)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkVersion(
    device: nvmlDevice_t,
    link_no: c_uint,
    version: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkVersion", device, |g, _| {
            let l = link(g, link_no)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(version, l.version) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
/// nvmlNvLinkCapability_t capability, unsigned int *capResult)`: P2P, P2P atomics and
/// "valid" on every link with a GPU or switch at the far end; no system-memory access,
/// no SLI bridge.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkCapability(
    device: nvmlDevice_t,
    link_no: c_uint,
    capability: nvmlNvLinkCapability_t,
    result: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkCapability", device, |g, _| {
            let l = link(g, link_no)?;
            let peer = l
                .remote
                .as_ref()
                .is_some_and(|r| matches!(r.kind, RemoteKind::Gpu | RemoteKind::Switch));
            let v = match capability {
                nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_P2P_SUPPORTED
                | nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_P2P_ATOMICS
                | nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_VALID => peer,
                nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_SYSMEM_ACCESS
                | nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_SYSMEM_ATOMICS
                | nvmlNvLinkCapability_enum_NVML_NVLINK_CAP_SLI_BRIDGE => false,
                _ => return Err(INVALID_ARGUMENT),
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(result, c_uint::from(v)) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int
/// link, nvmlPciInfo_t *pci)`: `pciSubSystemId` is 0, as NVML documents.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link_no: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, |g, _| {
            let r = link(g, link_no)?.remote.as_ref().ok_or(NOT_SUPPORTED)?;
            let info = pci_info(&r.bus_id, r.device_id, 0)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(pci, info) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int
/// link, nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: nvmlDevice_t,
    link_no: c_uint,
    kind: *mut nvmlIntNvLinkDeviceType_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkRemoteDeviceType", device, |g, _| {
            let r = link(g, link_no)?.remote.as_ref().ok_or(NOT_SUPPORTED)?;
            let v = match r.kind {
                RemoteKind::Gpu => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU,
                RemoteKind::Ibmnpu => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU,
                RemoteKind::Switch => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH,
                RemoteKind::Unknown => nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_UNKNOWN,
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(kind, v) }
        })
    })
}

/// The link's error counter by `nvmlNvLinkErrorCounter_t`.
fn link_error(l: &NvLink, counter: nvmlNvLinkErrorCounter_t) -> Option<u64> {
    match counter {
        nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_REPLAY => Some(l.replay),
        nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_RECOVERY => Some(l.recovery),
        nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_FLIT => Some(l.crc_flit),
        nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_DATA => Some(l.crc_data),
        nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_ECC_DATA => Some(l.ecc_data),
        _ => None,
    }
}

/// `nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
/// nvmlNvLinkErrorCounter_t counter, unsigned long long *counterValue)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link_no: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    out: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetNvLinkErrorCounter", device, |g, _| {
            let l = link(g, link_no)?;
            let v = link_error(l, counter).ok_or(INVALID_ARGUMENT)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(out, v) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// Field values

/// A field's answer before it is written into `nvmlFieldValue_t`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Uint(u32),
    Ull(u64),
    Typed(FieldType, f64),
}

/// Which per-link counter a `_Ln`/`_TOTAL` field id reads.
#[derive(Debug, Clone, Copy)]
enum LinkCounter {
    CrcFlit,
    CrcData,
    Replay,
    Recovery,
    EccData,
    Speed,
}

/// Decodes the field ids that carry the link in the id: `(counter, Some(link))` for
/// `_L0…_L11`, `(counter, None)` for `_TOTAL`/`_COMMON`.
fn link_in_id(id: u32) -> Option<(LinkCounter, Option<u32>)> {
    use LinkCounter::*;
    let l0_5 = [(32, CrcFlit), (39, CrcData), (46, Replay), (53, Recovery)];
    for (base, c) in l0_5 {
        if (base..base + 6).contains(&id) {
            return Some((c, Some(id - base)));
        }
        if id == base + 6 {
            return Some((c, None));
        }
    }
    let l6_11 = [
        (96, CrcFlit),
        (102, CrcData),
        (108, Replay),
        (114, Recovery),
    ];
    for (base, c) in l6_11 {
        if (base..base + 6).contains(&id) {
            return Some((c, Some(id - base + 6)));
        }
    }
    match id {
        148..=159 => Some((EccData, Some(id - 148))),
        160 => Some((EccData, None)),
        84..=89 => Some((Speed, Some(id - 84))),
        132..=137 => Some((Speed, Some(id - 132 + 6))),
        90 => Some((Speed, None)),
        _ => None,
    }
}

fn link_counter(l: &NvLink, c: LinkCounter) -> Result<u64, Ret> {
    Ok(match c {
        LinkCounter::CrcFlit => l.crc_flit,
        LinkCounter::CrcData => l.crc_data,
        LinkCounter::Replay => l.replay,
        LinkCounter::Recovery => l.recovery,
        LinkCounter::EccData => l.ecc_data,
        LinkCounter::Speed => u64::from(l.speed_mbps.ok_or(NOT_SUPPORTED)?),
    })
}

/// The answer for one (field id, scope) of `gpu`; ids use the v12 numbering.
fn field(g: &Gpu, id: u32, scope: u32) -> Result<Value, Ret> {
    if let Some(o) = g
        .fields
        .iter()
        .find(|o| o.id == id && o.scope.is_none_or(|s| s == scope))
    {
        return match o.error {
            Some(code) => Err(code),
            None => Ok(Value::Typed(o.value_type, o.value)),
        };
    }
    let scoped = |links: &[NvLink]| links.get(scope as usize).ok_or(INVALID_ARGUMENT).cloned();
    if let Some((counter, which)) = link_in_id(id) {
        let links = links(g)?;
        return match (counter, which) {
            (LinkCounter::Speed, None) => {
                let l = links.first().ok_or(NOT_SUPPORTED)?;
                Ok(Value::Uint(l.speed_mbps.ok_or(NOT_SUPPORTED)?))
            }
            (LinkCounter::Speed, Some(n)) => {
                let l = links.get(n as usize).ok_or(NOT_SUPPORTED)?;
                Ok(Value::Uint(l.speed_mbps.ok_or(NOT_SUPPORTED)?))
            }
            (c, Some(n)) => {
                let l = links.get(n as usize).ok_or(NOT_SUPPORTED)?;
                Ok(Value::Ull(link_counter(l, c)?))
            }
            (c, None) => {
                let mut sum = 0u64;
                for l in links {
                    sum = sum.saturating_add(link_counter(l, c)?);
                }
                Ok(Value::Ull(sum))
            }
        };
    }
    match id {
        // ECC mode and totals.
        1..=6 => {
            let e = value(g, Feature::Ecc, g.ecc.as_ref())?;
            Ok(match id {
                1 | 2 => Value::Uint(u32::from(e.enabled)),
                3 => Value::Ull(e.volatile.corrected),
                4 => Value::Ull(e.volatile.uncorrected),
                5 => Value::Ull(e.aggregate.corrected),
                _ => Value::Ull(e.aggregate.uncorrected),
            })
        }
        // Retired pages.
        29..=31 => {
            let r = value(g, Feature::RetiredPages, g.retired_pages.as_ref())?;
            Ok(match id {
                29 => Value::Ull(r.single_bit.len() as u64),
                30 => Value::Ull(r.double_bit.len() as u64),
                _ => Value::Uint(u32::from(r.pending)),
            })
        }
        // NVML_FI_DEV_NVLINK_LINK_COUNT
        91 => Ok(Value::Uint(
            u32::try_from(links(g)?.len()).map_err(|_| UNKNOWN)?,
        )),
        // NVML_FI_DEV_PCIE_REPLAY_COUNTER
        94 => {
            let p = value(g, Feature::PcieReplay, g.pcie.as_ref())?;
            Ok(Value::Ull(u64::from(p.replay_counter)))
        }
        // NVML_FI_DEV_NVLINK_THROUGHPUT_{DATA,RAW}_{TX,RX}, KiB; scope = link or UINT_MAX.
        138..=141 => {
            let pick = |l: &NvLink| match id {
                138 => l.tx_kib,
                139 => l.rx_kib,
                140 => l.raw_tx_kib.unwrap_or(l.tx_kib),
                _ => l.raw_rx_kib.unwrap_or(l.rx_kib),
            };
            let links = links(g)?;
            if scope == ALL_LINKS {
                Ok(Value::Ull(
                    links.iter().map(pick).fold(0, u64::saturating_add),
                ))
            } else {
                Ok(Value::Ull(pick(&scoped(links)?)))
            }
        }
        // NVML_FI_DEV_REMAPPED_{COR,UNC,PENDING,FAILURE}
        142..=145 => {
            let r = value(g, Feature::RemappedRows, g.remapped_rows.as_ref())?;
            Ok(Value::Uint(match id {
                142 => r.correctable,
                143 => r.uncorrectable,
                144 => u32::from(r.pending),
                _ => u32::from(r.failure),
            }))
        }
        // NVML_FI_DEV_NVLINK_REMOTE_NVLINK_ID, scope = link.
        146 => {
            let l = scoped(links(g)?)?;
            let remote = l.remote.ok_or(NOT_SUPPORTED)?;
            Ok(Value::Uint(remote.link.ok_or(NOT_SUPPORTED)?))
        }
        // NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT
        147 => {
            let n = links(g)?
                .iter()
                .filter(|l| {
                    l.remote
                        .as_ref()
                        .is_some_and(|r| r.kind == RemoteKind::Switch)
                })
                .count();
            Ok(Value::Uint(u32::try_from(n).map_err(|_| UNKNOWN)?))
        }
        // NVML_FI_DEV_NVLINK_ERROR_DL_{REPLAY,RECOVERY,CRC}, scope = link.
        161..=163 => {
            let l = scoped(links(g)?)?;
            Ok(Value::Ull(match id {
                161 => l.replay,
                162 => l.recovery,
                _ => l.crc_flit,
            }))
        }
        // NVML_FI_DEV_NVLINK_GET_{SPEED,STATE,VERSION}, scope = link.
        164..=166 => {
            let l = scoped(links(g)?)?;
            Ok(Value::Uint(match id {
                164 => l.speed_mbps.ok_or(NOT_SUPPORTED)?,
                165 => u32::from(l.active),
                _ => l.version,
            }))
        }
        // NVML_FI_DEV_C2C_LINK_COUNT
        170 => Ok(Value::Uint(
            u32::try_from(c2c(g)?.links.len()).map_err(|_| UNKNOWN)?,
        )),
        // NVML_FI_DEV_C2C_LINK_GET_{STATUS,MAX_BW}, scope = link.
        171 | 172 => {
            let l = c2c(g)?.links.get(scope as usize).ok_or(INVALID_ARGUMENT)?;
            Ok(Value::Uint(if id == 171 {
                u32::from(l.active)
            } else {
                l.max_bw_mbps
            }))
        }
        // NVML_FI_DEV_NVLINK_COUNT_* (NVLink5), scope = link; 201–205 and 216–218 are
        // not modelled.
        206..=215 | 219..=222 => {
            let l = scoped(links(g)?)?;
            let n = l.nvlink5.ok_or(NOT_SUPPORTED)?;
            Ok(Value::Ull(match id {
                206 => n.malformed_packet_errors,
                207 => n.buffer_overrun_errors,
                208 => n.rcv_errors,
                209 => n.rcv_remote_errors,
                210 => n.rcv_general_errors,
                211 => n.local_link_integrity_errors,
                212 => n.xmit_discards,
                213 => n.link_recovery_successful_events,
                214 => n.link_recovery_failed_events,
                215 => n.link_recovery_events,
                219 => n.effective_errors,
                220 => u64::from(encode_ber(n.effective_ber)),
                221 => n.symbol_errors,
                _ => u64::from(encode_ber(n.symbol_ber)),
            }))
        }
        // NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_{0..15}, scope = link.
        235..=250 => {
            let l = scoped(links(g)?)?;
            let history = l.nvlink5.and_then(|n| n.fec_history).ok_or(NOT_SUPPORTED)?;
            Ok(Value::Ull(history[(id - 235) as usize]))
        }
        // NVML_FI_DEV_C2C_LINK_ERROR_{INTR,REPLAY,REPLAY_B2B}
        231..=233 => {
            let e = &c2c(g)?.errors;
            Ok(Value::Ull(match id {
                231 => e.intr,
                232 => e.replay,
                _ => e.replay_b2b,
            }))
        }
        // NVML_FI_DEV_C2C_LINK_POWER_STATE
        234 => Ok(Value::Uint(c2c(g)?.power_state)),
        _ => Err(NOT_SUPPORTED),
    }
}

/// The GPU's C2C, `NOT_SUPPORTED` for a GPU without.
fn c2c(g: &Gpu) -> Result<&C2c, Ret> {
    check(g, Feature::C2c)?;
    g.c2c.as_ref().ok_or(NOT_SUPPORTED)
}

fn write_value(out: &mut nvmlFieldValue_t, v: Value) {
    match v {
        Value::Uint(u) => {
            out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
            out.value.uiVal = u;
        }
        Value::Ull(u) => {
            out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            out.value.ullVal = u;
        }
        // Fixture numbers are f64; `as` saturates, which is what a fixture author means.
        Value::Typed(t, x) => match t {
            FieldType::Double => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_DOUBLE;
                out.value.dVal = x;
            }
            FieldType::Uint => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
                out.value.uiVal = x as u32;
            }
            FieldType::Ulong => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG;
                out.value.ulVal = x as c_ulong;
            }
            FieldType::Ull => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                out.value.ullVal = x as u64;
            }
            FieldType::Sll => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_LONG_LONG;
                out.value.sllVal = x as i64;
            }
            FieldType::Sint => {
                out.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_SIGNED_INT;
                out.value.siVal = x as i32;
            }
        },
    }
}

/// `nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
/// nvmlFieldValue_t *values)`: each entry's `scopeId` is honoured (NVLink or C2C link
/// number, or `UINT_MAX` for the sum over links on 138–141); an unknown id gets
/// `NOT_SUPPORTED` in its own `nvmlReturn` while the call succeeds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetFieldValues", device, |g, _| {
            check(g, Feature::FieldValues)?;
            let n = usize::try_from(count).map_err(|_| INVALID_ARGUMENT)?;
            if n == 0 {
                return Ok(());
            }
            if values.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: non-null; NVML contract: `valuesCount` initialised entries.
            let values = unsafe { std::slice::from_raw_parts_mut(values, n) };
            state::pay_fields(values.iter().map(|v| v.fieldId));
            let now = now_us();
            for v in values {
                v.timestamp = now;
                v.latencyUsec = 0;
                match field(g, v.fieldId, v.scopeId) {
                    Ok(x) => {
                        v.nvmlReturn = SUCCESS;
                        write_value(v, x);
                    }
                    Err(code) => v.nvmlReturn = code,
                }
            }
            Ok(())
        })
    })
}

// ---------------------------------------------------------------------------------------
// Events

/// `nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        if set.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let address = state::event_set_create()?;
        state::pay("nvmlEventSetCreate");
        // SAFETY: non-null; NVML contract: one writable nvmlEventSet_t. The pointer is
        // only ever used as a key by this library, never dereferenced.
        unsafe { put(set, address as nvmlEventSet_t) }
    })
}

/// `nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)`: works even after shutdown, so a
/// consumer's `Drop` never fails.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        state::event_set_free(set as usize)?;
        state::pay("nvmlEventSetFree");
        Ok(())
    })
}

/// `nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long
/// *eventTypes)`: single- and double-bit ECC, P-state, XID, clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    types: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetSupportedEventTypes", device, |g, _| {
            check(g, Feature::Events)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(types, SUPPORTED_EVENTS) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long
/// eventTypes, nvmlEventSet_t set)`: `NOT_SUPPORTED` if any type is unsupported.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    guard(|| {
        let fixture = state::snapshot()?;
        let index = state::index_of(device, &fixture)?;
        let g = &fixture.gpus[index];
        state::gate(g)?;
        state::pay("nvmlDeviceRegisterEvents");
        check(g, Feature::Events)?;
        if types & !SUPPORTED_EVENTS != 0 {
            return Err(NOT_SUPPORTED);
        }
        state::with_event_set(set as usize, |s| {
            *s.registered.entry(index).or_default() |= types;
        })
    })
}

/// The next undelivered XID for `set`, marked delivered: (GPU index, XID).
fn next_xid(fixture: &Fixture, set: usize) -> Result<Option<(usize, u64)>, Ret> {
    state::with_event_set(set, |s| {
        for (&gpu, &mask) in &s.registered {
            if mask & XID_EVENT == 0 {
                continue;
            }
            let Some(g) = fixture.gpus.get(gpu) else {
                continue;
            };
            for (pos, &xid) in g.xid_events.iter().enumerate() {
                if s.delivered.insert((gpu, pos)) {
                    return Some((gpu, xid));
                }
            }
        }
        None
    })
}

/// `nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned
/// int timeoutms)`: the next undelivered XID of a registered GPU (lost GPUs included), or
/// `NVML_ERROR_TIMEOUT` after `timeoutms`. The fixture is re-checked every 10 ms while
/// waiting, so an XID injected mid-wait arrives.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        if data.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
        let mut unpaid = true;
        loop {
            let fixture = state::snapshot()?;
            if std::mem::take(&mut unpaid) {
                state::pay("nvmlEventSetWait_v2");
            }
            if let Some((gpu, xid)) = next_xid(&fixture, set as usize)? {
                let event = nvmlEventData_t {
                    device: state::handle(gpu),
                    eventType: XID_EVENT,
                    eventData: xid,
                    gpuInstanceId: u32::MAX,
                    computeInstanceId: u32::MAX,
                };
                // SAFETY: non-null; NVML contract: one writable nvmlEventData_t.
                return unsafe { put(data, event) };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TIMEOUT);
            }
            // A new XID comes with a changed fixture file, which is looked at no more often
            // than its check holds: polling faster finds nothing new.
            std::thread::sleep((deadline - now).min(state::poll_interval()));
        }
    })
}

// ---------------------------------------------------------------------------------------
// Encoder and decoder, violation status

/// The sampling period NVML reports with encoder and decoder utilization, µs.
const CODEC_SAMPLING_PERIOD_US: c_uint = 167_000;

/// Encoder or decoder utilization (the export `call`), percent, with its sampling period.
///
/// # Safety
/// `utilization` and `period` are null or valid for one write each.
unsafe fn codec_utilization(
    call: &'static str,
    device: nvmlDevice_t,
    feature: Feature,
    pick: fn(&Gpu) -> Option<u32>,
    utilization: *mut c_uint,
    period: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu(call, device, |g, _| {
            let u = value(g, feature, pick(g).as_ref())?;
            if utilization.is_null() || period.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: per this function's contract.
            unsafe {
                put(utilization, u)?;
                put(period, CODEC_SAMPLING_PERIOD_US)
            }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int
/// *utilization, unsigned int *samplingPeriodUs)`: percent, period 167 000 µs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    period: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        codec_utilization(
            "nvmlDeviceGetEncoderUtilization",
            device,
            Feature::EncoderUtilization,
            |g| g.encoder_utilization,
            utilization,
            period,
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int
/// *utilization, unsigned int *samplingPeriodUs)`: percent, period 167 000 µs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_uint,
    period: *mut c_uint,
) -> nvmlReturn_t {
    // SAFETY: NVML contract (module docs).
    unsafe {
        codec_utilization(
            "nvmlDeviceGetDecoderUtilization",
            device,
            Feature::DecoderUtilization,
            |g| g.decoder_utilization,
            utilization,
            period,
        )
    }
}

/// `nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t
/// perfPolicyType, nvmlViolationTime_t *violTime)`: the fixture's nanoseconds for the
/// policy, `referenceTime` now (µs since the epoch). A policy NVML does not define
/// (other than 0–5, 10, 11) is `INVALID_ARGUMENT`; one the fixture does not list
/// `NOT_SUPPORTED`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    time: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetViolationStatus", device, |g, _| {
            let known = crate::fixture::Violations::default()
                .by_policy(policy)
                .is_ok();
            if !known {
                return Err(INVALID_ARGUMENT);
            }
            let v = value(g, Feature::Violations, g.violations.as_ref())?;
            let ns = v
                .by_policy(policy)
                .map_err(|()| INVALID_ARGUMENT)?
                .ok_or(NOT_SUPPORTED)?;
            let out = nvmlViolationTime_t {
                referenceTime: u64::try_from(now_us()).unwrap_or(0),
                violationTime: ns,
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(time, out) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// Running processes
//
// `infoCount` in is the length of the caller's `infos` array, out the number of processes.
// None: 0 and `SUCCESS` (nvml-wrapper's size query, a null buffer with count 0, then gets
// an empty list in one call); more than fit: the number and `INSUFFICIENT_SIZE`; a null
// buffer claimed to have room: `INVALID_ARGUMENT`. A GPU handle lists every process of
// the GPU (in MIG mode too: the aggregate a privileged caller gets), a MIG device handle
// those of its GPU instance and compute instance.

/// The processes a device lists: a GPU all of its own, a MIG device those in its GPU
/// instance and compute instance. The parent's `processes` feature faults apply to both.
fn processes_of(d: Device<'_>) -> Result<Vec<&Process>, Ret> {
    check(d.gpu(), Feature::Processes)?;
    Ok(match d {
        Device::Gpu(g) => g.processes.iter().collect(),
        Device::Mig { parent, mig, .. } => {
            parent.processes.iter().filter(|p| p.runs_in(mig)).collect()
        }
    })
}

/// `nvmlProcessInfo_t` (= `nvmlProcessInfo_v2_t`): absent values as the driver writes them.
fn process_info(p: &Process) -> nvmlProcessInfo_t {
    nvmlProcessInfo_t {
        pid: p.pid,
        usedGpuMemory: p.used_gpu_memory.unwrap_or(u64::MAX),
        gpuInstanceId: p.gpu_instance_id.unwrap_or(Process::NO_INSTANCE),
        computeInstanceId: p.compute_instance_id.unwrap_or(Process::NO_INSTANCE),
    }
}

/// `nvmlProcessInfo_v1_t`, the layout of the unversioned call: pid and memory only.
fn process_info_v1(p: &Process) -> nvmlProcessInfo_v1_t {
    nvmlProcessInfo_v1_t {
        pid: p.pid,
        usedGpuMemory: p.used_gpu_memory.unwrap_or(u64::MAX),
    }
}

/// Writes a process list NVML's way (see the section comment).
///
/// # Safety
/// `count` is null or valid for a read and a write; `infos` is null or valid for `*count`
/// writes.
unsafe fn put_processes<T>(list: &[T], count: *mut c_uint, infos: *mut T) -> Result<(), Ret>
where
    T: Copy,
{
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, valid per the contract.
    let room = unsafe { count.read() } as usize;
    let n = c_uint::try_from(list.len()).map_err(|_| UNKNOWN)?;
    // SAFETY: as above.
    unsafe { count.write(n) };
    if list.is_empty() {
        return Ok(());
    }
    if room < list.len() {
        return Err(INSUFFICIENT_SIZE);
    }
    if infos.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    for (i, info) in list.iter().enumerate() {
        // SAFETY: i < list.len() ≤ room = the caller's array length.
        unsafe { infos.add(i).write(*info) };
    }
    Ok(())
}

/// One `nvmlDeviceGetComputeRunningProcesses*` (the export `call`), its entries made by
/// `info`.
///
/// # Safety
/// As [`put_processes`].
unsafe fn compute_processes<T: Copy>(
    call: &'static str,
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut T,
    info: fn(&Process) -> T,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device(call, device, |d, _| {
            let list: Vec<T> = processes_of(d)?.into_iter().map(info).collect();
            // SAFETY: per this function's contract.
            unsafe { put_processes(&list, count, infos) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int
/// *infoCount, nvmlProcessInfo_t *infos)`: the fixture's `processes`. Also on a MIG device
/// handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    let call = "nvmlDeviceGetComputeRunningProcesses_v3";
    // SAFETY: NVML contract (module docs): `*count` entries.
    unsafe { compute_processes(call, device, count, infos, process_info) }
}

/// `nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int
/// *infoCount, nvmlProcessInfo_v2_t *infos)`: as `_v3` (the same layout).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v2_t,
) -> nvmlReturn_t {
    let call = "nvmlDeviceGetComputeRunningProcesses_v2";
    // SAFETY: NVML contract (module docs): `*count` entries.
    unsafe { compute_processes(call, device, count, infos, process_info) }
}

/// `nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int
/// *infoCount, nvmlProcessInfo_v1_t *infos)`: as `_v3` with pid and memory only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_v1_t,
) -> nvmlReturn_t {
    let call = "nvmlDeviceGetComputeRunningProcesses";
    // SAFETY: NVML contract (module docs): `*count` entries.
    unsafe { compute_processes(call, device, count, infos, process_info_v1) }
}

/// `nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned
/// int *infoCount, nvmlProcessInfo_t *infos)`: always an empty list (a compute node runs no
/// graphics contexts), after the `processes` feature check. Also on a MIG device handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let call = "nvmlDeviceGetGraphicsRunningProcesses_v3";
        state::with_device(call, device, |d, _| {
            check(d.gpu(), Feature::Processes)?;
            // SAFETY: NVML contract (module docs): `*count` entries.
            unsafe { put_processes(&[], count, infos) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// GPM (GPU Performance Monitoring)

/// A GPU's GPM as the fixture has it now: `None` when absent or listed in `not_supported`;
/// the fixture's code when listed in `errors`.
fn gpm_of(g: &Gpu) -> Result<Option<&Gpm>, Ret> {
    if let Some(code) = g.errors.get(&Feature::Gpm) {
        return Err(*code);
    }
    if g.not_supported.contains(&Feature::Gpm) {
        return Ok(None);
    }
    Ok(g.gpm.as_ref())
}

/// `nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t
/// *gpmSupport)`: `isSupportedDevice` 1 when the fixture has `gpm`; `version` must be
/// `NVML_GPM_SUPPORT_VERSION` (1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlGpmQueryDeviceSupport", device, |g, _| {
            let supported = gpm_of(g)?.is_some();
            if support.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: non-null; NVML contract: one nvmlGpmSupport_t, whose first field is
            // the version the caller set.
            let version = unsafe { std::ptr::addr_of!((*support).version).read() };
            if version != NVML_GPM_SUPPORT_VERSION {
                return Err(VERSION_MISMATCH);
            }
            let out = nvmlGpmSupport_t {
                version,
                isSupportedDevice: c_uint::from(supported),
            };
            // SAFETY: as above.
            unsafe { put(support, out) }
        })
    })
}

/// `nvmlReturn_t nvmlGpmQueryIfStreamingEnabled(nvmlDevice_t device, unsigned int
/// *state)`: streaming is not modelled, `NOT_SUPPORTED`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmQueryIfStreamingEnabled(
    device: nvmlDevice_t,
    _state: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlGpmQueryIfStreamingEnabled", device, |g, _| {
            gpm_of(g)?;
            Err(NOT_SUPPORTED)
        })
    })
}

/// `nvmlReturn_t nvmlGpmSetStreamingEnabled(nvmlDevice_t device, unsigned int state)`:
/// streaming is not modelled, `NOT_SUPPORTED`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSetStreamingEnabled(device: nvmlDevice_t, _state: c_uint) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlGpmSetStreamingEnabled", device, |g, _| {
            gpm_of(g)?;
            Err(NOT_SUPPORTED)
        })
    })
}

/// `nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)`: a new, empty sample
/// owned by the library (see [`crate::gpm`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| {
        if sample.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        state::snapshot()?;
        state::pay("nvmlGpmSampleAlloc");
        let address = gpm::alloc();
        // SAFETY: non-null; NVML contract: one writable nvmlGpmSample_t. The pointer is
        // only ever used as a key by this library, never dereferenced.
        unsafe { put(sample, address as nvmlGpmSample_t) }
    })
}

/// `nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)`: works even after
/// shutdown, so a consumer's `Drop` never fails; a sample freed twice or never allocated
/// is `INVALID_ARGUMENT`.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| {
        gpm::free(sample as usize)?;
        state::pay("nvmlGpmSampleFree");
        Ok(())
    })
}

/// `nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)`: fills
/// the sample from the GPU's `gpm` (`NOT_SUPPORTED` without); see [`crate::gpm`].
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu_at("nvmlGpmSampleGet", device, |index, g, _| {
            let gpm = gpm_of(g)?.ok_or(NOT_SUPPORTED)?;
            gpm::fill(sample as usize, index, Scope::Device, &gpm.metrics)
        })
    })
}

/// `nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
/// nvmlGpmSample_t gpmSample)`: on the parent GPU's handle, fills the sample from GPU
/// instance `gpuInstanceId`'s `gpm` (carried by one of its MIG devices). `NOT_SUPPORTED`
/// when the GPU has no `gpm`, MIG is off or absent, or the instance has no `gpm`;
/// `INVALID_ARGUMENT` for an instance no MIG device is in.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gpu_instance_id: c_uint,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu_at("nvmlGpmMigSampleGet", device, |index, g, _| {
            gpm_of(g)?.ok_or(NOT_SUPPORTED)?;
            let mig = value(g, Feature::Mig, g.mig.as_ref())?;
            if mig.current_mode == 0 {
                return Err(NOT_SUPPORTED);
            }
            let gpm = mig
                .instance_gpm(gpu_instance_id)
                .ok_or(INVALID_ARGUMENT)?
                .ok_or(NOT_SUPPORTED)?;
            let scope = Scope::Instance(gpu_instance_id);
            gpm::fill(sample as usize, index, scope, &gpm.metrics)
        })
    })
}

/// `nvmlGpmMetric_t.metricInfo` with no strings.
const NO_METRIC_INFO: nvmlGpmMetric_t__bindgen_ty_1 = nvmlGpmMetric_t__bindgen_ty_1 {
    shortName: std::ptr::null_mut(),
    longName: std::ptr::null_mut(),
    unit: std::ptr::null_mut(),
};

/// The names and unit of a metric: static NUL-terminated strings, or null where the fake
/// has none.
fn metric_info(id: c_uint) -> nvmlGpmMetric_t__bindgen_ty_1 {
    let names: Option<(&CStr, &CStr)> = match id {
        1 => Some((c"GRAPHICS_UTIL", c"Graphics engine utilization")),
        2 => Some((c"SM_UTIL", c"SM utilization")),
        3 => Some((c"SM_OCCUPANCY", c"SM occupancy")),
        4 => Some((c"INTEGER_UTIL", c"Integer pipe utilization")),
        5 => Some((c"ANY_TENSOR_UTIL", c"Any tensor pipe utilization")),
        6 => Some((c"DFMA_TENSOR_UTIL", c"DFMA tensor pipe utilization")),
        7 => Some((c"HMMA_TENSOR_UTIL", c"HMMA tensor pipe utilization")),
        8 => Some((c"DMMA_TENSOR_UTIL", c"DMMA tensor pipe utilization")),
        9 => Some((c"IMMA_TENSOR_UTIL", c"IMMA tensor pipe utilization")),
        10 => Some((c"DRAM_BW_UTIL", c"DRAM bandwidth utilization")),
        11 => Some((c"FP64_UTIL", c"FP64 pipe utilization")),
        12 => Some((c"FP32_UTIL", c"FP32 pipe utilization")),
        13 => Some((c"FP16_UTIL", c"FP16 pipe utilization")),
        20 => Some((c"PCIE_TX_PER_SEC", c"PCIe bytes sent per second")),
        21 => Some((c"PCIE_RX_PER_SEC", c"PCIe bytes received per second")),
        60 => Some((
            c"NVLINK_TOTAL_RX_PER_SEC",
            c"NVLink bytes received per second",
        )),
        61 => Some((c"NVLINK_TOTAL_TX_PER_SEC", c"NVLink bytes sent per second")),
        100 => Some((c"C2C_TOTAL_TX_PER_SEC", c"C2C bytes sent per second")),
        101 => Some((c"C2C_TOTAL_RX_PER_SEC", c"C2C bytes received per second")),
        _ => None,
    };
    let unit: Option<&CStr> = match id {
        1..=13 | 30..=51 | 166..=169 => Some(c"%"),
        20 | 21 | 60..=159 => Some(c"MiB/s"),
        _ => None,
    };
    let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null_mut(), |s| s.as_ptr().cast_mut());
    nvmlGpmMetric_t__bindgen_ty_1 {
        shortName: ptr(names.map(|n| n.0)),
        longName: ptr(names.map(|n| n.1)),
        unit: ptr(unit),
    }
}

/// `nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)`: `version` must be
/// `NVML_GPM_METRICS_GET_VERSION` (1); `numMetrics` at most the array's 210 entries;
/// `sample1` and `sample2` filled samples of the same GPU (or GPU instance), `sample2`
/// the later (else `INVALID_ARGUMENT`). Each requested metric gets the window's rate
/// (see [`crate::gpm`]) and static names, or `NOT_SUPPORTED` in its `nvmlReturn` (null
/// names, value 0) when either sample lacks the id. No device is asked, so a GPU lost or
/// hung since its samples were taken does not matter here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(request: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    guard(|| {
        if request.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        state::snapshot()?;
        state::pay("nvmlGpmMetricsGet");
        // SAFETY: non-null; NVML contract: one nvmlGpmMetricsGet_t, whose first field is
        // the version the caller set.
        let version = unsafe { request.cast::<c_uint>().read() };
        if version != NVML_GPM_METRICS_GET_VERSION {
            return Err(VERSION_MISMATCH);
        }
        // SAFETY: a version-1 request is one whole nvmlGpmMetricsGet_t, valid for reads
        // and writes and not touched by anyone else during the call; every bit pattern
        // of its fields (integers, doubles, raw pointers) is a valid value.
        let request = unsafe { &mut *request };
        let n = request.numMetrics as usize;
        if n > request.metrics.len() {
            return Err(INVALID_ARGUMENT);
        }
        let rates = gpm::window(request.sample1 as usize, request.sample2 as usize)?;
        for m in &mut request.metrics[..n] {
            match rates.get(&m.metricId) {
                Some(v) => {
                    m.nvmlReturn = SUCCESS;
                    m.value = *v;
                    m.metricInfo = metric_info(m.metricId);
                }
                None => {
                    m.nvmlReturn = NOT_SUPPORTED;
                    m.value = 0.0;
                    m.metricInfo = NO_METRIC_INFO;
                }
            }
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// MIG (Multi-Instance GPU)
//
// MIG device handles are addresses in a second private array (`state::mig_handle`), one
// slot per MIG device UUID, so they are distinct from GPU handles, stable while the device
// is in the fixture and stale (`INVALID_ARGUMENT`) once it has left. `nvmlDeviceGetName`,
// `…GetUUID`, `…GetMemoryInfo{,_v2}`, the running-process calls and the MIG calls below
// accept them; every other export answers `INVALID_ARGUMENT` for one.

/// `nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
/// unsigned int *pendingMode)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetMigMode", device, |g, _| {
            let m = value(g, Feature::Mig, g.mig.as_ref())?;
            if current.is_null() || pending.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: NVML contract (module docs).
            unsafe {
                put(current, m.current_mode)?;
                put(pending, m.pending_mode)
            }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetMaxMigDeviceCount", device, |g, _| {
            let m = value(g, Feature::Mig, g.mig.as_ref())?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(count, m.max_devices) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int
/// index, nvmlDevice_t *migDevice)`: `INVALID_ARGUMENT` for an index at or above
/// `max_devices`, `NOT_FOUND` for one below it without a device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu_at(
            "nvmlDeviceGetMigDeviceHandleByIndex",
            device,
            |gpu, g, _| {
                let m = value(g, Feature::Mig, g.mig.as_ref())?;
                if index >= m.max_devices {
                    return Err(INVALID_ARGUMENT);
                }
                let d = m.devices.get(index as usize).ok_or(NOT_FOUND)?;
                if mig_device.is_null() {
                    return Err(INVALID_ARGUMENT);
                }
                let handle = state::mig_handle(gpu, &d.uuid, &m.devices)?;
                // SAFETY: NVML contract (module docs).
                unsafe { put(mig_device, handle) }
            },
        )
    })
}

/// `nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int
/// *isMigDevice)`: 1 for a MIG device handle, 0 for a GPU's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceIsMigDeviceHandle", device, |d, _| {
            let mig = matches!(d, Device::Mig { .. });
            // SAFETY: NVML contract (module docs).
            unsafe { put(is_mig, c_uint::from(mig)) }
        })
    })
}

/// A call that only a MIG device handle answers: a GPU handle is `INVALID_ARGUMENT`
/// (as on a real H200 without MIG).
fn on_mig<T>(
    d: Device<'_>,
    f: impl FnOnce(usize, &crate::fixture::MigDevice) -> T,
) -> Result<T, Ret> {
    match d {
        Device::Gpu(_) => Err(INVALID_ARGUMENT),
        Device::Mig {
            parent,
            parent_index,
            mig,
        } => {
            check(parent, Feature::Mig)?;
            Ok(f(parent_index, mig))
        }
    }
}

/// `nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
/// nvmlDevice_t *device)`: the parent GPU's handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let call = "nvmlDeviceGetDeviceHandleFromMigDeviceHandle";
        state::with_device(call, mig_device, |d, _| {
            let parent = on_mig(d, |index, _| state::handle(index))?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(device, parent) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)`: on a
/// MIG device handle only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceGetGpuInstanceId", device, |d, _| {
            let v = on_mig(d, |_, m| m.gpu_instance_id)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(id, v) }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)`:
/// on a MIG device handle only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_device("nvmlDeviceGetComputeInstanceId", device, |d, _| {
            let v = on_mig(d, |_, m| m.compute_instance_id)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(id, v) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// C2C

/// `nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t
/// *c2cModeInfo)`: `isC2cEnabled` 1 when the fixture has `c2c`, else 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetC2cModeInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlC2cModeInfo_v1_t,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetC2cModeInfoV", device, |g, _| {
            check(g, Feature::C2c)?;
            let out = nvmlC2cModeInfo_v1_t {
                isC2cEnabled: c_uint::from(g.c2c.is_some()),
            };
            // SAFETY: NVML contract (module docs).
            unsafe { put(info, out) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// Platform

/// `nvmlReturn_t nvmlDeviceGetPlatformInfo(nvmlDevice_t device, nvmlPlatformInfo_t
/// *platformInfo)`: `version` must be `nvmlPlatformInfo_v2` or `_v1` and one the fixture's
/// `platform.versions` lists, else `ARGUMENT_VERSION_MISMATCH`; the answer is written in
/// that version's layout (the two are the same 44 bytes under different names).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPlatformInfo(
    device: nvmlDevice_t,
    info: *mut nvmlPlatformInfo_t,
) -> nvmlReturn_t {
    const V1: c_uint = (size_of::<nvmlPlatformInfo_v1_t>() as c_uint) | (1 << 24);
    const V2: c_uint = (size_of::<nvmlPlatformInfo_v2_t>() as c_uint) | (2 << 24);
    guard(|| {
        state::with_gpu("nvmlDeviceGetPlatformInfo", device, |g, _| {
            let p = value(g, Feature::Platform, g.platform.as_ref())?;
            if info.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            // SAFETY: non-null; every version starts with the `unsigned int version` its
            // caller set.
            let version = unsafe { info.cast::<c_uint>().read() };
            let asked = match version {
                V1 => 1,
                V2 => 2,
                _ => return Err(VERSION_MISMATCH),
            };
            if !p.versions.contains(&asked) {
                return Err(VERSION_MISMATCH);
            }
            let guid = p.guid_bytes().map_err(|_| UNKNOWN)?;
            let serial = p.serial_bytes();
            if asked == 2 {
                let v2 = nvmlPlatformInfo_v2_t {
                    version: V2,
                    ibGuid: guid,
                    chassisSerialNumber: serial,
                    slotNumber: p.slot_number,
                    trayIndex: p.tray_index,
                    hostId: p.host_id,
                    peerType: p.peer_type,
                    moduleId: p.module_id,
                };
                // SAFETY: the caller's buffer is a v2 struct, as its version says.
                unsafe { put(info, v2) }
            } else {
                let v1 = nvmlPlatformInfo_v1_t {
                    version: V1,
                    ibGuid: guid,
                    rackGuid: serial,
                    chassisPhysicalSlotNumber: p.slot_number,
                    computeSlotIndex: p.tray_index,
                    nodeIndex: p.host_id,
                    peerType: p.peer_type,
                    moduleId: p.module_id,
                };
                // SAFETY: the caller's buffer is a v1 struct, as its version says.
                unsafe { put(info.cast::<nvmlPlatformInfo_v1_t>(), v1) }
            }
        })
    })
}

/// `nvmlReturn_t nvmlDeviceGetModuleId(nvmlDevice_t device, unsigned int *moduleId)`: the
/// fixture's `module_id`, else its `platform.module_id`, else `NOT_SUPPORTED`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetModuleId(
    device: nvmlDevice_t,
    module_id: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        state::with_gpu("nvmlDeviceGetModuleId", device, |g, _| {
            check(g, Feature::ModuleId)?;
            let id = g
                .module_id
                .or_else(|| g.platform.as_ref().map(|p| c_uint::from(p.module_id)))
                .ok_or(NOT_SUPPORTED)?;
            // SAFETY: NVML contract (module docs).
            unsafe { put(module_id, id) }
        })
    })
}

// ---------------------------------------------------------------------------------------
// The fake's own control

/// `nvmlReturn_t railscopeFakeNvmlSetFixture(const char *path)`: not NVML. Points this
/// loaded copy of the library at a fixture file (NULL: back to `$RAILSCOPE_FAKE_NVML`).
/// Lets tests in one process drive separate copies of the `.so` with separate fixtures.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn railscopeFakeNvmlSetFixture(path: *const c_char) -> nvmlReturn_t {
    guard(|| {
        let path = if path.is_null() {
            None
        } else {
            // SAFETY: non-null; the caller passes a NUL-terminated string.
            let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
            Some(PathBuf::from(OsStr::from_bytes(bytes)))
        };
        state::set_override(path);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_unknown() {
        let code = guard(|| panic!("boom"));
        assert_eq!(code, UNKNOWN);
        assert_eq!(guard(|| Err(NOT_SUPPORTED)), NOT_SUPPORTED);
        assert_eq!(guard(|| Ok(())), SUCCESS);
    }

    #[test]
    fn every_code_has_a_message() {
        assert_eq!(error_string(15), c"GPU is lost");
        assert_eq!(error_string(12345), c"Unknown Error");
    }

    #[test]
    fn link_ids() {
        assert!(matches!(
            link_in_id(32),
            Some((LinkCounter::CrcFlit, Some(0)))
        ));
        assert!(matches!(link_in_id(38), Some((LinkCounter::CrcFlit, None))));
        assert!(matches!(
            link_in_id(119),
            Some((LinkCounter::Recovery, Some(11)))
        ));
        assert!(matches!(
            link_in_id(137),
            Some((LinkCounter::Speed, Some(11)))
        ));
        assert!(link_in_id(91).is_none());
    }

    #[test]
    fn null_outputs_are_invalid_argument() {
        // SAFETY: null pointers are exactly what is being tested; nothing is written.
        unsafe {
            assert_eq!(put::<u32>(std::ptr::null_mut(), 1), Err(INVALID_ARGUMENT));
            assert_eq!(put_str(std::ptr::null_mut(), 8, "x"), Err(INVALID_ARGUMENT));
        }
        let mut buf = [0 as c_char; 4];
        // SAFETY: `buf` has 4 bytes.
        unsafe {
            assert_eq!(put_str(buf.as_mut_ptr(), 4, "abcd"), Err(INSUFFICIENT_SIZE));
            assert_eq!(put_str(buf.as_mut_ptr(), 4, "abc"), Ok(()));
        }
        assert_eq!(buf[3], 0);
    }
}
