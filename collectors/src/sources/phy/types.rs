//! What the `phy` source reads of a netdev: plain data, `Option` wherever the kernel may
//! leave a value out.

/// What the source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The netdevs of the agent's network namespace that answered, sorted by name.
    pub netdevs: Vec<NetdevPhy>,
}

/// One netdev's FEC, PHY statistics and link state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetdevPhy {
    /// The netdev's name.
    pub name: String,
    /// `FEC_GET`; `None` when the driver has no FEC ops (`EOPNOTSUPP`: veth, IPoIB).
    pub fec: Option<Fec>,
    /// `STATS_GET` eth-phy group; `None` when the driver has no `get_eth_phy_stats`.
    pub phy: Option<PhyStats>,
    /// `LINKSTATE_GET`; every netdev has one.
    pub link: Option<LinkState>,
}

/// A FEC encoding, as a link-mode bit (`ETHTOOL_LINK_MODE_FEC_*_BIT`) names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FecMode {
    /// `FEC_NONE` (ioctl `ETHTOOL_FEC_OFF`): FEC off. ethtool(8) prints it "Off".
    Off,
    /// `FEC_RS`: Reed-Solomon (clause 91/108/134).
    Rs,
    /// `FEC_BASER`: BASE-R / FireCode (clause 74).
    BaseR,
    /// `FEC_LLRS`: low-latency Reed-Solomon (25G/50G consortium).
    Llrs,
}

impl FecMode {
    /// The label value: `off`, `rs`, `baser`, `llrs`.
    pub fn name(self) -> &'static str {
        match self {
            FecMode::Off => "off",
            FecMode::Rs => "rs",
            FecMode::BaseR => "baser",
            FecMode::Llrs => "llrs",
        }
    }
}

/// `FEC_GET` with `ETHTOOL_FLAG_STATS`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fec {
    /// `ETHTOOL_A_FEC_MODES`: the configured encodings, ascending.
    pub configured: Vec<FecMode>,
    /// `ETHTOOL_A_FEC_AUTO`: the encoding is chosen automatically.
    pub auto: bool,
    /// `ETHTOOL_A_FEC_ACTIVE`: the encoding in use; `None` when the kernel reports none.
    pub active: Option<FecMode>,
    /// `ETHTOOL_A_FEC_STAT_CORRECTED`: FEC blocks corrected (IEEE 30.5.1.1.17).
    pub corrected_blocks: Option<LaneCounter>,
    /// `ETHTOOL_A_FEC_STAT_UNCORR`: FEC blocks not correctable (IEEE 30.5.1.1.18).
    pub uncorrectable_blocks: Option<LaneCounter>,
    /// `ETHTOOL_A_FEC_STAT_CORR_BITS`: bits corrected (not an IEEE counter; mlx5 has it).
    pub corrected_bits: Option<LaneCounter>,
    /// `ETHTOOL_A_FEC_STAT_HIST`: codewords by the number of symbol errors in them.
    pub histogram: Vec<HistogramBin>,
}

/// A counter with its total and, where the driver breaks it down, one value per lane in the
/// kernel's lane order (0-based).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneCounter {
    /// The first element of the kernel's array.
    pub total: u64,
    /// The following elements.
    pub lanes: Vec<u64>,
}

/// One bin of the FEC histogram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistogramBin {
    /// `ETHTOOL_A_FEC_HIST_BIN_LOW`: fewest symbol errors of the bin (inclusive).
    pub low: u32,
    /// `ETHTOOL_A_FEC_HIST_BIN_HIGH`: most symbol errors of the bin (inclusive).
    pub high: u32,
    /// `ETHTOOL_A_FEC_HIST_BIN_VAL`: codewords of the bin.
    pub value: u64,
    /// `ETHTOOL_A_FEC_HIST_BIN_VAL_PER_LANE`, where the driver breaks it down.
    pub lanes: Vec<u64>,
}

/// The eth-phy group of `STATS_GET`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhyStats {
    /// `ETHTOOL_A_STATS_ETH_PHY_5_SYM_ERR` (IEEE 30.3.2.1.5 aSymbolErrorDuringCarrier).
    pub symbol_errors: Option<u64>,
}

/// `LINKSTATE_GET`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkState {
    /// `ETHTOOL_A_LINKSTATE_LINK`: the driver's `get_link` (the carrier on most).
    pub up: Option<bool>,
    /// `ETHTOOL_A_LINKSTATE_EXT_STATE` and `_EXT_SUBSTATE`: why the link is down.
    pub ext_state: Option<ExtState>,
    /// `ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT`: link-down events the driver counted.
    pub down_events: Option<u32>,
}

/// The extended link state, as numbers and as label names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtState {
    /// `enum ethtool_link_ext_state`.
    pub state: u8,
    /// The substate enum of that state; 0 when none was given.
    pub substate: u8,
}
