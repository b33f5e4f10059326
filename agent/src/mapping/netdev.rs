//! Maps the `netdev` source's snapshot to metric families (being built).

use railscope_collectors::netdev::Snapshot;

use crate::exposition::Family;

/// The `netdev` source's families.
pub fn families(_snapshot: &Snapshot) -> Vec<Family> {
    Vec::new()
}
