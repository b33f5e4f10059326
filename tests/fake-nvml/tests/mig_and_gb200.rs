//! The MIG-partitioned H100 node (`h100-mig.json`) and the GB200 NVL72 compute tray
//! (`gb200-tray.json`) read back as `fixtures/README.md` describes them: MIG devices,
//! their names, ids, memory and per-instance GPM; NVLink5 counters with the fault on
//! GPU 2, fabric health with the one on GPU 3, C2C, and the legacy NVLink error fields
//! that Blackwell no longer answers.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Fake, shipped};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlC2cModeInfo_v1_t, nvmlGpuFabricInfo_v3_t};

const MIB: u64 = 1 << 20;

/// A MIG device as the driver reports it: GPU instance id, profile, memory total.
type Instance = (u32, &'static str, u64);
const NOT_SUPPORTED: u32 = 3;

/// One raw field answer with an explicit `scopeId`: (nvmlReturn, valueType, value as u64).
fn field(nvml: &Nvml, device: &Device, id: u32, scope: u32) -> (u32, u32, u64) {
    let (rc, out) = common::raw_fields(nvml, device, &[(id, scope)]);
    assert_eq!(rc, 0, "field {id}");
    out[0]
}

/// The GPU instance and compute instance ids of a MIG device handle.
fn instance_ids(nvml: &Nvml, mig: &Device) -> (u32, u32) {
    let (mut gi, mut ci) = (u32::MAX, u32::MAX);
    // SAFETY: one writable unsigned int each; the handle comes from this Nvml.
    unsafe {
        assert_eq!(
            nvml.lib().nvmlDeviceGetGpuInstanceId(mig.handle(), &mut gi),
            0
        );
        assert_eq!(
            nvml.lib()
                .nvmlDeviceGetComputeInstanceId(mig.handle(), &mut ci),
            0
        );
    }
    (gi, ci)
}

/// One GPM window of `sample` (taken twice, 20 ms apart): the SM utilization.
fn sm_util<'n>(
    nvml: &'n Nvml,
    sample: impl Fn() -> Result<nvml_wrapper::gpm::GpmSample<'n>, NvmlError>,
) -> f64 {
    let first = sample().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let second = sample().unwrap();
    let values = gpm_metrics_get(nvml, &first, &second, &[GpmMetricId::SmUtil]).unwrap();
    values[0].as_ref().unwrap().value
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 1e-9
}

#[test]
fn h100_mig_devices_read_back_as_the_driver_reports_them() {
    let fixture = shipped("h100-mig.json");
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    assert_eq!(nvml.device_count().unwrap(), 2);
    let mut uuids = BTreeSet::new();
    // (GPU, its MIG devices in handle index order).
    let layout: [(u32, Vec<Instance>); 2] = [
        (0, (7..=13).map(|gi| (gi, "1g.10gb", 9984 * MIB)).collect()),
        (
            1,
            vec![(1, "4g.40gb", 40448 * MIB), (2, "3g.40gb", 40448 * MIB)],
        ),
    ];
    for (index, instances) in &layout {
        let gpu = nvml.device_by_index(*index).unwrap();
        let mode = gpu.mig_mode().unwrap();
        assert_eq!((mode.current, mode.pending), (1, 1), "GPU {index}");
        assert_eq!(gpu.mig_device_count().unwrap(), 7, "GPU {index}");
        assert!(
            matches!(gpu.utilization_rates(), Err(NvmlError::NotSupported)),
            "GPU {index}: utilization under MIG is NOT_SUPPORTED on the parent"
        );
        assert!(gpu.gpm_support().unwrap(), "GPU {index}");
        let parent_uuid = gpu.uuid().unwrap();
        for (i, (gi, profile, total)) in instances.iter().enumerate() {
            let mig = gpu.mig_device_by_index(i as u32).unwrap();
            assert!(mig.mig_is_mig_device_handle().unwrap());
            assert_eq!(
                mig.name().unwrap(),
                format!("NVIDIA H100 80GB HBM3 MIG {profile}"),
                "GPU {index} MIG {i}"
            );
            let uuid = mig.uuid().unwrap();
            assert!(uuid.starts_with("MIG-") && uuid.len() == 40, "{uuid}");
            assert!(uuids.insert(uuid.clone()), "{uuid} is not unique");
            assert_eq!(instance_ids(&nvml, &mig), (*gi, 0), "GPU {index} MIG {i}");
            assert_eq!(
                mig.memory_info().unwrap().total,
                *total,
                "GPU {index} MIG {i}"
            );
            assert_eq!(
                mig.mig_parent_device().unwrap().uuid().unwrap(),
                parent_uuid
            );
        }
        let past = instances.len() as u32;
        let beyond = gpu.mig_device_by_index(past);
        if past < 7 {
            assert!(matches!(beyond, Err(NvmlError::NotFound)), "GPU {index}");
        } else {
            assert!(matches!(beyond, Err(NvmlError::InvalidArg)), "GPU {index}");
        }
    }
    assert_eq!(uuids.len(), 9);
}

#[test]
fn h100_mig_instances_have_their_own_gpm() {
    let fixture = shipped("h100-mig.json");
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    for (index, g) in fixture.gpus.iter().enumerate() {
        let gpu = nvml.device_by_index(index as u32).unwrap();
        let whole = sm_util(&nvml, || gpu.gpm_sample());
        assert!(
            close(whole, g.gpm.as_ref().unwrap().metrics[&2]),
            "GPU {index}"
        );
        let mut seen = Vec::new();
        for d in &g.mig.as_ref().unwrap().devices {
            let got = sm_util(&nvml, || gpu.gpm_mig_sample(d.gpu_instance_id));
            let want = d.gpm.as_ref().unwrap().metrics[&2];
            assert!(
                close(got, want),
                "GPU {index} GI {}: {got} ≠ {want}",
                d.gpu_instance_id
            );
            assert!(
                !seen.iter().any(|s: &f64| close(*s, got)),
                "GPU {index} GI {}: the same load as another instance",
                d.gpu_instance_id
            );
            seen.push(got);
        }
    }
}

#[test]
fn gb200_tray_reads_back_with_its_faults() {
    let fixture = shipped("gb200-tray.json");
    assert!(
        fixture.driver_version.as_str() >= "580.82",
        "v13 field numbering"
    );
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    assert_eq!(nvml.device_count().unwrap(), 4);
    let mut cluster = BTreeSet::new();
    for index in 0..4u32 {
        let gpu = nvml.device_by_index(index).unwrap();
        assert_eq!(gpu.name().unwrap(), "NVIDIA GB200");
        assert_eq!(gpu.pci_info().unwrap().pci_device_id, 0x2941_10de);
        assert_eq!(gpu.memory_info().unwrap().total, 189_471 * MIB);
        assert!(gpu.gpm_support().unwrap());
        let g = &fixture.gpus[index as usize];
        let sm = sm_util(&nvml, || gpu.gpm_sample());
        assert!(
            close(sm, g.gpm.as_ref().unwrap().metrics[&2]),
            "GPU {index}"
        );
        assert_eq!(gpu.encoder_utilization().unwrap().utilization, 0);
        assert_eq!(gpu.decoder_utilization().unwrap().utilization, 0);

        // NVLink5: 18 links, version 5, the new counters; the legacy error fields gone.
        assert_eq!(
            field(&nvml, &gpu, 91, 0),
            (0, 1, 18),
            "GPU {index} link count"
        );
        for link in 0..18 {
            assert_eq!(
                field(&nvml, &gpu, 166, link).2,
                5,
                "GPU {index} link {link}"
            );
            for legacy in [161, 162, 163] {
                assert_eq!(
                    field(&nvml, &gpu, legacy, link).0,
                    NOT_SUPPORTED,
                    "GPU {index} link {link} field {legacy}"
                );
            }
            let faulty = (index, link) == (2, 11);
            let symbol_errors = field(&nvml, &gpu, 221, link);
            let failed_recoveries = field(&nvml, &gpu, 214, link);
            assert_eq!(symbol_errors.0, 0);
            assert_eq!(
                symbol_errors.2,
                if faulty { 48_213 } else { 0 },
                "GPU {index} link {link}"
            );
            assert_eq!(
                failed_recoveries.2,
                u64::from(faulty),
                "GPU {index} link {link}"
            );
            let ber = nvidia_ml_fake::fixture::decode_ber(
                u32::try_from(field(&nvml, &gpu, 222, link).2).unwrap(),
            );
            let want = if faulty { 4e-9 } else { 1e-12 };
            assert!(close(ber, want), "GPU {index} link {link} symbol BER {ber}");
        }

        // Fabric: one clique and cluster; GPU 3 reports degraded bandwidth.
        // SAFETY: plain old data.
        let mut info: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
        info.version = (size_of::<nvmlGpuFabricInfo_v3_t>() as u32) | (3 << 24);
        // SAFETY: a versioned v3 struct, handle from this Nvml.
        let rc = unsafe {
            nvml.lib()
                .nvmlDeviceGetGpuFabricInfoV(gpu.handle(), &mut info)
        };
        assert_eq!(rc, 0);
        assert_eq!((info.state, info.status, info.cliqueId), (3, 0, 32767));
        cluster.insert(info.clusterUuid);
        let degraded = index == 3;
        assert_eq!(
            info.healthMask,
            if degraded { 0xA9 } else { 0xAA },
            "GPU {index}"
        );
        assert_eq!(
            info.healthSummary,
            if degraded { 3 } else { 1 },
            "GPU {index}"
        );

        // C2C to the Grace CPU: ten links up, no errors, full power.
        // SAFETY: plain old data.
        let mut c2c: nvmlC2cModeInfo_v1_t = unsafe { std::mem::zeroed() };
        // SAFETY: one nvmlC2cModeInfo_v1_t, handle from this Nvml.
        let rc = unsafe { nvml.lib().nvmlDeviceGetC2cModeInfoV(gpu.handle(), &mut c2c) };
        assert_eq!((rc, c2c.isC2cEnabled), (0, 1));
        assert_eq!(field(&nvml, &gpu, 170, 0), (0, 1, 10));
        for link in 0..10 {
            assert_eq!(field(&nvml, &gpu, 171, link), (0, 1, 1));
            assert_eq!(field(&nvml, &gpu, 172, link), (0, 1, 44_712));
        }
        for id in [231, 232, 233, 234] {
            assert_eq!(field(&nvml, &gpu, id, 0).2, 0, "GPU {index} field {id}");
        }
    }
    assert_eq!(cluster.len(), 1, "one cluster UUID for the tray");
    assert_ne!(cluster.first(), Some(&[0u8; 16]));
}

/// `nvmlDeviceGetPlatformInfo` with the struct version `version` in a buffer of `T`.
fn platform<T>(nvml: &Nvml, device: &Device, version: u32) -> (u32, T) {
    // SAFETY: plain old data.
    let mut info: T = unsafe { std::mem::zeroed() };
    // SAFETY: every version starts with its `unsigned int version`.
    unsafe { (&raw mut info).cast::<u32>().write(version) };
    // SAFETY: a buffer of the struct the version names (the v1 and v2 layouts are the same
    // 44 bytes), handle from this Nvml.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetPlatformInfo(device.handle(), (&raw mut info).cast())
    };
    (rc, info)
}

#[test]
fn gb200_platform_info_answers_both_struct_versions_and_refuses_others() {
    use nvml_wrapper_sys::bindings::{nvmlPlatformInfo_v1_t, nvmlPlatformInfo_v2_t};
    const VERSION_MISMATCH: u32 = 25;
    let v1 = (size_of::<nvmlPlatformInfo_v1_t>() as u32) | (1 << 24);
    let v2 = (size_of::<nvmlPlatformInfo_v2_t>() as u32) | (2 << 24);
    assert_eq!((v1, v2), (0x0100_002C, 0x0200_002C), "NVML_STRUCT_VERSION");
    let mut fixture = shipped("gb200-tray.json");
    fixture.gpus[1].platform.as_mut().unwrap().versions = vec![1];
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let gpu0 = nvml.device_by_index(0).unwrap();
    let (rc, info) = platform::<nvmlPlatformInfo_v2_t>(&nvml, &gpu0, v2);
    assert_eq!(rc, 0);
    assert_eq!(info.version, v2);
    assert_eq!(&info.chassisSerialNumber[..13], b"1823825100042");
    assert_eq!(info.chassisSerialNumber[13..], [0, 0, 0]);
    assert_eq!(
        info.ibGuid,
        [
            0x21, 0xac, 0x5b, 0x6a, 0x52, 0x8f, 0x7c, 0x10, 0, 0, 0, 0, 0, 0, 0, 0
        ]
    );
    assert_eq!(
        (
            info.slotNumber,
            info.trayIndex,
            info.hostId,
            info.peerType,
            info.moduleId
        ),
        (4, 3, 1, 2, 2)
    );
    let (rc, info) = platform::<nvmlPlatformInfo_v1_t>(&nvml, &gpu0, v1);
    assert_eq!(rc, 0);
    assert_eq!(
        (
            info.chassisPhysicalSlotNumber,
            info.computeSlotIndex,
            info.nodeIndex,
            info.moduleId
        ),
        (4, 3, 1, 2)
    );
    assert_eq!(&info.rackGuid[..13], b"1823825100042");
    // A version the header does not define, and none at all.
    for wrong in [
        (size_of::<nvmlPlatformInfo_v2_t>() as u32) | (3 << 24),
        0,
        2 << 24,
    ] {
        assert_eq!(
            platform::<nvmlPlatformInfo_v2_t>(&nvml, &gpu0, wrong).0,
            VERSION_MISMATCH,
            "version {wrong:#x}"
        );
    }
    // A driver that offers v1 only.
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert_eq!(
        platform::<nvmlPlatformInfo_v2_t>(&nvml, &gpu1, v2).0,
        VERSION_MISMATCH
    );
    let (rc, info) = platform::<nvmlPlatformInfo_v1_t>(&nvml, &gpu1, v1);
    assert_eq!((rc, info.moduleId), (0, 1));
    // The module id call agrees with the platform's.
    let mut module = 0u32;
    // SAFETY: pointer to a local, handle from this Nvml.
    let rc = unsafe { nvml.lib().nvmlDeviceGetModuleId(gpu1.handle(), &mut module) };
    assert_eq!((rc, module), (0, 1));
}

#[test]
fn gb200_fec_history_has_sixteen_bins_per_link_with_the_low_ones_dominating() {
    let fixture = shipped("gb200-tray.json");
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    for index in 0..4u32 {
        let gpu = nvml.device_by_index(index).unwrap();
        for link in 0..18 {
            let bins: Vec<u64> = (235..=250)
                .map(|id| {
                    let (rc, _, v) = field(&nvml, &gpu, id, link);
                    assert_eq!(rc, 0, "GPU {index} link {link} field {id}");
                    v
                })
                .collect();
            assert!(bins[0] > bins[1] && bins[1] > bins[2], "{bins:?}");
            let faulty = (index, link) == (2, 11);
            assert_eq!(
                bins[4..].iter().any(|b| *b > 0),
                faulty,
                "GPU {index} link {link}: {bins:?}"
            );
        }
    }
    // Before Blackwell the fields are not supported.
    let h100 = shipped("h100-sxm-8gpu.json");
    let fake = Fake::new(&h100);
    let nvml = fake.nvml();
    let gpu = nvml.device_by_index(0).unwrap();
    assert_eq!(field(&nvml, &gpu, 235, 0).0, NOT_SUPPORTED);
    assert_eq!(
        platform::<[u8; 44]>(&nvml, &gpu, 0x0200_002C).0,
        NOT_SUPPORTED
    );
}
