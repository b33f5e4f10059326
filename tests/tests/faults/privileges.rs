#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The agent run as an unprivileged user (uid and gid 65534, no supplementary groups, no
//! capabilities, `no_new_privs`), the way the systemd unit and the DaemonSet run it.
//!
//! * On this machine's own `/sys` and `/proc` it reads exactly what root reads: the same
//!   families, every collector successful, no errors.
//! * A file only root may read costs that file's series, is counted once per scrape, and is
//!   logged once, not once per scrape.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use railscope_tests::{Agent, parse_samples, promtool_check_metrics, require, value};

const NOBODY: &str = "65534";

/// The agent with `args`, as uid/gid 65534 when `unprivileged`, else as the test's own user
/// (root).
fn start(unprivileged: bool, args: &[&str]) -> Agent {
    if !unprivileged {
        return Agent::launch(args, &[]);
    }
    require("setpriv", "util-linux");
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid",
        NOBODY,
        "--regid",
        NOBODY,
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ])
    .arg(railscope_tests::binary());
    Agent::wrapped(cmd, args, &[])
}

/// A directory every user may enter (the test's temporary directories are root's, mode 0700).
fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn families(text: &str) -> BTreeSet<String> {
    parse_samples(text).into_iter().map(|s| s.name).collect()
}

#[test]
fn the_binary_really_runs_unprivileged() {
    let agent = start(
        true,
        &[
            "--collector.gpu.nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
        ],
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
    };
    assert_eq!(field("Uid:"), [NOBODY; 4], "{status}");
    assert_eq!(field("Gid:"), [NOBODY; 4], "{status}");
    assert_eq!(field("CapEff:"), ["0000000000000000"], "{status}");
    assert_eq!(field("CapBnd:"), ["0000000000000000"], "{status}");
    assert_eq!(field("NoNewPrivs:"), ["1"], "{status}");
    assert_eq!(field("Groups:"), Vec::<&str>::new(), "{status}");
}

#[test]
fn unprivileged_the_agent_reads_this_machine_like_root() {
    // The real /sys and /proc, every default collector (the GPU one finds no NVML here; the
    // fake-NVML tests cover it).
    let args = [
        "--collector.gpu.nvml-library",
        "/nonexistent/libnvidia-ml.so.1",
    ];
    let root = start(false, &args);
    let nobody = start(true, &args);
    // The second scrape of each: every source has run once before it.
    let (_, _) = (root.scrape(), nobody.scrape());
    let (root_text, nobody_text) = (root.scrape(), nobody.scrape());
    promtool_check_metrics(&nobody_text);
    let samples = parse_samples(&nobody_text);
    let root_samples = parse_samples(&root_text);
    for collector in [
        "infiniband",
        "netdev",
        "ethtool",
        "dcb",
        "gpu",
        "pci",
        "topology",
        "host",
        "hwmon",
        "phy",
        "devlink",
        "transceiver",
        "neighbour",
    ] {
        let labels = [("collector", collector)];
        assert_eq!(
            value(&samples, "railscope_collector_success", &labels),
            1.0,
            "{collector} fails unprivileged:\n{}",
            nobody.log()
        );
        assert_eq!(
            value(&samples, "railscope_collector_errors_total", &labels),
            value(&root_samples, "railscope_collector_errors_total", &labels),
            "{collector} has errors unprivileged that it has not as root:\n{}",
            nobody.log()
        );
    }
    // The kernel log is the one thing that needs a privilege: CAP_SYSLOG where
    // kernel.dmesg_restrict is 1. Without it the kmsg source is absent, says why once, and
    // nothing else changes.
    let restricted =
        std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict").is_ok_and(|v| v.trim() == "1");
    let mut root_families = families(&root_text);
    if restricted {
        root_families.retain(|f| !f.starts_with("railscope_kmsg_"));
        assert!(
            nobody.log().contains("CAP_SYSLOG"),
            "the kmsg source does not say it needs CAP_SYSLOG:\n{}",
            nobody.log()
        );
    }
    // LLDP needs CAP_NET_RAW: unprivileged, every LLDP link's status is no_permission (as
    // root it has no status until a frame or the LLDP timeout), said once.
    let mut nobody_families = families(&nobody_text);
    let lldp: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.name == "railscope_neighbour_status"
                && s.labels.get("protocol").map(String::as_str) == Some("lldp")
        })
        .collect();
    for s in &lldp {
        assert_eq!(s.labels["status"], "no_permission", "{s:?}");
    }
    if !lldp.is_empty() {
        assert!(
            nobody.log().matches("CAP_NET_RAW").count() == 1,
            "the neighbour source says once that it lacks CAP_NET_RAW:\n{}",
            nobody.log()
        );
        if !root_families.contains("railscope_neighbour_status") {
            nobody_families.remove("railscope_neighbour_status");
        }
    }
    // Module EEPROM needs CAP_NET_ADMIN: where the node has netdevs to ask, the transceiver
    // source is absent unprivileged and says why once (as root, a netdev without a module
    // answers EOPNOTSUPP: no series either).
    if nobody
        .log()
        .contains("MODULE_EEPROM_GET needs CAP_NET_ADMIN")
    {
        assert_eq!(
            nobody
                .log()
                .matches("MODULE_EEPROM_GET needs CAP_NET_ADMIN")
                .count(),
            1,
            "said once:\n{}",
            nobody.log()
        );
    }
    assert_eq!(
        nobody_families, root_families,
        "unprivileged, the agent exports other families than as root"
    );
    assert!(!nobody.log().contains("panicked"), "{}", nobody.log());
}

#[test]
fn a_file_only_root_may_read_costs_its_series_and_is_logged_once() {
    let dir = open_tempdir();
    let copy = railscope_tests::copy_fixture("cx6dx-roce-2port", &dir.path().join("tree"));
    let guarded = std::fs::canonicalize(
        copy.join("sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data"),
    )
    .unwrap();
    std::fs::set_permissions(&guarded, std::fs::Permissions::from_mode(0o400)).unwrap();
    let mut args = railscope_tests::tree_args(&copy);
    args.extend(["--log.format".to_owned(), "json".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = start(true, &args);
    let mut text = String::new();
    for _ in 0..3 {
        text = agent.scrape();
    }
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    let port = [("device", "mlx5_0"), ("port", "1")];
    assert!(
        railscope_tests::find(
            &s,
            "railscope_ib_port_data_bytes_total",
            &[port[0], port[1], ("direction", "rx")]
        )
        .is_empty(),
        "the unreadable counter's series is gone"
    );
    assert!(
        value(
            &s,
            "railscope_ib_port_data_bytes_total",
            &[port[0], port[1], ("direction", "tx")]
        ) > 0.0,
        "the readable counter of the same port is exported"
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_success",
            &[("collector", "infiniband")]
        ),
        1.0
    );
    // Counted once: the file is not read again while it backs off (--sysfs.refused-backoff),
    // however many collections run (the agent also runs one at start).
    let collections = value(&s, "railscope_collections_total", &[]);
    assert!(collections >= 3.0);
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "infiniband")]
        ),
        1.0,
        "one error, not one per collection"
    );
    assert_eq!(value(&s, "railscope_sysfs_refused_files", &[]), 1.0);
    let log = agent.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("port_rcv_data") && l.contains("EACCES"))
        .collect();
    assert_eq!(warnings.len(), 1, "logged once, not per scrape:\n{log}");
    assert!(
        warnings[0].contains("\"level\":\"WARN\""),
        "{}",
        warnings[0]
    );
}
