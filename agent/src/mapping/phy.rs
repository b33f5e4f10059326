//! Maps the `phy` source's snapshot to metric families.
//!
//! Names: `railscope_phy_*`, labelled `netdev`; per-lane series also `lane`, the kernel's
//! lane index ("0".."7", 0-based: the order of the per-lane arrays of `FEC_GET`). FEC
//! counters are exported only where the driver reports them (an empty kernel array is no
//! series), the histogram only on kernels that have it (6.18+) and drivers that fill it,
//! the extended link state only while the driver gives one. Pre-FEC BER is left to the
//! rules: `rate(railscope_phy_fec_corrected_bits_total)` over the received bits, see
//! `docs/collectors/phy.md`.

use railscope_collectors::sources::phy::{LaneCounter, NetdevPhy, Snapshot};

use crate::exposition::Family;

/// The `phy` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_phy_fec",
        "FEC of the netdev (ETHTOOL_MSG_FEC_GET): the active encoding (rs, baser, llrs, off; none when the driver reports none) and the configured ones, comma-joined, auto included.",
    );
    let mut corrected = Family::counter(
        "railscope_phy_fec_corrected_blocks",
        "FEC codewords (blocks) with errors that FEC corrected, all lanes (IEEE 802.3 30.5.1.1.17 aFECCorrectedBlocks).",
    );
    let mut uncorrectable = Family::counter(
        "railscope_phy_fec_uncorrectable_blocks",
        "FEC codewords (blocks) with errors FEC could not correct, all lanes (IEEE 802.3 30.5.1.1.18 aFECUncorrectableBlocks); each is a lost or corrupted frame.",
    );
    let mut bits = Family::counter(
        "railscope_phy_fec_corrected_bits",
        "Bits FEC corrected, all lanes (ETHTOOL_A_FEC_STAT_CORR_BITS, mlx5 PPCNT phy_corrected_bits): the numerator of the pre-FEC bit error ratio.",
    );
    let mut lane_corrected = Family::counter(
        "railscope_phy_fec_lane_corrected_blocks",
        "FEC codewords corrected on the lane (lane: the kernel's 0-based lane index).",
    );
    let mut lane_uncorrectable = Family::counter(
        "railscope_phy_fec_lane_uncorrectable_blocks",
        "FEC codewords not correctable on the lane (lane: the kernel's 0-based lane index).",
    );
    let mut lane_bits = Family::counter(
        "railscope_phy_fec_lane_corrected_bits",
        "Bits FEC corrected on the lane (lane: the kernel's 0-based lane index).",
    );
    let mut codewords = Family::counter(
        "railscope_phy_fec_codewords",
        "FEC codewords received with symbol_errors symbol errors (a bin low-high when it spans several), from the FEC histogram (ETHTOOL_A_FEC_STAT_HIST, kernel 6.18+).",
    );
    let mut symbol_errors = Family::counter(
        "railscope_phy_symbol_errors",
        "Symbol errors during carrier (IEEE 802.3 30.3.2.1.5 aSymbolErrorDuringCarrier, ethtool eth-phy statistics; mlx5: after FEC).",
    );
    let mut link_up = Family::gauge(
        "railscope_phy_link_up",
        "1 when the driver reports the link up (ETHTOOL_A_LINKSTATE_LINK), 0 when down.",
    );
    let mut down_events = Family::counter(
        "railscope_phy_link_down_events",
        "Link-down events the driver or PHY counted (ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT; mlx5 PPCNT link_down_events).",
    );
    let mut ext_state = Family::gauge(
        "railscope_phy_link_ext_state",
        "1 while the driver reports why the link is not up (ETHTOOL_A_LINKSTATE_EXT_STATE and _EXT_SUBSTATE as snake_case uapi names; substate empty when none).",
    );
    let netdev = |nd: &NetdevPhy| vec![("netdev", nd.name.clone())];
    let per_lane = |family: &mut Family, nd: &NetdevPhy, c: &LaneCounter| {
        for (lane, v) in c.lanes.iter().enumerate() {
            family.push(
                [("netdev", nd.name.clone()), ("lane", lane.to_string())],
                *v,
            );
        }
    };
    for nd in &snapshot.netdevs {
        if let Some(fec) = &nd.fec {
            let active = fec.active.map_or("none", |m| m.name());
            let configured: Vec<&str> = fec
                .auto
                .then_some("auto")
                .into_iter()
                .chain(fec.configured.iter().map(|m| m.name()))
                .collect();
            info.push(
                [
                    ("netdev", nd.name.clone()),
                    ("active", active.to_owned()),
                    ("configured", configured.join(",")),
                ],
                1u64,
            );
            for (total, lanes, counter) in [
                (&mut corrected, &mut lane_corrected, &fec.corrected_blocks),
                (
                    &mut uncorrectable,
                    &mut lane_uncorrectable,
                    &fec.uncorrectable_blocks,
                ),
                (&mut bits, &mut lane_bits, &fec.corrected_bits),
            ] {
                if let Some(c) = counter {
                    total.push(netdev(nd), c.total);
                    per_lane(lanes, nd, c);
                }
            }
            for bin in &fec.histogram {
                let range = if bin.low == bin.high {
                    bin.low.to_string()
                } else {
                    format!("{}-{}", bin.low, bin.high)
                };
                codewords.push(
                    [("netdev", nd.name.clone()), ("symbol_errors", range)],
                    bin.value,
                );
            }
        }
        if let Some(v) = nd.phy.as_ref().and_then(|p| p.symbol_errors) {
            symbol_errors.push(netdev(nd), v);
        }
        if let Some(link) = &nd.link {
            if let Some(up) = link.up {
                link_up.push(netdev(nd), up);
            }
            if let Some(n) = link.down_events {
                down_events.push(netdev(nd), n);
            }
            if let Some(ext) = link.ext_state {
                ext_state.push(
                    [
                        ("netdev", nd.name.clone()),
                        ("state", ext.state_name()),
                        ("substate", ext.substate_name()),
                    ],
                    1u64,
                );
            }
        }
    }
    vec![
        info,
        corrected,
        uncorrectable,
        bits,
        lane_corrected,
        lane_uncorrectable,
        lane_bits,
        codewords,
        symbol_errors,
        link_up,
        down_events,
        ext_state,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};
    use railscope_collectors::sources::phy::{
        ExtState, Fec, FecMode, HistogramBin, LinkState, PhyStats,
    };

    fn mlx5_port() -> NetdevPhy {
        NetdevPhy {
            name: "ens1f0np0".into(),
            fec: Some(Fec {
                configured: vec![FecMode::Rs, FecMode::BaseR],
                auto: true,
                active: Some(FecMode::Rs),
                corrected_blocks: Some(LaneCounter {
                    total: 1520,
                    lanes: vec![380, 412, 301, 427],
                }),
                uncorrectable_blocks: Some(LaneCounter {
                    total: 2,
                    lanes: vec![],
                }),
                corrected_bits: Some(LaneCounter {
                    total: 1_873_204_118,
                    lanes: vec![],
                }),
                histogram: vec![
                    HistogramBin {
                        low: 0,
                        high: 0,
                        value: 81_920_044,
                        lanes: vec![],
                    },
                    HistogramBin {
                        low: 9,
                        high: 15,
                        value: 2,
                        lanes: vec![],
                    },
                ],
            }),
            phy: Some(PhyStats {
                symbol_errors: Some(37),
            }),
            link: Some(LinkState {
                up: Some(true),
                ext_state: None,
                down_events: Some(7),
            }),
        }
    }

    #[test]
    fn an_rs_fec_port_with_lanes_and_the_histogram() {
        let veth = NetdevPhy {
            name: "veth0".into(),
            fec: None,
            phy: None,
            link: Some(LinkState {
                up: Some(false),
                ext_state: None,
                down_events: None,
            }),
        };
        let snapshot = Snapshot {
            netdevs: vec![mlx5_port(), veth],
        };
        let text = encode(families(&snapshot), Format::Prometheus);
        for line in [
            "railscope_phy_fec_info{netdev=\"ens1f0np0\",active=\"rs\",configured=\"auto,rs,baser\"} 1",
            "railscope_phy_fec_corrected_blocks_total{netdev=\"ens1f0np0\"} 1520",
            "railscope_phy_fec_uncorrectable_blocks_total{netdev=\"ens1f0np0\"} 2",
            "railscope_phy_fec_corrected_bits_total{netdev=\"ens1f0np0\"} 1873204118",
            "railscope_phy_fec_lane_corrected_blocks_total{netdev=\"ens1f0np0\",lane=\"0\"} 380",
            "railscope_phy_fec_lane_corrected_blocks_total{netdev=\"ens1f0np0\",lane=\"3\"} 427",
            "railscope_phy_fec_codewords_total{netdev=\"ens1f0np0\",symbol_errors=\"0\"} 81920044",
            "railscope_phy_fec_codewords_total{netdev=\"ens1f0np0\",symbol_errors=\"9-15\"} 2",
            "railscope_phy_symbol_errors_total{netdev=\"ens1f0np0\"} 37",
            "railscope_phy_link_up{netdev=\"ens1f0np0\"} 1",
            "railscope_phy_link_down_events_total{netdev=\"ens1f0np0\"} 7",
            "railscope_phy_link_up{netdev=\"veth0\"} 0",
        ] {
            assert!(
                text.contains(&format!("{line}\n")),
                "missing {line} in\n{text}"
            );
        }
        // Lanes the driver does not break down have no series; veth has no FEC at all.
        assert_eq!(
            text.matches("railscope_phy_fec_lane_corrected_blocks_total{")
                .count(),
            4
        );
        assert!(!text.contains("railscope_phy_fec_lane_uncorrectable_blocks_total{"));
        assert!(!text.contains("netdev=\"veth0\",active"));
        assert!(!text.contains("railscope_phy_link_ext_state{"));
        assert!(!text.contains("railscope_phy_link_down_events_total{netdev=\"veth0\"}"));
    }

    #[test]
    fn a_down_link_names_its_reason() {
        let mut port = mlx5_port();
        port.fec = Some(Fec::default());
        port.link = Some(LinkState {
            up: Some(false),
            ext_state: Some(ExtState {
                state: 1,
                substate: 3,
            }),
            down_events: Some(8),
        });
        let text = encode(
            families(&Snapshot {
                netdevs: vec![port],
            }),
            Format::Prometheus,
        );
        for line in [
            "railscope_phy_link_ext_state{netdev=\"ens1f0np0\",state=\"link_training_failure\",substate=\"kr_link_partner_did_not_set_receiver_ready\"} 1",
            "railscope_phy_link_up{netdev=\"ens1f0np0\"} 0",
            "railscope_phy_fec_info{netdev=\"ens1f0np0\",active=\"none\",configured=\"\"} 1",
        ] {
            assert!(
                text.contains(&format!("{line}\n")),
                "missing {line} in\n{text}"
            );
        }
        assert!(!text.contains("railscope_phy_fec_corrected_blocks_total{"));
    }

    #[test]
    fn no_netdevs_no_series() {
        assert_eq!(
            encode(families(&Snapshot::default()), Format::Prometheus),
            ""
        );
    }
}
