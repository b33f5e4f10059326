//! Source tests over the byte fixtures in `tests/fixtures/ethtool/`, served by [`FakeEthtool`],
//! and over small trees of `/sys/class/net` written in a temporary directory.

use crate::source::OptionValues;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fake::{FakeEthtool, Reply, set_of};
use super::names::{Direction, Stat, StormLevel};
use super::reader::{Error, StatsReader, parse_stats, parse_strings};
use super::*;
use crate::fs::RealFs;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ethtool")
}

fn fixture(name: &str) -> Reply {
    Reply::fixture(&fixtures(), name).unwrap()
}

fn known(stats: &NetdevStats, stat: Stat) -> Option<u64> {
    stats
        .known
        .iter()
        .find(|(s, _)| *s == stat)
        .map(|(_, v)| *v)
}

const RX: Direction = Direction::Rx;
const TX: Direction = Direction::Tx;

#[test]
fn string_tables_parse_as_the_kernel_writes_them() {
    for set in [
        "mlx5-pfc-prio3",
        "mlx5-pfc-prio3-prio4",
        "mlx5-global-pause",
        "mlx5-old-prio-naming",
    ] {
        let strings = std::fs::read(fixtures().join(format!("{set}.gstrings"))).unwrap();
        let stats = std::fs::read(fixtures().join(format!("{set}.gstats"))).unwrap();
        let names = parse_strings(&strings).unwrap();
        let values = parse_stats(&stats).unwrap();
        assert_eq!(names.len(), values.len(), "{set}");
        assert_eq!(names[0], "rx_packets", "{set}");
        // The review copy agrees name for name.
        let text = std::fs::read_to_string(fixtures().join(format!("{set}.txt"))).unwrap();
        let printed: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.trim_start().rsplit_once(": ").unwrap().0.trim())
            .collect();
        assert_eq!(printed, names, "{set}");
    }
}

#[test]
fn truncated_replies_are_malformed() {
    let Reply::Set { strings, stats } = set_of(&[("a", 1), ("b", 2)]) else {
        unreachable!()
    };
    assert!(parse_strings(&strings[..strings.len() - 1]).is_err());
    assert!(parse_strings(&strings[..5]).is_err());
    assert!(parse_stats(&stats[..stats.len() - 8]).is_err());
    // A 32-byte name has no NUL and is read whole.
    let long = "x".repeat(32);
    let Reply::Set { strings, .. } = set_of(&[(long.as_str(), 1)]) else {
        unreachable!()
    };
    assert_eq!(parse_strings(&strings).unwrap(), [long]);
}

#[test]
fn pfc_on_priority_3() {
    let fake = FakeEthtool::new().with("ens1f0np0", vec![fixture("mlx5-pfc-prio3")]);
    let raw = fake.read("ens1f0np0").unwrap();
    let stats = NetdevStats::from_raw("ens1f0np0", raw, None);
    assert_eq!(stats.reported, 187);
    assert!(stats.other.is_empty());
    let pause = |priority, direction| {
        known(
            &stats,
            Stat::PfcPauseFrames {
                priority,
                direction,
            },
        )
    };
    assert_eq!(pause(3, RX), Some(1523));
    assert_eq!(pause(3, TX), Some(88));
    assert_eq!(pause(4, RX), None);
    assert_eq!(
        known(
            &stats,
            Stat::PfcPauseDurationMicros {
                priority: 3,
                direction: RX
            }
        ),
        Some(2_500_000)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PauseStormEvents {
                level: StormLevel::Warning
            }
        ),
        Some(2)
    );
    assert_eq!(known(&stats, Stat::OutOfBuffer), Some(17));
    assert_eq!(
        known(&stats, Stat::GlobalPauseFrames { direction: RX }),
        None
    );
    // 5 PFC + 2 storm + 8×5 traffic + 8×3 buffer/congestion + 17 port counters.
    assert_eq!(stats.known.len(), 5 + 2 + 40 + 24 + 17);
}

#[test]
fn pfc_on_priorities_3_and_4() {
    let fake = FakeEthtool::new().with("ens1f0np0", vec![fixture("mlx5-pfc-prio3-prio4")]);
    let stats = NetdevStats::from_raw("ens1f0np0", fake.read("ens1f0np0").unwrap(), None);
    assert_eq!(stats.reported, 192);
    assert_eq!(
        known(
            &stats,
            Stat::PfcPauseTransitions {
                priority: 4,
                direction: RX
            }
        ),
        Some(20)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PfcPauseFrames {
                priority: 3,
                direction: RX
            }
        ),
        Some(1523)
    );
    // Names after the PFC group moved by five and still carry their own values.
    assert_eq!(
        known(&stats, Stat::PriorityEcnMarked { priority: 3 }),
        Some(314_159)
    );
}

#[test]
fn global_pause_and_the_trailing_space() {
    let fake = FakeEthtool::new().with("p0", vec![fixture("mlx5-global-pause")]);
    let raw = fake.read("p0").unwrap();
    assert!(
        raw.iter()
            .any(|(n, _)| n == "tx_pause_storm_warning_events")
    );
    let stats = NetdevStats::from_raw("p0", raw, None);
    assert_eq!(
        known(&stats, Stat::GlobalPauseFrames { direction: RX }),
        Some(9001)
    );
    assert_eq!(
        known(&stats, Stat::GlobalPauseDurationMicros { direction: TX }),
        Some(700)
    );
    assert_eq!(
        known(&stats, Stat::GlobalPauseTransitions { direction: RX }),
        Some(4500)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PauseStormEvents {
                level: StormLevel::Warning
            }
        ),
        Some(2)
    );
    assert!(
        !stats
            .known
            .iter()
            .any(|(s, _)| matches!(s, Stat::PfcPauseFrames { .. }))
    );
}

#[test]
fn old_prio_naming() {
    let fake = FakeEthtool::new().with("eth2", vec![fixture("mlx5-old-prio-naming")]);
    let stats = NetdevStats::from_raw("eth2", fake.read("eth2").unwrap(), None);
    assert_eq!(
        known(
            &stats,
            Stat::PfcPauseFrames {
                priority: 3,
                direction: RX
            }
        ),
        Some(321)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PfcPauseDurationMicros {
                priority: 3,
                direction: TX
            }
        ),
        Some(2_400)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PriorityBytes {
                priority: 3,
                direction: RX
            }
        ),
        Some(1_024_000_000)
    );
    assert_eq!(
        known(
            &stats,
            Stat::PriorityPackets {
                priority: 3,
                direction: TX
            }
        ),
        Some(500_000)
    );
}

/// Both kernel behaviours: with the count check (default) and without it.
fn kernels() -> [FakeEthtool; 2] {
    [FakeEthtool::new(), FakeEthtool::new().older_kernel()]
}

#[test]
fn a_set_that_changes_size_between_two_reads_is_read_again() {
    // GSSET_INFO and GSTRINGS see PFC on priority 3; GSTATS already sees priorities 3 and 4.
    let a = fixture("mlx5-pfc-prio3");
    let b = fixture("mlx5-pfc-prio3-prio4");
    for fake in kernels() {
        let fake = fake.with("ens1f0np0", vec![a.clone(), a.clone(), b.clone()]);
        let stats = NetdevStats::from_raw("ens1f0np0", fake.read("ens1f0np0").unwrap(), None);
        assert_eq!(stats.reported, 192);
        assert_eq!(
            known(
                &stats,
                Stat::PfcPauseFrames {
                    priority: 4,
                    direction: RX
                }
            ),
            Some(40)
        );
    }
}

#[test]
fn a_set_that_changes_between_gsset_info_and_gstrings_is_read_again() {
    let a = fixture("mlx5-pfc-prio3");
    let b = fixture("mlx5-pfc-prio3-prio4");
    for fake in kernels() {
        let fake = fake.with("ens1f0np0", vec![a.clone(), b.clone()]);
        assert_eq!(fake.read("ens1f0np0").unwrap().len(), 192);
    }
}

#[test]
fn a_set_that_shrinks_between_two_reads_is_read_again() {
    let a = fixture("mlx5-pfc-prio3-prio4");
    let b = fixture("mlx5-pfc-prio3");
    for fake in kernels() {
        let fake = fake.with("ens1f0np0", vec![a.clone(), a.clone(), b.clone()]);
        assert_eq!(fake.read("ens1f0np0").unwrap().len(), 187);
    }
}

#[test]
fn a_set_that_outgrows_the_buffer_faults_and_is_read_again() {
    let small = set_of(&[("rx_prio3_pause", 1)]);
    let many: Vec<(String, u64)> = (0..200).map(|i| (format!("s{i}"), i)).collect();
    let many: Vec<(&str, u64)> = many.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let big = set_of(&many);
    for fake in kernels() {
        let fake = fake.with("eth0", vec![small.clone(), big.clone()]);
        assert_eq!(fake.read("eth0").unwrap().len(), 200);
    }
}

#[test]
fn a_set_that_keeps_changing_is_an_error_for_that_netdev() {
    let a = fixture("mlx5-pfc-prio3");
    let b = fixture("mlx5-pfc-prio3-prio4");
    let timeline = vec![a.clone(), a.clone(), b.clone(), a.clone(), a, b];
    let [checked, older] = kernels();
    let err = checked
        .with("ens1f0np0", timeline.clone())
        .read("ens1f0np0")
        .unwrap_err();
    assert!(matches!(err, Error::SetChanged { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "Stats of ens1f0np0 changed while being read, twice: ETHTOOL_GSTRINGS gave 187 names, ETHTOOL_GSTATS 0 values"
    );
    let err = older
        .with("ens1f0np0", timeline)
        .read("ens1f0np0")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Stats of ens1f0np0 changed while being read, twice: ETHTOOL_GSTRINGS gave 187 names, ETHTOOL_GSTATS 192 values"
    );
}

#[test]
fn errors_name_the_netdev_and_the_ioctl() {
    let fake = FakeEthtool::new().with("eth0", vec![set_of(&[("a", 1)]), Reply::Errno(libc::EIO)]);
    let err = fake.read("eth0").unwrap_err();
    assert_eq!(err.errno(), Some(libc::EIO));
    assert!(
        err.to_string()
            .starts_with("Failed to read names of stats using ETHTOOL_GSTRINGS on eth0: "),
        "{err}"
    );
    let fake = FakeEthtool::new().with(
        "eth0",
        vec![
            set_of(&[("a", 1)]),
            set_of(&[("a", 1)]),
            Reply::Errno(libc::EBUSY),
        ],
    );
    let err = fake.read("eth0").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Failed to read values of stats using ETHTOOL_GSTATS on eth0: "),
        "{err}"
    );
}

#[test]
fn no_stats_is_not_an_error() {
    let fake = FakeEthtool::new().with("lo", vec![Reply::Errno(libc::EOPNOTSUPP)]);
    assert_eq!(fake.read("lo").unwrap(), vec![]);
    let fake = FakeEthtool::new().with("dummy0", vec![set_of(&[])]);
    assert_eq!(fake.read("dummy0").unwrap(), vec![]);
}

#[test]
fn other_stats_only_when_asked_and_never_twice() {
    let raw = vec![
        ("rx_prio3_pause".to_owned(), 1),
        ("prio3_rx_pause".to_owned(), 2),
        ("peer_ifindex".to_owned(), 7),
        ("peer_ifindex".to_owned(), 8),
        ("rx_queue_0_xdp_packets".to_owned(), 9),
    ];
    let stats = NetdevStats::from_raw("veth0", raw.clone(), None);
    assert_eq!(
        stats.known,
        vec![(
            Stat::PfcPauseFrames {
                priority: 3,
                direction: RX
            },
            1
        )]
    );
    assert!(stats.other.is_empty());
    let include = Regex::new("peer|pause").unwrap();
    let stats = NetdevStats::from_raw("veth0", raw, Some(&include));
    assert_eq!(stats.other, vec![("peer_ifindex".to_owned(), 7)]);
}

/// A `/sys/class/net` with `names`; those in `physical` get a `device` link.
fn net_tree(names: &[&str], physical: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let class = dir.path().join("class/net");
    for name in names {
        std::fs::create_dir_all(class.join(name)).unwrap();
        if physical.contains(name) {
            std::os::unix::fs::symlink(
                "../../../devices/pci0000:00",
                class.join(name).join("device"),
            )
            .unwrap();
        }
    }
    dir
}

fn source(dir: &Path, options: &[(&str, &str)], reader: FakeEthtool) -> EthtoolSource {
    let roots = Roots {
        sysfs: dir.to_path_buf(),
        procfs: dir.join("proc"),
    };
    let options: OptionValues = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    EthtoolSource::new(
        &roots,
        Arc::new(RealFs),
        NetdevFilter::from_options(&options).unwrap(),
        regex_option(&options, "metrics-include").unwrap(),
        Arc::new(reader),
    )
}

fn snapshot(report: &Report<Snapshot>) -> &Snapshot {
    report.data.as_ref().expect("data")
}

#[test]
fn default_selection_reads_physical_netdevs_only() {
    let tree = net_tree(&["ens1f0np0", "lo", "veth0"], &["ens1f0np0"]);
    let fake = FakeEthtool::new()
        .with("ens1f0np0", vec![fixture("mlx5-pfc-prio3")])
        .with("veth0", vec![set_of(&[("peer_ifindex", 5)])])
        .with("lo", vec![Reply::Errno(libc::EOPNOTSUPP)]);
    let report = source(tree.path(), &[("metrics-include", ".")], fake).read();
    assert!(report.errors.is_empty());
    assert!(report.absent.is_none());
    let names: Vec<&str> = snapshot(&report)
        .netdevs
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["ens1f0np0"]);
}

#[test]
fn include_and_exclude_choose_the_netdevs() {
    let tree = net_tree(&["ens1f0np0", "veth0", "veth1"], &["ens1f0np0"]);
    let fake = FakeEthtool::new()
        .with("veth0", vec![set_of(&[("peer_ifindex", 5)])])
        .with("veth1", vec![set_of(&[("peer_ifindex", 4)])]);
    let report = source(
        tree.path(),
        &[
            ("device-include", "^veth"),
            ("device-exclude", "1$"),
            ("metrics-include", "^peer_ifindex$"),
        ],
        fake,
    )
    .read();
    let snap = snapshot(&report);
    assert_eq!(snap.netdevs.len(), 1);
    assert_eq!(snap.netdevs[0].name, "veth0");
    assert_eq!(snap.netdevs[0].other, vec![("peer_ifindex".to_owned(), 5)]);
}

#[test]
fn a_failing_netdev_costs_only_its_own_series() {
    let tree = net_tree(&["ens1f0np0", "ens1f1np1"], &["ens1f0np0", "ens1f1np1"]);
    let fake = FakeEthtool::new()
        .with("ens1f0np0", vec![Reply::Errno(libc::EIO)])
        .with("ens1f1np1", vec![fixture("mlx5-pfc-prio3")]);
    let report = source(tree.path(), &[], fake).read();
    assert_eq!(report.errors.len(), 1);
    let err = &report.errors[0];
    assert_eq!(err.device.as_deref(), Some("ens1f0np0"));
    assert_eq!(err.errno, Some(libc::EIO));
    assert_eq!(
        err.origin,
        crate::error::Origin::Ioctl {
            netdev: "ens1f0np0".into(),
            command: "ETHTOOL_GSSET_INFO"
        }
    );
    assert_eq!(snapshot(&report).netdevs[0].name, "ens1f1np1");
}

#[test]
fn netdevs_of_another_namespace_are_absent_not_errors() {
    // A fixture sysfs whose netdevs do not exist here: every read is ENODEV.
    let tree = net_tree(&["ens1f0np0", "ens1f1np1"], &["ens1f0np0", "ens1f1np1"]);
    let report = source(tree.path(), &[], FakeEthtool::new()).read();
    assert!(report.errors.is_empty());
    assert!(snapshot(&report).netdevs.is_empty());
    assert!(report.absent.unwrap().contains("ENODEV"));
    // One missing among present ones is neither.
    let fake = FakeEthtool::new().with("ens1f1np1", vec![fixture("mlx5-pfc-prio3")]);
    let report = source(tree.path(), &[], fake).read();
    assert!(report.errors.is_empty());
    assert!(report.absent.is_none());
}

#[test]
fn the_metrics_include_option_is_registered_and_validated() {
    assert_eq!(SPEC.name, "ethtool");
    let names: Vec<&str> = SPEC.options.iter().map(|o| o.name).collect();
    assert_eq!(
        names,
        ["device-include", "device-exclude", "metrics-include"]
    );
    let roots = Roots::default();
    let mut options = OptionValues::new();
    options.insert("metrics-include", "(");
    let err = EthtoolSource::build(&crate::source::Build {
        roots: &roots,
        fs: Arc::new(RealFs),
        options: &options,
    })
    .unwrap_err();
    assert_eq!(err.option, "metrics-include");
}

#[test]
fn the_real_reader_reads_nothing_from_loopback() {
    assert_eq!(IoctlReader.read("lo").unwrap(), vec![]);
    let err = IoctlReader.read("rs-none-such0").unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENODEV));
    assert!(
        err.to_string().starts_with(
            "Failed to read the number of stats using ETHTOOL_GSSET_INFO on rs-none-such0"
        ),
        "{err}"
    );
}
