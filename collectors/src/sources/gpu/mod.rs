//! The `gpu` source: GPU and NVLink telemetry through NVML (`libnvidia-ml.so.1`, loaded at
//! run time by `nvml-wrapper`). A node without the library reports nothing, once.
//!
//! Isolation: every GPU is read by its own worker thread. A collection asks each idle worker
//! for a reading and waits until its deadline; a GPU whose worker is still inside a call
//! that hangs in the driver is reported `timeout` and not asked again until the call
//! returns, so one wedged GPU costs its own series and never blocks or hides the others.
//! The library is never shut down (a stuck library cannot be), and a lost GPU
//! (`GPU_IS_LOST`, XID 79) is reported as such with the identity it had.
//!
//! XID errors are counted per code from an NVML event set that one more thread waits on.

pub(crate) mod raw;
pub mod types;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

pub use types::*;

use crate::fs::{Fs, Roots};
use crate::source::{
    OptionKind, OptionSpec, OptionValues, Source, SourceBuildError, SourceData, SourceReport,
    SourceSpec,
};

/// The registry entry of this source.
pub const SPEC: SourceSpec = SourceSpec {
    name: "gpu",
    help: "NVIDIA GPUs and NVLinks through NVML: utilization, memory, power, clocks, throttling, ECC, row remapping, PCIe, XID errors, NVLink state, errors and traffic.",
    default_enabled: true,
    options: &[OptionSpec {
        name: "nvml-library",
        help: "The NVML library to load (default libnvidia-ml.so.1, found through the loader's search path).",
        kind: OptionKind::Path,
    }],
    build,
};

/// The library loaded unless `--collector.gpu.nvml-library` says otherwise.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

fn build(
    _: &Roots,
    _: Arc<dyn Fs>,
    options: &OptionValues,
) -> Result<Box<dyn Source>, SourceBuildError> {
    let library = options
        .get("nvml-library")
        .cloned()
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| DEFAULT_NVML_LIBRARY.to_owned());
    Ok(Box::new(GpuSource {
        library,
        runtime: Mutex::new(None),
    }))
}

/// How long a collection waits for GPUs when the scheduler gives no deadline.
const DEFAULT_WAIT: Duration = Duration::from_secs(5);

/// Reads GPUs through NVML.
#[derive(Debug)]
pub struct GpuSource {
    library: String,
    runtime: Mutex<Option<Arc<Runtime>>>,
}

/// NVML, initialised once and never shut down.
static NVML: OnceLock<Nvml> = OnceLock::new();

struct Worker {
    requests: mpsc::Sender<mpsc::Sender<Gpu>>,
    busy: Arc<AtomicBool>,
    /// The last identity read, kept for a GPU that times out or is lost.
    identity: Arc<Mutex<types::Identity>>,
}

struct Runtime {
    workers: Vec<Worker>,
    xid: Arc<Mutex<HashMap<(u32, u64), u64>>>,
    driver_version: Option<String>,
    cuda_version: Option<String>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("gpus", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl GpuSource {
    /// A source loading `library`.
    pub fn new(library: impl Into<String>) -> Self {
        GpuSource {
            library: library.into(),
            runtime: Mutex::new(None),
        }
    }

    fn runtime(&self) -> Result<Arc<Runtime>, String> {
        let mut slot = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rt) = slot.as_ref() {
            return Ok(Arc::clone(rt));
        }
        let nvml = match NVML.get() {
            Some(n) => n,
            None => {
                let nvml = Nvml::builder()
                    .lib_path(OsStr::new(&self.library))
                    .init()
                    .map_err(|e| describe_init_error(&self.library, &e))?;
                NVML.get_or_init(|| nvml)
            }
        };
        let count = nvml
            .device_count()
            .map_err(|e| format!("nvmlDeviceGetCount failed: {e}"))?;
        let xid = Arc::new(Mutex::new(HashMap::new()));
        let workers = (0..count).map(|index| spawn_worker(nvml, index)).collect();
        spawn_xid_listener(nvml, count, Arc::clone(&xid));
        let cuda_version = nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, v % 1000 / 10));
        let rt = Arc::new(Runtime {
            workers,
            xid,
            driver_version: nvml.sys_driver_version().ok(),
            cuda_version,
        });
        *slot = Some(Arc::clone(&rt));
        Ok(rt)
    }
}

fn describe_init_error(library: &str, err: &NvmlError) -> String {
    match err {
        NvmlError::LibloadingError(_) => format!("{library} cannot be loaded: {err}"),
        other => format!("nvmlInit on {library} failed: {other}"),
    }
}

impl Source for GpuSource {
    fn name(&self) -> &'static str {
        SPEC.name
    }

    fn collect(&self) -> SourceReport {
        self.collect_until(Instant::now() + DEFAULT_WAIT)
    }

    fn collect_until(&self, deadline: Instant) -> SourceReport {
        let rt = match self.runtime() {
            Ok(rt) => rt,
            Err(reason) => {
                return SourceReport {
                    data: Some(SourceData::Gpu(Snapshot::default())),
                    errors: Vec::new(),
                    absent: Some(reason),
                };
            }
        };
        let (tx, rx) = mpsc::channel::<Gpu>();
        let mut asked = vec![false; rt.workers.len()];
        for (i, worker) in rt.workers.iter().enumerate() {
            if !worker.busy.swap(true, Ordering::AcqRel) {
                asked[i] = worker.requests.send(tx.clone()).is_ok();
            }
        }
        drop(tx);
        let mut gpus: Vec<Option<Gpu>> = vec![None; rt.workers.len()];
        let mut pending = asked.iter().filter(|a| **a).count();
        while pending > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(gpu) => {
                    let i = gpu.index as usize;
                    if i < gpus.len() {
                        gpus[i] = Some(gpu);
                    }
                    pending -= 1;
                }
                Err(_) => break,
            }
        }
        let xid = rt.xid.lock().map(|m| m.clone()).unwrap_or_default();
        let gpus = gpus
            .into_iter()
            .enumerate()
            .map(|(i, gpu)| {
                let mut gpu = gpu.unwrap_or_else(|| Gpu {
                    index: i as u32,
                    state: GpuState::Timeout,
                    identity: rt.workers[i]
                        .identity
                        .lock()
                        .map(|id| id.clone())
                        .unwrap_or_default(),
                    ..Gpu::default()
                });
                let mut codes: Vec<(u64, u64)> = xid
                    .iter()
                    .filter(|((g, _), _)| *g == i as u32)
                    .map(|((_, x), n)| (*x, *n))
                    .collect();
                codes.sort_unstable();
                gpu.xid_errors = codes;
                gpu
            })
            .collect();
        SourceReport {
            data: Some(SourceData::Gpu(Snapshot {
                driver_version: rt.driver_version.clone(),
                cuda_version: rt.cuda_version.clone(),
                gpus,
            })),
            errors: Vec::new(),
            absent: None,
        }
    }
}

fn spawn_worker(nvml: &'static Nvml, index: u32) -> Worker {
    let (tx, rx) = mpsc::channel::<mpsc::Sender<Gpu>>();
    let busy = Arc::new(AtomicBool::new(false));
    let identity = Arc::new(Mutex::new(types::Identity::default()));
    let (b, id) = (Arc::clone(&busy), Arc::clone(&identity));
    let spawned = std::thread::Builder::new()
        .name(format!("railscope-gpu{index}"))
        .spawn(move || {
            while let Ok(reply) = rx.recv() {
                let known = id.lock().map(|i| i.clone()).unwrap_or_default();
                let read = std::panic::AssertUnwindSafe(|| read_gpu(nvml, index, &known));
                let gpu = std::panic::catch_unwind(read).unwrap_or_else(|_| Gpu {
                    index,
                    state: GpuState::Error,
                    identity: known.clone(),
                    ..Gpu::default()
                });
                if gpu.state == GpuState::Ok
                    && let Ok(mut slot) = id.lock()
                {
                    *slot = gpu.identity.clone();
                }
                b.store(false, Ordering::Release);
                let _ = reply.send(gpu);
            }
        });
    if spawned.is_err() {
        busy.store(true, Ordering::Release); // never asked; reported as timeout
    }
    Worker {
        requests: tx,
        busy,
        identity,
    }
}

fn spawn_xid_listener(
    nvml: &'static Nvml,
    count: u32,
    counts: Arc<Mutex<HashMap<(u32, u64), u64>>>,
) {
    // One event set and one waiting thread per GPU: nvml-wrapper releases a set whose
    // registration fails, and a GPU that hangs in the driver must not hold up the XIDs of
    // the others.
    for index in 0..count {
        let counts = Arc::clone(&counts);
        let _ = std::thread::Builder::new()
            .name(format!("railscope-xid{index}"))
            .spawn(move || {
                let (Ok(device), Ok(set)) = (nvml.device_by_index(index), nvml.create_event_set())
                else {
                    return;
                };
                let Ok(set) = device.register_events(EventTypes::CRITICAL_XID_ERROR, set) else {
                    return;
                };
                loop {
                    match set.wait(1000) {
                        Ok(event) => {
                            if let Some(XidError::Value(xid)) = event.event_data
                                && let Ok(mut map) = counts.lock()
                            {
                                *map.entry((index, xid)).or_insert(0) += 1;
                            }
                        }
                        Err(NvmlError::Timeout) => {}
                        Err(_) => std::thread::sleep(Duration::from_secs(1)),
                    }
                }
            });
    }
}

/// NVML field ids read per link (`nvml.h`).
const FI_NVLINK_LINK_COUNT: u32 = 91;
const FI_NVLINK_THROUGHPUT_DATA_TX: u32 = 138;
const FI_NVLINK_THROUGHPUT_DATA_RX: u32 = 139;

pub(crate) fn pci_to_sysfs(bus_id: &str) -> String {
    // NVML prints `00000000:18:00.0`; sysfs `0000:18:00.0`.
    match bus_id.split_once(':') {
        Some((domain, rest)) => match u32::from_str_radix(domain, 16) {
            Ok(d) => format!("{d:04x}:{}", rest.to_ascii_lowercase()),
            Err(_) => bus_id.to_ascii_lowercase(),
        },
        None => bus_id.to_ascii_lowercase(),
    }
}

/// Reads everything of one GPU. Runs on the GPU's worker thread.
pub fn read_gpu(nvml: &Nvml, index: u32, known: &types::Identity) -> Gpu {
    let mut gpu = Gpu {
        index,
        identity: known.clone(),
        ..Gpu::default()
    };
    let device = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(NvmlError::GpuLost) => {
            gpu.state = GpuState::Lost;
            return gpu;
        }
        Err(e) => {
            gpu.state = GpuState::Error;
            gpu.failures
                .push(("nvmlDeviceGetHandleByIndex", e.to_string()));
            return gpu;
        }
    };
    let mut calls = Calls::default();
    let identity = types::Identity {
        uuid: calls.ok("uuid", device.uuid()),
        name: calls.ok("name", device.name()),
        serial: calls.ok("serial", device.serial()),
        pci_address: calls
            .ok("pci_info", device.pci_info())
            .map(|p| pci_to_sysfs(&p.bus_id)),
        numa_node: calls.ok("numa_node", device.numa_node_id()),
    };
    if identity.uuid.is_some() {
        gpu.identity = identity;
    }
    gpu.persistence_mode = calls.ok("persistence_mode", device.is_in_persistent_mode());
    gpu.utilization = calls
        .ok("utilization", device.utilization_rates())
        .map(|u| (u.gpu, u.memory));
    gpu.memory = calls
        .ok("memory_info", device.memory_info())
        .map(|m| (m.used, m.total));
    gpu.temperature_c = calls.ok("temperature", device.temperature(TemperatureSensor::Gpu));
    gpu.power_mw = calls.ok("power_usage", device.power_usage());
    gpu.power_limit_mw = calls.ok("enforced_power_limit", device.enforced_power_limit());
    for (name, clock) in [("sm", Clock::SM), ("memory", Clock::Memory)] {
        let cur = calls.ok("clock_info", device.clock_info(clock));
        let max = calls.ok("max_clock_info", device.max_clock_info(clock));
        if cur.is_some() || max.is_some() {
            gpu.clocks.push((name, cur, max));
        }
    }
    if let Some(reasons) = calls.ok(
        "current_throttle_reasons",
        device.current_throttle_reasons(),
    ) {
        gpu.throttle = THROTTLE_REASONS
            .iter()
            .map(|(name, bit)| (*name, reasons.contains(*bit)))
            .collect();
    }
    for (kind, error) in [
        ("corrected", MemoryError::Corrected),
        ("uncorrected", MemoryError::Uncorrected),
    ] {
        for (scope, counter) in [
            ("volatile", EccCounter::Volatile),
            ("aggregate", EccCounter::Aggregate),
        ] {
            if let Some(n) = calls.ok("total_ecc_errors", device.total_ecc_errors(error, counter)) {
                gpu.ecc.push((kind, scope, n));
            }
        }
    }
    for (cause, c) in [
        (
            "single_bit_ecc",
            RetirementCause::MultipleSingleBitEccErrors,
        ),
        ("double_bit_ecc", RetirementCause::DoubleBitEccError),
    ] {
        if let Some(pages) = calls.ok("retired_pages", device.retired_pages(c)) {
            gpu.retired_pages.push((cause, pages.len() as u64));
        }
    }
    let rows = raw::remapped_rows(nvml, &device);
    gpu.remapped_rows = calls.code("nvmlDeviceGetRemappedRows", rows);
    let link = (
        calls.ok("current_pcie_link_gen", device.current_pcie_link_gen()),
        calls.ok("max_pcie_link_gen", device.max_pcie_link_gen()),
        calls.ok("current_pcie_link_width", device.current_pcie_link_width()),
        calls.ok("max_pcie_link_width", device.max_pcie_link_width()),
    );
    if let (Some(a), Some(b), Some(c), Some(d)) = link {
        gpu.pcie_link = Some((a, b, c, d));
    }
    gpu.pcie_replays = calls.ok("pcie_replay_counter", device.pcie_replay_counter());
    let tx = calls.ok(
        "pcie_throughput",
        device.pcie_throughput(PcieUtilCounter::Send),
    );
    let rx = calls.ok(
        "pcie_throughput",
        device.pcie_throughput(PcieUtilCounter::Receive),
    );
    gpu.pcie_throughput_kbps = tx.zip(rx);
    let fabric = raw::fabric_info(nvml, &device);
    gpu.fabric = calls
        .code("nvmlDeviceGetGpuFabricInfo", fabric)
        .filter(|(state, _)| *state != 0);

    // NVLinks: how many from the link-count field, not a compiled-in constant.
    let links = match raw::field_values(nvml, &device, &[(FI_NVLINK_LINK_COUNT, 0)]) {
        Ok(v) => v.first().and_then(|r| r.ok()).map_or(0, |n| n as u32),
        Err(_) => 0,
    };
    for link in 0..links.min(64) {
        let wrapper = device.link_wrapper_for(link);
        let mut nv = NvLink {
            link,
            ..NvLink::default()
        };
        nv.active = calls.ok("nvlink_state", wrapper.is_active());
        if nv.active.is_none() {
            continue; // NotSupported for this link
        }
        nv.version = calls.ok("nvlink_version", wrapper.version());
        nv.remote_pci_address = calls
            .ok("nvlink_remote_pci_info", wrapper.remote_pci_info())
            .map(|p| pci_to_sysfs(&p.bus_id));
        nv.remote_type = raw::remote_device_type(nvml, &device, link)
            .ok()
            .map(|t| match t {
                0 => "gpu",
                1 => "ibmnpu",
                2 => "switch",
                _ => "unknown",
            });
        for (name, counter) in [
            ("replay", ErrorCounter::DlReplay),
            ("recovery", ErrorCounter::DlRecovery),
            ("crc_flit", ErrorCounter::DlCrcFlit),
            ("crc_data", ErrorCounter::DlCrcData),
        ] {
            if let Some(v) = calls.ok("nvlink_error_counter", wrapper.error_counter(counter)) {
                nv.errors.push((name, v));
            }
        }
        if let Ok(values) = raw::field_values(
            nvml,
            &device,
            &[
                (FI_NVLINK_THROUGHPUT_DATA_TX, link),
                (FI_NVLINK_THROUGHPUT_DATA_RX, link),
            ],
        ) {
            // The throughput fields count KiB.
            nv.tx_bytes = values.first().and_then(|r| r.ok()).map(|v| v * 1024.0);
            nv.rx_bytes = values.get(1).and_then(|r| r.ok()).map(|v| v * 1024.0);
        }
        gpu.nvlinks.push(nv);
    }
    gpu.failures = calls.failures;
    if calls.lost {
        gpu.state = GpuState::Lost;
    }
    gpu
}

/// Outcomes of the NVML calls of one reading: NotSupported is no value, GPU_IS_LOST marks
/// the GPU lost, anything else is recorded.
#[derive(Default)]
struct Calls {
    lost: bool,
    failures: Vec<(&'static str, String)>,
}

impl Calls {
    fn ok<T>(&mut self, what: &'static str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(NvmlError::NotSupported) => None,
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                None
            }
            Err(e) => {
                self.failures.push((what, e.to_string()));
                None
            }
        }
    }

    fn code<T>(&mut self, what: &'static str, r: Result<T, u32>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(3 | 13) => None, // NOT_SUPPORTED, FUNCTION_NOT_FOUND
            Err(15) => {
                self.lost = true;
                None
            }
            Err(code) => {
                self.failures.push((what, format!("NVML error {code}")));
                None
            }
        }
    }
}

/// Every clock throttle (event) reason, as exported.
pub const THROTTLE_REASONS: &[(&str, ThrottleReasons)] = &[
    ("gpu_idle", ThrottleReasons::GPU_IDLE),
    (
        "applications_clocks_setting",
        ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
    ),
    ("sw_power_cap", ThrottleReasons::SW_POWER_CAP),
    ("hw_slowdown", ThrottleReasons::HW_SLOWDOWN),
    ("sync_boost", ThrottleReasons::SYNC_BOOST),
    ("sw_thermal_slowdown", ThrottleReasons::SW_THERMAL_SLOWDOWN),
    ("hw_thermal_slowdown", ThrottleReasons::HW_THERMAL_SLOWDOWN),
    (
        "hw_power_brake_slowdown",
        ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
    ),
    (
        "display_clock_setting",
        ThrottleReasons::DISPLAY_CLOCK_SETTING,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_ids_in_sysfs_form() {
        assert_eq!(pci_to_sysfs("00000000:18:00.0"), "0000:18:00.0");
        assert_eq!(pci_to_sysfs("00000000:AB:00.0"), "0000:ab:00.0");
        assert_eq!(pci_to_sysfs("00010000:01:00.0"), "10000:01:00.0");
    }

    #[test]
    fn a_missing_library_is_absent_not_an_error() {
        let source = GpuSource::new("libnvidia-ml-that-does-not-exist.so.1");
        let report = source.collect();
        assert!(report.errors.is_empty());
        assert!(
            report
                .absent
                .as_deref()
                .is_some_and(|r| r.contains("cannot be loaded")),
            "{:?}",
            report.absent
        );
    }
}
