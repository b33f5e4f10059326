//! Running processes (`processes` per GPU) read back through nvml-wrapper's
//! `running_compute_processes()` as the driver would answer them: a GPU with three
//! processes and one with none, MIG device handles that list only their own GPU instance
//! and compute instance, the `processes` feature faults, a lost GPU, a fixture replaced
//! mid-run, and the raw calls' size protocol and struct layouts (`_v3`, `_v2`, v1).

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::ffi::c_uint;

use common::{Fake, shipped};
use libloading::{Library, Symbol};
use nvidia_ml_fake::fixture::{Feature, Fixture, MigDevice, Process};
use nvml_wrapper::Device;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlProcessInfo_t, nvmlProcessInfo_v1_t};

const GIB: u64 = 1 << 30;
const INVALID_ARGUMENT: u32 = 2;
const INSUFFICIENT_SIZE: u32 = 7;

fn process(pid: u32, memory: Option<u64>) -> Process {
    Process {
        pid,
        used_gpu_memory: memory,
        gpu_instance_id: None,
        compute_instance_id: None,
    }
}

fn mig_process(pid: u32, gi: u32, ci: u32, memory: u64) -> Process {
    Process {
        pid,
        used_gpu_memory: Some(memory),
        gpu_instance_id: Some(gi),
        compute_instance_id: Some(ci),
    }
}

/// The healthy DGX H100 with three processes on GPU 0 (one whose memory the driver cannot
/// tell) and none elsewhere.
fn three_on_gpu0() -> Fixture {
    let mut fixture = shipped("h100-sxm-8gpu.json");
    fixture.gpus[0].processes = vec![
        process(4242, Some(GIB)),
        process(5150, Some(70 * GIB)),
        process(6001, None),
    ];
    fixture
}

/// What nvml-wrapper makes of the list: (pid, memory, GPU instance, compute instance).
fn summary(list: &[ProcessInfo]) -> Vec<(u32, UsedGpuMemory, Option<u32>, Option<u32>)> {
    list.iter()
        .map(|p| {
            (
                p.pid,
                p.used_gpu_memory.clone(),
                p.gpu_instance_id,
                p.compute_instance_id,
            )
        })
        .collect()
}

#[test]
fn a_gpu_lists_its_processes_and_an_idle_one_none() {
    let fake = Fake::new(&three_on_gpu0());
    let nvml = fake.nvml();
    let gpu0 = nvml.device_by_index(0).unwrap();
    assert_eq!(gpu0.running_compute_processes_count().unwrap(), 3);
    assert_eq!(
        summary(&gpu0.running_compute_processes().unwrap()),
        vec![
            (4242, UsedGpuMemory::Used(GIB), None, None),
            (5150, UsedGpuMemory::Used(70 * GIB), None, None),
            (6001, UsedGpuMemory::Unavailable, None, None),
        ]
    );
    // No graphics contexts on a compute node.
    assert!(gpu0.running_graphics_processes().unwrap().is_empty());
    assert_eq!(gpu0.running_graphics_processes_count().unwrap(), 0);

    for index in 1..8 {
        let gpu = nvml.device_by_index(index).unwrap();
        assert_eq!(gpu.running_compute_processes_count().unwrap(), 0);
        assert!(
            gpu.running_compute_processes().unwrap().is_empty(),
            "{index}"
        );
    }
}

/// The raw calls: the size query, a buffer too small, null pointers, and the same list
/// through the `_v2` and the unversioned (v1 layout) export.
#[test]
fn raw_calls_follow_nvmls_size_protocol_and_layouts() {
    let fake = Fake::new(&three_on_gpu0());
    let nvml = fake.nvml();
    let gpu0 = nvml.device_by_index(0).unwrap();
    let gpu1 = nvml.device_by_index(1).unwrap();
    // SAFETY: our own test library; the same copy `fake` loaded (one state).
    let lib = unsafe { Library::new(&fake.lib_path) }.unwrap();
    type V3 = unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_t) -> u32;
    type V1 = unsafe extern "C" fn(nvmlDevice_t, *mut c_uint, *mut nvmlProcessInfo_v1_t) -> u32;
    // SAFETY: the C signatures (nvml.h); every pointer points at a local of its type or
    // is null, and each count is at most its buffer's length.
    unsafe {
        let (d0, d1) = (gpu0.handle(), gpu1.handle());
        for name in [
            &b"nvmlDeviceGetComputeRunningProcesses_v3\0"[..],
            b"nvmlDeviceGetComputeRunningProcesses_v2\0",
        ] {
            let f: Symbol<V3> = lib.get(name).unwrap();
            let mut count: c_uint = 0;
            assert_eq!(f(d0, &mut count, std::ptr::null_mut()), INSUFFICIENT_SIZE);
            assert_eq!(count, 3);
            let mut infos = [std::mem::zeroed::<nvmlProcessInfo_t>(); 8];
            count = 2;
            assert_eq!(f(d0, &mut count, infos.as_mut_ptr()), INSUFFICIENT_SIZE);
            assert_eq!(count, 3);
            count = 8;
            assert_eq!(f(d0, &mut count, std::ptr::null_mut()), INVALID_ARGUMENT);
            assert_eq!(
                f(d0, std::ptr::null_mut(), infos.as_mut_ptr()),
                INVALID_ARGUMENT
            );
            count = 8;
            assert_eq!(f(d0, &mut count, infos.as_mut_ptr()), 0);
            assert_eq!(count, 3);
            let got: Vec<_> = infos[..3]
                .iter()
                .map(|p| (p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId))
                .collect();
            let none = 0xFFFF_FFFF;
            assert_eq!(
                got,
                vec![
                    (4242, GIB, none, none),
                    (5150, 70 * GIB, none, none),
                    (6001, u64::MAX, none, none),
                ]
            );
            // An idle GPU: count 0 and success, whatever the buffer.
            count = 0;
            assert_eq!(f(d1, &mut count, std::ptr::null_mut()), 0);
            assert_eq!(count, 0);
            count = 8;
            assert_eq!(f(d1, &mut count, infos.as_mut_ptr()), 0);
            assert_eq!(count, 0);
        }
        let v1: Symbol<V1> = lib.get(b"nvmlDeviceGetComputeRunningProcesses\0").unwrap();
        let mut infos = [std::mem::zeroed::<nvmlProcessInfo_v1_t>(); 3];
        let mut count: c_uint = 3;
        assert_eq!(v1(d0, &mut count, infos.as_mut_ptr()), 0);
        assert_eq!(count, 3);
        let got: Vec<_> = infos.iter().map(|p| (p.pid, p.usedGpuMemory)).collect();
        assert_eq!(got, vec![(4242, GIB), (5150, 70 * GIB), (6001, u64::MAX)]);
    }
}

/// MIG device `index` of `gpu`.
fn by_index<'n>(gpu: &Device<'n>, index: u32) -> Device<'n> {
    gpu.mig_device_by_index(index).unwrap()
}

/// `h100-mig.json` with a second compute instance in GPU 1's GPU instance 1 and processes
/// in several MIG devices.
fn mig_with_processes() -> Fixture {
    let mut fixture = shipped("h100-mig.json");
    let mig = fixture.gpus[1].mig.as_mut().unwrap();
    let first = mig.devices[0].clone();
    mig.devices.push(MigDevice {
        compute_instance_id: 1,
        uuid: "MIG-0f5d2c8e-6a1b-4c3d-9e7f-a1b2c3d4e5f6".into(),
        name: "NVIDIA H100 80GB HBM3 MIG 1c.4g.40gb".into(),
        gpm: None,
        ..first
    });
    fixture.gpus[0].processes = vec![
        mig_process(4242, 7, 0, 8 * GIB),
        mig_process(4243, 8, 0, 6 * GIB),
        mig_process(4244, 8, 0, GIB),
    ];
    fixture.gpus[1].processes = vec![
        mig_process(5150, 1, 0, 30 * GIB),
        mig_process(5151, 1, 1, 6 * GIB),
        mig_process(5152, 2, 0, 31 * GIB),
    ];
    fixture
}

#[test]
fn a_mig_device_lists_the_processes_of_its_instance_and_the_parent_all() {
    let fixture = mig_with_processes();
    fixture.validate().unwrap();
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let pids = |list: Vec<ProcessInfo>| list.iter().map(|p| p.pid).collect::<Vec<_>>();

    let gpu0 = nvml.device_by_index(0).unwrap();
    let all = gpu0.running_compute_processes().unwrap();
    assert_eq!(
        summary(&all),
        vec![
            (4242, UsedGpuMemory::Used(8 * GIB), Some(7), Some(0)),
            (4243, UsedGpuMemory::Used(6 * GIB), Some(8), Some(0)),
            (4244, UsedGpuMemory::Used(GIB), Some(8), Some(0)),
        ]
    );
    // GPU 0's MIG devices are GPU instances 7–13, one compute instance each.
    assert_eq!(
        pids(by_index(&gpu0, 0).running_compute_processes().unwrap()),
        [4242]
    );
    assert_eq!(
        pids(by_index(&gpu0, 1).running_compute_processes().unwrap()),
        [4243, 4244]
    );
    for i in 2..7 {
        let mig = by_index(&gpu0, i);
        assert_eq!(mig.running_compute_processes_count().unwrap(), 0, "{i}");
        assert!(mig.running_graphics_processes().unwrap().is_empty());
    }

    // GPU 1: GI 1 (CI 0 and, added, CI 1) and GI 2.
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert_eq!(
        pids(gpu1.running_compute_processes().unwrap()),
        [5150, 5151, 5152]
    );
    let ci0 = by_index(&gpu1, 0);
    let listed = ci0.running_compute_processes().unwrap();
    assert_eq!(
        summary(&listed),
        vec![(5150, UsedGpuMemory::Used(30 * GIB), Some(1), Some(0))]
    );
    assert_eq!(
        pids(by_index(&gpu1, 2).running_compute_processes().unwrap()),
        [5151]
    );
    assert_eq!(
        pids(by_index(&gpu1, 1).running_compute_processes().unwrap()),
        [5152]
    );
}

#[test]
fn processes_answer_the_fixtures_faults() {
    let mut fixture = three_on_gpu0();
    fixture.gpus[0].not_supported.push(Feature::Processes);
    fixture.gpus[1].errors.insert(Feature::Processes, 4);
    fixture.gpus[2].processes = vec![process(777, Some(GIB))];
    fixture.gpus[2].lost = true;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let gpu0 = nvml.device_by_index(0).unwrap();
    assert!(matches!(
        gpu0.running_compute_processes(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        gpu0.running_graphics_processes(),
        Err(NvmlError::NotSupported)
    ));
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert!(matches!(
        gpu1.running_compute_processes(),
        Err(NvmlError::NoPermission)
    ));
    // A lost GPU: even the handle lookup fails; no other GPU is affected.
    assert!(matches!(nvml.device_by_index(2), Err(NvmlError::GpuLost)));
    let gpu3 = nvml.device_by_index(3).unwrap();
    assert!(gpu3.running_compute_processes().unwrap().is_empty());
}

#[test]
fn a_gpu_lost_mid_run_and_its_mig_devices_answer_gpu_is_lost() {
    let fixture = mig_with_processes();
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let gpu0 = nvml.device_by_index(0).unwrap();
    let mig = gpu0.mig_device_by_index(0).unwrap();
    assert_eq!(mig.running_compute_processes_count().unwrap(), 1);

    let mut later = fixture.clone();
    later.gpus[0].lost = true;
    fake.replace(&later);
    assert!(matches!(
        gpu0.running_compute_processes(),
        Err(NvmlError::GpuLost)
    ));
    assert!(matches!(
        mig.running_compute_processes(),
        Err(NvmlError::GpuLost)
    ));
    let gpu1 = nvml.device_by_index(1).unwrap();
    assert_eq!(gpu1.running_compute_processes_count().unwrap(), 3);
}

#[test]
fn a_replaced_fixture_changes_the_list() {
    let fixture = shipped("h100-sxm-8gpu.json");
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let gpu = nvml.device_by_index(4).unwrap();
    assert!(gpu.running_compute_processes().unwrap().is_empty());
    let mut later = fixture.clone();
    later.gpus[4].processes = vec![process(9001, Some(2 * GIB)), process(9002, None)];
    fake.replace(&later);
    let pids: Vec<u32> = gpu
        .running_compute_processes()
        .unwrap()
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(pids, [9001, 9002]);
    fake.replace(&fixture);
    assert!(gpu.running_compute_processes().unwrap().is_empty());
}

#[test]
fn fixture_keys_round_trip_and_typos_fail() {
    let fixture = mig_with_processes();
    let text = serde_json::to_string(&fixture).unwrap();
    assert!(
        text.contains(r#"{"pid":4242,"used_gpu_memory":8589934592,"gpu_instance_id":7,"compute_instance_id":0}"#),
        "{text}"
    );
    let back: Fixture = serde_json::from_str(&text).unwrap();
    assert_eq!(back, fixture);
    let typo = text.replacen("used_gpu_memory", "used_memory", 1);
    let err = serde_json::from_str::<Fixture>(&typo).unwrap_err();
    assert!(err.to_string().contains("used_memory"), "{err}");
    // Absent optional keys are not written.
    let plain = serde_json::to_string(&three_on_gpu0()).unwrap();
    assert!(plain.contains(r#"{"pid":6001}"#), "{plain}");
}
