//! The `transceiver` source: identity, diagnostics (DDM), thresholds and flags of the
//! transceiver modules in the NIC cages, read from the kernel with ethtool netlink
//! `ETHTOOL_MSG_MODULE_EEPROM_GET` (no MFT, no ethtool binary, no vendor library).
//!
//! Kernel interface: `net/ethtool/eeprom.c`, `include/uapi/linux/ethtool_netlink.h`
//! ([`wire`]); the module memory maps SFF-8472, SFF-8636 and CMIS ([`eeprom`]). Captures of
//! `ethtool -m ... hex on` decode through the same decoders ([`hexdump`]).
//!
//! Which netdevs: [`NetdevFilter`], as the `ethtool` source selects them (the netdevs behind
//! RDMA ports and the physical netdevs by default; `device-include` / `device-exclude`),
//! and only those that are the same link in the agent's network namespace
//! (`is_same_netdev` against the rtnetlink link dump).
//!
//! **Cadence.** Module reads go through NIC firmware (mlx5: one MCIA register access per
//! 48 bytes or so, milliseconds each), so a netdev's module is read at most every
//! `interval` (default [`DEFAULT_INTERVAL`]; `0` reads every collection); in between, the
//! values of the last read are exported as they are. Identity and thresholds
//! ([`eeprom::identify`]) are kept until the module changes: each diagnostics pass first
//! reads the serial number (16 bytes) and reads the identity again when it differs; every
//! lower-page read must still carry the identifier the module was identified with, and
//! every reply must hold the bytes asked (a short reply is a failed read: mlx5 before
//! commit d1c94bc5b90c answered a failed MCIA read with success and no data).
//!
//! **Failure semantics.** `EOPNOTSUPP` (a netdev without module EEPROM ops: veth,
//! netdevsim, IPoIB) is no series and no error. `EPERM` (the agent lacks `CAP_NET_ADMIN`,
//! which this command needs: `GENL_UNS_ADMIN_PERM` in `net/ethtool/netlink.c`, checked
//! before any driver is asked) is no series and no error either: the source reports itself
//! absent with that reason, which the agent logs once, as the `kmsg` source does without
//! `CAP_SYSLOG`. A missing privilege is the deployment's choice (the opt-in drop-in and
//! component grant it), not a fault of the node. `ENODEV` (the netdev went away) is skipped
//! quietly. Any other failure (no module in the cage, a read error, a truncated or
//! inconsistent page) counts in `read_errors`, is a [`CollectError`] for that netdev alone,
//! and makes the module `up = false` with no identity, threshold or diagnostics series
//! until a read succeeds again: a removed module's serial number is not exported as if it
//! were still there. One unit of [`Run::each`] per netdev, one at a time: never more than
//! one read outstanding on a NIC, and a unit stuck in firmware is not started again while
//! it runs.

pub mod eeprom;
pub mod hexdump;
#[cfg(test)]
mod real_captures;
#[cfg(test)]
mod tests;
mod types;
pub mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use eeprom::{PageReader, PageRequest, ReadError};
pub use types::*;

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::{Fs, Roots};
use crate::netdevs::{Departures, FILTER_OPTIONS, NetdevFilter, is_same_netdev, let_go};
use crate::netlink::rtnl::{self, Link, RtnlSocket, getlink_error};
use crate::run::{Run, standalone};
use crate::source::{
    Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec as SourceSpec,
};

/// How often a module is read by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// The options: the netdev filter and `interval`.
pub const OPTIONS: [OptionSpec; 3] = [
    FILTER_OPTIONS[0],
    FILTER_OPTIONS[1],
    OptionSpec {
        name: "interval",
        help: "How often a module's diagnostics are read through NIC firmware (60s, 5m, 500ms; 0 = every scrape); between reads the last values are exported. Default 60s.",
        // Text (the option kinds have no duration); parsed and validated when the source is built.
        kind: OptionKind::Path,
    },
];

/// The registry entry of this source.
pub const SPEC: SourceSpec = SourceSpec {
    name: "transceiver",
    help: "Transceiver module identity, per-lane RX/TX power and bias, temperature, voltage, thresholds and flags over ethtool netlink (MODULE_EEPROM_GET; SFF-8472, SFF-8636, CMIS).",
    default_enabled: true,
    options: &OPTIONS,
};

/// The command of every error.
const COMMAND: &str = "ETHTOOL_MSG_MODULE_EEPROM_GET";

/// Parses a duration option: a number with `ms`, `s`, `m` or `h` (a bare number is seconds).
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (60s, 5m, 500ms, 0)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// Opens a netdev's module memory.
pub trait ModuleAccess: Send + Sync + std::fmt::Debug {
    /// A reader of `netdev`'s module (`ifindex` when the link dump gave it).
    fn open(&self, netdev: &str, ifindex: Option<u32>) -> Result<Box<dyn PageReader>, ReadError>;
}

/// The kernel: a generic netlink socket per netdev pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct NetlinkAccess;

impl ModuleAccess for NetlinkAccess {
    fn open(&self, netdev: &str, ifindex: Option<u32>) -> Result<Box<dyn PageReader>, ReadError> {
        wire::NetlinkPages::open(netdev, ifindex)
            .map(|p| Box::new(p) as Box<dyn PageReader>)
            .map_err(|err| ReadError::Open {
                errno: err.raw_os_error(),
                detail: format!("cannot ask the ethtool generic netlink family: {err}"),
            })
    }
}

/// The time, injectable so tests of the cadence need no sleeps.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// A monotonic now.
    fn now(&self) -> Instant;
    /// Unix time, seconds.
    fn unix(&self) -> f64;
}

/// The system's clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn unix(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

/// What is kept of one netdev between collections.
#[derive(Debug, Clone, Default)]
struct State {
    /// When its module was last read (or found unsupported).
    attempted: Option<Instant>,
    /// The netdev has no module EEPROM ops.
    unsupported: bool,
    /// The last read answered `EPERM` (no `CAP_NET_ADMIN`).
    denied: bool,
    up: bool,
    info: Option<ModuleInfo>,
    diagnostics: Option<Diagnostics>,
    last_read: Option<f64>,
    errors: u64,
}

impl State {
    fn module(&self, netdev: &str) -> Option<Module> {
        (!self.unsupported && self.attempted.is_some()).then(|| Module {
            netdev: netdev.to_owned(),
            up: self.up,
            info: self.info.clone(),
            diagnostics: self.diagnostics.clone(),
            last_read: self.last_read,
            read_errors: self.errors,
        })
    }
}

/// What reading one netdev found.
enum Read {
    Module(Box<Module>),
    /// Not in the agent's network namespace, or gone.
    Elsewhere,
    /// No module EEPROM support.
    Unsupported,
    /// `EPERM`: the agent lacks `CAP_NET_ADMIN`.
    Denied,
}

/// Reads the transceiver modules of the selected netdevs.
#[derive(Debug)]
pub struct TransceiverSource {
    live_namespace_only: bool,
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    interval: Duration,
    access: Arc<dyn ModuleAccess>,
    clock: Arc<dyn Clock>,
    states: Mutex<HashMap<String, State>>,
    departures: Departures,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TransceiverSource {
    /// A source selecting netdevs under `roots` with `filter`, reading each module at most
    /// every `interval` through `access`, timed by `clock`.
    pub fn new(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        filter: NetdevFilter,
        interval: Duration,
        access: Arc<dyn ModuleAccess>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        TransceiverSource {
            live_namespace_only: false,
            fs,
            sysfs: roots.sysfs.clone(),
            filter,
            interval,
            access,
            clock,
            states: Mutex::new(HashMap::new()),
            departures: Departures::default(),
        }
    }

    /// Asks only netdevs that are the same link in the agent's network namespace.
    pub fn live_namespace_only(mut self) -> Self {
        self.live_namespace_only = true;
        self
    }

    /// Reads every selected netdev once, outside the agent (tests, tools).
    pub fn read(self: &Arc<Self>) -> Report<Snapshot> {
        standalone(SPEC.name, |run| self.read_in(run))
    }

    /// One pass over a module: identity when not known or the serial changed, then
    /// diagnostics.
    fn pass(
        &self,
        reader: &mut dyn PageReader,
        known: Option<ModuleInfo>,
    ) -> Result<(ModuleInfo, Diagnostics), eeprom::Error> {
        let info = match known {
            Some(info) => {
                let serial = eeprom::serial(reader, info.identity.spec)?;
                if serial == info.identity.serial_raw {
                    info
                } else {
                    tracing::info!(
                        serial = %info.identity.serial,
                        "Transceiver module serial number changed; reading its identity again."
                    );
                    eeprom::identify(reader)?
                }
            }
            None => eeprom::identify(reader)?,
        };
        let diagnostics = eeprom::diagnostics(reader, &info)?;
        Ok((info, diagnostics))
    }

    /// Reads one netdev's module, or gives what was read within the interval.
    fn read_netdev(
        &self,
        netdev: &str,
        ifindex: Option<u32>,
        errors: &mut Vec<CollectError>,
    ) -> Read {
        let now = self.clock.now();
        let mut state = lock(&self.states).get(netdev).cloned().unwrap_or_default();
        let fresh = state
            .attempted
            .is_some_and(|at| now.saturating_duration_since(at) < self.interval);
        if fresh {
            return match state.module(netdev) {
                Some(module) => Read::Module(Box::new(module)),
                None if state.denied => Read::Denied,
                None => Read::Unsupported,
            };
        }
        let result = self
            .access
            .open(netdev, ifindex)
            .map_err(eeprom::Error::from)
            .and_then(|mut reader| self.pass(reader.as_mut(), state.info.take()));
        state.attempted = Some(now);
        let read = match result {
            Ok((info, diagnostics)) => {
                state.unsupported = false;
                state.up = true;
                state.info = Some(info);
                state.diagnostics = Some(diagnostics);
                state.last_read = Some(self.clock.unix());
                None
            }
            Err(err) if err.errno() == Some(libc::EOPNOTSUPP) => {
                state = State {
                    attempted: Some(now),
                    unsupported: true,
                    ..State::default()
                };
                Some(Read::Unsupported)
            }
            Err(err) if err.errno() == Some(libc::EPERM) => {
                // Not the module's failure: no `up 0` for every cage of a node where the
                // agent lacks CAP_NET_ADMIN, and no error: the source says it is absent.
                state = State {
                    attempted: Some(now),
                    unsupported: true,
                    denied: true,
                    ..State::default()
                };
                Some(Read::Denied)
            }
            Err(err) if err.errno() == Some(libc::ENODEV) => {
                lock(&self.states).remove(netdev);
                return Read::Elsewhere;
            }
            Err(err) => {
                state.unsupported = false;
                state.up = false;
                state.info = None;
                state.diagnostics = None;
                state.errors += 1;
                errors.push(collect_error(netdev, &err));
                None
            }
        };
        let module = state.module(netdev);
        lock(&self.states).insert(netdev.to_owned(), state);
        match (read, module) {
            (Some(read), _) => read,
            (None, Some(module)) => Read::Module(Box::new(module)),
            (None, None) => Read::Unsupported,
        }
    }

    /// Reads every selected netdev, one unit of `run` per netdev, one at a time.
    pub fn read_in(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let selected = self.filter.select(self.fs.as_ref(), &self.sysfs);
        let departed = self.departures.update(&selected);
        let_go(self.fs.as_ref(), &self.sysfs, &departed);
        lock(&self.states).retain(|name, _| selected.binary_search(name).is_ok());
        let mut errors = Vec::new();
        let live = if self.live_namespace_only && !selected.is_empty() {
            match RtnlSocket::open(rtnl::RECEIVE_TIMEOUT).and_then(|mut s| s.dump_links()) {
                Ok(links) => Some(links),
                Err(err) => {
                    errors.push(getlink_error(&err));
                    return Report {
                        data: Some(Snapshot::default()),
                        errors,
                        absent: None,
                    };
                }
            }
        } else {
            None
        };
        let count = selected.len();
        let (src, live) = (Arc::clone(self), Arc::new(live));
        let units = run.each(selected, 1, move |name| {
            let mut errors = Vec::new();
            let ifindex = match live.as_deref() {
                Some(links) => {
                    let found: Option<&Link> = links.iter().find(|link| {
                        is_same_netdev(src.fs.as_ref(), &src.sysfs, name, link, &mut errors)
                    });
                    match found {
                        Some(link) => Some(link.index),
                        None => return (Read::Elsewhere, errors),
                    }
                }
                None => None,
            };
            let read = src.read_netdev(name, ifindex, &mut errors);
            (read, errors)
        });
        let mut modules = Vec::new();
        let (mut elsewhere, mut unsupported, mut denied) = (0, 0, 0);
        for (_, unit) in units {
            let Some((read, mut unit_errors)) = unit.done() else {
                continue; // late: its timeout is the run's error
            };
            errors.append(&mut unit_errors);
            match read {
                Read::Module(module) => modules.push(*module),
                Read::Elsewhere => elsewhere += 1,
                Read::Unsupported => unsupported += 1,
                Read::Denied => denied += 1,
            }
        }
        let absent = (modules.is_empty() && errors.is_empty() && count > 0).then(|| {
            if denied > 0 {
                return format!(
                    "MODULE_EEPROM_GET needs CAP_NET_ADMIN, which the agent lacks ({denied} of the {count} selected netdevs answered EPERM); grant it with the transceiver drop-in or component"
                );
            }
            format!(
                "none of the {count} selected netdevs has module EEPROM support ({unsupported} answered EOPNOTSUPP, {elsewhere} are not in the agent's network namespace)"
            )
        });
        Report {
            data: Some(Snapshot { modules }),
            errors,
            absent,
        }
    }
}

impl Source for TransceiverSource {
    type Data = Snapshot;
    const SPEC: SourceSpec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let interval = match from.options.get("interval") {
            None => DEFAULT_INTERVAL,
            Some(text) if text.is_empty() => DEFAULT_INTERVAL,
            Some(text) => parse_interval(text).map_err(|reason| SourceBuildError {
                option: "interval".into(),
                reason,
            })?,
        };
        Ok(TransceiverSource::new(
            from.roots,
            Arc::clone(&from.fs),
            NetdevFilter::from_options(from.options)?,
            interval,
            Arc::new(NetlinkAccess),
            Arc::new(SystemClock),
        )
        .live_namespace_only())
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        self.read_in(run)
    }
}

/// A [`CollectError`] for a netdev whose module read failed.
fn collect_error(netdev: &str, err: &eeprom::Error) -> CollectError {
    let kind = match err {
        eeprom::Error::Read(ReadError::Errno { .. } | ReadError::Open { .. }) => ErrorKind::Io,
        eeprom::Error::Read(_) | eeprom::Error::Inconsistent(_) => ErrorKind::Parse,
        eeprom::Error::UnknownIdentifier(_) => ErrorKind::Unavailable,
    };
    let detail = match err.errno() {
        Some(libc::EPERM) => format!(
            "{err} (MODULE_EEPROM_GET needs CAP_NET_ADMIN in the netdev's network namespace)"
        ),
        _ => err.to_string(),
    };
    CollectError {
        errno: err.errno(),
        ..CollectError::at(
            Some(netdev),
            Origin::netlink("ethtool", COMMAND),
            kind,
            format!("Failed to read the transceiver module of {netdev}: {detail}"),
        )
    }
}
