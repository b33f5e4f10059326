//! Names taken from the system reach the exposition intact: a copy of the
//! `cx6dx-roce-2port` tree gets an RDMA device, a netdev and driver counters with hostile
//! names (as far as the kernel allows each: an RDMA device renamed with `rdma dev set … name`
//! may hold spaces, commas, quotes and backslashes; a netdev name passes `dev_valid_name()`:
//! at most 15 bytes, no `/`, `:` or whitespace; a sysfs file name anything but `/`). Both
//! formats are read back with the strict reader ([`parse_samples`]) and must give the names exactly;
//! `promtool check metrics` must accept the text format.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use railscope_tests::{Agent, find, fixtures, parse_samples, promtool_check_metrics};

/// An RDMA device name with every character the encoders must escape or could mistake
/// for syntax.
const DEVICE: &str = "mlx5 \"a,b\"\\c=d{e} é";
/// A netdev name `dev_valid_name()` accepts: 13 bytes, no whitespace, `/` or `:`.
const NETDEV: &str = "e\"1\\,={}#x";
/// Driver counter file names.
const PORT_COUNTER: &str = "rx bytes, \"prio 3\"";
const PORT_COUNTER_NEWLINE: &str = "np_ecn\nmarked\\";
const DEVICE_COUNTER: &str = "async,\"event\" = {x}";

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Copies the fixture tree and gives its first RDMA device, its second netdev and some
/// driver counters hostile names.
fn hostile_tree(root: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixtures().join("cx6dx-roce-2port/sys"))
        .arg(root)
        .status()
        .unwrap();
    assert!(status.success());
    let sys = root.join("sys");
    let fn0 = sys.join("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    let fn1 = sys.join("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1");

    // The RDMA device, renamed as `rdma dev set mlx5_0 name …` does.
    std::fs::rename(
        fn0.join("infiniband/mlx5_0"),
        fn0.join("infiniband").join(DEVICE),
    )
    .unwrap();
    std::fs::remove_file(sys.join("class/infiniband/mlx5_0")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/{DEVICE}"),
        sys.join("class/infiniband").join(DEVICE),
    )
    .unwrap();

    // The netdev, renamed as `ip link set ens1f1np1 name …` does, with the GID table's
    // netdev attributes that name it.
    std::fs::rename(fn1.join("net/ens1f1np1"), fn1.join("net").join(NETDEV)).unwrap();
    std::fs::remove_file(sys.join("class/net/ens1f1np1")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1/net/{NETDEV}"),
        sys.join("class/net").join(NETDEV),
    )
    .unwrap();
    let ndevs = fn1.join("infiniband/mlx5_1/ports/1/gid_attrs/ndevs");
    let mut renamed = 0;
    for entry in std::fs::read_dir(&ndevs).unwrap() {
        let path = entry.unwrap().path();
        if std::fs::read_to_string(&path).is_ok_and(|t| t.trim() == "ens1f1np1") {
            write(&path, &format!("{NETDEV}\n"));
            renamed += 1;
        }
    }
    assert!(renamed > 0, "no GID names the netdev");

    // Driver counters whose file names need escaping.
    let port_counters = fn0
        .join("infiniband")
        .join(DEVICE)
        .join("ports/1/hw_counters");
    write(&port_counters.join(PORT_COUNTER), "1234\n");
    write(&port_counters.join(PORT_COUNTER_NEWLINE), "5678\n");
    let device_counters = fn0.join("infiniband").join(DEVICE).join("hw_counters");
    std::fs::create_dir_all(&device_counters).unwrap();
    write(&device_counters.join(DEVICE_COUNTER), "42\n");
}

#[test]
fn hostile_system_names_survive_both_formats_and_promtool() {
    let dir = tempfile::tempdir().unwrap();
    hostile_tree(dir.path());
    let sys = dir.path().join("sys");
    let proc = fixtures().join("cx6dx-roce-2port/proc");
    let agent = Agent::start(&[
        "--path.sysfs",
        sys.to_str().unwrap(),
        "--path.procfs",
        proc.to_str().unwrap(),
        "--collector.gpu.nvml-library",
        "/nonexistent/libnvidia-ml.so.1",
    ]);

    let text = agent.scrape();
    promtool_check_metrics(&text);
    let open_metrics = agent.get(
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
    );
    assert_eq!(open_metrics.status, 200);
    assert!(
        open_metrics
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{:?}",
        open_metrics.header("content-type")
    );
    let open_metrics = open_metrics.text();
    assert!(open_metrics.ends_with("# EOF\n"));

    for (format, text) in [("text 0.0.4", &text), ("OpenMetrics", &open_metrics)] {
        let s = parse_samples(text);
        let device = [("device", DEVICE)];
        assert_eq!(
            find(&s, "railscope_ib_device_info", &device).len(),
            1,
            "{format}: no device info for {DEVICE:?}"
        );
        let port = [("device", DEVICE), ("port", "1")];
        assert_eq!(
            find(&s, "railscope_ib_port_state", &port)[0].text,
            "4",
            "{format}"
        );
        for (counter, value) in [(PORT_COUNTER, "1234"), (PORT_COUNTER_NEWLINE, "5678")] {
            let found = find(
                &s,
                "railscope_rdma_port_hw_stat_total",
                &[("device", DEVICE), ("port", "1"), ("counter", counter)],
            );
            assert_eq!(found.len(), 1, "{format}: {counter:?}");
            assert_eq!(found[0].text, value, "{format}: {counter:?}");
        }
        let found = find(
            &s,
            "railscope_rdma_device_hw_stat_total",
            &[("device", DEVICE), ("counter", DEVICE_COUNTER)],
        );
        assert_eq!(found.len(), 1, "{format}: {DEVICE_COUNTER:?}");
        assert_eq!(found[0].text, "42");

        // The renamed netdev: its own series, and the RDMA port that sits on it.
        assert_eq!(
            find(&s, "railscope_netdev_mtu_bytes", &[("netdev", NETDEV)])[0].text,
            "4200",
            "{format}"
        );
        let port_info = find(
            &s,
            "railscope_ib_port_info",
            &[("device", "mlx5_1"), ("netdev", NETDEV)],
        );
        assert_eq!(port_info.len(), 1, "{format}: mlx5_1 is not on {NETDEV:?}");
        assert_eq!(
            find(
                &s,
                "railscope_ib_port_active_mtu_bytes",
                &[("device", "mlx5_1")]
            )[0]
            .text,
            "4096",
            "{format}"
        );

        // No series lost its device to the renaming, and no name appears mangled.
        assert!(find(&s, "railscope_ib_device_info", &[("device", "mlx5_0")]).is_empty());
        for sample in &s {
            for value in sample.labels.values() {
                assert!(
                    !value.contains("mlx5 ") || value == DEVICE,
                    "{format}: mangled {value:?}"
                );
            }
        }
    }
    let log = agent.log();
    assert!(!log.contains("panicked"), "{log}");
}
