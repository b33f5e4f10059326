//! The `kmsg` source: events that reach the kernel log and sometimes nothing else.
//!
//! NVML's event sets only see XIDs after the agent registered for them (an agent restarting
//! loses them), NVSwitch SXIDs have no NVML event at all, and a ConnectX firmware that stops
//! answering (`... timeout. Will cause a leak of a command resource`, `health compromised`)
//! shows up first, and sometimes only, in the kernel log. This source reads the kernel log on
//! a thread of its own: first the ring buffer's backlog (so events since boot are counted once
//! the agent starts), then every new record as the kernel logs it. Each record's message goes
//! through the table of [`patterns`]; a match is counted by kind and labels, with the time of
//! the last one. Labels are identifiers only (PCI address, XID code, severity), never message
//! text.
//!
//! Two readers (`--collector.kmsg.reader`), which count the same records the same way:
//!
//! * `device`: `/dev/kmsg`, record by record as the kernel logs them. The path is `/dev/kmsg`
//!   where `--path.sysfs` is `/sys`; with another sysfs root (a fixture tree) only a path
//!   given with `--collector.kmsg.path` is read, so tests never read the host's kernel log. A
//!   regular file of `/dev/kmsg` records works too: it is read to its end and then followed,
//!   as `tail -f` would.
//! * `syslog`: `syslog(2)` `SYSLOG_ACTION_READ_ALL` (the `klog` module), which needs no device node
//!   (a container without `/dev/kmsg`), whatever `--path.sysfs` is. It does not block or
//!   notify, so the reader polls it every [`SYSLOG_POLL_EVERY`] and finds the new records of
//!   each read with [`syslog::Tracker`].
//! * `auto` (the default): `device`, and where the path is `/dev/kmsg` and opening it fails
//!   with `ENOENT`, `EPERM` or `EACCES`, `syslog`. Any other path (a file of records) is never
//!   exchanged for the host's log.
//!
//! Both need `CAP_SYSLOG` where `kernel.dmesg_restrict` is 1 (Debian's and Ubuntu's default):
//! without it opening `/dev/kmsg` fails with `EPERM`, and so does `syslog(2)`, and the source
//! reports itself absent, logged once, like a subsystem the node does not have.
//!
//! Record format of `/dev/kmsg` (Documentation/ABI/testing/dev-kmsg):
//! `<prio>,<seq>,<usec>,<flags>[,...];<message>` and continuation lines starting with a space
//! (`" SUBSYSTEM=pci"`), which are skipped. That of `syslog(2)`: [`syslog`].

mod klog;
pub mod patterns;
#[cfg(test)]
mod proptests;
pub mod syslog;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fs::DEFAULT_SYSFS;
use crate::run::Run;
use crate::source::{
    Build, OptionKind, OptionSpec, OptionValues, Report, Source, SourceBuildError, Spec,
};

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "kmsg",
    help: "Kernel-log events (/dev/kmsg or syslog(2)): GPU XIDs, NVSwitch SXIDs, ConnectX firmware command timeouts, failures, health and module errors, PCIe link down, AER and slot power.",
    default_enabled: true,
    options: &[
        OptionSpec {
            name: "path",
            help: "The kernel log the device reader follows: a /dev/kmsg device or a file of its records (default /dev/kmsg where --path.sysfs is /sys, none otherwise)",
            kind: OptionKind::Path,
        },
        OptionSpec {
            name: "reader",
            help: "How the kernel log is read: device (the path above), syslog (syslog(2) SYSLOG_ACTION_READ_ALL, polled every second: no device node needed, whatever --path.sysfs is), or auto: device, falling back to syslog where the path is /dev/kmsg and opening it fails (ENOENT, EPERM, EACCES). Both need CAP_SYSLOG where kernel.dmesg_restrict is 1.",
            kind: OptionKind::Choice(&["auto", "device", "syslog"]),
        },
    ],
};

/// The most distinct event series kept; past it new ones are counted in
/// [`Snapshot::dropped`] only.
pub const MAX_SERIES: usize = 4096;

/// How long the reader waits at the end of a regular file before looking again.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// How often the `syslog(2)` reader reads the ring buffer. `SYSLOG_ACTION_READ_ALL` neither
/// blocks nor notifies (the action that waits, `SYSLOG_ACTION_READ`, consumes the records
/// that the system's own logger reads from `/proc/kmsg`), so the reader polls. Each read
/// copies and hashes the whole buffer (`log_buf_len`: 128 KiB to a few MiB), about a
/// millisecond of CPU; once a second keeps an event's delay far below any scrape interval
/// at a cost no scrape notices.
pub const SYSLOG_POLL_EVERY: Duration = Duration::from_secs(1);

/// The kernel log device, the one path `auto` may exchange for `syslog(2)`.
const DEV_KMSG: &str = "/dev/kmsg";

const NEEDS_CAP_SYSLOG: &str =
    " (reading the kernel log needs CAP_SYSLOG where kernel.dmesg_restrict is 1)";

/// Which way the kernel log is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// `/dev/kmsg`, or a file of its records.
    Device,
    /// `syslog(2)` `SYSLOG_ACTION_READ_ALL`.
    Syslog,
}

impl Reader {
    /// The reader's name, as `--collector.kmsg.reader` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reader::Device => "device",
            Reader::Syslog => "syslog",
        }
    }
}

/// What the source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A `/dev/kmsg` device or a file of its records; `fallback`: read `syslog(2)` when it
    /// cannot be opened (`ENOENT`, `EPERM`, `EACCES`).
    Device {
        /// The path.
        path: PathBuf,
        /// Whether `syslog(2)` stands in for it.
        fallback: bool,
    },
    /// `syslog(2)`.
    Syslog,
}

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
    /// Times the reader found that records had left the ring buffer before it read them
    /// (`EPIPE` from `/dev/kmsg`; a `syslog(2)` read no longer holding the last record seen).
    pub gaps: u64,
    /// Whether the log is being read (no series are exported otherwise).
    pub reading: bool,
    /// The reader in use, once it has started.
    pub reader: Option<Reader>,
}

type Key = (&'static str, Vec<(&'static str, String)>);

#[derive(Debug, Default)]
struct State {
    events: BTreeMap<Key, (u64, f64)>,
    records: u64,
    dropped: u64,
    gaps: u64,
    reader: Option<Reader>,
    /// Why the log cannot be read; the reader has stopped.
    failure: Option<String>,
}

/// Reads the kernel log on its own thread; see the module docs.
#[derive(Debug)]
pub struct KmsgSource {
    target: Option<Target>,
    state: Arc<Mutex<State>>,
}

impl KmsgSource {
    /// A source reading `target` (none: the source is absent).
    pub fn new(target: Option<Target>) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        if let Some(target) = &target {
            let (target, shared) = (target.clone(), Arc::clone(&state));
            let spawned = std::thread::Builder::new()
                .name("railscope-kmsg".to_owned())
                .spawn(move || match &target {
                    Target::Device { path, fallback } => follow(path, *fallback, &shared),
                    Target::Syslog => poll_syslog(&shared),
                });
            if let Err(e) = spawned {
                lock(&state).failure = Some(format!("cannot start the kernel-log reader: {e}"));
            }
        }
        KmsgSource { target, state }
    }
}

impl Source for KmsgSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        target(from.options, &from.roots.sysfs).map(KmsgSource::new)
    }

    fn collect(self: &Arc<Self>, _run: &Run<'_>) -> Report<Snapshot> {
        if self.target.is_none() {
            return Report::absent(
                Snapshot::default(),
                "no kernel log to read: --path.sysfs is not /sys and --collector.kmsg.path is not set (--collector.kmsg.reader=syslog reads it whatever --path.sysfs is)",
            );
        }
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
            gaps: state.gaps,
            reading: state.failure.is_none(),
            reader: state.reader,
        };
        match &state.failure {
            Some(why) => Report::absent(snapshot, why.clone()),
            None => Report::new(snapshot, Vec::new()),
        }
    }
}

/// What the options say to read, with sysfs mounted at `sysfs`: none where there is no
/// kernel log to read (a fixture tree and no path).
fn target(options: &OptionValues, sysfs: &Path) -> Result<Option<Target>, SourceBuildError> {
    let path = match options.get("path") {
        Some(p) if p.is_empty() => {
            return Err(SourceBuildError {
                option: "path".to_owned(),
                reason: "empty path".to_owned(),
            });
        }
        Some(p) => Some(PathBuf::from(p)),
        None => None,
    };
    let reader = options.get("reader").map_or("auto", String::as_str);
    match reader {
        "syslog" if path.is_some() => Err(SourceBuildError {
            option: "path".to_owned(),
            reason: "the syslog reader reads no path (the device and auto readers do)".to_owned(),
        }),
        "syslog" => Ok(Some(Target::Syslog)),
        "device" | "auto" => Ok(path
            .or_else(|| (sysfs == Path::new(DEFAULT_SYSFS)).then(|| PathBuf::from(DEV_KMSG)))
            .map(|path| Target::Device {
                fallback: reader == "auto" && path == Path::new(DEV_KMSG),
                path,
            })),
        other => Err(SourceBuildError {
            option: "reader".to_owned(),
            reason: format!("{other:?} is not auto, device or syslog"),
        }),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a refused read of the kernel log needs, for its message.
fn hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => NEEDS_CAP_SYSLOG,
        _ => "",
    }
}

/// Reads `path` record by record for as long as the process runs; with `fallback`, reads
/// `syslog(2)` instead when the path cannot be opened.
fn follow(path: &Path, fallback: bool, state: &Mutex<State>) {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e)
            if fallback
                && matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::EPERM | libc::EACCES)
                ) =>
        {
            match klog::size_buffer() {
                Ok(_) => poll_syslog(state),
                Err(s) => {
                    lock(state).failure = Some(format!(
                        "{}: {e}; syslog(2): {s}{}",
                        path.display(),
                        hint(&s)
                    ));
                }
            }
            return;
        }
        Err(e) => {
            lock(state).failure = Some(format!("{}: {e}{}", path.display(), hint(&e)));
            return;
        }
    };
    lock(state).reader = Some(Reader::Device);
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
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => lock(state).gaps += 1,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                lock(state).failure = Some(format!("{}: read failed: {e}", path.display()));
                return;
            }
        }
    }
}

/// Reads the ring buffer through `syslog(2)` every [`SYSLOG_POLL_EVERY`] for as long as the
/// process runs, counting each record once.
fn poll_syslog(state: &Mutex<State>) {
    let boot = boot_time();
    let mut tracker = syslog::Tracker::new();
    let mut buf = Vec::new();
    loop {
        let read = klog::size_buffer().and_then(|size| {
            buf.resize(size, 0);
            klog::read_all(&mut buf)
        });
        match read {
            Ok(n) => {
                let poll = tracker.poll(&buf[..n]);
                let mut state = lock(state);
                state.reader = Some(Reader::Syslog);
                if poll.gap {
                    state.gaps += 1;
                }
                for line in &poll.new {
                    count(
                        &mut state,
                        line.micros,
                        &String::from_utf8_lossy(line.message),
                        boot,
                    );
                }
            }
            Err(e) => {
                lock(state).failure = Some(format!("syslog(2): {e}{}", hint(&e)));
                return;
            }
        }
        std::thread::sleep(SYSLOG_POLL_EVERY);
    }
}

/// Counts one line of `/dev/kmsg`: a record's first line (continuation lines start with a
/// space).
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
    count(state, usec, message, boot);
}

/// Counts one record, logged `usec` microseconds after boot (unknown: now), whichever reader
/// read it.
fn count(state: &mut State, usec: Option<u64>, message: &str, boot: f64) {
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
        let source = Arc::new(KmsgSource::new(Some(Target::Device {
            path: path.clone(),
            fallback: false,
        })));
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
        let source = Arc::new(KmsgSource::new(Some(Target::Device {
            path: PathBuf::from("/nonexistent/kmsg"),
            fallback: false,
        })));
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

    fn target_of(
        options: &[(&str, &str)],
        sysfs: &str,
    ) -> Result<Option<Target>, SourceBuildError> {
        let options: OptionValues = options.iter().copied().collect();
        target(&options, Path::new(sysfs))
    }

    #[test]
    fn the_reader_option_chooses_what_is_read() {
        let device = |path: &str, fallback| {
            Ok(Some(Target::Device {
                path: PathBuf::from(path),
                fallback,
            }))
        };
        // The real /sys: /dev/kmsg, with syslog(2) behind it unless device is asked for.
        assert_eq!(target_of(&[], "/sys"), device("/dev/kmsg", true));
        assert_eq!(
            target_of(&[("reader", "auto")], "/sys"),
            device("/dev/kmsg", true)
        );
        assert_eq!(
            target_of(&[("reader", "device")], "/sys"),
            device("/dev/kmsg", false)
        );
        assert_eq!(
            target_of(&[("reader", "syslog")], "/sys"),
            Ok(Some(Target::Syslog))
        );
        // A fixture tree: nothing unless a path is given, and a file of records is never
        // exchanged for the host's log.
        assert_eq!(target_of(&[], "/tmp/tree/sys"), Ok(None));
        assert_eq!(
            target_of(&[("reader", "device")], "/tmp/tree/sys"),
            Ok(None)
        );
        assert_eq!(
            target_of(&[("path", "/tmp/kmsg")], "/tmp/tree/sys"),
            device("/tmp/kmsg", false)
        );
        assert_eq!(
            target_of(&[("path", "/tmp/kmsg")], "/sys"),
            device("/tmp/kmsg", false)
        );
        assert_eq!(
            target_of(&[("path", "/dev/kmsg")], "/host/sys"),
            device("/dev/kmsg", true),
            "/dev/kmsg given by name is the host's log, with syslog(2) as its stand-in"
        );
        // syslog(2) whatever the sysfs root (/host/sys in the DaemonSet).
        assert_eq!(
            target_of(&[("reader", "syslog")], "/host/sys"),
            Ok(Some(Target::Syslog))
        );
        let err = target_of(&[("reader", "syslog"), ("path", "/dev/kmsg")], "/sys").unwrap_err();
        assert_eq!(err.option, "path");
        assert_eq!(
            target_of(&[("reader", "dmesg")], "/sys")
                .unwrap_err()
                .option,
            "reader"
        );
        assert_eq!(
            target_of(&[("path", "")], "/sys").unwrap_err().option,
            "path"
        );
    }

    #[test]
    fn both_readers_count_a_record_the_same() {
        let boot = 1_700_000_000.0;
        let mut device = State::default();
        record(
            &mut device,
            b"3,100,5000123,-;NVRM: Xid (PCI:0000:2b:00): 79, pid=1, GPU has fallen off the bus.",
            boot,
        );
        let mut syslog = State::default();
        let line = syslog::parse_line(
            b"<11>[    5.000123] NVRM: Xid (PCI:0000:2b:00): 79, pid=1, GPU has fallen off the bus.",
        );
        count(
            &mut syslog,
            line.micros,
            &String::from_utf8_lossy(line.message),
            boot,
        );
        assert_eq!(device.events, syslog.events);
        assert_eq!((device.records, syslog.records), (1, 1));
    }
}
