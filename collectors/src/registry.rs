//! The registry: the list of sources, in the order the agent lists and exports them.
//!
//! Adding a source is one folder under `sources/`, one line in the `registry!` call below,
//! and one mapping file in the agent; the compiler points at the rest (the agent's match on
//! [`SourceData`]). The line creates the agent's `--collector.<name>` /
//! `--no-collector.<name>` flags, its `--collector.<name>.<option>` flags and the config file
//! keys under `collectors.<name>`.

use std::sync::Arc;

use crate::fs::KeptOpenFs;
use crate::fs::guard::{BlockedDevice, GuardedFs};
use crate::fs::{Fs, Roots};
use crate::run::{Deadline, Run, Work};
use crate::source::{Build, OptionSpec, OptionValues, Report, Source, SourceBuildError};
use crate::sources;

/// What a source read in one collection.
pub type SourceReport = Report<SourceData>;

/// A built source behind the registry: runs one collection under a deadline.
pub trait AnySource: Send + Sync + std::fmt::Debug {
    /// The source's registry name.
    fn name(&self) -> &'static str;
    /// Reads the node once; per-device work ends at `deadline`, which may come forward
    /// while it runs.
    fn collect(&self, deadline: &Deadline) -> SourceReport;
    /// The devices whose work of an earlier collection has not returned yet, with how long
    /// each has run.
    fn busy(&self) -> Vec<(String, std::time::Duration)> {
        Vec::new()
    }
}

/// Builds a source from the roots, the guarded file system and its option values.
pub type BuildFn =
    fn(&Roots, &Arc<GuardedFs>, &OptionValues) -> Result<Box<dyn AnySource>, SourceBuildError>;

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

/// A source with the state its collections keep.
#[derive(Debug)]
struct Registered<S> {
    source: Arc<S>,
    work: Work,
}

impl<S> AnySource for Registered<S>
where
    S: Source,
    SourceData: From<S::Data>,
{
    fn name(&self) -> &'static str {
        S::SPEC.name
    }

    fn collect(&self, deadline: &Deadline) -> SourceReport {
        let run = Run::new(deadline, &self.work);
        let report = self.source.collect(&run).map(SourceData::from);
        let mut late = run.into_errors();
        let mut report = report;
        report.errors.append(&mut late);
        report
    }

    fn busy(&self) -> Vec<(String, std::time::Duration)> {
        self.work.busy()
    }
}

fn build<S>(
    roots: &Roots,
    guard: &Arc<GuardedFs>,
    options: &OptionValues,
) -> Result<Box<dyn AnySource>, SourceBuildError>
where
    S: Source,
    SourceData: From<S::Data>,
{
    let fs: Arc<dyn Fs> = guard.clone();
    let source = S::build(&Build { roots, fs, options })?;
    Ok(Box::new(Registered {
        source: Arc::new(source),
        work: Work::new(S::SPEC.name, Some(Arc::clone(guard))),
    }))
}

const fn entry<S>() -> SourceSpec
where
    S: Source,
    SourceData: From<S::Data>,
{
    SourceSpec {
        name: S::SPEC.name,
        help: S::SPEC.help,
        default_enabled: S::SPEC.default_enabled,
        options: S::SPEC.options,
        build: build::<S>,
    }
}

macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $source:ty),* $(,)?) => {
        /// What a source read in one collection, by source.
        #[derive(Debug, Clone)]
        pub enum SourceData {
            $($(#[$doc])* $variant(<$source as Source>::Data),)*
        }

        $(impl From<<$source as Source>::Data> for SourceData {
            fn from(data: <$source as Source>::Data) -> Self {
                SourceData::$variant(data)
            }
        })*

        /// Every source, in the order the agent lists and exports them.
        pub static SOURCES: &[SourceSpec] = &[$(entry::<$source>()),*];
    };
}

registry! {
    /// The `infiniband` source's snapshot.
    Infiniband => sources::infiniband::InfinibandSource,
    /// The `netdev` source's snapshot.
    Netdev => sources::netdev::NetdevSource,
    /// The `ethtool` source's snapshot.
    Ethtool => sources::ethtool::EthtoolSource,
    /// The `dcb` source's snapshot.
    Dcb => sources::dcb::DcbSource,
    /// The `gpu` source's snapshot.
    Gpu => sources::gpu::GpuSource,
    /// The `pci` source's snapshot.
    Pci => sources::pci::PciSource,
    /// The `hwmon` source's snapshot.
    Hwmon => sources::hwmon::HwmonSource,
    /// The `topology` source's snapshot.
    Topology => sources::topology::TopologySource,
    /// The `host` source's snapshot.
    Host => sources::host::HostSource,
    /// The `kmsg` source's snapshot.
    Kmsg => sources::kmsg::KmsgSource,
    /// The `workload` source's snapshot.
    Workload => sources::workload::WorkloadSource,
    /// The `devlink` source's snapshot.
    Devlink => sources::devlink::DevlinkSource,
    /// The `phy` source's snapshot.
    Phy => sources::phy::PhySource,
    /// The `neighbour` source's snapshot.
    Neighbour => sources::neighbour::NeighbourSource,
    /// The `transceiver` source's snapshot.
    Transceiver => sources::transceiver::TransceiverSource,
}

/// Why a source could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("collector {source_name}: {error}")]
pub struct BuildError {
    /// The source.
    pub source_name: &'static str,
    /// What is wrong with which option.
    pub error: SourceBuildError,
}

/// The enabled sources, built, with the file system they read through.
#[derive(Debug)]
pub struct Collectors {
    /// The sources, in registry order.
    pub sources: Vec<Box<dyn AnySource>>,
    guard: Arc<GuardedFs>,
}

impl Collectors {
    /// Builds every `(spec, options)` over the real file system under `roots`, its attribute
    /// files kept open between scrapes (`KeptOpenFs`). Every read goes through one
    /// [`GuardedFs`]: a read that blocks in the kernel costs its device's series until it
    /// returns, never the scrape or the rest of the node.
    pub fn build<'a>(
        roots: &Roots,
        enabled: impl IntoIterator<Item = (&'a SourceSpec, &'a OptionValues)>,
    ) -> Result<Self, BuildError> {
        Self::build_on(roots, Arc::new(KeptOpenFs::new(roots)), enabled)
    }

    /// [`Collectors::build`] over another file system (tests inject failures with it).
    pub fn build_on<'a>(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        enabled: impl IntoIterator<Item = (&'a SourceSpec, &'a OptionValues)>,
    ) -> Result<Self, BuildError> {
        let guard = Arc::new(GuardedFs::new(fs, roots.clone()));
        let mut sources = Vec::new();
        for (spec, options) in enabled {
            let source = (spec.build)(roots, &guard, options).map_err(|error| BuildError {
                source_name: spec.name,
                error,
            })?;
            sources.push(source);
        }
        Ok(Collectors { sources, guard })
    }

    /// Devices with a file-system read blocked past its wait now.
    pub fn blocked(&self) -> Vec<BlockedDevice> {
        self.guard.blocked()
    }

    /// File-system reads that did not return in time, since start.
    pub fn fs_timeouts(&self) -> u64 {
        self.guard.timeouts_total()
    }

    /// How many attribute files are kept open between scrapes now.
    pub fn files_kept(&self) -> Option<usize> {
        self.guard.files_kept()
    }

    /// How long a file that refused reads is left unread at first (doubling at each refused
    /// retry, up to 16 times); zero reads every file every time.
    pub fn set_refused_backoff(&self, first: std::time::Duration) {
        self.guard.set_refused_backoff(first);
    }

    /// How many files refused reads and are not read while they back off, now.
    pub fn refused_files(&self) -> usize {
        self.guard.refused_files()
    }
}
