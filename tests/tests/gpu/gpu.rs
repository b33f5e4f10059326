//! The `gpu` source against the fake NVML library (`tests/fake-nvml`): golden expositions per
//! fixture, a hung GPU that costs only its own series within the deadline, a lost GPU, XID
//! counts per code, and faults injected mid-run showing in the next scrape; static values read
//! once and again when a GPU comes back, PCIe traffic from the background sampler (byte
//! counters over their wraps, the throughput sample elsewhere, a sampler call that hangs), and
//! `scripts/gpu-check` against a fake `nvidia-smi`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::{FieldOverride, FieldType, Fixture};
use railscope_tests::gpu::{GpuAgent, fake_library, fixture, live_fixture};
use railscope_tests::{
    Agent, Sample, binary, find, free_port, get, normalize, parse_samples, promtool_check_metrics,
    value, workspace,
};

/// XID counts arrive from event threads, so golden files leave them out (tested below).
/// GPM activity is a window between two samples whose length varies from run to run: the
/// window is left out, and the values, the same whatever its length up to the rounding of
/// the division, are rounded to nine decimals.
fn gpu_golden_text(text: &str) -> String {
    normalize(text)
        .lines()
        .filter(|l| !l.contains("railscope_gpu_xid_errors"))
        .map(|l| {
            if l.starts_with("railscope_gpu_gpm_window_seconds{") {
                let (series, _) = l.rsplit_once(' ').unwrap();
                return format!("{series} <window>\n");
            }
            let gpm = l.starts_with("railscope_gpu_gpm_")
                || (l.starts_with("railscope_gpu_") && l.contains("_active_ratio{"))
                || l.starts_with("railscope_gpu_sm_occupancy_ratio{")
                || l.starts_with("railscope_gpu_mig_sm_occupancy_ratio{");
            match l.rsplit_once(' ') {
                Some((series, v)) if gpm && !l.starts_with('#') => {
                    let v: f64 = v.parse().unwrap();
                    format!("{series} {}\n", (v * 1e9).round() / 1e9)
                }
                _ => format!("{l}\n"),
            }
        })
        .collect()
}

#[test]
fn gpu_fixtures_match_their_golden_expositions() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for name in [
        "h100-sxm-8gpu",
        "h100-sxm-8gpu-faults",
        "a100-pcie-4gpu-bridged",
        "v100-pcie-no-nvlink",
        "h200-matrix",
        "h100-mig",
        "gb200-tray",
    ] {
        let agent = GpuAgent::start(
            &fixture(&format!("{name}.json")),
            &["--scrape.timeout-max", "2s"],
        );
        // The start-up collection took the first GPM samples; the scrape's are a window
        // of a second or more later.
        std::thread::sleep(Duration::from_millis(1100));
        let (text, _) = agent.scrape("10");
        promtool_check_metrics(&text);
        let got = gpu_golden_text(&text);
        let path = workspace()
            .join("tests/golden")
            .join(format!("gpu-{name}.prom"));
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_GOLDEN=1", path.display()));
        if got != want {
            failures.push(name);
        }
    }
    assert!(
        failures.is_empty(),
        "expositions differ from their golden files: {failures:?}"
    );
}

#[test]
fn healthy_h100_node() {
    let agent = GpuAgent::start(&fixture("h100-sxm-8gpu.json"), &[]);
    let (text, _) = agent.scrape("10");
    let s = parse_samples(&text);
    assert_eq!(
        find(&s, "railscope_gpu_up", &[])
            .iter()
            .filter(|x| x.value == 1.0)
            .count(),
        8
    );
    let info = find(&s, "railscope_gpu_info", &[("gpu", "0")]);
    assert_eq!(
        info[0].labels["pci_address"], "0000:1b:00.0",
        "NVML's bus id in sysfs form"
    );
    assert_eq!(info[0].labels["driver_version"], "550.127.05");
    // 18 links per GPU from the link-count field, all active and going to switches.
    assert_eq!(find(&s, "railscope_nvlink_up", &[]).len(), 8 * 18);
    assert!(
        find(&s, "railscope_nvlink_up", &[])
            .iter()
            .all(|x| x.value == 1.0)
    );
    assert!(
        find(&s, "railscope_nvlink_remote_info", &[])
            .iter()
            .all(|x| x.labels["remote_type"] == "switch")
    );
    // Per-link traffic, read with scopeId = link (the safe wrapper would read link 0 only).
    let tx: Vec<f64> = find(
        &s,
        "railscope_nvlink_data_bytes_total",
        &[("gpu", "0"), ("direction", "tx")],
    )
    .iter()
    .map(|x| x.value)
    .collect();
    assert_eq!(tx.len(), 18);
    assert!(
        tx.windows(2).any(|w| w[0] != w[1]),
        "every link read the same counter: {tx:?}"
    );
    assert_eq!(
        value(&s, "railscope_gpu_fabric_state", &[("gpu", "0")]),
        3.0
    );
    assert_eq!(
        value(&s, "railscope_collector_success", &[("collector", "gpu")]),
        1.0
    );
}

#[test]
fn a_hung_gpu_costs_only_its_own_series_within_the_deadline() {
    let agent = GpuAgent::start(
        &fixture("h100-sxm-8gpu-faults.json"),
        &["--scrape.timeout-max", "3s"],
    );
    let (text, took) = agent.scrape("3");
    assert!(
        took < Duration::from_millis(2900),
        "the scrape waited {took:?} for the hung GPU"
    );
    let s = parse_samples(&text);
    assert_eq!(
        value(
            &s,
            "railscope_gpu_state",
            &[("gpu", "6"), ("state", "timeout")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_gpu_state",
            &[("gpu", "5"), ("state", "lost")]
        ),
        1.0
    );
    assert_eq!(value(&s, "railscope_gpu_up", &[("gpu", "5")]), 0.0);
    for gpu in ["0", "1", "2", "3", "4", "7"] {
        assert_eq!(
            value(&s, "railscope_gpu_up", &[("gpu", gpu)]),
            1.0,
            "GPU {gpu}"
        );
        assert!(
            !find(&s, "railscope_gpu_temperature_celsius", &[("gpu", gpu)]).is_empty(),
            "GPU {gpu}"
        );
    }
    assert!(find(&s, "railscope_gpu_temperature_celsius", &[("gpu", "6")]).is_empty());
    assert_eq!(
        value(&s, "railscope_collector_success", &[("collector", "gpu")]),
        1.0
    );
    // Faults of the fixture.
    assert_eq!(
        value(&s, "railscope_nvlink_up", &[("gpu", "1"), ("link", "7")]),
        0.0
    );
    assert_eq!(
        value(&s, "railscope_gpu_pcie_link_generation", &[("gpu", "3")]),
        4.0
    );
    assert_eq!(
        value(&s, "railscope_gpu_pcie_link_width_lanes", &[("gpu", "3")]),
        8.0
    );
    assert_eq!(
        value(&s, "railscope_gpu_remapped_rows_pending", &[("gpu", "4")]),
        1.0
    );
    // The hung GPU is not asked again while stuck: the next scrape is just as fast.
    let (text, took) = agent.scrape("3");
    assert!(took < Duration::from_millis(2900));
    let s = parse_samples(&text);
    assert_eq!(
        value(
            &s,
            "railscope_gpu_state",
            &[("gpu", "6"), ("state", "timeout")]
        ),
        1.0
    );
    assert!(value(&s, "process_threads", &[]) < 40.0);
    // XID 48 on GPU 4 is counted by code.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (text, _) = agent.scrape("3");
        let s = parse_samples(&text);
        if let [x] = find(
            &s,
            "railscope_gpu_xid_errors_total",
            &[("gpu", "4"), ("xid", "48")],
        )
        .as_slice()
        {
            assert_eq!(x.value, 1.0);
            break;
        }
        assert!(Instant::now() < deadline, "XID 48 never counted");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn faults_injected_mid_run_show_in_the_next_scrapes() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.json");
    let mut f = Fixture::load(&fixture("h100-sxm-8gpu.json")).unwrap();
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    let (text, _) = agent.scrape("5");
    let s = parse_samples(&text);
    let before = value(
        &s,
        "railscope_nvlink_errors_total",
        &[("gpu", "2"), ("link", "3"), ("type", "crc_flit")],
    );

    // CRC errors climb on GPU 2 link 3; GPU 5 falls off the bus with XID 79.
    f.gpus[2].nvlinks[3].crc_flit += 1000;
    f.gpus[5].lost = true;
    f.gpus[5].xid_events.push(79);
    f.save(&live).unwrap();
    agent.poll(
        |s| {
            value(
                s,
                "railscope_nvlink_errors_total",
                &[("gpu", "2"), ("link", "3"), ("type", "crc_flit")],
            ) == before + 1000.0
                && value(s, "railscope_gpu_state", &[("gpu", "5"), ("state", "lost")]) == 1.0
                && find(
                    s,
                    "railscope_gpu_xid_errors_total",
                    &[("gpu", "5"), ("xid", "79")],
                )
                .len()
                    == 1
        },
        "climbing CRC errors, a lost GPU and its XID 79",
    );
    let (text, _) = agent.scrape("5");
    let s = parse_samples(&text);
    let info = find(&s, "railscope_gpu_info", &[("gpu", "5")]);
    assert!(
        info[0].labels["uuid"].starts_with("GPU-"),
        "a lost GPU keeps the identity it had"
    );
    assert_eq!(
        find(&s, "railscope_gpu_up", &[])
            .iter()
            .filter(|x| x.value == 1.0)
            .count(),
        7
    );
}

#[test]
fn a_node_without_nvml_reports_no_gpu_and_no_error() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(binary())
        .args([
            "--web.listen-address",
            &listen,
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.gpu.nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = listen.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        if let Ok(r) = get(addr, "/metrics", &[]) {
            break r.text();
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let s = parse_samples(&text);
    assert!(find(&s, "railscope_gpu_up", &[]).is_empty());
    assert_eq!(
        value(&s, "railscope_collector_success", &[("collector", "gpu")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "gpu")]
        ),
        0.0
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(log.matches("Subsystem not present").count(), 1, "{log}");
}

/// A copy of fixture `name` in `dir` that the test may change while the agent runs.
#[test]
fn static_values_are_read_once_and_again_when_a_gpu_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    let agent = GpuAgent::start(&live, &[]);
    let max_sm = |s: &[Sample]| {
        value(
            s,
            "railscope_gpu_clock_max_hertz",
            &[("gpu", "0"), ("clock", "sm")],
        )
    };
    let s = agent.samples();
    assert_eq!(max_sm(&s), 1980e6);
    assert_eq!(
        value(
            &s,
            "railscope_gpu_pcie_link_max_width_lanes",
            &[("gpu", "0")]
        ),
        16.0
    );
    assert_eq!(
        value(&s, "railscope_gpu_pcie_replays_total", &[("gpu", "0")]),
        0.0
    );

    // The static values change under the agent (they cannot on a real GPU while the
    // driver is loaded), and so do a moving one and the replay counter.
    f.gpus[0].max_clocks_mhz.as_mut().unwrap().sm = 1755;
    f.gpus[0].pcie.as_mut().unwrap().max_width = 8;
    f.gpus[0].pcie.as_mut().unwrap().replay_counter = 7;
    f.gpus[0].temperature_c = Some(77);
    f.save(&live).unwrap();
    agent.poll(
        |s| value(s, "railscope_gpu_temperature_celsius", &[("gpu", "0")]) == 77.0,
        "the new temperature",
    );
    for _ in 0..3 {
        let s = agent.samples();
        assert_eq!(max_sm(&s), 1980e6, "max clock read again");
        assert_eq!(
            value(
                &s,
                "railscope_gpu_pcie_link_max_width_lanes",
                &[("gpu", "0")]
            ),
            16.0,
            "max width read again"
        );
        assert_eq!(
            value(&s, "railscope_gpu_pcie_replays_total", &[("gpu", "0")]),
            0.0,
            "replays read again within 30 s"
        );
    }

    // Lost, then back (a GPU reset): everything is read again.
    f.gpus[0].lost = true;
    f.save(&live).unwrap();
    agent.poll(
        |s| value(s, "railscope_gpu_state", &[("gpu", "0"), ("state", "lost")]) == 1.0,
        "GPU 0 lost",
    );
    f.gpus[0].lost = false;
    f.save(&live).unwrap();
    agent.poll(
        |s| value(s, "railscope_gpu_up", &[("gpu", "0")]) == 1.0,
        "GPU 0 back",
    );
    let s = agent.samples();
    assert_eq!(max_sm(&s), 1755e6);
    assert_eq!(
        value(
            &s,
            "railscope_gpu_pcie_link_max_width_lanes",
            &[("gpu", "0")]
        ),
        8.0
    );
    assert_eq!(
        value(&s, "railscope_gpu_pcie_replays_total", &[("gpu", "0")]),
        7.0
    );
    // Other GPUs were not lost: their static values stay as first read.
    assert_eq!(
        value(
            &s,
            "railscope_gpu_clock_max_hertz",
            &[("gpu", "1"), ("clock", "sm")]
        ),
        1980e6
    );
}

fn counter_field(id: u32, value: u64) -> FieldOverride {
    FieldOverride {
        id,
        scope: None,
        value: value as f64,
        value_type: FieldType::Uint,
        error: None,
    }
}

#[test]
fn pcie_byte_counters_are_exported_over_their_wraps() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    // GPU 0 has the byte counters (fields 197/198, 32-bit as on the H200); TX is near the top.
    f.gpus[0].fields.push(counter_field(197, 4_294_967_000));
    f.gpus[0].fields.push(counter_field(198, 1000));
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    let bytes = |s: &[Sample], dir: &str| {
        value(
            s,
            "railscope_gpu_pcie_bytes_total",
            &[("gpu", "0"), ("direction", dir)],
        )
    };
    assert_eq!(bytes(&s, "tx"), 4_294_967_000.0, "starts at the counter");
    assert_eq!(bytes(&s, "rx"), 1000.0);
    assert!(
        find(
            &s,
            "railscope_gpu_pcie_throughput_bytes_per_second",
            &[("gpu", "0")]
        )
        .is_empty(),
        "no 20 ms sample where the counters are"
    );
    assert!(find(&s, "railscope_gpu_pcie_bytes_total", &[("gpu", "1")]).is_empty());
    assert_eq!(
        find(
            &s,
            "railscope_gpu_pcie_throughput_bytes_per_second",
            &[("gpu", "1")]
        )
        .len(),
        2,
        "GPUs without counters keep the sampled gauge"
    );

    // TX wraps (1000 bytes on), RX moves 4000: the sampler reads the counters every second.
    f.gpus[0].fields = vec![counter_field(197, 704), counter_field(198, 5000)];
    f.save(&live).unwrap();
    agent.poll(
        |s| bytes(s, "tx") == 4_294_968_000.0 && bytes(s, "rx") == 5000.0,
        "the counters carried over the wrap",
    );
}

/// The driver's recovery action (field 230) is exported every scrape: one series per action,
/// 1 for the one it asks for; a GPU whose driver does not say has none.
#[test]
fn the_drivers_recovery_action_is_exported() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    f.gpus[2].fields.push(counter_field(230, 0));
    f.gpus[3].fields.push(counter_field(230, 1));
    f.gpus[4].fields.push(counter_field(230, 9));
    f.gpus[5].fields.push(counter_field(230, 5));
    f.save(&live).unwrap();
    let agent = GpuAgent::start(&live, &[]);
    let (text, _) = agent.scrape("5");
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    let action = |gpu: &str, action: &str| {
        value(
            &s,
            "railscope_gpu_recovery_action",
            &[("gpu", gpu), ("action", action)],
        )
    };
    assert_eq!(action("2", "none"), 1.0);
    assert_eq!(action("2", "gpu_reset"), 0.0);
    assert_eq!(action("3", "none"), 0.0);
    assert_eq!(action("3", "gpu_reset"), 1.0);
    assert_eq!(action("3", "node_reboot"), 0.0);
    assert_eq!(
        action("4", "unknown_9"),
        1.0,
        "a newer driver's value is shown"
    );
    // 5: the IMEX domain (NVML's RECOVER_IMEX_DOMAIN), named.
    assert_eq!(action("5", "recover_imex_domain"), 1.0);
    assert_eq!(action("5", "none"), 0.0);
    assert!(
        find(
            &s,
            "railscope_gpu_recovery_action",
            &[("action", "unknown_5")]
        )
        .is_empty()
    );
    assert_eq!(
        find(&s, "railscope_gpu_recovery_action", &[("gpu", "3")]).len(),
        6
    );
    assert!(find(&s, "railscope_gpu_recovery_action", &[("gpu", "0")]).is_empty());
}

#[test]
fn pcie_throughput_is_sampled_on_its_own_cadence() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    let agent = GpuAgent::start(&live, &["--collector.gpu.pcie-throughput-interval", "1s"]);
    let tput = |s: &[Sample]| {
        value(
            s,
            "railscope_gpu_pcie_throughput_bytes_per_second",
            &[("gpu", "2"), ("direction", "tx")],
        )
    };
    let s = agent.samples();
    let before = tput(&s);
    assert!(before > 0.0);
    f.gpus[2].pcie.as_mut().unwrap().tx_kbps = 1234;
    f.save(&live).unwrap();
    agent.poll(|s| tput(s) == 1_234_000.0, "the next sample");

    // 0 turns the sampler off: no PCIe traffic at all.
    let off = GpuAgent::start(&live, &["--collector.gpu.pcie-throughput-interval", "0"]);
    let s = off.samples();
    assert!(find(&s, "railscope_gpu_pcie_throughput_bytes_per_second", &[]).is_empty());
    assert_eq!(value(&s, "railscope_gpu_up", &[("gpu", "2")]), 1.0);
}

#[test]
fn an_invalid_pcie_throughput_interval_stops_start_up_naming_the_option() {
    for bad in ["100ms", "5", "soon"] {
        let out = Command::new(binary())
            .args([
                "--web.listen-address",
                &format!("127.0.0.1:{}", free_port()),
                "--collector.disable-defaults",
                "--collector.gpu",
                "--collector.gpu.pcie-throughput-interval",
                bad,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("pcie-throughput-interval"), "{bad}: {err}");
    }
}

#[test]
fn a_sampler_call_that_hangs_costs_its_gpu_once() {
    let dir = tempfile::tempdir().unwrap();
    let (live, mut f) = live_fixture(dir.path(), "h100-sxm-8gpu.json");
    let lib = fake_library();
    let mut agent = Agent::launch(
        &[
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.gpu.nvml-library",
            lib.to_str().unwrap(),
            "--collector.gpu.pcie-throughput-interval",
            "1s",
        ],
        &[("RAILSCOPE_FAKE_NVML", live.as_os_str())],
    );
    agent.wait_ready();
    // GPU 3 wedges between scrapes: the sampler's next call on it hangs 4 s (each call).
    f.gpus[3].hang_ms = 4000;
    f.save(&live).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let start = Instant::now();
    let resp = agent.get("/metrics", &[("X-Prometheus-Scrape-Timeout-Seconds", "3")]);
    let took = start.elapsed();
    let s = parse_samples(&resp.text());
    assert!(
        took < Duration::from_secs(1),
        "the scrape asked the wedged GPU again: {took:?}"
    );
    assert_eq!(
        value(
            &s,
            "railscope_gpu_state",
            &[("gpu", "3"), ("state", "timeout")]
        ),
        1.0
    );
    let info = find(&s, "railscope_gpu_info", &[("gpu", "3")]);
    assert!(
        info[0].labels["uuid"].starts_with("GPU-"),
        "keeps its identity"
    );
    for gpu in ["0", "1", "2", "4", "5", "6", "7"] {
        assert_eq!(
            value(&s, "railscope_gpu_up", &[("gpu", gpu)]),
            1.0,
            "GPU {gpu}"
        );
    }
    assert!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "gpu")]
        ) >= 1.0
    );
    let log = agent.log();
    let late: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("did not answer in time"))
        .collect();
    assert_eq!(late.len(), 1, "{log}");
    assert!(late[0].contains("gpu3"), "{log}");

    // Unwedged: once the stuck call returns, the GPU is read again.
    f.gpus[3].hang_ms = 0;
    f.save(&live).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let s = parse_samples(&agent.scrape());
        if value(&s, "railscope_gpu_up", &[("gpu", "3")]) == 1.0 {
            assert_eq!(
                find(
                    &s,
                    "railscope_gpu_pcie_throughput_bytes_per_second",
                    &[("gpu", "3")]
                )
                .len(),
                2
            );
            break;
        }
        assert!(Instant::now() < deadline, "GPU 3 never came back");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(agent.log().contains("answered again"));
}

/// A fake `nvidia-smi` printing `f`'s values for `--query-gpu=...`, as the real one would
/// with `--format=csv,noheader,nounits`.
fn fake_nvidia_smi(dir: &Path, f: &Fixture) -> PathBuf {
    let mut rows = Vec::new();
    for (i, g) in f.gpus.iter().enumerate() {
        let pcie = g.pcie.as_ref().unwrap();
        let ecc = g.ecc.as_ref().unwrap();
        let mem = g.memory.as_ref().unwrap();
        let clocks = g.clocks_mhz.as_ref().unwrap();
        let fields = [
            ("index", i.to_string()),
            ("uuid", g.uuid.clone()),
            (
                "utilization.gpu",
                g.utilization.as_ref().unwrap().gpu.to_string(),
            ),
            ("memory.used", (mem.used >> 20).to_string()),
            ("memory.total", (mem.total >> 20).to_string()),
            ("memory.reserved", (mem.reserved >> 20).to_string()),
            ("temperature.gpu", g.temperature_c.unwrap().to_string()),
            (
                "power.draw",
                format!("{:.2}", f64::from(g.power_usage_mw.unwrap()) / 1000.0),
            ),
            (
                "enforced.power.limit",
                format!("{:.2}", f64::from(g.power_limit_mw.unwrap()) / 1000.0),
            ),
            ("clocks.sm", clocks.sm.to_string()),
            ("clocks.mem", clocks.mem.to_string()),
            ("pcie.link.gen.current", pcie.generation.to_string()),
            ("pcie.link.gen.max", pcie.max_gen.to_string()),
            ("pcie.link.width.current", pcie.width.to_string()),
            ("pcie.link.width.max", pcie.max_width.to_string()),
            (
                "ecc.errors.corrected.volatile.total",
                ecc.volatile.corrected.to_string(),
            ),
            (
                "ecc.errors.uncorrected.volatile.total",
                ecc.volatile.uncorrected.to_string(),
            ),
        ];
        let row: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{k:?}: {v:?}"))
            .collect();
        rows.push(format!("{{{}}}", row.join(", ")));
    }
    let script = format!(
        "#!/usr/bin/env python3\nimport sys\nROWS = [\n{}\n]\nquery = [a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--query-gpu=')][0]\nfor row in ROWS:\n    print(', '.join(row.get(k, '[N/A]') for k in query.split(',')))\n",
        rows.join(",\n")
    );
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

fn gpu_check(nvidia_smi: &Path, fixture_file: &Path) -> std::process::Output {
    Command::new(workspace().join("scripts/gpu-check"))
        .arg(binary())
        .arg("--nvidia-smi")
        .arg(nvidia_smi)
        .args(["--scrapes", "3", "--interval", "0.1", "--"])
        .arg("--collector.gpu.nvml-library")
        .arg(fake_library())
        .env("RAILSCOPE_FAKE_NVML", fixture_file)
        .output()
        .unwrap()
}

#[test]
fn gpu_check_agrees_with_nvidia_smi_and_catches_a_value_that_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let node = fixture("h100-sxm-8gpu.json");
    let mut f = Fixture::load(&node).unwrap();
    let smi = fake_nvidia_smi(dir.path(), &f);
    let out = gpu_check(&smi, &node);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("every value matches nvidia-smi"),
        "{stdout}"
    );
    assert_eq!(stdout.matches(" ok").count(), 8 * 15, "{stdout}");
    assert!(stdout.contains("CPU per scrape"), "{stdout}");

    // nvidia-smi sees GPU 3 hotter than railscope does.
    f.gpus[3].temperature_c = Some(f.gpus[3].temperature_c.unwrap() + 10);
    let off = dir.path().join("off");
    std::fs::create_dir(&off).unwrap();
    let smi = fake_nvidia_smi(&off, &f);
    let out = gpu_check(&smi, &node);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let bad: Vec<&str> = stdout.lines().filter(|l| l.contains("MISMATCH")).collect();
    assert_eq!(bad.len(), 1, "{stdout}");
    assert!(
        bad[0].starts_with('3') && bad[0].contains("temperature.gpu"),
        "{stdout}"
    );
}
