//! A fake `libnvidia-ml.so` for testing railscope's `gpu` source on machines without a GPU.
//!
//! The crate builds two things from one source:
//!
//! * **`libnvidia_ml_fake.so`** (the `cdylib`), which exports the NVML C functions that
//!   `nvml-wrapper` 0.13 resolves by name with `dlsym` (see [`EXPORTED_SYMBOLS`]). Point
//!   `Nvml::builder().lib_path(..)`, or the agent's `--collector.gpu.nvml-library`, at it.
//! * an **rlib** with the fixture schema ([`fixture::Fixture`]) and [`library_path`], for
//!   tests that write fixtures and need to find the `.so`.
//!
//! # Fixtures
//!
//! The library answers from a JSON fixture (schema: [`fixture`], examples and what they
//! model: `fixtures/README.md`). The file is named by the environment variable
//! [`FIXTURE_ENV`] (`RAILSCOPE_FAKE_NVML`), or by the non-NVML export
//! `railscopeFakeNvmlSetFixture(const char *path)`, which wins. Every call `stat`s the file
//! (or, with [`RECHECK_ENV`] set to N, the first call after N milliseconds: benchmarks set
//! it, as the check is the fake's own cost and no driver's) and re-reads it when its size,
//! mtime or inode changed, so a test injects a fault
//! mid-run by replacing the file (write a temporary file and rename it over: a file
//! caught half-written fails to parse, is reported once on stderr, and the previous
//! fixture stays in force).
//!
//! Beyond identity, utilization, memory, power, clocks, ECC, PCIe, fabric, NVLink, field
//! values and XID events, a fixture can give a GPU encoder and decoder utilization,
//! violation status per policy, GPM metrics, MIG devices, NVLink-C2C (fields and mode),
//! NVLink5 counters (fields 206–215, 219–222 per link, BER encoded as NVML does) and the
//! processes running on it (`nvmlDeviceGetComputeRunningProcesses*`).
//!
//! Faults per GPU: `lost` (every call on it answers `NVML_ERROR_GPU_IS_LOST`), `hang_ms`
//! (every call on it sleeps first, without holding up calls on other GPUs),
//! `not_supported`/`errors` (a feature answers `NOT_SUPPORTED` or any code) and
//! `xid_events` (delivered once each through `nvmlEventSetWait_v2`). Faults for the
//! whole library: `init_error`, `hang_ms`.
//!
//! # Costs
//!
//! Off by default, every call answers in microseconds. With the fixture's `costs` key
//! (`"costs": "h200"`) or [`costs::COSTS_ENV`] (`RAILSCOPE_FAKE_NVML_COSTS=h200`), each
//! call takes as long as it does on a real H200 (driver 580.159.04): its CPU time burned on
//! the calling thread, the rest of its wall time slept (`nvmlDeviceGetPcieThroughput`
//! ~21 ms, `nvmlDeviceGetMaxClockInfo` 1.7 ms of CPU, …), so a benchmark of railscope
//! against the fake shows what a real node pays. The table and how it is derived:
//! [`costs`]. Costs are paid after a GPU's `hang_ms` and `lost` check, which stay
//! separate.
//!
//! # GPM
//!
//! `nvmlGpmSampleAlloc` hands out samples the library owns (freed by `nvmlGpmSampleFree`;
//! a double free or foreign pointer is `INVALID_ARGUMENT`). Each `nvmlGpmSampleGet` (whole
//! GPU) or `nvmlGpmMigSampleGet` (one MIG GPU instance) integrates the fixture's `gpm`
//! values over the time since that GPU's (or instance's) previous sample, so
//! `nvmlGpmMetricsGet` over two samples reports what the fixture said during the window,
//! and a fixture replaced between two samples shows whole in the next window. Details:
//! `src/gpm.rs`. Without `gpm`, `nvmlGpmQueryDeviceSupport` says unsupported and samples
//! answer `NOT_SUPPORTED`.
//!
//! # MIG
//!
//! A GPU's `mig` lists its MIG devices; `nvmlDeviceGetMigDeviceHandleByIndex` gives each
//! a handle in a second private array, one slot per MIG device UUID: distinct from every
//! GPU handle, the same for as long as the device stays in the fixture (whatever its
//! index), stale (`INVALID_ARGUMENT`) once it has left. MIG handles are answered by
//! `nvmlDeviceGetName`, `…GetUUID`, `…GetMemoryInfo{,_v2}`, `…IsMigDeviceHandle`,
//! `…GetDeviceHandleFromMigDeviceHandle`, `…GetGpuInstanceId` and `…GetComputeInstanceId`
//! (the last two answer `INVALID_ARGUMENT` on a GPU handle), and by
//! `…GetComputeRunningProcesses{,_v2,_v3}` (the processes of that MIG device's GPU instance
//! and compute instance) and `…GetGraphicsRunningProcesses_v3`; every other export answers
//! `INVALID_ARGUMENT` for one. A MIG device hangs and is lost with its parent GPU.
//!
//! # One process, several fixtures
//!
//! `dlopen` of the same path returns the same loaded copy, with one state. A Rust cdylib
//! has no `SONAME`, so a **copy of the `.so` under another path is an independent
//! instance**: tests that run in parallel each copy the library into a temporary
//! directory and point their copy at their fixture with `railscopeFakeNvmlSetFixture`
//! (the environment is process-wide, and setting it while other threads run is racy).
//!
//! # Finding the library from a test
//!
//! [`library_path`] derives the target directory from the running test binary
//! (`target/<profile>/deps/<test>-<hash>` → `target/<profile>`) and returns
//! `target/<profile>/libnvidia_ml_fake.so` (or the copy in `deps/`), building it with
//! `cargo build -p railscope-fake-nvml` first when neither exists. A crate whose tests use
//! it lists `railscope-fake-nvml` as a dev-dependency, which also makes `cargo test`
//! build the cdylib.
//!
//! # Robustness
//!
//! Every export runs under `catch_unwind` (a panic answers `NVML_ERROR_UNKNOWN`), checks
//! output pointers for null (`NVML_ERROR_INVALID_ARGUMENT`), range-checks device handles
//! (addresses inside a private array, so stale or foreign handles are rejected, never
//! dereferenced), event-set handles and GPM samples, and checks the `version` of
//! versioned structs (`NVML_ERROR_ARGUMENT_VERSION_MISMATCH`).

#![allow(unsafe_code)]

pub mod costs;
mod exports;
pub mod fixture;
mod gpm;
#[cfg(test)]
mod proptests;
mod state;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that names the fixture file.
pub const FIXTURE_ENV: &str = "RAILSCOPE_FAKE_NVML";

/// Milliseconds a check of the fixture file for a change holds (unset or 0: every call
/// checks). With it set, a call within that time of its thread's last check answers from
/// the fixture as that thread last saw it, without a `stat` of the file, a look-up of the
/// environment or the library's lock.
pub const RECHECK_ENV: &str = "RAILSCOPE_FAKE_NVML_RECHECK_MS";

/// The file name cargo gives the cdylib.
pub const LIBRARY_FILE_NAME: &str = "libnvidia_ml_fake.so";

/// The most GPUs a fixture may list (the size of the handle table).
pub const MAX_GPUS: usize = 64;

/// Every NVML function the library exports, plus its own `railscopeFakeNvmlSetFixture`.
pub const EXPORTED_SYMBOLS: &[&str] = &[
    "nvmlInit_v2",
    "nvmlInit",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetCpuAffinityWithinScope",
    "nvmlDeviceGetMemoryAffinity",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetSupportedClocksEventReasons",
    "nvmlDeviceGetSupportedClocksThrottleReasons",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPages_v2",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieSpeed",
    "nvmlDeviceGetPcieLinkMaxSpeed",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetNvLinkCapability",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlDeviceGetFieldValues",
    "nvmlEventSetCreate",
    "nvmlEventSetFree",
    "nvmlDeviceGetSupportedEventTypes",
    "nvmlDeviceRegisterEvents",
    "nvmlEventSetWait_v2",
    "nvmlDeviceGetEncoderUtilization",
    "nvmlDeviceGetDecoderUtilization",
    "nvmlDeviceGetViolationStatus",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmQueryIfStreamingEnabled",
    "nvmlGpmSetStreamingEnabled",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree",
    "nvmlGpmSampleGet",
    "nvmlGpmMigSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetC2cModeInfoV",
    "nvmlDeviceGetPlatformInfo",
    "nvmlDeviceGetModuleId",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
    "railscopeFakeNvmlSetFixture",
];

/// The directory of this crate's fixtures (`tests/fake-nvml/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Path of the built `libnvidia_ml_fake.so` for the running test binary's profile,
/// building it first if it is missing.
///
/// The running binary is `<target>/<profile>/deps/<name>-<hash>`, so the library is
/// `<target>/<profile>/libnvidia_ml_fake.so` (cargo's uplifted copy) or
/// `<target>/<profile>/deps/libnvidia_ml_fake.so` (where a dev-dependency build leaves
/// it). Neither: runs `$CARGO build -p railscope-fake-nvml --lib` into that target dir.
pub fn library_path() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let deps = exe
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent", exe.display())))?;
    let profile_dir = deps
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent", deps.display())))?;
    let candidates = [
        profile_dir.join(LIBRARY_FILE_NAME),
        deps.join(LIBRARY_FILE_NAME),
    ];
    // `cargo test` rebuilds the copy in deps/ without refreshing the one `cargo build` put
    // in the profile directory: the newer of the two is the current one.
    let newest = candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p)))
        .max_by_key(|(modified, _)| *modified);
    if let Some((_, found)) = newest {
        return Ok(found.clone());
    }
    let target_dir = profile_dir
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent", profile_dir.display())))?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug");
    let profile = if profile == "debug" { "dev" } else { profile };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--lib",
            "-p",
            "railscope-fake-nvml",
            "--profile",
            profile,
        ])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir)
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "cargo build -p railscope-fake-nvml failed: {status}"
        )));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| io::Error::other(format!("{LIBRARY_FILE_NAME} not found after build")))
}
