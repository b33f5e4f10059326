//! The `netdev` source (being built).

use std::path::PathBuf;
use std::sync::Arc;

use crate::fs::{Fs, Roots};
use crate::netdevs::{FILTER_OPTIONS, NetdevFilter};
use crate::source::{OptionValues, Source, SourceBuildError, SourceData, SourceReport, SourceSpec};

/// The registry entry of this source.
pub const SPEC: SourceSpec = SourceSpec {
    name: "netdev",
    help: "(being built)",
    default_enabled: true,
    options: &FILTER_OPTIONS,
    build,
};

fn build(
    roots: &Roots,
    fs: Arc<dyn Fs>,
    options: &OptionValues,
) -> Result<Box<dyn Source>, SourceBuildError> {
    Ok(Box::new(Stub {
        fs,
        sysfs: roots.sysfs.clone(),
        filter: NetdevFilter::from_options(options)?,
    }))
}

/// What the source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Netdevs read.
    pub netdevs: Vec<String>,
}

#[derive(Debug)]
struct Stub {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
}

impl Source for Stub {
    fn name(&self) -> &'static str {
        SPEC.name
    }

    fn collect(&self) -> SourceReport {
        let netdevs = self.filter.select(self.fs.as_ref(), &self.sysfs);
        SourceReport {
            data: Some(SourceData::Netdev(Snapshot { netdevs })),
            errors: Vec::new(),
            absent: None,
        }
    }
}
