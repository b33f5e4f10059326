//! The `neighbour` source: who is at the other end of each cable — the switch and its port —
//! and the switch port's settings that the host's own can be compared with (frame size and
//! PFC over LLDP, width and rate over SMPs).
//!
//! Two readers feed one table of links, each on a thread of its own and off the scrape path;
//! a collection reads the table:
//!
//! * **LLDP** ([`lldp`]) for Ethernet and RoCE netdevs: one `AF_PACKET` socket receives every
//!   LLDPDU of the agent's network namespace (`--collector.neighbour.lldp=socket`, the
//!   default), or a running lldpd is read with `lldpcli -f json0` (`lldp=lldpd`; `auto`:
//!   lldpd where its control socket exists at start; [`lldp::lldpd`]); `off` turns it off.
//!   Which netdevs: [`NetdevFilter`] (the netdevs behind RDMA
//!   ports and the physical netdevs by default; `device-include` / `device-exclude`), listed
//!   again at every collection, so netdevs that come and go are picked up and let go.
//!   Without `CAP_NET_RAW` each selected netdev has status `no_permission`, logged once.
//! * **SMP** for InfiniBand ports (link layer `InfiniBand` with a umad device,
//!   `/sys/class/infiniband_mad/umadN/{ibdev,port}`): directed-route SMPs (NodeDescription,
//!   NodeInfo, the far end's PortInfo) through an [`IbProbe`], every `smp-interval` (default
//!   10 minutes) and at once when the port's state becomes ACTIVE. Ports with another link
//!   layer (RoCE, iWARP) or without a umad device have status `not_available`, said once, and
//!   no SMP is sent. The reader is [`smp`] (the kernel's umad ABI, no libibumad), behind the
//!   [`IbProbe`] seam ([`ib_probe`]) that tests replace with a double.
//!
//! The labels of a link: `device`/`port` (the RDMA port of the netdev: its GID netdev, a
//! Soft-RoCE parent; empty when it has none) and `netdev` (empty for an InfiniBand port
//! without one).

pub mod lldp;
pub mod smp;
#[cfg(test)]
mod tests;
pub mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use types::{Identity, Link, Pfc, Protocol, Snapshot, Status};

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::attr;
use crate::fs::{Fs, Roots};
use crate::netdevs::{FILTER_OPTIONS, NetdevFilter, is_same_netdev};
use crate::netlink::rtnl::{self, RtnlSocket, getlink_error};
use crate::run::Run;
use crate::source::{
    Build, OptionKind, OptionSpec, OptionValues, Report, Source, SourceBuildError, Spec,
};

/// The longest label value of a neighbour's identity, in bytes.
pub const MAX_LABEL_BYTES: usize = 64;
/// The default LLDP timeout: three times the usual 30 s transmit interval.
pub const DEFAULT_LLDP_TIMEOUT: Duration = Duration::from_secs(90);
/// The default time between two SMP queries of an InfiniBand port.
pub const DEFAULT_SMP_INTERVAL: Duration = Duration::from_secs(600);
/// How long one SMP query may wait for its answer.
pub const SMP_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the SMP thread looks for ports that are due.
const SMP_TICK: Duration = Duration::from_secs(1);
/// Where the umad device nodes are.
const DEV_INFINIBAND: &str = "/dev/infiniband";

/// The options.
pub const OPTIONS: [OptionSpec; 6] = [
    FILTER_OPTIONS[0],
    FILTER_OPTIONS[1],
    OptionSpec {
        name: "lldp",
        help: "How LLDP neighbours of Ethernet/RoCE netdevs are learned: socket (the agent's own AF_PACKET receiver; needs CAP_NET_RAW), lldpd (lldpcli -f json0 against a running lldpd's control socket, every 10 s), auto (lldpd where its control socket exists, else socket) or off.",
        kind: OptionKind::Choice(&["socket", "lldpd", "auto", "off"]),
    },
    OptionSpec {
        name: "lldpd-socket",
        help: "The control socket of the lldpd that lldp=lldpd (and auto) reads (default /run/lldpd.socket).",
        kind: OptionKind::Path,
    },
    OptionSpec {
        name: "lldp-timeout",
        help: "How long a netdev may hear no LLDPDU before its status is no_frames: a number of seconds, or with a unit (90s, 2m; default 90s).",
        kind: OptionKind::Path,
    },
    OptionSpec {
        name: "smp-interval",
        help: "How often each InfiniBand port's neighbour is asked with directed-route SMPs (and at once when the port becomes ACTIVE): seconds, or with a unit (600s, 10m, 1h; default 10m).",
        kind: OptionKind::Path,
    },
];

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "neighbour",
    help: "The switch and switch port at the far end of each link: LLDP (AF_PACKET) for Ethernet/RoCE netdevs with the switch port's frame size and PFC, directed-route SMPs for InfiniBand ports.",
    default_enabled: true,
    options: &OPTIONS,
};

/// A label value from free text: trailing NULs and whitespace dropped, every character that
/// is not printable ASCII replaced by `?`, at most [`MAX_LABEL_BYTES`] bytes.
pub fn label_text(text: &str) -> String {
    let text = text.trim_end_matches(|c: char| c == '\0' || c.is_whitespace());
    text.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(MAX_LABEL_BYTES)
        .collect()
}

/// Parses a duration option: seconds, or a number with `s`, `m` or `h`.
pub fn duration_option(
    values: &OptionValues,
    name: &str,
    default: Duration,
) -> Result<Duration, SourceBuildError> {
    let Some(text) = values.get(name) else {
        return Ok(default);
    };
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(n) if n > 0 && scale > 0 => Ok(Duration::from_secs(n.saturating_mul(scale))),
        _ => Err(SourceBuildError {
            option: name.to_owned(),
            reason: format!("{text:?} is not a positive number of seconds (90, 90s, 2m, 1h)"),
        }),
    }
}

// ---------------------------------------------------------------------------------------
// The InfiniBand seam.
// ---------------------------------------------------------------------------------------

/// What an SMP query learned of an InfiniBand port's far end.
#[derive(Debug, Clone, PartialEq)]
pub struct IbNeighbour {
    /// NodeDescription (64 bytes, NUL-padded; sanitised here for the label).
    pub node_description: String,
    /// NodeGUID.
    pub node_guid: u64,
    /// NodeType (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// LocalPortNum: the far end's port number (the switch port the cable is plugged into).
    pub local_port: u8,
    /// The far end's LinkWidthActive in lanes (1, 2, 4, 8, 12): [`width_lanes`].
    pub width_lanes: Option<u32>,
    /// The far end's active per-lane speed in Gb/s as the kernel's `rate` attribute counts it
    /// (`ib_speed_enum_to_int`: SDR 2.5, DDR 5, QDR 10, FDR10 10, FDR 14, EDR 25, HDR 50,
    /// NDR 100, XDR 200).
    pub lane_gbps: Option<f64>,
}

/// Why an SMP query learned nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IbProbeError {
    /// The port cannot send SMPs (no QP0: RoCE, iWARP; a VF).
    #[error("SMPs are not possible: {0}")]
    NotAvailable(String),
    /// The SMP was answered with an error MAD status (M_Key protection, for one).
    #[error("SMP answered with MAD status {status:#06x}")]
    Refused {
        /// The MAD status.
        status: u16,
    },
    /// No answer in time.
    #[error("SMP not answered in time")]
    Timeout,
    /// The umad device cannot be opened (`EACCES`/`EPERM`).
    #[error("no access to the umad device: {0}")]
    Permission(String),
    /// Any other failure (it counts as an error of the port).
    #[error("{0}")]
    Failed(String),
}

/// The InfiniBand side's seam: asks the far end of `port` of the umad device `umad`
/// (`/dev/infiniband/umadN`) with directed-route SMPs (initial path `{0, port}`, hop count
/// 1), waiting at most `timeout`. Blocks; runs on the source's SMP thread, never on the
/// scrape path.
pub trait IbProbe: Send + Sync + std::fmt::Debug + 'static {
    /// One query.
    fn query(&self, umad: &Path, port: u32, timeout: Duration)
    -> Result<IbNeighbour, IbProbeError>;
}

/// The IB probe the built source uses: directed-route SMPs over the port's umad device
/// ([`smp`]).
pub fn ib_probe() -> Option<Arc<dyn IbProbe>> {
    Some(Arc::new(SmpProbe))
}

/// The [`IbProbe`] of the kernel's umad ABI ([`smp::query_umad`]): one query of three SMPs,
/// each waiting at most [`smp::DEFAULT_SMP_TIMEOUT`], all within the caller's `timeout`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SmpProbe;

impl IbProbe for SmpProbe {
    fn query(
        &self,
        umad: &Path,
        port: u32,
        timeout: Duration,
    ) -> Result<IbNeighbour, IbProbeError> {
        let deadline = std::time::Instant::now() + timeout;
        let smp_timeout = smp::DEFAULT_SMP_TIMEOUT.min(timeout);
        match smp::query_umad(umad, port, smp_timeout, deadline) {
            Ok(n) => Ok(ib_neighbour(&n)),
            Err(err) => Err(probe_error(&err)),
        }
    }
}

/// The seam's view of what the SMPs learned.
fn ib_neighbour(n: &smp::Neighbour) -> IbNeighbour {
    IbNeighbour {
        node_description: n.description.clone(),
        node_guid: n.node.node_guid,
        node_type: match n.node.node_type {
            smp::mad::NodeType::ChannelAdapter => 1,
            smp::mad::NodeType::Switch => 2,
            smp::mad::NodeType::Router => 3,
            smp::mad::NodeType::Other(v) => v,
        },
        local_port: n.node.local_port_num,
        width_lanes: n.link_width_lanes(),
        lane_gbps: n.port.lane_speed().map(|s| s.deci_gbps() as f64 / 10.0),
    }
}

/// The seam's view of a failed query.
fn probe_error(err: &smp::SmpError) -> IbProbeError {
    match err.kind {
        smp::ErrorKind::NotAvailable => IbProbeError::NotAvailable(err.to_string()),
        smp::ErrorKind::NoPermission => IbProbeError::Permission(err.to_string()),
        smp::ErrorKind::Refused => IbProbeError::Refused {
            status: err.mad_status.unwrap_or(0),
        },
        smp::ErrorKind::Timeout => IbProbeError::Timeout,
        smp::ErrorKind::Failed => IbProbeError::Failed(err.to_string()),
    }
}

/// LinkWidthActive/Enabled bits of PortInfo to lanes (IBA 14.2.5.6: 1 = 1x, 2 = 4x, 4 = 8x,
/// 8 = 12x, 16 = 2x), as the kernel's `ib_width_enum_to_int`.
pub fn width_lanes(bits: u8) -> Option<u32> {
    match bits {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// Active width × per-lane speed, in bytes per second (the kernel's `rate` attribute in Gb/s
/// is the same product).
pub fn rate_bytes_per_second(lanes: u32, lane_gbps: f64) -> f64 {
    f64::from(lanes) * lane_gbps * 1e9 / 8.0
}

/// One InfiniBand port the SMP thread asks.
#[derive(Debug, Clone)]
struct IbEntry {
    netdev: String,
    umad: PathBuf,
    active: bool,
    /// Ask at the next tick (new, or it became ACTIVE).
    due: bool,
    asked: Option<Instant>,
    status: Option<Status>,
    identity: Option<Identity>,
    known: bool,
    changes: u64,
    last_seen: Option<f64>,
    width_lanes: Option<u32>,
    rate: Option<f64>,
    errors: Vec<CollectError>,
}

/// The SMP side's table, by (device, port).
#[derive(Debug, Default)]
pub struct IbTable {
    ports: BTreeMap<(String, u32), IbEntry>,
}

impl IbTable {
    /// The ports due at `now` with an `interval` between queries: (key, umad, port).
    fn due(&mut self, now: Instant, interval: Duration) -> Vec<((String, u32), PathBuf)> {
        let mut out = Vec::new();
        for (key, e) in &mut self.ports {
            let stale = e
                .asked
                .is_none_or(|at| now.saturating_duration_since(at) >= interval);
            if e.due || stale {
                e.due = false;
                e.asked = Some(now);
                out.push((key.clone(), e.umad.clone()));
            }
        }
        out
    }

    /// Records the answer of one query.
    fn record(
        &mut self,
        key: &(String, u32),
        answer: Result<IbNeighbour, IbProbeError>,
        unix: f64,
    ) {
        let Some(e) = self.ports.get_mut(key) else {
            return;
        };
        match answer {
            Ok(n) => {
                let id = Identity {
                    name: label_text(&n.node_description),
                    id: format!("0x{:016x}", n.node_guid),
                    port: n.local_port.to_string(),
                    port_description: String::new(),
                };
                if e.identity.as_ref().is_some_and(|old| *old != id) {
                    e.changes += 1;
                }
                e.identity = Some(id);
                e.known = true;
                e.status = Some(Status::Ok);
                e.last_seen = Some(unix);
                e.width_lanes = n.width_lanes;
                e.rate = n
                    .width_lanes
                    .zip(n.lane_gbps)
                    .map(|(l, g)| rate_bytes_per_second(l, g));
            }
            Err(err) => {
                e.known = false;
                e.status = match &err {
                    IbProbeError::NotAvailable(_) => Some(Status::NotAvailable),
                    IbProbeError::Refused { .. } => Some(Status::Refused),
                    IbProbeError::Timeout => Some(Status::Timeout),
                    IbProbeError::Permission(_) => Some(Status::NoPermission),
                    IbProbeError::Failed(why) => {
                        e.errors.push(CollectError::at(
                            Some(&key.0),
                            Origin::Device {
                                source: SPEC.name,
                                device: format!("{} port {}", key.0, key.1),
                            },
                            ErrorKind::Io,
                            format!("SMP query through {}: {why}", e.umad.display()),
                        ));
                        None
                    }
                };
            }
        }
    }
}

/// The SMP side: the probe, its table and its thread.
#[derive(Debug)]
struct IbSide {
    probe: Arc<dyn IbProbe>,
    interval: Duration,
    table: Arc<Mutex<IbTable>>,
    started: Mutex<bool>,
}

impl IbSide {
    fn start(&self) {
        let mut started = lock(&self.started);
        if *started {
            return;
        }
        *started = true;
        let (weak, probe, interval) = (
            Arc::downgrade(&self.table),
            Arc::clone(&self.probe),
            self.interval,
        );
        let spawned = std::thread::Builder::new()
            .name("railscope-smp".to_owned())
            .spawn(move || {
                loop {
                    if !probe_once(&weak, probe.as_ref(), interval) {
                        return;
                    }
                    std::thread::sleep(SMP_TICK);
                }
            });
        if let Err(error) = spawned {
            tracing::warn!(message = "Cannot start the SMP thread.", %error);
        }
    }
}

/// One pass of the SMP thread: asks every port that is due. False once the table is gone.
fn probe_once(table: &Weak<Mutex<IbTable>>, probe: &dyn IbProbe, interval: Duration) -> bool {
    let Some(shared) = table.upgrade() else {
        return false;
    };
    let due = lock(&shared).due(Instant::now(), interval);
    drop(shared);
    for (key, umad) in due {
        let answer = probe.query(&umad, key.1, SMP_TIMEOUT);
        let Some(shared) = table.upgrade() else {
            return false;
        };
        lock(&shared).record(&key, answer, unix_now());
    }
    true
}

// ---------------------------------------------------------------------------------------
// The source.
// ---------------------------------------------------------------------------------------

/// One RDMA port as sysfs shows it.
#[derive(Debug, Clone, PartialEq)]
struct RdmaPort {
    device: String,
    port: u32,
    link_layer: String,
    active: bool,
    netdev: Option<String>,
}

/// Reads the table the LLDP receiver and the SMP thread fill.
#[derive(Debug)]
pub struct NeighbourSource {
    live_namespace_only: bool,
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    filter: NetdevFilter,
    lldp: Option<lldp::Receiver>,
    lldp_timeout: Duration,
    ib: Option<IbSide>,
    /// Ports already said to be `not_available`.
    said: Mutex<BTreeSet<(String, u32)>>,
}

impl NeighbourSource {
    /// A source reading netdevs and RDMA ports under `roots`; LLDP through `lldp` (none: off),
    /// SMPs through `probe` every `smp_interval`.
    pub fn new(
        roots: &Roots,
        fs: Arc<dyn Fs>,
        filter: NetdevFilter,
        lldp: Option<lldp::Receiver>,
        lldp_timeout: Duration,
        probe: Option<Arc<dyn IbProbe>>,
        smp_interval: Duration,
    ) -> Self {
        NeighbourSource {
            live_namespace_only: false,
            fs,
            sysfs: roots.sysfs.clone(),
            filter,
            lldp,
            lldp_timeout,
            ib: probe.map(|probe| IbSide {
                probe,
                interval: smp_interval,
                table: Arc::default(),
                started: Mutex::new(false),
            }),
            said: Mutex::default(),
        }
    }

    /// The LLDP receiver, when LLDP is on.
    pub fn lldp(&self) -> Option<&lldp::Receiver> {
        self.lldp.as_ref()
    }

    /// The RDMA ports under sysfs, with their netdevs.
    fn rdma_ports(&self) -> Vec<RdmaPort> {
        let fs = self.fs.as_ref();
        let class = self.sysfs.join("class/infiniband");
        fs.read_dir(&class)
            .unwrap_or_default()
            .iter()
            .flat_map(|dev| device_ports(fs, &self.sysfs, &dev.name))
            .collect()
    }

    /// The RDMA ports, each device read as a unit of `run`: a device whose sysfs blocks
    /// costs its own ports' series only (it is late, and fenced), never the other devices'
    /// or the LLDP side's.
    fn rdma_ports_in(self: &Arc<Self>, run: &Run<'_>) -> Vec<RdmaPort> {
        let class = self.sysfs.join("class/infiniband");
        let devices: Vec<String> = self
            .fs
            .read_dir(&class)
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.name)
            .collect();
        let (fs, sysfs) = (Arc::clone(&self.fs), self.sysfs.clone());
        run.each(devices, 1, move |device| {
            device_ports(fs.as_ref(), &sysfs, device)
        })
        .into_iter()
        .filter_map(|(_, unit)| unit.done())
        .flatten()
        .collect()
    }

    /// The umad device of each (RDMA device, port).
    fn umads(&self) -> BTreeMap<(String, u32), PathBuf> {
        let fs = self.fs.as_ref();
        let class = self.sysfs.join("class/infiniband_mad");
        let mut out = BTreeMap::new();
        for e in fs.read_dir(&class).unwrap_or_default() {
            if !e.name.starts_with("umad") {
                continue;
            }
            let dir = class.join(&e.name);
            let (Some(dev), Some(port)) = (
                attr::peek(fs, &dir.join("ibdev")),
                attr::peek(fs, &dir.join("port")).and_then(|p| p.parse::<u32>().ok()),
            ) else {
                continue;
            };
            out.insert((dev, port), Path::new(DEV_INFINIBAND).join(&e.name));
        }
        out
    }

    /// The ifindex of each selected netdev: from rtnetlink where it must be the agent's
    /// namespace's netdev, else from sysfs.
    fn ifindexes(&self, selected: &[String], errors: &mut Vec<CollectError>) -> Vec<(u32, String)> {
        if selected.is_empty() {
            return Vec::new();
        }
        if self.live_namespace_only {
            let links =
                match RtnlSocket::open(rtnl::RECEIVE_TIMEOUT).and_then(|mut s| s.dump_links()) {
                    Ok(links) => links,
                    Err(err) => {
                        errors.push(getlink_error(&err));
                        return Vec::new();
                    }
                };
            let mut out = Vec::new();
            for name in selected {
                if let Some(link) = links
                    .iter()
                    .find(|l| is_same_netdev(self.fs.as_ref(), &self.sysfs, name, l, errors))
                {
                    out.push((link.index, name.clone()));
                }
            }
            return out;
        }
        let class = self.sysfs.join("class/net");
        selected
            .iter()
            .filter_map(|name| {
                attr::peek(self.fs.as_ref(), &class.join(name).join("ifindex"))
                    .and_then(|i| i.parse::<u32>().ok())
                    .map(|i| (i, name.clone()))
            })
            .collect()
    }

    /// Reads the table once, at `now`.
    pub fn read_at(&self, now: Instant) -> Report<Snapshot> {
        self.read_ports_at(now, self.rdma_ports())
    }

    /// Reads the table once, at `now`, with the RDMA ports `ports`.
    fn read_ports_at(&self, now: Instant, ports: Vec<RdmaPort>) -> Report<Snapshot> {
        let mut errors = Vec::new();
        let mut links = Vec::new();
        let by_netdev: BTreeMap<&str, &RdmaPort> = ports
            .iter()
            .filter_map(|p| p.netdev.as_deref().map(|n| (n, p)))
            .rev() // the first port of a netdev wins
            .collect();
        if let Some(receiver) = &self.lldp {
            let selected = self.filter.select(self.fs.as_ref(), &self.sysfs);
            let indexed = self.ifindexes(&selected, &mut errors);
            if !indexed.is_empty() {
                // No socket until there is a netdev of this namespace to listen on.
                receiver.start();
            }
            let mut table = lock(receiver.table());
            table.select(&indexed, now);
            if let Some(lldp::Failure::Other(why)) = &table.failure {
                errors.push(CollectError::at(
                    None,
                    Origin::Device {
                        source: SPEC.name,
                        device: "lldp".to_owned(),
                    },
                    ErrorKind::Io,
                    why.clone(),
                ));
            }
            for (mut link, parse_errors) in table.view(now, self.lldp_timeout) {
                for err in parse_errors {
                    errors.push(CollectError::at(
                        Some(&link.netdev),
                        Origin::Device {
                            source: SPEC.name,
                            device: format!("{} LLDPDU", link.netdev),
                        },
                        ErrorKind::Parse,
                        format!("malformed LLDPDU on {} dropped: {err}", link.netdev),
                    ));
                }
                if let Some(p) = by_netdev.get(link.netdev.as_str()) {
                    link.device = p.device.clone();
                    link.port = p.port.to_string();
                }
                links.push(link);
            }
        }
        self.read_ib(&ports, &mut links, &mut errors);
        links.sort_by(|a, b| {
            (&a.device, &a.port, &a.netdev, a.protocol)
                .cmp(&(&b.device, &b.port, &b.netdev, b.protocol))
        });
        Report::new(Snapshot { links }, errors)
    }

    /// The SMP side's links: `not_available` for ports that cannot send SMPs, the probe's
    /// answers for the others.
    fn read_ib(&self, ports: &[RdmaPort], links: &mut Vec<Link>, errors: &mut Vec<CollectError>) {
        let Some(ib) = &self.ib else {
            return;
        };
        let umads = self.umads();
        let mut table = lock(&ib.table);
        let mut listed = BTreeSet::new();
        for p in ports {
            let key = (p.device.clone(), p.port);
            let netdev = p.netdev.clone().unwrap_or_default();
            let umad = umads.get(&key);
            let why_not = if p.link_layer != "InfiniBand" {
                Some(format!("link layer {:?}: no QP0, no SMPs", p.link_layer))
            } else if umad.is_none() {
                Some("no umad device (is ib_umad loaded?)".to_owned())
            } else {
                None
            };
            if let Some(why) = why_not {
                if lock(&self.said).insert(key.clone()) {
                    tracing::info!(
                        message = "No SMPs to this port's neighbour.",
                        device = %p.device,
                        port = p.port,
                        reason = %why
                    );
                }
                links.push(Link {
                    device: p.device.clone(),
                    port: p.port.to_string(),
                    netdev,
                    protocol: Some(Protocol::Smp),
                    status: Some(Status::NotAvailable),
                    ..Link::default()
                });
                continue;
            }
            let Some(umad) = umad else { continue };
            listed.insert(key.clone());
            let e = table.ports.entry(key.clone()).or_insert_with(|| IbEntry {
                netdev: netdev.clone(),
                umad: umad.clone(),
                active: p.active,
                due: true,
                asked: None,
                status: None,
                identity: None,
                known: false,
                changes: 0,
                last_seen: None,
                width_lanes: None,
                rate: None,
                errors: Vec::new(),
            });
            if p.active && !e.active {
                e.due = true;
            }
            e.active = p.active;
            e.netdev = netdev;
            e.umad = umad.clone();
            errors.append(&mut e.errors);
            links.push(Link {
                device: p.device.clone(),
                port: p.port.to_string(),
                netdev: e.netdev.clone(),
                protocol: Some(Protocol::Smp),
                status: e.status,
                neighbour: if e.known { e.identity.clone() } else { None },
                changes: e.changes,
                last_seen: e.last_seen,
                link_width_lanes: if e.known { e.width_lanes } else { None },
                rate_bytes_per_second: if e.known { e.rate } else { None },
                ..Link::default()
            });
        }
        table.ports.retain(|k, _| listed.contains(k));
        let any = !table.ports.is_empty();
        drop(table);
        if any {
            ib.start();
        }
    }

    /// Runs one pass of the SMP side now, on this thread (tests; the source's own thread
    /// does this every second).
    pub fn probe_now(&self) {
        if let Some(ib) = &self.ib {
            probe_once(&Arc::downgrade(&ib.table), ib.probe.as_ref(), ib.interval);
        }
    }
}

impl Source for NeighbourSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let options = from.options;
        let socket = PathBuf::from(
            options
                .get("lldpd-socket")
                .map_or(lldp::lldpd::DEFAULT_SOCKET, String::as_str),
        );
        let lldp = match options.get("lldp").map_or("socket", String::as_str) {
            "socket" => Some(lldp::Receiver::new(lldp::Mode::Socket)),
            "lldpd" => Some(lldp::Receiver::new(lldp::Mode::Lldpd(socket))),
            "auto" if socket.exists() => Some(lldp::Receiver::new(lldp::Mode::Lldpd(socket))),
            "auto" => Some(lldp::Receiver::new(lldp::Mode::Socket)),
            "off" => None,
            other => {
                return Err(SourceBuildError {
                    option: "lldp".to_owned(),
                    reason: format!("{other:?} is not socket, lldpd, auto or off"),
                });
            }
        };
        let mut source = NeighbourSource::new(
            from.roots,
            Arc::clone(&from.fs),
            NetdevFilter::from_options(options)?,
            lldp,
            duration_option(options, "lldp-timeout", DEFAULT_LLDP_TIMEOUT)?,
            ib_probe(),
            duration_option(options, "smp-interval", DEFAULT_SMP_INTERVAL)?,
        );
        source.live_namespace_only = true;
        Ok(source)
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let ports = self.rdma_ports_in(run);
        self.read_ports_at(Instant::now(), ports)
    }
}

/// The ports of the RDMA device `device` with their link layer, state and netdev.
fn device_ports(fs: &dyn Fs, sysfs: &Path, device: &str) -> Vec<RdmaPort> {
    let dir = sysfs.join("class/infiniband").join(device);
    // A Soft-RoCE device's parent, else the PCI function's netdev where it has exactly one
    // (one port per function, as on ConnectX): the netdev of a port whose GID table is
    // empty (link down) or that has none (InfiniBand: IPoIB).
    let parent = attr::peek(fs, &dir.join("parent")).or_else(|| {
        let net = fs.read_dir(&dir.join("device/net")).unwrap_or_default();
        match net.as_slice() {
            [one] => Some(one.name.clone()),
            _ => None,
        }
    });
    let mut out = Vec::new();
    for p in fs.read_dir(&dir.join("ports")).unwrap_or_default() {
        let Ok(port) = p.name.parse::<u32>() else {
            continue;
        };
        let pdir = dir.join("ports").join(&p.name);
        let link_layer = attr::peek(fs, &pdir.join("link_layer")).unwrap_or_default();
        // The state matters to the SMP side only (a port that becomes ACTIVE is asked at
        // once): read for InfiniBand ports alone, so the file is not read twice a scrape on
        // a RoCE node (the infiniband source reads it too).
        let active = link_layer == "InfiniBand"
            && attr::peek(fs, &pdir.join("state"))
                .is_some_and(|s| s.trim_start().starts_with("4:"));
        let ndevs = pdir.join("gid_attrs/ndevs");
        let netdev = ["0", "1", "2", "3"]
            .iter()
            .find_map(|slot| attr::peek(fs, &ndevs.join(slot)).filter(|n| !n.is_empty()))
            .or_else(|| parent.clone());
        out.push(RdmaPort {
            device: device.to_owned(),
            port,
            link_layer,
            active,
            netdev,
        });
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
