//! The `infiniband` source: RDMA devices and ports from `/sys/class/infiniband`.
//!
//! Kernel interface: `drivers/infiniband/core/sysfs.c` (ABI document
//! `Documentation/ABI/stable/sysfs-class-infiniband`). It reads, per device, the identity files
//! and device-level `hw_counters/`; per port, `state`, `phys_state`, `rate`, `link_layer`,
//! `lid`/`sm_lid`, the PMA counters in `counters/` (and legacy `counters_ext/`), every driver
//! counter in `hw_counters/` under its own name, the GID table, and for RoCE/iWARP ports the
//! netdev and its MTU, from which it derives the active RDMA MTU with the driver's rule.
//!
//! Failure semantics: a file that is missing is "not provided"; a file that fails to read or
//! parse costs that file's value and is reported as a [`CollectError`]; a device that vanishes
//! mid-collection is dropped with one error; nothing a device does hides another device.
//! Devices are filtered by name *before* anything of theirs is read.
//!
//! What does not change while a device exists (its identity files, `device` and `driver`
//! links, each port's link layer, and the listings of its port, counter and driver-counter
//! directories) is read once and kept ([`Known`]); it is read again after [`KNOWN_FOR`], after
//! any read of the device fails, and as soon as a kept-open file of the device says it was
//! removed ([`Fs::changes`]: a device removed and added again under the same name, as on a
//! driver reload or firmware reset). Counters, port state, rate and the GID table are read
//! every scrape.

pub(crate) mod netlink;
pub mod parse;
pub mod pma;
#[cfg(test)]
mod proptests;
pub mod types;
pub(crate) mod verbs;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use regex::Regex;

pub use types::*;

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::KeptFile;
use crate::fs::attr::{self, Attrs};
use crate::fs::{ChildPath, Fs, PathMap, Roots, is_not_found};
use crate::run::{Run, standalone};
use crate::source::{
    Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec, regex_option,
};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "infiniband",
    help: "InfiniBand and RoCE devices and ports from /sys/class/infiniband: state, rate, width, PMA and driver counters, GIDs, RoCE MTU.",
    default_enabled: true,
    options: &[
        OptionSpec {
            name: "device-include",
            help: "Regular expression of RDMA device names to read (unanchored); others are never read.",
            kind: OptionKind::Regex,
        },
        OptionSpec {
            name: "device-exclude",
            help: "Regular expression of RDMA device names to skip without reading them (unanchored).",
            kind: OptionKind::Regex,
        },
        OptionSpec {
            name: "verbs-library",
            help: "libibverbs to load for the active and max MTU of every port (ibv_query_port); empty disables it. A missing library is no data, not an error.",
            kind: OptionKind::Path,
        },
        OptionSpec {
            name: "hw-counters-source",
            help: "Where port driver counters come from: netlink (one RDMA_NLDEV_CMD_STAT_GET per port), sysfs (one read per hw_counters file), or auto: netlink when --path.sysfs is /sys and the kernel has RDMA netlink, else sysfs.",
            kind: OptionKind::Choice(&["auto", "netlink", "sysfs"]),
        },
    ],
};

/// Where port-level driver counters are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HwSource {
    /// RDMA netlink when the kernel has it, else sysfs.
    Auto,
    /// RDMA netlink only; failing to open it is an error.
    Netlink,
    /// sysfs `hw_counters/` files.
    Sysfs,
}

/// The libibverbs loaded for MTUs unless `--collector.infiniband.verbs-library` says otherwise.
pub const DEFAULT_VERBS_LIBRARY: &str = "libibverbs.so.1";

/// How long one RDMA netlink request may take.
const NETLINK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

type Netlink = Mutex<(netlink::RdmaNetlink, netlink::NetlinkView)>;

/// Reads `/sys/class/infiniband`. Cloning it is cheap (shared handles), so each device's
/// unit of work owns one.
#[derive(Debug, Clone)]
pub struct InfinibandSource {
    fs: Arc<dyn Fs>,
    class_dir: PathBuf,
    net_dir: PathBuf,
    include: Option<Regex>,
    exclude: Option<Regex>,
    hw_source: HwSource,
    verbs: Option<Arc<verbs::Verbs>>,
    /// Which GID slots of each port were occupied, and when the whole table was last read.
    gid_tables: Arc<Mutex<PathMap<GidTable>>>,
    /// What each device's directory holds that does not change, by device name.
    known: Arc<Mutex<HashMap<String, Arc<Known>>>>,
}

pub use crate::fs::attr::KNOWN_FOR;

/// A directory's entries, shared between the scrapes that use them.
type Listing = Arc<[Entry]>;

/// An entry of a kept listing. Its name is shared with the counters read through it, so a
/// counter's name costs no allocation per scrape, and once it has been read the file kept
/// open for it is held here, so a counter read every scrape is not looked up by path.
#[derive(Debug)]
struct Entry {
    name: Arc<str>,
    is_dir: bool,
    file: OnceLock<KeptFile>,
}

/// Keeps `entries` as a [`Listing`].
fn listing(entries: Vec<crate::fs::DirEntry>) -> Listing {
    entries
        .into_iter()
        .map(|e| Entry {
            name: Arc::from(e.name),
            is_dir: e.is_dir,
            file: OnceLock::new(),
        })
        .collect()
}

/// What a device's directory holds that does not change while the device exists: static
/// attributes and links, and directory listings, by path (`None`: the kernel does not provide
/// it). Only a read of the device without errors is kept.
#[derive(Debug, Clone)]
struct Known {
    attrs: PathMap<Option<String>>,
    links: PathMap<Option<String>>,
    lists: PathMap<Option<Listing>>,
    /// When it was read.
    read_at: Instant,
    /// [`Fs::changes`] of the device directory then.
    changes: u64,
}

impl Known {
    fn new(changes: u64) -> Self {
        Known {
            attrs: PathMap::default(),
            links: PathMap::default(),
            lists: PathMap::default(),
            read_at: Instant::now(),
            changes,
        }
    }

    fn is_empty(&self) -> bool {
        self.attrs.is_empty() && self.links.is_empty() && self.lists.is_empty()
    }
}

/// What the last read of a port's GID table found.
#[derive(Debug)]
struct GidTable {
    /// Every slot the `gids/` directory lists, in ascending order.
    slots: Vec<u32>,
    /// The slots that held a GID, in ascending order.
    occupied: Vec<u32>,
    /// When every slot was last read.
    full_read: Instant,
}

/// How often every slot of a GID table is read; in between, only the occupied slots and the
/// first [`GID_FREE_PROBES`] free ones are.
pub const GID_FULL_EVERY: Duration = Duration::from_secs(60);

/// How many free GID slots are read each scrape. The kernel puts a new GID in the lowest free
/// slot (`find_gid()` in `drivers/infiniband/core/cache.c` returns the first empty entry),
/// except that the default-GID slots are kept for default GIDs: three cover those.
pub const GID_FREE_PROBES: usize = 3;

impl InfinibandSource {
    /// A source over `roots` that reads through `fs`, reading the devices `include` matches and
    /// `exclude` does not.
    pub fn new(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        include: Option<Regex>,
        exclude: Option<Regex>,
    ) -> Self {
        InfinibandSource {
            fs,
            class_dir: roots.sysfs.join("class/infiniband"),
            net_dir: roots.sysfs.join("class/net"),
            include,
            exclude,
            hw_source: HwSource::Sysfs,
            verbs: None,
            gid_tables: Arc::new(Mutex::new(PathMap::default())),
            known: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Whether the device filter lets `name` be read.
    pub fn wants(&self, name: &str) -> bool {
        self.include.as_ref().is_none_or(|re| re.is_match(name))
            && !self.exclude.as_ref().is_some_and(|re| re.is_match(name))
    }

    /// Reads every wanted device, with a deadline of five seconds.
    pub fn read(&self) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// Reads every wanted device, one unit of `run` per device: a device whose read blocks
    /// costs only its own series.
    pub fn read_in(&self, run: &Run<'_>) -> Report<Snapshot> {
        let mut errors = Vec::new();
        let entries = match self.fs.read_dir(&self.class_dir) {
            Ok(entries) => entries,
            Err(err) if is_not_found(&err) => {
                return Report::absent(
                    Snapshot::default(),
                    format!("{} does not exist", self.class_dir.display()),
                );
            }
            Err(err) => {
                errors.push(CollectError::io(None, &self.class_dir, &err));
                return Report::failed(errors);
            }
        };
        let netlink = self.open_netlink(&mut errors).map(Arc::new);
        let names: Vec<String> = entries
            .into_iter()
            .filter(|e| self.wants(&e.name))
            .map(|e| e.name)
            .collect();
        // Forget what was kept of devices that are gone, and let the file system forget them
        // too (files kept open, files that refused reads): a device that comes back under the
        // same name is read afresh.
        let mut gone = Vec::new();
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, _| {
                let keep = names.contains(name);
                if !keep {
                    gone.push(self.class_dir.join(name));
                }
                keep
            });
        for dir in &gone {
            self.fs.release(dir);
        }
        self.gid_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|port_dir, _| {
                port_dir
                    .strip_prefix(&self.class_dir)
                    .ok()
                    .and_then(|rel| rel.components().next())
                    .is_some_and(|dev| names.iter().any(|n| dev.as_os_str() == n.as_str()))
            });
        let src = self.clone();
        let units = run.each(names, 1, move |name| {
            let dir = src.class_dir.join(name);
            let changes = src.fs.changes(&dir);
            let known = src
                .known
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(name)
                .filter(|k| k.changes == changes && k.read_at.elapsed() < KNOWN_FOR)
                .cloned();
            let mut reader = DeviceReader {
                src: &src,
                name,
                dir,
                errors: Vec::new(),
                netlink: netlink.as_deref(),
                learned: Known::new(changes),
                known,
            };
            let device = reader.read();
            reader.keep_known();
            (device, reader.errors)
        });
        let mut devices = Vec::new();
        for (_, unit) in units {
            let Some((device, device_errors)) = unit.done() else {
                continue; // late: its timeout is the run's error
            };
            if let Some(mut device) = device {
                device.errors = device_errors.len() as u64;
                devices.push(device);
            }
            errors.extend(device_errors);
        }
        self.apply_verbs(&mut devices, &mut errors);
        Report::new(Snapshot { devices }, errors)
    }
}

impl InfinibandSource {
    /// Replaces derived MTUs with what `ibv_query_port` says, where libibverbs can open the
    /// device.
    fn apply_verbs(&self, devices: &mut [Device], errors: &mut Vec<CollectError>) {
        let Some(verbs) = &self.verbs else { return };
        let ports: std::collections::HashMap<String, Vec<u32>> = devices
            .iter()
            .map(|d| (d.name.clone(), d.ports.iter().map(|p| p.number).collect()))
            .collect();
        match verbs.port_mtus(&ports) {
            Ok(mtus) => {
                for device in devices.iter_mut() {
                    for port in &mut device.ports {
                        if let Some(mtu) = mtus.get(&(device.name.clone(), port.number)) {
                            port.active_mtu = Some(mtu.active);
                            port.max_mtu = Some(mtu.max);
                            port.mtu_source = Some("verbs");
                        }
                    }
                }
            }
            // ENOSYS: the kernel has no uverbs; not an error on a node without RDMA.
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) || devices.is_empty() => {}
            Err(err) => errors.push(CollectError::verbs(None, "ibv_get_device_list", &err)),
        }
    }

    fn open_netlink(&self, errors: &mut Vec<CollectError>) -> Option<Netlink> {
        if self.hw_source == HwSource::Sysfs {
            return None;
        }
        let opened = netlink::RdmaNetlink::open(NETLINK_TIMEOUT)
            .map_err(|err| ("NETLINK_RDMA socket", err))
            .and_then(|mut nl| match nl.view() {
                Ok(view) => Ok((nl, view)),
                Err(err) => Err(("RDMA_NLDEV_CMD_GET and RDMA_NLDEV_CMD_PORT_GET", err)),
            });
        match opened {
            Ok(pair) => Some(Mutex::new(pair)),
            Err((command, err)) => {
                // Auto: a kernel without RDMA netlink is simply read through sysfs.
                if self.hw_source == HwSource::Netlink {
                    errors.push(CollectError::netlink(None, Origin::RDMA, command, &err));
                }
                None
            }
        }
    }
}

impl Source for InfinibandSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs, options) = (from.roots, Arc::clone(&from.fs), from.options);
        let hw_source = match options.get("hw-counters-source").map(String::as_str) {
            None | Some("auto") => HwSource::Auto,
            Some("netlink") => HwSource::Netlink,
            Some("sysfs") => HwSource::Sysfs,
            Some(other) => {
                return Err(SourceBuildError {
                    option: "hw-counters-source".into(),
                    reason: format!("{other:?} is not one of auto, netlink, sysfs"),
                });
            }
        };
        let mut source = InfinibandSource::new(
            roots,
            fs,
            regex_option(options, "device-include")?,
            regex_option(options, "device-exclude")?,
        );
        let library = options
            .get("verbs-library")
            .map(String::as_str)
            .unwrap_or(DEFAULT_VERBS_LIBRARY);
        // Verbs talk to the devices of this node, so they are only used on the real sysfs.
        if !library.is_empty() && roots.sysfs == std::path::Path::new(crate::fs::DEFAULT_SYSFS) {
            source.verbs = verbs::Verbs::load(library).map(std::sync::Arc::new);
        }
        source.hw_source = match hw_source {
            HwSource::Auto if roots.sysfs != std::path::Path::new(crate::fs::DEFAULT_SYSFS) => {
                HwSource::Sysfs
            }
            other => other,
        };
        Ok(source)
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// Reads one device, collecting its errors.
struct DeviceReader<'a> {
    src: &'a InfinibandSource,
    name: &'a str,
    dir: PathBuf,
    errors: Vec<CollectError>,
    netlink: Option<&'a Netlink>,
    /// What was kept of the device, if still valid.
    known: Option<Arc<Known>>,
    /// What this read found that `known` did not have.
    learned: Known,
}

impl DeviceReader<'_> {
    fn fs(&self) -> &dyn Fs {
        self.src.fs.as_ref()
    }

    /// Keeps what this read learned for the next, if the read had no errors and the device
    /// did not change meanwhile; forgets what was kept otherwise.
    fn keep_known(&mut self) {
        let changed = self.fs().changes(&self.dir) != self.learned.changes;
        let mut known = self.src.known.lock().unwrap_or_else(|e| e.into_inner());
        if self.failed() || changed {
            known.remove(self.name);
            return;
        }
        if self.learned.is_empty() && self.known.is_some() {
            return;
        }
        let mut kept = match self.known.take() {
            Some(old) => Known::clone(&old),
            None => Known::new(self.learned.changes),
        };
        let learned = std::mem::replace(&mut self.learned, Known::new(0));
        kept.attrs.extend(learned.attrs);
        kept.links.extend(learned.links);
        kept.lists.extend(learned.lists);
        known.insert(self.name.to_owned(), Arc::new(kept));
    }

    /// An attribute that does not change while the device exists (see [`Known`]).
    fn static_attr(&mut self, path: &Path) -> Option<String> {
        if let Some(value) = self.known.as_ref().and_then(|k| k.attrs.get(path)) {
            return value.clone();
        }
        let before = self.errors.len();
        let value = self.attr(path);
        if self.errors.len() == before {
            self.learned.attrs.insert(path, value.clone());
        }
        value
    }

    /// A link that does not change while the device exists; any failure is no link.
    fn static_link(&mut self, path: &Path) -> Option<String> {
        if let Some(value) = self.known.as_ref().and_then(|k| k.links.get(path)) {
            return value.clone();
        }
        let read = attr::read_link_name(self.fs(), None, path);
        if let Ok(value) = &read {
            self.learned.links.insert(path, value.clone());
        }
        read.ok().flatten()
    }

    /// A listing that does not change while the device exists (`None`: not provided, or it
    /// failed, with an error recorded).
    fn static_list(&mut self, path: &Path) -> Option<Listing> {
        if let Some(value) = self.known.as_ref().and_then(|k| k.lists.get(path)) {
            return value.clone();
        }
        let before = self.errors.len();
        let value = self.list(path).map(listing);
        if self.errors.len() == before {
            self.learned.lists.insert(path, value.clone());
        }
        value
    }

    /// Reads this device's attributes, recording their errors.
    fn attrs(&mut self) -> Attrs<'_> {
        Attrs::new(self.src.fs.as_ref(), Some(self.name), &mut self.errors)
    }

    /// Reads an optional attribute: missing is `None` without an error, a failed read is
    /// `None` with one.
    fn attr(&mut self, path: &Path) -> Option<String> {
        self.attrs().string(path)
    }

    /// [`Self::static_attr`], parsed; a parse failure is recorded (and the text not kept).
    fn static_parsed<T>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(&str) -> Result<T, parse::ParseError>,
    ) -> Option<T> {
        let text = self.static_attr(path)?;
        match parse(&text) {
            Ok(value) => Some(value),
            Err(invalid) => {
                self.learned.attrs.remove(path);
                let invalid: attr::Invalid = invalid.into();
                self.errors.push(CollectError::new(
                    Some(self.name),
                    path,
                    invalid.kind,
                    invalid.detail,
                ));
                None
            }
        }
    }

    /// Reads and parses an optional attribute; a parse failure is recorded.
    fn parsed<T>(
        &mut self,
        path: &Path,
        parse: impl FnOnce(&str) -> Result<T, parse::ParseError>,
    ) -> Option<T> {
        self.attrs().parsed(path, parse)
    }

    /// Reads and parses the file of `entry` (at `path`) in a kept listing, through the file
    /// kept open for it once it has been read; a parse failure is recorded.
    fn entry_parsed<T>(
        &mut self,
        path: &Path,
        entry: &Entry,
        parse: impl FnOnce(&str) -> Result<T, parse::ParseError>,
    ) -> Option<T> {
        let kept = entry.file.get();
        let value = self.attrs().parsed_via(path, kept, parse);
        if kept.is_none()
            && value.is_some()
            && let Some(file) = self.fs().keep_handle(path)
        {
            let _ = entry.file.set(file);
        }
        value
    }

    /// Lists a directory that may legitimately be absent.
    fn list(&mut self, path: &Path) -> Option<Vec<crate::fs::DirEntry>> {
        self.attrs().list(path)
    }

    /// Whether the device's name is still there: its class link (or, in a tree that has
    /// a directory there, the directory).
    fn named(&self) -> bool {
        match self.fs().read_link(&self.dir) {
            Ok(_) => true,
            Err(err) => err.raw_os_error() == Some(libc::EINVAL) && self.fs().exists(&self.dir),
        }
    }

    fn vanished(&self) -> bool {
        !self.fs().exists(&self.dir)
    }

    /// Whether a read of this device failed. Files that refused reads before and back off
    /// ([`crate::fs::refused`]) fail the same way every time: they say nothing new about the
    /// device.
    fn failed(&self) -> bool {
        self.errors.iter().any(|e| e.kind != ErrorKind::Refused)
    }

    /// Whether a read of this device timed out or was skipped behind a blocked one.
    fn blocked(&self) -> bool {
        self.errors
            .iter()
            .any(|e| matches!(e.kind, ErrorKind::Timeout | ErrorKind::Skipped))
    }

    fn read(&mut self) -> Option<Device> {
        let dir = self.dir.clone();
        let mut at = ChildPath::new(&dir);
        // Files kept open answer for a device whose name is gone (the class link goes first
        // when a device is removed): one look at the name says it is still there. The link
        // itself is read, not followed into the device's directory, which would walk the
        // PCI path behind it.
        if self.known.is_some() && !self.named() {
            self.known = None;
        }
        let mut device = Device {
            name: self.name.to_owned(),
            ..Device::default()
        };
        device.node_type = self.static_parsed(at.of("node_type"), parse::parse_enumerated);
        device.node_guid = self.static_attr(at.of("node_guid"));
        device.sys_image_guid = self.static_attr(at.of("sys_image_guid"));
        device.fw_ver = self.static_attr(at.of("fw_ver")).filter(|v| !v.is_empty());
        device.hca_type = self.static_attr(at.of("hca_type"));
        device.board_id = self.static_attr(at.of("board_id"));
        device.parent_netdev = self.static_attr(at.of("parent"));

        // The `device` link points at the PCI function; software devices have none. A link
        // that cannot be read is no PCI function either.
        let pci = self.static_link(at.of("device")).unwrap_or_default();
        if crate::fs::is_pci_address(&pci) {
            device.pci_address = Some(pci);
            device.numa_node =
                self.static_parsed(at.of("device/numa_node"), parse::parse_int::<i64>);
            device.driver = self.static_link(at.of("device/driver"));
        }
        if device.driver.is_none() && device.parent_netdev.is_some() {
            device.driver = Some("rdma_rxe".to_owned());
        }

        let (counters, lifespan) = self.hw_counters(at.of("hw_counters"));
        device.hw_counters = counters;
        device.hw_counters_lifespan_ms = lifespan;

        let ports_dir = dir.join("ports");
        let listed = match self.known.as_ref().and_then(|k| k.lists.get(&ports_dir)) {
            Some(Some(entries)) => Ok(Arc::clone(entries)),
            _ => self
                .fs()
                .read_dir(&ports_dir)
                .map(listing)
                .inspect(|entries| {
                    self.learned
                        .lists
                        .insert(&ports_dir, Some(Arc::clone(entries)));
                }),
        };
        let entries = match listed {
            Ok(entries) => entries,
            Err(err) => {
                if self.blocked() {
                    self.errors
                        .push(CollectError::io(Some(self.name), &ports_dir, &err));
                    return None;
                }
                if self.vanished() {
                    self.vanish(&ports_dir);
                    return None;
                }
                if !is_not_found(&err) {
                    self.errors
                        .push(CollectError::io(Some(self.name), &ports_dir, &err));
                }
                Listing::from([])
            }
        };
        let rule = mtu_rule(&device);
        for entry in entries.iter() {
            let Ok(number) = entry.name.parse::<u32>() else {
                continue;
            };
            let port = self.read_port(number, &ports_dir.join(&*entry.name), &device, rule);
            device.ports.push(port);
        }
        // A device with a read blocked in the kernel was not read past it: skip it whole until
        // the read returns, reported by its timeout (the guard cannot tell whether its
        // directory still exists, so it is not taken for vanished).
        if self.blocked() {
            return None;
        }
        // A device removed while its files were read has read errors, or kept-open files
        // that said so, but no directory left: report it once as vanished instead of
        // exporting a half-read device.
        let changed = self.fs().changes(&dir) != self.learned.changes;
        if (changed || self.failed()) && self.vanished() {
            self.vanish(&dir);
            return None;
        }
        Some(device)
    }

    fn vanish(&mut self, path: &Path) {
        self.errors.retain(|_| false);
        self.errors.push(CollectError::new(
            Some(self.name),
            path,
            ErrorKind::Vanished,
            "the device was listed but removed before it could be read",
        ));
    }

    fn read_port(&mut self, number: u32, dir: &Path, device: &Device, rule: MtuRule) -> Port {
        let mut at = ChildPath::new(dir);
        let mut port = Port {
            number,
            ..Port::default()
        };
        port.state = self.parsed(at.of("state"), parse::parse_enumerated);
        port.phys_state = self.parsed(at.of("phys_state"), parse::parse_enumerated);
        port.link_layer = self.static_attr(at.of("link_layer"));
        port.rate = self.parsed(at.of("rate"), parse::parse_rate);
        let infiniband = port.link_layer.as_deref() == Some("InfiniBand");
        if infiniband {
            port.lid = self.parsed(at.of("lid"), parse::parse_hex_u32);
            port.sm_lid = self.parsed(at.of("sm_lid"), parse::parse_hex_u32);
        }
        port.pma = self.pma_counters(dir);
        match self.netlink_stats(number) {
            Some(counters) => {
                port.hw_counters = counters;
                port.hw_counters_source = Some("netlink");
            }
            None => {
                let (counters, lifespan) = self.hw_counters(at.of("hw_counters"));
                if !counters.is_empty() || lifespan.is_some() {
                    port.hw_counters_source = Some("sysfs");
                }
                port.hw_counters = counters;
                port.hw_counters_lifespan_ms = lifespan;
            }
        }
        port.gids = self.gids(dir, infiniband);

        if !infiniband {
            let netlink_netdev = self.netlink.and_then(|nl| {
                nl.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .1
                    .netdevs
                    .get(&(self.name.to_owned(), number))
                    .cloned()
            });
            port.netdev = port
                .gids
                .iter()
                .flatten()
                .find_map(|g| g.netdev.clone())
                .or(netlink_netdev)
                .or_else(|| device.parent_netdev.clone())
                .or_else(|| self.single_pci_netdev());
            if let Some(netdev) = &port.netdev {
                let path = self.src.net_dir.join(netdev).join("mtu");
                port.netdev_mtu = self.parsed(&path, parse::parse_int::<u32>);
                if let Some(mtu) = port.netdev_mtu {
                    port.active_mtu = Some(parse::roce_active_mtu(rule, mtu));
                    port.mtu_rule = Some(rule);
                    port.mtu_source = Some("netdev");
                }
            }
        }
        port
    }

    /// The port's driver counters over RDMA netlink, when netlink is in use and knows the
    /// device. A port without driver counters (the kernel answers EINVAL or EOPNOTSUPP) and
    /// any failure fall back to sysfs; failures other than those are recorded.
    fn netlink_stats(&mut self, port: u32) -> Option<Vec<HwCounter>> {
        let cell = self.netlink?;
        let mut guard = cell.lock().unwrap_or_else(|e| e.into_inner());
        let (nl, view) = &mut *guard;
        let index = *view.devices.get(self.name)?;
        match nl.port_stats(index, port) {
            Ok(stats) => Some(
                stats
                    .into_iter()
                    .map(|(name, value)| HwCounter { name, value })
                    .collect(),
            ),
            Err(err)
                if matches!(
                    err.raw_os_error(),
                    Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOENT)
                ) =>
            {
                None
            }
            Err(err) => {
                self.errors
                    .push(netlink::stat_get_error(self.name, port, &err));
                None
            }
        }
    }

    /// The netdev of a PCI function that has exactly one (one port per function, as on
    /// every ConnectX since ConnectX-4).
    fn single_pci_netdev(&mut self) -> Option<String> {
        let path = self.dir.join("device/net");
        let entries = match self.known.as_ref().and_then(|k| k.lists.get(&path)) {
            Some(known) => known.clone()?,
            None => {
                let entries = self.fs().read_dir(&path).ok().map(listing);
                self.learned.lists.insert(&path, entries.clone());
                entries?
            }
        };
        match &*entries {
            [only] => Some(only.name.to_string()),
            _ => None,
        }
    }

    fn pma_counters(&mut self, port_dir: &Path) -> Vec<PmaCounter> {
        // (rank in the kernel's order, or past it; counter)
        let mut counters: Vec<(usize, PmaCounter)> = Vec::new();
        let counters_dir = port_dir.join("counters");
        if let Some(entries) = self.static_list(&counters_dir) {
            // The extended group (unicast/multicast files) has 64-bit data and packet counters.
            let extended = entries.iter().any(|e| &*e.name == "unicast_xmit_packets");
            counters.reserve(entries.len());
            let mut path = ChildPath::new(&counters_dir);
            for entry in entries.iter().filter(|e| !e.is_dir) {
                let Some(value) =
                    self.entry_parsed(path.of(&entry.name), entry, parse::parse_counter)
                else {
                    continue;
                };
                let rank = pma::rank(&entry.name);
                let spec = pma::PMA_COUNTERS.get(rank);
                let bits = match spec.map(|s| s.width) {
                    Some(pma::Width::Fixed(bits)) => Some(bits),
                    Some(pma::Width::BaseOrExtended) if extended || value > u64::from(u32::MAX) => {
                        Some(64)
                    }
                    Some(pma::Width::BaseOrExtended) => Some(32),
                    None => None,
                };
                counters.push((
                    rank,
                    PmaCounter {
                        name: Arc::clone(&entry.name),
                        value,
                        bits,
                        dir: PmaDir::Counters,
                    },
                ));
            }
        }
        let ext_dir = port_dir.join("counters_ext");
        if let Some(entries) = self.static_list(&ext_dir) {
            let mut path = ChildPath::new(&ext_dir);
            for entry in entries.iter().filter(|e| !e.is_dir) {
                let Some(value) =
                    self.entry_parsed(path.of(&entry.name), entry, parse::parse_counter)
                else {
                    continue;
                };
                let name: Arc<str> = match pma::legacy_ext_name(&entry.name) {
                    Some(legacy) => Arc::from(legacy),
                    None => Arc::clone(&entry.name),
                };
                let counter = PmaCounter {
                    name,
                    value,
                    bits: Some(64),
                    dir: PmaDir::CountersExt,
                };
                // A 64-bit legacy counter replaces the base group's whenever that one does not
                // count it: 32-bit, or stuck at 0 while the legacy one counts (mlx4 on old OFED
                // kernels leaves `counters/` at 0 and counts in `counters_ext/`). A base counter
                // that is 64-bit and counts stays: both then hold the same count.
                match counters.iter_mut().find(|(_, c)| c.name == counter.name) {
                    Some((_, existing))
                        if existing.bits.is_some_and(|b| b >= 64)
                            && !(existing.value == 0 && counter.value > 0) => {}
                    Some((_, existing)) => *existing = counter,
                    None => counters.push((pma::rank(&counter.name), counter)),
                }
            }
        }
        // Kernel order for known counters, then the rest by name.
        counters.sort_unstable_by(|(ra, a), (rb, b)| ra.cmp(rb).then_with(|| a.name.cmp(&b.name)));
        counters.into_iter().map(|(_, c)| c).collect()
    }

    fn hw_counters(&mut self, dir: &Path) -> (Vec<HwCounter>, Option<u64>) {
        let Some(entries) = self.static_list(dir) else {
            return (Vec::new(), None);
        };
        let mut counters = Vec::with_capacity(entries.len());
        let mut lifespan = None;
        let mut path = ChildPath::new(dir);
        for entry in entries.iter().filter(|e| !e.is_dir) {
            let path = path.of(&entry.name);
            if &*entry.name == "lifespan" {
                lifespan = self.entry_parsed(path, entry, parse::parse_int::<u64>);
            } else if let Some(value) = self.entry_parsed(path, entry, parse::parse_counter) {
                counters.push(HwCounter {
                    name: Arc::clone(&entry.name),
                    value,
                });
            }
        }
        (counters, lifespan)
    }

    /// The port's GID table. Every slot is read every [`GID_FULL_EVERY`] and whenever a free
    /// slot that is probed turns out occupied; in between, the occupied slots and the first
    /// [`GID_FREE_PROBES`] free ones (where the kernel puts a new GID) are read, so a GID that
    /// is added or removed is seen the scrape after, at a fraction of the reads (an mlx5 RoCE
    /// port lists 255 slots, rxe 1,024, nearly all free).
    fn gids(&mut self, port_dir: &Path, infiniband: bool) -> Option<Vec<Gid>> {
        let known = self
            .src
            .gid_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(port_dir)
            .filter(|t| t.full_read.elapsed() < GID_FULL_EVERY);
        if let Some(mut table) = known {
            let free = table
                .slots
                .iter()
                .filter(|s| table.occupied.binary_search(s).is_err())
                .take(GID_FREE_PROBES);
            let mut probe: Vec<u32> = table.occupied.iter().chain(free).copied().collect();
            probe.sort_unstable();
            let gids = self.read_gids(port_dir, &probe, infiniband);
            let grew = gids
                .iter()
                .any(|g| table.occupied.binary_search(&g.index).is_err());
            if !grew {
                table.occupied.clear();
                table.occupied.extend(gids.iter().map(|g| g.index));
                self.remember_gids(port_dir, table);
                return Some(gids);
            }
        }
        let mut slots: Vec<u32> = self
            .list(&port_dir.join("gids"))?
            .into_iter()
            .filter_map(|e| e.name.parse::<u32>().ok())
            .collect();
        slots.sort_unstable();
        let gids = self.read_gids(port_dir, &slots, infiniband);
        let occupied = gids.iter().map(|g| g.index).collect();
        self.remember_gids(
            port_dir,
            GidTable {
                slots,
                occupied,
                full_read: Instant::now(),
            },
        );
        Some(gids)
    }

    fn remember_gids(&self, port_dir: &Path, table: GidTable) {
        self.src
            .gid_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port_dir, table);
    }

    /// Reads the GID slots `slots` (indexes under `gids/`), returning the occupied ones.
    fn read_gids(&mut self, port_dir: &Path, slots: &[u32], infiniband: bool) -> Vec<Gid> {
        let mut gid_path = ChildPath::new(&port_dir.join("gids"));
        let mut type_path = ChildPath::new(&port_dir.join("gid_attrs/types"));
        let mut ndev_path = ChildPath::new(&port_dir.join("gid_attrs/ndevs"));
        let mut gids = Vec::new();
        let mut slot_name = String::new();
        for &index in slots {
            slot_name.clear();
            let _ = write!(slot_name, "{index}");
            let Some(Some(gid)) = self.parsed(gid_path.of(&slot_name), parse::parse_gid) else {
                continue;
            };
            // For a slot without attributes the kernel fails these reads with EINVAL "for user
            // space compatibility"; and native InfiniBand GIDs never have a netdev, so theirs
            // is not read.
            let gid_type = self.gid_attr(type_path.of(&slot_name));
            let netdev = if infiniband {
                None
            } else {
                self.gid_attr(ndev_path.of(&slot_name))
            };
            gids.push(Gid {
                index,
                gid,
                gid_type,
                netdev,
            });
        }
        gids
    }

    fn gid_attr(&mut self, path: &Path) -> Option<String> {
        self.attrs()
            .unknown_on(&[libc::EINVAL])
            .string(path)
            .filter(|v| !v.is_empty())
    }
}

/// Chooses the active-MTU rule of a device's driver: `iboe_get_mtu()` (`include/rdma/ib_addr.h`)
/// for mlx4/mlx5/bnxt_re and most RoCE drivers, `rxe_set_mtu()` (`drivers/infiniband/sw/rxe/rxe.c`)
/// for Soft-RoCE, `iw_query_port()` (`drivers/infiniband/core/device.c`) for iWARP.
pub fn mtu_rule(device: &Device) -> MtuRule {
    if device.parent_netdev.is_some() {
        return MtuRule::Rxe;
    }
    // iWARP devices (node type 4, RNIC) use iw_query_port(); irdma (on the ice/i40e PCI
    // drivers) converts the netdev MTU without subtracting headers in RoCE mode too.
    if device.node_type.as_ref().is_some_and(|t| t.value == 4) {
        return MtuRule::NoHeaders;
    }
    match device.driver.as_deref() {
        Some("ice" | "i40e" | "irdma") => MtuRule::NoHeaders,
        _ => MtuRule::Iboe,
    }
}

#[cfg(test)]
mod tests;
