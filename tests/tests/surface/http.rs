//! The HTTP surface and process behaviour of the real binary: endpoints, content
//! negotiation, gzip, methods, start-up errors, `--version`, and a clean SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::process::Command;

use railscope_tests::{Agent, binary, fixtures, parse_samples, request, value};

#[test]
fn endpoints() {
    let agent = Agent::fixture("h100-cx7-ndr-ib", &[]);
    let landing = agent.get("/", &[]);
    assert_eq!(landing.status, 200);
    let html = landing.text();
    assert!(html.contains("href=\"/metrics\""), "{html}");
    assert!(html.contains("<code>infiniband</code>"), "{html}");
    assert_eq!(agent.get("/-/healthy", &[]).status, 200);
    assert_eq!(agent.get("/-/ready", &[]).status, 200);
    assert_eq!(agent.get("/nope", &[]).status, 404);
    assert_eq!(
        request(agent.addr, "POST", "/metrics", &[]).unwrap().status,
        405
    );
    assert_eq!(request(agent.addr, "DELETE", "/", &[]).unwrap().status, 405);
    let head = request(agent.addr, "HEAD", "/metrics", &[]).unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

#[test]
fn content_negotiation_and_gzip() {
    let agent = Agent::fixture("cx6dx-roce-2port", &[]);
    let plain = agent.get("/metrics", &[]);
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(
        plain
            .text()
            .contains("# TYPE railscope_ib_port_data_bytes_total counter\n")
    );

    let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let om = agent.get("/metrics", &[("Accept", accept)]);
    assert_eq!(
        om.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = om.text();
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains(
        "# TYPE railscope_ib_port_data_bytes counter\n# UNIT railscope_ib_port_data_bytes bytes\n"
    ));
    assert!(text.contains("# TYPE railscope_ib_device info\n"));

    let gz = agent.get("/metrics", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let mut decoded = String::new();
    flate2::read::GzDecoder::new(gz.body.as_slice())
        .read_to_string(&mut decoded)
        .unwrap();
    let a = parse_samples(&decoded);
    assert_eq!(
        value(
            &a,
            "railscope_ib_port_active_mtu_bytes",
            &[("device", "mlx5_0")]
        ),
        value(
            &parse_samples(&plain.text()),
            "railscope_ib_port_active_mtu_bytes",
            &[("device", "mlx5_0")]
        )
    );
    assert!(
        gz.body.len() * 3 < plain.body.len(),
        "gzip did not compress: {} vs {}",
        gz.body.len(),
        plain.body.len()
    );
}

#[test]
fn custom_telemetry_path_and_disabled_collector() {
    let agent = Agent::fixture(
        "h100-cx7-ndr-ib",
        &[
            "--web.telemetry-path",
            "/scrape",
            "--no-collector.infiniband",
        ],
    );
    assert_eq!(agent.get("/metrics", &[]).status, 404);
    let resp = agent.get("/scrape", &[]);
    assert_eq!(resp.status, 200);
    let text = resp.text();
    assert!(
        !text.contains("railscope_ib_"),
        "a disabled collector exported series"
    );
    assert!(!text.contains("collector=\"infiniband\""));
    assert!(text.contains("railscope_build_info{"));
}

#[test]
fn device_exclude_applies_before_reading() {
    let agent = Agent::fixture(
        "h100-cx7-ndr-ib-faults",
        &["--collector.infiniband.device-exclude", "^mlx5_7$"],
    );
    let samples = parse_samples(&agent.scrape());
    assert!(
        railscope_tests::find(
            &samples,
            "railscope_ib_device_info",
            &[("device", "mlx5_7")]
        )
        .is_empty()
    );
    assert_eq!(
        railscope_tests::find(&samples, "railscope_ib_device_info", &[]).len(),
        7
    );
    // The neighbour collector lists every RDMA port (its own selection) and says once that a
    // port gets no SMPs; nothing else may name the excluded device.
    assert!(
        !agent
            .log()
            .lines()
            .any(|l| l.contains("mlx5_7") && !l.contains("No SMPs to this port's neighbour.")),
        "the excluded broken device was read:\n{}",
        agent.log()
    );
}

#[test]
fn sigterm_stops_cleanly() {
    let agent = Agent::fixture("softroce-rxe-siw", &[]);
    assert_eq!(agent.get("/-/healthy", &[]).status, 200);
    let status = agent.terminate();
    assert!(status.success(), "exit status {status}");
}

#[test]
fn bad_configuration_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railscope.yml");
    std::fs::write(
        &config,
        "collectors:\n  infiniband:\n    device-inclde: mlx5\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--config.file".into(), config.display().to_string()],
            "collectors.infiniband.device-inclde",
        ),
        (
            vec![
                "--collector.infiniband.device-include".into(),
                "mlx5_(".into(),
            ],
            "--collector.infiniband.device-include",
        ),
        (vec!["--log.format".into(), "yaml".into()], "--log.format"),
        (
            vec![
                "--collector.infiniband.hw-counters-source".into(),
                "firmware".into(),
            ],
            "--collector.infiniband.hw-counters-source",
        ),
        (
            vec!["--collector.topology.rails".into(), "mlx5_0".into()],
            "--collector.topology.rails",
        ),
        (
            vec!["--config.file".into(), "/nonexistent/railscope.yml".into()],
            "--config.file",
        ),
    ];
    for (args, field) in cases {
        let out = Command::new(binary()).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(field), "{args:?}: {stderr}");
    }
}

#[test]
fn version_and_help() {
    let out = Command::new(binary()).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("railscope "));
    let out = Command::new(binary()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--web.listen-address",
        "--path.sysfs",
        "--collector.infiniband",
        "--no-collector.infiniband",
        "--collector.infiniband.device-exclude",
        "--log.format",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn address_in_use_is_a_clear_error() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let sys = fixtures().join("h100-cx7-ndr-ib/sys");
    let out = Command::new(binary())
        .args([
            "--web.listen-address",
            &addr,
            "--path.sysfs",
            sys.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed to listen on") && stderr.contains(&addr),
        "{stderr}"
    );
}

#[test]
fn forced_netlink_without_rdma_netlink_falls_back_to_sysfs() {
    // This machine's kernel may or may not have RDMA netlink; the fixture's devices are not in
    // it either way, so the counters must come from sysfs.
    let agent = Agent::fixture(
        "cx6dx-roce-2port",
        &["--collector.infiniband.hw-counters-source", "netlink"],
    );
    let s = parse_samples(&agent.scrape());
    let info = railscope_tests::find(&s, "railscope_ib_port_info", &[("device", "mlx5_0")]);
    assert_eq!(info[0].labels["hw_counters_source"], "sysfs");
    assert!(
        value(
            &s,
            "railscope_rdma_port_hw_stat_total",
            &[("device", "mlx5_0"), ("counter", "out_of_buffer")]
        ) > 0.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_success",
            &[("collector", "infiniband")]
        ),
        1.0
    );
}
