//! Walks every fixture tree on its own (without railscope's parsers) and checks that every
//! device, port, PMA counter, driver counter, GID and rate in it appears in `/metrics` with
//! the right value, unit and labels; and that what the tree breaks on purpose costs only its
//! own series.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use railscope_tests::{Agent, Sample, find, fixture_trees, fixtures, parse_samples, value};

/// PMA file → (family, direction, multiplier): restated here independently of the agent.
fn pma_family(file: &str) -> Option<(&'static str, Option<&'static str>, f64)> {
    Some(match file {
        "port_rcv_data" => ("railscope_ib_port_data_bytes_total", Some("rx"), 4.0),
        "port_xmit_data" => ("railscope_ib_port_data_bytes_total", Some("tx"), 4.0),
        "port_rcv_packets" => ("railscope_ib_port_packets_total", Some("rx"), 1.0),
        "port_xmit_packets" => ("railscope_ib_port_packets_total", Some("tx"), 1.0),
        "unicast_rcv_packets" => ("railscope_ib_port_unicast_packets_total", Some("rx"), 1.0),
        "unicast_xmit_packets" => ("railscope_ib_port_unicast_packets_total", Some("tx"), 1.0),
        "multicast_rcv_packets" => ("railscope_ib_port_multicast_packets_total", Some("rx"), 1.0),
        "multicast_xmit_packets" => ("railscope_ib_port_multicast_packets_total", Some("tx"), 1.0),
        "symbol_error" => ("railscope_ib_port_symbol_errors_total", None, 1.0),
        "link_error_recovery" => ("railscope_ib_port_link_error_recovery_total", None, 1.0),
        "link_downed" => ("railscope_ib_port_link_downed_total", None, 1.0),
        "port_rcv_errors" => ("railscope_ib_port_receive_errors_total", None, 1.0),
        "port_rcv_remote_physical_errors" => (
            "railscope_ib_port_receive_remote_physical_errors_total",
            None,
            1.0,
        ),
        "port_rcv_switch_relay_errors" => (
            "railscope_ib_port_receive_switch_relay_errors_total",
            None,
            1.0,
        ),
        "port_xmit_discards" => ("railscope_ib_port_transmit_discards_total", None, 1.0),
        "port_xmit_constraint_errors" => (
            "railscope_ib_port_transmit_constraint_errors_total",
            None,
            1.0,
        ),
        "port_rcv_constraint_errors" => (
            "railscope_ib_port_receive_constraint_errors_total",
            None,
            1.0,
        ),
        "local_link_integrity_errors" => (
            "railscope_ib_port_local_link_integrity_errors_total",
            None,
            1.0,
        ),
        "excessive_buffer_overrun_errors" => (
            "railscope_ib_port_excessive_buffer_overrun_errors_total",
            None,
            1.0,
        ),
        "VL15_dropped" => ("railscope_ib_port_vl15_dropped_total", None, 1.0),
        "port_xmit_wait" => ("railscope_ib_port_transmit_wait_total", None, 1.0),
        _ => return None,
    })
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim_end_matches('\n').to_owned())
}

fn files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn dirs(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn check_tree(tree: &str, samples: &[Sample]) -> usize {
    let class = fixtures().join(tree).join("sys/class/infiniband");
    let mut checked = 0;
    for device in dirs(&class) {
        let dev_dir = class.join(&device);
        let dev = device.as_str();
        assert_eq!(
            value(samples, "railscope_ib_device_info", &[("device", dev)]),
            1.0,
            "{tree}/{dev}"
        );
        for counter in files(&dev_dir.join("hw_counters"))
            .iter()
            .filter(|c| *c != "lifespan")
        {
            let text = read(&dev_dir.join("hw_counters").join(counter)).unwrap();
            let found = find(
                samples,
                "railscope_rdma_device_hw_stat_total",
                &[("device", dev), ("counter", counter)],
            );
            match text.parse::<u64>() {
                Ok(v) => {
                    assert_eq!(found.len(), 1, "{tree}/{dev} device hw_counter {counter}");
                    assert_eq!(
                        found[0].value, v as f64,
                        "{tree}/{dev} device hw_counter {counter}"
                    );
                }
                Err(_) => assert!(
                    found.is_empty(),
                    "{tree}/{dev}: unparseable {counter} exported"
                ),
            }
            checked += 1;
        }
        for port in dirs(&dev_dir.join("ports")) {
            let port_dir = dev_dir.join("ports").join(&port);
            let labels = [("device", dev), ("port", port.as_str())];
            let at = format!("{tree}/{dev}/{port}");
            assert_eq!(
                value(samples, "railscope_ib_port_info", &labels),
                1.0,
                "{at}"
            );
            if let Some(state) = read(&port_dir.join("state")) {
                let n: f64 = state.split(':').next().unwrap().parse().unwrap();
                assert_eq!(
                    value(samples, "railscope_ib_port_state", &labels),
                    n,
                    "{at} state"
                );
                checked += 1;
            }
            if let Some(phys) = read(&port_dir.join("phys_state")) {
                let n: f64 = phys.split(':').next().unwrap().parse().unwrap();
                assert_eq!(
                    value(samples, "railscope_ib_port_phys_state", &labels),
                    n,
                    "{at} phys_state"
                );
            }
            match read(&port_dir.join("rate")) {
                Some(rate) => {
                    let gbps: f64 = rate.split(' ').next().unwrap().parse().unwrap();
                    let width: f64 = rate
                        .split('(')
                        .nth(1)
                        .unwrap()
                        .split('X')
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert_eq!(
                        value(samples, "railscope_ib_port_rate_bytes_per_second", &labels),
                        gbps * 1e9 / 8.0,
                        "{at} rate"
                    );
                    assert_eq!(
                        value(samples, "railscope_ib_port_link_width_lanes", &labels),
                        width,
                        "{at} width"
                    );
                }
                None => assert!(
                    find(samples, "railscope_ib_port_rate_bytes_per_second", &labels).is_empty(),
                    "{at}: unreadable rate exported"
                ),
            }
            let ext_dir = port_dir.join("counters_ext");
            for counter in files(&port_dir.join("counters")) {
                let text = read(&port_dir.join("counters").join(&counter)).unwrap();
                let legacy64 = read(&ext_dir.join(format!("{counter}_64")));
                let expected = legacy64.as_deref().unwrap_or(&text).parse::<u64>().ok();
                let found: Vec<&Sample> = match pma_family(&counter) {
                    Some((family, direction, _)) => {
                        let mut l = labels.to_vec();
                        if let Some(d) = direction {
                            l.push(("direction", d));
                        }
                        find(samples, family, &l)
                    }
                    None => find(
                        samples,
                        "railscope_ib_port_pma_other_total",
                        &[labels[0], labels[1], ("counter", counter.as_str())],
                    ),
                };
                match expected {
                    Some(v) => {
                        let mult = pma_family(&counter).map_or(1.0, |(_, _, m)| m);
                        assert_eq!(found.len(), 1, "{at} counters/{counter}");
                        assert_eq!(found[0].value, v as f64 * mult, "{at} counters/{counter}");
                    }
                    None => assert!(
                        found.is_empty(),
                        "{at}: unparseable counters/{counter} exported as {found:?}"
                    ),
                }
                checked += 1;
            }
            for counter in files(&port_dir.join("hw_counters"))
                .iter()
                .filter(|c| *c != "lifespan")
            {
                let text = read(&port_dir.join("hw_counters").join(counter)).unwrap();
                let found = find(
                    samples,
                    "railscope_rdma_port_hw_stat_total",
                    &[labels[0], labels[1], ("counter", counter)],
                );
                match text.parse::<u64>() {
                    Ok(v) => {
                        assert_eq!(found.len(), 1, "{at} hw_counters/{counter}");
                        assert_eq!(found[0].value, v as f64, "{at} hw_counters/{counter}");
                    }
                    Err(_) => assert!(
                        found.is_empty(),
                        "{at}: unparseable hw_counters/{counter} exported"
                    ),
                }
                checked += 1;
            }
            let gids_dir = port_dir.join("gids");
            if gids_dir.is_dir() {
                let non_zero: Vec<String> = files(&gids_dir)
                    .into_iter()
                    .filter(|i| {
                        read(&gids_dir.join(i)).unwrap()
                            != "0000:0000:0000:0000:0000:0000:0000:0000"
                    })
                    .collect();
                let exported = find(samples, "railscope_ib_port_gid_info", &labels);
                assert_eq!(exported.len(), non_zero.len(), "{at} GIDs");
                for index in &non_zero {
                    let gid = read(&gids_dir.join(index)).unwrap();
                    let ty =
                        read(&port_dir.join("gid_attrs/types").join(index)).unwrap_or_default();
                    let nd =
                        read(&port_dir.join("gid_attrs/ndevs").join(index)).unwrap_or_default();
                    let l = [
                        labels[0],
                        labels[1],
                        ("index", index.as_str()),
                        ("gid", gid.as_str()),
                        ("type", ty.as_str()),
                        ("netdev", nd.as_str()),
                    ];
                    assert_eq!(
                        find(samples, "railscope_ib_port_gid_info", &l).len(),
                        1,
                        "{at} GID {index}"
                    );
                    checked += 1;
                }
            }
        }
    }
    checked
}

#[test]
fn every_port_and_counter_of_every_tree_is_exported_with_its_value() {
    let mut total = 0;
    for tree in fixture_trees() {
        let agent = Agent::fixture(&tree, &[]);
        let samples = parse_samples(&agent.scrape());
        let checked = check_tree(&tree, &samples);
        assert!(checked > 0, "{tree}: nothing checked");
        total += checked;
    }
    assert!(total > 500, "only {total} values checked");
}

/// hwmon file → family, restated independently of the agent.
const HWMON_FAMILIES: [(&str, &str); 3] = [
    ("input", "railscope_nic_temperature_celsius"),
    ("highest", "railscope_nic_temperature_highest_celsius"),
    ("crit", "railscope_nic_temperature_critical_celsius"),
];

/// Every temperature file of every RDMA device's hwmon device, checked against `/metrics`:
/// a number of millidegrees is its series in degrees, anything else no series. Returns how
/// many files were checked.
fn check_hwmon(tree: &str, samples: &[Sample]) -> usize {
    let class = fixtures().join(tree).join("sys/class/infiniband");
    let mut checked = 0;
    for device in dirs(&class) {
        let hwmon = class.join(&device).join("device/hwmon");
        for dir in dirs(&hwmon) {
            let files = files(&hwmon.join(&dir));
            for file in &files {
                let Some((channel, attr)) = file
                    .strip_prefix("temp")
                    .and_then(|rest| rest.split_once('_'))
                else {
                    continue;
                };
                let Some((_, family)) = HWMON_FAMILIES.iter().find(|(a, _)| *a == attr) else {
                    continue;
                };
                let text = read(&hwmon.join(&dir).join(file)).unwrap();
                let labels = [("device", device.as_str()), ("channel", channel)];
                let found = find(samples, family, &labels);
                let at = format!("{tree}/{device}/{dir}/{file}");
                match text.parse::<i64>() {
                    Ok(milli) => {
                        assert_eq!(found.len(), 1, "{at}");
                        assert_eq!(found[0].value, milli as f64 / 1000.0, "{at}");
                    }
                    Err(_) => assert!(found.is_empty(), "{at}: unparseable {text:?} exported"),
                }
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn every_nic_temperature_of_every_tree_is_exported_in_degrees() {
    let mut total = 0;
    for tree in fixture_trees() {
        let agent = Agent::fixture(&tree, &[]);
        total += check_hwmon(&tree, &parse_samples(&agent.scrape()));
    }
    // Two trees of eight HCAs, two channels of three files each, less one missing threshold.
    assert_eq!(total, 2 * 8 * 2 * 3 - 1);
}

/// The faulty hwmon files of the faults tree cost their own series only: the malformed
/// module reading of mlx5_7 (one error, its threshold and highest still there) and the
/// missing threshold of mlx5_6 (no error).
#[test]
fn a_broken_nic_sensor_file_costs_only_its_own_series() {
    let agent = Agent::fixture("h100-cx7-ndr-ib-faults", &[]);
    let samples = parse_samples(&agent.scrape());
    let module = |device: &'static str| [("device", device), ("sensor", "module0")];
    assert!(
        find(
            &samples,
            "railscope_nic_temperature_celsius",
            &module("mlx5_7")
        )
        .is_empty()
    );
    assert_eq!(
        value(
            &samples,
            "railscope_nic_temperature_critical_celsius",
            &module("mlx5_7")
        ),
        75.0
    );
    assert_eq!(
        value(
            &samples,
            "railscope_nic_temperature_highest_celsius",
            &module("mlx5_7")
        ),
        41.625
    );
    assert!(
        find(
            &samples,
            "railscope_nic_temperature_critical_celsius",
            &module("mlx5_6")
        )
        .is_empty()
    );
    assert_eq!(
        value(
            &samples,
            "railscope_nic_temperature_celsius",
            &module("mlx5_6")
        ),
        37.375
    );
    // Sixteen sensors, one reading lost.
    assert_eq!(
        find(&samples, "railscope_nic_temperature_celsius", &[]).len(),
        15
    );
    assert_eq!(
        value(
            &samples,
            "railscope_collector_last_errors",
            &[("collector", "hwmon")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "railscope_collector_success",
            &[("collector", "hwmon")]
        ),
        1.0
    );
}
