//! The settings end to end: flags, the config file, their precedence and their errors.

use std::path::PathBuf;
use std::time::Duration;

use railscope_collectors::{Roots, SOURCES};

use super::*;

fn run(args: &[&str]) -> Result<Config, ConfigError> {
    let mut full = vec!["railscope"];
    full.extend_from_slice(args);
    match parse(full).map_err(|e| e.error)? {
        Invocation::Run(c) => Ok(*c),
        Invocation::Print(text) => panic!("printed {text}"),
        Invocation::Doctor(..) => panic!("doctor"),
    }
}

fn write_config(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

#[test]
fn defaults() {
    let c = run(&[]).unwrap();
    assert_eq!(c.web.listen_addresses, [":9477"]);
    assert_eq!(c.web.telemetry_path, "/metrics");
    assert_eq!(c.collection.roots, Roots::default());
    assert_eq!(c.collection.timeout_max, Duration::from_secs(10));
    assert_eq!(c.collection.refused_backoff, Duration::from_secs(60));
    assert_eq!(
        run(&["--sysfs.refused-backoff", "0s"])
            .unwrap()
            .collection
            .refused_backoff,
        Duration::ZERO
    );
    assert!(
        c.collection
            .collectors
            .iter()
            .all(|c| c.enabled == c.spec.default_enabled)
    );
}

#[test]
fn collector_flags() {
    let c = run(&["--no-collector.infiniband"]).unwrap();
    assert!(!c.collection.collectors[0].enabled);
    let c = run(&["--collector.disable-defaults", "--collector.infiniband"]).unwrap();
    assert!(c.collection.collectors[0].enabled);
    let c = run(&["--no-collector.infiniband", "--collector.infiniband"]).unwrap();
    assert!(
        c.collection.collectors[0].enabled,
        "the last of --collector/--no-collector wins"
    );
    let c = run(&["--collector.infiniband.device-exclude", "^mlx5_[89]$"]).unwrap();
    assert_eq!(
        c.collection.collectors[0]
            .options
            .get("device-exclude")
            .unwrap(),
        "^mlx5_[89]$"
    );
}

#[test]
fn file_then_flags() {
    let file = write_config(
        "web:\n  listen-address: 127.0.0.1:9999\npath:\n  sysfs: /host/sys\ncollectors:\n  infiniband:\n    enabled: false\n    device-include: mlx5_.*\n",
    );
    let path = file.path().to_str().unwrap();
    let c = run(&["--config.file", path]).unwrap();
    assert_eq!(c.web.listen_addresses, ["127.0.0.1:9999"]);
    assert_eq!(c.collection.roots.sysfs, PathBuf::from("/host/sys"));
    assert!(!c.collection.collectors[0].enabled);
    assert_eq!(
        c.collection.collectors[0]
            .options
            .get("device-include")
            .unwrap(),
        "mlx5_.*"
    );
    let c = run(&[
        "--config.file",
        path,
        "--web.listen-address",
        ":1234",
        "--collector.infiniband",
    ])
    .unwrap();
    assert_eq!(c.web.listen_addresses, [":1234"]);
    assert!(c.collection.collectors[0].enabled);
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let cases = [
        ("web:\n  listen-adress: :1\n", "listen-adress"),
        ("colectors: {}\n", "colectors"),
        (
            "collectors:\n  infiniband:\n    device-includ: x\n",
            "collectors.infiniband.device-includ",
        ),
        (
            "collectors:\n  gpus:\n    enabled: true\n",
            "collectors.gpus",
        ),
        (
            "collectors:\n  infiniband:\n    enabled: maybe\n",
            "collectors.infiniband.enabled",
        ),
    ];
    for (text, name) in cases {
        let file = write_config(text);
        let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
        assert!(err.to_string().contains(name), "{text:?}: {err}");
    }
}

#[test]
fn bad_values_name_the_flag() {
    let cases: [(&[&str], &str); 7] = [
        (&["--web.listen-address", "9477"], "--web.listen-address"),
        (&["--web.telemetry-path", "metrics"], "--web.telemetry-path"),
        (&["--log.level", "loud"], "--log.level"),
        (&["--log.format", "xml"], "--log.format"),
        (&["--scrape.timeout-max", "soon"], "--scrape.timeout-max"),
        (
            &["--sysfs.refused-backoff", "later"],
            "--sysfs.refused-backoff",
        ),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (args, name) in cases {
        let err = run(args).unwrap_err();
        assert!(err.to_string().contains(name), "{args:?}: {err}");
    }
}

#[test]
fn the_example_config_file_is_valid() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/railscope.yml");
    let c = run(&["--config.file", path]).unwrap();
    assert_eq!(c.web.listen_addresses, [":9477"]);
    assert_eq!(c.collection.timeout_offset, Duration::from_millis(500));
    assert_eq!(
        c.collection.collectors[0]
            .options
            .get("device-exclude")
            .unwrap(),
        "^(mlx5_bond_.*)$"
    );
    let scheduler = crate::build_scheduler(&c).unwrap();
    assert_eq!(
        scheduler.source_names(),
        [
            "infiniband",
            "netdev",
            "ethtool",
            "dcb",
            "gpu",
            "pci",
            "hwmon",
            "topology",
            "host",
            "kmsg",
            "workload",
            "devlink",
            "phy",
            "neighbour",
            "transceiver"
        ]
    );
    assert_eq!(
        c.collection.collectors[7]
            .options
            .get("rail-exclude")
            .unwrap(),
        "^0000:0c:00\\.0$"
    );
}

#[test]
fn otlp_from_the_file_and_flags() {
    assert!(run(&[]).unwrap().otlp.is_none());
    let file = write_config(
        "otlp:\n  endpoint: http://collector:4318\n  protocol: http/protobuf\n  interval: 30s\n  headers:\n    X-Scope-OrgID: fleet-a\n  queue-size: 3\n  compression: gzip\n  hardware-semconv: true\n",
    );
    let path = file.path().to_str().unwrap();
    let c = run(&["--config.file", path]).unwrap();
    let otlp = c.otlp.unwrap();
    assert_eq!(otlp.endpoint, "http://collector:4318/v1/metrics");
    assert_eq!(otlp.protocol, otlp::Protocol::HttpProtobuf);
    assert_eq!(otlp.interval, Duration::from_secs(30));
    assert_eq!(otlp.timeout, Duration::from_secs(10));
    assert_eq!(
        otlp.headers,
        [("x-scope-orgid".to_owned(), "fleet-a".to_owned())]
    );
    assert_eq!(otlp.queue_size, 3);
    assert!(otlp.gzip && otlp.hardware_semconv);
    // Flags win over the file.
    let c = run(&[
        "--config.file",
        path,
        "--otlp.interval=5s",
        "--otlp.headers=a=b",
    ])
    .unwrap();
    let otlp = c.otlp.unwrap();
    assert_eq!(otlp.interval, Duration::from_secs(5));
    assert_eq!(otlp.headers, [("a".to_owned(), "b".to_owned())]);
    for (text, field) in [
        ("otlp:\n  endpont: http://c:4317\n", "endpont"),
        (
            "otlp:\n  endpoint: http://c:4317\n  queue-size: 0\n",
            "otlp.queue-size",
        ),
        (
            "otlp:\n  endpoint: http://c:4317\n  timeout: soon\n",
            "otlp.timeout",
        ),
        (
            "otlp:\n  endpoint: http://c:4317\n  tls:\n    ca-file: /nonexistent\n",
            "otlp.tls.ca-file",
        ),
    ] {
        let file = write_config(text);
        let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
        assert!(err.to_string().contains(field), "{text}: {err}");
    }
}

#[test]
fn expected_inventory_from_the_file() {
    let file = write_config(
        "expected:\n  gpus: 8\n  rdma-ports: 8\n  rdma-port-rate-gbps: 400\n  rdma-port-width: 4\n  nvlinks-per-gpu: 18\n  pcie-generation: 5\n  pcie-width: 16\n",
    );
    let c = run(&["--config.file", file.path().to_str().unwrap()]).unwrap();
    assert_eq!(c.expected.gpus, Some(8));
    assert_eq!(c.expected.rdma_port_rate, Some(50e9));
    assert_eq!(c.expected.pcie_speed, Some(32e9));
    for (text, field) in [
        ("expected:\n  gpus: 0\n", "expected.gpus"),
        (
            "expected:\n  rdma-port-rate-gbps: -1\n",
            "expected.rdma-port-rate-gbps",
        ),
        (
            "expected:\n  pcie-generation: 9\n",
            "expected.pcie-generation",
        ),
        ("expected:\n  gpu: 8\n", "gpu"),
    ] {
        let file = write_config(text);
        let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
        assert!(err.to_string().contains(field), "{text}: {err}");
    }
}

#[test]
fn map_options_from_the_file() {
    let file = write_config(
        "collectors:\n  topology:\n    rails:\n      \"0000:18:00.0\": 0\n      mlx5_1: 1\n",
    );
    let c = run(&["--config.file", file.path().to_str().unwrap()]).unwrap();
    assert_eq!(
        c.collection.collectors[7].options.map("rails").unwrap(),
        [
            ("0000:18:00.0".to_owned(), "0".to_owned()),
            ("mlx5_1".to_owned(), "1".to_owned())
        ]
    );
    crate::build_scheduler(&c).unwrap();
    let bad = write_config("collectors:\n  topology:\n    rails:\n      mlx5_1: one\n");
    let c = run(&["--config.file", bad.path().to_str().unwrap()]).unwrap();
    let err = crate::build_scheduler(&c).unwrap_err();
    assert!(
        err.to_string().contains("collectors.topology.rails"),
        "{err}"
    );
}

#[test]
fn help_lists_every_collector_flag() {
    let help = command().render_long_help().to_string();
    for spec in SOURCES {
        assert!(help.contains(&format!("--collector.{}", spec.name)));
        assert!(help.contains(&format!("--no-collector.{}", spec.name)));
        for option in spec.options {
            assert!(help.contains(&format!("--collector.{}.{}", spec.name, option.name)));
        }
    }
}

#[test]
fn web_flags_defaults_file_and_errors() {
    let c = run(&[]).unwrap();
    assert_eq!(c.web.config_file, None);
    assert_eq!(c.web.max_requests, 40);
    assert_eq!(c.web.read_header_timeout, Duration::from_secs(30));
    assert_eq!(c.web.request_timeout, Duration::from_secs(30));
    let file = write_config(
        "web:\n  config-file: /etc/railscope/web.yml\n  max-requests: 0\n  read-header-timeout: 5s\n  request-timeout: 1m\n",
    );
    let path = file.path().to_str().unwrap();
    let c = run(&["--config.file", path]).unwrap();
    assert_eq!(
        c.web.config_file,
        Some(PathBuf::from("/etc/railscope/web.yml"))
    );
    assert_eq!(c.web.max_requests, 0);
    assert_eq!(c.web.read_header_timeout, Duration::from_secs(5));
    assert_eq!(c.web.request_timeout, Duration::from_secs(60));
    let c = run(&[
        "--config.file",
        path,
        "--web.config.file",
        "/tmp/w.yml",
        "--web.max-requests",
        "7",
    ])
    .unwrap();
    assert_eq!(c.web.config_file, Some(PathBuf::from("/tmp/w.yml")));
    assert_eq!(c.web.max_requests, 7);
    for (args, name) in [
        (["--web.max-requests", "many"], "--web.max-requests"),
        (
            ["--web.read-header-timeout", "0s"],
            "--web.read-header-timeout",
        ),
        (["--web.request-timeout", "soon"], "--web.request-timeout"),
    ] {
        let err = run(&args).unwrap_err();
        assert!(err.to_string().contains(name), "{args:?}: {err}");
    }
    let help = command().render_long_help().to_string();
    for flag in [
        "--web.config.file",
        "--web.max-requests",
        "--web.read-header-timeout",
        "--web.request-timeout",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help");
    }
}

#[test]
fn the_former_refused_backoff_spelling_is_accepted_and_reported() {
    let c = run(&["--path.refused-backoff", "5s"]).unwrap();
    assert_eq!(c.collection.refused_backoff, Duration::from_secs(5));
    assert_eq!(
        c.deprecated,
        [("path.refused-backoff", "sysfs.refused-backoff")]
    );
    assert!(run(&[]).unwrap().deprecated.is_empty());
    // The new spelling wins where both are given.
    let c = run(&[
        "--path.refused-backoff",
        "5s",
        "--sysfs.refused-backoff",
        "7s",
    ])
    .unwrap();
    assert_eq!(c.collection.refused_backoff, Duration::from_secs(7));
    // The file's former key, and the new key beside it.
    let old = write_config("path:\n  refused-backoff: 3s\n");
    let c = run(&["--config.file", old.path().to_str().unwrap()]).unwrap();
    assert_eq!(c.collection.refused_backoff, Duration::from_secs(3));
    assert_eq!(c.deprecated.len(), 1);
    let both = write_config("path:\n  refused-backoff: 3s\nsysfs:\n  refused-backoff: 4s\n");
    let c = run(&["--config.file", both.path().to_str().unwrap()]).unwrap();
    assert_eq!(c.collection.refused_backoff, Duration::from_secs(4));
    // Hidden from --help, where the new one is shown.
    let help = command().render_long_help().to_string();
    assert!(help.contains("--sysfs.refused-backoff"));
    assert!(!help.contains("--path.refused-backoff"));
}

#[test]
fn doctor_is_a_subcommand_with_the_agents_collection_flags() {
    let parsed = parse([
        "railscope",
        "doctor",
        "--path.sysfs",
        "/host/sys",
        "--output",
        "json",
        "--no-collector.gpu",
    ])
    .unwrap();
    let Invocation::Doctor(config, options) = parsed else {
        panic!("not doctor");
    };
    assert_eq!(config.collection.roots.sysfs, PathBuf::from("/host/sys"));
    assert!(!config.collection.collectors[4].enabled);
    assert_eq!(options.output, doctor::Output::Json);
    assert!(options.from.is_none());
    // The serving flags are accepted, not shown.
    assert!(parse(["railscope", "doctor", "--web.listen-address", ":1"]).is_ok());
    let help = command()
        .find_subcommand_mut("doctor")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(help.contains("--path.sysfs") && help.contains("--from.ca-file"));
    assert!(!help.contains("--web.listen-address"));
}

#[test]
fn a_failure_says_which_command_it_was_for() {
    for (args, mode, field) in [
        (vec!["railscope", "--no-such"], Mode::Agent, "--no-such"),
        (
            vec!["railscope", "--log.level", "loud"],
            Mode::Agent,
            "--log.level",
        ),
        (
            vec!["railscope", "doctor", "--no-such"],
            Mode::Doctor,
            "--no-such",
        ),
        (
            vec!["railscope", "doctor", "--output", "yaml"],
            Mode::Doctor,
            "--output",
        ),
        (
            vec!["railscope", "doctor", "--from.username", "a"],
            Mode::Doctor,
            "--from.username",
        ),
        (
            vec!["railscope", "doctor", "--log.level", "loud"],
            Mode::Doctor,
            "--log.level",
        ),
        // The agent's flags go after doctor's name.
        (
            vec!["railscope", "--path.sysfs", "/x", "doctor"],
            Mode::Agent,
            "doctor",
        ),
    ] {
        let err = parse(args.clone()).unwrap_err();
        assert_eq!(err.mode, mode, "{args:?}");
        assert!(err.to_string().contains(field), "{args:?}: {err}");
    }
    assert!(matches!(
        parse(["railscope", "doctor", "--help"]),
        Ok(Invocation::Print(_))
    ));
}

#[test]
fn file_values_are_typed() {
    for (text, field) in [
        ("web:\n  max-requests: many\n", "web.max-requests"),
        ("web:\n  listen-address: [1, 2]\n", "web.listen-address"),
        ("scrape:\n  timeout-max: 10\n", "scrape.timeout-max"),
        ("web: 5\n", "web"),
        ("log:\n  level: [info]\n", "log.level"),
        (
            "otlp:\n  endpoint: http://c:4317\n  headers: a=b\n",
            "otlp.headers",
        ),
    ] {
        let file = write_config(text);
        let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
        assert!(err.to_string().contains(field), "{text:?}: {err}");
    }
}

/// Every flag `--help` shows has its row in the manual's flags table, and every row names a
/// flag that exists: a flag added, renamed or removed without the manual fails here.
#[test]
fn the_manual_lists_every_flag() {
    let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
    let text = std::fs::read_to_string(page).unwrap();
    let table = text
        .split("| flag | default | meaning |\n|---|---|---|\n")
        .nth(1)
        .expect("docs/configuration.md has the flags table");
    let mut documented = std::collections::BTreeSet::new();
    for row in table.lines().take_while(|l| l.starts_with('|')) {
        let first = row.trim_matches('|').split(" | ").next().unwrap_or("");
        for flag in first.split('`').skip(1).step_by(2) {
            documented.insert(flag.trim_start_matches("--").to_owned());
        }
    }
    let cmd = command();
    let mut shown = std::collections::BTreeSet::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        // Per-collector switches are one row, `--collector.<name>` / `--no-collector.<name>`.
        if SOURCES.iter().any(|s| {
            long == format!("collector.{}", s.name) || long == format!("no-collector.{}", s.name)
        }) {
            continue;
        }
        shown.insert(long.to_owned());
    }
    for flag in &shown {
        assert!(
            documented.contains(flag),
            "--{flag} is missing from docs/configuration.md's flags table"
        );
    }
    for flag in &documented {
        let known = shown.contains(flag)
            || ["collector.<name>", "no-collector.<name>", "version", "help"]
                .contains(&flag.as_str());
        assert!(
            known,
            "docs/configuration.md documents --{flag}, which railscope does not have"
        );
    }
}

#[test]
fn collector_options_are_typed_by_their_kind() {
    // A map option from a flag is parsed once into pairs; a bad one names the flag at start.
    let c = run(&["--collector.topology.rails", "mlx5_0=0, mlx5_1=1"]).unwrap();
    assert_eq!(
        c.collection.collectors[7].options.map("rails").unwrap(),
        [
            ("mlx5_0".to_owned(), "0".to_owned()),
            ("mlx5_1".to_owned(), "1".to_owned())
        ]
    );
    for (args, field) in [
        (
            &["--collector.topology.rails", "mlx5_0"][..],
            "--collector.topology.rails (collectors.topology.rails)",
        ),
        (
            &["--collector.infiniband.hw-counters-source", "firmware"][..],
            "--collector.infiniband.hw-counters-source (collectors.infiniband.hw-counters-source)",
        ),
    ] {
        let err = run(args).unwrap_err();
        assert_eq!(err.field, field, "{args:?}");
    }
    // From the file: a map stays a map (keys holding '=' or ',' are not split), a choice is
    // checked, a map where a scalar belongs is refused.
    let file = write_config(
        "collectors:\n  topology:\n    rails:\n      \"a=b,c\": 2\n  infiniband:\n    hw-counters-source: sysfs\n",
    );
    let c = run(&["--config.file", file.path().to_str().unwrap()]).unwrap();
    assert_eq!(
        c.collection.collectors[7].options.map("rails").unwrap(),
        [("a=b,c".to_owned(), "2".to_owned())]
    );
    assert_eq!(
        c.collection.collectors[0]
            .options
            .get("hw-counters-source")
            .unwrap(),
        "sysfs"
    );
    for text in [
        "collectors:\n  infiniband:\n    hw-counters-source: firmware\n",
        "collectors:\n  infiniband:\n    device-include:\n      a: b\n",
        "collectors:\n  topology:\n    rails: [1, 2]\n",
    ] {
        let file = write_config(text);
        let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
        assert!(err.field.starts_with("--collector."), "{text}: {err}");
    }
}
