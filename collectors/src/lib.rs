//! `railscope-collectors`: everything railscope reads from the node.
//!
//! Each *source* is one module that reads one kernel or library interface and returns plain,
//! typed data: a [`SourceReport`] holding a [`SourceData`] snapshot and the [`CollectError`]s met
//! on the way. Sources know nothing about HTTP or Prometheus; the `railscope` agent crate maps
//! their snapshots to metric families.
//!
//! Principal types:
//! * [`SOURCES`]: the ordered registry of sources. It drives the agent's `--collector.<name>`
//!   flags, their help text and the config file's `collectors:` keys.
//! * [`Source`]: the trait every source implements; `collect` is blocking and runs off the
//!   async runtime under a deadline chosen by the agent.
//! * [`fs::Fs`]: the file-system seam. Every path is resolved under an injectable root
//!   ([`Roots`]), so the whole agent runs against a fixture tree, and tests can inject errnos.
//! * [`infiniband`]: the InfiniBand/RoCE port source over `/sys/class/infiniband`.

pub mod error;
pub mod fs;
pub mod guard;
pub mod netdevs;
pub(crate) mod netlink;
pub mod pcie;
#[cfg(test)]
mod proptests;
pub mod source;
pub mod sources;
pub mod sysfs;

pub use error::{CollectError, ErrorKind};
#[cfg(any(test, feature = "testing"))]
pub use fs::{Fault, FaultFs};
pub use fs::{Fs, RealFs, Roots};
pub use guard::GuardedFs;
pub use source::{
    OptionSpec, OptionValues, SOURCES, Source, SourceBuildError, SourceData, SourceReport,
    SourceSpec,
};
