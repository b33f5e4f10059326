//! `RAILSCOPE_FAKE_NVML_COSTS` switches costs on or off over the fixture's `costs`. Its
//! own test binary: the variable is process-wide, so no other test may run beside this
//! one. Each step uses a fresh copy of the library, which reads the variable when it
//! loads its fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use common::Fake;
use nvidia_ml_fake::costs::{COSTS_ENV, thread_cpu_time};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter};
use nvml_wrapper::error::NvmlError;

const MS: Duration = Duration::from_millis(1);

fn set(value: Option<&str>) {
    // SAFETY: the only test in this binary, so no other thread reads the environment.
    unsafe {
        match value {
            Some(v) => std::env::set_var(COSTS_ENV, v),
            None => std::env::remove_var(COSTS_ENV),
        }
    }
}

#[test]
fn environment_overrides_the_fixture() {
    // On, for a fixture without costs.
    set(Some("h200"));
    let fake = Fake::shipped("v100-pcie-no-nvlink.json");
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let cpu = thread_cpu_time().unwrap();
    assert_eq!(device.max_clock_info(Clock::SM).unwrap(), 1380);
    let cpu = thread_cpu_time().unwrap() - cpu;
    assert!(cpu >= MS, "max clock burned {cpu:?} with {COSTS_ENV}=h200");
    drop(nvml);

    // Off, for the fixture that has them on.
    set(Some("off"));
    let fake = Fake::shipped("h200-1gpu.json");
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let quickest = (0..5)
        .map(|_| {
            let start = Instant::now();
            device.pcie_throughput(PcieUtilCounter::Send).unwrap();
            start.elapsed()
        })
        .min()
        .unwrap();
    assert!(
        quickest < MS,
        "PCIe throughput took {quickest:?} with {COSTS_ENV}=off"
    );
    drop(nvml);

    // Anything else is a broken setup: loud, not silently free.
    set(Some("fast"));
    let fake = Fake::shipped("h200-1gpu.json");
    let err = Nvml::builder()
        .lib_path(fake.lib_path.as_os_str())
        .init()
        .err();
    assert!(matches!(err, Some(NvmlError::Unknown)), "{err:?}");
    set(None);
}
