//! The calls beyond the basics, read back through nvml-wrapper 0.13 (raw calls where the
//! wrapper has none): encoder and decoder utilization, violation status, GPM samples and
//! metrics (whole GPU and MIG GPU instance), MIG devices and their handles, NVLink-C2C
//! fields and mode, NVLink5 counters and BER fields; a lost GPU and fixture changes.
//! Fixtures are built in code from `h100-sxm-8gpu.json`.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::ffi::c_uint;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Fake, shipped};
use nvidia_ml_fake::fixture::{
    C2c, C2cErrors, C2cLink, Feature, FieldOverride, FieldType, Fixture, Gpm, Memory, Mig,
    MigDevice, NvLink5, Violations, decode_ber,
};
use nvml_wrapper::enum_wrappers::device::{PerformancePolicy, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, GpmSample, Nvml};
use nvml_wrapper_sys::bindings::{
    nvmlC2cModeInfo_v1_t, nvmlDevice_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t,
    nvmlViolationTime_t,
};

const SUCCESS: u32 = 0;
const INVALID_ARGUMENT: u32 = 2;
const NOT_SUPPORTED: u32 = 3;
const NOT_FOUND: u32 = 6;
const GPU_IS_LOST: u32 = 15;
const VERSION_MISMATCH: u32 = 25;

/// What the H200 read under a bf16 matmul (`shared/reference/h200-nvml/gpm-h200.json`).
const LOAD: [(u32, f64); 7] = [
    (1, 99.99),
    (2, 96.6),
    (3, 14.3),
    (5, 93.8),
    (10, 16.1),
    (20, 4.5),
    (21, 13.2),
];

fn gpm(metrics: &[(u32, f64)]) -> Gpm {
    Gpm {
        metrics: metrics.iter().copied().collect(),
    }
}

fn mig_device(gi: u32, ci: u32, n: u32, profile: &str, total: u64, gpm: Option<Gpm>) -> MigDevice {
    MigDevice {
        gpu_instance_id: gi,
        compute_instance_id: ci,
        uuid: format!("MIG-5c89a1f2-0000-4000-8000-{n:012}"),
        name: format!("NVIDIA H100 80GB HBM3 MIG {profile}"),
        memory: Some(Memory {
            total,
            reserved: 0,
            used: u64::from(n) << 20,
        }),
        gpm,
    }
}

/// The healthy H100 node with every new key on GPU 0 (GPU 1 has none of them): GPM, MIG
/// with three devices in two GPU instances, violations, encoder/decoder, C2C, NVLink5 on
/// links 0 and 1.
fn full() -> Fixture {
    let mut f = shipped("h100-sxm-8gpu.json");
    let g = &mut f.gpus[0];
    g.encoder_utilization = Some(7);
    g.decoder_utilization = Some(0);
    g.gpm = Some(gpm(&LOAD));
    g.violations = Some(Violations {
        power: Some(3_128_307_968),
        thermal: Some(0),
        low_utilization: Some(21_602_789_600),
        ..Violations::default()
    });
    g.mig = Some(Mig {
        current_mode: 1,
        pending_mode: 1,
        max_devices: 7,
        devices: vec![
            mig_device(
                1,
                0,
                1,
                "3g.40gb",
                42_580_574_208,
                Some(gpm(&[(1, 50.0), (2, 48.0)])),
            ),
            mig_device(2, 0, 2, "2g.20gb", 20_937_965_568, None),
            mig_device(2, 1, 3, "1c.2g.20gb", 20_937_965_568, None),
        ],
    });
    g.c2c = Some(C2c {
        links: vec![
            C2cLink {
                active: true,
                max_bw_mbps: 45_000,
            },
            C2cLink {
                active: false,
                max_bw_mbps: 45_000,
            },
        ],
        errors: C2cErrors {
            intr: 1,
            replay: 2,
            replay_b2b: 3,
        },
        power_state: 1,
    });
    g.nvlinks[0].nvlink5 = Some(NvLink5 {
        malformed_packet_errors: 206,
        buffer_overrun_errors: 207,
        rcv_errors: 208,
        rcv_remote_errors: 209,
        rcv_general_errors: 210,
        local_link_integrity_errors: 211,
        xmit_discards: 212,
        link_recovery_successful_events: 213,
        link_recovery_failed_events: 214,
        link_recovery_events: 215,
        effective_errors: 219,
        effective_ber: 1e-15,
        symbol_errors: 221,
        symbol_ber: 2.5e-12,
        fec_history: None,
    });
    g.nvlinks[1].nvlink5 = Some(NvLink5 {
        symbol_ber: 1.2e-9,
        ..NvLink5::default()
    });
    f
}

fn metrics<'n>(
    nvml: &'n Nvml,
    s1: &GpmSample<'n>,
    s2: &GpmSample<'n>,
    ids: &[GpmMetricId],
) -> Vec<Result<f64, NvmlError>> {
    gpm_metrics_get(nvml, s1, s2, ids)
        .unwrap()
        .into_iter()
        .map(|r| r.map(|m| m.value))
        .collect()
}

fn close(got: &Result<f64, NvmlError>, want: f64) -> bool {
    matches!(got, Ok(v) if (v - want).abs() <= want.abs() * 1e-9)
}

/// A few milliseconds, so two samples are apart.
fn pause() {
    std::thread::sleep(Duration::from_millis(5));
}

/// `nvmlGpmMetricsGet` raw: (return, per-metric (nvmlReturn, value)).
fn raw_metrics(
    nvml: &Nvml,
    s1: nvmlGpmSample_t,
    s2: nvmlGpmSample_t,
    version: u32,
    ids: &[u32],
    count: u32,
) -> (u32, Vec<(u32, f64)>) {
    // SAFETY: plain old data; all-zero is a valid request.
    let mut req: Box<nvmlGpmMetricsGet_t> = Box::new(unsafe { std::mem::zeroed() });
    req.version = version;
    req.numMetrics = count;
    req.sample1 = s1;
    req.sample2 = s2;
    for (m, id) in req.metrics.iter_mut().zip(ids) {
        m.metricId = *id;
    }
    // SAFETY: one whole request struct.
    let rc = unsafe { nvml.lib().nvmlGpmMetricsGet(&mut *req) };
    let out = req.metrics[..ids.len()]
        .iter()
        .map(|m| (m.nvmlReturn, m.value))
        .collect();
    (rc, out)
}

/// Raw field values with scopes: (nvmlReturn, value as u64 for integer types).
fn fields(nvml: &Nvml, device: &Device, request: &[(u32, u32)]) -> (u32, Vec<(u32, u64)>) {
    let (rc, out) = common::raw_fields(nvml, device, request);
    (rc, out.into_iter().map(|(r, _, v)| (r, v)).collect())
}

fn field(nvml: &Nvml, device: &Device, id: u32, scope: u32) -> (u32, u64) {
    fields(nvml, device, &[(id, scope)]).1[0]
}

/// A `c_uint` getter on a device handle, raw.
fn raw_uint(
    f: unsafe extern "C" fn(nvmlDevice_t, *mut c_uint) -> u32,
    device: nvmlDevice_t,
) -> (u32, u32) {
    let mut v = 12345;
    // SAFETY: one writable unsigned int; the handle is ours or a deliberately bad one.
    let rc = unsafe { f(device, &mut v) };
    (rc, v)
}

fn gpu_instance_id(nvml: &Nvml, device: nvmlDevice_t) -> (u32, u32) {
    let f = *nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref().unwrap();
    raw_uint(f, device)
}

fn compute_instance_id(nvml: &Nvml, device: nvmlDevice_t) -> (u32, u32) {
    let f = *nvml.lib().nvmlDeviceGetComputeInstanceId.as_ref().unwrap();
    raw_uint(f, device)
}

fn c2c_mode(nvml: &Nvml, device: &Device) -> (u32, u32) {
    let mut info = nvmlC2cModeInfo_v1_t { isC2cEnabled: 99 };
    // SAFETY: one writable struct; the handle comes from this Nvml.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetC2cModeInfoV(device.handle(), &mut info)
    };
    (rc, info.isC2cEnabled)
}

#[test]
fn gpm_two_samples_give_the_fixture_values() {
    let fake = Fake::new(&full());
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert!(d.gpm_support().unwrap());
    assert!(matches!(
        d.gpm_streaming_enabled(),
        Err(NvmlError::NotSupported)
    ));

    let s1 = d.gpm_sample().unwrap();
    pause();
    let s2 = d.gpm_sample().unwrap();
    use GpmMetricId::*;
    let ids = [
        GraphicsUtil,
        SmUtil,
        SmOccupancy,
        AnyTensorUtil,
        DramBwUtil,
        PcieTxPerSec,
        PcieRxPerSec,
        Fp64Util,
        NvlinkTotalRxPerSec,
    ];
    let got = metrics(&nvml, &s1, &s2, &ids);
    for (i, (_, want)) in LOAD.iter().enumerate() {
        assert!(close(&got[i], *want), "{:?}: {:?}", ids[i], got[i]);
    }
    // Ids the fixture does not list.
    assert!(matches!(got[7], Err(NvmlError::NotSupported)));
    assert!(matches!(got[8], Err(NvmlError::NotSupported)));

    // Names and units are static strings the wrapper can read.
    let full = gpm_metrics_get(&nvml, &s1, &s2, &[GraphicsUtil, PcieRxPerSec]).unwrap();
    let info = &full[0].as_ref().unwrap().metric_info;
    assert_eq!(
        (info.short_name.as_str(), info.unit.as_str()),
        ("GRAPHICS_UTIL", "%")
    );
    assert_eq!(full[1].as_ref().unwrap().metric_info.unit, "MiB/s");

    // GPU 1 has no `gpm`: not supported, and a sample cannot be taken.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(!d1.gpm_support().unwrap());
    assert!(matches!(d1.gpm_sample(), Err(NvmlError::NotSupported)));
}

#[test]
fn gpm_window_after_a_fixture_change_has_the_new_values() {
    let mut fixture = full();
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    use GpmMetricId::*;
    let ids = [SmUtil, DramBwUtil, Fp32Util];

    let s1 = d.gpm_sample().unwrap();
    pause();
    let s2 = d.gpm_sample().unwrap();
    let first = metrics(&nvml, &s1, &s2, &ids);
    assert!(
        close(&first[0], 96.6) && close(&first[1], 16.1),
        "{first:?}"
    );

    // The load changes: SM util drops, DRAM util leaves the list, FP32 util arrives.
    fixture.gpus[0].gpm = Some(gpm(&[(2, 40.0), (12, 25.0)]));
    fake.replace(&fixture);
    pause();
    let t = Instant::now();
    let s3 = d.gpm_sample().unwrap();
    let second = metrics(&nvml, &s2, &s3, &ids);
    assert!(close(&second[0], 40.0), "{second:?}");
    assert!(matches!(second[1], Err(NvmlError::NotSupported)));
    // FP32 util was not in the earlier sample: not in this window either.
    assert!(matches!(second[2], Err(NvmlError::NotSupported)));
    pause();
    let s4 = d.gpm_sample().unwrap();
    let third = metrics(&nvml, &s3, &s4, &ids);
    assert!(
        close(&third[0], 40.0) && close(&third[2], 25.0),
        "{third:?}"
    );
    // Across the change, a time-weighted mean of the two.
    let across = metrics(&nvml, &s1, &s4, &ids);
    let v = across[0].as_ref().copied().unwrap();
    assert!(40.0 < v && v < 96.6, "{v}");
    assert!(t.elapsed() < Duration::from_secs(5));

    // Samples the wrong way round, twice the same, or of different GPUs are refused.
    // SAFETY (handles): only passed back to the library, which looks them up.
    let (h1, h2, h4) = unsafe { (s1.handle(), s2.handle(), s4.handle()) };
    assert_eq!(raw_metrics(&nvml, h2, h1, 1, &[2], 1).0, INVALID_ARGUMENT);
    assert_eq!(raw_metrics(&nvml, h2, h2, 1, &[2], 1).0, INVALID_ARGUMENT);
    let mut other = full();
    other.gpus[1].gpm = Some(gpm(&LOAD));
    fake.replace(&other);
    let o = nvml.device_by_index(1).unwrap().gpm_sample().unwrap();
    // SAFETY: as above.
    let ho = unsafe { o.handle() };
    assert_eq!(raw_metrics(&nvml, h4, ho, 1, &[2], 1).0, INVALID_ARGUMENT);
    // A wrong version, too many metrics, a sample that is not one.
    assert_eq!(raw_metrics(&nvml, h1, h4, 2, &[2], 1).0, VERSION_MISMATCH);
    assert_eq!(raw_metrics(&nvml, h1, h4, 1, &[2], 211).0, INVALID_ARGUMENT);
    let mut x = 0u64;
    let foreign: nvmlGpmSample_t = std::ptr::from_mut(&mut x).cast();
    assert_eq!(
        raw_metrics(&nvml, h1, foreign, 1, &[2], 1).0,
        INVALID_ARGUMENT
    );
    assert_eq!(
        raw_metrics(&nvml, h1, std::ptr::null_mut(), 1, &[2], 1).0,
        INVALID_ARGUMENT
    );
    let (rc, out) = raw_metrics(&nvml, h1, h4, 1, &[2, 0, 300], 3);
    assert_eq!(rc, SUCCESS);
    assert_eq!(out[0].0, SUCCESS);
    assert_eq!((out[1].0, out[2].0), (NOT_SUPPORTED, NOT_SUPPORTED));

    // A sample is freed once; a second free and a foreign pointer are refused.
    let handle = s1.into_handle();
    let lib = nvml.lib();
    // SAFETY: the library looks the pointers up; none is dereferenced.
    unsafe {
        assert_eq!(lib.nvmlGpmSampleFree(handle), SUCCESS);
        assert_eq!(lib.nvmlGpmSampleFree(handle), INVALID_ARGUMENT);
        assert_eq!(lib.nvmlGpmSampleFree(foreign), INVALID_ARGUMENT);
        // A freed sample cannot be filled or used.
        assert_eq!(lib.nvmlGpmSampleGet(d.handle(), handle), INVALID_ARGUMENT);
        assert_eq!(
            lib.nvmlGpmSampleAlloc(std::ptr::null_mut()),
            INVALID_ARGUMENT
        );
    }
    assert_eq!(
        raw_metrics(&nvml, handle, h4, 1, &[2], 1).0,
        INVALID_ARGUMENT
    );

    // The support query checks its version.
    let mut support = nvmlGpmSupport_t {
        version: 2,
        isSupportedDevice: 7,
    };
    // SAFETY: one writable struct.
    let rc = unsafe { lib.nvmlGpmQueryDeviceSupport(d.handle(), &mut support) };
    assert_eq!(rc, VERSION_MISMATCH);
}

#[test]
fn gpm_of_a_mig_gpu_instance() {
    let fake = Fake::new(&full());
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let s1 = d.gpm_mig_sample(1).unwrap();
    pause();
    let s2 = d.gpm_mig_sample(1).unwrap();
    use GpmMetricId::*;
    let got = metrics(&nvml, &s1, &s2, &[GraphicsUtil, SmUtil, SmOccupancy]);
    assert!(close(&got[0], 50.0) && close(&got[1], 48.0), "{got:?}");
    assert!(matches!(got[2], Err(NvmlError::NotSupported)));
    // A window of an instance and the whole GPU is no window.
    let whole = d.gpm_sample().unwrap();
    assert!(matches!(
        gpm_metrics_get(&nvml, &s2, &whole, &[SmUtil]),
        Err(NvmlError::InvalidArg)
    ));
    // Instance 2 has no `gpm`; instance 9 has no MIG device.
    assert!(matches!(d.gpm_mig_sample(2), Err(NvmlError::NotSupported)));
    assert!(matches!(d.gpm_mig_sample(9), Err(NvmlError::InvalidArg)));
    // GPU 1 has neither GPM nor MIG; a MIG device's handle is no parent.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(d1.gpm_mig_sample(1), Err(NvmlError::NotSupported)));
    let m = d.mig_device_by_index(0).unwrap();
    assert!(matches!(m.gpm_mig_sample(1), Err(NvmlError::InvalidArg)));
    assert!(matches!(m.gpm_sample(), Err(NvmlError::InvalidArg)));
}

#[test]
fn gpm_not_supported_and_errors() {
    let mut fixture = full();
    fixture.gpus[0].not_supported = vec![Feature::Gpm];
    fixture.gpus[2].gpm = Some(gpm(&LOAD));
    fixture.gpus[2].errors.insert(Feature::Gpm, 4);
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d0 = nvml.device_by_index(0).unwrap();
    assert!(!d0.gpm_support().unwrap());
    assert!(matches!(d0.gpm_sample(), Err(NvmlError::NotSupported)));
    let d2 = nvml.device_by_index(2).unwrap();
    assert!(matches!(d2.gpm_support(), Err(NvmlError::NoPermission)));
    assert!(matches!(d2.gpm_sample(), Err(NvmlError::NoPermission)));
}

#[test]
fn mig_devices_enumerate_with_identity_and_memory() {
    let fixture = full();
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let mode = d.mig_mode().unwrap();
    assert_eq!((mode.current, mode.pending), (1, 1));
    assert_eq!(d.mig_device_count().unwrap(), 7);
    assert!(!d.mig_is_mig_device_handle().unwrap());

    let want = &fixture.gpus[0].mig.as_ref().unwrap().devices;
    let mut handles = Vec::new();
    for (i, w) in want.iter().enumerate() {
        let m = d.mig_device_by_index(i as u32).unwrap();
        assert!(m.mig_is_mig_device_handle().unwrap());
        assert_eq!(m.uuid().unwrap(), w.uuid);
        assert_eq!(m.name().unwrap(), w.name);
        let mem = m.memory_info().unwrap();
        let wm = w.memory.as_ref().unwrap();
        assert_eq!((mem.total, mem.used, mem.reserved), (wm.total, wm.used, 0));
        assert_eq!(mem.free, wm.total - wm.used);
        // SAFETY: handles are compared and passed back to the library only.
        let h = unsafe { m.handle() };
        assert_eq!(gpu_instance_id(&nvml, h), (SUCCESS, w.gpu_instance_id));
        assert_eq!(
            compute_instance_id(&nvml, h),
            (SUCCESS, w.compute_instance_id)
        );
        assert_eq!(m.mig_parent_device().unwrap().index().unwrap(), 0);
        // Other calls refuse a MIG handle.
        assert!(matches!(m.index(), Err(NvmlError::InvalidArg)));
        assert!(matches!(
            m.temperature(TemperatureSensor::Gpu),
            Err(NvmlError::InvalidArg)
        ));
        assert!(matches!(m.mig_mode(), Err(NvmlError::InvalidArg)));
        assert!(matches!(m.pci_info(), Err(NvmlError::InvalidArg)));
        // The same device gets the same handle, distinct from every other.
        // SAFETY: as above.
        let again = unsafe { d.mig_device_by_index(i as u32).unwrap().handle() };
        assert_eq!(again, h);
        assert!(!handles.contains(&h));
        handles.push(h);
    }
    // SAFETY: as above.
    let parent = unsafe { d.handle() };
    assert!(!handles.contains(&parent));
    // On the GPU itself the instance ids are invalid, as on a real H200.
    assert_eq!(gpu_instance_id(&nvml, parent).0, INVALID_ARGUMENT);
    assert_eq!(compute_instance_id(&nvml, parent).0, INVALID_ARGUMENT);
    assert!(matches!(d.mig_parent_device(), Err(NvmlError::InvalidArg)));
    // Below max_devices without a device: not found; at or above: invalid.
    assert!(matches!(d.mig_device_by_index(3), Err(NvmlError::NotFound)));
    assert!(matches!(
        d.mig_device_by_index(7),
        Err(NvmlError::InvalidArg)
    ));

    // A GPU without `mig` answers not supported.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(d1.mig_mode(), Err(NvmlError::NotSupported)));
    assert!(matches!(
        d1.mig_device_count(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        d1.mig_device_by_index(0),
        Err(NvmlError::NotSupported)
    ));

    // Removing the last device: its index is not found, its handle stale.
    let m2 = d.mig_device_by_index(2).unwrap();
    let mut fewer = fixture.clone();
    fewer.gpus[0].mig.as_mut().unwrap().devices.truncate(2);
    fake.replace(&fewer);
    assert!(matches!(d.mig_device_by_index(2), Err(NvmlError::NotFound)));
    assert!(matches!(m2.uuid(), Err(NvmlError::InvalidArg)));
    assert!(matches!(m2.memory_info(), Err(NvmlError::InvalidArg)));
    // SAFETY: as above.
    assert_eq!(
        gpu_instance_id(&nvml, unsafe { m2.handle() }).0,
        INVALID_ARGUMENT
    );
    assert_eq!(
        d.mig_device_by_index(1).unwrap().uuid().unwrap(),
        want[1].uuid
    );

    // Removing the first: the second moves to index 0 and keeps its handle.
    let m0 = d.mig_device_by_index(0).unwrap();
    let m1 = d.mig_device_by_index(1).unwrap();
    let mut first_gone = fewer.clone();
    first_gone.gpus[0].mig.as_mut().unwrap().devices.remove(0);
    fake.replace(&first_gone);
    assert!(matches!(m0.name(), Err(NvmlError::InvalidArg)));
    assert_eq!(m1.uuid().unwrap(), want[1].uuid);
    let moved = d.mig_device_by_index(0).unwrap();
    // SAFETY: as above.
    unsafe { assert_eq!(moved.handle(), m1.handle()) };
    assert!(matches!(d.mig_device_by_index(1), Err(NvmlError::NotFound)));

    // A foreign pointer is no handle of either kind.
    let mut x = 0u64;
    let foreign: nvmlDevice_t = std::ptr::from_mut(&mut x).cast();
    assert_eq!(gpu_instance_id(&nvml, foreign).0, INVALID_ARGUMENT);
    let f = *nvml.lib().nvmlDeviceIsMigDeviceHandle.as_ref().unwrap();
    assert_eq!(raw_uint(f, foreign).0, INVALID_ARGUMENT);
    assert_eq!(raw_uint(f, std::ptr::null_mut()).0, INVALID_ARGUMENT);
}

#[test]
fn mig_features_fail_as_the_fixture_says() {
    let mut fixture = full();
    fixture.gpus[0].errors.insert(Feature::Mig, 4);
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert!(matches!(d.mig_mode(), Err(NvmlError::NoPermission)));
    assert!(matches!(
        d.mig_device_by_index(0),
        Err(NvmlError::NoPermission)
    ));
    // A MIG device's memory follows its parent's `memory` feature.
    let mut fixture = full();
    fixture.gpus[0].not_supported = vec![Feature::Memory];
    fake.replace(&fixture);
    let m = d.mig_device_by_index(0).unwrap();
    assert!(matches!(m.memory_info(), Err(NvmlError::NotSupported)));
    assert!(m.name().is_ok());
    // The raw index look-up with a null output is refused.
    // SAFETY: a null output pointer, which the library must reject.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetMigDeviceHandleByIndex(d.handle(), 0, std::ptr::null_mut())
    };
    assert_eq!(rc, INVALID_ARGUMENT);
    // SAFETY: as above.
    let rc = unsafe {
        let mut out: nvmlDevice_t = std::ptr::null_mut();
        nvml.lib()
            .nvmlDeviceGetMigDeviceHandleByIndex(d.handle(), 5, &mut out)
    };
    assert_eq!(rc, NOT_FOUND);
}

#[test]
fn violation_status_per_policy() {
    let fake = Fake::new(&full());
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let now_us = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
    };
    let before = now_us();
    let power = d.violation_status(PerformancePolicy::Power).unwrap();
    assert_eq!(power.violation_time, 3_128_307_968);
    assert!(before <= power.reference_time && power.reference_time <= now_us());
    assert_eq!(
        d.violation_status(PerformancePolicy::Thermal)
            .unwrap()
            .violation_time,
        0
    );
    assert_eq!(
        d.violation_status(PerformancePolicy::LowUtilization)
            .unwrap()
            .violation_time,
        21_602_789_600
    );
    for unlisted in [
        PerformancePolicy::SyncBoost,
        PerformancePolicy::BoardLimit,
        PerformancePolicy::Reliability,
        PerformancePolicy::TotalAppClocks,
        PerformancePolicy::TotalBaseClocks,
    ] {
        assert!(
            matches!(d.violation_status(unlisted), Err(NvmlError::NotSupported)),
            "{unlisted:?}"
        );
    }
    // A policy NVML does not define.
    let mut t: nvmlViolationTime_t = nvmlViolationTime_t {
        referenceTime: 0,
        violationTime: 0,
    };
    for policy in [6, 9, 12] {
        // SAFETY: one writable struct.
        let rc = unsafe {
            nvml.lib()
                .nvmlDeviceGetViolationStatus(d.handle(), policy, &mut t)
        };
        assert_eq!(rc, INVALID_ARGUMENT, "{policy}");
    }
    // No `violations`: not supported.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(
        d1.violation_status(PerformancePolicy::Power),
        Err(NvmlError::NotSupported)
    ));
}

#[test]
fn encoder_and_decoder_utilization() {
    let fake = Fake::new(&full());
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let enc = d.encoder_utilization().unwrap();
    assert_eq!((enc.utilization, enc.sampling_period), (7, 167_000));
    let dec = d.decoder_utilization().unwrap();
    assert_eq!((dec.utilization, dec.sampling_period), (0, 167_000));
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(
        d1.encoder_utilization(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        d1.decoder_utilization(),
        Err(NvmlError::NotSupported)
    ));
}

#[test]
fn c2c_fields_and_mode() {
    let fake = Fake::new(&full());
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let (rc, v) = fields(
        &nvml,
        &d,
        &[
            (170, 0),
            (171, 0),
            (171, 1),
            (172, 0),
            (172, 1),
            (231, 0),
            (232, 0),
            (233, 0),
            (234, 0),
            (171, 2),
        ],
    );
    assert_eq!(rc, SUCCESS);
    assert_eq!(
        v[..9],
        [
            (SUCCESS, 2),
            (SUCCESS, 1),
            (SUCCESS, 0),
            (SUCCESS, 45_000),
            (SUCCESS, 45_000),
            (SUCCESS, 1),
            (SUCCESS, 2),
            (SUCCESS, 3),
            (SUCCESS, 1),
        ]
    );
    // A link past the last.
    assert_eq!(v[9].0, INVALID_ARGUMENT);
    assert_eq!(c2c_mode(&nvml, &d), (SUCCESS, 1));
    // Without `c2c`: the fields are not supported, the mode says disabled.
    let d1 = nvml.device_by_index(1).unwrap();
    for id in [170, 171, 172, 231, 232, 233, 234] {
        assert_eq!(field(&nvml, &d1, id, 0).0, NOT_SUPPORTED, "{id}");
    }
    assert_eq!(c2c_mode(&nvml, &d1), (SUCCESS, 0));
}

#[test]
fn nvlink5_fields_per_link_and_ber_round_trip() {
    let mut fixture = full();
    // A `fields` entry still wins over the built-in answer.
    fixture.gpus[0].fields.push(FieldOverride {
        id: 221,
        scope: Some(1),
        value: 77.0,
        value_type: FieldType::Ull,
        error: None,
    });
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    for id in (206..=215).chain([219, 221]) {
        assert_eq!(field(&nvml, &d, id, 0), (SUCCESS, u64::from(id)), "{id}");
        assert_eq!(
            field(&nvml, &d, id, 2).0,
            NOT_SUPPORTED,
            "{id}: link 2 has none"
        );
    }
    for id in (201..=205).chain(216..=218) {
        assert_eq!(field(&nvml, &d, id, 0).0, NOT_SUPPORTED, "{id}");
    }
    // BER: (mantissa << 8) | exponent.
    let (rc, effective) = field(&nvml, &d, 220, 0);
    assert_eq!((rc, effective), (SUCCESS, (1 << 8) | 15));
    let (_, symbol) = field(&nvml, &d, 222, 0);
    let decode = |v: u64| {
        let mantissa = (v >> 8) & 0xf;
        let exponent = v & 0xff;
        mantissa as f64 * 10f64.powi(-(exponent as i32))
    };
    assert!((decode(effective) - 1e-15).abs() < 1e-27);
    assert_eq!(decode_ber(symbol as u32), decode(symbol));
    // 2.5e-12 has no two-digit form under 16: 2 or 3 × 10^-12.
    assert!(
        [2e-12, 3e-12]
            .iter()
            .any(|w| (decode(symbol) - w).abs() < 1e-24)
    );
    let (_, link1) = field(&nvml, &d, 222, 1);
    assert_eq!(link1, (12 << 8) | 10);
    assert!((decode(link1) - 1.2e-9).abs() < 1e-20);
    assert_eq!(field(&nvml, &d, 221, 1), (SUCCESS, 77));
    assert_eq!(field(&nvml, &d, 221, 0), (SUCCESS, 221));
    // A link past the last; a GPU without NVLink5 anywhere.
    assert_eq!(field(&nvml, &d, 206, 18).0, INVALID_ARGUMENT);
    let d1 = nvml.device_by_index(1).unwrap();
    assert_eq!(field(&nvml, &d1, 206, 0).0, NOT_SUPPORTED);
    assert_eq!(field(&nvml, &d1, 220, 0).0, NOT_SUPPORTED);
}

#[test]
fn a_lost_gpu_answers_gpu_is_lost_for_the_new_calls() {
    let fixture = full();
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let m = d.mig_device_by_index(0).unwrap();
    let s1 = d.gpm_sample().unwrap();
    pause();
    let s2 = d.gpm_sample().unwrap();

    let mut lost = fixture.clone();
    lost.gpus[0].lost = true;
    fake.replace(&lost);
    let is_lost = |r: Result<(), NvmlError>| matches!(r, Err(NvmlError::GpuLost));
    assert!(is_lost(d.encoder_utilization().map(drop)));
    assert!(is_lost(d.decoder_utilization().map(drop)));
    assert!(is_lost(
        d.violation_status(PerformancePolicy::Power).map(drop)
    ));
    assert!(is_lost(d.gpm_support().map(drop)));
    assert!(is_lost(d.gpm_sample().map(drop)));
    assert!(is_lost(d.gpm_mig_sample(1).map(drop)));
    assert!(is_lost(d.gpm_streaming_enabled().map(drop)));
    assert!(is_lost(d.mig_mode().map(drop)));
    assert!(is_lost(d.mig_device_count().map(drop)));
    assert!(is_lost(d.mig_device_by_index(0).map(drop)));
    assert!(is_lost(d.mig_is_mig_device_handle().map(drop)));
    // A MIG device of a lost GPU is lost too.
    assert!(is_lost(m.uuid().map(drop)));
    assert!(is_lost(m.memory_info().map(drop)));
    assert!(is_lost(m.mig_parent_device().map(drop)));
    // SAFETY: handles passed back to the library only.
    let (hm, hd) = unsafe { (m.handle(), d.handle()) };
    assert_eq!(gpu_instance_id(&nvml, hm).0, GPU_IS_LOST);
    assert_eq!(compute_instance_id(&nvml, hm).0, GPU_IS_LOST);
    let _ = hd;
    assert_eq!(c2c_mode(&nvml, &d).0, GPU_IS_LOST);
    assert_eq!(fields(&nvml, &d, &[(170, 0), (206, 0)]).0, GPU_IS_LOST);
    // Metrics of samples taken before the loss ask no device.
    assert!(close(
        &metrics(&nvml, &s1, &s2, &[GpmMetricId::SmUtil])[0],
        96.6
    ));
    // The other GPUs answer.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(!d1.gpm_support().unwrap());
}

#[test]
fn every_new_call_has_a_cost() {
    // With the H200's costs on, the violation status and a GPM sample take their measured
    // CPU time (0.8 ms and 0.34 ms); the rest answer quickly.
    let mut fixture = full();
    fixture.costs = Some(nvidia_ml_fake::fixture::Costs::default());
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let cpu = || nvidia_ml_fake::costs::thread_cpu_time().unwrap();
    let start = cpu();
    d.violation_status(PerformancePolicy::Power).unwrap();
    assert!(
        cpu() - start >= Duration::from_micros(600),
        "{:?}",
        cpu() - start
    );
    let start = cpu();
    let _sample = d.gpm_sample().unwrap();
    assert!(
        cpu() - start >= Duration::from_micros(250),
        "{:?}",
        cpu() - start
    );
    for name in nvidia_ml_fake::EXPORTED_SYMBOLS
        .iter()
        .filter(|n| n.starts_with("nvml"))
    {
        assert!(
            nvidia_ml_fake::costs::h200(name).is_some(),
            "{name} has no cost"
        );
    }
}
