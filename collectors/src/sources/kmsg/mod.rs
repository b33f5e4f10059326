//! The `kmsg` source: events that reach the kernel log and sometimes nothing else.
//!
//! NVML's event sets only see XIDs after the agent registered for them (an agent restarting
//! loses them), NVSwitch SXIDs have no NVML event at all, and a ConnectX firmware that stops
//! answering (`... timeout. Will cause a leak of a command resource`, `health compromised`)
//! shows up first, and sometimes only, in the kernel log. This source reads `/dev/kmsg` on a
//! thread of its own: first the ring buffer's backlog (so events since boot are counted once
//! the agent starts), then every new record as the kernel logs it. Each record's message goes
//! through the table of [`patterns`]; a match is counted by kind and labels, with the time of
//! the last one. Labels are identifiers only (PCI address, XID code, severity), never message
//! text.
//!
//! Reading `/dev/kmsg` needs `CAP_SYSLOG` where `kernel.dmesg_restrict` is 1 (Debian's and
//! Ubuntu's default): without it the open fails with `EPERM`, and the source reports itself
//! absent, logged once, like a subsystem the node does not have. The path is `/dev/kmsg` where
//! `--path.sysfs` is `/sys`; with another sysfs root (a fixture tree) only a path given with
//! `--collector.kmsg.path` is read, so tests never read the host's kernel log. A regular file
//! of `/dev/kmsg` records works too: it is read to its end and then followed, as `tail -f`
//! would.
//!
//! Record format (Documentation/ABI/testing/dev-kmsg): `<prio>,<seq>,<usec>,<flags>[,...];<message>`
//! and continuation lines starting with a space (`" SUBSYSTEM=pci"`), which are skipped.

pub mod patterns;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fs::DEFAULT_SYSFS;
use crate::run::Run;
use crate::source::{Build, OptionKind, OptionSpec, Report, Source, SourceBuildError, Spec};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "kmsg",
    help: "Kernel-log events (/dev/kmsg): GPU XIDs, NVSwitch SXIDs, ConnectX firmware command timeouts, failures, health and module errors, PCIe link down, AER and slot power.",
    default_enabled: true,
    options: &[OptionSpec {
        name: "path",
        help: "The kernel log to read: a /dev/kmsg device or a file of its records (default /dev/kmsg where --path.sysfs is /sys, none otherwise)",
        kind: OptionKind::Path,
    }],
};

/// The most distinct event series kept; past it new ones are counted in
/// [`Snapshot::dropped`] only.
pub const MAX_SERIES: usize = 4096;

/// How long the reader waits at the end of a regular file before looking again.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// One kind of event with its labels, how often it was seen, and when last.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    /// The kind ([`patterns::KINDS`]).
    pub kind: &'static str,
    /// Its labels.
    pub labels: Vec<(&'static str, String)>,
    /// Records of it read since the agent started (the backlog included).
    pub count: u64,
    /// When the last one was logged, in seconds since the Unix epoch (from the record's
    /// timestamp and the boot time).
    pub last_seen: f64,
}

/// What the reader has seen so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Every event series, by kind and labels.
    pub events: Vec<Counted>,
    /// Records read (matching or not).
    pub records: u64,
    /// Matching records not counted because [`MAX_SERIES`] series exist.
    pub dropped: u64,
    /// Whether the log is being read (no series are exported otherwise).
    pub reading: bool,
}

type Key = (&'static str, Vec<(&'static str, String)>);

#[derive(Debug, Default)]
struct State {
    events: BTreeMap<Key, (u64, f64)>,
    records: u64,
    dropped: u64,
    /// Why the log cannot be read; the reader has stopped.
    failure: Option<String>,
}

/// Reads the kernel log on its own thread; see the module docs.
#[derive(Debug)]
pub struct KmsgSource {
    path: Option<PathBuf>,
    state: Arc<Mutex<State>>,
}

impl KmsgSource {
    /// A source reading `path` (none: the source is absent).
    pub fn new(path: Option<PathBuf>) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        if let Some(path) = &path {
            let (path, shared) = (path.clone(), Arc::clone(&state));
            let spawned = std::thread::Builder::new()
                .name("railscope-kmsg".to_owned())
                .spawn(move || follow(&path, &shared));
            if let Err(e) = spawned {
                lock(&state).failure = Some(format!("cannot start the kernel-log reader: {e}"));
            }
        }
        KmsgSource { path, state }
    }
}

impl Source for KmsgSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        let path = match from.options.get("path") {
            Some(p) if p.is_empty() => {
                return Err(SourceBuildError {
                    option: "path".to_owned(),
                    reason: "empty path".to_owned(),
                });
            }
            Some(p) => Some(PathBuf::from(p)),
            None if from.roots.sysfs == Path::new(DEFAULT_SYSFS) => {
                Some(PathBuf::from("/dev/kmsg"))
            }
            None => None,
        };
        Ok(KmsgSource::new(path))
    }

    fn collect(self: &Arc<Self>, _run: &Run<'_>) -> Report<Snapshot> {
        let Some(path) = &self.path else {
            return Report::absent(
                Snapshot::default(),
                "no kernel log to read: --path.sysfs is not /sys and --collector.kmsg.path is not set",
            );
        };
        let state = lock(&self.state);
        let snapshot = Snapshot {
            events: state
                .events
                .iter()
                .map(|((kind, labels), (count, last_seen))| Counted {
                    kind,
                    labels: labels.clone(),
                    count: *count,
                    last_seen: *last_seen,
                })
                .collect(),
            records: state.records,
            dropped: state.dropped,
            reading: state.failure.is_none(),
        };
        match &state.failure {
            Some(why) => Report::absent(snapshot, format!("{}: {why}", path.display())),
            None => Report::new(snapshot, Vec::new()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads `path` record by record for as long as the process runs.
fn follow(path: &Path, state: &Mutex<State>) {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            let hint = match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => {
                    " (reading the kernel log needs CAP_SYSLOG where kernel.dmesg_restrict is 1)"
                }
                _ => "",
            };
            lock(state).failure = Some(format!("{e}{hint}"));
            return;
        }
    };
    let boot = boot_time();
    // One /dev/kmsg read returns one whole record; a regular file returns what fits.
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => std::thread::sleep(FOLLOW_EVERY),
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                let complete = pending
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                if complete > 0 {
                    let lines: Vec<u8> = pending.drain(..complete).collect();
                    let mut state = lock(state);
                    for line in lines.split(|&b| b == b'\n') {
                        record(&mut state, line, boot);
                    }
                }
            }
            // The ring buffer overwrote records before they were read: go on with the next.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                lock(state).failure = Some(format!("read failed: {e}"));
                return;
            }
        }
    }
}

/// Counts one line: a record's first line (continuation lines start with a space).
fn record(state: &mut State, line: &[u8], boot: f64) {
    if line.is_empty() || line[0] == b' ' {
        return;
    }
    let text = String::from_utf8_lossy(line);
    let (usec, message) = match text.split_once(';') {
        Some((header, message)) => (
            header.split(',').nth(2).and_then(|t| t.parse::<u64>().ok()),
            message,
        ),
        None => (None, text.as_ref()),
    };
    state.records += 1;
    let Some(event) = patterns::classify(message) else {
        return;
    };
    let at = match usec {
        Some(us) => boot + us as f64 / 1e6,
        None => now(),
    };
    let key = (event.kind, event.labels);
    if !state.events.contains_key(&key) && state.events.len() >= MAX_SERIES {
        state.dropped += 1;
        return;
    }
    let entry = state.events.entry(key).or_insert((0, at));
    entry.0 += 1;
    entry.1 = entry.1.max(at);
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// When the kernel's log clock read zero, in seconds since the Unix epoch: the wall clock
/// less the monotonic clock, which the log's timestamps follow (both leave out suspend).
fn boot_time() -> f64 {
    now() - crate::fs::base::coarse_now().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file of /dev/kmsg records, followed as it grows: the backlog, a new record, a
    /// continuation line, a record cut in two writes, and a record that matches nothing.
    #[test]
    fn a_file_of_records_is_read_and_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg");
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(
            file,
            "3,100,5000000,-;NVRM: Xid (PCI:0000:2b:00): 79, pid=1, GPU has fallen off the bus."
        )
        .unwrap();
        writeln!(file, " SUBSYSTEM=pci").unwrap();
        writeln!(
            file,
            "6,101,5000100,-;mlx5_core 0000:18:00.0: mlx5e: link up"
        )
        .unwrap();
        file.flush().unwrap();
        let source = Arc::new(KmsgSource::new(Some(path.clone())));
        let snapshot = |source: &Arc<KmsgSource>| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                let state = lock(&source.state);
                let (records, failure) = (state.records, state.failure.clone());
                drop(state);
                assert_eq!(failure, None);
                if records >= 2 || std::time::Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        snapshot(&source);
        {
            let state = lock(&source.state);
            assert_eq!(state.records, 2);
            let (count, last) = state.events[&(
                "xid",
                vec![
                    ("xid", "79".to_owned()),
                    ("pci_address", "0000:2b:00.0".to_owned()),
                ],
            )];
            assert_eq!(count, 1);
            assert!((last - (boot_time() + 5.0)).abs() < 1.0, "{last}");
        }
        // The file grows: a second XID 79, cut across two writes.
        write!(file, "3,102,6000000,-;NVRM: Xid (PCI:0000:2b:00): 7").unwrap();
        file.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        writeln!(file, "9, pid=2, GPU has fallen off the bus.").unwrap();
        file.flush().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while lock(&source.state).records < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let state = lock(&source.state);
        assert_eq!(state.records, 3);
        assert_eq!(state.events.len(), 1);
        assert_eq!(state.events.values().next().unwrap().0, 2);
    }

    #[test]
    fn an_unreadable_log_is_absent_with_the_reason() {
        let source = Arc::new(KmsgSource::new(Some(PathBuf::from("/nonexistent/kmsg"))));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while lock(&source.state).failure.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            lock(&source.state)
                .failure
                .as_deref()
                .unwrap()
                .contains("No such file")
        );
    }
}
