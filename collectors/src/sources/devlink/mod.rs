//! The `devlink` source: firmware and datapath health reporters and device info of every
//! devlink instance (and its ports) of the agent's network namespace, through the devlink
//! generic netlink family.
//!
//! Kernel interface: `include/uapi/linux/devlink.h`, `net/devlink/health.c`,
//! `net/devlink/dev.c` (6.1: `net/core/devlink.c`),
//! `Documentation/networking/devlink/devlink-health.rst`, `devlink-info.rst`. `wire` holds
//! the bytes.
//!
//! Each collection runs one unit of the [one timeout model](crate::run) that dumps the
//! instances (`DEVLINK_CMD_GET`) and every health reporter (`DEVLINK_CMD_HEALTH_REPORTER_GET`,
//! one dump for device and port reporters alike). Neither calls into a driver: the reporter
//! fill reads the counters and state devlink keeps for the reporter (only `DIAGNOSE` and
//! `DUMP_GET` call the driver's ops, and mlx5's `diagnose` queries firmware); so the dump is
//! cheap enough for every scrape. Device info (`DEVLINK_CMD_INFO_GET`) calls the driver's
//! `info_get`, which on mlx5 queries firmware (`mlx5_devlink_info_get` →
//! `mlx5_fw_version_query`, MCQI/MCQS register reads); it is asked per instance, one unit
//! each, and kept for [`INFO_REFRESH`] (versions change only with a flash and a reload or
//! reset, and a reload re-creates the instance's reporters, which the next dump sees).
//!
//! Privileges: `HEALTH_REPORTER_GET`, `INFO_GET` and `GET` have no `GENL_ADMIN_PERM`, in 6.1
//! (`devlink_nl_ops`: "can be retrieved by unprivileged users") and in current kernels
//! (`net/devlink/netlink_gen.c`); an `EPERM` (a security module, a seccomp filter) makes the
//! source absent, said once, not a storm of errors. A kernel without devlink (no
//! `CONFIG_NET_DEVLINK`) has no `devlink` family (`ENOENT` from `nlctrl`): absent too.
//!
//! Network namespaces: devlink instances belong to a network namespace (`devlink reload
//! netns`; 5.7+) and a dump lists only those of the socket's namespace
//! (`devlinks_xa_for_each_registered_get(sock_net(...))`). An agent in a pod without host
//! networking sees none; the source then reports itself absent. Only instances whose device
//! is under the configured sysfs root (`<sysfs>/bus/<bus>/devices/<name>`) are reported, so
//! an agent pointed at a fixture tree does not mix the live kernel's instances into it.
//!
//! Failure semantics: a reporter or info message that cannot be decoded costs that reporter
//! or that instance's info and is a [`CollectError`]; an `INFO_GET` that fails costs that
//! instance's info only (retried at the next collection); `EOPNOTSUPP` (a driver without
//! `info_get`) and `ENODEV` (the instance left since the dump) are no info and no error. A
//! dump that fails part-way keeps what it read and counts one error.

mod types;
pub mod wire;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use types::{Device, Info, Reporter, ReporterState, Snapshot, Version, VersionKind};
pub use wire::Handle;

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::{Fs, is_pci_address};
use crate::netlink::genl::GenlSocket;
use crate::netlink::{DecodeError, Flow};
use crate::pcie;
use crate::run::{Run, Unit};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "devlink",
    help: "Devlink health reporters (state, errors, recoveries, last dump) and device info (driver, serial numbers, firmware versions) over devlink generic netlink.",
    default_enabled: true,
    options: &[],
};

/// The protocol name of this source's [`Origin::Netlink`] errors.
pub const PROTOCOL: &str = "devlink";

/// How long one receive may wait.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a device's info is kept before it is asked again.
pub const INFO_REFRESH: Duration = Duration::from_secs(600);

/// The key of the dump's unit in [`Run::each`].
const DUMP_UNIT: &str = "devlink dump";

/// A device's info as last read.
#[derive(Debug, Clone)]
struct KeptInfo {
    info: Option<Info>,
    read_at: Instant,
}

/// What the dump unit found.
#[derive(Debug)]
pub(crate) enum Dumped {
    /// No devlink here, or no right to ask: said once.
    Absent(String),
    /// The instances and their reporters, with the failures met.
    Read {
        instances: Vec<Handle>,
        reporters: Vec<(Handle, Reporter)>,
        errors: Vec<CollectError>,
    },
}

/// How the source asks the kernel: the devlink family over generic netlink, or a fake in
/// tests.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// Dumps the instances and every health reporter.
    fn dump(&self) -> Dumped;
    /// Asks one instance's info: `Ok(None)` when its driver has none.
    fn info(&self, handle: &Handle) -> Result<Option<Info>, CollectError>;
}

/// Reads devlink health reporters and info.
#[derive(Debug)]
pub struct DevlinkSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    transport: Arc<dyn Transport>,
    infos: Mutex<HashMap<Handle, KeptInfo>>,
}

/// The devlink family over one generic netlink socket, kept between collections.
#[derive(Debug, Default)]
struct Netlink {
    /// `None` until opened, and after a failure.
    socket: Mutex<Option<GenlSocket>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn error(device: Option<&str>, command: String, err: &io::Error) -> CollectError {
    CollectError::netlink(device, PROTOCOL, command, err)
}

fn decode_error(device: Option<&str>, command: String, err: &DecodeError) -> CollectError {
    CollectError::at(
        device,
        Origin::netlink(PROTOCOL, command),
        ErrorKind::Parse,
        err.to_string(),
    )
}

/// Whether `err` says "no devlink to ask here" rather than a failure.
fn absent_reason(err: &io::Error, what: &str) -> Option<String> {
    match err.raw_os_error() {
        Some(libc::ENOENT) => Some(format!(
            "the kernel has no devlink generic netlink family ({what}: ENOENT)"
        )),
        Some(libc::EPERM) | Some(libc::EACCES) => Some(format!(
            "the agent may not read devlink ({what}: {})",
            crate::error::errno_name(err.raw_os_error().unwrap_or(0))
        )),
        Some(libc::EPROTONOSUPPORT) => Some(format!("the kernel has no generic netlink ({what})")),
        _ => None,
    }
}

impl DevlinkSource {
    /// A source reading PCI functions' RDMA devices under `sysfs` through `fs`.
    pub fn new(fs: Arc<dyn Fs>, sysfs: PathBuf) -> Self {
        Self::with_transport(fs, sysfs, Arc::new(Netlink::default()))
    }

    pub(crate) fn with_transport(
        fs: Arc<dyn Fs>,
        sysfs: PathBuf,
        transport: Arc<dyn Transport>,
    ) -> Self {
        DevlinkSource {
            fs,
            sysfs,
            transport,
            infos: Mutex::new(HashMap::new()),
        }
    }
}

impl Netlink {
    /// Runs `f` on the kept socket (opening it first when there is none); a failure drops
    /// it, so the next use opens a fresh one. When the socket is held (by a unit stuck in a
    /// wedged driver), a socket of its own.
    fn with_socket<R>(&self, f: impl FnOnce(&mut GenlSocket) -> io::Result<R>) -> io::Result<R> {
        let mut own;
        let mut shared = self.socket.try_lock().ok();
        let socket = match shared.as_deref_mut() {
            Some(slot) => {
                if slot.is_none() {
                    *slot = Some(GenlSocket::open(RECEIVE_TIMEOUT)?);
                }
                match slot.as_mut() {
                    Some(s) => s,
                    None => return Err(io::Error::from_raw_os_error(libc::EBADF)),
                }
            }
            None => {
                own = GenlSocket::open(RECEIVE_TIMEOUT)?;
                &mut own
            }
        };
        let out = f(socket);
        if let (Err(_), Some(slot)) = (&out, shared.as_deref_mut()) {
            *slot = None;
        }
        out
    }

    /// Dumps the instances and every health reporter.
    fn ask_dump(&self) -> Dumped {
        let mut errors = Vec::new();
        let mut instances = Vec::new();
        let mut reporters = Vec::new();
        let asked = self.with_socket(|socket| {
            let family = socket.family(wire::FAMILY)?.id;
            let command = "DEVLINK_CMD_GET dump".to_owned();
            socket.request(
                |seq| wire::encode_dump(family, wire::CMD_GET, seq),
                RECEIVE_TIMEOUT * 2,
                |message| {
                    match wire::decode_instance(message) {
                        Ok(handle) => instances.push(handle),
                        Err(err) => errors.push(decode_error(None, command.clone(), &err)),
                    }
                    Ok(Flow::More)
                },
            )?;
            socket.request(
                |seq| wire::encode_dump(family, wire::CMD_HEALTH_REPORTER_GET, seq),
                RECEIVE_TIMEOUT * 2,
                |message| {
                    match wire::decode_reporter(message) {
                        Ok(r) => reporters.push(r),
                        Err(err) => errors.push(decode_error(
                            None,
                            "DEVLINK_CMD_HEALTH_REPORTER_GET dump".to_owned(),
                            &err,
                        )),
                    }
                    Ok(Flow::More)
                },
            )
        });
        if let Err(err) = asked {
            if let Some(reason) = absent_reason(&err, "devlink dump") {
                return Dumped::Absent(reason);
            }
            let command = if instances.is_empty() && reporters.is_empty() {
                "DEVLINK_CMD_GET dump"
            } else {
                "DEVLINK_CMD_HEALTH_REPORTER_GET dump"
            };
            errors.push(error(None, command.to_owned(), &err));
        }
        Dumped::Read {
            instances,
            reporters,
            errors,
        }
    }

    /// Asks `handle`'s info; `Ok(None)` when its driver has none.
    fn ask_info(&self, handle: &Handle) -> Result<Option<Info>, CollectError> {
        let device = handle.to_string();
        let command = format!("DEVLINK_CMD_INFO_GET {device}");
        let mut decoded = None;
        let asked = self.with_socket(|socket| {
            let family = socket.family(wire::FAMILY)?.id;
            socket.request(
                |seq| wire::encode_info_get(family, handle, seq),
                RECEIVE_TIMEOUT * 2,
                |message| {
                    decoded = Some(wire::decode_info(message));
                    Ok(Flow::Done)
                },
            )
        });
        match (asked, decoded) {
            (Ok(()), Some(Ok((_, info)))) => Ok(Some(info)),
            (Ok(()), Some(Err(err))) => Err(decode_error(Some(&device), command, &err)),
            (Ok(()), None) => Ok(None),
            // No info op, or the instance left between the dump and this request.
            (Err(err), _)
                if matches!(err.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENODEV)) =>
            {
                Ok(None)
            }
            (Err(err), _) => Err(error(Some(&device), command, &err)),
        }
    }
}

impl Transport for Netlink {
    fn dump(&self) -> Dumped {
        self.ask_dump()
    }

    fn info(&self, handle: &Handle) -> Result<Option<Info>, CollectError> {
        self.ask_info(handle)
    }
}

impl DevlinkSource {
    /// Asks `handle`'s info.
    fn info(&self, handle: &Handle) -> (Option<KeptInfo>, Vec<CollectError>) {
        match self.transport.info(handle) {
            Ok(info) => (
                Some(KeptInfo {
                    info,
                    read_at: Instant::now(),
                }),
                Vec::new(),
            ),
            Err(err) => (None, vec![err]),
        }
    }

    /// Reads every instance once, under `run`.
    pub fn read_in(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let src = Arc::clone(self);
        let mut units = run.each(vec![DUMP_UNIT.to_owned()], 1, move |_| src.transport.dump());
        let Some((_, Unit::Done(dumped))) = units.pop() else {
            // Late or not started: the run has counted its timeout.
            return Report::new(Snapshot::default(), Vec::new());
        };
        let (instances, reporters, mut errors) = match dumped {
            Dumped::Absent(reason) => return Report::absent(Snapshot::default(), reason),
            Dumped::Read {
                instances,
                reporters,
                errors,
            } => (instances, reporters, errors),
        };
        let mut devices: BTreeMap<Handle, Vec<Reporter>> =
            instances.into_iter().map(|h| (h, Vec::new())).collect();
        for (handle, reporter) in reporters {
            devices.entry(handle).or_default().push(reporter);
        }
        // Only the instances whose device is under the configured sysfs root: an agent run
        // against a fixture tree does not report the live kernel's instances.
        let listed = devices.len();
        devices.retain(|h, _| self.under_root(h));
        if devices.is_empty() && errors.is_empty() {
            let reason = if listed == 0 {
                "no devlink instance in the agent's network namespace".to_owned()
            } else {
                format!(
                    "none of the {listed} devlink instances has its device under {}/bus",
                    self.sysfs.display()
                )
            };
            return Report::absent(Snapshot::default(), reason);
        }
        // Info: kept for INFO_REFRESH; the stale and the missing asked, one unit each.
        let stale: Vec<Handle> = {
            let mut kept = lock(&self.infos);
            kept.retain(|h, _| devices.contains_key(h));
            devices
                .keys()
                .filter(|h| {
                    kept.get(*h)
                        .is_none_or(|k| k.read_at.elapsed() >= INFO_REFRESH)
                })
                .cloned()
                .collect()
        };
        if !stale.is_empty() {
            let by_key: Arc<HashMap<String, Handle>> =
                Arc::new(stale.iter().map(|h| (h.to_string(), h.clone())).collect());
            let (src, of) = (Arc::clone(self), Arc::clone(&by_key));
            let keys = stale.iter().map(Handle::to_string).collect();
            let asked = run.each(keys, 1, move |key| match of.get(key) {
                Some(handle) => (Some(handle.clone()), src.info(handle)),
                None => (None, (None, Vec::new())),
            });
            let mut kept = lock(&self.infos);
            for (_, unit) in asked {
                if let Unit::Done((Some(handle), (info, mut unit_errors))) = unit {
                    errors.append(&mut unit_errors);
                    match info {
                        Some(info) => {
                            kept.insert(handle, info);
                        }
                        None => {
                            kept.remove(&handle);
                        }
                    }
                }
            }
        }
        let functions = self.rdma_by_function(&mut errors);
        let kept = lock(&self.infos);
        let devices = devices
            .into_iter()
            .map(|(handle, reporters)| {
                let pci_address = (handle.bus == "pci" && is_pci_address(&handle.name))
                    .then(|| handle.name.clone());
                let rdma_devices = pci_address
                    .as_ref()
                    .and_then(|a| functions.get(a))
                    .cloned()
                    .unwrap_or_default();
                Device {
                    info: kept.get(&handle).and_then(|k| k.info.clone()),
                    bus: handle.bus,
                    name: handle.name,
                    pci_address,
                    rdma_devices,
                    reporters,
                }
            })
            .collect();
        Report::new(Snapshot { devices }, errors)
    }

    /// Whether the instance's device is under the sysfs root: `bus/<bus>/devices/<name>`
    /// (`bus/pci/devices/0000:18:00.0`, `bus/netdevsim/devices/netdevsim1`,
    /// `bus/auxiliary/devices/mlx5_core.sf.2`). A name that is not one path component is not.
    fn under_root(&self, handle: &Handle) -> bool {
        let component = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains('/');
        component(&handle.bus)
            && component(&handle.name)
            && self.fs.exists(
                &self
                    .sysfs
                    .join("bus")
                    .join(&handle.bus)
                    .join("devices")
                    .join(&handle.name),
            )
    }

    /// The RDMA devices of each PCI function, in name order.
    fn rdma_by_function(&self, errors: &mut Vec<CollectError>) -> HashMap<String, Vec<String>> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for f in pcie::rdma_functions(self.fs.as_ref(), &self.sysfs, errors) {
            out.entry(f.address).or_default().push(f.device);
        }
        out
    }
}

impl Source for DevlinkSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        Ok(DevlinkSource::new(
            Arc::clone(&from.fs),
            from.roots.sysfs.clone(),
        ))
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}
