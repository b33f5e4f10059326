//! Property tests of the ethtool statistic names (`names.rs`), the `SIOCETHTOOL` replies
//! (`reader.rs`) and the sorting of a string set into known and other statistics. See
//! [`crate::strategies`] for the two kinds of property.

use proptest::prelude::*;

use super::names::{self, Direction, DiscardReason, Stat, StormLevel};
use super::{NetdevStats, reader};
use crate::strategies::config;

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Rx), Just(Direction::Tx)]
}

fn stat() -> impl Strategy<Value = Stat> {
    use Stat::*;
    let p = 0u8..8;
    prop_oneof![
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseFrames {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseDurationMicros {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseTransitions {
            priority,
            direction
        }),
        direction().prop_map(|direction| GlobalPauseFrames { direction }),
        direction().prop_map(|direction| GlobalPauseDurationMicros { direction }),
        direction().prop_map(|direction| GlobalPauseTransitions { direction }),
        prop_oneof![Just(StormLevel::Warning), Just(StormLevel::Error)]
            .prop_map(|level| PauseStormEvents { level }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PriorityBytes {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PriorityPackets {
            priority,
            direction
        }),
        (
            p.clone(),
            prop_oneof![
                Just(DiscardReason::Discard),
                Just(DiscardReason::Buffer),
                Just(DiscardReason::Congestion)
            ]
        )
            .prop_map(|(priority, reason)| PriorityDiscards { priority, reason }),
        p.clone()
            .prop_map(|priority| PriorityEcnMarked { priority }),
        Just(OutOfBuffer),
        direction().prop_map(|direction| PhyDiscards { direction }),
        direction().prop_map(|direction| PhyPauseControlFrames { direction }),
        Just(PhyCorrectedBits),
        Just(PhySymbolErrors),
        Just(PhyLinkDownEvents),
        Just(PhyReceivedBits),
        (direction(), any::<bool>()).prop_map(|(direction, u)| RdmaPackets {
            direction,
            cast: if u {
                names::Cast::Unicast
            } else {
                names::Cast::Multicast
            },
        }),
        (direction(), any::<bool>()).prop_map(|(direction, u)| RdmaBytes {
            direction,
            cast: if u {
                names::Cast::Unicast
            } else {
                names::Cast::Multicast
            },
        }),
        Just(EcnMarked),
    ]
}

/// Every name mlx5 (current and old schemes) gives `stat`.
fn driver_names(stat: Stat) -> Vec<String> {
    use Stat::*;
    let both = |p: u8, d: Direction, what: &str| {
        let d = d.as_str();
        vec![format!("{d}_prio{p}_{what}"), format!("prio{p}_{d}_{what}")]
    };
    let cast = |c: names::Cast| match c {
        names::Cast::Unicast => "unicast",
        names::Cast::Multicast => "multicast",
    };
    match stat {
        PfcPauseFrames {
            priority,
            direction,
        } => both(priority, direction, "pause"),
        PfcPauseDurationMicros {
            priority,
            direction,
        } => both(priority, direction, "pause_duration"),
        PfcPauseTransitions {
            priority,
            direction,
        } => both(priority, direction, "pause_transition"),
        GlobalPauseFrames { direction } => vec![format!("{}_global_pause", direction.as_str())],
        GlobalPauseDurationMicros { direction } => {
            vec![format!("{}_global_pause_duration", direction.as_str())]
        }
        GlobalPauseTransitions { direction } => {
            vec![format!("{}_global_pause_transition", direction.as_str())]
        }
        PauseStormEvents { level } => vec![format!("tx_pause_storm_{}_events", level.as_str())],
        PriorityBytes {
            priority,
            direction,
        } => {
            let mut v = both(priority, direction, "bytes");
            v.push(format!("prio{priority}_{}_octets", direction.as_str()));
            v
        }
        PriorityPackets {
            priority,
            direction,
        } => {
            let mut v = both(priority, direction, "packets");
            v.push(format!("prio{priority}_{}_frames", direction.as_str()));
            v
        }
        PriorityDiscards { priority, reason } => vec![format!(
            "rx_prio{priority}_{}",
            match reason {
                DiscardReason::Discard => "discards",
                DiscardReason::Buffer => "buf_discard",
                DiscardReason::Congestion => "cong_discard",
            }
        )],
        PriorityEcnMarked { priority } => vec![format!("rx_prio{priority}_marked")],
        OutOfBuffer => vec!["rx_out_of_buffer".into()],
        PhyDiscards { direction } => vec![format!("{}_discards_phy", direction.as_str())],
        PhyPauseControlFrames { direction } => {
            vec![format!("{}_pause_ctrl_phy", direction.as_str())]
        }
        PhyCorrectedBits => vec!["rx_corrected_bits_phy".into()],
        PhySymbolErrors => vec!["rx_pcs_symbol_err_phy".into()],
        PhyLinkDownEvents => vec!["link_down_events_phy".into()],
        PhyReceivedBits => vec!["rx_bits_phy".into()],
        RdmaPackets { direction, cast: c } => {
            vec![format!(
                "{}_vport_rdma_{}_packets",
                direction.as_str(),
                cast(c)
            )]
        }
        RdmaBytes { direction, cast: c } => {
            vec![format!(
                "{}_vport_rdma_{}_bytes",
                direction.as_str(),
                cast(c)
            )]
        }
        EcnMarked => vec!["rx_ecn_mark".into()],
    }
}

/// Names built from the words the real ones are made of.
fn statish() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "rx",
        "tx",
        "prio0",
        "prio3",
        "prio7",
        "prio8",
        "prio",
        "prio03",
        "global",
        "pause",
        "duration",
        "transition",
        "bytes",
        "packets",
        "octets",
        "frames",
        "discards",
        "buf",
        "cong",
        "discard",
        "marked",
        "vport",
        "rdma",
        "unicast",
        "multicast",
        "phy",
        "storm",
        "warning",
        "error",
        "events",
        "out",
        "of",
        "buffer",
        "ecn",
        "mark",
        "",
        " ",
        "é",
    ]);
    (prop::collection::vec(words, 1..7), "[ \t]{0,2}").prop_map(|(w, pad)| w.join("_") + &pad)
}

/// A string set as `ETHTOOL_GSTRINGS` returns it.
fn gstrings(names: &[String], extra_len: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x1bu32.to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes());
    b.extend_from_slice(&(names.len() as u32 + extra_len).to_ne_bytes());
    for n in names {
        let mut raw = n.as_bytes().to_vec();
        raw.resize(32, 0);
        b.extend_from_slice(&raw);
    }
    b
}

/// A name of at most 32 bytes without NUL or surrounding whitespace, as drivers write them.
fn gstring() -> impl Strategy<Value = String> {
    "[^\u{0}\\s]([^\u{0}]{0,20}[^\u{0}\\s])?".prop_filter("32 bytes", |s| s.len() <= 32)
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn stat_names_never_panic(name in prop_oneof![any::<String>(), statish()]) {
        if let Some(stat) = names::parse(&name) {
            // Only the driver's names mean something, with surrounding whitespace trimmed.
            prop_assert!(driver_names(stat).contains(&name.trim().to_owned()),
                "{:?} parsed as {:?}", name, stat);
        }
    }

    #[test]
    fn stat_names_round_trip(stat in stat(), trailing_space in any::<bool>()) {
        for name in driver_names(stat) {
            let name = if trailing_space { name + " " } else { name };
            prop_assert_eq!(names::parse(&name), Some(stat), "{:?}", name);
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn ethtool_replies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(strings) = reader::parse_strings(&bytes) {
            prop_assert!(strings.iter().all(|s| s.len() <= 32 * 3));
        }
        if let Ok(stats) = reader::parse_stats(&bytes) {
            prop_assert!(stats.len() * 8 <= bytes.len());
        }
    }

    #[test]
    fn string_sets_round_trip(names in prop::collection::vec(gstring(), 0..20), trailing in 0usize..64) {
        let mut bytes = gstrings(&names, 0);
        bytes.extend(std::iter::repeat_n(0xee, trailing));
        prop_assert_eq!(reader::parse_strings(&bytes).unwrap(), names);
    }

    #[test]
    fn string_sets_longer_than_the_reply_are_errors(names in prop::collection::vec(gstring(), 0..8), more in 1u32..) {
        prop_assert!(reader::parse_strings(&gstrings(&names, more)).is_err());
    }

    #[test]
    fn stat_values_round_trip(values in prop::collection::vec(any::<u64>(), 0..40), lie in 0u32..3) {
        let mut b = 0x1du32.to_ne_bytes().to_vec();
        b.extend_from_slice(&(values.len() as u32 + lie).to_ne_bytes());
        for v in &values {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        match reader::parse_stats(&b) {
            Ok(got) => prop_assert!(lie == 0 && got == values),
            Err(_) => prop_assert!(lie > 0),
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    /// A driver's string set, duplicates and odd names included, is sorted into known
    /// statistics (each once, first value wins) and, when asked for, others (each once).
    #[test]
    fn string_sets_sort_into_known_and_other(
        raw in prop::collection::vec(
            (prop_oneof![statish(), stat().prop_map(|s| driver_names(s)[0].clone()), any::<String>()], any::<u64>()),
            0..24,
        ),
        include in prop::option::of(0usize..5),
    ) {
        // Compiled once: a regex build per case would dominate the run time.
        static PATTERNS: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
        let patterns = PATTERNS.get_or_init(|| {
            ["", "^rx", "phy", "[,\" ]", "^$"].iter().map(|p| regex::Regex::new(p).unwrap()).collect()
        });
        let re = include.map(|i| &patterns[i]);
        let stats = NetdevStats::from_raw("e\"0", raw.clone(), re);
        prop_assert_eq!(stats.reported, raw.len());
        let mut want_known: Vec<(Stat, u64)> = Vec::new();
        let mut want_other: Vec<(String, u64)> = Vec::new();
        for (name, value) in &raw {
            match names::parse(name) {
                Some(stat) if !want_known.iter().any(|(s, _)| *s == stat) => want_known.push((stat, *value)),
                Some(_) => {}
                None if re.is_some_and(|re| re.is_match(name))
                    && !want_other.iter().any(|(n, _)| n == name) => want_other.push((name.clone(), *value)),
                None => {}
            }
        }
        prop_assert_eq!(stats.known, want_known);
        prop_assert_eq!(stats.other, want_other);
    }
}
