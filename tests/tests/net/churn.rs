//! Netdevs that come and go leave nothing behind: a Kubernetes node creates and deletes veths
//! all day, and every cache keyed by a netdev must let go of it when it goes away.
//!
//! The real binary runs in a network namespace of its own (`ip netns add`, with a name unique
//! to this run; root is needed, as in CI), started with `ip netns exec` (which also mounts
//! that namespace's sysfs, so `/sys/class/net` lists its netdevs only) and every netdev
//! selected by the `netdev`, `ethtool` and `dcb` collectors (`device-include` `.*`). Then a
//! few hundred cycles, each: create a veth pair with a fresh name, scrape, delete it, scrape.
//! Checked in every cycle:
//!
//! * while the pair exists, both ends are read (`railscope_netdev_info`) and their attribute
//!   files are kept open (`railscope_open_files_kept` above its baseline);
//! * once it is deleted, the next scrape has no series that names either end, and
//!   `railscope_open_files_kept` is back at its baseline at once (not after the two minutes
//!   an unread file is kept);
//! * no collector reports an error, and the agent logs no warning.
//!
//! At the end, the agent's open descriptors are back near their baseline, and its resident
//! memory grew by less than a few MiB over the run: a sanity bound only, as resident memory
//! moves with the allocator. The bytes per cycle are measured with `scripts/churn-bench`.
//!
//! HTTP to the agent, bound to the namespace's loopback, goes through the tests' relay
//! ([`Agent::in_netns`]). A missing `ip` tool, or a namespace that cannot be created, is a
//! failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Instant;

use railscope_tests::netns::Netns;
use railscope_tests::{Agent, Sample, find, parse_samples, value};

/// How many veth pairs come and go.
const CYCLES: usize = 300;
/// The most resident memory may grow over the cycles after the first tenth (a sanity bound;
/// see the module docs).
const RSS_SLACK_KIB: u64 = 8 * 1024;
/// The collectors under test.
const COLLECTORS: [&str; 3] = ["netdev", "ethtool", "dcb"];

/// Runs `commands` (one a line) with `ip -n <namespace> -batch -`.
fn ip_batch(ns: &Netns, commands: &str) {
    let out = railscope_tests::output_with_input(
        Command::new("ip").args(["-n", ns.name(), "-batch", "-"]),
        commands,
    );
    assert!(
        out.status.success(),
        "ip -batch failed on {commands:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scrape(agent: &Agent) -> Vec<Sample> {
    parse_samples(&agent.scrape())
}

/// A field of the agent's `/proc/<pid>/status` (`VmRSS` in KiB). `ip netns exec` execs the
/// agent: the child is the agent's own process.
fn status(agent: &Agent, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/<agent>/status"))
}

/// How many descriptors the agent has open.
fn open_fds(agent: &Agent) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", agent.child.id()))
        .unwrap()
        .count()
}

fn kept(s: &[Sample]) -> f64 {
    value(s, "railscope_open_files_kept", &[])
}

/// Every collector under test succeeded without errors.
fn assert_clean(s: &[Sample], when: &str) {
    for collector in COLLECTORS {
        let labels = [("collector", collector)];
        assert_eq!(
            value(s, "railscope_collector_success", &labels),
            1.0,
            "{collector} did not succeed {when}"
        );
        assert_eq!(
            value(s, "railscope_collector_last_errors", &labels),
            0.0,
            "{collector} reported errors {when}"
        );
    }
}

/// The samples with a label value naming one of `netdevs`.
fn naming<'a>(s: &'a [Sample], netdevs: &[&str]) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| x.labels.values().any(|v| netdevs.contains(&v.as_str())))
        .collect()
}

#[test]
fn veths_that_come_and_go_leave_nothing_behind() {
    let ns = Netns::new("churn");
    let agent = Agent::in_netns(
        &ns,
        &[
            "--collector.disable-defaults",
            "--collector.netdev",
            "--collector.ethtool",
            "--collector.dcb",
            "--collector.netdev.device-include",
            ".*",
            "--collector.ethtool.device-include",
            ".*",
            "--collector.dcb.device-include",
            ".*",
            "--log.level",
            "warn",
        ],
    );
    let s0 = scrape(&agent);
    assert_clean(&s0, "before any veth");
    // `lo` alone, read over rtnetlink.
    assert_eq!(find(&s0, "railscope_netdev_info", &[]).len(), 1, "{s0:?}");
    let baseline = kept(&scrape(&agent));
    let fds0 = open_fds(&agent);
    let mut rss_warm = 0;
    let start = Instant::now();
    for i in 0..CYCLES {
        if i == CYCLES / 10 {
            rss_warm = status(&agent, "VmRSS");
        }
        let (a, b) = (format!("vcA{i}"), format!("vcB{i}"));
        ip_batch(
            &ns,
            &format!("link add {a} type veth peer name {b}\nlink set {a} up\n"),
        );
        let s = scrape(&agent);
        assert_clean(&s, &format!("with {a}"));
        for nd in [&a, &b] {
            assert_eq!(
                find(&s, "railscope_netdev_info", &[("netdev", nd)]).len(),
                1,
                "cycle {i}: {nd} was not read"
            );
        }
        assert!(
            kept(&s) > baseline,
            "cycle {i}: nothing of {a} or {b} is kept open (baseline {baseline})"
        );

        ns.ip(&["link", "del", &a]);
        let s = scrape(&agent);
        assert_clean(&s, &format!("after {a} was deleted"));
        let left = naming(&s, &[&a, &b]);
        assert!(
            left.is_empty(),
            "cycle {i}: series of deleted netdevs: {left:?}"
        );
        assert_eq!(
            kept(&s),
            baseline,
            "cycle {i}: files kept open for deleted netdevs"
        );
    }
    let took = start.elapsed();
    let rss_end = status(&agent, "VmRSS");
    let fds_end = open_fds(&agent);
    println!(
        "{CYCLES} veth pairs created and deleted in {:.1} s; resident memory {rss_warm} KiB after {} cycles, {rss_end} KiB at the end; {fds0} descriptors open before, {fds_end} after",
        took.as_secs_f64(),
        CYCLES / 10
    );
    // Open descriptors: the baseline, give or take the connections being closed.
    assert!(
        fds_end <= fds0 + 4,
        "descriptors grew from {fds0} to {fds_end}"
    );
    assert!(
        rss_end <= rss_warm + RSS_SLACK_KIB,
        "resident memory grew from {rss_warm} KiB to {rss_end} KiB over {} cycles",
        CYCLES - CYCLES / 10
    );
    let log = agent.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("level=warn") || l.contains("level=error")),
        "the agent logged:\n{log}"
    );
}
