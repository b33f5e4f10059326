//! `railscope-collectors`: everything railscope reads from the node.
//!
//! Each *source* is one folder under [`sources`] that reads one kernel or library interface and
//! returns plain, typed data: a [`Report`] holding its snapshot and the [`CollectError`]s met on
//! the way. Sources know nothing about HTTP or Prometheus; the `railscope` agent crate maps
//! their snapshots to metric families.
//!
//! # The surface the agent uses
//!
//! Everything the `railscope` agent (and the end-to-end tests) name is public, re-exported
//! here at the crate root or in the public modules below; the rest is `pub(crate)`.
//!
//! * Building: [`SOURCES`] (the ordered list of [`SourceSpec`]s, with each source's
//!   [`OptionSpec`]s) drives the `--collector.<name>` flags, their help text and the config
//!   file's `collectors:` keys; [`Collectors::build`] makes the enabled sources from their
//!   [`OptionValues`] over one guarded file system under [`Roots`] (defaults
//!   [`fs::DEFAULT_SYSFS`], [`fs::DEFAULT_PROCFS`]), or names the invalid option.
//! * Collecting: the [`Scheduler`] ([`schedule`]) over those [`Collectors`] answers
//!   [`Scheduler::collect`] (a scrape, with its timeout from [`schedule::scrape_timeout`]) and
//!   [`Scheduler::collect_recent`] (a push) with a [`Collection`]: one [`SourceOutcome`] per
//!   source, its [`SourceData`] and how it went; [`Scheduler::totals`] gives the counters
//!   across collections ([`Totals`]: errors, requests, [`BlockedDevice`]s, kept and refused
//!   files).
//! * Mapping: each source's snapshot types, under [`sources`]`::<name>`, which the agent's
//!   `mapping/` turns into metric families; [`CollectError`] ([`ErrorKind`], [`Origin`]) for
//!   what failed.
//!
//! # Inside, from the top down
//!
//! * [`schedule`]: hands each collection its deadline, runs the sources on a few collection
//!   lanes, takes each source's outcome up as it comes; concurrent scrapes share one
//!   collection.
//! * [`registry`]: the ordered list of sources and [`Collectors`], the enabled sources built
//!   over one guarded file system; [`AnySource`], a source with its snapshot type erased.
//! * [`Source`] ([`source`]): the trait every source implements; `collect` is blocking and runs
//!   off the async runtime.
//! * `run`: the one timeout model. The scheduler hands down a [`Deadline`] (the earliest among
//!   the scrapes waiting); a source runs its per-device work with [`Run::each`], and a device
//!   that does not answer in time costs only its own series.
//! * Shared ground every source may use, and no source owns: [`fs`] (the read path, one stack
//!   from the injectable [`Roots`] up through the real file system, kept-open files, refused
//!   back-off and the guard that fences blocked reads per device, to the attribute reader
//!   `fs::attr`), `error`, [`pcie`] (PCI discovery), [`netdevs`] (which netdevs to read),
//!   `netlink` (the one netlink framing module).
//!
//! # Adding a source
//!
//! 1. A folder `sources/<name>/` with `mod.rs`: a struct implementing [`Source`] (its
//!    [`Spec`] with name, help and options; `build` from the option values, an invalid one
//!    named in a [`SourceBuildError`]; `collect`), its snapshot type (plain data, `Option`
//!    for what the kernel may omit; `types.rs` once it grows), and its reading and pure
//!    parsing in modules of their own. Per-device work goes through [`Run::each`] (and
//!    `run::gather`), so a stuck device costs only itself; files are read through the `Fs`
//!    handed to `build` with the `fs::attr` reader, never `std::fs`; netlink through
//!    `netlink`. Add `pub mod <name>;` to `sources/mod.rs`.
//! 2. One line in the `registry!` call in `registry.rs`:
//!    `Name => sources::<name>::NameSource,` (with a doc line).
//! 3. One mapping file in the agent, `agent/src/mapping/<name>.rs`, turning the snapshot
//!    into metric families. The compiler then points at the one place left: the `match` on
//!    [`SourceData`] in `agent/src/mapping/mod.rs` (`non-exhaustive patterns:
//!    SourceData::Name(_) not covered`), which gets one arm and the `mod` line.
//!
//! The flags (`--collector.<name>`, `--collector.<name>.<option>`), the config file keys, the
//! landing page and the `collector` label of the self metrics follow from the registry line.

pub(crate) mod error;
pub mod fs;
#[cfg(test)]
mod hexfixture;
pub mod netdevs;
pub(crate) mod netlink;
pub mod pcie;
pub mod registry;
pub(crate) mod run;
pub mod schedule;
pub mod source;
pub mod sources;
#[cfg(test)]
mod strategies;

pub use error::{CollectError, ErrorKind, Origin};
pub use fs::{BlockedDevice, Fs, GuardedFs, RealFs, Roots};
#[cfg(any(test, feature = "testing"))]
pub use fs::{Fault, FaultFs};
pub use registry::{AnySource, Collectors, SOURCES, SourceData, SourceReport, SourceSpec};
pub use run::{Deadline, Run, Unit};
pub use schedule::{Collection, Scheduler, SourceOutcome, Totals};
pub use source::{
    OptionKind, OptionSpec, OptionValue, OptionValues, Report, Source, SourceBuildError, Spec,
};
