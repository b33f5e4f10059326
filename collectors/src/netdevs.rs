//! Which network interfaces the netdev-reading sources (`ethtool`, `dcb`, `netdev`) read, and
//! whether a netdev of the sysfs tree is the one rtnetlink knows by its name
//! (`is_same_netdev`).
//!
//! By default: the netdevs behind RDMA ports (GID netdevs, Soft-RoCE parents, the PCI
//! function's `net/` entries) and the physical netdevs (those with a `device` link in
//! `/sys/class/net/<name>`). `device-include` chooses any netdevs instead (veth included);
//! `device-exclude` removes netdevs from either set. Both are unanchored regular
//! expressions, applied before anything of the netdev is read.

use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;

use crate::error::CollectError;
use crate::fs::Fs;
use crate::netlink::rtnl::Link;
use crate::source::{OptionKind, OptionSpec, OptionValues, SourceBuildError, regex_option};
use crate::sysfs::{self, Attrs};

/// The `device-include` / `device-exclude` options every netdev-reading source has.
pub const FILTER_OPTIONS: [OptionSpec; 2] = [
    OptionSpec {
        name: "device-include",
        help: "Regular expression (unanchored) of netdevs to read instead of the default set (RDMA and physical netdevs); veth and others included.",
        kind: OptionKind::Regex,
    },
    OptionSpec {
        name: "device-exclude",
        help: "Regular expression (unanchored) of netdevs never to read.",
        kind: OptionKind::Regex,
    },
];

/// A netdev selection.
#[derive(Debug, Clone, Default)]
pub struct NetdevFilter {
    /// When set, the netdevs to read (replacing the default set).
    pub include: Option<Regex>,
    /// Netdevs never read.
    pub exclude: Option<Regex>,
}

impl NetdevFilter {
    /// Builds the filter from a source's options.
    pub fn from_options(options: &OptionValues) -> Result<Self, SourceBuildError> {
        Ok(NetdevFilter {
            include: regex_option(options, "device-include")?,
            exclude: regex_option(options, "device-exclude")?,
        })
    }

    /// The selected netdevs, sorted by name.
    pub fn select(&self, fs: &dyn Fs, sysfs: &Path) -> Vec<String> {
        let class = sysfs.join("class/net");
        let all: Vec<String> = fs
            .read_dir(&class)
            .map(|e| e.into_iter().map(|e| e.name).collect())
            .unwrap_or_default();
        let wanted: BTreeSet<String> = match &self.include {
            Some(include) => all
                .iter()
                .filter(|n| include.is_match(n))
                .cloned()
                .collect(),
            None => {
                let mut set = rdma_netdevs(fs, sysfs);
                set.extend(
                    all.iter()
                        .filter(|n| fs.read_link(&class.join(n).join("device")).is_ok())
                        .cloned(),
                );
                set.retain(|n| all.contains(n));
                set
            }
        };
        wanted
            .into_iter()
            .filter(|n| !self.exclude.as_ref().is_some_and(|re| re.is_match(n)))
            .collect()
    }
}

/// The netdevs behind RDMA ports: GID netdevs, Soft-RoCE parents and the RDMA device's PCI
/// function's netdevs.
pub fn rdma_netdevs(fs: &dyn Fs, sysfs: &Path) -> BTreeSet<String> {
    let class = sysfs.join("class/infiniband");
    let mut out = BTreeSet::new();
    let Ok(devices) = fs.read_dir(&class) else {
        return out;
    };
    for dev in devices {
        let dir = class.join(&dev.name);
        if let Some(parent) = sysfs::peek(fs, &dir.join("parent")) {
            out.insert(parent);
        }
        for nd in fs.read_dir(&dir.join("device/net")).unwrap_or_default() {
            out.insert(nd.name);
        }
        for port in fs.read_dir(&dir.join("ports")).unwrap_or_default() {
            let ndevs = dir.join("ports").join(&port.name).join("gid_attrs/ndevs");
            // The netdev of a RoCE port owns its default GIDs, which the kernel keeps in the
            // first slots; reading those is enough (the table has up to 1024 slots, and every
            // unused one fails with EINVAL).
            for slot in ["0", "1", "2", "3"] {
                if let Some(name) = sysfs::peek(fs, &ndevs.join(slot)).filter(|n| !n.is_empty()) {
                    out.insert(name);
                }
            }
        }
    }
    out
}

/// Whether the rtnetlink `link` is the netdev `name` of the sysfs tree at `sysfs`: the same
/// name, and the same `ifindex` and `address` where sysfs has them. The check keeps a fixture
/// tree's `eth0` from borrowing the counters of the agent's own `eth0`. Read failures are
/// pushed to `errors`.
pub(crate) fn is_same_netdev(
    fs: &dyn Fs,
    sysfs: &Path,
    name: &str,
    link: &Link,
    errors: &mut Vec<CollectError>,
) -> bool {
    if link.name.as_deref() != Some(name) {
        return false;
    }
    let dir = sysfs.join("class/net").join(name);
    let mut attrs = Attrs::new(fs, Some(name), errors);
    let ifindex: Option<u32> = attrs.number(&dir.join("ifindex"));
    if ifindex.is_some_and(|i| i != link.index) {
        return false;
    }
    match (attrs.string(&dir.join("address")), &link.address) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => true,
    }
}
