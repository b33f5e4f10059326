//! The `gpu` source: GPU and NVLink telemetry through NVML (`libnvidia-ml.so.1`, loaded at
//! run time by `nvml-wrapper`). A node without the library reports nothing, once.
//!
//! Isolation: every GPU is one unit of [`Run::each`], all GPUs in parallel. A GPU whose
//! call hangs in the driver is reported `timeout` at the scrape's deadline and is not asked
//! again until the call returns, so one wedged GPU costs its own series and never blocks or
//! hides the others. The library is never shut down (a stuck library cannot be), and a lost
//! GPU (`GPU_IS_LOST`, XID 79) is reported as such with the identity it had. A GPU that
//! becomes lost or unreadable is logged once when it starts and once when it ends; NVML
//! calls that fail (other than `NOT_SUPPORTED`) are counted as the collector's errors.
//!
//! Cost: a scrape makes only the calls that are cheap on a real driver (2–30 µs each on an
//! H200, `shared/reference/h200-nvml/nvml-profile.json`). The rest is kept per GPU between
//! scrapes ([`kept`]): static values (identity, max clocks at 1.7 ms of CPU per call, max
//! PCIe link, NVLink count) are read once and again every [`STATIC_REFRESH`] or when a GPU
//! that was lost, timed out or failed answers; the PCIe replay counter (0.22 ms) every
//! [`REPLAYS_EVERY`]. PCIe traffic (`nvmlDeviceGetPcieThroughput` blocks 21 ms per
//! direction) is read by a background sampler ([`sampler`]) and a scrape copies its last
//! reading.
//!
//! Beyond health: energy, reserved memory, HBM temperature, encoder and decoder, the
//! clock-event and violation counters, NVLink-C2C and the NVLink5 counters ([`counters`]);
//! activity through GPM, per GPU and per MIG GPU instance ([`gpm`]); MIG mode and devices
//! ([`mig`]); fabric clique, cluster and health. A call or field a GPU answers
//! `NOT_SUPPORTED` is not asked again until the statics are read again.
//!
//! XID errors are counted per code from one NVML event set per GPU, each waited on by a
//! thread of its own. Whether the set could be registered is exported per GPU: "no XIDs"
//! and "cannot see XIDs" are different things. A registration that fails is logged once and
//! tried again every [`XID_RETRY`].

mod counters;
pub mod gpm;
pub mod kept;
mod mig;
#[cfg(test)]
mod proptests;
pub(crate) mod raw;
pub mod sampler;
pub mod types;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

pub use kept::{ENERGY_EVERY, FEC_HISTORY_EVERY, REPLAYS_EVERY, STATIC_REFRESH, VIOLATIONS_EVERY};
pub use types::*;

use gpm::GpmState;
use kept::{Kept, LinkIdentity, Statics};
use sampler::Sampler;

use crate::error::{CollectError, ErrorKind};
use crate::run::{Run, Unit};
use crate::source::{Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "gpu",
    help: "NVIDIA GPUs and NVLinks through NVML: utilization, memory, power, clocks, throttling, ECC, row remapping, PCIe, XID errors, NVLink state, errors and traffic.",
    default_enabled: true,
    options: &[
        OptionSpec {
            name: "nvml-library",
            help: "The NVML library to load (default libnvidia-ml.so.1, found through the loader's search path).",
            kind: OptionKind::Path,
        },
        // `OptionKind` has no duration kind; `build` validates the value.
        OptionSpec {
            name: "pcie-throughput-interval",
            help: "The shortest time between two of NVML's 20 ms PCIe throughput samples (TX and RX, 21 ms each) that the background sampler takes of a GPU without PCIe byte counters, once a scrape has read the last (default 5s, at least 1s); 0 turns PCIe traffic off. Byte counters are read every second, faster under traffic.",
            kind: OptionKind::Path,
        },
        OptionSpec {
            name: "fec-history-interval",
            help: "How often the NVLink5 FEC history (railscope_nvlink_fec_history_total, 16 field ids per active link) is read (default 60s, at least 1s); 0 turns it off. The last bins read are exported in between.",
            kind: OptionKind::Path,
        },
    ],
};

/// The library loaded unless `--collector.gpu.nvml-library` says otherwise.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// How often a failed XID event registration is tried again.
pub const XID_RETRY: Duration = Duration::from_secs(60);

/// Reads GPUs through NVML.
#[derive(Debug)]
pub struct GpuSource {
    library: String,
    /// `--collector.gpu.pcie-throughput-interval`; zero turns the PCIe sampler off.
    pcie_interval: Duration,
    /// `--collector.gpu.fec-history-interval`; zero turns the NVLink5 FEC history off.
    fec_history_interval: Duration,
    runtime: Mutex<Option<Arc<Runtime>>>,
    /// The state each GPU had in the last collection, for logging changes once.
    states: Mutex<HashMap<u32, GpuState>>,
}

/// NVML, initialised once and never shut down.
static NVML: OnceLock<Nvml> = OnceLock::new();

/// XID counts and listener states, written by the listener threads.
#[derive(Debug)]
struct Xids {
    counts: Mutex<HashMap<(u32, u64), u64>>,
    /// Per GPU: whether its event set is registered.
    registered: Vec<AtomicBool>,
    /// How many listeners have made their first registration attempt.
    tried: Mutex<u32>,
    tried_cv: std::sync::Condvar,
}

/// How long the first collection waits for the XID listeners' first registration attempts,
/// so that it reports their state rather than a race; a GPU that hangs is not waited for
/// longer.
const XID_FIRST_WAIT: Duration = Duration::from_millis(250);

struct Runtime {
    count: u32,
    /// What is kept of each GPU between collections (static values, the last identity read
    /// for a GPU that times out or is lost, the replay counter), by NVML index. Locked only
    /// to copy in and out, never across an NVML call.
    kept: Vec<Mutex<Kept>>,
    /// Each GPU's GPM samples, by NVML index; locked by the GPU's own reading only.
    gpm: Vec<Mutex<GpmState>>,
    /// The PCIe sampler; `None` when turned off.
    sampler: Option<Arc<Sampler>>,
    xids: Arc<Xids>,
    driver_version: Option<String>,
    cuda_version: Option<String>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("gpus", &self.count)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    fn kept(&self, index: u32) -> Kept {
        self.kept
            .get(index as usize)
            .map(|k| lock(k).clone())
            .unwrap_or_default()
    }

    fn keep(&self, index: u32, kept: Kept) {
        if let Some(k) = self.kept.get(index as usize) {
            *lock(k) = kept;
        }
    }

    /// The GPU did not answer in this collection: read everything again when it does.
    fn invalidate(&self, index: u32) {
        if let Some(k) = self.kept.get(index as usize) {
            lock(k).invalidate();
        }
        if let Some(g) = self.gpm.get(index as usize)
            && let Ok(mut g) = g.try_lock()
        {
            g.reset();
        }
        if let Some(s) = &self.sampler {
            s.forget(index);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuSource {
    /// A source loading `library`, sampling PCIe throughput every `pcie_interval` (zero:
    /// not at all).
    pub fn new(library: impl Into<String>, pcie_interval: Duration) -> Self {
        GpuSource {
            library: library.into(),
            pcie_interval,
            fec_history_interval: FEC_HISTORY_EVERY,
            runtime: Mutex::new(None),
            states: Mutex::new(HashMap::new()),
        }
    }

    /// The same source, reading the NVLink5 FEC history every `interval` (zero: never).
    pub fn with_fec_history_interval(mut self, interval: Duration) -> Self {
        self.fec_history_interval = interval;
        self
    }

    fn runtime(&self) -> Result<(&'static Nvml, Arc<Runtime>), String> {
        let mut slot = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
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
        if let Some(rt) = slot.as_ref() {
            return Ok((nvml, Arc::clone(rt)));
        }
        let count = nvml
            .device_count()
            .map_err(|e| format!("nvmlDeviceGetCount failed: {e}"))?;
        let xids = Arc::new(Xids {
            counts: Mutex::new(HashMap::new()),
            registered: (0..count).map(|_| AtomicBool::new(false)).collect(),
            tried: Mutex::new(0),
            tried_cv: std::sync::Condvar::new(),
        });
        spawn_xid_listeners(nvml, count, &xids);
        let tried = xids.tried.lock().unwrap_or_else(|e| e.into_inner());
        drop(
            xids.tried_cv
                .wait_timeout_while(tried, XID_FIRST_WAIT, |n| *n < count)
                .unwrap_or_else(|e| e.into_inner()),
        );
        let cuda_version = nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, v % 1000 / 10));
        let rt = Arc::new(Runtime {
            count,
            kept: (0..count).map(|_| Mutex::new(Kept::default())).collect(),
            gpm: (0..count)
                .map(|_| Mutex::new(GpmState::default()))
                .collect(),
            sampler: Sampler::start(nvml, count, self.pcie_interval),
            xids,
            driver_version: nvml.sys_driver_version().ok(),
            cuda_version,
        });
        *slot = Some(Arc::clone(&rt));
        Ok((nvml, rt))
    }

    /// Logs a GPU's change into or out of `lost` or `error`, once each way.
    fn log_change(&self, gpu: &Gpu) {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        let before = states.insert(gpu.index, gpu.state).unwrap_or(GpuState::Ok);
        let uuid = gpu.identity.uuid.as_deref().unwrap_or_default();
        let pci = gpu.identity.pci_address.as_deref().unwrap_or_default();
        match (before, gpu.state) {
            (GpuState::Lost, GpuState::Lost) | (GpuState::Error, GpuState::Error) => {}
            (_, GpuState::Lost) => tracing::error!(
                collector = SPEC.name,
                gpu = gpu.index,
                uuid,
                pci_address = pci,
                "A GPU fell off the bus (NVML_ERROR_GPU_IS_LOST, XID 79); only its identity is exported."
            ),
            (_, GpuState::Error) => tracing::warn!(
                collector = SPEC.name,
                gpu = gpu.index,
                uuid,
                pci_address = pci,
                "NVML cannot open a GPU; only its identity is exported."
            ),
            (GpuState::Lost | GpuState::Error, GpuState::Ok) => tracing::info!(
                collector = SPEC.name,
                gpu = gpu.index,
                uuid,
                pci_address = pci,
                was = before.as_str(),
                "A GPU that was lost or unreadable is read again."
            ),
            _ => {}
        }
    }
}

fn describe_init_error(library: &str, err: &NvmlError) -> String {
    match err {
        NvmlError::LibloadingError(_) => format!("{library} cannot be loaded: {err}"),
        other => format!("nvmlInit on {library} failed: {other}"),
    }
}

impl Source for GpuSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let options = from.options;
        let library = options
            .get("nvml-library")
            .cloned()
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| DEFAULT_NVML_LIBRARY.to_owned());
        let pcie_interval = match options.get("pcie-throughput-interval") {
            None => sampler::DEFAULT_INTERVAL,
            Some(text) => sampler::parse_interval(text).map_err(|reason| SourceBuildError {
                option: "pcie-throughput-interval".to_owned(),
                reason,
            })?,
        };
        let fec_history_interval = match options.get("fec-history-interval") {
            None => FEC_HISTORY_EVERY,
            Some(text) => sampler::parse_interval_or_off(
                text,
                "0 turns the FEC history off",
                "16 field ids per active link",
            )
            .map_err(|reason| SourceBuildError {
                option: "fec-history-interval".to_owned(),
                reason,
            })?,
        };
        Ok(GpuSource::new(library, pcie_interval).with_fec_history_interval(fec_history_interval))
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let (nvml, rt) = match self.runtime() {
            Ok(pair) => pair,
            Err(reason) => return Report::absent(Snapshot::default(), reason),
        };
        // A GPU on which a sampler call hangs is not asked again by the scrape either: one
        // wedged GPU holds one thread, and it is `timeout` as when a scrape's call hangs.
        let sampler_busy = rt.sampler.as_ref().map(|s| s.busy()).unwrap_or_default();
        let keys: Vec<String> = (0..rt.count)
            .filter(|i| !sampler_busy.contains(i))
            .map(|i| format!("gpu{i}"))
            .collect();
        let width = keys.len();
        let fec_every = self.fec_history_interval;
        let unit_rt = Arc::clone(&rt);
        let units = run.each(keys, width, move |key| {
            let index = key.trim_start_matches("gpu").parse().unwrap_or(u32::MAX);
            read_gpu(
                nvml,
                index,
                unit_rt.kept(index),
                unit_rt.gpm.get(index as usize),
                unit_rt.sampler.as_deref(),
                fec_every,
            )
        });
        let mut units: HashMap<u32, Unit<(Gpu, Kept)>> = units
            .into_iter()
            .map(|(key, unit)| {
                let index = key.trim_start_matches("gpu").parse().unwrap_or(u32::MAX);
                (index, unit)
            })
            .collect();
        let xid = rt.xids.counts.lock().map(|m| m.clone()).unwrap_or_default();
        let mut errors = rt
            .sampler
            .as_ref()
            .map(|s| s.take_errors())
            .unwrap_or_default();
        let mut gpus = Vec::with_capacity(rt.count as usize);
        for index in 0..rt.count {
            let key = format!("gpu{index}");
            let unit = units.remove(&index).unwrap_or(Unit::Late {
                running_for: Duration::ZERO,
            });
            let mut gpu = match unit {
                Unit::Done((gpu, kept)) => {
                    rt.keep(index, kept);
                    if gpu.state != GpuState::Ok {
                        rt.invalidate(index);
                    }
                    gpu
                }
                Unit::Late { .. } | Unit::NotStarted => {
                    rt.invalidate(index);
                    Gpu {
                        index,
                        state: GpuState::Timeout,
                        identity: rt.kept(index).identity(),
                        ..Gpu::default()
                    }
                }
                Unit::Panicked => {
                    rt.invalidate(index);
                    Gpu {
                        index,
                        state: GpuState::Error,
                        identity: rt.kept(index).identity(),
                        ..Gpu::default()
                    }
                }
            };
            for (call, detail) in &gpu.failures {
                errors.push(CollectError::nvml(
                    Some(&key),
                    call,
                    ErrorKind::Io,
                    detail.clone(),
                ));
            }
            self.log_change(&gpu);
            let mut codes: Vec<(u64, u64)> = xid
                .iter()
                .filter(|((g, _), _)| *g == index)
                .map(|((_, x), n)| (*x, *n))
                .collect();
            codes.sort_unstable();
            gpu.xid_errors = codes;
            gpu.xid_events_registered = rt
                .xids
                .registered
                .get(index as usize)
                .is_some_and(|r| r.load(Ordering::Acquire));
            gpus.push(gpu);
        }
        Report::new(
            Snapshot {
                driver_version: rt.driver_version.clone(),
                cuda_version: rt.cuda_version.clone(),
                gpus,
            },
            errors,
        )
    }
}

fn spawn_xid_listeners(nvml: &'static Nvml, count: u32, xids: &Arc<Xids>) {
    // One event set and one waiting thread per GPU: nvml-wrapper releases a set whose
    // registration fails, and a GPU that hangs in the driver must not hold up the XIDs of
    // the others.
    for index in 0..count {
        let xids = Arc::clone(xids);
        let spawned = std::thread::Builder::new()
            .name(format!("railscope-xid{index}"))
            .spawn(move || xid_listener(nvml, index, &xids));
        if let Err(err) = spawned {
            tracing::error!(collector = SPEC.name, gpu = index, error = %err, "Cannot start the XID listener thread; XIDs on this GPU will not be seen.");
        }
    }
}

/// Registers for XID events on GPU `index` (trying again every [`XID_RETRY`] until it
/// works) and counts the events.
fn xid_listener(nvml: &'static Nvml, index: u32, xids: &Xids) {
    let mut failed_before = false;
    let mut first = true;
    let first_done = |first: &mut bool| {
        if std::mem::take(first) {
            *xids.tried.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            xids.tried_cv.notify_all();
        }
    };
    let set = loop {
        let registered = nvml.device_by_index(index).and_then(|device| {
            let set = nvml.create_event_set()?;
            device
                .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                .map_err(|e| e.error)
        });
        match registered {
            Ok(set) => break set,
            Err(err) => {
                first_done(&mut first);
                if !failed_before {
                    tracing::warn!(
                        collector = SPEC.name,
                        gpu = index,
                        error = %err,
                        retry_seconds = XID_RETRY.as_secs(),
                        "Cannot register for XID events; XIDs on this GPU are not seen until it works (railscope_gpu_xid_events_registered 0)."
                    );
                    failed_before = true;
                }
                std::thread::sleep(XID_RETRY);
            }
        }
    };
    if failed_before {
        tracing::info!(
            collector = SPEC.name,
            gpu = index,
            "Registered for XID events after earlier failures; XIDs on this GPU are seen again."
        );
    }
    if let Some(flag) = xids.registered.get(index as usize) {
        flag.store(true, Ordering::Release);
    }
    first_done(&mut first);
    loop {
        match set.wait(1000) {
            Ok(event) => {
                if let Some(XidError::Value(xid)) = event.event_data
                    && let Ok(mut map) = xids.counts.lock()
                {
                    *map.entry((index, xid)).or_insert(0) += 1;
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (`nvml.h`; the same id in the v12 and v13
/// numberings). A real H200 on driver 580 answers it (0, none).
const FI_GPU_RECOVERY_ACTION: u32 = 230;

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

/// Reads one GPU at a scrape: what moves, every time; what [`Kept`] holds, when it is due
/// (see [`kept`]); PCIe traffic from the sampler. Runs on the GPU's worker thread; returns
/// the GPU and what to keep of it.
pub(crate) fn read_gpu(
    nvml: &Nvml,
    index: u32,
    mut kept: Kept,
    gpm: Option<&Mutex<GpmState>>,
    sampler: Option<&Sampler>,
    fec_every: Duration,
) -> (Gpu, Kept) {
    let mut gpu = Gpu {
        index,
        identity: kept.identity(),
        ..Gpu::default()
    };
    let device = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(NvmlError::GpuLost) => {
            gpu.state = GpuState::Lost;
            return (gpu, kept);
        }
        Err(e) => {
            gpu.state = GpuState::Error;
            gpu.failures
                .push(("nvmlDeviceGetHandleByIndex", e.to_string()));
            return (gpu, kept);
        }
    };
    let now = Instant::now();
    let plan = kept.plan(now);
    let mut calls = Calls::default();
    if plan.statics {
        let failures_before = calls.failures.len();
        let (mut statics, count_read) = read_statics(nvml, &device, &mut calls);
        let clean = count_read && calls.failures.len() == failures_before && !calls.lost;
        if statics.identity.uuid.is_none() {
            // Keep the identity it had rather than blank it.
            statics.identity = gpu.identity.clone();
        }
        kept.statics.set(Some(statics), now, clean);
        // What the links connect to, and what is not supported, are read again with the
        // statics.
        kept.links.clear();
        kept.forget_unsupported();
        if let Some(g) = gpm.and_then(|g| g.try_lock().ok()).as_deref_mut() {
            g.supported = None;
        }
    }
    let statics = kept.statics.value.clone().unwrap_or_default();
    gpu.identity = statics.identity.clone();
    gpu.c2c_enabled = statics.c2c_enabled;
    gpu.persistence_mode = calls.ok(
        "nvmlDeviceGetPersistenceMode",
        device.is_in_persistent_mode(),
    );
    gpu.utilization = calls
        .ok("nvmlDeviceGetUtilizationRates", device.utilization_rates())
        .map(|u| (u.gpu, u.memory));
    if let Some(m) = calls.ok("nvmlDeviceGetMemoryInfo_v2", device.memory_info()) {
        gpu.memory = Some((m.used, m.total));
        gpu.memory_reserved = Some(m.reserved);
    }
    gpu.codec_utilization = counters::read_codecs(&device, &mut kept, &mut calls);
    gpu.temperature_c = calls.ok(
        "nvmlDeviceGetTemperature",
        device.temperature(TemperatureSensor::Gpu),
    );
    gpu.power_mw = calls.ok("nvmlDeviceGetPowerUsage", device.power_usage());
    gpu.power_limit_mw = calls.ok(
        "nvmlDeviceGetEnforcedPowerLimit",
        device.enforced_power_limit(),
    );
    for ((name, clock), (_, max)) in [("sm", Clock::SM), ("memory", Clock::Memory)]
        .into_iter()
        .zip(statics.max_clocks)
    {
        let cur = calls.ok("nvmlDeviceGetClockInfo", device.clock_info(clock));
        if cur.is_some() || max.is_some() {
            gpu.clocks.push((name, cur, max));
        }
    }
    if let Some(reasons) = calls.ok(
        "nvmlDeviceGetCurrentClocksEventReasons",
        device.current_throttle_reasons(),
    ) {
        gpu.throttle = THROTTLE_REASONS
            .iter()
            .map(|(name, bit)| (*name, reasons.contains(*bit)))
            .collect();
    }
    read_memory_errors(&device, &mut calls, &mut gpu);
    let rows = raw::remapped_rows(nvml, &device);
    gpu.remapped_rows = calls.code("nvmlDeviceGetRemappedRows", rows);
    gpu.recovery_action = read_recovery_action(nvml, &device, &mut calls);
    let link = (
        calls.ok(
            "nvmlDeviceGetCurrPcieLinkGeneration",
            device.current_pcie_link_gen(),
        ),
        statics.max_pcie.0,
        calls.ok(
            "nvmlDeviceGetCurrPcieLinkWidth",
            device.current_pcie_link_width(),
        ),
        statics.max_pcie.1,
    );
    if let (Some(a), Some(b), Some(c), Some(d)) = link {
        gpu.pcie_link = Some((a, b, c, d));
    }
    if plan.replays {
        let failures_before = calls.failures.len();
        let replays = calls.ok(
            "nvmlDeviceGetPcieReplayCounter",
            device.pcie_replay_counter(),
        );
        let clean = calls.failures.len() == failures_before && !calls.lost;
        kept.replays.set(replays, now, clean);
    }
    gpu.pcie_replays = kept.replays.value;
    counters::read(nvml, &device, plan, now, &mut kept, &mut calls, &mut gpu);
    read_fabric(nvml, &device, &mut kept, &mut calls, &mut gpu);
    gpu.mig = mig::read(nvml, &device, &mut kept, &mut calls);
    gpu.processes = counters::unless_unsupported(
        &mut kept,
        &mut calls,
        "nvmlDeviceGetComputeRunningProcesses_v3",
        || device.running_compute_processes(),
    )
    .unwrap_or_default()
    .into_iter()
    .map(|p| (p.pid, p.gpu_instance_id))
    .collect();
    if !calls.lost
        && let Some(mut state) = gpm.and_then(|g| g.try_lock().ok())
    {
        read_activity(nvml, &device, now, &mut state, &mut calls, &mut gpu);
    }

    gpu.nvlinks = read_nvlinks(nvml, &device, statics.nvlink_count, &mut kept, &mut calls);
    let read_fec = kept.fec_history_due(now, fec_every);
    counters::read_nvlink5(
        nvml,
        &device,
        &mut gpu.nvlinks,
        &mut kept,
        &mut calls,
        (read_fec, now),
    );
    if !calls.lost
        && let Some(sampler) = sampler
    {
        sampler.fill(&device, index, &mut gpu, &mut calls, statics.max_pcie);
    }
    gpu.failures = calls.failures;
    if calls.lost {
        gpu.state = GpuState::Lost;
    }
    (gpu, kept)
}

/// Fabric registration, and its clique, cluster and health once completed; a GPU without
/// a fabric (anything but NVSwitch and NVL72 systems) is not asked again until the statics
/// are read.
fn read_fabric(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    kept: &mut Kept,
    calls: &mut Calls,
    gpu: &mut Gpu,
) {
    const CALL: &str = "nvmlDeviceGetGpuFabricInfoV";
    if kept.is_unsupported(CALL) {
        return;
    }
    match raw::fabric_info_v3(nvml, device) {
        Ok((0, _, _)) | Err(3 | 13) => kept.set_unsupported(CALL),
        Ok((state, status, v3)) => {
            gpu.fabric = Some((state, status));
            // Clique and cluster are assigned once registration completed.
            gpu.fabric_v3 = (state == 3).then_some(v3);
        }
        Err(code) => {
            calls.code::<()>(CALL, Err(code));
        }
    }
}

/// GPM activity of the GPU, or of each GPU instance in MIG mode.
fn read_activity(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    now: Instant,
    state: &mut GpmState,
    calls: &mut Calls,
    gpu: &mut Gpu,
) {
    if state.supported.is_none() {
        state.supported = calls.code(
            "nvmlGpmQueryDeviceSupport",
            raw::gpm_supported(nvml, device),
        );
        if state.supported.is_none() && !calls.lost {
            // NOT_SUPPORTED or a driver without GPM: not asked again until the statics.
            state.supported = Some(false);
        }
    }
    gpu.gpm_supported = state.supported;
    if state.supported != Some(true) {
        return;
    }
    let mig_enabled = gpu.mig.as_ref().is_some_and(|m| m.enabled);
    if let Some(mig) = gpu.mig.as_mut().filter(|m| m.enabled) {
        let mut instances: Vec<u32> = mig.devices.iter().map(|d| d.gpu_instance).collect();
        instances.dedup();
        for (gi, result) in state.instances(nvml, device, &instances, now) {
            match result {
                Ok(Some(activity)) => mig.activity.push((gi, activity)),
                Ok(None) => {}
                Err(code) => {
                    calls.code::<()>("nvmlGpmMigSampleGet", Err(code));
                }
            }
        }
    }
    match state.device(nvml, device, now) {
        Ok(activity) => gpu.activity = activity,
        // Whole-GPU samples may not be offered while the GPU is partitioned.
        Err(3) if mig_enabled => {}
        Err(code) => {
            calls.code::<()>("nvmlGpmSampleGet", Err(code));
        }
    }
}

/// Reads what does not change while the driver is loaded; the flag is false when the NVLink
/// count could not be read (other than `NOT_SUPPORTED`), so that it is read again at the
/// next scrape rather than kept at 0 (that failure is not counted as an error, as before).
fn read_statics(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    calls: &mut Calls,
) -> (Statics, bool) {
    let identity = types::Identity {
        uuid: calls.ok("nvmlDeviceGetUUID", device.uuid()),
        name: calls.ok("nvmlDeviceGetName", device.name()),
        serial: calls.ok("nvmlDeviceGetSerial", device.serial()),
        pci_address: calls
            .ok("nvmlDeviceGetPciInfo_v3", device.pci_info())
            .map(|p| pci_to_sysfs(&p.bus_id)),
        numa_node: calls.ok("nvmlDeviceGetNumaNodeId", device.numa_node_id()),
        minor_number: calls.ok("nvmlDeviceGetMinorNumber", device.minor_number()),
        module_id: calls.code("nvmlDeviceGetModuleId", raw::module_id(nvml, device)),
        platform: read_platform(nvml, device, calls),
    };
    let c2c_enabled = calls.code("nvmlDeviceGetC2cModeInfoV", raw::c2c_mode(nvml, device));
    let max_clocks = [("sm", Clock::SM), ("memory", Clock::Memory)].map(|(name, clock)| {
        (
            name,
            calls.ok("nvmlDeviceGetMaxClockInfo", device.max_clock_info(clock)),
        )
    });
    let max_pcie = (
        calls.ok(
            "nvmlDeviceGetMaxPcieLinkGeneration",
            device.max_pcie_link_gen(),
        ),
        calls.ok(
            "nvmlDeviceGetMaxPcieLinkWidth",
            device.max_pcie_link_width(),
        ),
    );
    // How many links from the link-count field, not a compiled-in constant.
    let count = raw::field_values(nvml, device, &[(FI_NVLINK_LINK_COUNT, 0)])
        .and_then(|v| v.first().copied().unwrap_or(Err(3)));
    let (nvlink_count, count_read) = match count {
        Ok(n) => (n as u32, true),
        Err(code) => (0, matches!(code, 3 | 13)), // NOT_SUPPORTED, FUNCTION_NOT_FOUND
    };
    (
        Statics {
            identity,
            max_clocks,
            max_pcie,
            nvlink_count,
            c2c_enabled,
        },
        count_read,
    )
}

/// Where the GPU sits in its rack. Absent, and no error, where the driver has no platform
/// info (`NOT_SUPPORTED` before Blackwell, no symbol in an older library, or neither
/// struct version known to it); an answer whose bytes are malformed is an error of this
/// call alone.
fn read_platform(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    calls: &mut Calls,
) -> Option<Platform> {
    const CALL: &str = "nvmlDeviceGetPlatformInfo";
    // ARGUMENT_VERSION_MISMATCH after both versions: a driver that offers only newer ones.
    let answer = raw::platform_info(nvml, device).map_err(|rc| if rc == 25 { 3 } else { rc });
    match calls.code(CALL, answer)? {
        Ok(platform) => Some(platform),
        Err(malformed) => {
            calls
                .failures
                .push((CALL, format!("malformed answer: {malformed}")));
            None
        }
    }
}

/// ECC error counts and retired pages.
fn read_memory_errors(device: &nvml_wrapper::Device<'_>, calls: &mut Calls, gpu: &mut Gpu) {
    for (kind, error) in [
        ("corrected", MemoryError::Corrected),
        ("uncorrected", MemoryError::Uncorrected),
    ] {
        for (scope, counter) in [
            ("volatile", EccCounter::Volatile),
            ("aggregate", EccCounter::Aggregate),
        ] {
            if let Some(n) = calls.ok(
                "nvmlDeviceGetTotalEccErrors",
                device.total_ecc_errors(error, counter),
            ) {
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
        if let Some(pages) = calls.ok("nvmlDeviceGetRetiredPages", device.retired_pages(c)) {
            gpu.retired_pages.push((cause, pages.len() as u64));
        }
    }
}

/// The driver's recovery action for `device`, read every scrape: it is what tells on-call
/// to reset the GPU or reboot the node after an XID, and it holds until that is done.
fn read_recovery_action(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    calls: &mut Calls,
) -> Option<u32> {
    let values = calls.code(
        "nvmlDeviceGetFieldValues",
        raw::field_values(nvml, device, &[(FI_GPU_RECOVERY_ACTION, 0)]),
    )?;
    let value = calls.code(
        "nvmlDeviceGetFieldValues(GPU_RECOVERY_ACTION)",
        values.into_iter().next()?,
    )?;
    (value >= 0.0 && value <= f64::from(u32::MAX)).then_some(value as u32)
}

/// Every NVLink of `device` that NVML knows: `links` of them (field 91, kept static).
fn read_nvlinks(
    nvml: &Nvml,
    device: &nvml_wrapper::Device<'_>,
    links: u32,
    kept: &mut Kept,
    calls: &mut Calls,
) -> Vec<NvLink> {
    let mut nvlinks = Vec::new();
    for link in 0..links.min(64) {
        let wrapper = device.link_wrapper_for(link);
        let mut nv = NvLink {
            link,
            ..NvLink::default()
        };
        nv.active = calls.ok("nvmlDeviceGetNvLinkState", wrapper.is_active());
        if nv.active.is_none() {
            continue; // NotSupported for this link
        }
        let identity = match kept.link(link) {
            Some(known) if nv.active == Some(true) => known.clone(),
            _ => {
                let failures_before = calls.failures.len();
                let identity = LinkIdentity {
                    version: calls.ok("nvmlDeviceGetNvLinkVersion", wrapper.version()),
                    remote_pci_address: calls
                        .ok(
                            "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                            wrapper.remote_pci_info(),
                        )
                        .map(|p| pci_to_sysfs(&p.bus_id)),
                    remote_type: raw::remote_device_type(nvml, device, link).ok().map(
                        |t| match t {
                            0 => "gpu",
                            1 => "ibmnpu",
                            2 => "switch",
                            _ => "unknown",
                        },
                    ),
                };
                // Kept while the link is up and the calls did not fail.
                let clean = calls.failures.len() == failures_before && !calls.lost;
                kept.set_link(
                    link,
                    (clean && nv.active == Some(true)).then(|| identity.clone()),
                );
                identity
            }
        };
        nv.version = identity.version;
        nv.remote_pci_address = identity.remote_pci_address;
        nv.remote_type = identity.remote_type;
        for (name, counter) in [
            ("replay", ErrorCounter::DlReplay),
            ("recovery", ErrorCounter::DlRecovery),
            ("crc_flit", ErrorCounter::DlCrcFlit),
            ("crc_data", ErrorCounter::DlCrcData),
        ] {
            if let Some(v) = calls.ok(
                "nvmlDeviceGetNvLinkErrorCounter",
                wrapper.error_counter(counter),
            ) {
                nv.errors.push((name, v));
            }
        }
        if let Ok(values) = raw::field_values(
            nvml,
            device,
            &[
                (FI_NVLINK_THROUGHPUT_DATA_TX, link),
                (FI_NVLINK_THROUGHPUT_DATA_RX, link),
            ],
        ) {
            // The throughput fields count KiB (unsigned 64-bit values; exact as doubles up to
            // 2^53 KiB, 8 EiB).
            let bytes = |v: f64| (v.max(0.0) as u64).saturating_mul(1024);
            nv.tx_bytes = values.first().and_then(|r| r.ok()).map(bytes);
            nv.rx_bytes = values.get(1).and_then(|r| r.ok()).map(bytes);
        }
        nvlinks.push(nv);
    }
    nvlinks
}

/// Outcomes of the NVML calls of one reading: NotSupported is no value, GPU_IS_LOST marks
/// the GPU lost, anything else is recorded.
#[derive(Default)]
pub(crate) struct Calls {
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
        let source = Arc::new(GpuSource::new(
            "libnvidia-ml-that-does-not-exist.so.1",
            sampler::DEFAULT_INTERVAL,
        ));
        let work = crate::run::Work::new("gpu", None);
        let deadline =
            crate::run::Deadline::new(std::time::Instant::now() + Duration::from_secs(5));
        let report = source.collect(&Run::new(&deadline, &work));
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
