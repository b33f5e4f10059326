//! The source trait and the registry of sources.
//!
//! Adding a source is one module plus one entry in [`SOURCES`]; that entry creates the agent's
//! `--collector.<name>` / `--no-collector.<name>` flags, its `--collector.<name>.<option>` flags
//! and the config file keys under `collectors.<name>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::CollectError;
use crate::fs::{Fs, Roots};
use crate::sources::infiniband;

/// What a source read in one collection.
#[derive(Debug, Clone)]
pub enum SourceData {
    /// The `infiniband` source's snapshot.
    Infiniband(infiniband::Snapshot),
    /// The `netdev` source's snapshot.
    Netdev(crate::sources::netdev::Snapshot),
    /// The `ethtool` source's snapshot.
    Ethtool(crate::sources::ethtool::Snapshot),
    /// The `dcb` source's snapshot.
    Dcb(crate::sources::dcb::Snapshot),
    /// The `gpu` source's snapshot.
    Gpu(crate::sources::gpu::Snapshot),
    /// The `pci` source's snapshot.
    Pci(crate::sources::pci::Snapshot),
    /// The `topology` source's snapshot.
    Topology(crate::sources::topology::Snapshot),
    /// The `host` source's snapshot.
    Host(crate::sources::host::Snapshot),
}

/// The outcome of one collection by one source.
#[derive(Debug, Clone)]
pub struct SourceReport {
    /// What was read; `None` when the source could not run at all.
    pub data: Option<SourceData>,
    /// Every failure met; each cost only its own series.
    pub errors: Vec<CollectError>,
    /// Set when the subsystem the source reads does not exist on this node (no
    /// `/sys/class/infiniband`): not an error, just nothing to report.
    pub absent: Option<String>,
}

/// A source: reads one kernel or library interface. `collect` blocks; the agent runs it on a
/// blocking thread under a deadline.
pub trait Source: Send + Sync + std::fmt::Debug {
    /// The source's registry name.
    fn name(&self) -> &'static str;
    /// Reads the node once.
    fn collect(&self) -> SourceReport;
    /// Reads the node once, returning what it has by `deadline` (sources that can wait on
    /// parts of the node separately, like one worker per GPU, override this).
    fn collect_until(&self, deadline: std::time::Instant) -> SourceReport {
        let _ = deadline;
        self.collect()
    }
}

/// The kind of value an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A regular expression (validated at start-up).
    Regex,
    /// A file path.
    Path,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A map of keys to values: `KEY=VALUE,KEY=VALUE` on the command line, a YAML map in the
    /// config file.
    Map,
}

/// One `--collector.<source>.<name>` option.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// The option name, as it appears in the flag and the config file.
    pub name: &'static str,
    /// Help text.
    pub help: &'static str,
    /// The value kind.
    pub kind: OptionKind,
}

/// The option values given for one source, by option name.
pub type OptionValues = BTreeMap<String, String>;

/// Why a source could not be built from its options.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("option {option}: {reason}")]
pub struct SourceBuildError {
    /// The option's name (without the `--collector.<source>.` prefix).
    pub option: String,
    /// What is wrong with its value.
    pub reason: String,
}

/// Builds a source from the roots, the file system and the option values.
pub type BuildFn =
    fn(&Roots, Arc<dyn Fs>, &OptionValues) -> Result<Box<dyn Source>, SourceBuildError>;

/// One entry of the registry.
#[derive(Debug, Clone, Copy)]
pub struct SourceSpec {
    /// The source's name (`infiniband`).
    pub name: &'static str,
    /// One line saying what it reads.
    pub help: &'static str,
    /// Whether it runs unless `--no-collector.<name>` is given.
    pub default_enabled: bool,
    /// Its options.
    pub options: &'static [OptionSpec],
    /// Its constructor.
    pub build: BuildFn,
}

/// Every source, in the order the agent lists and exports them.
pub static SOURCES: &[SourceSpec] = &[
    infiniband::SPEC,
    crate::sources::netdev::SPEC,
    crate::sources::ethtool::SPEC,
    crate::sources::dcb::SPEC,
    crate::sources::gpu::SPEC,
    crate::sources::pci::SPEC,
    crate::sources::topology::SPEC,
    crate::sources::host::SPEC,
];

/// Compiles an optional regular-expression option. Like node_exporter's `device-include` /
/// `device-exclude`, the pattern is not anchored: write `^mlx5_1$` to match one device only.
pub fn regex_option(
    values: &OptionValues,
    name: &str,
) -> Result<Option<regex::Regex>, SourceBuildError> {
    match values.get(name) {
        None => Ok(None),
        Some(pattern) if pattern.is_empty() => Ok(None),
        Some(pattern) => regex::Regex::new(pattern)
            .map(Some)
            .map_err(|err| SourceBuildError {
                option: name.to_owned(),
                reason: format!("invalid regular expression {pattern:?}: {err}"),
            }),
    }
}
