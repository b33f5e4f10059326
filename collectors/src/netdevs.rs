//! Which network interfaces the netdev-reading sources (`ethtool`, `dcb`, `netdev`) read,
//! whether a netdev of the sysfs tree is the one rtnetlink knows by its name
//! (`is_same_netdev`), and letting go of the netdevs that went away ([`Departures`]).
//!
//! By default: the netdevs behind RDMA ports (GID netdevs, Soft-RoCE parents, the PCI
//! function's `net/` entries) and the physical netdevs (those with a `device` link in
//! `/sys/class/net/<name>`). `device-include` chooses any netdevs instead (veth included);
//! `device-exclude` removes netdevs from either set. Both are unanchored regular
//! expressions, applied before anything of the netdev is read.
//!
//! **Netdevs come and go** (a Kubernetes node creates and deletes veths all day), and
//! nothing a source keeps may outlive its netdev. The sources keep no state per netdev of
//! their own; what the agent's file system keeps open between scrapes
//! (`crate::fs::KeptOpenFs`: the attribute files read under `class/net/<netdev>/`) it
//! drops when a read of a kept file fails with `ENODEV`, which is what kernfs answers once
//! the netdev was unregistered. A netdev that is no longer read would hold its files until
//! they are forgotten unread (`crate::fs::kept::FORGET_AFTER`), so each source remembers the
//! names it selected in its last collection ([`Departures`]; no more than the names
//! selected now) and, in the first collection that no longer selects a netdev, has the file
//! system close the files kept under its directory ([`let_go`], [`Fs::release`]). That
//! holds for a netdev renamed or moved to another namespace too: it is opened again by its
//! new name if it is still selected.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use regex::Regex;

use crate::error::CollectError;
use crate::fs::Fs;
use crate::fs::attr::{self, Attrs};
use crate::netlink::rtnl::Link;
use crate::source::{OptionKind, OptionSpec, OptionValues, SourceBuildError, regex_option};

/// The attribute files under `class/net/<netdev>/` that the identity check
/// (`is_same_netdev`) reads.
const IDENTITY_ATTRIBUTES: [&str; 2] = ["ifindex", "address"];

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
        if let Some(parent) = attr::peek(fs, &dir.join("parent")) {
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
                if let Some(name) = attr::peek(fs, &ndevs.join(slot)).filter(|n| !n.is_empty()) {
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
    let [ifindex, address] = IDENTITY_ATTRIBUTES;
    let mut attrs = Attrs::new(fs, Some(name), errors);
    let mut sysfs_index: Option<u32> = attrs.number(&dir.join(ifindex));
    if sysfs_index.is_some_and(|i| i != link.index) {
        // Files kept open follow the netdev they were opened for, not its name: after a
        // rename, a new netdev under the old name would be read through the old one's.
        // Look again through the name before calling them different.
        fs.release(&dir);
        let mut attrs = Attrs::new(fs, Some(name), errors);
        sysfs_index = attrs.number(&dir.join(ifindex));
        if sysfs_index.is_some_and(|i| i != link.index) {
            return false;
        }
    }
    let mut attrs = Attrs::new(fs, Some(name), errors);
    match (attrs.string(&dir.join(address)), &link.address) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => true,
    }
}

/// The netdevs a source selected in its last collection, to tell which ones left: no more
/// than the names selected now, whatever comes and goes. Shared by the clones of a source.
#[derive(Debug, Default)]
pub struct Departures {
    last: Mutex<Vec<String>>,
}

impl Departures {
    /// Notes `selected` (sorted, as [`NetdevFilter::select`] returns it) as this
    /// collection's selection and returns the netdevs of the last one that are not in it.
    pub fn update(&self, selected: &[String]) -> Vec<String> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_slice() == selected {
            return Vec::new();
        }
        let gone = last
            .iter()
            .filter(|name| selected.binary_search(name).is_err())
            .cloned()
            .collect();
        last.clear();
        last.extend_from_slice(selected);
        if last.capacity() > 2 * last.len() + 16 {
            last.shrink_to_fit();
        }
        gone
    }
}

/// Lets go of what the file system keeps open of each netdev in `departed` (netdevs that
/// left the selection): their files under `class/net/<netdev>/` are closed now rather than
/// when they are forgotten unread ([`Fs::release`]).
pub fn let_go(fs: &dyn Fs, sysfs: &Path, departed: &[String]) {
    let class = sysfs.join("class/net");
    for name in departed {
        fs.release(&class.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn departures_are_the_names_of_the_last_selection_not_selected_now() {
        let departures = Departures::default();
        assert!(
            departures
                .update(&names(&["eth0", "vcA1", "vcB1"]))
                .is_empty()
        );
        assert!(
            departures
                .update(&names(&["eth0", "vcA1", "vcB1"]))
                .is_empty()
        );
        assert_eq!(
            departures.update(&names(&["eth0", "vcA2"])),
            names(&["vcA1", "vcB1"])
        );
        assert_eq!(departures.update(&[]), names(&["eth0", "vcA2"]));
        assert!(departures.update(&[]).is_empty());
    }

    #[test]
    fn what_is_remembered_is_no_more_than_the_selection() {
        let departures = Departures::default();
        for i in 0..1_000 {
            let selection = names(&["eth0", &format!("vcA{i}"), &format!("vcB{i}")]);
            departures.update(&selection);
        }
        let last = departures.last.lock().unwrap();
        assert_eq!(last.len(), 3);
        assert!(last.capacity() <= 2 * 3 + 16);
    }

    #[test]
    fn a_new_netdev_under_an_old_name_is_not_read_through_the_old_ones_files() {
        use crate::fs::KeptOpenFs;
        use crate::fs::Roots;
        let dir = tempfile::tempdir().unwrap();
        let sysfs = dir.path().to_path_buf();
        for (device, index) in [("old", "5"), ("new", "9")] {
            let d = sysfs.join("devices/virtual/net").join(device);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("ifindex"), format!("{index}\n")).unwrap();
        }
        std::fs::create_dir_all(sysfs.join("class/net")).unwrap();
        let link_path = sysfs.join("class/net/vcA1");
        std::os::unix::fs::symlink("../../devices/virtual/net/old", &link_path).unwrap();
        let fs = KeptOpenFs::with_capacity(
            &Roots {
                sysfs: sysfs.clone(),
                procfs: std::path::PathBuf::from("/proc"),
            },
            64,
        );
        let mut errors = Vec::new();
        let link = |index| Link {
            index,
            name: Some("vcA1".into()),
            ..Link::default()
        };
        assert!(is_same_netdev(&fs, &sysfs, "vcA1", &link(5), &mut errors));
        // Renamed away, and a new netdev takes the name: its file is kept open still.
        std::fs::remove_file(&link_path).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/net/new", &link_path).unwrap();
        assert!(is_same_netdev(&fs, &sysfs, "vcA1", &link(9), &mut errors));
        assert!(!is_same_netdev(&fs, &sysfs, "vcA1", &link(5), &mut errors));
        assert_eq!(errors, vec![]);
    }
}
