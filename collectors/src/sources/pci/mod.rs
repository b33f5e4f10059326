//! The `pci` source: PCIe link and AER health of every RDMA NIC, every NVIDIA GPU and every
//! bridge on their paths to the host bridge, read from `/sys/bus/pci/devices`
//! (`drivers/pci/pci-sysfs.c`, `drivers/pci/pcie/aer.c`,
//! `Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats`).
//!
//! Per function: vendor, device and class ids, NUMA node, driver; current and maximum link
//! speed and width; the AER counters the kernel keeps per severity and error type; and for
//! bridges the ACS control register from config space (readable in full only with
//! CAP_SYS_ADMIN; an unprivileged read returns the first 64 bytes, so ACS is then unknown).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{CollectError, ErrorKind};
use crate::fs::{Fs, Roots};
use crate::pcie::{self, parse_hex_id, parse_link_speed};
use crate::run::{Run, gather};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};
use crate::sysfs::{self, Attrs};

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

/// Reads `/sys/bus/pci/devices`.
#[derive(Debug)]
pub struct PciSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
}

impl PciSource {
    /// A source over `roots`.
    pub fn new(roots: &Roots, fs: Arc<dyn Fs>) -> Self {
        PciSource {
            fs,
            sysfs: roots.sysfs.clone(),
        }
    }
}

impl Source for PciSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs) = (from.roots, Arc::clone(&from.fs));
        Ok(PciSource {
            fs,
            sysfs: roots.sysfs.clone(),
        })
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
        let mut targets: BTreeMap<String, (Role, Vec<String>, Option<usize>)> = BTreeMap::new();
        for f in pcie::rdma_functions(fs, &self.sysfs, &mut errors) {
            targets
                .entry(f.address)
                .or_insert((Role::Nic, Vec::new(), None))
                .1
                .push(f.device);
        }
        for (index, gpu) in pcie::nvidia_gpus(fs, &self.sysfs, &mut errors)
            .into_iter()
            .enumerate()
        {
            targets.insert(gpu, (Role::Gpu, Vec::new(), Some(index)));
        }
        let mut bridges = Vec::new();
        for address in targets.keys() {
            if let Some(path) = pcie::pci_path(fs, &self.sysfs, address, &mut errors) {
                bridges.extend(path.bridges().iter().cloned());
            }
        }
        for bridge in bridges {
            targets
                .entry(bridge)
                .or_insert((Role::Bridge, Vec::new(), None));
        }
        // One unit per PCI function: a config-space or AER read stuck behind a wedged device
        // costs that function only.
        let src = Arc::clone(self);
        let targets = Arc::new(targets);
        let keys: Vec<String> = targets.keys().cloned().collect();
        let units = run.each(keys, 1, move |address| {
            let mut errors = Vec::new();
            let device = targets.get(address).map(|(role, rdma_devices, gpu_index)| {
                let dir = src.sysfs.join("bus/pci/devices").join(address);
                let mut reader = Reader {
                    fs: src.fs.as_ref(),
                    errors: &mut errors,
                };
                reader.device(
                    &dir,
                    address.to_owned(),
                    *role,
                    rdma_devices.clone(),
                    *gpu_index,
                )
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

    fn device(
        &mut self,
        dir: &Path,
        address: String,
        role: Role,
        rdma_devices: Vec<String>,
        gpu_index: Option<usize>,
    ) -> PciDevice {
        let hex = |t: &str| parse_hex_id(t);
        let int = |t: &str| t.trim().parse::<u32>().ok();
        // `Unknown` (a link that is down or not PCIe) is a legitimate answer, not a parse error.
        let speed = |t: &str| {
            if t.trim().starts_with("Unknown") {
                Some(None)
            } else {
                parse_link_speed(t).map(Some)
            }
        };
        let mut device = PciDevice {
            vendor: self.parsed(&dir.join("vendor"), "a hex id", hex),
            device: self.parsed(&dir.join("device"), "a hex id", hex),
            class: self.parsed(&dir.join("class"), "a hex class", hex),
            numa_node: self.parsed(&dir.join("numa_node"), "a NUMA node", |t| {
                t.trim().parse().ok()
            }),
            driver: sysfs::peek_link(self.fs, &dir.join("driver")),
            current_speed: self
                .parsed(&dir.join("current_link_speed"), "\"<n> GT/s\"", speed)
                .flatten(),
            max_speed: self
                .parsed(&dir.join("max_link_speed"), "\"<n> GT/s\"", speed)
                .flatten(),
            current_width: self.parsed(&dir.join("current_link_width"), "a lane count", int),
            max_width: self.parsed(&dir.join("max_link_width"), "a lane count", int),
            aer: Vec::new(),
            acs: None,
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
        if role == Role::Bridge {
            let config = self.attrs().bytes(&dir.join("config"));
            device.acs = Some(config.map_or(AcsState::Unknown, |bytes| acs_state(&bytes)));
        }
        device
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
}
