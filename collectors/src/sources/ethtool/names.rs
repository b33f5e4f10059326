//! What a driver statistic's name means: a pure parser from `ethtool -S` names to [`Stat`].
//!
//! It knows the mlx5 names (`drivers/net/ethernet/mellanox/mlx5/core/en_stats.c`, documented
//! in `Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst`) that a
//! RoCE fabric needs: per-priority PFC pause frames, durations and transitions, pause storm
//! events, 802.3x global pause, per-priority traffic, discards and ECN marks, and a handful of
//! port counters. Both naming schemes are accepted: `rx_prio3_pause` (`"rx_%s_pause"` with
//! `prio%d`, kernels since v4.10-ish and current MLNX_OFED) and the older `prio3_rx_pause`
//! (`"prio%d_%s"` in `en_ethtool.c` of v4.8-era kernels and MLNX_OFED 3.x, whose traffic counters
//! were `prio3_rx_octets` / `prio3_rx_frames`). Names are trimmed first: one kernel release
//! shipped `"tx_pause_storm_warning_events "` with a trailing space.
//!
//! A name this module does not know is `None`; the source passes it through untouched only
//! when `metrics-include` asks for it.

/// Which way a counted frame or byte went, seen from the netdev.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Received.
    Rx,
    /// Transmitted.
    Tx,
}

impl Direction {
    /// `rx` or `tx`, the `direction` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        }
    }

    fn parse(s: &str) -> Option<Direction> {
        match s {
            "rx" => Some(Direction::Rx),
            "tx" => Some(Direction::Tx),
            _ => None,
        }
    }
}

/// Why a received packet of a priority was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DiscardReason {
    /// `rx_prio<N>_discards`: discarded by the port for this priority (PPCNT per-priority
    /// `rx_discards`).
    Discard,
    /// `rx_prio<N>_buf_discard`: no receive buffer for this priority (`no_buffer_discard_uc`).
    Buffer,
    /// `rx_prio<N>_cong_discard`: dropped by WRED congestion control (`wred_discard`).
    Congestion,
}

impl DiscardReason {
    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscardReason::Discard => "discard",
            DiscardReason::Buffer => "buffer",
            DiscardReason::Congestion => "congestion",
        }
    }
}

/// How bad a pause storm was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StormLevel {
    /// `tx_pause_storm_warning_events`: the device stalled past the minor watermark.
    Warning,
    /// `tx_pause_storm_error_events`: past the critical watermark; the device stops sending
    /// pause frames (storm prevention).
    Error,
}

impl StormLevel {
    /// The `level` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StormLevel::Warning => "warning",
            StormLevel::Error => "error",
        }
    }
}

/// Unicast or multicast RDMA traffic of the vport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cast {
    /// `*_vport_rdma_unicast_*`.
    Unicast,
    /// `*_vport_rdma_multicast_*`.
    Multicast,
}

/// A driver statistic railscope knows the meaning of. Priorities are 0–7 (PCP values);
/// values are raw: durations stay in the microseconds the driver counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stat {
    /// PFC pause frames of a priority (`rx_prio3_pause`, `prio3_rx_pause`).
    PfcPauseFrames {
        /// Priority 0–7.
        priority: u8,
        /// Received (pauses us) or sent (we paused the peer).
        direction: Direction,
    },
    /// Time a priority was paused, microseconds (`rx_prio3_pause_duration`).
    PfcPauseDurationMicros {
        /// Priority 0–7.
        priority: u8,
        /// Direction.
        direction: Direction,
    },
    /// XOFF→XON transitions of a priority (`rx_prio3_pause_transition`).
    PfcPauseTransitions {
        /// Priority 0–7.
        priority: u8,
        /// Direction (mlx5 has only `rx`).
        direction: Direction,
    },
    /// 802.3x global pause frames (`rx_global_pause`).
    GlobalPauseFrames {
        /// Direction.
        direction: Direction,
    },
    /// Time paused by 802.3x global pause, microseconds (`rx_global_pause_duration`).
    GlobalPauseDurationMicros {
        /// Direction.
        direction: Direction,
    },
    /// 802.3x global pause XOFF→XON transitions (`rx_global_pause_transition`).
    GlobalPauseTransitions {
        /// Direction.
        direction: Direction,
    },
    /// Pause storm events (`tx_pause_storm_warning_events`, `tx_pause_storm_error_events`).
    PauseStormEvents {
        /// Warning or error watermark.
        level: StormLevel,
    },
    /// Bytes of a priority (`rx_prio3_bytes`, old `prio3_rx_octets`).
    PriorityBytes {
        /// Priority 0–7.
        priority: u8,
        /// Direction.
        direction: Direction,
    },
    /// Packets of a priority (`rx_prio3_packets`, old `prio3_rx_frames`).
    PriorityPackets {
        /// Priority 0–7.
        priority: u8,
        /// Direction.
        direction: Direction,
    },
    /// Received packets of a priority discarded (`rx_prio3_discards`, `_buf_discard`,
    /// `_cong_discard`).
    PriorityDiscards {
        /// Priority 0–7.
        priority: u8,
        /// Why.
        reason: DiscardReason,
    },
    /// Received packets of a priority the port marked ECN CE (`rx_prio3_marked`).
    PriorityEcnMarked {
        /// Priority 0–7.
        priority: u8,
    },
    /// `rx_out_of_buffer`: packets dropped because the netdev's receive queues had no
    /// descriptor (Q counter of the Ethernet RQs, not of RDMA QPs).
    OutOfBuffer,
    /// `rx_discards_phy` / `tx_discards_phy`: packets the port discarded (RFC 2863
    /// ifIn/OutDiscards), typically for lack of port buffer.
    PhyDiscards {
        /// Direction.
        direction: Direction,
    },
    /// `rx_pause_ctrl_phy` / `tx_pause_ctrl_phy`: every pause MAC control frame, global or
    /// PFC (802.3 aPAUSEMACCtrlFrames).
    PhyPauseControlFrames {
        /// Direction.
        direction: Direction,
    },
    /// `rx_corrected_bits_phy`: bits FEC corrected.
    PhyCorrectedBits,
    /// `rx_pcs_symbol_err_phy`: PCS symbol errors FEC could not correct.
    PhySymbolErrors,
    /// `link_down_events_phy`: times the physical link went down.
    PhyLinkDownEvents,
    /// `rx_bits_phy`: bits the PHY received (mlx5 PPCNT `phy_received_bits`; MLNX_OFED and
    /// newer kernels): the denominator of the pre-FEC bit error rate.
    PhyReceivedBits,
    /// `rx_vport_rdma_unicast_packets` and friends: RDMA packets of the vport.
    RdmaPackets {
        /// Direction.
        direction: Direction,
        /// Unicast or multicast.
        cast: Cast,
    },
    /// `rx_vport_rdma_unicast_bytes` and friends: RDMA bytes of the vport.
    RdmaBytes {
        /// Direction.
        direction: Direction,
        /// Unicast or multicast.
        cast: Cast,
    },
    /// `rx_ecn_mark`: packets received with ECN CE on the netdev's receive queues (software
    /// counter; RDMA traffic is not seen here).
    EcnMarked,
}

/// The fixed names, trimmed.
const FIXED: &[(&str, Stat)] = &[
    (
        "tx_pause_storm_warning_events",
        Stat::PauseStormEvents {
            level: StormLevel::Warning,
        },
    ),
    (
        "tx_pause_storm_error_events",
        Stat::PauseStormEvents {
            level: StormLevel::Error,
        },
    ),
    ("rx_out_of_buffer", Stat::OutOfBuffer),
    (
        "rx_discards_phy",
        Stat::PhyDiscards {
            direction: Direction::Rx,
        },
    ),
    (
        "tx_discards_phy",
        Stat::PhyDiscards {
            direction: Direction::Tx,
        },
    ),
    (
        "rx_pause_ctrl_phy",
        Stat::PhyPauseControlFrames {
            direction: Direction::Rx,
        },
    ),
    (
        "tx_pause_ctrl_phy",
        Stat::PhyPauseControlFrames {
            direction: Direction::Tx,
        },
    ),
    ("rx_corrected_bits_phy", Stat::PhyCorrectedBits),
    ("rx_pcs_symbol_err_phy", Stat::PhySymbolErrors),
    ("link_down_events_phy", Stat::PhyLinkDownEvents),
    ("rx_bits_phy", Stat::PhyReceivedBits),
    ("rx_ecn_mark", Stat::EcnMarked),
];

/// What the driver statistic `name` is, when railscope knows it.
pub fn parse(name: &str) -> Option<Stat> {
    let name = name.trim();
    if let Some((_, stat)) = FIXED.iter().find(|(n, _)| *n == name) {
        return Some(*stat);
    }
    vport_rdma(name)
        .or_else(|| new_scheme(name))
        .or_else(|| old_scheme(name))
}

/// `{rx,tx}_vport_rdma_{unicast,multicast}_{packets,bytes}`.
fn vport_rdma(name: &str) -> Option<Stat> {
    let (dir, rest) = name.split_once('_')?;
    let direction = Direction::parse(dir)?;
    let rest = rest.strip_prefix("vport_rdma_")?;
    let (cast, unit) = rest.split_once('_')?;
    let cast = match cast {
        "unicast" => Cast::Unicast,
        "multicast" => Cast::Multicast,
        _ => return None,
    };
    match unit {
        "packets" => Some(Stat::RdmaPackets { direction, cast }),
        "bytes" => Some(Stat::RdmaBytes { direction, cast }),
        _ => None,
    }
}

/// A PFC priority `0`–`7` written as decimal digits.
fn priority(digits: &str) -> Option<u8> {
    match digits.as_bytes() {
        [d @ b'0'..=b'7'] => Some(d - b'0'),
        _ => None,
    }
}

/// Splits `prio<N>_<rest>`.
fn prio_prefix(s: &str) -> Option<(u8, &str)> {
    let rest = s.strip_prefix("prio")?;
    let (digits, rest) = rest.split_once('_')?;
    Some((priority(digits)?, rest))
}

/// The pause statistics shared by both schemes and by `global`.
fn pause(priority: Option<u8>, direction: Direction, what: &str) -> Option<Stat> {
    Some(match (priority, what) {
        (Some(priority), "pause") => Stat::PfcPauseFrames {
            priority,
            direction,
        },
        (Some(priority), "pause_duration") => Stat::PfcPauseDurationMicros {
            priority,
            direction,
        },
        (Some(priority), "pause_transition") => Stat::PfcPauseTransitions {
            priority,
            direction,
        },
        (None, "pause") => Stat::GlobalPauseFrames { direction },
        (None, "pause_duration") => Stat::GlobalPauseDurationMicros { direction },
        (None, "pause_transition") => Stat::GlobalPauseTransitions { direction },
        _ => return None,
    })
}

/// `rx_prio3_pause`, `rx_global_pause`, `rx_prio3_bytes`, `rx_prio3_buf_discard`, ...
fn new_scheme(name: &str) -> Option<Stat> {
    let (dir, rest) = name.split_once('_')?;
    let direction = Direction::parse(dir)?;
    if let Some(what) = rest.strip_prefix("global_") {
        return pause(None, direction, what);
    }
    let (priority, what) = prio_prefix(rest)?;
    if let Some(stat) = pause(Some(priority), direction, what) {
        return Some(stat);
    }
    let rx = direction == Direction::Rx;
    Some(match what {
        "bytes" => Stat::PriorityBytes {
            priority,
            direction,
        },
        "packets" => Stat::PriorityPackets {
            priority,
            direction,
        },
        "discards" if rx => Stat::PriorityDiscards {
            priority,
            reason: DiscardReason::Discard,
        },
        "buf_discard" if rx => Stat::PriorityDiscards {
            priority,
            reason: DiscardReason::Buffer,
        },
        "cong_discard" if rx => Stat::PriorityDiscards {
            priority,
            reason: DiscardReason::Congestion,
        },
        "marked" if rx => Stat::PriorityEcnMarked { priority },
        _ => return None,
    })
}

/// `prio3_rx_pause`, `prio3_rx_octets`, `prio3_tx_frames`, ...
fn old_scheme(name: &str) -> Option<Stat> {
    let (priority, rest) = prio_prefix(name)?;
    let (dir, what) = rest.split_once('_')?;
    let direction = Direction::parse(dir)?;
    if let Some(stat) = pause(Some(priority), direction, what) {
        return Some(stat);
    }
    Some(match what {
        "octets" | "bytes" => Stat::PriorityBytes {
            priority,
            direction,
        },
        "frames" | "packets" => Stat::PriorityPackets {
            priority,
            direction,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use Direction::{Rx, Tx};

    #[test]
    fn names_of_both_mlx5_schemes() {
        let table: &[(&str, Option<Stat>)] = &[
            (
                "rx_prio3_pause",
                Some(Stat::PfcPauseFrames {
                    priority: 3,
                    direction: Rx,
                }),
            ),
            (
                "prio3_rx_pause",
                Some(Stat::PfcPauseFrames {
                    priority: 3,
                    direction: Rx,
                }),
            ),
            (
                "tx_prio7_pause_duration",
                Some(Stat::PfcPauseDurationMicros {
                    priority: 7,
                    direction: Tx,
                }),
            ),
            (
                "prio0_tx_pause_duration",
                Some(Stat::PfcPauseDurationMicros {
                    priority: 0,
                    direction: Tx,
                }),
            ),
            (
                "rx_prio4_pause_transition",
                Some(Stat::PfcPauseTransitions {
                    priority: 4,
                    direction: Rx,
                }),
            ),
            (
                "prio4_rx_pause_transition",
                Some(Stat::PfcPauseTransitions {
                    priority: 4,
                    direction: Rx,
                }),
            ),
            (
                "rx_global_pause",
                Some(Stat::GlobalPauseFrames { direction: Rx }),
            ),
            (
                "tx_global_pause_duration",
                Some(Stat::GlobalPauseDurationMicros { direction: Tx }),
            ),
            (
                "rx_global_pause_transition",
                Some(Stat::GlobalPauseTransitions { direction: Rx }),
            ),
            (
                "tx_pause_storm_warning_events ",
                Some(Stat::PauseStormEvents {
                    level: StormLevel::Warning,
                }),
            ),
            (
                "tx_pause_storm_error_events",
                Some(Stat::PauseStormEvents {
                    level: StormLevel::Error,
                }),
            ),
            (
                "rx_prio2_bytes",
                Some(Stat::PriorityBytes {
                    priority: 2,
                    direction: Rx,
                }),
            ),
            (
                "prio2_tx_octets",
                Some(Stat::PriorityBytes {
                    priority: 2,
                    direction: Tx,
                }),
            ),
            (
                "tx_prio5_packets",
                Some(Stat::PriorityPackets {
                    priority: 5,
                    direction: Tx,
                }),
            ),
            (
                "prio5_rx_frames",
                Some(Stat::PriorityPackets {
                    priority: 5,
                    direction: Rx,
                }),
            ),
            (
                "rx_prio1_discards",
                Some(Stat::PriorityDiscards {
                    priority: 1,
                    reason: DiscardReason::Discard,
                }),
            ),
            (
                "rx_prio1_buf_discard",
                Some(Stat::PriorityDiscards {
                    priority: 1,
                    reason: DiscardReason::Buffer,
                }),
            ),
            (
                "rx_prio1_cong_discard",
                Some(Stat::PriorityDiscards {
                    priority: 1,
                    reason: DiscardReason::Congestion,
                }),
            ),
            (
                "rx_prio6_marked",
                Some(Stat::PriorityEcnMarked { priority: 6 }),
            ),
            ("rx_out_of_buffer", Some(Stat::OutOfBuffer)),
            ("tx_discards_phy", Some(Stat::PhyDiscards { direction: Tx })),
            (
                "rx_pause_ctrl_phy",
                Some(Stat::PhyPauseControlFrames { direction: Rx }),
            ),
            ("rx_corrected_bits_phy", Some(Stat::PhyCorrectedBits)),
            ("rx_pcs_symbol_err_phy", Some(Stat::PhySymbolErrors)),
            ("link_down_events_phy", Some(Stat::PhyLinkDownEvents)),
            ("rx_bits_phy", Some(Stat::PhyReceivedBits)),
            (
                "rx_vport_rdma_unicast_packets",
                Some(Stat::RdmaPackets {
                    direction: Rx,
                    cast: Cast::Unicast,
                }),
            ),
            (
                "tx_vport_rdma_multicast_bytes",
                Some(Stat::RdmaBytes {
                    direction: Tx,
                    cast: Cast::Multicast,
                }),
            ),
            ("rx_ecn_mark", Some(Stat::EcnMarked)),
            // Unknown or out of range: passed through only on request.
            ("rx_prio8_pause", None),
            ("rx_prio33_pause", None),
            ("rx_prio_pause", None),
            ("tx_prio3_discards", None),
            ("tx_prio3_marked", None),
            ("rx_prio3_pause_storm", None),
            ("rx_global_bytes", None),
            ("rx_vport_unicast_packets", None),
            ("rx_vport_rdma_broadcast_packets", None),
            ("prio3_xx_pause", None),
            ("rx0_ecn_mark", None),
            ("peer_ifindex", None),
            ("", None),
            ("rx_", None),
        ];
        for (name, want) in table {
            assert_eq!(parse(name), *want, "{name:?}");
        }
    }
}
