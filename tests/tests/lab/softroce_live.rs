//! The live capture `tests/fixtures/softroce-live` (real rxe and siw sysfs bytes from the lab
//! VM): the capture is consistent with its `UNREADABLE` list, and the agent shows what the
//! kernel showed, with no error for the thousands of attribute reads that failed live.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use railscope_tests::{Agent, find, fixtures, parse_samples, value};

const TREE: &str = "softroce-live";

/// `dir/{a..b} ERRNO: text` lines, expanded.
fn unreadable() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(fixtures().join(TREE).join("UNREADABLE")).unwrap();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (path, error) = line.split_once(' ').unwrap();
        if let Some((dir, range)) = path.split_once("/{") {
            let (a, b) = range.trim_end_matches('}').split_once("..").unwrap();
            let (a, b): (u32, u32) = (a.parse().unwrap(), b.parse().unwrap());
            assert!(a < b, "{line}");
            out.extend((a..=b).map(|i| (format!("{dir}/{i}"), error.to_owned())));
        } else {
            out.push((path.to_owned(), error.to_owned()));
        }
    }
    out
}

#[test]
fn unreadable_attributes_are_listed_and_absent() {
    let list = unreadable();
    let root = fixtures().join(TREE);
    let count = |errno: &str| list.iter().filter(|(_, e)| e.starts_with(errno)).count();
    // Both rxe ports: 2 x 1022 empty GID attribute slots; both siw ports: the GID's netdev.
    assert_eq!(count("EINVAL"), 2 * 2 * 1022 + 2);
    assert!(
        count("EIO") >= 4,
        "power/autosuspend_delay_ms of each device"
    );
    for (path, error) in &list {
        if error.starts_with("(directory;") {
            // Left empty by its unreadable entries; git cannot keep it.
            assert!(!root.join(path).exists(), "{path}");
            continue;
        }
        assert!(
            !root.join(path).exists(),
            "{path} is listed as unreadable but exists"
        );
        // Its directory exists (or is listed as left empty).
        let parent = std::path::Path::new(path).parent().unwrap();
        assert!(
            root.join(parent).is_dir() || parent.ends_with("gid_attrs/ndevs"),
            "{path}: no directory"
        );
    }
    // Every slot of the GID table exists and the empty ones read as zeros.
    for dev in ["rxe0", "rxe1"] {
        let gids = root.join(format!("sys/class/infiniband/{dev}/ports/1/gids"));
        assert_eq!(std::fs::read_dir(&gids).unwrap().count(), 1024);
        assert_eq!(
            std::fs::read_to_string(gids.join("1023")).unwrap(),
            "0000:0000:0000:0000:0000:0000:0000:0000\n"
        );
    }
}

#[test]
fn the_agent_shows_the_live_devices_without_errors() {
    let agent = Agent::fixture(TREE, &[]);
    let s = parse_samples(&agent.scrape());
    for collector in ["infiniband", "netdev"] {
        assert_eq!(
            value(
                &s,
                "railscope_collector_errors_total",
                &[("collector", collector)]
            ),
            0.0,
            "{collector}"
        );
    }
    for (dev, node_type, netdev) in [
        ("rxe0", "CA", "veth0"),
        ("rxe1", "CA", "veth1"),
        // siw names its netdev only over RDMA netlink, which a fixture run does not use.
        ("siw0", "RNIC", ""),
        ("siw1", "RNIC", ""),
    ] {
        let info = find(&s, "railscope_ib_device_info", &[("device", dev)]);
        assert_eq!(info.len(), 1, "{dev}");
        assert_eq!(info[0].labels["node_type"], node_type);
        let port = find(
            &s,
            "railscope_ib_port_info",
            &[("device", dev), ("port", "1")],
        );
        assert_eq!(port.len(), 1, "{dev}");
        assert_eq!(port[0].labels["netdev"], netdev, "{dev}");
        assert_eq!(port[0].labels["state"], "ACTIVE");
        assert_eq!(port[0].labels["speed"], "FDR10");
    }
    // rxe: two RoCE v2 GIDs each; siw: one IB/RoCE v1 GID without a netdev.
    let v2 = |dev| {
        value(
            &s,
            "railscope_ib_port_gid_entries",
            &[("device", dev), ("type", "RoCE v2")],
        )
    };
    assert_eq!((v2("rxe0"), v2("rxe1")), (2.0, 2.0));
    let siw_gid = find(&s, "railscope_ib_port_gid_info", &[("device", "siw0")]);
    assert_eq!(siw_gid.len(), 1);
    assert_eq!(siw_gid[0].labels["type"], "IB/RoCE v1");
    assert_eq!(siw_gid[0].labels["netdev"], "");
    // The veth pair is lossless: what one rxe sent, the other received.
    let counter = |dev, name| {
        value(
            &s,
            "railscope_rdma_port_hw_stat_total",
            &[("device", dev), ("counter", name)],
        )
    };
    assert_eq!(counter("rxe1", "sent_pkts"), counter("rxe0", "rcvd_pkts"));
    assert_eq!(counter("rxe0", "sent_pkts"), counter("rxe1", "rcvd_pkts"));
    assert!(counter("rxe1", "sent_pkts") >= 300.0 * 64.0);
    assert_eq!(
        value(
            &s,
            "railscope_ib_port_active_mtu_bytes",
            &[("device", "rxe0")]
        ),
        1024.0
    );
}
