//! The `pci` source: PCIe link and AER health of every RDMA NIC, every NVIDIA GPU and every
//! bridge on their paths to the host bridge, read from `/sys/bus/pci/devices`
//! (`drivers/pci/pci-sysfs.c`, `drivers/pci/pcie/aer.c`,
//! `Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats`).
//!
//! Per function: vendor, device and class ids, NUMA node, driver; current and maximum link
//! speed and width; the AER counters the kernel keeps per severity and error type; and for
//! bridges the ACS control register from config space (readable in full only with
//! CAP_SYS_ADMIN; an unprivileged read returns the first 64 bytes, so ACS is then unknown).
//!
//! What does not change is kept ([`KNOWN_FOR`]): which functions are read (the RDMA NICs, the
//! GPUs found by vendor and class among every function, and the bridges above them, found
//! by resolving each function's path) is worked out again when the listing of
//! `/sys/class/infiniband` or `/sys/bus/pci/devices` changes, and at least every
//! [`KNOWN_FOR`]; each function's ids, NUMA node, maximum link speed and width and (for
//! bridges) ACS state are read again every [`KNOWN_FOR`] and after any failed read of the
//! function. ACS state is kept too because a full config-space read is 1,024 config cycles
//! per bridge on real hardware, and it changes only when an administrator writes it. Current
//! link speed and width, AER counters and the bound driver are read every scrape.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{CollectError, ErrorKind};
use crate::fs::attr::{self, Attrs};
use crate::fs::{Fs, Roots};
use crate::pcie::{self, parse_hex_id, parse_link_speed};
use crate::run::{Run, gather};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "pci",
    help: "PCIe link speed/width (current and max), AER errors and ACS of RDMA NICs, NVIDIA GPUs and the bridges above them.",
    default_enabled: true,
    options: &[],
};

/// What a PCI function is to railscope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// An NVIDIA GPU.
    Gpu,
    /// The PCI function of an RDMA device.
    Nic,
    /// A root port or PCIe switch port above a GPU or NIC.
    Bridge,
}

impl Role {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Gpu => "gpu",
            Role::Nic => "nic",
            Role::Bridge => "bridge",
        }
    }
}

/// The ACS state of a bridge, as far as it affects GPU↔NIC peer-to-peer traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcsState {
    /// Request, completion or egress redirect is on: peer-to-peer requests go up to the root
    /// complex instead of across the switch.
    Redirect,
    /// ACS is present and no redirect bit is set.
    NoRedirect,
    /// The bridge has no ACS capability.
    NoCapability,
    /// Config space could not be read far enough (unprivileged reads stop at 64 bytes).
    Unknown,
}

impl AcsState {
    /// Every state, for state-set export.
    pub const ALL: [AcsState; 4] = [
        AcsState::Redirect,
        AcsState::NoRedirect,
        AcsState::NoCapability,
        AcsState::Unknown,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AcsState::Redirect => "redirect",
            AcsState::NoRedirect => "no_redirect",
            AcsState::NoCapability => "no_capability",
            AcsState::Unknown => "unknown",
        }
    }
}

/// The AER counters of one severity (`aer_dev_correctable`, `aer_dev_nonfatal`,
/// `aer_dev_fatal`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aer {
    /// `correctable`, `nonfatal` or `fatal`.
    pub severity: &'static str,
    /// The `TOTAL_ERR_*` line.
    pub total: Option<u64>,
    /// Per error type, in the kernel's order (`RxErr`, `BadTLP`, ...).
    pub by_type: Vec<(String, u64)>,
}

/// One PCI function.
#[derive(Debug, Clone, PartialEq)]
pub struct PciDevice {
    /// Its address (`0000:18:00.0`).
    pub address: String,
    /// What it is.
    pub role: Role,
    /// `vendor`.
    pub vendor: Option<u32>,
    /// `device`.
    pub device: Option<u32>,
    /// `class`.
    pub class: Option<u32>,
    /// `numa_node`.
    pub numa_node: Option<i64>,
    /// The bound driver.
    pub driver: Option<String>,
    /// RDMA devices on this function.
    pub rdma_devices: Vec<String>,
    /// The GPU's index in PCI order (as `nvidia-smi` numbers GPUs).
    pub gpu_index: Option<usize>,
    /// `current_link_speed` in transfers per second.
    pub current_speed: Option<f64>,
    /// `max_link_speed` in transfers per second.
    pub max_speed: Option<f64>,
    /// `current_link_width` in lanes.
    pub current_width: Option<u32>,
    /// `max_link_width` in lanes.
    pub max_width: Option<u32>,
    /// AER counters by severity.
    pub aer: Vec<Aer>,
    /// ACS state (bridges only).
    pub acs: Option<AcsState>,
}

/// Everything the `pci` source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Functions in address order.
    pub devices: Vec<PciDevice>,
}

pub use crate::fs::attr::KNOWN_FOR;

/// The functions to read: role, RDMA devices and GPU index by address.
type Targets = BTreeMap<String, (Role, Vec<String>, Option<usize>)>;

/// Which functions are read, and the listings they were worked out from.
#[derive(Debug)]
struct KnownTargets {
    targets: Arc<Targets>,
    rdma_listing: Vec<String>,
    pci_listing: Vec<String>,
    read_at: Instant,
}

/// What does not change about one function.
#[derive(Debug, Clone, PartialEq)]
struct Statics {
    vendor: Option<u32>,
    device: Option<u32>,
    class: Option<u32>,
    numa_node: Option<i64>,
    max_speed: Option<f64>,
    max_width: Option<u32>,
    acs: Option<AcsState>,
    read_at: Instant,
}

/// Reads `/sys/bus/pci/devices`.
#[derive(Debug)]
pub struct PciSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    targets: Mutex<Option<KnownTargets>>,
    statics: Arc<Mutex<HashMap<String, Statics>>>,
}

impl PciSource {
    /// A source over `roots`.
    pub fn new(roots: &Roots, fs: Arc<dyn Fs>) -> Self {
        PciSource {
            fs,
            sysfs: roots.sysfs.clone(),
            targets: Mutex::new(None),
            statics: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The names a directory lists, or none when it cannot be listed.
    fn names(&self, rel: &str) -> Vec<String> {
        self.fs
            .read_dir(&self.sysfs.join(rel))
            .map(|entries| entries.into_iter().map(|e| e.name).collect())
            .unwrap_or_default()
    }

    /// The functions to read: the kept ones while both listings they came from are
    /// unchanged and they are younger than [`KNOWN_FOR`], else worked out again (and kept
    /// when that had no errors).
    fn targets(&self, errors: &mut Vec<CollectError>) -> Arc<Targets> {
        let rdma_listing = self.names("class/infiniband");
        let pci_listing = self.names("bus/pci/devices");
        let mut known = lock(&self.targets);
        if let Some(k) = known.as_ref()
            && k.rdma_listing == rdma_listing
            && k.pci_listing == pci_listing
            && k.read_at.elapsed() < KNOWN_FOR
        {
            return Arc::clone(&k.targets);
        }
        let before = errors.len();
        let targets = Arc::new(self.find_targets(errors));
        *known = (errors.len() == before).then(|| KnownTargets {
            targets: Arc::clone(&targets),
            rdma_listing,
            pci_listing,
            read_at: Instant::now(),
        });
        targets
    }

    fn find_targets(&self, errors: &mut Vec<CollectError>) -> Targets {
        let fs = self.fs.as_ref();
        let mut targets = Targets::new();
        for f in pcie::rdma_functions(fs, &self.sysfs, errors) {
            targets
                .entry(f.address)
                .or_insert((Role::Nic, Vec::new(), None))
                .1
                .push(f.device);
        }
        for (index, gpu) in pcie::nvidia_gpus(fs, &self.sysfs, errors)
            .into_iter()
            .enumerate()
        {
            targets.insert(gpu, (Role::Gpu, Vec::new(), Some(index)));
        }
        let mut bridges = Vec::new();
        for address in targets.keys() {
            if let Some(path) = pcie::pci_path(fs, &self.sysfs, address, errors) {
                bridges.extend(path.bridges().iter().cloned());
            }
        }
        for bridge in bridges {
            targets
                .entry(bridge)
                .or_insert((Role::Bridge, Vec::new(), None));
        }
        targets
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Source for PciSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        Ok(PciSource::new(from.roots, Arc::clone(&from.fs)))
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let fs = self.fs.as_ref();
        let mut errors = Vec::new();
        if !fs.exists(&self.sysfs.join("bus/pci/devices")) {
            return Report {
                data: Some(Snapshot::default()),
                errors,
                absent: Some(format!(
                    "{} does not exist",
                    self.sysfs.join("bus/pci/devices").display()
                )),
            };
        }
        let targets = self.targets(&mut errors);
        // Forget what was kept of functions no longer read.
        lock(&self.statics).retain(|address, _| targets.contains_key(address));
        // One unit per PCI function: a config-space or AER read stuck behind a wedged device
        // costs that function only.
        let src = Arc::clone(self);
        let keys: Vec<String> = targets.keys().cloned().collect();
        let units = run.each(keys, 1, move |address| {
            let mut errors = Vec::new();
            let device = targets.get(address).map(|(role, rdma_devices, gpu_index)| {
                let dir = src.sysfs.join("bus/pci/devices").join(address);
                let known = lock(&src.statics)
                    .get(address)
                    .filter(|s| s.read_at.elapsed() < KNOWN_FOR)
                    .cloned();
                let mut reader = Reader {
                    fs: src.fs.as_ref(),
                    errors: &mut errors,
                };
                let (device, statics) = reader.device(
                    &dir,
                    address.to_owned(),
                    *role,
                    rdma_devices.clone(),
                    *gpu_index,
                    known,
                );
                let mut kept = lock(&src.statics);
                match statics {
                    Some(statics) if errors.is_empty() => {
                        kept.insert(address.to_owned(), statics);
                    }
                    Some(_) => {
                        kept.remove(address);
                    }
                    None if !errors.is_empty() => {
                        kept.remove(address);
                    }
                    None => {}
                }
                device
            });
            (device, errors)
        });
        let devices = gather(units, &mut errors);
        Report::new(Snapshot { devices }, errors)
    }
}

struct Reader<'a> {
    fs: &'a dyn Fs,
    errors: &'a mut Vec<CollectError>,
}

impl Reader<'_> {
    fn attrs(&mut self) -> Attrs<'_> {
        Attrs::new(self.fs, None, self.errors)
    }

    fn text(&mut self, path: &Path) -> Option<String> {
        self.attrs().string(path)
    }

    fn parsed<T>(
        &mut self,
        path: &Path,
        what: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        self.attrs().expect(path, what, parse)
    }

    /// Reads the function in `dir`; what does not change comes from `known` when given, and
    /// is returned when it was read now.
    fn device(
        &mut self,
        dir: &Path,
        address: String,
        role: Role,
        rdma_devices: Vec<String>,
        gpu_index: Option<usize>,
        known: Option<Statics>,
    ) -> (PciDevice, Option<Statics>) {
        let int = |t: &str| t.trim().parse::<u32>().ok();
        let (statics, fresh) = match known {
            Some(known) => (known, false),
            None => (self.statics(dir, role), true),
        };
        let mut device = PciDevice {
            vendor: statics.vendor,
            device: statics.device,
            class: statics.class,
            numa_node: statics.numa_node,
            driver: attr::peek_link(self.fs, &dir.join("driver")),
            current_speed: self
                .parsed(&dir.join("current_link_speed"), "\"<n> GT/s\"", link_speed)
                .flatten(),
            max_speed: statics.max_speed,
            current_width: self.parsed(&dir.join("current_link_width"), "a lane count", int),
            max_width: statics.max_width,
            aer: Vec::new(),
            acs: statics.acs,
            address,
            role,
            rdma_devices,
            gpu_index,
        };
        for (file, severity) in [
            ("aer_dev_correctable", "correctable"),
            ("aer_dev_nonfatal", "nonfatal"),
            ("aer_dev_fatal", "fatal"),
        ] {
            let path = dir.join(file);
            if let Some(text) = self.text(&path) {
                match parse_aer(&text, severity) {
                    Some(aer) => device.aer.push(aer),
                    None => self.errors.push(CollectError::new(
                        None,
                        &path,
                        ErrorKind::Parse,
                        "expected \"<type> <count>\" lines",
                    )),
                }
            }
        }
        (device, fresh.then_some(statics))
    }

    /// Reads what does not change about the function in `dir`.
    fn statics(&mut self, dir: &Path, role: Role) -> Statics {
        let hex = |t: &str| parse_hex_id(t);
        let int = |t: &str| t.trim().parse::<u32>().ok();
        Statics {
            vendor: self.parsed(&dir.join("vendor"), "a hex id", hex),
            device: self.parsed(&dir.join("device"), "a hex id", hex),
            class: self.parsed(&dir.join("class"), "a hex class", hex),
            numa_node: self.parsed(&dir.join("numa_node"), "a NUMA node", |t| {
                t.trim().parse().ok()
            }),
            max_speed: self
                .parsed(&dir.join("max_link_speed"), "\"<n> GT/s\"", link_speed)
                .flatten(),
            max_width: self.parsed(&dir.join("max_link_width"), "a lane count", int),
            acs: (role == Role::Bridge).then(|| {
                let config = self.attrs().bytes(&dir.join("config"));
                config.map_or(AcsState::Unknown, |bytes| acs_state(&bytes))
            }),
            read_at: Instant::now(),
        }
    }
}

/// A link speed; `Unknown` (a link that is down or not PCIe) is a legitimate answer, not a
/// parse error.
fn link_speed(text: &str) -> Option<Option<f64>> {
    if text.trim().starts_with("Unknown") {
        Some(None)
    } else {
        parse_link_speed(text).map(Some)
    }
}

/// Parses an `aer_dev_*` file: `<type> <count>` lines, the last being `TOTAL_ERR_*`.
pub fn parse_aer(text: &str, severity: &'static str) -> Option<Aer> {
    let mut aer = Aer {
        severity,
        total: None,
        by_type: Vec::new(),
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (name, count) = line.trim().rsplit_once(' ')?;
        let count: u64 = count.trim().parse().ok()?;
        let name = name.trim();
        if name.starts_with("TOTAL_ERR_") {
            aer.total = Some(count);
        } else {
            aer.by_type.push((name.to_owned(), count));
        }
    }
    (aer.total.is_some() || !aer.by_type.is_empty()).then_some(aer)
}

/// The ACS extended capability id (`PCI_EXT_CAP_ID_ACS`).
const EXT_CAP_ACS: u32 = 0x000d;
/// ACS control bits that send peer-to-peer traffic up to the root complex: P2P Request
/// Redirect, P2P Completion Redirect, P2P Egress Control (`PCI_ACS_RR`, `PCI_ACS_CR`,
/// `PCI_ACS_EC` in `include/uapi/linux/pci_regs.h`).
const ACS_REDIRECT_BITS: u16 = 0x0004 | 0x0008 | 0x0020;

/// Walks the extended capability list of a config-space dump (from offset 0x100) to the ACS
/// capability and reads its control register.
pub fn acs_state(config: &[u8]) -> AcsState {
    if config.len() < 0x104 {
        return AcsState::Unknown;
    }
    let u32_at = |off: usize| {
        config
            .get(off..off + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut offset = 0x100usize;
    for _ in 0..(4096 / 4) {
        let Some(header) = u32_at(offset) else {
            return AcsState::Unknown;
        };
        if header == 0 || header == u32::MAX {
            return AcsState::NoCapability;
        }
        if header & 0xffff == EXT_CAP_ACS {
            let Some(ctrl) = config.get(offset + 6..offset + 8) else {
                return AcsState::Unknown;
            };
            let ctrl = u16::from_le_bytes([ctrl[0], ctrl[1]]);
            return if ctrl & ACS_REDIRECT_BITS != 0 {
                AcsState::Redirect
            } else {
                AcsState::NoRedirect
            };
        }
        let next = (header >> 20) as usize & !3;
        if next < 0x100 || next <= offset {
            return AcsState::NoCapability;
        }
        offset = next;
    }
    AcsState::NoCapability
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    const CORRECTABLE: &str = "RxErr 37\nBadTLP 4\nBadDLLP 12\nRollover 0\nTimeout 2\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 55\n";

    #[test]
    fn aer_files() {
        let aer = parse_aer(CORRECTABLE, "correctable").unwrap();
        assert_eq!(aer.total, Some(55));
        assert_eq!(aer.by_type[0], ("RxErr".to_owned(), 37));
        assert_eq!(aer.by_type.len(), 8);
        assert!(parse_aer("RxErr lots\n", "correctable").is_none());
        assert!(parse_aer("", "fatal").is_none());
    }

    fn config_with(caps: &[(u32, u16)]) -> Vec<u8> {
        let mut config = vec![0u8; 4096];
        let mut offset = 0x100;
        for (i, (id, ctrl)) in caps.iter().enumerate() {
            let next = if i + 1 < caps.len() { offset + 0x40 } else { 0 };
            let header = id | (1 << 16) | ((next as u32) << 20);
            config[offset..offset + 4].copy_from_slice(&header.to_le_bytes());
            config[offset + 6..offset + 8].copy_from_slice(&ctrl.to_le_bytes());
            offset += 0x40;
        }
        config
    }

    #[test]
    fn acs_from_config_space() {
        assert_eq!(
            acs_state(&config_with(&[(0x0001, 0), (EXT_CAP_ACS, 0)])),
            AcsState::NoRedirect
        );
        assert_eq!(
            acs_state(&config_with(&[(0x0001, 0), (EXT_CAP_ACS, 0x001d)])),
            AcsState::Redirect
        );
        assert_eq!(
            acs_state(&config_with(&[(EXT_CAP_ACS, 0x0001)])),
            AcsState::NoRedirect,
            "source validation alone does not redirect"
        );
        assert_eq!(
            acs_state(&config_with(&[(0x0001, 0)])),
            AcsState::NoCapability
        );
        assert_eq!(
            acs_state(&[0u8; 64]),
            AcsState::Unknown,
            "unprivileged read"
        );
        let mut looped = config_with(&[(0x0001, 0)]);
        looped[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
        assert_eq!(
            acs_state(&looped),
            AcsState::NoCapability,
            "a self-loop ends the walk"
        );
    }

    #[test]
    fn what_does_not_change_is_read_once() {
        use crate::fs::{FaultFs, Roots};
        let sysfs =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/h100-cx7-ndr-ib/sys");
        let fs = Arc::new(FaultFs::new());
        let src = Arc::new(PciSource::new(
            &Roots {
                sysfs,
                procfs: PathBuf::from("/nonexistent"),
            },
            fs.clone(),
        ));
        let first = crate::run::standalone("pci", |run| src.collect(run));
        assert_eq!(first.errors, vec![]);
        let seen = fs.accessed().len();
        let second = crate::run::standalone("pci", |run| src.collect(run));
        assert_eq!(second.data, first.data);
        let again = fs.accessed()[seen..].to_vec();
        let read = |file: &str| again.iter().any(|p| p.ends_with(file));
        for kept in [
            "vendor",
            "class",
            "max_link_speed",
            "max_link_width",
            "config",
        ] {
            assert!(!read(kept), "{kept} was read again");
        }
        for fresh in ["current_link_speed", "current_link_width", "aer_dev_fatal"] {
            assert!(read(fresh), "{fresh} was not read again");
        }
        assert!(
            !again
                .iter()
                .any(|p| p.ends_with("device") && p.to_string_lossy().contains("infiniband")),
            "which functions to read was worked out again"
        );
    }
}
