//! The LLDP side of the `neighbour` source: [`parse`] (pure LLDPDU decoding), [`socket`] (the
//! `AF_PACKET` receiver, all of the source's `unsafe`) and the [`Receiver`]: a thread of its
//! own that reads LLDPDUs and keeps the last one of each selected netdev in a [`Table`], which
//! the scrape reads.
//!
//! What the table says of a netdev, at each collection:
//!
//! * a valid LLDPDU received within its TTL: the neighbour, status `ok`;
//! * a shutdown LLDPDU (TTL 0), or the TTL of the last one ran out: the neighbour is
//!   forgotten at once, status `no_frames`;
//! * nothing received since the netdev was first listened on: no status until the LLDP
//!   timeout (default 90 s, three times the usual 30 s transmit interval) has passed, then
//!   `no_frames`;
//! * a malformed LLDPDU: dropped whole (as lldpd drops it) and reported as a parse error of
//!   that netdev, once per frame; the neighbour of the last valid one stays until its TTL;
//! * the socket cannot be opened: every selected netdev has status `no_permission` (`EPERM`
//!   or `EACCES`: no `CAP_NET_RAW`), logged once; any other failure is the source's error.

pub mod lldpd;
pub mod parse;
pub(crate) mod socket;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::sources::neighbour::label_text;
use crate::sources::neighbour::types::{Identity, Link, Protocol, Status};
pub use parse::{Lldpdu, ParseError, parse_frame, parse_lldpdu};

/// How long one read of the socket waits before the receiver looks at its netdevs again
/// (memberships of netdevs the scrape selected since).
const RECV_WAIT: Duration = Duration::from_secs(1);
/// The receive buffer: an LLDPDU fits in a standard frame; a longer frame is truncated,
/// and dropped as malformed.
const FRAME_BUFFER: usize = 9216;
/// At most this many parse errors of one netdev wait for the next collection.
const MAX_PENDING_ERRORS: usize = 8;

/// What the receiver knows of one netdev.
#[derive(Debug, Clone)]
pub struct PortState {
    /// The netdev's name.
    pub name: String,
    /// When it was first listened on.
    pub since: Instant,
    /// The last valid LLDPDU and when it came, while its TTL runs.
    pub heard: Option<(Instant, Lldpdu)>,
    /// When the last valid LLDPDU came, in seconds since the Unix epoch.
    pub last_seen: Option<f64>,
    /// The TTL of the last valid LLDPDU.
    pub last_ttl: Option<u16>,
    /// The neighbour left (shutdown LLDPDU or TTL ran out) and none came since.
    pub departed: bool,
    /// The last neighbour identity seen (kept after it left, to tell a change).
    pub identity: Option<Identity>,
    /// Times the identity changed.
    pub changes: u64,
    /// Parse errors not yet reported.
    pub pending_errors: Vec<ParseError>,
}

impl PortState {
    fn new(name: &str, now: Instant) -> Self {
        PortState {
            name: name.to_owned(),
            since: now,
            heard: None,
            last_seen: None,
            last_ttl: None,
            departed: false,
            identity: None,
            changes: 0,
            pending_errors: Vec::new(),
        }
    }
}

/// Why the receiver is not receiving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No `CAP_NET_RAW` (`EPERM`/`EACCES` from `socket(2)`).
    NoPermission(String),
    /// Any other failure of the socket.
    Other(String),
}

/// The table the receiver fills and the scrape reads, by ifindex.
#[derive(Debug, Default)]
pub struct Table {
    /// The selected netdevs.
    pub ports: BTreeMap<u32, PortState>,
    /// Set once the socket failed (the receiver has stopped), or while lldpd cannot be read.
    pub failure: Option<Failure>,
    /// Filled from lldpd (`protocol="lldpd"`; lldpd ages neighbours out itself) rather than
    /// from frames.
    pub lldpd: bool,
}

/// The identity label values an LLDPDU gives.
pub fn identity(du: &Lldpdu) -> Identity {
    Identity {
        name: label_text(du.system_name.as_deref().unwrap_or("")),
        id: label_text(&du.chassis_id.chassis_text()),
        port: label_text(&du.port_id.port_text()),
        port_description: label_text(du.port_description.as_deref().unwrap_or("")),
    }
}

impl Table {
    /// Records a frame received on `ifindex` at `now` (`unix`: the same time in seconds since
    /// the Unix epoch). Frames of netdevs not selected are dropped.
    pub fn record(&mut self, ifindex: u32, frame: &[u8], now: Instant, unix: f64) {
        if !self.ports.contains_key(&ifindex) {
            return;
        }
        match parse_frame(frame) {
            Ok(du) => self.record_du(ifindex, du, now, unix),
            Err(err) => {
                if let Some(port) = self.ports.get_mut(&ifindex)
                    && port.pending_errors.len() < MAX_PENDING_ERRORS
                {
                    port.pending_errors.push(err);
                }
            }
        }
    }

    /// Records a valid LLDPDU received on `ifindex`.
    pub fn record_du(&mut self, ifindex: u32, du: Lldpdu, now: Instant, unix: f64) {
        let Some(port) = self.ports.get_mut(&ifindex) else {
            return;
        };
        match du {
            du if du.is_shutdown() => {
                port.heard = None;
                port.departed = true;
                port.last_seen = Some(unix);
                port.last_ttl = Some(0);
            }
            du => {
                let id = identity(&du);
                if port.identity.as_ref().is_some_and(|old| *old != id) {
                    port.changes += 1;
                }
                port.identity = Some(id);
                port.last_seen = Some(unix);
                port.last_ttl = Some(du.ttl);
                port.departed = false;
                port.heard = Some((now, du));
            }
        }
    }

    /// Records what lldpd lists now: (interface name, its neighbour's LLDPDU). A selected
    /// netdev it no longer lists has no neighbour.
    pub fn record_lldpd(&mut self, listed: Vec<(String, Lldpdu)>, now: Instant, unix: f64) {
        let by_name: BTreeMap<String, u32> = self
            .ports
            .iter()
            .map(|(i, p)| (p.name.clone(), *i))
            .collect();
        let mut seen = BTreeSet::new();
        for (name, du) in listed {
            // lldpd lists one entry per neighbour; more than one on a port (a hub, a
            // misconfigured switch) keeps the first.
            if let Some(&i) = by_name.get(&name)
                && seen.insert(i)
            {
                self.record_du(i, du, now, unix);
            }
        }
        for (i, port) in &mut self.ports {
            if !seen.contains(i) && port.heard.is_some() {
                port.heard = None;
                port.departed = true;
            }
        }
    }

    /// Makes `selected` (ifindex, name) the netdevs listened on: new ones start now, those
    /// no longer selected are forgotten, an ifindex whose name changed starts afresh.
    pub fn select(&mut self, selected: &[(u32, String)], now: Instant) {
        let wanted: BTreeMap<u32, &str> = selected.iter().map(|(i, n)| (*i, n.as_str())).collect();
        self.ports
            .retain(|i, p| wanted.get(i) == Some(&p.name.as_str()));
        for (i, name) in wanted {
            self.ports
                .entry(i)
                .or_insert_with(|| PortState::new(name, now));
        }
    }

    /// What is known of each selected netdev at `now`, with a `timeout` after which a netdev
    /// that heard nothing is `no_frames`; drains the parse errors not yet reported.
    pub fn view(&mut self, now: Instant, timeout: Duration) -> Vec<(Link, Vec<ParseError>)> {
        let failure = self.failure.clone();
        let (lldpd, protocol) = if self.lldpd {
            (true, Protocol::Lldpd)
        } else {
            (false, Protocol::Lldp)
        };
        let mut out = Vec::new();
        for port in self.ports.values_mut() {
            if let Some((at, du)) = &port.heard
                && !lldpd
                && now.saturating_duration_since(*at) >= Duration::from_secs(du.ttl.into())
            {
                port.heard = None;
                port.departed = true;
            }
            let mut link = Link {
                netdev: port.name.clone(),
                protocol: Some(protocol),
                changes: port.changes,
                last_seen: port.last_seen,
                ttl: port.last_ttl,
                ..Link::default()
            };
            link.status = match (&failure, &port.heard) {
                (Some(Failure::NoPermission(_)), _) => Some(Status::NoPermission),
                (Some(Failure::Other(_)), _) => None,
                (None, Some((_, du))) => {
                    link.neighbour = port.identity.clone();
                    link.max_frame_size = du.max_frame_size;
                    link.pfc = du.pfc;
                    link.roce_priority = du.roce_priority();
                    Some(Status::Ok)
                }
                (None, None)
                    if port.departed || now.saturating_duration_since(port.since) >= timeout =>
                {
                    Some(Status::NoFrames)
                }
                (None, None) => None,
            };
            out.push((link, std::mem::take(&mut port.pending_errors)));
        }
        out
    }
}

/// Where the receiver learns neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Its own `AF_PACKET` socket.
    Socket,
    /// A running lldpd, through its control socket.
    Lldpd(PathBuf),
}

/// The receiver: its table, and the thread that fills it (started by the first
/// [`Receiver::start`]; it ends when the receiver is dropped).
#[derive(Debug)]
pub struct Receiver {
    mode: Mode,
    table: Arc<Mutex<Table>>,
    started: Mutex<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Receiver {
    /// A receiver of `mode` that has not started.
    pub fn new(mode: Mode) -> Self {
        let table = Table {
            lldpd: matches!(mode, Mode::Lldpd(_)),
            ..Table::default()
        };
        Receiver {
            mode,
            table: Arc::new(Mutex::new(table)),
            started: Mutex::new(false),
        }
    }

    /// Where it learns neighbours.
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The table (tests fill it with [`Table::record`] directly).
    pub fn table(&self) -> &Arc<Mutex<Table>> {
        &self.table
    }

    /// Starts the receiving thread, once.
    pub fn start(&self) {
        let mut started = lock(&self.started);
        if *started {
            return;
        }
        *started = true;
        let weak = Arc::downgrade(&self.table);
        let mode = self.mode.clone();
        let spawned = std::thread::Builder::new()
            .name("railscope-lldp".to_owned())
            .spawn(move || match &mode {
                Mode::Socket => receive(&weak),
                Mode::Lldpd(socket) => poll_lldpd(&weak, socket),
            });
        if let Err(e) = spawned {
            lock(&self.table).failure = Some(Failure::Other(format!(
                "cannot start the LLDP receiver: {e}"
            )));
        }
    }
}

/// The receiving thread: joins the group on every selected netdev, records every frame, until
/// the table is dropped.
fn receive(table: &Weak<Mutex<Table>>) {
    let socket = match socket::LldpSocket::open(RECV_WAIT) {
        Ok(s) => s,
        Err(e) => {
            let failure = match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => {
                    tracing::warn!(
                        message = "Cannot receive LLDP: no CAP_NET_RAW; LLDP neighbours have status no_permission.",
                        error = %e
                    );
                    Failure::NoPermission(e.to_string())
                }
                _ => {
                    tracing::warn!(message = "Cannot open the LLDP socket.", error = %e);
                    Failure::Other(format!("AF_PACKET socket for LLDP: {e}"))
                }
            };
            if let Some(t) = table.upgrade() {
                lock(&t).failure = Some(failure);
            }
            return;
        }
    };
    let mut joined: BTreeSet<(u32, Instant)> = BTreeSet::new();
    let mut buf = vec![0u8; FRAME_BUFFER];
    let mut failing = false;
    loop {
        let Some(shared) = table.upgrade() else {
            return;
        };
        let wanted: BTreeSet<(u32, Instant)> = lock(&shared)
            .ports
            .iter()
            .map(|(i, p)| (*i, p.since))
            .collect();
        drop(shared);
        for gone in joined.difference(&wanted).copied().collect::<Vec<_>>() {
            // The kernel drops the membership of a netdev that was unregistered itself. Leaves
            // go first: a netdev that took the ifindex of one that left is joined afresh.
            let _ = socket.leave(gone.0);
            joined.remove(&gone);
        }
        for (ifindex, since) in wanted.difference(&joined).copied().collect::<Vec<_>>() {
            if let Err(error) = socket.join(ifindex) {
                tracing::debug!(message = "Cannot add the LLDP group to a netdev's filter.", ifindex, %error);
            }
            joined.insert((ifindex, since));
        }
        match socket.recv(&mut buf) {
            Ok(Some(frame)) => {
                if let Some(shared) = table.upgrade() {
                    let len = frame.len.min(buf.len());
                    lock(&shared).record(frame.ifindex, &buf[..len], Instant::now(), unix_now());
                }
                failing = false;
            }
            Ok(None) => failing = false,
            Err(error) => {
                if !failing {
                    tracing::warn!(message = "Failed to receive LLDP frames.", %error);
                }
                failing = true;
                std::thread::sleep(RECV_WAIT);
            }
        }
    }
}

/// The lldpd thread: asks lldpd every [`lldpd::POLL_EVERY`] until the table is dropped. A
/// failure is said once when it starts (and once when it ends); `Permission denied` on the
/// control socket is `no_permission`.
fn poll_lldpd(table: &Weak<Mutex<Table>>, socket: &std::path::Path) {
    let mut failing = false;
    loop {
        if table.strong_count() == 0 {
            return;
        }
        let result = lldpd::run(socket).and_then(|out| lldpd::parse_json0(&out));
        let Some(shared) = table.upgrade() else {
            return;
        };
        let mut t = lock(&shared);
        match result {
            Ok(listed) => {
                if failing {
                    tracing::info!(message = "lldpd answers again.", socket = %socket.display());
                }
                failing = false;
                t.failure = None;
                t.record_lldpd(listed, Instant::now(), unix_now());
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(message = "Cannot read lldpd's neighbours.", socket = %socket.display(), %error);
                }
                failing = true;
                t.failure = Some(match &error {
                    lldpd::Error::Failed { denied: true, .. } => {
                        Failure::NoPermission(error.to_string())
                    }
                    _ => Failure::Other(format!("lldpd at {}: {error}", socket.display())),
                });
            }
        }
        drop(t);
        drop(shared);
        std::thread::sleep(lldpd::POLL_EVERY);
    }
}
