//! End-to-end tests of the `netdev` and `dcb` sources.
//!
//! * A real veth pair across two network namespaces this test creates (`ip netns add`; root
//!   is needed, as in CI): the real binary runs inside the first namespace (`ip netns exec`,
//!   which also remounts `/sys` for it), traffic crosses the veth, and the scraped counters
//!   must equal what `/sys/class/net/<veth>/statistics/*` shows in that namespace; an MTU
//!   change and an administratively down link show in the next scrape; DCB reports no data
//!   for a veth, and no error.
//! * A fixture tree, whose netdevs do not exist in the test's namespace: the netdev source
//!   falls back to the tree's sysfs attributes.
//!
//! The agent is started inside the namespace with [`Agent::in_netns`] and reached through the
//! tests' relay. The test process cannot enter a namespace itself (that needs `setns`, and
//! this crate has no `unsafe`), so whatever else must happen inside one — sending UDP over the
//! veth, reading its sysfs statistics, writing a sysctl — is done by this same test binary
//! re-run under `ip netns exec` with `--exact netdev_dcb::netns_helper` and the work described
//! in `$RAILSCOPE_NETNS_HELPER`. In a normal test run `netns_helper` does nothing. A missing
//! `ip` tool is a failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use railscope_tests::netns::Netns;
use railscope_tests::{Agent, Sample, find, get, parse_samples, promtool_check_metrics, value};

/// The helper's work, when this binary runs as the helper.
const HELPER_ENV: &str = "RAILSCOPE_NETNS_HELPER";
/// Where the helper writes its result.
const HELPER_OUT_ENV: &str = "RAILSCOPE_NETNS_HELPER_OUT";
/// The helper's name in this test binary (`--exact` selects it alone).
const HELPER_TEST: &str = "netdev_dcb::netns_helper";

/// Not a test of its own: the helper the veth test runs inside a network namespace. Work:
/// `get <addr> <path>` (writes the status line and body), `udp <from-ip> <to-addr> <count>
/// <bytes>`, `stats <netdev>` (writes rx_bytes, tx_bytes, rx_packets, tx_packets from sysfs),
/// `write <path> <value>`.
#[test]
fn netns_helper() {
    let Ok(work) = std::env::var(HELPER_ENV) else {
        return;
    };
    let out = PathBuf::from(std::env::var(HELPER_OUT_ENV).unwrap());
    let args: Vec<&str> = work.split(' ').collect();
    match args.as_slice() {
        ["get", addr, path] => {
            let resp = get(addr.parse().unwrap(), path, &[]).unwrap();
            let mut text = format!("{}\n", resp.status).into_bytes();
            text.extend_from_slice(&resp.body);
            std::fs::write(out, text).unwrap();
        }
        ["udp", from, to, count, bytes] => {
            let socket = UdpSocket::bind((from.parse::<std::net::IpAddr>().unwrap(), 0)).unwrap();
            let to: SocketAddr = to.parse().unwrap();
            let payload = vec![0x5a; bytes.parse().unwrap()];
            for _ in 0..count.parse::<u32>().unwrap() {
                socket.send_to(&payload, to).unwrap();
            }
            std::fs::write(out, "sent\n").unwrap();
        }
        ["stats", netdev] => {
            let dir = Path::new("/sys/class/net").join(netdev).join("statistics");
            let text: Vec<String> = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
                .iter()
                .map(|f| {
                    std::fs::read_to_string(dir.join(f))
                        .unwrap()
                        .trim()
                        .to_owned()
                })
                .collect();
            std::fs::write(out, text.join("\n")).unwrap();
        }
        ["write", path, value] => {
            // Best effort (a kernel without IPv6 has no such file); the result says which.
            let result = std::fs::write(path, value);
            std::fs::write(out, format!("{result:?}")).unwrap();
        }
        other => panic!("unknown helper work {other:?}"),
    }
}

/// A namespace with quiet links: no IPv6 autoconfiguration or MLD packets crossing the veth
/// between a scrape and the sysfs reads it is compared with.
fn quiet_netns(tag: &str) -> Netns {
    let ns = Netns::new(&format!("nd-{tag}"));
    for conf in ["all", "default"] {
        helper(
            &ns,
            &format!("write /proc/sys/net/ipv6/conf/{conf}/disable_ipv6 1"),
        );
    }
    ns
}

/// Runs this test binary as the helper inside `ns`; returns what it wrote.
fn helper(ns: &Netns, work: &str) -> String {
    let out = ns.dir().join("helper.out");
    let _ = std::fs::remove_file(&out);
    let mut cmd = ns.command(std::env::current_exe().unwrap());
    cmd.args(["--exact", HELPER_TEST, "--test-threads", "1", "-q"])
        .env(HELPER_ENV, work)
        .env(HELPER_OUT_ENV, &out);
    let result = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({e}); install iproute2"));
    assert!(
        result.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::read_to_string(&out).unwrap()
}

/// A scrape of `agent`, linted with promtool, parsed.
fn scrape(agent: &Agent) -> Vec<Sample> {
    let text = agent.scrape();
    promtool_check_metrics(&text);
    parse_samples(&text)
}

/// The four sysfs counters of `netdev` inside `ns`.
fn sysfs_stats(ns: &Netns, netdev: &str) -> [f64; 4] {
    let text = helper(ns, &format!("stats {netdev}"));
    let v: Vec<f64> = text.lines().map(|l| l.parse().unwrap()).collect();
    [v[0], v[1], v[2], v[3]]
}

/// The same four counters from a scrape.
fn scraped_stats(s: &[Sample], netdev: &str) -> [f64; 4] {
    let get = |name: &str, direction: &str| {
        value(s, name, &[("netdev", netdev), ("direction", direction)])
    };
    [
        get("railscope_netdev_bytes_total", "rx"),
        get("railscope_netdev_bytes_total", "tx"),
        get("railscope_netdev_packets_total", "rx"),
        get("railscope_netdev_packets_total", "tx"),
    ]
}

fn assert_clean(s: &[Sample], collector: &str) {
    assert_eq!(
        value(
            s,
            "railscope_collector_success",
            &[("collector", collector)]
        ),
        1.0,
        "{collector} did not succeed"
    );
    assert_eq!(
        value(
            s,
            "railscope_collector_last_errors",
            &[("collector", collector)]
        ),
        0.0,
        "{collector} reported errors"
    );
}

fn no_dcb_series(s: &[Sample]) {
    let dcb: Vec<&Sample> = s
        .iter()
        .filter(|x| x.name.starts_with("railscope_dcb_"))
        .collect();
    assert!(dcb.is_empty(), "unexpected DCB data: {dcb:?}");
}

#[test]
fn veth_counters_mtu_and_operstate_over_rtnetlink() {
    let a = quiet_netns("a");
    let b = quiet_netns("b");
    let id = std::process::id() % 100_000;
    let va = format!("vethrs{id}a");
    let vb = format!("vethrs{id}b");
    a.ip(&[
        "link",
        "add",
        &va,
        "type",
        "veth",
        "peer",
        "name",
        &vb,
        "netns",
        b.name(),
    ]);
    a.ip(&["addr", "add", "10.203.0.1/30", "dev", &va]);
    b.ip(&["addr", "add", "10.203.0.2/30", "dev", &vb]);
    a.ip(&["link", "set", &va, "up"]);
    b.ip(&["link", "set", &vb, "up"]);

    let agent = Agent::in_netns(
        &a,
        &[
            "--path.sysfs",
            "/sys",
            "--collector.disable-defaults",
            "--collector.netdev",
            "--collector.dcb",
            "--collector.netdev.device-include",
            "veth",
            "--collector.dcb.device-include",
            "veth",
        ],
    );
    let s0 = scrape(&agent);
    assert_clean(&s0, "netdev");
    assert_clean(&s0, "dcb");
    let info = find(&s0, "railscope_netdev_info", &[("netdev", &va)]);
    assert_eq!(info.len(), 1, "{s0:?}");
    assert_eq!(info[0].labels["source"], "rtnetlink");
    assert_eq!(info[0].labels["operstate"], "up");
    assert_eq!(info[0].labels["driver"], "");
    // Only the selected veth (the peer is in the other namespace; lo is not selected).
    assert_eq!(find(&s0, "railscope_netdev_info", &[]).len(), 1);
    assert_eq!(value(&s0, "railscope_netdev_up", &[("netdev", &va)]), 1.0);
    assert_eq!(
        value(&s0, "railscope_netdev_mtu_bytes", &[("netdev", &va)]),
        1500.0
    );
    // veth reports 10 Gb/s.
    assert_eq!(
        value(
            &s0,
            "railscope_netdev_speed_bytes_per_second",
            &[("netdev", &va)]
        ),
        10e9 / 8.0
    );
    no_dcb_series(&s0);
    let before = scraped_stats(&s0, &va);

    // 20 datagrams of 1000 bytes over the veth (plus ARP, and ICMP port unreachable back).
    helper(&a, "udp 10.203.0.1 10.203.0.2:9 20 1000");
    std::thread::sleep(Duration::from_millis(300));
    let low = sysfs_stats(&a, &va);
    let s1 = scrape(&agent);
    let high = sysfs_stats(&a, &va);
    let got = scraped_stats(&s1, &va);
    for (i, name) in ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
        .iter()
        .enumerate()
    {
        assert!(
            low[i] <= got[i] && got[i] <= high[i],
            "{name}: scraped {} but sysfs showed {} before and {} after the scrape",
            got[i],
            low[i],
            high[i]
        );
    }
    assert!(
        got[3] - before[3] >= 20.0,
        "tx_packets {before:?} → {got:?}"
    );
    assert!(
        got[1] - before[1] >= 20.0 * (1000.0 + 8.0 + 20.0 + 14.0),
        "tx_bytes {before:?} → {got:?}"
    );
    assert!(got[2] > before[2], "nothing received: {before:?} → {got:?}");
    assert_clean(&s1, "netdev");

    // An MTU change shows in the next scrape.
    a.ip(&["link", "set", &va, "mtu", "4200"]);
    let s2 = scrape(&agent);
    assert_eq!(
        value(&s2, "railscope_netdev_mtu_bytes", &[("netdev", &va)]),
        4200.0
    );
    let changes = value(
        &s2,
        "railscope_netdev_carrier_changes_total",
        &[("netdev", &va)],
    );

    // So does an administratively down link; its speed becomes unknown (EINVAL), quietly.
    a.ip(&["link", "set", &va, "down"]);
    let s3 = scrape(&agent);
    let info = find(&s3, "railscope_netdev_info", &[("netdev", &va)]);
    assert_eq!(info[0].labels["operstate"], "down");
    assert_eq!(value(&s3, "railscope_netdev_up", &[("netdev", &va)]), 0.0);
    assert!(
        find(
            &s3,
            "railscope_netdev_speed_bytes_per_second",
            &[("netdev", &va)]
        )
        .is_empty()
    );
    assert!(
        value(
            &s3,
            "railscope_netdev_carrier_changes_total",
            &[("netdev", &va)]
        ) > changes,
        "carrier going away is a carrier change"
    );
    assert_clean(&s3, "netdev");
    assert_clean(&s3, "dcb");
    no_dcb_series(&s3);
}

#[test]
fn fixture_netdevs_fall_back_to_sysfs_attributes() {
    // cx6dx-roce-2port's ens1f0np0/ens1f1np1 are not netdevs of this namespace.
    let agent = Agent::fixture(
        "cx6dx-roce-2port",
        &[
            "--collector.disable-defaults",
            "--collector.netdev",
            "--collector.dcb",
        ],
    );
    let text = agent.scrape();
    promtool_check_metrics(&text);
    let s = parse_samples(&text);
    assert_clean(&s, "netdev");
    assert_clean(&s, "dcb");
    for (nd, mtu) in [("ens1f0np0", 1500.0), ("ens1f1np1", 4200.0)] {
        let info = find(&s, "railscope_netdev_info", &[("netdev", nd)]);
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].labels["source"], "sysfs");
        assert_eq!(info[0].labels["operstate"], "up");
        assert_eq!(info[0].labels["driver"], "mlx5_core");
        assert_eq!(
            value(&s, "railscope_netdev_mtu_bytes", &[("netdev", nd)]),
            mtu
        );
        assert_eq!(value(&s, "railscope_netdev_up", &[("netdev", nd)]), 1.0);
        assert_eq!(
            value(&s, "railscope_netdev_carrier", &[("netdev", nd)]),
            1.0
        );
        assert_eq!(
            value(
                &s,
                "railscope_netdev_speed_bytes_per_second",
                &[("netdev", nd)]
            ),
            12.5e9
        );
        // The tree has no statistics/: no traffic series rather than zeros.
        assert!(find(&s, "railscope_netdev_bytes_total", &[("netdev", nd)]).is_empty());
    }
    // lo is neither an RDMA nor a physical netdev.
    assert!(find(&s, "railscope_netdev_info", &[("netdev", "lo")]).is_empty());
    no_dcb_series(&s);
}
