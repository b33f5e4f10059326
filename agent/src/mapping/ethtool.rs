//! Maps the `ethtool` source's snapshot to metric families (being built).

use railscope_collectors::ethtool::Snapshot;

use crate::exposition::Family;

/// The `ethtool` source's families.
pub fn families(_snapshot: &Snapshot) -> Vec<Family> {
    Vec::new()
}
