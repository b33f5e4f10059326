//! The `workload` source: which workload holds which GPU and RDMA device, so that an alert
//! on a device can name the job on it ("whose job is that?").
//!
//! From the kubelet's PodResources API (v1, `List` and `GetAllocatableResources` over the
//! unix socket `/var/lib/kubelet/pod-resources/kubelet.sock`, [`kubelet`]): every device a
//! device plugin or a DRA driver gave a container, by namespace, pod and container. Exported
//! as info series to join on, never as labels on the device's own series: a pod label on
//! every counter would multiply the fleet's series every time a job restarts.
//!
//! From processes ([`processes`]): every process with a GPU or RDMA device open, and the
//! Slurm job, pod, systemd unit or session its cgroup puts it in; this works without a
//! kubelet, and sees pods that took a device without the device plugin.
//!
//! A node without the socket (no Kubernetes) has no kubelet series, and the socket is looked
//! for again at every collection, so a kubelet that starts later is picked up without a
//! restart. A kubelet that is slow, restarting or gone costs this source only: every call
//! is bounded by the collection's deadline.

pub mod kubelet;
pub mod processes;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::DEFAULT_SYSFS;
use crate::run::Run;
use crate::source::{Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "workload",
    help: "Which Kubernetes pod and container holds which GPU, MIG device and RDMA device, from the kubelet's PodResources API.",
    default_enabled: true,
    options: &[
        OptionSpec {
            name: "kubelet-socket",
            help: "The kubelet's PodResources socket (default /var/lib/kubelet/pod-resources/kubelet.sock where --path.sysfs is /sys, none otherwise); looked for again at every collection, so a kubelet that starts later is picked up",
            kind: OptionKind::Path,
        },
        OptionSpec {
            name: "rdma-shared-config",
            help: "The RDMA shared device plugin's config.json (its ConfigMap, mounted): its selectors (ifNames, drivers, linkTypes) say which RDMA devices a shared resource such as rdma/hca_shared_devices_a stands for; read at every collection",
            kind: OptionKind::Path,
        },
    ],
};

/// Where the kubelet serves the PodResources API.
pub const DEFAULT_KUBELET_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// What one device assignment is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Assignment {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
    /// The extended resource (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`,
    /// `rdma/hca_shared_devices_a`, `nvidia.com/sriov_rdma_vf`), or for a DRA claim the
    /// driver (`gpu.nvidia.com`).
    pub resource: String,
    /// The device id the plugin gave (a GPU or MIG UUID, `GPU-…::2` with time-slicing, a PCI
    /// address for an SR-IOV VF), or for a DRA claim the device name in its pool.
    pub device_id: String,
    /// For a DRA claim: the claim's namespace and name.
    pub claim: Option<(String, String)>,
}

/// One resource of the RDMA shared device plugin and the selectors of its RDMA devices
/// (`configList[].selectors` of its `config.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedRdma {
    /// `resourcePrefix` (default `rdma`) `/` `resourceName`.
    #[serde(skip)]
    pub resource: String,
    /// Netdev names of the RDMA devices' ports (an IPoIB netdev for an InfiniBand port).
    #[serde(default)]
    pub if_names: Vec<String>,
    /// The PCI functions behind `if_names` (`<sysfs>/class/net/<if>/device`), read at
    /// collection: an InfiniBand port names no netdev of its own.
    #[serde(skip)]
    pub if_pci: Vec<String>,
    /// Kernel drivers (`mlx5_core`).
    #[serde(default)]
    pub drivers: Vec<String>,
    /// Link layers (`infiniband`, `ether`).
    #[serde(default)]
    pub link_types: Vec<String>,
    /// PCI vendor ids; matched through the `pci` source only where a device's vendor is
    /// known there (not resolved here).
    #[serde(default)]
    pub vendors: Vec<String>,
    /// PCI device ids (not resolved here, as `vendors`).
    #[serde(default, rename = "deviceIDs")]
    pub device_ids: Vec<String>,
}

/// The plugin's `config.json`, as far as railscope reads it.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SharedConfig {
    #[serde(default)]
    config_list: Vec<SharedEntry>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SharedEntry {
    resource_name: String,
    #[serde(default)]
    resource_prefix: Option<String>,
    #[serde(default)]
    selectors: SharedRdma,
}

/// Parses the RDMA shared device plugin's `config.json`.
pub fn parse_shared_config(text: &str) -> Result<Vec<SharedRdma>, String> {
    let config: SharedConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(config
        .config_list
        .into_iter()
        .map(|e| {
            let prefix = e.resource_prefix.unwrap_or_else(|| "rdma".to_owned());
            SharedRdma {
                resource: format!("{prefix}/{}", e.resource_name),
                ..e.selectors
            }
        })
        .collect())
}

/// What the kubelet said in one collection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kubelet {
    /// Every device of every container, sorted.
    pub assignments: Vec<Assignment>,
    /// Pods the kubelet listed (with devices or not).
    pub pods: usize,
    /// Devices the kubelet can allocate, by resource (`GetAllocatableResources`, asked
    /// every [`kubelet::ALLOCATABLE_EVERY`]).
    pub allocatable: Vec<(String, usize)>,
}

/// The processes holding devices, from the last scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Processes {
    /// Every process with a GPU or RDMA device open, by pid.
    pub list: Vec<processes::Process>,
    /// Processes looked at.
    pub scanned: usize,
    /// The RDMA device behind each `uverbsN` the processes hold.
    pub uverbs: Vec<(u32, String)>,
}

/// What the `workload` source read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The kubelet's view; `None` when there is no kubelet socket.
    pub kubelet: Option<Box<Kubelet>>,
    /// Whether the kubelet answered in this collection (`false`: its socket exists but the
    /// call failed or timed out).
    pub kubelet_up: bool,
    /// The processes holding devices (scanned every [`processes::SCAN_EVERY`]).
    pub processes: Processes,
    /// The RDMA shared device plugin's resources, when its config is given.
    pub shared_rdma: Vec<SharedRdma>,
}

/// Reads workloads.
#[derive(Debug)]
pub struct WorkloadSource {
    /// `None` when there is no socket to ask (a fixture tree without one given).
    kubelet: Option<kubelet::Client>,
    roots: crate::fs::Roots,
    /// The RDMA shared device plugin's config.json, when given.
    shared_config: Option<PathBuf>,
    /// The last process scan and when it ran.
    scanned: Mutex<Option<(Instant, Processes)>>,
}

impl Source for WorkloadSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        // The host's kubelet is asked only when the agent reads the host's /sys: an agent
        // pointed at a fixture tree asks only a socket it is given.
        let socket = match from.options.get("kubelet-socket").filter(|s| !s.is_empty()) {
            Some(s) => Some(PathBuf::from(s)),
            None if from.roots.sysfs == Path::new(DEFAULT_SYSFS) => {
                Some(PathBuf::from(DEFAULT_KUBELET_SOCKET))
            }
            None => None,
        };
        let kubelet = match socket {
            Some(socket) => Some(kubelet::Client::new(socket).map_err(|e| SourceBuildError {
                option: "kubelet-socket".to_owned(),
                reason: e.to_string(),
            })?),
            None => None,
        };
        Ok(WorkloadSource {
            kubelet,
            roots: from.roots.clone(),
            shared_config: from
                .options
                .get("rdma-shared-config")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            scanned: Mutex::new(None),
        })
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let mut snapshot = Snapshot {
            processes: self.processes(),
            ..Snapshot::default()
        };
        let mut errors = Vec::new();
        if let Some(path) = &self.shared_config {
            match std::fs::read_to_string(path) {
                Ok(text) => match parse_shared_config(&text) {
                    Ok(mut shared) => {
                        for s in &mut shared {
                            s.if_pci = s
                                .if_names
                                .iter()
                                .filter_map(|n| {
                                    let link =
                                        self.roots.sysfs.join("class/net").join(n).join("device");
                                    let target = std::fs::read_link(link).ok()?;
                                    Some(target.file_name()?.to_str()?.to_owned())
                                })
                                .collect();
                        }
                        snapshot.shared_rdma = shared;
                    }
                    Err(e) => errors.push(CollectError::new(None, path, ErrorKind::Parse, e)),
                },
                Err(e) => errors.push(CollectError::io(None, path, &e)),
            }
        }
        if let Some(kubelet) = self.kubelet.as_ref().filter(|k| k.socket_exists()) {
            match kubelet.read(run.deadline()) {
                Ok(view) => {
                    snapshot.kubelet = Some(Box::new(view));
                    snapshot.kubelet_up = true;
                }
                Err((call, kind, detail)) => {
                    snapshot.kubelet = Some(Box::default());
                    errors.push(CollectError::at(None, Origin::Grpc { call }, kind, detail));
                }
            }
        }
        Report::new(snapshot, errors)
    }
}

impl WorkloadSource {
    /// The processes holding devices: scanned again when the last scan is
    /// [`processes::SCAN_EVERY`] old.
    fn processes(&self) -> Processes {
        let mut kept = self.scanned.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, p)) = kept.as_ref()
            && at.elapsed() < processes::SCAN_EVERY
        {
            return p.clone();
        }
        let (list, scanned) = processes::scan(&self.roots.procfs);
        let mut uverbs: Vec<u32> = list.iter().flat_map(|p| p.uverbs.iter().copied()).collect();
        uverbs.sort_unstable();
        uverbs.dedup();
        let uverbs = uverbs
            .into_iter()
            .filter_map(|n| processes::ibdev(&self.roots.sysfs, n).map(|d| (n, d)))
            .collect();
        let p = Processes {
            list,
            scanned,
            uverbs,
        };
        *kept = Some((Instant::now(), p.clone()));
        p
    }
}

/// A kubelet call that failed: the call, how, and what was said.
pub type KubeletError = (&'static str, ErrorKind, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_device_plugins_config_names_its_resources_and_selectors() {
        let config = r#"{
            "periodicUpdateInterval": 300,
            "configList": [
                {"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 1000,
                 "selectors": {"vendors": ["15b3"], "deviceIDs": ["101b"], "ifNames": ["ibp24s0", "ibp64s0"]}},
                {"resourceName": "roce_b", "resourcePrefix": "example.com", "rdmaHcaMax": 500,
                 "selectors": {"drivers": ["mlx5_core"], "linkTypes": ["ether"]}}
            ]
        }"#;
        let shared = parse_shared_config(config).unwrap();
        assert_eq!(shared.len(), 2);
        assert_eq!(shared[0].resource, "rdma/hca_shared_devices_a");
        assert_eq!(shared[0].if_names, ["ibp24s0", "ibp64s0"]);
        assert_eq!(shared[0].device_ids, ["101b"]);
        assert_eq!(shared[1].resource, "example.com/roce_b");
        assert_eq!(shared[1].drivers, ["mlx5_core"]);
        assert_eq!(shared[1].link_types, ["ether"]);
        assert!(parse_shared_config("{ not json").is_err());
        assert!(parse_shared_config(r#"{"configList": [{"rdmaHcaMax": 1}]}"#).is_err());
    }
}
