//! Maps the `dcb` source's snapshot to metric families (being built).

use railscope_collectors::dcb::Snapshot;

use crate::exposition::Family;

/// The `dcb` source's families.
pub fn families(_snapshot: &Snapshot) -> Vec<Family> {
    Vec::new()
}
