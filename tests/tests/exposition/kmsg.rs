//! The `kmsg` collector end to end: the agent follows a file of `/dev/kmsg` records (given
//! with `--collector.kmsg.path`; the real device needs CAP_SYSLOG and holds this machine's own
//! log), counts the events of its table by kind and identifiers, and keeps the time of the
//! last one; on a fixture tree without that flag it reads no kernel log at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::{Duration, Instant};

use railscope_tests::{Agent, find, parse_samples, promtool_check_metrics, tree_args, value};

fn event<'a>(
    kind: &'a str,
    pci: &'a str,
    code: &'a str,
    severity: &'a str,
) -> [(&'a str, &'a str); 4] {
    [
        ("kind", kind),
        ("pci_address", pci),
        ("code", code),
        ("severity", severity),
    ]
}

/// This machine's `CLOCK_MONOTONIC` in microseconds: the clock `/dev/kmsg` stamps its records
/// with (time since boot, suspend left out).
fn monotonic_micros() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is readable");
    now.tv_sec() as u64 * 1_000_000 + now.tv_nsec() as u64 / 1_000
}

#[test]
fn the_agent_counts_kernel_log_events_and_follows_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kmsg");
    let mut file = std::fs::File::create(&log).unwrap();
    // Records are stamped in microseconds since boot. The stamps are fractions of this
    // machine's uptime (a quarter of it for the backlog, half of it for the record appended
    // later) so that they lie in the past however recently the machine booted.
    let uptime = monotonic_micros();
    let first = uptime / 4;
    let appended = uptime / 2;
    // The boot's backlog: an XID, a firmware command timeout, an AER error, and noise.
    for line in [
        format!(
            "4,812,{first},-;NVRM: Xid (PCI:0000:1b:00): 79, pid=2841, name=python3, GPU has fallen off the bus."
        ),
        " SUBSYSTEM=pci".to_owned(),
        " DEVICE=+pci:0000:1b:00.0".to_owned(),
        format!(
            "3,813,{},-;mlx5_core 0000:18:00.0: wait_func:1034:(pid 4711): ACCESS_REG(0x805) timeout. Will cause a leak of a command resource",
            first + 1
        ),
        format!(
            "3,814,{},-;pcieport 0000:17:01.0: AER: Uncorrected (Non-Fatal) error message received from 0000:18:00.0",
            first + 2
        ),
        format!(
            "6,815,{},-;mlx5_core 0000:18:00.0 ibp24s0: Link up",
            first + 3
        ),
    ] {
        writeln!(file, "{line}").unwrap();
    }
    file.flush().unwrap();
    let mut args = tree_args(&railscope_tests::fixtures().join("h100-cx7-ndr-ib"));
    args.push(format!("--collector.kmsg.path={}", log.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start(&args);

    let wait_for = |want: f64| {
        let start = Instant::now();
        loop {
            let text = agent.scrape();
            let s = parse_samples(&text);
            if s.iter()
                .any(|x| x.name == "railscope_kmsg_records_total" && x.value >= want)
                || start.elapsed() > Duration::from_secs(10)
            {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let text = wait_for(4.0);
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    assert_eq!(
        value(&s, "railscope_kmsg_records_total", &[]),
        4.0,
        "continuation lines are not records"
    );
    assert_eq!(
        value(
            &s,
            "railscope_kmsg_events_total",
            &event("xid", "0000:1b:00.0", "79", "")
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_kmsg_events_total",
            &event("mlx5_cmd_timeout", "0000:18:00.0", "", "")
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_kmsg_events_total",
            &event("pcie_aer", "0000:18:00.0", "", "nonfatal")
        ),
        1.0
    );
    assert_eq!(
        find(&s, "railscope_kmsg_events_total", &[]).len(),
        3,
        "only the table's events"
    );
    // The XID's time: the kernel's boot time plus the record's stamp, in the past.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = value(
        &s,
        "railscope_kmsg_event_last_seen_seconds",
        &event("xid", "0000:1b:00.0", "79", ""),
    );
    assert!(at < now && at > now - 10.0 * 365.0 * 86400.0, "{at}");

    // A new XID 79 on the same GPU is appended: the counter rises, the time moves.
    writeln!(
        file,
        "4,816,{appended},-;NVRM: Xid (PCI:0000:1b:00): 79, pid=2990, GPU has fallen off the bus."
    )
    .unwrap();
    file.flush().unwrap();
    let s = parse_samples(&wait_for(5.0));
    assert_eq!(
        value(
            &s,
            "railscope_kmsg_events_total",
            &event("xid", "0000:1b:00.0", "79", "")
        ),
        2.0
    );
    let later = value(
        &s,
        "railscope_kmsg_event_last_seen_seconds",
        &event("xid", "0000:1b:00.0", "79", ""),
    );
    let apart = (appended - first) as f64 / 1e6;
    assert!(
        (later - at - apart).abs() < 0.01,
        "{later} - {at}, not {apart}"
    );
}

#[test]
fn on_a_fixture_tree_without_a_path_no_kernel_log_is_read() {
    let tree = railscope_tests::fixtures().join("h100-cx7-ndr-ib");
    let args = tree_args(&tree);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start(&args);
    let s = parse_samples(&agent.scrape());
    assert!(s.iter().all(|x| !x.name.starts_with("railscope_kmsg_")));
    assert_eq!(
        value(&s, "railscope_collector_success", &[("collector", "kmsg")]),
        1.0
    );
}
