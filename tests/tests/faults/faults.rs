//! Fault scenarios against the real binary: broken files and devices cost only their own
//! series, are counted and logged once with path and errno; degraded and down ports stay
//! visible; a read that blocks in the kernel does not block the scrape.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use railscope_tests::{Agent, find, parse_samples, value};

fn port(dev: &str) -> [(&str, &str); 2] {
    [("device", dev), ("port", "1")]
}

#[test]
fn faulty_h100_node() {
    let agent = Agent::fixture("h100-cx7-ndr-ib-faults", &["--log.format", "json"]);
    let first = parse_samples(&agent.scrape());
    let s = parse_samples(&agent.scrape());

    // Every device and port is exported, the broken one included.
    assert_eq!(find(&s, "railscope_ib_device_info", &[]).len(), 8);
    assert_eq!(find(&s, "railscope_ib_port_state", &[]).len(), 8);
    assert_eq!(
        value(
            &s,
            "railscope_collector_success",
            &[("collector", "infiniband")]
        ),
        1.0
    );

    // mlx5_2 trained at 2X: half the rate of its peers.
    assert_eq!(
        value(&s, "railscope_ib_port_link_width_lanes", &port("mlx5_2")),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_rate_bytes_per_second",
            &port("mlx5_2")
        ),
        25e9
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_rate_bytes_per_second",
            &port("mlx5_1")
        ),
        50e9
    );

    // mlx5_3 has no counters/: no PMA series, everything else.
    assert!(find(&s, "railscope_ib_port_symbol_errors_total", &port("mlx5_3")).is_empty());
    assert_eq!(value(&s, "railscope_ib_port_state", &port("mlx5_3")), 4.0);
    assert!(!find(&s, "railscope_rdma_port_hw_stat_total", &port("mlx5_3")).is_empty());
    assert_eq!(
        value(
            &s,
            "railscope_ib_device_read_errors",
            &[("device", "mlx5_3")]
        ),
        0.0
    );

    // mlx5_5 is down and stays visible.
    assert_eq!(value(&s, "railscope_ib_port_state", &port("mlx5_5")), 1.0);
    assert_eq!(
        value(&s, "railscope_ib_port_phys_state", &port("mlx5_5")),
        2.0
    );
    let info = find(&s, "railscope_ib_port_info", &port("mlx5_5"));
    assert_eq!(info[0].labels["state"], "DOWN");
    assert_eq!(info[0].labels["phys_state"], "Polling");

    // mlx5_6: eight saturated PMA counters, visibly so.
    let saturated: Vec<&str> = find(&s, "railscope_ib_port_pma_saturated", &port("mlx5_6"))
        .into_iter()
        .filter(|x| x.value == 1.0)
        .map(|x| x.labels["counter"].as_str())
        .collect();
    assert_eq!(
        saturated,
        [
            "symbol_error",
            "link_error_recovery",
            "link_downed",
            "port_rcv_errors",
            "port_xmit_discards",
            "local_link_integrity_errors",
            "excessive_buffer_overrun_errors",
            "port_xmit_wait"
        ]
    );
    assert_eq!(
        value(&s, "railscope_ib_port_transmit_wait_total", &port("mlx5_6")),
        4294967295.0
    );
    assert!(
        find(&s, "railscope_ib_port_pma_saturated", &[])
            .iter()
            .filter(|x| x.value == 1.0)
            .all(|x| x.labels["device"] == "mlx5_6")
    );

    // mlx5_7: three broken files cost three series, nothing else.
    assert!(
        find(
            &s,
            "railscope_ib_port_rate_bytes_per_second",
            &port("mlx5_7")
        )
        .is_empty()
    );
    assert!(
        find(
            &s,
            "railscope_ib_port_receive_errors_total",
            &port("mlx5_7")
        )
        .is_empty()
    );
    assert!(
        find(
            &s,
            "railscope_rdma_port_hw_stat_total",
            &[("device", "mlx5_7"), ("counter", "out_of_buffer")]
        )
        .is_empty()
    );
    assert_eq!(
        find(&s, "railscope_rdma_port_hw_stat_total", &port("mlx5_7")).len(),
        28
    );
    assert_eq!(value(&s, "railscope_ib_port_state", &port("mlx5_7")), 4.0);
    assert_eq!(
        value(&s, "railscope_ib_port_symbol_errors_total", &port("mlx5_7")),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_device_read_errors",
            &[("device", "mlx5_7")]
        ),
        3.0
    );
    for dev in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_4", "mlx5_5", "mlx5_6"] {
        assert_eq!(
            value(&s, "railscope_ib_device_read_errors", &[("device", dev)]),
            0.0,
            "{dev}"
        );
        assert_eq!(
            find(&s, "railscope_rdma_port_hw_stat_total", &port(dev)).len(),
            29,
            "{dev}"
        );
    }

    // Counted every collection (start-up warm-up plus two scrapes), logged once each.
    assert_eq!(
        value(
            &first,
            "railscope_collector_errors_total",
            &[("collector", "infiniband")]
        ),
        6.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "infiniband")]
        ),
        9.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_last_errors",
            &[("collector", "infiniband")]
        ),
        3.0
    );
    let log = agent.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\""))
        .collect();
    // Three broken files of mlx5_7's RDMA device and its malformed module temperature.
    assert_eq!(
        warnings.len(),
        4,
        "each distinct error is logged once:\n{log}"
    );
    let rate = warnings
        .iter()
        .find(|l| l.contains("ports/1/rate"))
        .expect("rate error logged");
    assert!(
        rate.contains("\"errno\":\"EISDIR\"") && rate.contains("\"device\":\"mlx5_7\""),
        "{rate}"
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("counters/port_rcv_errors") && l.contains("\"kind\":\"parse\""))
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("hw_counters/out_of_buffer") && l.contains("\"kind\":\"parse\""))
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains("hwmon9/temp2_input") && l.contains("\"kind\":\"parse\""))
    );
}

#[test]
fn roce_mtu_mismatch_is_visible() {
    let agent = Agent::fixture("cx6dx-roce-2port", &[]);
    let s = parse_samples(&agent.scrape());
    assert_eq!(
        value(&s, "railscope_ib_port_netdev_mtu_bytes", &port("mlx5_0")),
        1500.0
    );
    assert_eq!(
        value(&s, "railscope_ib_port_active_mtu_bytes", &port("mlx5_0")),
        1024.0
    );
    assert_eq!(
        value(&s, "railscope_ib_port_netdev_mtu_bytes", &port("mlx5_1")),
        4200.0
    );
    assert_eq!(
        value(&s, "railscope_ib_port_active_mtu_bytes", &port("mlx5_1")),
        4096.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_gid_entries",
            &[("device", "mlx5_0"), ("type", "RoCE v2")]
        ),
        3.0
    );
    let info = find(&s, "railscope_ib_port_info", &port("mlx5_1"));
    assert_eq!(info[0].labels["netdev"], "ens1f1np1");
    assert_eq!(info[0].labels["link_layer"], "Ethernet");
}

#[test]
fn old_kernel_without_pma_and_speed_words() {
    let agent = Agent::fixture("legacy-kernel4-i40iw", &[]);
    let s = parse_samples(&agent.scrape());
    // `10 Gb/sec (4X)` and `2.5 Gb/sec (1X)` parse.
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_rate_bytes_per_second",
            &port("i40iw0")
        ),
        1.25e9
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_rate_bytes_per_second",
            &[("device", "mlx4_0"), ("port", "2")]
        ),
        312_500_000.0
    );
    assert_eq!(
        find(
            &s,
            "railscope_ib_port_info",
            &[("device", "mlx4_0"), ("port", "2"), ("speed", "")]
        )
        .len(),
        1
    );
    // `N/A (no PMA)` costs those counters and is counted, the port is still there.
    assert!(find(&s, "railscope_ib_port_symbol_errors_total", &port("i40iw0")).is_empty());
    assert_eq!(
        value(
            &s,
            "railscope_ib_device_read_errors",
            &[("device", "i40iw0")]
        ),
        17.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_device_read_errors",
            &[("device", "mlx4_0")]
        ),
        0.0
    );
    assert_eq!(value(&s, "railscope_ib_port_state", &port("i40iw0")), 4.0);
    // 32-bit base counters: the legacy 64-bit counters_ext value replaces the saturated one.
    let mlx4 = [("device", "mlx4_0"), ("port", "1")];
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_pma_saturated",
            &[mlx4[0], mlx4[1], ("counter", "port_xmit_wait")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_pma_saturated",
            &[mlx4[0], mlx4[1], ("counter", "port_xmit_data")]
        ),
        0.0
    );
    assert!(
        value(
            &s,
            "railscope_ib_port_data_bytes_total",
            &[mlx4[0], mlx4[1], ("direction", "tx")]
        ) > 4.0 * 4294967295.0
    );
}

#[test]
fn a_read_that_blocks_does_not_block_the_scrape() {
    // Copy a tree and put a FIFO where one port's `state` is: reading it blocks forever,
    // like a sysfs read stuck in a wedged driver.
    let dir = tempfile::tempdir().unwrap();
    let copy = railscope_tests::copy_fixture("cx6dx-roce-2port", &dir.path().join("tree"));
    let state = copy.join("sys/class/infiniband/mlx5_1/ports/1/state");
    let real = std::fs::canonicalize(&state).unwrap();
    std::fs::remove_file(&real).unwrap();
    let status = Command::new("mkfifo").arg(&real).status().unwrap();
    assert!(status.success());

    let sys = copy.join("sys");
    let port = railscope_tests::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(railscope_tests::binary())
        .args([
            "--web.listen-address",
            &listen,
            "--path.sysfs",
            sys.to_str().unwrap(),
            "--scrape.timeout-max",
            "1s",
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = listen.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while railscope_tests::get(addr, "/-/healthy", &[]).is_err() {
        assert!(Instant::now() < deadline, "agent did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    for attempt in 0..3 {
        let start = Instant::now();
        let resp = railscope_tests::get(
            addr,
            "/metrics",
            &[("X-Prometheus-Scrape-Timeout-Seconds", "2")],
        )
        .unwrap();
        let took = start.elapsed();
        assert_eq!(resp.status, 200);
        assert!(
            took < Duration::from_millis(1900),
            "scrape {attempt} took {took:?}"
        );
        let text = resp.text();
        let s = parse_samples(&text);
        // The blocked read costs its device, not the collector: mlx5_0 is exported in full,
        // mlx5_1 is skipped and named as blocked.
        assert_eq!(
            value(
                &s,
                "railscope_collector_success",
                &[("collector", "infiniband")]
            ),
            1.0,
            "scrape {attempt}"
        );
        assert_eq!(
            value(
                &s,
                "railscope_ib_port_state",
                &[("device", "mlx5_0"), ("port", "1")]
            ),
            4.0,
            "scrape {attempt}"
        );
        assert!(
            !text.contains("railscope_ib_port_state{device=\"mlx5_1\""),
            "scrape {attempt}: the blocked device is skipped"
        );
        assert!(
            value(
                &s,
                "railscope_sysfs_blocked_seconds",
                &[("path", "class/infiniband/mlx5_1")]
            ) > 0.0,
            "scrape {attempt}"
        );
        assert_eq!(
            value(&s, "railscope_sysfs_read_timeouts_total", &[]),
            1.0,
            "scrape {attempt}: one blocked read, however many scrapes"
        );
        assert!(value(&s, "process_threads", &[]) < 40.0, "threads pile up");
    }
    // Once the read returns, the device is back.
    // Put a regular file back, then let the pending read through the FIFO.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&real).unwrap();
    std::fs::remove_file(&real).unwrap();
    std::fs::write(&real, "4: ACTIVE\n").unwrap();
    std::io::Write::write_all(&mut writer, b"4: ACTIVE\n").unwrap();
    drop(writer);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = railscope_tests::get(addr, "/metrics", &[]).unwrap();
        let text = resp.text();
        if !text.contains("railscope_sysfs_blocked_seconds{") {
            assert!(
                text.contains("railscope_ib_port_state{device=\"mlx5_1\""),
                "the device came back"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the blocked device never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
