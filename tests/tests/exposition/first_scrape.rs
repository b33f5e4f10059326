//! The first scrape after start, and a scrape that joins a longer collection, answer within
//! their own deadline with every device that is ready, when one NIC's sysfs read blocks or
//! one GPU hangs in the driver; a lost GPU is exported from the first scrape on; an XID event
//! registration that fails is a series and one log line; a NIC that vanishes moves no other
//! port's rail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::{Feature, Fixture};
use railscope_tests::gpu::{fake_library, fixture};
use railscope_tests::{Agent, Sample, copy_fixture, parse_samples, tree_args, workspace};

/// Families whose values change from scrape to scrape or with the agent's own history.
const VOLATILE: &[&str] = &[
    "railscope_collector_duration_seconds",
    "railscope_collector_errors_total",
    "railscope_collector_last_errors",
    "railscope_collector_runs_total",
    "railscope_collections_total",
    "railscope_scrape_requests_total",
    "railscope_open_files_kept",
    "railscope_sysfs_",
    "process_",
];

fn volatile(s: &Sample) -> bool {
    VOLATILE.iter().any(|p| s.name.starts_with(p))
}

fn key(s: &Sample) -> (String, BTreeMap<String, String>) {
    (s.name.clone(), s.labels.clone())
}

/// Every sample of `baseline` that `skip` does not exclude is in `got` with the same value.
fn assert_has_baseline(
    baseline: &[Sample],
    got: &[Sample],
    skip: impl Fn(&Sample) -> bool,
    what: &str,
) {
    let got: BTreeMap<_, f64> = got.iter().map(|s| (key(s), s.value)).collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for s in baseline.iter().filter(|s| !volatile(s) && !skip(s)) {
        checked += 1;
        match got.get(&key(s)) {
            Some(v) if *v == s.value || (v.is_nan() && s.value.is_nan()) => {}
            other => missing.push(format!(
                "{} {:?}: want {}, got {other:?}",
                s.name, s.labels, s.value
            )),
        }
    }
    assert!(checked > 100, "{what}: only {checked} samples compared");
    assert!(
        missing.is_empty(),
        "{what}: {} of {checked} samples missing or different:\n{}",
        missing.len(),
        missing[..missing.len().min(20)].join("\n")
    );
}

/// Scrapes with a scrape timeout of `seconds`; returns the samples and how long it took.
fn scrape(agent: &Agent, seconds: &str) -> (Vec<Sample>, Duration, String) {
    let start = Instant::now();
    let resp = agent.get(
        "/metrics",
        &[("X-Prometheus-Scrape-Timeout-Seconds", seconds)],
    );
    let took = start.elapsed();
    assert_eq!(resp.status, 200);
    let text = resp.text();
    (parse_samples(&text), took, text)
}

fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

/// Replaces `file` (following links) with a FIFO: opening it for reading blocks until a
/// writer comes, like a sysfs read stuck in a wedged driver.
fn block(file: &Path) {
    let real = std::fs::canonicalize(file).unwrap();
    std::fs::remove_file(&real).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&real)
            .status()
            .unwrap()
            .success()
    );
}

fn of_device(s: &Sample, devices: &[&str]) -> bool {
    (s.name.starts_with("railscope_ib_") || s.name.starts_with("railscope_rdma_"))
        && s.labels
            .get("device")
            .is_some_and(|d| devices.contains(&d.as_str()))
}

#[test]
fn a_blocked_nic_read_costs_only_that_nic_from_the_first_scrape_on() {
    let baseline = {
        let agent = Agent::fixture("h100-cx7-ndr-ib", &[]);
        parse_samples(&agent.scrape())
    };
    let dir = tempfile::tempdir().unwrap();
    let tree = copy_fixture("h100-cx7-ndr-ib", &dir.path().join("tree"));
    let class = tree.join("sys/class/infiniband");
    block(&class.join("mlx5_1/ports/1/rate"));
    let args = tree_args(&tree);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::launch(&args, &[]);

    // The first scrape joins the start-up collection (10 s deadline) and brings it forward.
    let (first, took, text) = scrape(&agent, "3");
    assert!(
        took < Duration::from_secs(3),
        "the first scrape took {took:?}"
    );
    railscope_tests::promtool_check_metrics(&text);
    for collector in ["infiniband", "netdev", "pci", "topology", "host"] {
        assert_eq!(
            value_of(
                &first,
                "railscope_collector_success",
                &[("collector", collector)]
            ),
            Some(1.0),
            "{collector}"
        );
    }
    assert_has_baseline(
        &baseline,
        &first,
        |s| of_device(s, &["mlx5_1"]),
        "first scrape",
    );
    assert!(
        !first.iter().any(|s| of_device(s, &["mlx5_1"])),
        "the blocked NIC is skipped"
    );
    assert!(
        value_of(
            &first,
            "railscope_sysfs_blocked_seconds",
            &[("path", "class/infiniband/mlx5_1")]
        )
        .is_some_and(|v| v > 0.0)
    );

    // A longer collection runs when a second NIC's read blocks; a 3 s scrape joins it. Outside
    // sysfs the agent notices a file replaced under a kept-open descriptor within a second
    // (`VERIFY_EVERY` in collectors/src/fs/kept.rs), so the FIFO is in place before the collection
    // that must meet it.
    block(&class.join("mlx5_3/ports/1/rate"));
    std::thread::sleep(Duration::from_millis(1500));
    let long = {
        let addr = agent.addr;
        std::thread::spawn(move || {
            let start = Instant::now();
            let resp = railscope_tests::get(
                addr,
                "/metrics",
                &[("X-Prometheus-Scrape-Timeout-Seconds", "30")],
            )
            .unwrap();
            (resp.status, start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (joined, took, _) = scrape(&agent, "3");
    assert!(
        took < Duration::from_secs(3),
        "the joining scrape took {took:?}"
    );
    assert_has_baseline(
        &baseline,
        &joined,
        |s| of_device(s, &["mlx5_1", "mlx5_3"]),
        "joining scrape",
    );
    assert!(!joined.iter().any(|s| of_device(s, &["mlx5_1", "mlx5_3"])));
    assert!(
        value_of(&joined, "railscope_scrape_requests_total", &[]).unwrap()
            > value_of(&joined, "railscope_collections_total", &[]).unwrap(),
        "the scrape shared the running collection"
    );
    let (status, long_took) = long.join().unwrap();
    assert_eq!(status, 200);
    assert!(
        long_took < Duration::from_secs(4),
        "the long scrape ended with the short one: {long_took:?}"
    );

    // Later scrapes skip both blocked NICs at once; each was logged once.
    let (later, took, _) = scrape(&agent, "3");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_has_baseline(
        &baseline,
        &later,
        |s| of_device(s, &["mlx5_1", "mlx5_3"]),
        "later scrape",
    );
    let log = agent.log();
    let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("A read blocked in the kernel"), 2, "{log}");
    assert_eq!(count("answered again"), 0, "the FIFOs never return: {log}");
}

fn nvml_fixture(name: &str) -> Fixture {
    Fixture::load(&fixture(name)).unwrap()
}

fn gpu_agent(fixture: &Path) -> Agent {
    let lib = fake_library();
    Agent::launch(
        &[
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.gpu.nvml-library",
            lib.to_str().unwrap(),
        ],
        &[("RAILSCOPE_FAKE_NVML", fixture.as_os_str())],
    )
}

#[test]
fn a_hung_gpu_costs_only_itself_and_a_lost_gpu_shows_from_the_first_scrape() {
    // GPU 5 fell off the bus, GPU 6 hangs 15 s in every call.
    let fixture = workspace().join("tests/fake-nvml/fixtures/h100-sxm-8gpu-faults.json");
    let golden =
        std::fs::read_to_string(workspace().join("tests/golden/gpu-h100-sxm-8gpu-faults.prom"))
            .unwrap();
    let baseline = parse_samples(&golden);
    let agent = gpu_agent(&fixture);
    let (first, took, text) = scrape(&agent, "3");
    assert!(
        took < Duration::from_secs(3),
        "the first scrape took {took:?}"
    );
    railscope_tests::promtool_check_metrics(&text);
    assert_eq!(
        value_of(
            &first,
            "railscope_collector_success",
            &[("collector", "gpu")]
        ),
        Some(1.0)
    );
    assert_has_baseline(
        &baseline,
        &first,
        |s| s.name.starts_with("railscope_gpu_xid_errors"),
        "first scrape",
    );
    for gpu in 0..8 {
        let g = gpu.to_string();
        let up = value_of(&first, "railscope_gpu_up", &[("gpu", &g)]);
        assert_eq!(
            up,
            Some(if gpu == 5 || gpu == 6 { 0.0 } else { 1.0 }),
            "gpu {gpu}"
        );
    }
    assert_eq!(
        value_of(
            &first,
            "railscope_gpu_state",
            &[("gpu", "5"), ("state", "lost")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value_of(
            &first,
            "railscope_gpu_state",
            &[("gpu", "6"), ("state", "timeout")]
        ),
        Some(1.0)
    );
    assert!(
        value_of(
            &first,
            "railscope_collector_errors_total",
            &[("collector", "gpu")]
        )
        .unwrap()
            >= 1.0
    );
    // More scrapes while GPU 6 still hangs: same answer, fast, nothing logged again.
    for _ in 0..3 {
        let (again, took, _) = scrape(&agent, "3");
        assert!(took < Duration::from_secs(1), "{took:?}");
        assert_has_baseline(
            &baseline,
            &again,
            |s| s.name.starts_with("railscope_gpu_xid_errors"),
            "later scrape",
        );
    }
    let log = agent.log();
    let count = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("A GPU fell off the bus"), 1, "{log}");
    assert_eq!(count("did not answer in time"), 1, "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("did not answer in time") && l.contains("gpu6")),
        "{log}"
    );
}

#[test]
fn a_failed_xid_registration_is_a_series_and_one_log_line() {
    let mut fixture = nvml_fixture("h100-sxm-8gpu.json");
    fixture.gpus[2].not_supported.push(Feature::Events);
    fixture.gpus[3].errors.insert(Feature::PowerUsage, 4); // NO_PERMISSION
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixture.json");
    fixture.save(&path).unwrap();
    let mut agent = gpu_agent(&path);
    agent.wait_ready();
    let mut errors = Vec::new();
    for _ in 0..3 {
        let (samples, _, _) = scrape(&agent, "3");
        for gpu in 0..8 {
            let g = gpu.to_string();
            assert_eq!(
                value_of(
                    &samples,
                    "railscope_gpu_xid_events_registered",
                    &[("gpu", &g)]
                ),
                Some(if gpu == 2 { 0.0 } else { 1.0 }),
                "gpu {gpu}"
            );
        }
        assert_eq!(
            value_of(&samples, "railscope_gpu_power_usage_watts", &[("gpu", "3")]),
            None
        );
        errors.push(
            value_of(
                &samples,
                "railscope_collector_errors_total",
                &[("collector", "gpu")],
            )
            .unwrap(),
        );
    }
    assert!(
        errors[0] >= 1.0 && errors[2] > errors[0],
        "NVML failures are counted: {errors:?}"
    );
    let log = agent.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Cannot register for XID events"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("gpu=2"), "{}", lines[0]);
    let power: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("nvmlDeviceGetPowerUsage") || l.contains("power_usage"))
        .collect();
    assert_eq!(power.len(), 1, "one log line for the failing call: {log}");
}

fn rails(samples: &[Sample]) -> BTreeMap<(String, String), String> {
    samples
        .iter()
        .filter(|s| s.name == "railscope_rail_info")
        .map(|s| {
            (
                (s.labels["device"].clone(), s.labels["port"].clone()),
                s.labels["rail"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_vanished_nic_moves_no_other_ports_rail() {
    let before = rails(&parse_samples(
        &Agent::fixture("h100-cx7-ndr-ib", &[]).scrape(),
    ));
    assert_eq!(before.len(), 8);
    for (how, gone) in [
        ("RDMA device removed", "mlx5_0"),
        ("RDMA device removed", "mlx5_5"),
        ("PCI function removed", "mlx5_6"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let tree = copy_fixture("h100-cx7-ndr-ib", &dir.path().join("tree"));
        let link = tree.join("sys/class/infiniband").join(gone);
        if how == "PCI function removed" {
            let function = std::fs::canonicalize(link.join("device")).unwrap();
            std::fs::remove_dir_all(&function).unwrap();
            let bdf = function.file_name().unwrap();
            let _ = std::fs::remove_file(tree.join("sys/bus/pci/devices").join(bdf));
        }
        std::fs::remove_file(&link).unwrap();
        let after = rails(&parse_samples(&Agent::tree(&tree, &[]).scrape()));
        assert_eq!(after.len(), 7, "{how} {gone}: {after:?}");
        for (port, rail) in &after {
            assert_eq!(Some(rail), before.get(port), "{how} {gone}: {port:?} moved");
        }
    }
}
