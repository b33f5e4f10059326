//! PCI discovery shared by the `pci` and `topology` sources: which functions are RDMA NICs
//! and NVIDIA GPUs, where each sits in the PCIe hierarchy, and the GPU↔NIC distance as NCCL
//! and `nvidia-smi topo -m` classify it.
//!
//! Kernel interface: `/sys/bus/pci/devices/<bdf>` (`drivers/pci/pci-sysfs.c`), whose real
//! path (`/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/...`) is the device's path from
//! its host bridge. NCCL (`src/graph/xml.cc`, `src/graph/paths.cc`) collapses each PCIe
//! switch (upstream port plus downstream port) into one node named by its upstream port,
//! found by stepping up two path components at a time; the same walk is used here.

use std::path::Path;

use crate::error::{CollectError, ErrorKind};
use crate::fs::Fs;
use crate::fs::attr::{self, Attrs};
use crate::fs::is_pci_address;

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR: u32 = 0x10de;

/// Where a PCI function sits: its host bridge and the functions from the root port down to
/// itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciPath {
    /// The host bridge component (`pci0000:15`).
    pub host_bridge: String,
    /// PCI addresses from the root port down to the function itself (last).
    pub chain: Vec<String>,
}

impl PciPath {
    /// Parses a canonical sysfs device path.
    pub fn from_canonical(path: &Path) -> Option<PciPath> {
        let parts: Vec<&str> = path.iter().filter_map(|c| c.to_str()).collect();
        let host = parts.iter().rposition(|c| is_host_bridge(c))?;
        let chain: Vec<String> = parts[host + 1..].iter().map(|c| (*c).to_owned()).collect();
        if chain.is_empty() || !chain.iter().all(|c| is_pci_address(c)) {
            return None;
        }
        Some(PciPath {
            host_bridge: parts[host].to_owned(),
            chain,
        })
    }

    /// The function's own address.
    pub fn address(&self) -> &str {
        self.chain.last().map(String::as_str).unwrap_or_default()
    }

    /// The bridges above the function (root port first), without the function.
    pub fn bridges(&self) -> &[String] {
        &self.chain[..self.chain.len().saturating_sub(1)]
    }

    /// The PCIe switches between the function and its host bridge, nearest first, each named
    /// by its upstream port (NCCL's two-components-up walk).
    pub fn switches(&self) -> Vec<&str> {
        let n = self.chain.len();
        let mut out = Vec::new();
        let mut i = n as isize - 3;
        while i >= 0 {
            out.push(self.chain[i as usize].as_str());
            i -= 2;
        }
        out
    }
}

/// `pciDDDD:BB` (domains above 0xffff, as behind Intel VMD, have five digits).
fn is_host_bridge(name: &str) -> bool {
    name.strip_prefix("pci").is_some_and(|rest| {
        let mut parts = rest.split(':');
        matches!((parts.next(), parts.next(), parts.next()), (Some(d), Some(b), None)
            if (4..=5).contains(&d.len()) && b.len() == 2
                && d.bytes().chain(b.bytes()).all(|c| c.is_ascii_hexdigit()))
    })
}

/// The PCIe distance between two functions, as `nvidia-smi topo -m` names it. The value is
/// NVML's `nvmlGpuTopologyLevel_t`, so smaller is closer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// At most one PCIe switch between them.
    Pix = 10,
    /// Several PCIe switches, no host bridge.
    Pxb = 20,
    /// Through one PCIe host bridge (the CPU).
    Phb = 30,
    /// Across host bridges within one NUMA node.
    Node = 40,
    /// Across NUMA nodes (the inter-socket link).
    Sys = 50,
}

impl Level {
    /// The name `nvidia-smi topo -m` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Pix => "PIX",
            Level::Pxb => "PXB",
            Level::Phb => "PHB",
            Level::Node => "NODE",
            Level::Sys => "SYS",
        }
    }
}

/// Classifies the path between two functions from their PCI paths and NUMA nodes
/// (`-1` or `None` when unknown).
pub fn distance(a: &PciPath, a_numa: Option<i64>, b: &PciPath, b_numa: Option<i64>) -> Level {
    let (sa, sb) = (a.switches(), b.switches());
    for (i, s) in sa.iter().enumerate() {
        if let Some(j) = sb.iter().position(|t| t == s) {
            return if i + j == 0 { Level::Pix } else { Level::Pxb };
        }
    }
    let known = |n: Option<i64>| n.filter(|&n| n >= 0);
    if let (Some(x), Some(y)) = (known(a_numa), known(b_numa))
        && x != y
    {
        return Level::Sys;
    }
    if a.host_bridge == b.host_bridge {
        Level::Phb
    } else {
        Level::Node
    }
}

/// Parses a hexadecimal id file (`0x10de`); only hex digits may follow the `0x` (a bare
/// `from_str_radix` also takes a sign).
pub fn parse_hex_id(text: &str) -> Option<u32> {
    let digits = text.trim().strip_prefix("0x")?;
    if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Parses `current_link_speed`/`max_link_speed` (`32.0 GT/s PCIe`, older `8 GT/s`,
/// `2.5 GT/s PCIe`) into transfers per second; `Unknown` is `None`.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let text = text.trim();
    let number = text.split_whitespace().next()?;
    if !text[number.len()..].trim_start().starts_with("GT/s") {
        return None;
    }
    // Scaled first, then checked: a huge number would otherwise become +Inf transfers.
    number
        .parse::<f64>()
        .ok()
        .map(|v| v * 1e9)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// One RDMA device backed by a PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaFunction {
    /// The RDMA device name (`mlx5_0`).
    pub device: String,
    /// The PCI function's address.
    pub address: String,
    /// The device's port numbers.
    pub ports: Vec<u32>,
}

/// Lists RDMA devices that have a PCI function (software devices have none), in device
/// name order. A missing `/sys/class/infiniband` is an empty list.
pub fn rdma_functions(
    fs: &dyn Fs,
    sysfs: &Path,
    errors: &mut Vec<CollectError>,
) -> Vec<RdmaFunction> {
    let class = sysfs.join("class/infiniband");
    let Some(entries) = Attrs::new(fs, None, errors).list(&class) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        // Software devices have no `device` link; one that cannot be read is no PCI function.
        let Some(address) = attr::peek_link(fs, &class.join(&entry.name).join("device"))
            .filter(|a| is_pci_address(a))
        else {
            continue;
        };
        let ports = fs
            .read_dir(&class.join(&entry.name).join("ports"))
            .map(|p| p.iter().filter_map(|e| e.name.parse().ok()).collect())
            .unwrap_or_default();
        out.push(RdmaFunction {
            device: entry.name,
            address,
            ports,
        });
    }
    out
}

/// Lists NVIDIA GPUs (vendor 0x10de, display-controller class: VGA 0x0300 or 3D 0x0302) in
/// PCI address order, the order `nvidia-smi` numbers them in. NVSwitches (class 0x0680) are
/// not GPUs.
pub fn nvidia_gpus(fs: &dyn Fs, sysfs: &Path, errors: &mut Vec<CollectError>) -> Vec<String> {
    let dir = sysfs.join("bus/pci/devices");
    let Some(entries) = Attrs::new(fs, None, errors).list(&dir) else {
        return Vec::new();
    };
    let mut gpus = Vec::new();
    for entry in entries.into_iter().filter(|e| is_pci_address(&e.name)) {
        // Only to find the GPUs: the `pci` source reports these files' errors.
        let read = |file: &str| {
            attr::peek(fs, &dir.join(&entry.name).join(file)).and_then(|t| parse_hex_id(&t))
        };
        if read("vendor") == Some(NVIDIA_VENDOR) && read("class").is_some_and(|c| c >> 16 == 0x03) {
            gpus.push(entry.name);
        }
    }
    gpus.sort();
    gpus
}

/// Resolves a function's PCI path from `/sys/bus/pci/devices/<address>`.
pub fn pci_path(
    fs: &dyn Fs,
    sysfs: &Path,
    address: &str,
    errors: &mut Vec<CollectError>,
) -> Option<PciPath> {
    let link = sysfs.join("bus/pci/devices").join(address);
    match fs.canonicalize(&link) {
        Ok(real) => {
            let path = PciPath::from_canonical(&real);
            if path.is_none() {
                errors.push(CollectError::new(
                    None,
                    &link,
                    ErrorKind::Parse,
                    format!("no host bridge in {}", real.display()),
                ));
            }
            path
        }
        Err(err) => {
            errors.push(CollectError::io(None, &link, &err));
            None
        }
    }
}

/// Reads a function's `numa_node`; any failure is unknown.
pub fn numa_node(fs: &dyn Fs, sysfs: &Path, address: &str) -> Option<i64> {
    let path = sysfs
        .join("bus/pci/devices")
        .join(address)
        .join("numa_node");
    attr::peek(fs, &path)?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn path(p: &str) -> PciPath {
        PciPath::from_canonical(&PathBuf::from(p)).unwrap()
    }

    #[test]
    fn canonical_paths() {
        let p =
            path("/x/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        assert_eq!(p.host_bridge, "pci0000:15");
        assert_eq!(p.address(), "0000:18:00.0");
        assert_eq!(
            p.bridges(),
            ["0000:15:01.0", "0000:16:00.0", "0000:17:00.0"]
        );
        assert_eq!(p.switches(), ["0000:16:00.0"]);
        let two = path(
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:08.0/0000:05:00.0",
        );
        assert_eq!(two.switches(), ["0000:03:00.0", "0000:01:00.0"]);
        assert!(PciPath::from_canonical(&PathBuf::from("/sys/devices/virtual/net/lo")).is_none());
        assert_eq!(
            path("/sys/devices/pci10000:00/10000:00:02.0").host_bridge,
            "pci10000:00"
        );
    }

    #[test]
    fn distances_match_nccl_and_nvidia_smi() {
        let nic =
            path("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        let gpu =
            path("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0");
        let gpu_other_hb =
            path("/sys/devices/pci0000:37/0000:37:01.0/0000:38:00.0/0000:39:01.0/0000:3a:00.0");
        let gpu_same_hb_other_rp =
            path("/sys/devices/pci0000:15/0000:15:02.0/0000:20:00.0/0000:21:01.0/0000:22:00.0");
        let nested_gpu = path(
            "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:30:00.0/0000:31:00.0/0000:32:00.0",
        );
        assert_eq!(distance(&nic, Some(0), &gpu, Some(0)), Level::Pix);
        assert_eq!(distance(&nic, Some(0), &nested_gpu, Some(0)), Level::Pxb);
        assert_eq!(
            distance(&nic, Some(0), &gpu_same_hb_other_rp, Some(0)),
            Level::Phb
        );
        assert_eq!(distance(&nic, Some(0), &gpu_other_hb, Some(0)), Level::Node);
        assert_eq!(distance(&nic, Some(0), &gpu_other_hb, Some(1)), Level::Sys);
        assert_eq!(
            distance(&nic, Some(-1), &gpu_other_hb, Some(1)),
            Level::Node,
            "unknown NUMA is not SYS"
        );
        let root_port_nic = path("/sys/devices/pci0000:15/0000:15:03.0/0000:40:00.0");
        assert_eq!(distance(&root_port_nic, Some(0), &gpu, Some(0)), Level::Phb);
    }

    #[test]
    fn link_speeds() {
        assert_eq!(parse_link_speed("32.0 GT/s PCIe\n"), Some(32e9));
        assert_eq!(parse_link_speed("16.0 GT/s PCIe\n"), Some(16e9));
        assert_eq!(parse_link_speed("8 GT/s\n"), Some(8e9));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe\n"), Some(2.5e9));
        assert_eq!(parse_link_speed("Unknown\n"), None);
        assert_eq!(parse_link_speed("Unknown speed\n"), None);
        assert_eq!(parse_hex_id("0x10de\n"), Some(0x10de));
        assert_eq!(parse_hex_id("0x030200\n"), Some(0x030200));
        assert_eq!(parse_hex_id("10de"), None);
    }

    /// Found by the property tests: the number was checked before it was scaled to
    /// transfers per second, so a huge one became `+Inf`.
    #[test]
    fn a_link_speed_too_large_to_scale_is_not_infinite() {
        assert_eq!(parse_link_speed("1.3632781838982762e304 GT/s\n"), None);
    }

    /// Found by the property tests: `from_str_radix` takes a sign after the `0x`.
    #[test]
    fn a_hex_id_with_a_sign_is_not_an_id() {
        assert_eq!(parse_hex_id("0x+0"), None);
        assert_eq!(parse_hex_id("0x-1"), None);
    }
}

/// Property tests of the PCI discovery parsers: link speed, ids, canonical paths, distance.
/// See [`crate::strategies`] for the two kinds of property.
#[cfg(test)]
mod proptests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use crate::pcie::{self, PciPath};
    use crate::strategies::{config, text};

    /// A canonical sysfs path of a PCI function under a host bridge.
    fn pci_chain() -> impl Strategy<Value = (String, Vec<String>)> {
        (
            (0u32..0x10010, any::<u8>()),
            prop::collection::vec((0u32..0x10010, any::<u8>(), 0u8..32, 0u8..8), 1..6),
        )
            .prop_map(|((d, b), chain)| {
                (
                    format!("pci{d:04x}:{b:02x}"),
                    chain
                        .into_iter()
                        .map(|(d, b, dev, f)| format!("{d:04x}:{b:02x}:{dev:02x}.{f}"))
                        .collect(),
                )
            })
    }

    proptest! {
        #![proptest_config(config(256))]

        #[test]
        fn pcie_parsers_never_panic(text in text()) {
            if let Some(speed) = pcie::parse_link_speed(&text) {
                prop_assert!(speed.is_finite() && speed > 0.0, "{:?} -> {}", text, speed);
            }
            if pcie::parse_hex_id(&text).is_some() {
                let digits = text.trim().strip_prefix("0x").unwrap_or_default();
                prop_assert!(!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_hexdigit()),
                    "{:?} is not 0x and hex digits", text);
            }
            let _ = PciPath::from_canonical(&PathBuf::from(&text));
        }

        /// `current_link_speed`: `"%s PCIe\n"` of the speed string (`"2.5 GT/s"` … `"64.0 GT/s"`),
        /// and any positive decimal.
        #[test]
        fn link_speeds_round_trip(
            v in prop_oneof![
                prop::sample::select(vec![2.5f64, 5.0, 8.0, 16.0, 32.0, 64.0]),
                (1e-3f64..1e3),
                any::<f64>().prop_filter("positive", |v| v.is_finite() && *v > 0.0),
            ],
            pcie_suffix in any::<bool>(),
        ) {
            let text = format!("{v:?} GT/s{}\n", if pcie_suffix { " PCIe" } else { "" });
            let got = pcie::parse_link_speed(&text);
            let expect = Some(v * 1e9).filter(|s| s.is_finite());
            prop_assert_eq!(got, expect, "{:?}", text);
        }

        #[test]
        fn hex_ids_round_trip(v in any::<u32>(), width in 0usize..9) {
            prop_assert_eq!(pcie::parse_hex_id(&format!("0x{v:0width$x}\n")), Some(v));
        }

        #[test]
        fn canonical_paths_round_trip((host, chain) in pci_chain(), prefix in "(/sys/devices|/host/sys/devices)") {
            let path = PathBuf::from(format!("{prefix}/{host}/{}", chain.join("/")));
            let parsed = PciPath::from_canonical(&path).unwrap();
            prop_assert_eq!(&parsed.host_bridge, &host);
            prop_assert_eq!(&parsed.chain, &chain);
            prop_assert_eq!(parsed.address(), chain.last().unwrap().as_str());
            prop_assert_eq!(parsed.bridges().len() + 1, chain.len());
            prop_assert!(parsed.switches().len() <= chain.len() / 2);
        }

        #[test]
        fn distance_is_symmetric(
            (ha, a) in pci_chain(),
            (hb, b) in pci_chain(),
            shared in 0usize..4,
            na in prop::option::of(-1i64..3),
            nb in prop::option::of(-1i64..3),
        ) {
            // Give the two paths a common prefix, as functions under one switch have.
            let mut b = b;
            let k = shared.min(a.len() - 1).min(b.len() - 1);
            b[..k].clone_from_slice(&a[..k]);
            let hb = if k > 0 { ha.clone() } else { hb };
            let pa = PciPath { host_bridge: ha, chain: a };
            let pb = PciPath { host_bridge: hb, chain: b };
            prop_assert_eq!(pcie::distance(&pa, na, &pb, nb), pcie::distance(&pb, nb, &pa, na));
        }
    }
}
