//! What the `gpu` source reads beyond health, against the fake NVML library: GPM activity
//! that follows the GPU's load between scrapes, MIG devices that appear and disappear, and
//! the counters (energy, clock events, violations) and memory as a real H200 reports them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use nvidia_ml_fake::fixture::{Gpm, Memory, Mig, MigDevice};
use railscope_tests::gpu::{GpuAgent, fixture, live_fixture};
use railscope_tests::{Sample, find, promtool_check_metrics, value, workspace};

fn gpm(metrics: &[(u32, f64)]) -> Option<Gpm> {
    Some(Gpm {
        metrics: metrics.iter().copied().collect::<BTreeMap<_, _>>(),
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

fn gauge(s: &[Sample], name: &str, gpu: &str) -> Option<f64> {
    let found = find(s, name, &[("gpu", gpu)]);
    assert!(found.len() <= 1, "{name}{{gpu={gpu}}}: {found:?}");
    found.first().map(|f| f.value)
}

/// GPM activity is the window between two collections; when the load changes, the next
/// window shows the new load, per GPU, and a GPU without GPM says so instead of showing 0.
#[test]
fn gpm_activity_follows_the_load_between_scrapes() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    f.gpus[0].gpm = gpm(&[
        (1, 99.0),
        (2, 96.5),
        (3, 14.25),
        (5, 93.75),
        (10, 16.0),
        (7, 93.75),
    ]);
    f.gpus[1].gpm = gpm(&[(2, 10.0), (20, 4.5), (21, 13.25)]);
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    // The start-up collection took the first samples; a window needs a second one a
    // second or more later.
    std::thread::sleep(Duration::from_millis(1100));
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = railscope_tests::parse_samples(&text);
    let sm = |s: &[Sample], gpu| gauge(s, "railscope_gpu_sm_active_ratio", gpu);
    assert!(close(sm(&s, "0").unwrap(), 0.965), "{:?}", sm(&s, "0"));
    for (name, want) in [
        ("railscope_gpu_tensor_active_ratio", 0.9375),
        ("railscope_gpu_sm_occupancy_ratio", 0.1425),
        ("railscope_gpu_dram_active_ratio", 0.16),
        ("railscope_gpu_graphics_active_ratio", 0.99),
    ] {
        assert!(close(gauge(&s, name, "0").unwrap(), want), "{name}");
    }
    assert!(close(
        value(
            &s,
            "railscope_gpu_pipe_active_ratio",
            &[("gpu", "0"), ("pipe", "tensor_hmma")]
        ),
        0.9375
    ));
    assert!(close(sm(&s, "1").unwrap(), 0.10));
    assert!(close(
        value(
            &s,
            "railscope_gpu_gpm_pcie_bytes_per_second",
            &[("gpu", "1"), ("direction", "rx")]
        ),
        13.25 * 1_048_576.0
    ));
    // A metric the GPU does not answer has no series (GPU 1 has no tensor metric).
    assert_eq!(gauge(&s, "railscope_gpu_tensor_active_ratio", "1"), None);
    let window = gauge(&s, "railscope_gpu_gpm_window_seconds", "0").unwrap();
    assert!((1.0..30.0).contains(&window), "window {window}");
    assert_eq!(gauge(&s, "railscope_gpu_gpm_supported", "0"), Some(1.0));
    // GPU 2 has no GPM: supported 0, no activity (not an idle 0).
    assert_eq!(gauge(&s, "railscope_gpu_gpm_supported", "2"), Some(0.0));
    assert_eq!(sm(&s, "2"), None);

    // The job on GPU 0 stalls: the next window shows it.
    f.gpus[0].gpm = gpm(&[(1, 20.0), (2, 12.5), (3, 1.0), (5, 0.0), (10, 2.0)]);
    f.save(&live).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    agent.poll(
        |s| sm(s, "0").is_some_and(|v| close(v, 0.125)),
        "GPU 0's lower SM activity",
    );
    let s = agent.samples();
    assert!(close(
        gauge(&s, "railscope_gpu_tensor_active_ratio", "0").unwrap(),
        0.0
    ));
    assert!(close(sm(&s, "1").unwrap(), 0.10), "GPU 1 unchanged");
}

fn mig_device(gi: u32, ci: u32, n: u32, profile: &str, gib: u64, sm: f64) -> MigDevice {
    MigDevice {
        gpu_instance_id: gi,
        compute_instance_id: ci,
        uuid: format!("MIG-0c5a1e2f-7d4b-5a3c-9e8f-{n:012x}"),
        name: format!("NVIDIA H100 80GB HBM3 MIG {profile}"),
        memory: Some(Memory {
            total: gib << 30,
            reserved: 0,
            used: (gib << 30) / 4,
        }),
        gpm: gpm(&[
            (1, sm + 1.0),
            (2, sm),
            (3, sm / 4.0),
            (5, sm / 2.0),
            (10, sm / 8.0),
        ]),
    }
}

/// MIG devices are read every scrape: one created between scrapes appears with its UUID
/// and profile, one destroyed disappears with its memory and activity series, and the
/// activity of each GPU instance is its own.
#[test]
fn mig_devices_appear_and_disappear_between_scrapes() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    f.gpus[0].gpm = gpm(&[(2, 50.0)]);
    f.gpus[0].mig = Some(Mig {
        current_mode: 1,
        pending_mode: 1,
        max_devices: 7,
        devices: vec![
            mig_device(1, 0, 1, "3g.40gb", 40, 60.0),
            mig_device(2, 0, 2, "3g.40gb", 40, 20.0),
        ],
    });
    f.gpus[1].mig = Some(Mig {
        current_mode: 0,
        pending_mode: 1,
        max_devices: 0,
        devices: Vec::new(),
    });
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    std::thread::sleep(Duration::from_millis(1100));
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = railscope_tests::parse_samples(&text);
    assert_eq!(gauge(&s, "railscope_gpu_mig_enabled", "0"), Some(1.0));
    assert_eq!(gauge(&s, "railscope_gpu_mig_enabled", "1"), Some(0.0));
    assert_eq!(
        gauge(&s, "railscope_gpu_mig_pending_enabled", "1"),
        Some(1.0)
    );
    assert_eq!(
        gauge(&s, "railscope_gpu_mig_enabled", "2"),
        None,
        "no MIG support, no series"
    );
    let devices = |s: &[Sample]| -> Vec<(String, String, String)> {
        find(s, "railscope_gpu_mig_device_info", &[("gpu", "0")])
            .iter()
            .map(|d| {
                (
                    d.labels["gpu_instance"].clone(),
                    d.labels["mig_uuid"].clone(),
                    d.labels["profile"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        devices(&s),
        vec![
            (
                "1".into(),
                "MIG-0c5a1e2f-7d4b-5a3c-9e8f-000000000001".into(),
                "3g.40gb".into()
            ),
            (
                "2".into(),
                "MIG-0c5a1e2f-7d4b-5a3c-9e8f-000000000002".into(),
                "3g.40gb".into()
            ),
        ]
    );
    let mig_sm = |s: &[Sample], gi: &str| {
        find(
            s,
            "railscope_gpu_mig_sm_active_ratio",
            &[("gpu", "0"), ("gpu_instance", gi)],
        )
        .first()
        .map(|x| x.value)
    };
    assert!(close(mig_sm(&s, "1").unwrap(), 0.60));
    assert!(close(mig_sm(&s, "2").unwrap(), 0.20));
    assert_eq!(
        value(
            &s,
            "railscope_gpu_mig_memory_total_bytes",
            &[
                ("gpu", "0"),
                ("gpu_instance", "1"),
                ("compute_instance", "0")
            ]
        ),
        (40u64 << 30) as f64
    );

    // Instance 2 is destroyed and a 1g.10gb created in its place.
    let mig = f.gpus[0].mig.as_mut().unwrap();
    mig.devices.remove(1);
    mig.devices.push(mig_device(9, 0, 3, "1g.10gb", 10, 5.0));
    f.save(&live).unwrap();
    agent.poll(
        |s| devices(s).iter().any(|d| d.2 == "1g.10gb"),
        "the new MIG device",
    );
    std::thread::sleep(Duration::from_millis(1100));
    let s = agent.samples();
    let now = devices(&s);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(
        now.iter().all(|d| d.0 != "2"),
        "instance 2 is gone: {now:?}"
    );
    assert!(
        find(
            &s,
            "railscope_gpu_mig_memory_used_bytes",
            &[("gpu", "0"), ("gpu_instance", "2")]
        )
        .is_empty()
    );
    assert_eq!(mig_sm(&s, "2"), None, "no activity for a gone instance");
    assert!(close(mig_sm(&s, "9").unwrap(), 0.05));
    assert!(close(mig_sm(&s, "1").unwrap(), 0.60));

    // MIG turned off: no devices left.
    f.gpus[0].mig = Some(Mig {
        current_mode: 0,
        pending_mode: 0,
        max_devices: 0,
        devices: Vec::new(),
    });
    f.save(&live).unwrap();
    agent.poll(
        |s| gauge(s, "railscope_gpu_mig_enabled", "0") == Some(0.0) && devices(s).is_empty(),
        "MIG off",
    );
}

/// Energy, clock events, violations and reserved memory as the real H200 of
/// `shared/reference/h200-nvml` answered them (the fixture is generated from its answers).
#[test]
fn counters_and_memory_are_what_the_h200_reported() {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            workspace().join("tests/fake-nvml/reference/nvml-matrix-h200.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let field = |id: u32| {
        reference["fields"][id.to_string()]["value"]["ullVal"]
            .as_f64()
            .unwrap()
    };
    let agent = GpuAgent::start(&fixture("h200-matrix.json"), &[]);
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = railscope_tests::parse_samples(&text);
    let calls = &reference["calls"];
    assert_eq!(
        value(&s, "railscope_gpu_energy_joules_total", &[("gpu", "0")]),
        calls["nvmlDeviceGetTotalEnergyConsumption"]
            .as_f64()
            .unwrap()
            / 1000.0
    );
    for (reason, id) in [
        ("sw_power_cap", 74),
        ("sync_boost", 76),
        // Driver 580.159.04 numbers the thermal and power-brake counters 269–271.
        ("sw_thermal_slowdown", 269),
        ("hw_thermal_slowdown", 270),
        ("hw_power_brake_slowdown", 271),
    ] {
        assert_eq!(
            value(
                &s,
                "railscope_gpu_clock_event_seconds_total",
                &[("gpu", "0"), ("reason", reason)]
            ),
            field(id) / 1e9,
            "{reason}"
        );
    }
    assert_eq!(
        value(
            &s,
            "railscope_gpu_memory_temperature_celsius",
            &[("gpu", "0")]
        ),
        field(82)
    );
    let memory = &calls["nvmlDeviceGetMemoryInfo"];
    assert_eq!(
        value(&s, "railscope_gpu_memory_reserved_bytes", &[("gpu", "0")]),
        memory["used"].as_f64().unwrap(),
        "v1 counts the reserved memory as used"
    );
    assert_eq!(
        value(&s, "railscope_gpu_memory_used_bytes", &[("gpu", "0")]),
        0.0
    );
    assert_eq!(
        find(&s, "railscope_gpu_violation_seconds_total", &[("gpu", "0")]).len(),
        8,
        "every policy"
    );
    assert_eq!(gauge(&s, "railscope_gpu_gpm_supported", "0"), Some(1.0));
    assert_eq!(
        gauge(&s, "railscope_gpu_mig_enabled", "0"),
        Some(0.0),
        "MIG supported, off"
    );
    // What the H200 does not have: no C2C, no NVLink, no fabric.
    for absent in [
        "railscope_gpu_c2c_links",
        "railscope_nvlink_up",
        "railscope_gpu_fabric_info",
        "railscope_gpu_fabric_state",
    ] {
        assert!(find(&s, absent, &[]).is_empty(), "{absent}");
    }
    assert!(
        find(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "gpu")]
        )
        .iter()
        .all(|e| e.value == 0.0),
        "an unsupported call is not an error"
    );
}
