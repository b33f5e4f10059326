//! The library finds its fixture through `RAILSCOPE_FAKE_NVML`, as the agent's end-to-end
//! tests will use it. Its own test binary: the variable is process-wide, so no other test
//! may run beside this one.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use nvml_wrapper::Nvml;

#[test]
fn fixture_from_the_environment() {
    let lib = nvidia_ml_fake::library_path().unwrap();
    let fixture = nvidia_ml_fake::fixtures_dir().join("a100-pcie-4gpu-bridged.json");
    // SAFETY: the only test in this binary, so no other thread reads the environment.
    unsafe { std::env::set_var(nvidia_ml_fake::FIXTURE_ENV, &fixture) };
    let nvml = Nvml::builder().lib_path(lib.as_os_str()).init().unwrap();
    assert_eq!(nvml.device_count().unwrap(), 4);
    assert_eq!(
        nvml.device_by_index(0).unwrap().name().unwrap(),
        "NVIDIA A100 80GB PCIe"
    );

    // Without the variable (and no override) there is no driver to talk to.
    drop(nvml);
    // SAFETY: as above.
    unsafe { std::env::remove_var(nvidia_ml_fake::FIXTURE_ENV) };
    let err = Nvml::builder().lib_path(lib.as_os_str()).init().err();
    assert!(
        matches!(err, Some(nvml_wrapper::error::NvmlError::DriverNotLoaded)),
        "{err:?}"
    );
}
