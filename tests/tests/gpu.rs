//! The `gpu` source against the fake NVML library (`tests/fake-nvml`): golden expositions per
//! fixture, a hung GPU that costs only its own series within the deadline, a lost GPU, XID
//! counts per code, and faults injected mid-run showing in the next scrape.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::Fixture;
use railscope_tests::{
    Sample, binary, find, free_port, get, normalize, parse_samples, promtool_check_metrics, value,
    workspace,
};

fn fake_library() -> PathBuf {
    nvidia_ml_fake::library_path().expect("the fake NVML library")
}

fn fixture(name: &str) -> PathBuf {
    workspace().join("tests/fake-nvml/fixtures").join(name)
}

/// The agent with only the gpu collector, on the fake library driven by `fixture_file`.
struct GpuAgent {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl GpuAgent {
    fn start(fixture_file: &Path, extra: &[&str]) -> GpuAgent {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let lib = fake_library();
        let child = Command::new(binary())
            .args([
                "--web.listen-address",
                &listen,
                "--collector.disable-defaults",
                "--collector.gpu",
            ])
            .arg("--collector.gpu.nvml-library")
            .arg(&lib)
            .args(extra)
            .env("RAILSCOPE_FAKE_NVML", fixture_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = listen.parse().unwrap();
        // Ready once the start-up collection is done (it waits for a hung GPU up to its
        // deadline); scrapes then start collections of their own.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !get(addr, "/-/ready", &[]).is_ok_and(|r| r.status == 200) {
            assert!(Instant::now() < deadline, "agent did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        GpuAgent { child, addr }
    }

    fn scrape(&self, timeout_header: &str) -> (String, Duration) {
        let start = Instant::now();
        let resp = get(
            self.addr,
            "/metrics",
            &[("X-Prometheus-Scrape-Timeout-Seconds", timeout_header)],
        )
        .unwrap();
        assert_eq!(resp.status, 200);
        (resp.text(), start.elapsed())
    }
}

impl Drop for GpuAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// XID counts arrive from event threads, so golden files leave them out (tested below).
fn gpu_golden_text(text: &str) -> String {
    normalize(text)
        .lines()
        .filter(|l| !l.contains("railscope_gpu_xid_errors"))
        .map(|l| format!("{l}\n"))
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
    ] {
        let agent = GpuAgent::start(
            &fixture(&format!("{name}.json")),
            &["--scrape.timeout-max", "2s"],
        );
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

fn poll(agent: &GpuAgent, mut done: impl FnMut(&[Sample]) -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let (text, _) = agent.scrape("5");
        if done(&parse_samples(&text)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never showed");
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
    poll(
        &agent,
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
