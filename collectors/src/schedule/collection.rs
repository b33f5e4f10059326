//! What one collection produced, shared by the [`crate::schedule`] that makes it and the
//! mapping that turns it into metric families.

use std::time::Duration;

use crate::fs::guard::BlockedDevice;
use crate::registry::SourceData;

/// What one source produced in one collection.
#[derive(Debug, Clone)]
pub struct SourceOutcome {
    /// The source's name.
    pub name: &'static str,
    /// Whether the source ran to completion within the deadline.
    pub success: bool,
    /// How long it ran (up to the deadline when it missed it).
    pub duration: Duration,
    /// What it read.
    pub data: Option<SourceData>,
    /// Errors it reported in this collection.
    pub errors: usize,
}

impl SourceOutcome {
    /// The outcome of a source that produced nothing.
    pub fn failed(name: &'static str, duration: Duration) -> Self {
        SourceOutcome {
            name,
            success: false,
            duration,
            data: None,
            errors: 0,
        }
    }
}

/// One collection as one scrape sees it: the outcome of every enabled source it asked for
/// (every enabled source, unless it asked for some only), in registry order.
#[derive(Debug, Clone)]
pub struct Collection {
    /// The outcomes, shared with the scrapes that answer with the same collection.
    pub outcomes: Vec<std::sync::Arc<SourceOutcome>>,
    /// The collection's sequence number (1 for the first).
    pub sequence: u64,
    /// Devices whose reads were blocked when the collection started, so its sources skipped
    /// them: a scrape names them as blocked even when they returned meanwhile, so that a device
    /// missing from a scrape is always named in it.
    pub blocked_at_start: Vec<BlockedDevice>,
}

/// Cumulative counters the scheduler keeps across collections.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Errors per source, in registry order.
    pub errors: Vec<(&'static str, u64)>,
    /// Times each source started to collect, in registry order: concurrent scrapes that
    /// ask for a source share one run of it.
    pub runs: Vec<(&'static str, u64)>,
    /// Collections run.
    pub collections: u64,
    /// Collection requests (scrapes), including those that shared a running collection.
    pub requests: u64,
    /// Devices with a file-system operation blocked past its deadline now.
    pub blocked: Vec<BlockedDevice>,
    /// File-system operations that did not return in time, since start.
    pub fs_timeouts: u64,
    /// Attribute files kept open between scrapes now.
    pub files_kept: Option<usize>,
    /// Files that refused reads (`EINVAL`, `EOPNOTSUPP`, `EACCES`) and are backing off now.
    pub refused_files: usize,
}
