//! The plain data the `transceiver` source returns.

pub use super::eeprom::{
    Diagnostics, Identity, Lane, LaneFlag, Levels, ModuleFlag, ModuleInfo, ModuleState, Monitoring,
    RxPowerType, Spec, Thresholds,
};

/// One netdev's transceiver module.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// The netdev's name.
    pub netdev: String,
    /// Whether the last read of the module succeeded.
    pub up: bool,
    /// Identity, thresholds and advertisement (kept between reads); `None` after a failed
    /// read, until a read succeeds again.
    pub info: Option<ModuleInfo>,
    /// The last diagnostics read; `None` after a failed read.
    pub diagnostics: Option<Diagnostics>,
    /// Unix time of the last successful diagnostics read, seconds.
    pub last_read: Option<f64>,
    /// Failed reads of the module since the agent started.
    pub read_errors: u64,
}

/// Everything the `transceiver` source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The netdevs with module EEPROM support, in name order.
    pub modules: Vec<Module>,
}
