//! Rack-scale facts of GB200 NVL72 trays through the agent: where each GPU sits (platform
//! info: chassis, slot, tray, module), C2C mode, and the NVLink5 FEC history; what older
//! GPUs export instead (nothing new, no error); the version fallback of the platform call;
//! a lost GPU's location; a malformed answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use railscope_tests::gpu::{GpuAgent, fixture, live_fixture};
use railscope_tests::{Sample, find, parse_samples, promtool_check_metrics, value};

/// The chassis serial number of `gb200-tray.json`.
const CHASSIS: &str = "1823825100042";

fn errors(s: &[Sample]) -> f64 {
    value(
        s,
        "railscope_collector_errors_total",
        &[("collector", "gpu")],
    )
}

/// The platform series of GPU `gpu`, as (chassis, slot, tray, module, host, guid).
fn platform(s: &[Sample], gpu: &str) -> Option<[String; 6]> {
    let found = find(s, "railscope_gpu_platform_info", &[("gpu", gpu)]);
    let p = found.first()?;
    Some(
        [
            "chassis_serial",
            "slot",
            "tray",
            "module_id",
            "host_id",
            "ib_guid",
        ]
        .map(|l| p.labels[l].clone()),
    )
}

#[test]
fn every_gb200_gpu_names_its_chassis_tray_slot_and_module() {
    let agent = GpuAgent::start(&fixture("gb200-tray.json"), &[]);
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    for (gpu, module) in [("0", "2"), ("1", "1"), ("2", "4"), ("3", "3")] {
        let p = platform(&s, gpu).unwrap_or_else(|| panic!("GPU {gpu} has no platform series"));
        let guid = format!("0x21ac5b6a528f7c1{gpu}");
        assert_eq!(
            p,
            [CHASSIS, "4", "3", module, "1", guid.as_str()].map(String::from),
            "GPU {gpu}"
        );
        let info = find(&s, "railscope_gpu_platform_info", &[("gpu", gpu)]);
        assert_eq!(info[0].labels["peer_type"], "2");
        assert_eq!(info[0].value, 1.0);
        let gpu_info = find(&s, "railscope_gpu_info", &[("gpu", gpu)]);
        assert_eq!(gpu_info[0].labels["module_id"], module, "GPU {gpu}");
        assert_eq!(
            value(&s, "railscope_gpu_c2c_enabled", &[("gpu", gpu)]),
            1.0,
            "GPU {gpu} is a Grace-Blackwell superchip"
        );
    }
    assert_eq!(find(&s, "railscope_gpu_platform_info", &[]).len(), 4);
    assert_eq!(errors(&s), 0.0);
}

#[test]
fn gpus_before_blackwell_gain_no_platform_series_and_count_no_error() {
    for (name, gpus, c2c) in [
        ("h100-sxm-8gpu.json", 8, Some(0.0)),
        ("a100-pcie-4gpu-bridged.json", 4, None),
        ("v100-pcie-no-nvlink.json", 1, None),
        ("h200-matrix.json", 1, Some(0.0)),
    ] {
        let agent = GpuAgent::start(&fixture(name), &[]);
        let s = agent.samples();
        assert_eq!(find(&s, "railscope_gpu_up", &[]).len(), gpus, "{name}");
        assert!(
            find(&s, "railscope_gpu_platform_info", &[]).is_empty(),
            "{name}"
        );
        assert!(
            find(&s, "railscope_nvlink_fec_history_total", &[]).is_empty(),
            "{name}"
        );
        // Hopper answers C2C mode 0 (off) as the real H200 does; older GPUs do not answer.
        let modes = find(&s, "railscope_gpu_c2c_enabled", &[]);
        match c2c {
            Some(v) => {
                assert_eq!(modes.len(), gpus, "{name}");
                assert!(modes.iter().all(|m| m.value == v), "{name}");
            }
            None => assert!(modes.is_empty(), "{name}"),
        }
        assert_eq!(errors(&s), 0.0, "{name}: {}", agent.log());
    }
}

#[test]
fn the_h200_reports_its_module_id_and_nothing_else_of_the_platform() {
    let agent = GpuAgent::start(&fixture("h200-matrix.json"), &[]);
    let s = agent.samples();
    let info = find(&s, "railscope_gpu_info", &[("gpu", "0")]);
    assert_eq!(info[0].labels["module_id"], "1", "nvidia-smi's module_id");
    assert!(platform(&s, "0").is_none());
    // The H100 fixtures do not model a module id: no label at all.
    let agent = GpuAgent::start(&fixture("h100-sxm-8gpu.json"), &[]);
    let s = agent.samples();
    let info = find(&s, "railscope_gpu_info", &[("gpu", "0")]);
    assert!(!info[0].labels.contains_key("module_id"), "{:?}", info[0]);
}

#[test]
fn a_driver_that_offers_only_platform_info_v1_is_read_through_v1() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "gb200-tray.json");
    for g in &mut f.gpus {
        g.platform.as_mut().unwrap().versions = vec![1];
    }
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    let s = agent.samples();
    for (gpu, module) in [("0", "2"), ("1", "1"), ("2", "4"), ("3", "3")] {
        let p = platform(&s, gpu).unwrap_or_else(|| panic!("GPU {gpu}: no v1 fallback"));
        assert_eq!(p[..4], [CHASSIS, "4", "3", module].map(String::from));
    }
    assert_eq!(errors(&s), 0.0, "{}", agent.log());
    // A driver that offers v2 only answers the first ask.
    for g in &mut f.gpus {
        g.platform.as_mut().unwrap().versions = vec![2];
    }
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    assert_eq!(
        find(&agent.samples(), "railscope_gpu_platform_info", &[]).len(),
        4
    );
}

#[test]
fn a_lost_gpu_keeps_its_platform_series() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "gb200-tray.json");
    let agent = GpuAgent::start(&live, &[]);
    assert!(platform(&agent.samples(), "1").is_some());
    f.gpus[1].lost = true;
    f.save(&live).unwrap();
    agent.poll(
        |s| value(s, "railscope_gpu_state", &[("gpu", "1"), ("state", "lost")]) == 1.0,
        "GPU 1 lost",
    );
    let s = agent.samples();
    assert_eq!(
        platform(&s, "1"),
        Some([CHASSIS, "4", "3", "1", "1", "0x21ac5b6a528f7c11"].map(String::from)),
        "the lost GPU still names its tray and slot"
    );
    assert!(find(&s, "railscope_gpu_c2c_enabled", &[("gpu", "1")]).is_empty());
    assert_eq!(find(&s, "railscope_gpu_platform_info", &[]).len(), 4);
}

#[test]
fn a_malformed_platform_answer_costs_that_gpus_platform_series_only() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "gb200-tray.json");
    let mut bytes = CHASSIS.as_bytes().to_vec();
    bytes[4] = 0xff;
    f.gpus[2].platform.as_mut().unwrap().chassis_serial_bytes = Some(bytes);
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    let s = agent.samples();
    assert!(platform(&s, "2").is_none());
    for gpu in ["0", "1", "3"] {
        assert!(platform(&s, gpu).is_some(), "GPU {gpu}");
    }
    assert_eq!(value(&s, "railscope_gpu_up", &[("gpu", "2")]), 1.0);
    assert_eq!(
        find(&s, "railscope_gpu_info", &[("gpu", "2")])[0].labels["module_id"],
        "4"
    );
    assert_eq!(find(&s, "railscope_nvlink_up", &[("gpu", "2")]).len(), 18);
    assert!(errors(&s) >= 1.0, "counted");
    let log = agent.log();
    assert!(
        log.contains("nvmlDeviceGetPlatformInfo") && log.contains("not printable ASCII"),
        "logged with the call and the reason: {log}"
    );
}

#[test]
fn fec_history_is_exported_per_active_link_and_moves_when_high_bins_rise() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "gb200-tray.json");
    // One link down: it has no FEC history.
    f.gpus[0].nvlinks[17].active = false;
    f.save(&live).unwrap();
    // Read every second rather than every 60 s, so that the rise shows within the poll.
    let agent = GpuAgent::start(&live, &["--collector.gpu.fec-history-interval=1s"]);
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    let fec = find(&s, "railscope_nvlink_fec_history_total", &[]);
    assert_eq!(fec.len(), (4 * 18 - 1) * 16, "16 bins per active link");
    assert!(
        find(
            &s,
            "railscope_nvlink_fec_history_total",
            &[("gpu", "0"), ("link", "17")]
        )
        .is_empty()
    );
    let bin = |s: &[Sample], gpu: &str, link: &str, bin: &str| {
        value(
            s,
            "railscope_nvlink_fec_history_total",
            &[("gpu", gpu), ("link", link), ("bin", bin)],
        )
    };
    // Healthy links: the low bins hold it all.
    assert!(bin(&s, "0", "3", "0") > bin(&s, "0", "3", "1"));
    assert_eq!(bin(&s, "0", "3", "15"), 0.0);
    // The faulty link of GPU 2 has counts up to bin 6.
    assert!(bin(&s, "2", "11", "6") > 0.0);
    let before = bin(&s, "1", "5", "14");

    // GPU 1 link 5 degrades: its high bins rise.
    let history = f.gpus[1].nvlinks[5]
        .nvlink5
        .as_mut()
        .unwrap()
        .fec_history
        .as_mut()
        .unwrap();
    for (n, b) in history.iter_mut().enumerate().skip(12) {
        *b += 100 * n as u64;
    }
    f.save(&live).unwrap();
    agent.poll(
        |s| bin(s, "1", "5", "14") == before + 1400.0,
        "GPU 1 link 5's FEC bin 14 rising by 1400",
    );
    let s = agent.samples();
    assert_eq!(bin(&s, "1", "5", "15"), 1500.0);
    assert_eq!(bin(&s, "1", "4", "15"), 0.0, "its neighbour stays clean");
    assert_eq!(errors(&s), 0.0);
}

#[test]
fn a_fec_history_interval_of_zero_turns_the_fec_history_off() {
    let dir = tempfile::tempdir().unwrap();
    let (live, _) = live_fixture(dir.path(), "gb200-tray.json");
    let agent = GpuAgent::start(&live, &["--collector.gpu.fec-history-interval=0"]);
    let s = agent.samples();
    assert!(find(&s, "railscope_nvlink_fec_history_total", &[]).is_empty());
    assert!(
        !find(&s, "railscope_nvlink_errors_total", &[]).is_empty(),
        "the other NVLink5 counters stay"
    );
    assert_eq!(errors(&s), 0.0);
    // Shorter than a second stops start-up, naming the option.
    let refused = std::process::Command::new(railscope_tests::binary())
        .args([
            "--web.listen-address=127.0.0.1:0",
            "--collector.gpu.fec-history-interval=500ms",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--collector.gpu.fec-history-interval")
            && stderr.contains("shorter than 1s"),
        "{stderr}"
    );
}
