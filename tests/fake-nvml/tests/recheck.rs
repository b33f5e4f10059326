//! With `RAILSCOPE_FAKE_NVML_RECHECK_MS` set, a check of the fixture file holds that long:
//! benchmarks set it so that the fake's own `stat` per call is not counted as the driver's.
//! Its own test binary: the variable is process-wide.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;

#[test]
fn a_changed_fixture_is_seen_once_the_check_has_expired() {
    // SAFETY: the only test in this binary, so no other thread reads the environment.
    unsafe { std::env::set_var(nvidia_ml_fake::RECHECK_ENV, "2000") };
    let mut fixture = common::shipped("h100-sxm-8gpu.json");
    fixture.gpus[0].temperature_c = Some(40);
    let fake = common::Fake::new(&fixture);
    let nvml = fake.nvml();
    let temperature = || {
        nvml.device_by_index(0)
            .unwrap()
            .temperature(TemperatureSensor::Gpu)
            .unwrap()
    };
    assert_eq!(temperature(), 40);

    fixture.gpus[0].temperature_c = Some(77);
    let replaced = Instant::now();
    fake.replace(&fixture);
    let seen = temperature();
    if replaced.elapsed() < Duration::from_millis(1500) {
        assert_eq!(
            seen, 40,
            "within the recheck time the loaded fixture answers"
        );
    }
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(temperature(), 77, "after it, the new file is read");
    // Each thread keeps its own snapshot; once the file is reloaded, every thread answers
    // from the new one.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(temperature(), 77));
        }
    });
}
