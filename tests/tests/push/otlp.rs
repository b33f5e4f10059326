//! OTLP push against real receivers: a tonic gRPC server generated from
//! `opentelemetry-proto`, and an OTLP/HTTP server on hyper.
//!
//! * Every series of the exposition (H100 + ConnectX-7 tree, eight GPUs on the fake NVML)
//!   arrives with the value it has there, integers as integers, counters as monotonic
//!   cumulative sums, with the resource attributes and the configured headers.
//! * A receiver that goes away and comes back gets every batch the queue could hold, in
//!   order, with the time each was made; the agent counts what it dropped, its accounts
//!   balance, and its memory stays flat while the receiver is down.
//! * TLS with a client certificate; the hardware semantic-convention names; bad flags.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use railscope_tests::gpu::{fake_library, fixture};
use railscope_tests::otlp::{
    Point, PointValue, Receiver, ReceiverTls, Transport, points, resource,
};
use railscope_tests::{
    Agent, Pki, binary, fixtures, parse_samples, value, workspace, yaml_to_json,
};

/// Families whose values move between a push and a scrape taken a moment later: the
/// agent's own timings, process statistics and push counters. Every other series must
/// carry the same value in both.
const VOLATILE: &[&str] = &[
    "process_",
    "railscope_scrape_",
    "railscope_collector_duration_seconds",
    "railscope_collections",
    "railscope_otlp_",
    "railscope_collector_last_",
    "railscope_collector_runs",
];

fn tree() -> PathBuf {
    fixtures().join("h100-cx7-ndr-ib")
}

/// The agent on the H100 tree with eight fake GPUs, pushing with `extra` flags.
fn agent(extra: &[&str]) -> Agent {
    let tree = tree();
    let lib = fake_library();
    let mut args: Vec<String> = vec![
        "--path.sysfs".into(),
        tree.join("sys").display().to_string(),
        "--path.procfs".into(),
        tree.join("proc").display().to_string(),
        "--collector.gpu.nvml-library".into(),
        lib.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nvml = fixture("h100-sxm-8gpu.json");
    let mut agent = Agent::launch(
        &args,
        &[
            ("RAILSCOPE_FAKE_NVML", nvml.as_os_str()),
            ("NODE_NAME", std::ffi::OsStr::new("node-7")),
        ],
    );
    agent.wait_ready();
    agent
}

fn volatile(name: &str) -> bool {
    VOLATILE.iter().any(|p| name.starts_with(p))
}

/// The exposition's samples as (OTLP name, labels) → (value text, counter?).
fn exposition(text: &str) -> BTreeMap<(String, BTreeMap<String, String>), (String, bool)> {
    let mut counters = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, "counter")) = rest.split_once(' ')
        {
            counters.insert(name.to_owned());
        }
    }
    let mut out = BTreeMap::new();
    for sample in parse_samples(text) {
        let counter = counters.contains(&sample.name);
        let name = match sample.name.strip_suffix("_total") {
            Some(base) if counter => base.to_owned(),
            _ => sample.name.clone(),
        };
        out.insert((name, sample.labels), (sample.text, counter));
    }
    out
}

fn same_value(text: &str, value: PointValue) -> bool {
    match value {
        PointValue::Int(i) => text == i.to_string(),
        PointValue::Double(d) => {
            let parsed: f64 = match text {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                t => t.parse().unwrap(),
            };
            parsed == d || (parsed.is_nan() && d.is_nan())
        }
    }
}

fn push_carries_the_exposition(transport: Transport, extra: &[&str]) {
    let receiver = Receiver::start(transport);
    let endpoint = format!("--otlp.endpoint={}", receiver.endpoint(false));
    let protocol = match transport {
        Transport::Grpc => "--otlp.protocol=grpc",
        Transport::Http => "--otlp.protocol=http/protobuf",
    };
    let mut flags = vec![
        endpoint.as_str(),
        protocol,
        "--otlp.interval=300ms",
        "--otlp.headers=X-Scope-OrgID=fleet-a,api-key=s%3Dcret",
    ];
    flags.extend_from_slice(extra);
    let agent = agent(&flags);
    receiver.received.wait_for(2, Duration::from_secs(30));
    let text = agent.scrape();
    let requests = receiver.received.requests();
    let batch = requests.last().unwrap();

    // The resource says which node and agent this is.
    let resource = resource(batch);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(resource["service.name"], "railscope");
    assert_eq!(resource["k8s.node.name"], "node-7");
    assert_eq!(resource["host.name"], host.trim());
    assert_eq!(resource["service.instance.id"], host.trim());
    assert!(!resource["service.version"].is_empty());
    let headers = &receiver.received.headers()[0];
    assert_eq!(headers["x-scope-orgid"], "fleet-a", "{headers:?}");
    assert_eq!(headers["api-key"], "s=cret");

    let expected = exposition(&text);
    let pushed: Vec<Point> = points(batch);
    let mut seen = BTreeSet::new();
    let mut mismatches = Vec::new();
    for point in &pushed {
        let key = (point.name.clone(), point.attributes.clone());
        assert!(seen.insert(key.clone()), "{key:?} twice in one batch");
        if volatile(&point.name) {
            continue;
        }
        let Some((text_value, counter)) = expected.get(&key) else {
            mismatches.push(format!("pushed but not exposed: {key:?}"));
            continue;
        };
        let kind = if *counter {
            "monotonic cumulative sum"
        } else {
            "gauge"
        };
        assert_eq!(point.kind, kind, "{key:?}");
        if !same_value(text_value, point.value) {
            mismatches.push(format!(
                "{key:?}: exposed {text_value}, pushed {:?}",
                point.value
            ));
        }
    }
    // The OpenTelemetry SDK drops non-finite measurements: an unlimited memlock (+Inf) is
    // exposed but not pushed. Nothing else may be missing.
    let mut non_finite = 0;
    for (key, (text_value, _)) in expected.iter().filter(|(k, _)| !volatile(&k.0)) {
        if seen.contains(key) {
            continue;
        }
        if matches!(text_value.as_str(), "+Inf" | "-Inf" | "NaN") {
            non_finite += 1;
        } else {
            mismatches.push(format!("exposed but not pushed: {key:?}"));
        }
    }
    assert!(non_finite <= 2, "{non_finite} non-finite series");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    let compared = expected.keys().filter(|k| !volatile(&k.0)).count();
    assert!(compared > 1500, "only {compared} series compared");
    // Integers stay integers: byte counters beyond 2^53 would lose digits as doubles.
    let data = pushed
        .iter()
        .find(|p| p.name == "railscope_ib_port_data_bytes")
        .unwrap();
    assert!(matches!(data.value, PointValue::Int(_)), "{data:?}");
    assert_eq!(data.unit, "By");
    let info = pushed
        .iter()
        .find(|p| p.name == "railscope_gpu_info")
        .unwrap();
    assert_eq!(info.value, PointValue::Int(1));
    // The push's own series are in the batch and in the exposition.
    let samples = parse_samples(&text);
    assert!(value(&samples, "railscope_otlp_exported_batches_total", &[]) >= 1.0);
    assert_eq!(
        value(&samples, "railscope_otlp_dropped_batches_total", &[]),
        0.0
    );
    assert!(pushed.iter().any(|p| p.name == "railscope_otlp_batches"));
    // Batches come in the order they were made.
    let times: Vec<u64> = requests
        .iter()
        .map(|r| points(r).iter().map(|p| p.time_unix_nano).max().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn grpc_push_carries_every_series_with_its_exposed_value() {
    push_carries_the_exposition(Transport::Grpc, &[]);
}

#[test]
fn http_push_carries_every_series_with_its_exposed_value() {
    push_carries_the_exposition(Transport::Http, &["--otlp.compression=gzip"]);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

fn counter(agent: &Agent, name: &str) -> f64 {
    value(&parse_samples(&agent.scrape()), name, &[])
}

#[test]
fn receiver_outage_loses_nothing_past_the_queue_bound_and_memory_stays_flat() {
    let mut receiver = Receiver::start(Transport::Grpc);
    let endpoint = format!("--otlp.endpoint={}", receiver.endpoint(false));
    let agent = agent(&[
        &endpoint,
        "--otlp.interval=100ms",
        "--otlp.queue-size=5",
        "--otlp.timeout=1s",
    ]);
    receiver.received.wait_for(2, Duration::from_secs(30));
    receiver.stop();
    let down = std::time::SystemTime::now();
    let before_down = receiver.received.len();

    // The queue fills within a few intervals, then every new batch drops the oldest.
    let deadline = Instant::now() + Duration::from_secs(30);
    while counter(&agent, "railscope_otlp_dropped_batches_total") < 5.0 {
        assert!(Instant::now() < deadline, "the queue never overflowed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = agent.child.id();
    let full = rss_kib(pid);
    std::thread::sleep(Duration::from_secs(6));
    let later = rss_kib(pid);
    let text = agent.scrape();
    let samples = parse_samples(&text);
    let dropped = value(&samples, "railscope_otlp_dropped_batches_total", &[]);
    let made = value(&samples, "railscope_otlp_batches_total", &[]);
    assert!(
        dropped >= 20.0,
        "{dropped} batches dropped of {made} made in 6 s at 100 ms"
    );
    assert!(value(&samples, "railscope_otlp_queue_batches", &[]) <= 5.0);
    assert!(value(&samples, "railscope_otlp_export_failures_total", &[]) >= 1.0);
    let batch_points = value(&samples, "railscope_otlp_batch_data_points", &[]);
    eprintln!(
        "RSS with the queue full: {full} KiB; {dropped} drops later: {later} KiB; {batch_points} points per batch"
    );
    // Over 20 more batches were made and dropped while the receiver was down: kept, they
    // would hold 20 × the points of a batch. The growth stays under the size of a few.
    assert!(
        later < full + 8 * 1024,
        "RSS grew from {full} KiB to {later} KiB while the receiver was down"
    );

    let up = std::time::SystemTime::now();
    receiver.restart();
    receiver
        .received
        .wait_for(before_down + 6, Duration::from_secs(30));
    // The first batches after the restart are those the queue held, made while the
    // receiver was down, oldest first.
    let requests = receiver.received.requests();
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    };
    let times: Vec<u64> = requests[before_down..]
        .iter()
        .map(|r| points(r).iter().map(|p| p.time_unix_nano).max().unwrap())
        .collect();
    let queued: Vec<&u64> = times
        .iter()
        .filter(|t| **t > nanos(down) && **t < nanos(up))
        .collect();
    // The queue keeps the newest five; batches made while the connection comes back up may
    // push one or two of them out.
    assert!(
        (3..=5).contains(&queued.len()) && times[0] > nanos(down) && times[0] < nanos(up),
        "batches made while down and delivered: {times:?}"
    );
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");

    // Every batch made is exported, dropped, or waiting.
    std::thread::sleep(Duration::from_millis(500));
    let samples = parse_samples(&agent.scrape());
    let made = value(&samples, "railscope_otlp_batches_total", &[]);
    let exported = value(&samples, "railscope_otlp_exported_batches_total", &[]);
    let dropped = value(&samples, "railscope_otlp_dropped_batches_total", &[]);
    let waiting = value(&samples, "railscope_otlp_queue_batches", &[]);
    assert_eq!(
        value(&samples, "railscope_otlp_rejected_batches_total", &[]),
        0.0,
        "a batch was refused for good:\n{}",
        agent.log()
    );
    assert!(
        (made - exported - dropped - waiting).abs() <= 1.0,
        "made {made}, exported {exported}, dropped {dropped}, waiting {waiting}"
    );
    assert!(receiver.received.len() as f64 >= exported - 1.0);
}

/// An endpoint that accepts connections and never answers holds an export for its whole
/// timeout; scrapes are answered meanwhile, and the push counts the failure.
#[test]
fn an_endpoint_that_never_answers_does_not_hold_scrapes() {
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hole.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = std::sync::Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in hole.incoming().flatten() {
            keep.lock().unwrap().push(stream);
        }
    });
    let endpoint = format!("--otlp.endpoint=http://127.0.0.1:{port}");
    let agent = agent(&[
        &endpoint,
        "--otlp.protocol=http/protobuf",
        "--otlp.interval=200ms",
        "--otlp.timeout=20s",
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while held.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the push never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    // An export is now waiting on the silent endpoint for up to 20 s.
    for _ in 0..5 {
        let started = Instant::now();
        let samples = parse_samples(&agent.scrape());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a scrape took {:?} while an export hung",
            started.elapsed()
        );
        assert_eq!(
            value(&samples, "railscope_otlp_exported_batches_total", &[]),
            0.0
        );
        assert!(value(&samples, "railscope_otlp_batches_total", &[]) >= 1.0);
    }
}

fn tls_with_a_client_certificate(transport: Transport) {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "otlp");
    let (server_cert, server_key) = pki.issue("collector", true);
    let (client_cert, client_key) = pki.issue("railscope", false);
    let receiver = Receiver::start_with(
        transport,
        Some(ReceiverTls {
            cert: std::fs::read(&server_cert).unwrap(),
            key: std::fs::read(&server_key).unwrap(),
            client_ca: Some(std::fs::read(pki.ca()).unwrap()),
        }),
    );
    let endpoint = format!("--otlp.endpoint={}", receiver.endpoint(true));
    let protocol = match transport {
        Transport::Grpc => "--otlp.protocol=grpc",
        Transport::Http => "--otlp.protocol=http/protobuf",
    };
    let ca = format!("--otlp.tls.ca-file={}", pki.ca().display());
    let cert = format!("--otlp.tls.cert-file={}", client_cert.display());
    let key = format!("--otlp.tls.key-file={}", client_key.display());

    // Without a client certificate the collector refuses the handshake.
    let refused = agent(&[&endpoint, protocol, &ca, "--otlp.interval=200ms"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while counter(&refused, "railscope_otlp_export_failures_total") < 2.0 {
        assert!(
            Instant::now() < deadline,
            "no failed export without a client certificate"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(receiver.received.is_empty());
    assert_eq!(
        counter(&refused, "railscope_otlp_exported_batches_total"),
        0.0
    );
    drop(refused);

    let agent = agent(&[
        &endpoint,
        protocol,
        &ca,
        &cert,
        &key,
        "--otlp.interval=200ms",
    ]);
    receiver.received.wait_for(1, Duration::from_secs(20));
    let points = points(&receiver.received.requests()[0]);
    assert!(
        points
            .iter()
            .any(|p| p.name == "railscope_ib_port_data_bytes")
    );
    assert!(counter(&agent, "railscope_otlp_exported_batches_total") >= 1.0);
}

#[test]
fn grpc_over_tls_with_a_client_certificate() {
    tls_with_a_client_certificate(Transport::Grpc);
}

#[test]
fn http_over_tls_with_a_client_certificate() {
    tls_with_a_client_certificate(Transport::Http);
}

#[test]
fn hardware_semantic_conventions_rename_what_they_define() {
    let receiver = Receiver::start(Transport::Http);
    let endpoint = format!("--otlp.endpoint={}", receiver.endpoint(false));
    let _agent = agent(&[
        &endpoint,
        "--otlp.protocol=http/protobuf",
        "--otlp.interval=300ms",
        "--otlp.hardware-semconv",
    ]);
    receiver.received.wait_for(1, Duration::from_secs(30));
    let points = points(&receiver.received.requests()[0]);
    let names: BTreeSet<&str> = points.iter().map(|p| p.name.as_str()).collect();
    for name in [
        "hw.gpu.memory.limit",
        "hw.gpu.memory.usage",
        "hw.gpu.utilization",
        "hw.gpu.power",
        "hw.network.up",
        "hw.errors",
        "hw.energy",
        // No convention: railscope's names.
        "railscope_ib_port_data_bytes",
        "railscope_nvlink_errors",
        "railscope_gpu_info",
    ] {
        assert!(names.contains(name), "{name} missing from {names:?}");
    }
    for name in ["railscope_gpu_memory_total_bytes", "railscope_netdev_bytes"] {
        assert!(!names.contains(name), "{name} is still pushed");
    }
    let limits: Vec<&Point> = points
        .iter()
        .filter(|p| p.name == "hw.gpu.memory.limit")
        .collect();
    assert_eq!(limits.len(), 8);
    assert!(limits.iter().all(|p| p.kind == "cumulative sum"
        && p.unit == "By"
        && p.attributes["hw.type"] == "gpu"
        && p.attributes["hw.id"] == p.attributes["gpu"]));
    // ECC errors: `type` is `error.type`, beside the GPU's identity.
    let errors: Vec<&Point> = points.iter().filter(|p| p.name == "hw.errors").collect();
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|p| p.kind == "monotonic cumulative sum"
        && p.attributes["hw.type"] == "gpu"
        && p.attributes.contains_key("error.type")
        && !p.attributes.contains_key("type")));
    let up: Vec<&Point> = points
        .iter()
        .filter(|p| p.name == "hw.network.up")
        .collect();
    assert!(
        up.iter().all(|p| p.attributes["hw.type"] == "network"
            && p.attributes["hw.id"] == p.attributes["netdev"])
    );
}

#[test]
fn bad_otlp_flags_stop_start_up_naming_the_flag() {
    for (args, field) in [
        (vec!["--otlp.endpoint=collector:4317"], "--otlp.endpoint"),
        (
            vec!["--otlp.endpoint=http://c:4317", "--otlp.protocol=thrift"],
            "--otlp.protocol",
        ),
        (
            vec!["--otlp.endpoint=http://c:4317", "--otlp.interval=0s"],
            "--otlp.interval",
        ),
        (
            vec![
                "--otlp.endpoint=https://c:4317",
                "--otlp.tls.cert-file=/etc/hostname",
            ],
            "--otlp.tls.key-file",
        ),
        (
            vec![
                "--otlp.endpoint=https://c:4317",
                "--otlp.tls.ca-file=/etc/hostname",
            ],
            "--otlp.tls.ca-file",
        ),
        (
            vec!["--otlp.endpoint=http://c:4317", "--otlp.headers=novalue"],
            "--otlp.headers",
        ),
    ] {
        let out = std::process::Command::new(binary())
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(stderr.contains(field), "{args:?}: {stderr}");
    }
}

/// Every receiver, processor and exporter a pipeline names is defined.
fn pipelines_are_defined(config: &serde_json::Value) {
    for (name, pipeline) in config["service"]["pipelines"].as_object().unwrap() {
        for part in ["receivers", "processors", "exporters"] {
            for id in pipeline[part].as_array().into_iter().flatten() {
                let id = id.as_str().unwrap();
                assert!(
                    config[part].get(id).is_some(),
                    "{name}: {part} {id} is not defined"
                );
            }
        }
    }
}

#[test]
fn example_collector_configurations_fit_the_agent() {
    let read = |name: &str| {
        yaml_to_json(&std::fs::read_to_string(workspace().join("examples").join(name)).unwrap())[0]
            .clone()
    };
    // Receiving the push: gRPC on 4317 (the default protocol, and the otlp-push
    // component's port), HTTP on 4318.
    let otlp = read("otel-collector-otlp.yaml");
    pipelines_are_defined(&otlp);
    let protocols = &otlp["receivers"]["otlp"]["protocols"];
    assert!(
        protocols["grpc"]["endpoint"]
            .as_str()
            .unwrap()
            .ends_with(":4317")
    );
    assert!(
        protocols["http"]["endpoint"]
            .as_str()
            .unwrap()
            .ends_with(":4318")
    );
    assert_eq!(
        otlp["service"]["pipelines"]["metrics"]["receivers"],
        serde_json::json!(["otlp"])
    );
    let component = std::fs::read_to_string(
        workspace().join("packaging/kubernetes/components/otlp-push/kustomization.yaml"),
    )
    .unwrap();
    assert!(
        component.contains("--otlp.endpoint=http://opentelemetry-collector.opentelemetry.svc:4317")
    );

    // Scraping instead: the agent's port, a timeout below the interval.
    let scrape = read("otel-collector-scrape.yaml");
    pipelines_are_defined(&scrape);
    let job = &scrape["receivers"]["prometheus"]["config"]["scrape_configs"][0];
    assert_eq!(
        job["static_configs"][0]["targets"],
        serde_json::json!(["localhost:9477"])
    );
    let seconds = |v: &serde_json::Value| -> f64 {
        v.as_str().unwrap().trim_end_matches('s').parse().unwrap()
    };
    assert!(seconds(&job["scrape_timeout"]) < seconds(&job["scrape_interval"]));
}
