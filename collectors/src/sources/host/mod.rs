//! The `host` source: whether the node is ready for GPUDirect RDMA.
//!
//! * Kernel modules from `/sys/module`: `nvidia_peermem` (or the older `nv_peer_mem`) lets
//!   the RDMA stack register GPU memory; without it NCCL falls back to staging through host
//!   memory, silently.
//! * IOMMU presence (`/sys/class/iommu`) and mode: the default-domain type of the GPU and
//!   NIC IOMMU groups (`/sys/kernel/iommu_groups/<n>/type`, kernels 5.11+: `identity` is
//!   passthrough, `DMA`/`DMA-FQ` translated), else the kernel command line (`iommu=pt`,
//!   `iommu.passthrough=1`, `intel_iommu=off`...). A translating IOMMU costs peer-to-peer
//!   bandwidth or breaks it.
//! * RLIMIT_MEMLOCK from `/proc/<pid>/limits` of PID 1 (what services inherit) and of the
//!   agent: memory registration fails with ENOMEM under a small limit.
//! * DMA-BUF, the other way to GPUDirect RDMA: NCCL registers GPU memory through a dma-buf
//!   when the NVIDIA kernel module is the open one (GPL-compatible: its
//!   `/sys/module/nvidia/taint` lacks `P`, which the proprietary module's carries) and the
//!   kernel has RDMA dma-buf memory regions (5.12 and later, `/proc/sys/kernel/osrelease`).
//!   Such a node needs no `nvidia_peermem`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{CollectError, ErrorKind};
use crate::fs::attr::Attrs;
use crate::fs::{Fs, Roots};
use crate::pcie;
use crate::run::Run;
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "host",
    help: "GPUDirect RDMA readiness: nvidia_peermem and related modules, IOMMU mode, RLIMIT_MEMLOCK.",
    default_enabled: true,
    options: &[],
};

/// Modules whose presence is reported.
pub const MODULES: &[&str] = &[
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
    "ib_core",
    "ib_uverbs",
    "mlx5_ib",
];

/// The IOMMU's translation mode for devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IommuMode {
    /// No IOMMU is active.
    Off,
    /// Identity mapping (`iommu=pt`): DMA is not translated.
    Passthrough,
    /// DMA is translated through IOMMU page tables.
    Translated,
    /// Present, but the mode cannot be told.
    Unknown,
}

impl IommuMode {
    /// Every mode, for state-set export.
    pub const ALL: [IommuMode; 4] = [
        IommuMode::Off,
        IommuMode::Passthrough,
        IommuMode::Translated,
        IommuMode::Unknown,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            IommuMode::Off => "off",
            IommuMode::Passthrough => "passthrough",
            IommuMode::Translated => "translated",
            IommuMode::Unknown => "unknown",
        }
    }
}

/// A soft and hard resource limit; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The soft limit in bytes.
    pub soft: Option<u64>,
    /// The hard limit in bytes.
    pub hard: Option<u64>,
}

/// Which NVIDIA kernel module is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvidiaFlavor {
    /// The open GPU kernel module (dual MIT/GPL): it can export GPU memory as a dma-buf.
    Open,
    /// The proprietary module: GPUDirect RDMA needs `nvidia_peermem`.
    Proprietary,
}

impl NvidiaFlavor {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            NvidiaFlavor::Open => "open",
            NvidiaFlavor::Proprietary => "proprietary",
        }
    }

    /// The flavour from `/sys/module/nvidia/taint`: the kernel writes `P` for a module whose
    /// licence is not GPL-compatible (`module_flags_taint`), `O` for out of tree, `E` for
    /// unsigned.
    pub fn from_taint(taint: &str) -> NvidiaFlavor {
        if taint.trim().contains('P') {
            NvidiaFlavor::Proprietary
        } else {
            NvidiaFlavor::Open
        }
    }
}

/// The NVIDIA kernel module, when it is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaModule {
    /// Open or proprietary.
    pub flavor: NvidiaFlavor,
    /// `/sys/module/nvidia/version`, empty when unreadable.
    pub version: String,
}

/// Everything the `host` source read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Each of [`MODULES`] and whether it is loaded.
    pub modules: Vec<(&'static str, bool)>,
    /// IOMMU units in `/sys/class/iommu`.
    pub iommu_units: usize,
    /// The IOMMU mode, when it could be told.
    pub iommu_mode: Option<IommuMode>,
    /// Where the mode came from: `iommu_groups`, `cmdline` or `sysfs`.
    pub iommu_mode_source: &'static str,
    /// The IOMMU parameters of the kernel command line, space-separated.
    pub iommu_cmdline: String,
    /// RLIMIT_MEMLOCK of PID 1 and of the agent: (`init`/`self`, limit).
    pub memlock: Vec<(&'static str, Limit)>,
    /// The NVIDIA kernel module; `None` when it is not loaded or its taint cannot be read.
    /// Boxed: it keeps the snapshot small.
    pub nvidia: Option<Box<NvidiaModule>>,
    /// Major and minor of the running kernel (`/proc/sys/kernel/osrelease`), when readable.
    pub kernel_version: Option<(u32, u32)>,
}

impl Snapshot {
    /// Whether GPUDirect RDMA can go through dma-buf: the open NVIDIA module on a kernel with
    /// RDMA dma-buf memory regions (5.12+). `None` when either is unknown (no NVIDIA module,
    /// or the kernel release unread).
    pub fn dmabuf_capable(&self) -> Option<bool> {
        let nvidia = self.nvidia.as_ref()?;
        let version = self.kernel_version?;
        Some(nvidia.flavor == NvidiaFlavor::Open && version >= (5, 12))
    }
}

/// Major and minor of a kernel release string (`6.8.0-49-generic` gives (6, 8)).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Reads `/sys/module`, `/sys/class/iommu`, IOMMU groups, `/proc/cmdline` and limits.
#[derive(Debug)]
pub struct HostSource {
    fs: Arc<dyn Fs>,
    roots: Roots,
}

impl HostSource {
    /// A source over `roots`.
    pub fn new(roots: &Roots, fs: Arc<dyn Fs>) -> Self {
        HostSource {
            fs,
            roots: roots.clone(),
        }
    }

    fn text(&self, path: &Path, errors: &mut Vec<CollectError>) -> Option<String> {
        Attrs::new(self.fs.as_ref(), None, errors).string(path)
    }
}

impl Source for HostSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let (roots, fs) = (from.roots, Arc::clone(&from.fs));
        Ok(HostSource {
            fs,
            roots: roots.clone(),
        })
    }

    fn collect(self: &Arc<Self>, _run: &Run<'_>) -> Report<Snapshot> {
        let fs = self.fs.as_ref();
        let sysfs = &self.roots.sysfs;
        let mut errors = Vec::new();
        let modules = MODULES
            .iter()
            .map(|m| (*m, fs.exists(&sysfs.join("module").join(m))))
            .collect();

        let iommu_units = fs
            .read_dir(&sysfs.join("class/iommu"))
            .map(|e| e.len())
            .unwrap_or(0);
        let cmdline = self
            .text(&self.roots.procfs.join("cmdline"), &mut errors)
            .unwrap_or_default();
        let iommu_cmdline = iommu_params(&cmdline);

        // The default-domain types of the GPUs' and NICs' IOMMU groups.
        let mut addresses = pcie::nvidia_gpus(fs, sysfs, &mut errors);
        addresses.extend(
            pcie::rdma_functions(fs, sysfs, &mut errors)
                .into_iter()
                .map(|f| f.address),
        );
        let mut types: Vec<String> = Vec::new();
        for address in &addresses {
            let path = sysfs
                .join("bus/pci/devices")
                .join(address)
                .join("iommu_group/type");
            if let Some(t) = self.text(&path, &mut errors) {
                types.push(t.trim().to_owned());
            }
        }
        let (iommu_mode, iommu_mode_source) = iommu_mode(iommu_units, &types, &iommu_cmdline);

        let mut memlock = Vec::new();
        for (who, dir) in [("init", "1"), ("self", "self")] {
            let path: PathBuf = self.roots.procfs.join(dir).join("limits");
            if let Some(text) = self.text(&path, &mut errors) {
                match parse_memlock(&text) {
                    Some(limit) => memlock.push((who, limit)),
                    None => errors.push(CollectError::new(
                        None,
                        &path,
                        ErrorKind::Parse,
                        "no \"Max locked memory\" line",
                    )),
                }
            }
        }
        // The NVIDIA module's flavour and the kernel release, for dma-buf. A node without the
        // NVIDIA module (no taint file) or a procfs without osrelease is no error.
        let optional = |path: &Path, errors: &mut Vec<CollectError>| match fs.read(path) {
            Ok(bytes) => Some(String::from_utf8_lossy(&bytes).trim().to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                errors.push(CollectError::io(None, path, &e));
                None
            }
        };
        let module = sysfs.join("module/nvidia");
        let nvidia = optional(&module.join("taint"), &mut errors).map(|taint| {
            Box::new(NvidiaModule {
                flavor: NvidiaFlavor::from_taint(&taint),
                version: optional(&module.join("version"), &mut errors).unwrap_or_default(),
            })
        });
        let osrelease = self.roots.procfs.join("sys/kernel/osrelease");
        let kernel_version = optional(&osrelease, &mut errors).and_then(|release| {
            let version = kernel_version(&release);
            if version.is_none() {
                errors.push(CollectError::new(
                    None,
                    &osrelease,
                    ErrorKind::Parse,
                    "not a kernel release (major.minor...)",
                ));
            }
            version
        });
        Report {
            data: Some(Snapshot {
                modules,
                iommu_units,
                iommu_mode,
                iommu_mode_source,
                iommu_cmdline,
                memlock,
                nvidia,
                kernel_version,
            }),
            errors,
            absent: None,
        }
    }
}

/// The IOMMU-related parameters of a kernel command line.
pub fn iommu_params(cmdline: &str) -> String {
    cmdline
        .split_whitespace()
        .filter(|p| {
            let key = p.split('=').next().unwrap_or_default();
            key == "iommu"
                || key.starts_with("iommu.")
                || key == "intel_iommu"
                || key == "amd_iommu"
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Decides the IOMMU mode from the units, the group types and the command line.
pub fn iommu_mode(
    units: usize,
    group_types: &[String],
    params: &str,
) -> (Option<IommuMode>, &'static str) {
    if !group_types.is_empty() {
        let translated = group_types.iter().any(|t| t == "DMA" || t == "DMA-FQ");
        let identity = group_types.iter().all(|t| t == "identity");
        let mode = if translated {
            IommuMode::Translated
        } else if identity {
            IommuMode::Passthrough
        } else {
            IommuMode::Unknown
        };
        return (Some(mode), "iommu_groups");
    }
    let has = |p: &str| params.split_whitespace().any(|x| x == p);
    if units == 0 {
        return (Some(IommuMode::Off), "sysfs");
    }
    if has("iommu=off") || has("intel_iommu=off") || has("amd_iommu=off") {
        return (Some(IommuMode::Off), "cmdline");
    }
    if has("iommu=pt") || has("iommu.passthrough=1") {
        return (Some(IommuMode::Passthrough), "cmdline");
    }
    if has("iommu.passthrough=0") {
        return (Some(IommuMode::Translated), "cmdline");
    }
    (Some(IommuMode::Unknown), "sysfs")
}

/// Parses the `Max locked memory` line of `/proc/<pid>/limits`.
pub fn parse_memlock(text: &str) -> Option<Limit> {
    let line = text.lines().find(|l| l.starts_with("Max locked memory"))?;
    let mut fields = line["Max locked memory".len()..].split_whitespace();
    let value = |f: Option<&str>| -> Option<Option<u64>> {
        match f? {
            "unlimited" => Some(None),
            v => v.parse().ok().map(Some),
        }
    };
    Some(Limit {
        soft: value(fields.next())?,
        hard: value(fields.next())?,
    })
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memlock_lines() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max locked memory         8388608              unlimited            bytes     \n";
        assert_eq!(
            parse_memlock(limits),
            Some(Limit {
                soft: Some(8388608),
                hard: None
            })
        );
        assert_eq!(
            parse_memlock(
                "Max locked memory         unlimited            unlimited            bytes\n"
            ),
            Some(Limit {
                soft: None,
                hard: None
            })
        );
        assert_eq!(parse_memlock("Max open files 1024 4096 files\n"), None);
    }

    #[test]
    fn dmabuf_needs_the_open_module_and_a_5_12_kernel() {
        let snapshot = |taint: &str, release: Option<&str>| Snapshot {
            nvidia: Some(Box::new(NvidiaModule {
                flavor: NvidiaFlavor::from_taint(taint),
                version: "560.35.03".to_owned(),
            })),
            kernel_version: release.and_then(kernel_version),
            ..Snapshot::default()
        };
        assert_eq!(
            snapshot("O", Some("6.8.0-49-generic")).dmabuf_capable(),
            Some(true)
        );
        assert_eq!(
            snapshot("OE\n", Some("5.12.0")).dmabuf_capable(),
            Some(true)
        );
        assert_eq!(
            snapshot("POE", Some("6.8.0-49-generic")).dmabuf_capable(),
            Some(false)
        );
        assert_eq!(snapshot("O", Some("5.11.22")).dmabuf_capable(), Some(false));
        assert_eq!(
            snapshot("O", Some("3.10.0-1160.el7.x86_64")).dmabuf_capable(),
            Some(false)
        );
        assert_eq!(snapshot("O", None).dmabuf_capable(), None);
        assert_eq!(Snapshot::default().dmabuf_capable(), None);
        assert_eq!(kernel_version("6.1.0-27-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("garbage"), None);
    }

    #[test]
    fn iommu_modes() {
        let params =
            iommu_params("BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet intel_iommu=on iommu=pt");
        assert_eq!(params, "intel_iommu=on iommu=pt");
        let s = |v: &[&str]| v.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            iommu_mode(8, &s(&["identity", "identity"]), ""),
            (Some(IommuMode::Passthrough), "iommu_groups")
        );
        assert_eq!(
            iommu_mode(8, &s(&["identity", "DMA-FQ"]), "iommu=pt"),
            (Some(IommuMode::Translated), "iommu_groups")
        );
        assert_eq!(
            iommu_mode(0, &[], "intel_iommu=on"),
            (Some(IommuMode::Off), "sysfs")
        );
        assert_eq!(
            iommu_mode(2, &[], "intel_iommu=on iommu=pt"),
            (Some(IommuMode::Passthrough), "cmdline")
        );
        assert_eq!(
            iommu_mode(2, &[], "intel_iommu=off"),
            (Some(IommuMode::Off), "cmdline")
        );
        assert_eq!(iommu_mode(2, &[], ""), (Some(IommuMode::Unknown), "sysfs"));
    }
}
