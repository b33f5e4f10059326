//! The bytes of the three ethtool generic netlink requests the `phy` source sends and of
//! their replies: `ETHTOOL_MSG_FEC_GET` (`net/ethtool/fec.c`), `ETHTOOL_MSG_STATS_GET`
//! (`net/ethtool/stats.c`) and `ETHTOOL_MSG_LINKSTATE_GET` (`net/ethtool/linkstate.c`).
//! Pure functions over bytes, tested with replies as the kernel writes them
//! (`tests/fixtures/phy/*.hex`). Numbers from `include/uapi/linux/ethtool_netlink_generated.h`
//! (6.14+; `ethtool_netlink.h` before) and `include/uapi/linux/ethtool.h`.
//!
//! * **FEC_GET** with `ETHTOOL_FLAG_STATS | ETHTOOL_FLAG_COMPACT_BITSETS`: reply
//!   `ETHTOOL_A_FEC_MODES` (a bitset over link modes, of which only the four
//!   `ETHTOOL_LINK_MODE_FEC_*_BIT` can be set), `_AUTO` (u8), `_ACTIVE` (u32, a link-mode bit
//!   index; absent when no mode is active) and the `_STATS` nest. In the nest,
//!   `_STAT_CORRECTED`, `_STAT_UNCORR` and `_STAT_CORR_BITS` are each an array of u64, the
//!   total first and then one per lane (`fec_stats_recalc()`: a driver that gives lanes has
//!   its total summed from them; one that gives neither has an empty attribute), each put
//!   with `nla_put_64bit()`, so an `ETHTOOL_A_FEC_STAT_PAD` may precede it. Kernels with the
//!   FEC histogram (6.18+) add one `ETHTOOL_A_FEC_STAT_HIST` nest per bin (`fec_put_hist()`):
//!   `_HIST_BIN_LOW`/`_HIGH` (u32, inclusive), `_HIST_BIN_VAL` (`nla_put_uint`: u32 or u64)
//!   and `_HIST_BIN_VAL_PER_LANE` (u64 array, with its own pad `ETHTOOL_A_FEC_HIST_PAD`).
//!   Older kernels have no such attribute: no bins.
//! * **STATS_GET** with `ETHTOOL_A_STATS_GROUPS` = {eth-phy} (`ETHTOOL_STATS_ETH_PHY`, bit 0
//!   of the `ETH_SS_STATS_STD` string set): reply one `ETHTOOL_A_STATS_GRP` nest per asked
//!   group (`_GRP_ID`, `_GRP_SS_ID` = `ETH_SS_STATS_ETH_PHY`, then one `_GRP_STAT` nest per
//!   counter the driver set, holding one u64 keyed by `ETHTOOL_A_STATS_ETH_PHY_5_SYM_ERR`,
//!   0). `ETHTOOL_A_STATS_SRC` is left out: the aggregate of eMAC and pMAC.
//! * **LINKSTATE_GET** with `ETHTOOL_FLAG_STATS`: reply `_LINK` (u8; absent when the
//!   driver has no `get_link`), `_SQI`/`_SQI_MAX` (left out here), `_EXT_STATE` (u8, only
//!   while the driver reports one, and only asked of a netdev that is administratively up),
//!   `_EXT_SUBSTATE` (u8, only when non-zero) and `_EXT_DOWN_CNT` (u32, only when the driver
//!   or its PHY has `get_link_ext_stats` and set it: `ETHTOOL_STAT_NOT_SET` is left out).
//!
//! Every reply starts with its header nest naming the device; a reply for another device
//! than the one asked is an error, never data.

use crate::netlink::ethtool::{
    self, FLAG_COMPACT_BITSETS, FLAG_STATS, compact_list, decode_bitset, decode_header,
};
use crate::netlink::genl::{self, Attrs};
use crate::netlink::{DecodeError, Message, NLM_F_REQUEST, attributes, find, u32_value, u64_value};

use super::types::{ExtState, Fec, FecMode, HistogramBin, LaneCounter, LinkState, PhyStats};

/// `ETHTOOL_MSG_LINKSTATE_GET`; its reply `ETHTOOL_MSG_LINKSTATE_GET_REPLY` has the same number.
pub const MSG_LINKSTATE_GET: u8 = 6;
/// `ETHTOOL_MSG_LINKSTATE_GET_REPLY`.
pub const MSG_LINKSTATE_GET_REPLY: u8 = 6;
/// `ETHTOOL_MSG_FEC_GET`.
pub const MSG_FEC_GET: u8 = 29;
/// `ETHTOOL_MSG_FEC_GET_REPLY`.
pub const MSG_FEC_GET_REPLY: u8 = 30;
/// `ETHTOOL_MSG_STATS_GET`.
pub const MSG_STATS_GET: u8 = 32;
/// `ETHTOOL_MSG_STATS_GET_REPLY`.
pub const MSG_STATS_GET_REPLY: u8 = 33;

/// `ETHTOOL_A_LINKSTATE_HEADER`.
pub const A_LINKSTATE_HEADER: u16 = 1;
/// `ETHTOOL_A_LINKSTATE_LINK` (u8).
pub const A_LINKSTATE_LINK: u16 = 2;
/// `ETHTOOL_A_LINKSTATE_EXT_STATE` (u8).
pub const A_LINKSTATE_EXT_STATE: u16 = 5;
/// `ETHTOOL_A_LINKSTATE_EXT_SUBSTATE` (u8).
pub const A_LINKSTATE_EXT_SUBSTATE: u16 = 6;
/// `ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT` (u32).
pub const A_LINKSTATE_EXT_DOWN_CNT: u16 = 7;

/// `ETHTOOL_A_FEC_HEADER`.
pub const A_FEC_HEADER: u16 = 1;
/// `ETHTOOL_A_FEC_MODES` (bitset).
pub const A_FEC_MODES: u16 = 2;
/// `ETHTOOL_A_FEC_AUTO` (u8).
pub const A_FEC_AUTO: u16 = 3;
/// `ETHTOOL_A_FEC_ACTIVE` (u32).
pub const A_FEC_ACTIVE: u16 = 4;
/// `ETHTOOL_A_FEC_STATS` (nest).
pub const A_FEC_STATS: u16 = 5;
/// `ETHTOOL_A_FEC_STAT_PAD`.
pub const A_FEC_STAT_PAD: u16 = 1;
/// `ETHTOOL_A_FEC_STAT_CORRECTED` (u64 array).
pub const A_FEC_STAT_CORRECTED: u16 = 2;
/// `ETHTOOL_A_FEC_STAT_UNCORR` (u64 array).
pub const A_FEC_STAT_UNCORR: u16 = 3;
/// `ETHTOOL_A_FEC_STAT_CORR_BITS` (u64 array).
pub const A_FEC_STAT_CORR_BITS: u16 = 4;
/// `ETHTOOL_A_FEC_STAT_HIST` (nest, one per bin; 6.18+).
pub const A_FEC_STAT_HIST: u16 = 5;
/// `ETHTOOL_A_FEC_HIST_PAD`.
pub const A_FEC_HIST_PAD: u16 = 1;
/// `ETHTOOL_A_FEC_HIST_BIN_LOW` (u32).
pub const A_FEC_HIST_BIN_LOW: u16 = 2;
/// `ETHTOOL_A_FEC_HIST_BIN_HIGH` (u32).
pub const A_FEC_HIST_BIN_HIGH: u16 = 3;
/// `ETHTOOL_A_FEC_HIST_BIN_VAL` (uint).
pub const A_FEC_HIST_BIN_VAL: u16 = 4;
/// `ETHTOOL_A_FEC_HIST_BIN_VAL_PER_LANE` (u64 array).
pub const A_FEC_HIST_BIN_VAL_PER_LANE: u16 = 5;

/// `ETHTOOL_A_STATS_HEADER`.
pub const A_STATS_HEADER: u16 = 2;
/// `ETHTOOL_A_STATS_GROUPS` (bitset over `ETH_SS_STATS_STD`).
pub const A_STATS_GROUPS: u16 = 3;
/// `ETHTOOL_A_STATS_GRP` (nest).
pub const A_STATS_GRP: u16 = 4;
/// `ETHTOOL_A_STATS_GRP_ID` (u32).
pub const A_STATS_GRP_ID: u16 = 2;
/// `ETHTOOL_A_STATS_GRP_SS_ID` (u32).
pub const A_STATS_GRP_SS_ID: u16 = 3;
/// `ETHTOOL_A_STATS_GRP_STAT` (nest of one u64).
pub const A_STATS_GRP_STAT: u16 = 4;
/// `ETHTOOL_STATS_ETH_PHY`: the eth-phy group's bit.
pub const STATS_ETH_PHY: u32 = 0;
/// `ETH_SS_STATS_ETH_PHY`: the string set of the eth-phy group's counters.
pub const ETH_SS_STATS_ETH_PHY: u32 = 17;
/// `ETHTOOL_A_STATS_ETH_PHY_5_SYM_ERR`.
pub const A_STATS_ETH_PHY_5_SYM_ERR: u16 = 0;

/// `ETHTOOL_LINK_MODE_FEC_NONE_BIT`.
pub const LINK_MODE_FEC_NONE_BIT: u32 = 49;
/// `ETHTOOL_LINK_MODE_FEC_RS_BIT`.
pub const LINK_MODE_FEC_RS_BIT: u32 = 50;
/// `ETHTOOL_LINK_MODE_FEC_BASER_BIT`.
pub const LINK_MODE_FEC_BASER_BIT: u32 = 51;
/// `ETHTOOL_LINK_MODE_FEC_LLRS_BIT`.
pub const LINK_MODE_FEC_LLRS_BIT: u32 = 74;

/// `ETHTOOL_MAX_LANES`: the most lanes a per-lane array has.
pub const MAX_LANES: usize = 8;
/// `ETHTOOL_FEC_HIST_MAX`: the most histogram bins.
pub const FEC_HIST_MAX: usize = 17;

/// The FEC mode of a link-mode bit.
pub fn fec_mode(bit: u32) -> Option<FecMode> {
    match bit {
        LINK_MODE_FEC_NONE_BIT => Some(FecMode::Off),
        LINK_MODE_FEC_RS_BIT => Some(FecMode::Rs),
        LINK_MODE_FEC_BASER_BIT => Some(FecMode::BaseR),
        LINK_MODE_FEC_LLRS_BIT => Some(FecMode::Llrs),
        _ => None,
    }
}

/// The `FEC_GET` request for the netdev `ifindex`, bitsets compact; `stats` asks for the
/// FEC statistics (`ETHTOOL_FLAG_STATS`, which kernels before FEC statistics refuse with
/// `EINVAL`).
pub fn encode_fec_get(family: u16, ifindex: u32, stats: bool, seq: u32) -> Vec<u8> {
    let flags = if stats { FLAG_STATS } else { 0 };
    let header = ethtool::header(ifindex, flags | FLAG_COMPACT_BITSETS);
    let attrs = Attrs::new().nest(A_FEC_HEADER, header).finish();
    genl::encode(
        family,
        NLM_F_REQUEST,
        seq,
        MSG_FEC_GET,
        ethtool::VERSION,
        &attrs,
    )
}

/// The `STATS_GET` request of the eth-phy group for the netdev `ifindex`.
pub fn encode_stats_get(family: u16, ifindex: u32, seq: u32) -> Vec<u8> {
    let attrs = Attrs::new()
        .nest(A_STATS_HEADER, ethtool::header(ifindex, 0))
        .nest(
            A_STATS_GROUPS,
            compact_list(STATS_ETH_PHY + 1, &[STATS_ETH_PHY]),
        )
        .finish();
    genl::encode(
        family,
        NLM_F_REQUEST,
        seq,
        MSG_STATS_GET,
        ethtool::VERSION,
        &attrs,
    )
}

/// The `LINKSTATE_GET` request for the netdev `ifindex`; `stats` asks for the down count
/// (`ETHTOOL_FLAG_STATS`, which kernels before the down count refuse with `EINVAL`).
pub fn encode_linkstate_get(family: u16, ifindex: u32, stats: bool, seq: u32) -> Vec<u8> {
    let flags = if stats { FLAG_STATS } else { 0 };
    let attrs = Attrs::new()
        .nest(A_LINKSTATE_HEADER, ethtool::header(ifindex, flags))
        .finish();
    genl::encode(
        family,
        NLM_F_REQUEST,
        seq,
        MSG_LINKSTATE_GET,
        ethtool::VERSION,
        &attrs,
    )
}

/// The attributes of a reply of command `cmd` for the netdev `ifindex`: the message must be
/// of the family, of that command, and its header nest (attribute `header`) must name
/// `ifindex`.
fn reply_attrs<'a>(
    message: &Message<'a>,
    family: u16,
    cmd: u8,
    header: u16,
    ifindex: u32,
) -> Result<Vec<(u16, &'a [u8])>, DecodeError> {
    if message.ty != family {
        return Err(DecodeError(format!(
            "reply of message type {}, not the ethtool family's {family}",
            message.ty
        )));
    }
    let genl = genl::decode(message)?;
    if genl.cmd != cmd {
        return Err(DecodeError(format!(
            "reply of command {}, expected {cmd}",
            genl.cmd
        )));
    }
    let attrs = attributes(genl.attrs)?;
    let head = find(&attrs, header)
        .map(decode_header)
        .transpose()?
        .ok_or_else(|| DecodeError("reply without its header nest".into()))?;
    if head.index != Some(ifindex) {
        return Err(DecodeError(format!(
            "reply for device {:?} ({:?}), asked for ifindex {ifindex}",
            head.index, head.name
        )));
    }
    Ok(attrs)
}

/// A u64 array attribute: total, then lanes. Empty is "not reported".
fn lane_counter(payload: &[u8], what: &str) -> Result<Option<LaneCounter>, DecodeError> {
    if payload.is_empty() {
        return Ok(None);
    }
    let values = u64_array(payload, what)?;
    if values.len() > 1 + MAX_LANES {
        return Err(DecodeError(format!(
            "{what} has {} values, more than a total and {MAX_LANES} lanes",
            values.len()
        )));
    }
    Ok(values.split_first().map(|(total, lanes)| LaneCounter {
        total: *total,
        lanes: lanes.to_vec(),
    }))
}

fn u64_array(payload: &[u8], what: &str) -> Result<Vec<u64>, DecodeError> {
    if !payload.len().is_multiple_of(8) {
        return Err(DecodeError(format!(
            "{what} of {} bytes, not an array of u64",
            payload.len()
        )));
    }
    Ok(payload.chunks_exact(8).filter_map(u64_value).collect())
}

/// An `NLA_UINT` (`nla_put_uint()`): 4 bytes when the value fits, else 8.
fn uint_value(payload: &[u8]) -> Option<u64> {
    match payload.len() {
        4 => u32_value(payload).map(u64::from),
        8 => u64_value(payload),
        _ => None,
    }
}

/// Decodes a `FEC_GET` reply for the netdev `ifindex`.
pub fn decode_fec(message: &Message<'_>, family: u16, ifindex: u32) -> Result<Fec, DecodeError> {
    let attrs = reply_attrs(message, family, MSG_FEC_GET_REPLY, A_FEC_HEADER, ifindex)?;
    let mut fec = Fec::default();
    if let Some(modes) = find(&attrs, A_FEC_MODES) {
        let modes = decode_bitset(modes)?;
        fec.configured = [
            LINK_MODE_FEC_NONE_BIT,
            LINK_MODE_FEC_RS_BIT,
            LINK_MODE_FEC_BASER_BIT,
            LINK_MODE_FEC_LLRS_BIT,
        ]
        .into_iter()
        .filter(|&bit| modes.is_set(bit))
        .filter_map(fec_mode)
        .collect();
    }
    fec.auto = find(&attrs, A_FEC_AUTO).is_some_and(|v| v.first().is_some_and(|&b| b != 0));
    if let Some(active) = find(&attrs, A_FEC_ACTIVE) {
        let bit = u32_value(active)
            .ok_or_else(|| DecodeError("ETHTOOL_A_FEC_ACTIVE shorter than a u32".into()))?;
        fec.active = Some(fec_mode(bit).ok_or_else(|| {
            DecodeError(format!(
                "ETHTOOL_A_FEC_ACTIVE is link mode {bit}, not a FEC mode"
            ))
        })?);
    }
    if let Some(stats) = find(&attrs, A_FEC_STATS) {
        for (ty, payload) in attributes(stats)? {
            match ty {
                A_FEC_STAT_CORRECTED => {
                    fec.corrected_blocks = lane_counter(payload, "ETHTOOL_A_FEC_STAT_CORRECTED")?
                }
                A_FEC_STAT_UNCORR => {
                    fec.uncorrectable_blocks = lane_counter(payload, "ETHTOOL_A_FEC_STAT_UNCORR")?
                }
                A_FEC_STAT_CORR_BITS => {
                    fec.corrected_bits = lane_counter(payload, "ETHTOOL_A_FEC_STAT_CORR_BITS")?
                }
                A_FEC_STAT_HIST => fec.histogram.push(histogram_bin(payload)?),
                A_FEC_STAT_PAD => {}
                _ => {} // what later kernels add
            }
        }
        if fec.histogram.len() > FEC_HIST_MAX {
            return Err(DecodeError(format!(
                "{} FEC histogram bins, more than {FEC_HIST_MAX}",
                fec.histogram.len()
            )));
        }
    }
    Ok(fec)
}

fn histogram_bin(payload: &[u8]) -> Result<HistogramBin, DecodeError> {
    // The pad comes before the u64 values where the architecture needs it; skip it.
    let attrs: Vec<_> = attributes(payload)?
        .into_iter()
        .filter(|(ty, _)| *ty != A_FEC_HIST_PAD)
        .collect();
    let field = |ty, name: &str| {
        find(&attrs, ty)
            .and_then(u32_value)
            .ok_or_else(|| DecodeError(format!("FEC histogram bin without {name}")))
    };
    let low = field(A_FEC_HIST_BIN_LOW, "ETHTOOL_A_FEC_HIST_BIN_LOW")?;
    let high = field(A_FEC_HIST_BIN_HIGH, "ETHTOOL_A_FEC_HIST_BIN_HIGH")?;
    if high < low {
        return Err(DecodeError(format!("FEC histogram bin {low}..{high}")));
    }
    let value = find(&attrs, A_FEC_HIST_BIN_VAL)
        .and_then(uint_value)
        .ok_or_else(|| DecodeError("FEC histogram bin without a value".into()))?;
    let lanes = match find(&attrs, A_FEC_HIST_BIN_VAL_PER_LANE) {
        Some(p) => u64_array(p, "ETHTOOL_A_FEC_HIST_BIN_VAL_PER_LANE")?,
        None => Vec::new(),
    };
    if lanes.len() > MAX_LANES {
        return Err(DecodeError(format!(
            "FEC histogram bin of {} lanes",
            lanes.len()
        )));
    }
    Ok(HistogramBin {
        low,
        high,
        value,
        lanes,
    })
}

/// Decodes a `STATS_GET` reply for the netdev `ifindex`: the eth-phy group's counters
/// (none set when the reply has no such group or the group no counter).
pub fn decode_stats(
    message: &Message<'_>,
    family: u16,
    ifindex: u32,
) -> Result<PhyStats, DecodeError> {
    let attrs = reply_attrs(
        message,
        family,
        MSG_STATS_GET_REPLY,
        A_STATS_HEADER,
        ifindex,
    )?;
    let mut phy = PhyStats::default();
    for (_, grp) in attrs.iter().filter(|(ty, _)| *ty == A_STATS_GRP) {
        let grp = attributes(grp)?;
        let id = find(&grp, A_STATS_GRP_ID).and_then(u32_value);
        let ss = find(&grp, A_STATS_GRP_SS_ID).and_then(u32_value);
        if id != Some(STATS_ETH_PHY) {
            continue;
        }
        if ss != Some(ETH_SS_STATS_ETH_PHY) {
            return Err(DecodeError(format!(
                "eth-phy statistics group of string set {ss:?}"
            )));
        }
        for (_, stat) in grp.iter().filter(|(ty, _)| *ty == A_STATS_GRP_STAT) {
            for (ty, value) in attributes(stat)? {
                if ty == A_STATS_ETH_PHY_5_SYM_ERR {
                    phy.symbol_errors = Some(u64_value(value).ok_or_else(|| {
                        DecodeError("ETHTOOL_A_STATS_ETH_PHY_5_SYM_ERR shorter than a u64".into())
                    })?);
                }
            }
        }
    }
    Ok(phy)
}

/// Decodes a `LINKSTATE_GET` reply for the netdev `ifindex`.
pub fn decode_linkstate(
    message: &Message<'_>,
    family: u16,
    ifindex: u32,
) -> Result<LinkState, DecodeError> {
    let attrs = reply_attrs(
        message,
        family,
        MSG_LINKSTATE_GET_REPLY,
        A_LINKSTATE_HEADER,
        ifindex,
    )?;
    let byte = |ty| find(&attrs, ty).and_then(|p| p.first().copied());
    Ok(LinkState {
        up: byte(A_LINKSTATE_LINK).map(|b| b != 0),
        ext_state: byte(A_LINKSTATE_EXT_STATE).map(|state| ExtState {
            state,
            substate: byte(A_LINKSTATE_EXT_SUBSTATE).unwrap_or(0),
        }),
        down_events: find(&attrs, A_LINKSTATE_EXT_DOWN_CNT).and_then(u32_value),
    })
}

/// `enum ethtool_link_ext_state`, as label values.
const EXT_STATES: [&str; 11] = [
    "autoneg",
    "link_training_failure",
    "link_logical_mismatch",
    "bad_signal_integrity",
    "no_cable",
    "cable_issue",
    "eeprom_issue",
    "calibration_failure",
    "power_budget_exceeded",
    "overheat",
    "module",
];

/// The substates of each state that has them (`enum ethtool_link_ext_substate_*`, from 1).
fn substates(state: u8) -> &'static [&'static str] {
    match state {
        // ETHTOOL_LINK_EXT_SUBSTATE_AN_*
        0 => &[
            "no_partner_detected",
            "ack_not_received",
            "next_page_exchange_failed",
            "no_partner_detected_force_mode",
            "fec_mismatch_during_override",
            "no_hcd",
        ],
        // ETHTOOL_LINK_EXT_SUBSTATE_LT_*
        1 => &[
            "kr_frame_lock_not_acquired",
            "kr_link_inhibit_timeout",
            "kr_link_partner_did_not_set_receiver_ready",
            "remote_fault",
        ],
        // ETHTOOL_LINK_EXT_SUBSTATE_LLM_*
        2 => &[
            "pcs_did_not_acquire_block_lock",
            "pcs_did_not_acquire_am_lock",
            "pcs_did_not_get_align_status",
            "fc_fec_is_not_locked",
            "rs_fec_is_not_locked",
        ],
        // ETHTOOL_LINK_EXT_SUBSTATE_BSI_*
        3 => &[
            "large_number_of_physical_errors",
            "unsupported_rate",
            "serdes_reference_clock_lost",
            "serdes_alos",
        ],
        // ETHTOOL_LINK_EXT_SUBSTATE_CI_*
        5 => &["unsupported_cable", "cable_test_failure"],
        // ETHTOOL_LINK_EXT_SUBSTATE_MODULE_*
        10 => &["cmis_not_ready"],
        _ => &[],
    }
}

impl ExtState {
    /// The state's label value (`no_cable`); a number this build does not know is `state_N`.
    pub fn state_name(&self) -> String {
        EXT_STATES
            .get(usize::from(self.state))
            .map_or_else(|| format!("state_{}", self.state), |s| (*s).to_owned())
    }

    /// The substate's label value, `""` for none; one this build does not know is
    /// `substate_N`.
    pub fn substate_name(&self) -> String {
        match self.substate {
            0 => String::new(),
            n => substates(self.state)
                .get(usize::from(n) - 1)
                .map_or_else(|| format!("substate_{n}"), |s| (*s).to_owned()),
        }
    }
}
