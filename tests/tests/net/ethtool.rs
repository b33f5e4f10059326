//! End-to-end test of the `ethtool` source over the real `SIOCETHTOOL` ioctl: a veth pair
//! whose one end lives in a network namespace the test creates, the real railscope binary
//! running inside that namespace (`ip netns exec`, which also remounts `/sys` for it), traffic
//! over the pair, and the veth driver's own `ETHTOOL_GSTATS` values (`peer_ifindex`) in the
//! scrape when `--collector.ethtool.metrics-include` asks for them.
//!
//! Needs root and `ip` (iproute2); a missing tool is a failure, never a skip. The namespace
//! and the pair are removed when the test ends, pass or fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use railscope_tests::netns::{Netns, ip};
use railscope_tests::{Agent, find, parse_samples, promtool_check_metrics, value};

/// A network namespace holding one end of a veth pair whose other end stays in the test's
/// namespace, with a /30 between them. Both are deleted on drop.
struct VethNetns {
    ns: Netns,
    /// The end inside the namespace, where the agent runs.
    inner: String,
    /// The end in the test's namespace.
    outer: String,
    /// The inner end's address.
    inner_ip: String,
}

impl VethNetns {
    fn new() -> VethNetns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = std::process::id() % 100_000;
        // Interface names are at most 15 bytes.
        let this = VethNetns {
            ns: Netns::new("ethtool"),
            inner: format!("rse{id}i{n}"),
            outer: format!("rse{id}o{n}"),
            inner_ip: format!("10.254.{}.{}", (id % 250) + 1, 4 * (n % 60) + 1),
        };
        let outer_ip = format!("10.254.{}.{}", (id % 250) + 1, 4 * (n % 60) + 2);
        // Clean up leftovers of an earlier run with the same pid, then build.
        let _ = Command::new("ip")
            .args(["link", "del", &this.outer])
            .output();
        ip(&[
            "link",
            "add",
            &this.outer,
            "type",
            "veth",
            "peer",
            "name",
            &this.inner,
            "netns",
            this.ns.name(),
        ]);
        ip(&["addr", "add", &format!("{outer_ip}/30"), "dev", &this.outer]);
        ip(&["link", "set", &this.outer, "up"]);
        this.ns.ip(&[
            "addr",
            "add",
            &format!("{}/30", this.inner_ip),
            "dev",
            &this.inner,
        ]);
        this.ns.ip(&["link", "set", &this.inner, "up"]);
        this
    }

    /// The outer end's ifindex: what the inner end's `peer_ifindex` statistic reports.
    fn outer_ifindex(&self) -> f64 {
        std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", self.outer))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Sends `n` UDP datagrams from the test's namespace to the inner end.
    fn send_traffic(&self, n: usize) {
        let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..n {
            socket
                .send_to(
                    format!("railscope {i}").as_bytes(),
                    (self.inner_ip.as_str(), 9),
                )
                .unwrap();
        }
    }

    /// The agent inside the namespace, on its own sysfs and procfs, with the ethtool
    /// collector alone and `extra`.
    fn agent(&self, extra: &[&str]) -> Agent {
        let mut args = vec![
            "--path.sysfs",
            "/sys",
            "--path.procfs",
            "/proc",
            "--collector.disable-defaults",
            "--collector.ethtool",
        ];
        args.extend_from_slice(extra);
        Agent::in_netns(&self.ns, &args)
    }
}

impl Drop for VethNetns {
    fn drop(&mut self) {
        // The namespace's own drop destroys the inner end and with it the pair; the outer
        // end goes here should the pair have outlived it.
        let _ = Command::new("ip")
            .args(["link", "del", &self.outer])
            .output();
    }
}

fn assert_collector_ok(samples: &[railscope_tests::Sample], log: &str) {
    let ethtool = [("collector", "ethtool")];
    assert_eq!(
        value(samples, "railscope_collector_success", &ethtool),
        1.0,
        "{log}"
    );
    assert_eq!(
        value(samples, "railscope_collector_last_errors", &ethtool),
        0.0,
        "{log}"
    );
}

#[test]
fn veth_driver_stats_over_the_real_ioctl_in_a_network_namespace() {
    let net = VethNetns::new();
    let include = format!("^{}$", net.inner);
    let agent = net.agent(&[
        "--collector.ethtool.device-include",
        &include,
        "--collector.ethtool.metrics-include",
        "peer_ifindex|^rx_queue_0_",
    ]);
    net.send_traffic(100);
    let text = agent.scrape();
    promtool_check_metrics(&text);
    let samples = parse_samples(&text);
    assert_collector_ok(&samples, &agent.log());
    // veth's GSTATS (drivers/net/veth.c veth_get_ethtool_stats): peer_ifindex first.
    assert_eq!(
        value(
            &samples,
            "railscope_ethtool_stat_total",
            &[("netdev", &net.inner), ("stat", "peer_ifindex")]
        ),
        net.outer_ifindex(),
        "{text}"
    );
    let queue_stats = find(
        &samples,
        "railscope_ethtool_stat_total",
        &[("netdev", &net.inner)],
    );
    assert!(
        queue_stats
            .iter()
            .any(|s| s.labels["stat"].starts_with("rx_queue_0_")),
        "{text}"
    );
    // Only what metrics-include matched.
    assert!(
        queue_stats
            .iter()
            .all(|s| s.labels["stat"] == "peer_ifindex"
                || s.labels["stat"].starts_with("rx_queue_0_")),
        "{text}"
    );
    // A later scrape after more traffic still reads the same set cleanly.
    net.send_traffic(100);
    let samples = parse_samples(&agent.scrape());
    assert_collector_ok(&samples, &agent.log());
    assert_eq!(
        find(
            &samples,
            "railscope_ethtool_stat_total",
            &[("netdev", &net.inner)]
        )
        .len(),
        queue_stats.len()
    );
}

#[test]
fn default_selection_skips_veth_and_loopback() {
    let net = VethNetns::new();
    // Asked for every statistic, but no device-include: only RDMA and physical netdevs are
    // read, and the namespace has neither (its /sys/class/net holds lo and the veth end).
    let agent = net.agent(&["--collector.ethtool.metrics-include", "."]);
    net.send_traffic(10);
    let text = agent.scrape();
    promtool_check_metrics(&text);
    let samples = parse_samples(&text);
    assert_collector_ok(&samples, &agent.log());
    let ethtool: Vec<_> = samples
        .iter()
        .filter(|s| s.labels.contains_key("netdev"))
        .collect();
    assert!(ethtool.is_empty(), "{ethtool:?}");
}

#[test]
fn veth_without_metrics_include_exports_no_driver_stats() {
    let net = VethNetns::new();
    let agent = net.agent(&["--collector.ethtool.device-include", "."]);
    let text = agent.scrape();
    promtool_check_metrics(&text);
    let samples = parse_samples(&text);
    assert_collector_ok(&samples, &agent.log());
    // veth has none of the statistics railscope knows; the others are not asked for. The
    // netdev was read all the same.
    assert!(
        find(&samples, "railscope_ethtool_stat_total", &[]).is_empty(),
        "{text}"
    );
    assert!(
        value(
            &samples,
            "railscope_ethtool_stats",
            &[("netdev", &net.inner)]
        ) >= 1.0,
        "{text}"
    );
}
