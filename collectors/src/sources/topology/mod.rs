//! The `topology` source: the PCIe distance between every RDMA NIC and every NVIDIA GPU, each
//! NIC's nearest GPUs, and the rail of every RDMA port.
//!
//! Distances use PCI paths and NUMA nodes only (see [`crate::pcie::distance`]), no NVML,
//! with the levels `nvidia-smi topo -m` prints: PIX, PXB, PHB, NODE, SYS.
//!
//! Rails: in a rail-optimized cluster GPU *i* feeds NIC *i* feeds leaf switch *i*. A port's
//! rail is configured (`--collector.topology.rails`, a map from device name, `device/port` or
//! PCI address to rail) or derived: each compute port is matched to one GPU, closest pairs
//! first (ties broken by GPU PCI order, then NIC PCI order), and the rail is the PCI-order
//! index of its GPU among all of the node's GPUs. A NIC that vanishes (a firmware fatal
//! error, a device removed) therefore moves no other port's rail; on a node with fewer
//! compute NICs than GPUs the rails are the indexes of the GPUs they serve (0, 2, 4, 6 for
//! one NIC per GPU pair), the same on every node of the model. Ports left without a GPU (no
//! GPUs on the node, or more ports than GPUs) follow in PCI order after the GPUs. Nothing
//! depends on the kernel's device names, so nodes of one model get the same rails even when
//! `mlx5_0` is a front-end NIC on one of them. Ports matched by `--collector.topology.rail-exclude` (on the device name or the
//! PCI address) get no rail.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use regex::Regex;

use crate::error::CollectError;
use crate::fs::{Fs, Roots};
use crate::pcie::{self, Level, PciPath};
use crate::run::Run;
use crate::source::{
    Build, OptionKind, OptionSpec, OptionValue, Report, Source, SourceBuildError, Spec,
    regex_option,
};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "topology",
    help: "GPU↔NIC PCIe distance (PIX, PXB, PHB, NODE, SYS), each NIC's nearest GPUs, and the rail of every RDMA port.",
    default_enabled: true,
    options: &[
        OptionSpec {
            name: "rail-exclude",
            help: "Regular expression (unanchored) on RDMA device names and PCI addresses of NICs outside the compute fabric (front-end, storage); they get no rail.",
            kind: OptionKind::Regex,
        },
        OptionSpec {
            name: "rails",
            help: "Configured rails instead of derived ones: comma-separated KEY=RAIL where KEY is a device (mlx5_1), device/port (mlx4_0/2) or PCI address (0000:18:00.0). In the config file, a map.",
            kind: OptionKind::Map,
        },
    ],
};

/// Parses `KEY=RAIL,KEY=RAIL`.
pub fn parse_rail_map(text: &str) -> Result<BTreeMap<String, u32>, String> {
    let pairs =
        crate::source::parse_map_text(text).map_err(|e| e.replace("KEY=VALUE", "KEY=RAIL"))?;
    rail_map(&pairs)
}

/// The rails of `--collector.topology.rails`' pairs: each key's rail a number from 0.
pub fn rail_map(pairs: &[(String, String)]) -> Result<BTreeMap<String, u32>, String> {
    let mut map = BTreeMap::new();
    for (key, rail) in pairs {
        let rail: u32 = rail
            .trim()
            .parse()
            .map_err(|_| format!("\"{key}={rail}\": the rail must be a number from 0"))?;
        if map.insert(key.trim().to_owned(), rail).is_some() {
            return Err(format!("{:?} is given twice", key.trim()));
        }
    }
    Ok(map)
}

/// An NVIDIA GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// Its index in PCI order (`nvidia-smi` numbering).
    pub index: usize,
    /// Its PCI address.
    pub address: String,
    /// Its NUMA node.
    pub numa_node: Option<i64>,
}

/// An RDMA device with a PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The RDMA device (`mlx5_0`).
    pub device: String,
    /// Its PCI address.
    pub address: String,
    /// Its NUMA node.
    pub numa_node: Option<i64>,
    /// Its ports.
    pub ports: Vec<u32>,
    /// Its distance to each GPU, by GPU index; empty when its PCI path is unknown.
    pub distances: Vec<Level>,
}

impl Nic {
    /// The GPUs at the smallest distance, and that distance.
    pub fn nearest(&self) -> Option<(Level, Vec<usize>)> {
        let best = *self.distances.iter().min()?;
        Some((
            best,
            self.distances
                .iter()
                .enumerate()
                .filter(|(_, l)| **l == best)
                .map(|(i, _)| i)
                .collect(),
        ))
    }
}

/// How a rail was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RailSource {
    /// From `--collector.topology.rails`.
    Configured,
    /// Matched to a GPU.
    Derived,
    /// No GPU left for the port: PCI order after the matched ports.
    PciOrder,
}

impl RailSource {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RailSource::Configured => "configured",
            RailSource::Derived => "derived",
            RailSource::PciOrder => "pci_order",
        }
    }
}

/// The rail of one RDMA port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rail {
    /// The RDMA device.
    pub device: String,
    /// The port.
    pub port: u32,
    /// The rail, from 0.
    pub rail: u32,
    /// The NIC's PCI address.
    pub address: String,
    /// The GPU the rail derives from.
    pub gpu: Option<usize>,
    /// How it was decided.
    pub source: RailSource,
}

/// Everything the `topology` source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// GPUs in PCI order.
    pub gpus: Vec<Gpu>,
    /// NICs in PCI order.
    pub nics: Vec<Nic>,
    /// Rails by device and port.
    pub rails: Vec<Rail>,
}

/// Reads PCI paths and derives topology and rails.
#[derive(Debug)]
pub struct TopologySource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    exclude: Option<Regex>,
    rails: Option<BTreeMap<String, u32>>,
}

impl TopologySource {
    /// A source over `roots`.
    pub fn new(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        exclude: Option<Regex>,
        rails: Option<BTreeMap<String, u32>>,
    ) -> Self {
        TopologySource {
            fs,
            sysfs: roots.sysfs.clone(),
            exclude,
            rails,
        }
    }

    fn excluded(&self, nic: &Nic) -> bool {
        self.exclude
            .as_ref()
            .is_some_and(|re| re.is_match(&nic.device) || re.is_match(&nic.address))
    }
}

impl Source for TopologySource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs, options) = (from.roots, Arc::clone(&from.fs), from.options);
        let rails = match options.value("rails") {
            Some(OptionValue::Map(pairs)) if !pairs.is_empty() => {
                Some(rail_map(pairs).map_err(|reason| SourceBuildError {
                    option: "rails".into(),
                    reason,
                })?)
            }
            Some(OptionValue::Text(text)) if !text.trim().is_empty() => {
                Some(parse_rail_map(text).map_err(|reason| SourceBuildError {
                    option: "rails".into(),
                    reason,
                })?)
            }
            _ => None,
        };
        Ok(TopologySource {
            fs,
            sysfs: roots.sysfs.clone(),
            exclude: regex_option(options, "rail-exclude")?,
            rails,
        })
    }

    fn collect(self: &Arc<Self>, _run: &Run<'_>) -> Report<Snapshot> {
        let fs = self.fs.as_ref();
        let mut errors: Vec<CollectError> = Vec::new();
        let gpu_addresses = pcie::nvidia_gpus(fs, &self.sysfs, &mut errors);
        let mut gpus = Vec::new();
        let mut gpu_paths: Vec<Option<PciPath>> = Vec::new();
        for (index, address) in gpu_addresses.into_iter().enumerate() {
            gpu_paths.push(pcie::pci_path(fs, &self.sysfs, &address, &mut errors));
            let numa_node = pcie::numa_node(fs, &self.sysfs, &address);
            gpus.push(Gpu {
                index,
                address,
                numa_node,
            });
        }
        let mut nics = Vec::new();
        for f in pcie::rdma_functions(fs, &self.sysfs, &mut errors) {
            let numa_node = pcie::numa_node(fs, &self.sysfs, &f.address);
            let path = pcie::pci_path(fs, &self.sysfs, &f.address, &mut errors);
            let distances = match &path {
                Some(p) if gpu_paths.iter().all(Option::is_some) => gpus
                    .iter()
                    .zip(&gpu_paths)
                    .filter_map(|(g, gp)| {
                        gp.as_ref()
                            .map(|gp| pcie::distance(p, numa_node, gp, g.numa_node))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            nics.push(Nic {
                device: f.device,
                address: f.address,
                numa_node,
                ports: f.ports,
                distances,
            });
        }
        nics.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then_with(|| a.device.cmp(&b.device))
        });
        let rails = match &self.rails {
            Some(map) => configured_rails(&nics, map),
            None => derive_rails(&nics, |n| self.excluded(n)),
        };
        Report {
            data: Some(Snapshot { gpus, nics, rails }),
            errors,
            absent: None,
        }
    }
}

fn configured_rails(nics: &[Nic], map: &BTreeMap<String, u32>) -> Vec<Rail> {
    let mut rails = Vec::new();
    for nic in nics {
        for &port in &nic.ports {
            let keys = [
                format!("{}/{port}", nic.device),
                nic.device.clone(),
                nic.address.clone(),
            ];
            if let Some(&rail) = keys.iter().find_map(|k| map.get(k)) {
                rails.push(Rail {
                    device: nic.device.clone(),
                    port,
                    rail,
                    address: nic.address.clone(),
                    gpu: None,
                    source: RailSource::Configured,
                });
            }
        }
    }
    rails.sort_by(|a, b| (&a.device, a.port).cmp(&(&b.device, b.port)));
    rails
}

/// Matches compute ports to GPUs, closest first, and numbers the rails (see the module doc).
pub fn derive_rails(nics: &[Nic], excluded: impl Fn(&Nic) -> bool) -> Vec<Rail> {
    // (nic, port) in PCI order.
    let ports: Vec<(usize, u32)> = nics
        .iter()
        .enumerate()
        .filter(|(_, n)| !excluded(n))
        .flat_map(|(i, n)| n.ports.iter().map(move |&p| (i, p)))
        .collect();
    let mut candidates: Vec<(Level, usize, usize)> = Vec::new(); // (distance, gpu, index into ports)
    for (k, &(nic, _)) in ports.iter().enumerate() {
        for (gpu, &level) in nics[nic].distances.iter().enumerate() {
            candidates.push((level, gpu, k));
        }
    }
    candidates.sort();
    let mut gpu_taken = HashSet::new();
    let mut matched: Vec<Option<usize>> = vec![None; ports.len()];
    for (_, gpu, k) in candidates {
        if matched[k].is_none() && !gpu_taken.contains(&gpu) {
            matched[k] = Some(gpu);
            gpu_taken.insert(gpu);
        }
    }
    // A matched port's rail is its GPU's index among all of the node's GPUs (PCI order), which
    // does not change when another NIC vanishes; ports without a GPU follow in PCI order.
    let gpus = nics.first().map_or(0, |n| n.distances.len());
    let mut unmatched = 0;
    let mut rails: Vec<Rail> = (0..ports.len())
        .map(|k| {
            let (nic, port) = ports[k];
            let rail = match matched[k] {
                Some(gpu) => gpu,
                None => {
                    unmatched += 1;
                    gpus + unmatched - 1
                }
            };
            Rail {
                device: nics[nic].device.clone(),
                port,
                rail: rail as u32,
                address: nics[nic].address.clone(),
                gpu: matched[k],
                source: if matched[k].is_some() {
                    RailSource::Derived
                } else {
                    RailSource::PciOrder
                },
            }
        })
        .collect();
    rails.sort_by(|a, b| (&a.device, a.port).cmp(&(&b.device, b.port)));
    rails
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(device: &str, address: &str, distances: &[Level]) -> Nic {
        Nic {
            device: device.into(),
            address: address.into(),
            numa_node: Some(0),
            ports: vec![1],
            distances: distances.to_vec(),
        }
    }

    fn rails_of(rails: &[Rail]) -> Vec<(String, u32, Option<usize>)> {
        let mut out: Vec<_> = rails
            .iter()
            .map(|r| (r.address.clone(), r.rail, r.gpu))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_vanished_nic_moves_no_other_rail() {
        use Level::*;
        // Eight GPUs, each with its own NIC under the same switch (PIX), the others further.
        let all: Vec<Nic> = (0..8)
            .map(|i| {
                let distances: Vec<Level> =
                    (0..8).map(|g| if g == i { Pix } else { Sys }).collect();
                nic(
                    &format!("mlx5_{i}"),
                    &format!("0000:{:02x}:00.0", 0x18 + i * 0x10),
                    &distances,
                )
            })
            .collect();
        let before = derive_rails(&all, |_| false);
        assert_eq!(
            before.iter().map(|r| r.rail).collect::<Vec<_>>(),
            (0..8).collect::<Vec<u32>>()
        );
        for gone in 0..8 {
            let mut nics = all.clone();
            nics.remove(gone);
            let after = derive_rails(&nics, |_| false);
            for rail in &after {
                let was = before.iter().find(|r| r.device == rail.device).unwrap();
                assert_eq!(
                    rail.rail, was.rail,
                    "mlx5_{gone} gone: {} moved",
                    rail.device
                );
            }
        }
    }

    #[test]
    fn one_nic_per_gpu_gives_the_gpu_index() {
        use Level::*;
        let nics = vec![
            nic("mlx5_0", "0000:18:00.0", &[Pix, Node, Sys]),
            nic("mlx5_1", "0000:40:00.0", &[Node, Pix, Sys]),
            nic("mlx5_2", "0000:c0:00.0", &[Sys, Sys, Pix]),
        ];
        let rails = derive_rails(&nics, |_| false);
        assert_eq!(
            rails
                .iter()
                .map(|r| (r.device.as_str(), r.rail))
                .collect::<Vec<_>>(),
            [("mlx5_0", 0), ("mlx5_1", 1), ("mlx5_2", 2)]
        );
        assert!(rails.iter().all(|r| r.source == RailSource::Derived));
    }

    #[test]
    fn names_do_not_matter() {
        use Level::*;
        let a = vec![
            nic("mlx5_0", "0000:18:00.0", &[Pix, Node]),
            nic("mlx5_1", "0000:40:00.0", &[Node, Pix]),
        ];
        let b = vec![
            nic("mlx5_0", "0000:0c:00.0", &[Phb, Node]),
            nic("mlx5_2", "0000:18:00.0", &[Pix, Node]),
            nic("mlx5_1", "0000:40:00.0", &[Node, Pix]),
        ];
        let rails_a = rails_of(&derive_rails(&a, |_| false));
        let rails_b = rails_of(&derive_rails(&b, |n| n.address == "0000:0c:00.0"));
        assert_eq!(rails_a, rails_b);
        // Not excluded, the front-end NIC loses to the PIX NICs and comes last.
        let all = derive_rails(&b, |_| false);
        let fe = all.iter().find(|r| r.device == "mlx5_0").unwrap();
        assert_eq!((fe.rail, fe.source), (2, RailSource::PciOrder));
    }

    #[test]
    fn a_nic_on_the_wrong_socket_keeps_its_rail() {
        use Level::*;
        // NIC 1 sits on socket 0; GPU 1 is on socket 1.
        let nics = vec![
            nic("mlx5_0", "0000:18:00.0", &[Pix, Sys]),
            nic("mlx5_1", "0000:20:00.0", &[Node, Sys]),
        ];
        let rails = derive_rails(&nics, |_| false);
        assert_eq!(
            rails_of(&rails),
            [
                ("0000:18:00.0".to_owned(), 0, Some(0)),
                ("0000:20:00.0".to_owned(), 1, Some(1))
            ]
        );
    }

    #[test]
    fn without_gpus_rails_follow_pci_order() {
        let nics = vec![
            nic("mlx5_1", "0000:18:00.0", &[]),
            nic("mlx5_0", "0000:40:00.0", &[]),
        ];
        let rails = derive_rails(&nics, |_| false);
        assert_eq!(
            rails_of(&rails),
            [
                ("0000:18:00.0".to_owned(), 0, None),
                ("0000:40:00.0".to_owned(), 1, None)
            ]
        );
    }

    #[test]
    fn configured_rails_by_name_port_or_address() {
        let map = parse_rail_map("mlx5_1=0, 0000:40:00.0=3,mlx4_0/2=7").unwrap();
        let mut mlx4 = nic("mlx4_0", "0000:05:00.0", &[]);
        mlx4.ports = vec![1, 2];
        let nics = vec![
            nic("mlx5_1", "0000:18:00.0", &[]),
            nic("mlx5_9", "0000:40:00.0", &[]),
            mlx4,
        ];
        let rails = configured_rails(&nics, &map);
        let got: Vec<_> = rails
            .iter()
            .map(|r| (r.device.as_str(), r.port, r.rail))
            .collect();
        assert_eq!(got, [("mlx4_0", 2, 7), ("mlx5_1", 1, 0), ("mlx5_9", 1, 3)]);
        assert!(parse_rail_map("mlx5_0").is_err());
        assert!(parse_rail_map("mlx5_0=-1").is_err());
        assert!(parse_rail_map("mlx5_0=1,mlx5_0=2").is_err());
    }
}
