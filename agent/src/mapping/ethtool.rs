//! Maps the `ethtool` source's snapshot to metric families.
//!
//! Names: `railscope_pfc_*` for per-priority flow control (802.1Qbb), `railscope_pause_*` for
//! 802.3x global pause, `railscope_netdev_priority_*` for per-priority traffic, discards and
//! ECN marks, `railscope_netdev_*` for the RoCE-relevant port counters, and
//! `railscope_ethtool_stat_total{stat}` for any other driver statistic `metrics-include` asked
//! for, named as the driver names it. Priorities and directions are labels, never parts of a
//! name; durations are converted from the driver's microseconds to seconds.
//!
//! Global pause has families of its own rather than `priority="global"` in the PFC ones:
//! `priority` is a number 0–7 everywhere (it joins the `dcb` source's per-priority series and
//! `railscope_netdev_priority_*`), global pause stops every priority at once, and
//! `sum by (netdev) (rate(railscope_pfc_pause_frames_total[5m]))` must not mix the two
//! mechanisms.
//!
//! Every family is built once and each known statistic maps to exactly one series of one
//! family, so no driver string can produce a duplicate family; the source already keeps only
//! the first of duplicate names.

use railscope_collectors::sources::ethtool::Snapshot;
use railscope_collectors::sources::ethtool::names::{Cast, Direction, Stat};

use crate::exposition::Family;

/// Index of each family in the vector [`families`] builds.
#[derive(Clone, Copy)]
enum F {
    PfcFrames,
    PfcDuration,
    PfcTransitions,
    PfcStorm,
    PauseFrames,
    PauseDuration,
    PauseTransitions,
    PrioBytes,
    PrioPackets,
    PrioDiscards,
    PrioEcn,
    OutOfBuffer,
    PhyDiscards,
    PhyPause,
    PhyCorrected,
    PhySymbol,
    PhyLinkDown,
    PhyReceivedBits,
    RdmaUnicastPackets,
    RdmaUnicastBytes,
    RdmaMulticastPackets,
    RdmaMulticastBytes,
    EcnMarked,
    Other,
    Reported,
}

/// The families, in output order (the order of [`F`]).
fn empty_families() -> Vec<Family> {
    vec![
        Family::counter(
            "railscope_pfc_pause_frames",
            "PFC (802.1Qbb) pause frames of a priority received (the peer paused us) and sent (we paused the peer), from ethtool rx/tx_prio<N>_pause. Present only for priorities with PFC enabled.",
        ),
        Family::counter(
            "railscope_pfc_pause_duration_seconds",
            "Time a priority was paused by PFC, received and sent, from ethtool rx/tx_prio<N>_pause_duration (microseconds, converted to seconds).",
        ),
        Family::counter(
            "railscope_pfc_pause_transitions",
            "PFC XOFF-to-XON transitions of a priority, from ethtool rx_prio<N>_pause_transition.",
        ),
        Family::counter(
            "railscope_pfc_pause_storm_events",
            "Pause storm events: the device was stalled by pause frames past the warning or the error watermark (ethtool tx_pause_storm_warning_events / tx_pause_storm_error_events); at error the device stops honouring pause.",
        ),
        Family::counter(
            "railscope_pause_frames",
            "802.3x global pause frames received and sent, from ethtool rx/tx_global_pause. Present only while global pause is on.",
        ),
        Family::counter(
            "railscope_pause_duration_seconds",
            "Time paused by 802.3x global pause, from ethtool rx/tx_global_pause_duration (microseconds, converted to seconds).",
        ),
        Family::counter(
            "railscope_pause_transitions",
            "802.3x global pause XOFF-to-XON transitions, from ethtool rx_global_pause_transition.",
        ),
        Family::counter(
            "railscope_netdev_priority_bytes",
            "Bytes of a priority received and sent by the port, from ethtool rx/tx_prio<N>_bytes (older drivers: prio<N>_rx/tx_octets).",
        ),
        Family::counter(
            "railscope_netdev_priority_packets",
            "Packets of a priority received and sent by the port, from ethtool rx/tx_prio<N>_packets (older drivers: prio<N>_rx/tx_frames).",
        ),
        Family::counter(
            "railscope_netdev_priority_discards",
            "Received packets of a priority the port discarded: reason discard (rx_prio<N>_discards), buffer (no receive buffer, rx_prio<N>_buf_discard), congestion (WRED, rx_prio<N>_cong_discard).",
        ),
        Family::counter(
            "railscope_netdev_priority_ecn_marked_packets",
            "Received packets of a priority the port marked ECN congestion experienced, from ethtool rx_prio<N>_marked.",
        ),
        Family::counter(
            "railscope_netdev_out_of_buffer_discards",
            "Packets dropped because the netdev's receive queues had no free descriptor, from ethtool rx_out_of_buffer (Ethernet receive queues, not RDMA QPs).",
        ),
        Family::counter(
            "railscope_netdev_phy_discards",
            "Packets the physical port discarded, received and sent, from ethtool rx/tx_discards_phy (typically for lack of port buffer: a lossless priority without PFC).",
        ),
        Family::counter(
            "railscope_netdev_phy_pause_control_frames",
            "Pause MAC control frames (global and PFC together) received and sent by the physical port, from ethtool rx/tx_pause_ctrl_phy.",
        ),
        Family::counter(
            "railscope_netdev_phy_fec_corrected_bit_errors",
            "Bit errors the physical layer corrected with FEC, from ethtool rx_corrected_bits_phy; a climbing rate is a marginal cable or transceiver.",
        ),
        Family::counter(
            "railscope_netdev_phy_symbol_errors",
            "PCS symbol errors FEC could not correct, from ethtool rx_pcs_symbol_err_phy.",
        ),
        Family::counter(
            "railscope_netdev_phy_link_down_events",
            "Times the physical link went down, from ethtool link_down_events_phy.",
        ),
        Family::counter(
            "railscope_netdev_phy_received_bits",
            "Bits the physical layer received, from ethtool rx_bits_phy (mlx5 phy_received_bits, where the driver has it): the denominator of the pre-FEC bit error rate.",
        ),
        Family::counter(
            "railscope_netdev_rdma_unicast_packets",
            "RDMA unicast packets received and sent by the vport, from ethtool rx/tx_vport_rdma_unicast_packets.",
        ),
        Family::counter(
            "railscope_netdev_rdma_unicast_bytes",
            "RDMA unicast bytes received and sent by the vport, from ethtool rx/tx_vport_rdma_unicast_bytes.",
        ),
        Family::counter(
            "railscope_netdev_rdma_multicast_packets",
            "RDMA multicast packets received and sent by the vport, from ethtool rx/tx_vport_rdma_multicast_packets.",
        ),
        Family::counter(
            "railscope_netdev_rdma_multicast_bytes",
            "RDMA multicast bytes received and sent by the vport, from ethtool rx/tx_vport_rdma_multicast_bytes.",
        ),
        Family::counter(
            "railscope_netdev_ecn_marked_packets",
            "Packets received with ECN congestion experienced on the netdev's receive queues, from ethtool rx_ecn_mark (software counter; RDMA traffic is not seen here).",
        ),
        Family::counter(
            "railscope_ethtool_stat",
            "A driver statistic (ethtool -S) chosen by --collector.ethtool.metrics-include, named as the driver names it, raw value.",
        ),
        Family::gauge(
            "railscope_ethtool_stats",
            "Driver statistics the netdev reported in the last collection (ethtool -S count); present for every netdev read, so a missing PFC series means PFC is off, not that the netdev was not read.",
        ),
    ]
}

/// The family and labels of one known statistic of `netdev`.
fn series(netdev: &str, stat: Stat) -> (F, Vec<(&'static str, String)>) {
    let n = ("netdev", netdev.to_owned());
    let p = |priority: u8| ("priority", priority.to_string());
    let d = |direction: Direction| ("direction", direction.as_str().to_owned());
    match stat {
        Stat::PfcPauseFrames {
            priority,
            direction,
        } => (F::PfcFrames, vec![n, p(priority), d(direction)]),
        Stat::PfcPauseDurationMicros {
            priority,
            direction,
        } => (F::PfcDuration, vec![n, p(priority), d(direction)]),
        Stat::PfcPauseTransitions {
            priority,
            direction,
        } => (F::PfcTransitions, vec![n, p(priority), d(direction)]),
        Stat::PauseStormEvents { level } => {
            (F::PfcStorm, vec![n, ("level", level.as_str().to_owned())])
        }
        Stat::GlobalPauseFrames { direction } => (F::PauseFrames, vec![n, d(direction)]),
        Stat::GlobalPauseDurationMicros { direction } => (F::PauseDuration, vec![n, d(direction)]),
        Stat::GlobalPauseTransitions { direction } => (F::PauseTransitions, vec![n, d(direction)]),
        Stat::PriorityBytes {
            priority,
            direction,
        } => (F::PrioBytes, vec![n, p(priority), d(direction)]),
        Stat::PriorityPackets {
            priority,
            direction,
        } => (F::PrioPackets, vec![n, p(priority), d(direction)]),
        Stat::PriorityDiscards { priority, reason } => (
            F::PrioDiscards,
            vec![n, p(priority), ("reason", reason.as_str().to_owned())],
        ),
        Stat::PriorityEcnMarked { priority } => (F::PrioEcn, vec![n, p(priority)]),
        Stat::OutOfBuffer => (F::OutOfBuffer, vec![n]),
        Stat::PhyDiscards { direction } => (F::PhyDiscards, vec![n, d(direction)]),
        Stat::PhyPauseControlFrames { direction } => (F::PhyPause, vec![n, d(direction)]),
        Stat::PhyCorrectedBits => (F::PhyCorrected, vec![n]),
        Stat::PhySymbolErrors => (F::PhySymbol, vec![n]),
        Stat::PhyLinkDownEvents => (F::PhyLinkDown, vec![n]),
        Stat::PhyReceivedBits => (F::PhyReceivedBits, vec![n]),
        Stat::RdmaPackets { direction, cast } => (
            match cast {
                Cast::Unicast => F::RdmaUnicastPackets,
                Cast::Multicast => F::RdmaMulticastPackets,
            },
            vec![n, d(direction)],
        ),
        Stat::RdmaBytes { direction, cast } => (
            match cast {
                Cast::Unicast => F::RdmaUnicastBytes,
                Cast::Multicast => F::RdmaMulticastBytes,
            },
            vec![n, d(direction)],
        ),
        Stat::EcnMarked => (F::EcnMarked, vec![n]),
    }
}

/// The `ethtool` source's families.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut out = empty_families();
    for netdev in &snapshot.netdevs {
        for (stat, value) in &netdev.known {
            let (family, labels) = series(&netdev.name, *stat);
            // Durations are microseconds, exported as fractional seconds; everything else is
            // an exact count.
            if matches!(family, F::PfcDuration | F::PauseDuration) {
                out[family as usize].push(labels, *value as f64 / 1e6);
            } else {
                out[family as usize].push(labels, *value);
            }
        }
        out[F::Reported as usize].push([("netdev", netdev.name.clone())], netdev.reported as u64);
        for (name, value) in &netdev.other {
            out[F::Other as usize].push(
                [("netdev", netdev.name.clone()), ("stat", name.clone())],
                *value,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use railscope_collectors::sources::ethtool::NetdevStats;
    use railscope_collectors::sources::ethtool::StatsReader;
    use railscope_collectors::sources::ethtool::fake::{FakeEthtool, Reply};

    use super::*;
    use crate::exposition::{Format, Value, encode};

    fn netdev(name: &str, set: &str, include: Option<&str>) -> NetdevStats {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/ethtool");
        let fake = FakeEthtool::new().with(name, vec![Reply::fixture(&dir, set).unwrap()]);
        let include = include.map(|re| regex::Regex::new(re).unwrap());
        NetdevStats::from_raw(name, fake.read(name).unwrap(), include.as_ref())
    }

    fn value(families: &[Family], name: &str, labels: &[(&str, &str)]) -> Option<Value> {
        let family = families.iter().find(|f| f.name == name)?;
        let found: Vec<&Value> = family
            .samples
            .iter()
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv.as_str() == *v))
            })
            .map(|s| &s.value)
            .collect();
        assert!(found.len() <= 1, "{name}{labels:?} matches {found:?}");
        found.first().copied().copied()
    }

    /// Every family name is unique and every series within a family is unique.
    fn assert_no_duplicates(families: &[Family]) {
        let mut names = BTreeSet::new();
        for family in families {
            assert!(
                names.insert(family.name),
                "duplicate family {}",
                family.name
            );
            let mut series = BTreeSet::new();
            for sample in &family.samples {
                assert!(
                    series.insert(format!("{:?}", sample.labels)),
                    "duplicate series {}{:?}",
                    family.name,
                    sample.labels
                );
            }
        }
    }

    #[test]
    fn pfc_on_priority_3_maps_to_labelled_families() {
        let snapshot = Snapshot {
            netdevs: vec![netdev("ens1f0np0", "mlx5-pfc-prio3", None)],
        };
        let f = families(&snapshot);
        assert_no_duplicates(&f);
        let n = ("netdev", "ens1f0np0");
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_frames",
                &[n, ("priority", "3"), ("direction", "rx")]
            ),
            Some(Value::U64(1523))
        );
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_duration_seconds",
                &[n, ("priority", "3"), ("direction", "rx")]
            ),
            Some(Value::F64(2.5))
        );
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_duration_seconds",
                &[n, ("priority", "3"), ("direction", "tx")]
            ),
            Some(Value::F64(0.125))
        );
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_transitions",
                &[n, ("priority", "3"), ("direction", "rx")]
            ),
            Some(Value::U64(761))
        );
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_storm_events",
                &[n, ("level", "warning")]
            ),
            Some(Value::U64(2))
        );
        assert_eq!(
            value(
                &f,
                "railscope_netdev_priority_discards",
                &[n, ("priority", "3"), ("reason", "buffer")]
            ),
            Some(Value::U64(12))
        );
        assert_eq!(
            value(
                &f,
                "railscope_netdev_priority_ecn_marked_packets",
                &[n, ("priority", "3")]
            ),
            Some(Value::U64(314_159))
        );
        assert_eq!(
            value(
                &f,
                "railscope_netdev_phy_discards",
                &[n, ("direction", "rx")]
            ),
            Some(Value::U64(4242))
        );
        assert_eq!(
            value(
                &f,
                "railscope_netdev_rdma_unicast_bytes",
                &[n, ("direction", "tx")]
            ),
            Some(Value::U64(20_070_400_000_000))
        );
        assert!(
            f.iter()
                .find(|f| f.name == "railscope_pause_frames")
                .unwrap()
                .samples
                .is_empty()
        );
        assert!(
            f.iter()
                .find(|f| f.name == "railscope_ethtool_stat")
                .unwrap()
                .samples
                .is_empty()
        );
        // The series count of a typical RoCE netdev at default settings.
        let total: usize = f.iter().map(|f| f.samples.len()).sum();
        assert_eq!(total, 89);
        assert_eq!(
            value(&f, "railscope_ethtool_stats", &[n]),
            Some(Value::U64(187))
        );
    }

    #[test]
    fn global_pause_has_its_own_families() {
        let snapshot = Snapshot {
            netdevs: vec![netdev("p0", "mlx5-global-pause", None)],
        };
        let f = families(&snapshot);
        assert_no_duplicates(&f);
        let n = ("netdev", "p0");
        assert_eq!(
            value(&f, "railscope_pause_frames", &[n, ("direction", "rx")]),
            Some(Value::U64(9001))
        );
        assert_eq!(
            value(
                &f,
                "railscope_pause_duration_seconds",
                &[n, ("direction", "rx")]
            ),
            Some(Value::F64(3.0))
        );
        assert_eq!(
            value(&f, "railscope_pause_transitions", &[n, ("direction", "rx")]),
            Some(Value::U64(4500))
        );
        assert!(
            f.iter()
                .find(|f| f.name == "railscope_pfc_pause_frames")
                .unwrap()
                .samples
                .is_empty()
        );
    }

    #[test]
    fn both_namings_give_the_same_series() {
        let snapshot = Snapshot {
            netdevs: vec![
                netdev("eth2", "mlx5-old-prio-naming", None),
                netdev("ens1f0np0", "mlx5-pfc-prio3-prio4", None),
            ],
        };
        let f = families(&snapshot);
        assert_no_duplicates(&f);
        for netdev in ["eth2", "ens1f0np0"] {
            for direction in ["rx", "tx"] {
                for family in [
                    "railscope_pfc_pause_frames",
                    "railscope_pfc_pause_duration_seconds",
                    "railscope_netdev_priority_bytes",
                    "railscope_netdev_priority_packets",
                ] {
                    assert!(
                        value(
                            &f,
                            family,
                            &[
                                ("netdev", netdev),
                                ("priority", "3"),
                                ("direction", direction)
                            ]
                        )
                        .is_some(),
                        "{family} {netdev} {direction}"
                    );
                }
            }
        }
        assert_eq!(
            value(
                &f,
                "railscope_pfc_pause_frames",
                &[
                    ("netdev", "ens1f0np0"),
                    ("priority", "4"),
                    ("direction", "rx")
                ]
            ),
            Some(Value::U64(40))
        );
    }

    #[test]
    fn other_stats_when_asked() {
        let snapshot = Snapshot {
            netdevs: vec![netdev("ens1f0np0", "mlx5-pfc-prio3", Some("^rx0_|pause"))],
        };
        let f = families(&snapshot);
        assert_no_duplicates(&f);
        let other = f
            .iter()
            .find(|f| f.name == "railscope_ethtool_stat")
            .unwrap();
        let stats: Vec<&str> = other
            .samples
            .iter()
            .map(|s| s.labels[1].1.as_str())
            .collect();
        // Known statistics (rx_prio3_pause, rx_pause_ctrl_phy, rx0_ecn_mark is not one) are
        // exported once, in their own families.
        assert!(stats.contains(&"rx0_packets"));
        assert!(stats.contains(&"rx0_ecn_mark"));
        assert!(!stats.iter().any(|s| s.contains("pause")));
    }

    #[test]
    fn output_passes_the_naming_rules() {
        let snapshot = Snapshot {
            netdevs: vec![
                netdev("ens1f0np0", "mlx5-pfc-prio3", Some(".")),
                netdev("p0", "mlx5-global-pause", None),
            ],
        };
        let f = families(&snapshot);
        let text = encode(f.as_slice(), Format::Prometheus);
        for family in &f {
            assert!(family.name.starts_with("railscope_"));
            assert!(!family.name.contains("counter"));
            assert!(
                !family.name.contains(|c: char| c.is_ascii_digit()),
                "{}",
                family.name
            );
        }
        assert!(text.contains("railscope_pfc_pause_duration_seconds_total{netdev=\"ens1f0np0\",priority=\"3\",direction=\"rx\"} 2.5\n"));
    }
}
