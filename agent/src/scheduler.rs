//! The scrape scheduler: runs every enabled source in parallel, each on a blocking thread
//! under a deadline, and lets concurrent scrapes share one collection.
//!
//! * Deadline: the scraper's `X-Prometheus-Scrape-Timeout-Seconds` less an offset, capped by
//!   `--scrape.timeout-max`. A source that misses it is reported failed for this scrape; its
//!   thread is left to finish, and until it does the source is not started again, so a call
//!   that hangs costs one thread, not one per scrape.
//! * Blocked reads: sources read files through [`GuardedFs`]. When a read blocks in the kernel
//!   past its wait, its device is marked blocked, the blocked thread is abandoned and the
//!   source starts again on a fresh thread; the blocked device's series are skipped until the
//!   read returns, and everything else on the node is exported in the same scrape.
//! * Coalescing: a scrape that arrives while a collection is running waits for that one
//!   instead of reading sysfs again.
//! * Errors each source reports are counted per collector and each distinct one (path, kind,
//!   errno) is logged once.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use railscope_collectors::guard::{self, BlockedDevice};
use railscope_collectors::{CollectError, ErrorKind, GuardedFs, Source, SourceData, SourceReport};

/// How often a running collection is checked for a read blocked in the kernel.
const STALL_CHECK: Duration = Duration::from_millis(10);

/// What watching one attempt of a source found.
enum Watch {
    /// It returned (or panicked).
    Done(Result<std::thread::Result<SourceReport>, tokio::task::JoinError>),
    /// The scrape deadline came first.
    Deadline,
    /// A read blocked; the source is started again without the blocked device.
    Restart,
}

/// How long past its deadline a scrape waits for the collection it started to return.
const JOIN_GRACE: Duration = Duration::from_millis(250);

/// How many distinct errors are remembered for log-once; past this, errors are still counted
/// but logged at debug level only.
const LOGGED_ERRORS_CAP: usize = 10_000;

/// What one source produced in one collection.
#[derive(Debug, Clone)]
pub struct SourceOutcome {
    /// The source's name.
    pub name: &'static str,
    /// Whether the source ran to completion within the deadline.
    pub success: bool,
    /// How long it ran (up to the deadline when it missed it).
    pub duration: Duration,
    /// What it read.
    pub data: Option<SourceData>,
    /// Errors it reported in this collection.
    pub errors: usize,
}

/// One collection: every enabled source's outcome, in registry order.
#[derive(Debug, Clone)]
pub struct Collection {
    /// The outcomes.
    pub outcomes: Vec<SourceOutcome>,
    /// The collection's sequence number (1 for the first).
    pub sequence: u64,
}

/// Cumulative counters the scheduler keeps across collections.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Errors per source, in registry order.
    pub errors: Vec<(&'static str, u64)>,
    /// Collections run.
    pub collections: u64,
    /// Collection requests (scrapes), including those that shared a running collection.
    pub requests: u64,
    /// Devices with a file-system operation blocked past its deadline now.
    pub blocked: Vec<BlockedDevice>,
    /// File-system operations that did not return in time, since start.
    pub fs_timeouts: u64,
}

/// What identifies an error for log-once: collector, path, kind and errno.
type ErrorKey = (String, String, &'static str, Option<i32>);

type SharedCollection = Shared<BoxFuture<'static, Arc<Collection>>>;

struct SourceSlot {
    source: Arc<dyn Source>,
    /// The attempt id of the blocking collection of this source that runs now; 0 when none.
    running: Arc<AtomicU64>,
    errors_total: AtomicU64,
}

/// Runs collections; cheap to share behind an `Arc`.
pub struct Scheduler {
    slots: Vec<SourceSlot>,
    inflight: Mutex<Option<(u64, SharedCollection)>>,
    sequence: AtomicU64,
    requests: AtomicU64,
    logged_errors: Mutex<HashSet<ErrorKey>>,
    logged_absent: Mutex<HashSet<&'static str>>,
    guard: Option<Arc<GuardedFs>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field(
                "sources",
                &self
                    .slots
                    .iter()
                    .map(|s| s.source.name())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler over the enabled sources, in registry order.
    pub fn new(sources: Vec<Box<dyn Source>>) -> Self {
        Scheduler {
            slots: sources
                .into_iter()
                .map(|source| SourceSlot {
                    source: Arc::from(source),
                    running: Arc::new(AtomicU64::new(0)),
                    errors_total: AtomicU64::new(0),
                })
                .collect(),
            inflight: Mutex::new(None),
            sequence: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            logged_errors: Mutex::new(HashSet::new()),
            logged_absent: Mutex::new(HashSet::new()),
            guard: None,
        }
    }

    /// Reports the blocked devices and timeouts of `guard`, the file system the sources read
    /// through.
    pub fn with_guard(mut self, guard: Arc<GuardedFs>) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The names of the enabled sources.
    pub fn source_names(&self) -> Vec<&'static str> {
        self.slots.iter().map(|s| s.source.name()).collect()
    }

    /// The cumulative counters.
    pub fn totals(&self) -> Totals {
        Totals {
            errors: self
                .slots
                .iter()
                .map(|s| (s.source.name(), s.errors_total.load(Ordering::Relaxed)))
                .collect(),
            collections: self.sequence.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            blocked: self.guard.as_ref().map(|g| g.blocked()).unwrap_or_default(),
            fs_timeouts: self.guard.as_ref().map_or(0, |g| g.timeouts_total()),
        }
    }

    /// Returns a collection that started no earlier than this call, sharing one that is
    /// already running. `timeout` bounds each source of a collection this call starts, and
    /// how long this call waits for one it joins: a scrape with a short deadline that joins a
    /// longer collection answers in time, with every source reported failed.
    pub async fn collect(self: &Arc<Self>, timeout: Duration) -> Arc<Collection> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let names = self.source_names();
        let mut started = false;
        let shared = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            match inflight.as_ref() {
                Some((_, shared)) => shared.clone(),
                None => {
                    started = true;
                    let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
                    let this = Arc::clone(self);
                    let task = tokio::spawn(async move {
                        let collection = Arc::new(this.run(sequence, timeout).await);
                        let mut inflight = this.inflight.lock().unwrap_or_else(|e| e.into_inner());
                        if inflight.as_ref().is_some_and(|(seq, _)| *seq == sequence) {
                            *inflight = None;
                        }
                        collection
                    });
                    let names = self.source_names();
                    let shared = async move {
                        task.await.unwrap_or_else(|_| {
                            // The collection task itself failed; report every source failed.
                            Arc::new(Collection {
                                outcomes: names
                                    .into_iter()
                                    .map(|name| SourceOutcome {
                                        name,
                                        success: false,
                                        duration: Duration::ZERO,
                                        data: None,
                                        errors: 0,
                                    })
                                    .collect(),
                                sequence,
                            })
                        })
                    }
                    .boxed()
                    .shared();
                    *inflight = Some((sequence, shared.clone()));
                    shared
                }
            }
        };
        // A collection this call started ends at its own deadline; allow it a moment to
        // hand over what it has. One that was joined is waited for only as long as this
        // scrape may wait.
        let wait = if started {
            timeout + JOIN_GRACE
        } else {
            timeout
        };
        match tokio::time::timeout(wait, shared).await {
            Ok(collection) => collection,
            Err(_) => Arc::new(Collection {
                outcomes: names
                    .into_iter()
                    .map(|name| SourceOutcome {
                        name,
                        success: false,
                        duration: timeout,
                        data: None,
                        errors: 0,
                    })
                    .collect(),
                sequence: 0,
            }),
        }
    }

    async fn run(self: &Arc<Self>, sequence: u64, timeout: Duration) -> Collection {
        let deadline = tokio::time::Instant::now() + timeout;
        let runs = (0..self.slots.len()).map(|i| self.run_source(i, deadline));
        let outcomes = futures_util::future::join_all(runs).await;
        Collection { outcomes, sequence }
    }

    async fn run_source(
        self: &Arc<Self>,
        index: usize,
        deadline: tokio::time::Instant,
    ) -> SourceOutcome {
        let slot = &self.slots[index];
        let name = slot.source.name();
        let start = Instant::now();
        let failed = |duration| SourceOutcome {
            name,
            success: false,
            duration,
            data: None,
            errors: 0,
        };
        let remaining = deadline
            .into_std()
            .saturating_duration_since(Instant::now());
        // Sources that wait on parts of the node separately return what they have a little
        // before the scrape deadline, so the parts that did answer are still exported.
        let source_deadline = Instant::now() + remaining.mul_f64(0.9);
        let mut attempt = guard::next_attempt();
        if slot
            .running
            .compare_exchange(0, attempt, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            slot.errors_total.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                collector = name,
                "Skipping collection: the previous one has not returned yet."
            );
            return failed(Duration::ZERO);
        }
        let mut stalls = 0;
        let finished = loop {
            let mut handle = self.spawn_attempt(index, attempt, source_deadline);
            // Watch the attempt: when a file-system read in it blocks past its wait, its device
            // is marked blocked and the source starts again on a fresh thread without it.
            let watch = loop {
                tokio::select! {
                    result = &mut handle => break Watch::Done(result),
                    () = tokio::time::sleep_until(deadline) => break Watch::Deadline,
                    () = tokio::time::sleep(STALL_CHECK) => {}
                }
                let Some(guard) = &self.guard else { continue };
                if let Some(blocked) = guard.check_stalled(attempt) {
                    stalls += 1;
                    slot.errors_total.fetch_add(1, Ordering::Relaxed);
                    self.log_blocked(name, &blocked);
                    let next = guard::next_attempt();
                    // The abandoned thread no longer owns the slot.
                    let _ = slot.running.compare_exchange(
                        attempt,
                        next,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    attempt = next;
                    break Watch::Restart;
                }
            };
            match watch {
                Watch::Done(result) => break Some(result),
                Watch::Deadline => break None,
                Watch::Restart => continue,
            }
        };
        match finished {
            Some(Ok(Ok(report))) => {
                let duration = start.elapsed();
                if let Some(reason) = &report.absent {
                    self.log_absent(name, reason);
                }
                // Reads skipped because their device is blocked are not counted one by one:
                // the read that blocked was, and the device shows in
                // `railscope_sysfs_blocked_seconds` until it returns.
                let mut errors = stalls;
                for error in report
                    .errors
                    .iter()
                    .filter(|e| e.kind != ErrorKind::Skipped)
                {
                    errors += 1;
                    self.log_error(name, error);
                }
                slot.errors_total
                    .fetch_add((errors - stalls) as u64, Ordering::Relaxed);
                SourceOutcome {
                    name,
                    success: report.data.is_some(),
                    duration,
                    data: report.data,
                    errors,
                }
            }
            Some(Ok(Err(_)) | Err(_)) => {
                slot.errors_total.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    collector = name,
                    "Collector panicked; its series are missing from this scrape."
                );
                failed(start.elapsed())
            }
            None => {
                slot.errors_total.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    collector = name,
                    timeout_seconds = start.elapsed().as_secs_f64(),
                    "Collector missed the scrape deadline; its series are missing from this scrape."
                );
                failed(start.elapsed())
            }
        }
    }

    fn spawn_attempt(
        &self,
        index: usize,
        attempt: u64,
        source_deadline: Instant,
    ) -> tokio::task::JoinHandle<std::thread::Result<SourceReport>> {
        let slot = &self.slots[index];
        let source = Arc::clone(&slot.source);
        let running = Arc::clone(&slot.running);
        let fs_guard = self.guard.clone();
        tokio::task::spawn_blocking(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                guard::with_attempt(attempt, source_deadline, || {
                    source.collect_until(source_deadline)
                })
            }));
            if let Some(fs_guard) = &fs_guard {
                fs_guard.finish_attempt(attempt);
            }
            let _ = running.compare_exchange(attempt, 0, Ordering::AcqRel, Ordering::Acquire);
            result
        })
    }

    fn log_blocked(&self, name: &'static str, blocked: &BlockedDevice) {
        let key = (
            name.to_owned(),
            blocked.device.clone(),
            ErrorKind::Timeout.as_str(),
            None,
        );
        let first = {
            let mut logged = self.logged_errors.lock().unwrap_or_else(|e| e.into_inner());
            logged.len() < LOGGED_ERRORS_CAP && logged.insert(key)
        };
        let path = blocked.path.display().to_string();
        let waited = blocked.blocked_for.as_secs_f64();
        let message = "A read blocked in the kernel past its deadline; the device is skipped until the read returns.";
        if first {
            tracing::warn!(
                collector = name,
                device = blocked.device,
                path,
                waited_seconds = waited,
                "{message}"
            );
        } else {
            tracing::debug!(
                collector = name,
                device = blocked.device,
                path,
                waited_seconds = waited,
                "{message}"
            );
        }
    }

    fn log_absent(&self, name: &'static str, reason: &str) {
        let mut logged = self.logged_absent.lock().unwrap_or_else(|e| e.into_inner());
        if logged.insert(name) {
            tracing::info!(
                collector = name,
                reason,
                "Subsystem not present; the collector reports nothing."
            );
        }
    }

    fn log_error(&self, name: &'static str, error: &CollectError) {
        let key = (
            name.to_owned(),
            error.origin.to_string(),
            error.kind.as_str(),
            error.errno,
        );
        let first = {
            let mut logged = self.logged_errors.lock().unwrap_or_else(|e| e.into_inner());
            logged.len() < LOGGED_ERRORS_CAP && logged.insert(key)
        };
        let errno = error.errno_name().unwrap_or_default();
        let device = error.device.as_deref().unwrap_or_default();
        let path = error.origin.to_string();
        if first {
            tracing::warn!(collector = name, device, path, errno, kind = error.kind.as_str(), error = %error, "Failed to read a value; its series are skipped.");
        } else {
            tracing::debug!(collector = name, device, path, errno, kind = error.kind.as_str(), error = %error, "Failed to read a value; its series are skipped.");
        }
    }
}

/// The per-source deadline of a scrape: the scraper's timeout less `offset` (half the
/// timeout when the offset would eat it all), capped at `max`.
pub fn scrape_timeout(header: Option<&str>, offset: Duration, max: Duration) -> Duration {
    let Some(seconds) = header
        .and_then(|h| h.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
    else {
        return max;
    };
    let scraper = Duration::from_secs_f64(seconds.min(86_400.0));
    let budget = if scraper > offset {
        scraper - offset
    } else {
        scraper / 2
    };
    budget.min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use railscope_collectors::fs::DirEntry;
    use railscope_collectors::{Fs, Roots};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    #[derive(Debug)]
    struct Slow {
        calls: Arc<AtomicUsize>,
        sleep: Duration,
    }

    impl Source for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn collect(&self) -> SourceReport {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.sleep);
            SourceReport {
                data: Some(SourceData::Infiniband(Default::default())),
                errors: Vec::new(),
                absent: None,
            }
        }
    }

    #[derive(Debug)]
    struct Panics;

    impl Source for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn collect(&self) -> SourceReport {
            panic!("a source bug")
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_scrapes_share_one_collection() {
        let calls = Arc::new(AtomicUsize::new(0));
        let scheduler = Arc::new(Scheduler::new(vec![Box::new(Slow {
            calls: calls.clone(),
            sleep: Duration::from_millis(200),
        })]));
        let scrapes = (0..20).map(|_| {
            let s = Arc::clone(&scheduler);
            tokio::spawn(async move { s.collect(Duration::from_secs(5)).await.sequence })
        });
        let sequences: Vec<u64> = futures_util::future::join_all(scrapes)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(sequences.iter().all(|&s| s == 1));
        assert_eq!(scheduler.totals().requests, 20);
        // The next scrape starts a new collection.
        assert_eq!(scheduler.collect(Duration::from_secs(5)).await.sequence, 2);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_source_misses_the_deadline_and_is_not_restarted_while_stuck() {
        let calls = Arc::new(AtomicUsize::new(0));
        let scheduler = Arc::new(Scheduler::new(vec![
            Box::new(Slow {
                calls: calls.clone(),
                sleep: Duration::from_millis(1500),
            }),
            Box::new(Panics),
        ]));
        let start = Instant::now();
        let first = scheduler.collect(Duration::from_millis(200)).await;
        assert!(
            first.sequence > 0,
            "the collection itself ends at its deadline, not the wait"
        );
        assert!(
            start.elapsed() < Duration::from_millis(1200),
            "the scrape waited for the hung source"
        );
        assert!(!first.outcomes[0].success);
        assert!(
            !first.outcomes[1].success,
            "a panicking source is reported failed"
        );
        let second = scheduler.collect(Duration::from_millis(200)).await;
        assert!(!second.outcomes[0].success);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a stuck source must not pile up threads"
        );
        assert_eq!(scheduler.totals().errors, vec![("slow", 2), ("panics", 2)]);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let third = scheduler.collect(Duration::from_secs(5)).await;
        assert!(third.outcomes[0].success);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// Files under `/s/class/net/<name>/value`; reads under `stuck` block while `hold` is set.
    #[derive(Debug)]
    struct Wedged {
        hold: Arc<AtomicBool>,
        entered: AtomicUsize,
    }

    impl Fs for Wedged {
        fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
            if path.starts_with("/s/class/net/stuck") {
                self.entered.fetch_add(1, Ordering::SeqCst);
                while self.hold.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Ok(b"1\n".to_vec())
        }
        fn read_dir(&self, _: &Path) -> std::io::Result<Vec<DirEntry>> {
            Ok(Vec::new())
        }
        fn read_link(&self, p: &Path) -> std::io::Result<PathBuf> {
            Ok(p.to_path_buf())
        }
        fn exists(&self, _: &Path) -> bool {
            true
        }
        fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf> {
            Ok(p.to_path_buf())
        }
    }

    /// Reads `value` of three netdevs and reports the ones it read as devices.
    #[derive(Debug)]
    struct ThreeDevices {
        fs: Arc<GuardedFs>,
        read: Arc<Mutex<Vec<Vec<String>>>>,
    }

    impl Source for ThreeDevices {
        fn name(&self) -> &'static str {
            "three"
        }
        fn collect(&self) -> SourceReport {
            let mut ok = Vec::new();
            let mut errors = Vec::new();
            for name in ["first", "stuck", "last"] {
                let path = PathBuf::from(format!("/s/class/net/{name}/value"));
                match self.fs.read(&path) {
                    Ok(_) => ok.push(name.to_owned()),
                    Err(err) => errors.push(CollectError::io(Some(name), &path, &err)),
                }
            }
            self.read.lock().unwrap().push(ok);
            SourceReport {
                data: Some(SourceData::Infiniband(Default::default())),
                errors,
                absent: None,
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blocked_read_costs_its_device_not_the_source() {
        let hold = Arc::new(AtomicBool::new(true));
        let wedged = Arc::new(Wedged {
            hold: hold.clone(),
            entered: AtomicUsize::new(0),
        });
        let fs = Arc::new(GuardedFs::new(
            wedged.clone(),
            Roots {
                sysfs: PathBuf::from("/s"),
                procfs: PathBuf::from("/p"),
            },
        ));
        let read = Arc::new(Mutex::new(Vec::new()));
        let scheduler = Arc::new(
            Scheduler::new(vec![Box::new(ThreeDevices {
                fs: fs.clone(),
                read: read.clone(),
            })])
            .with_guard(fs.clone()),
        );
        for round in 0..5 {
            let start = Instant::now();
            let collection = scheduler.collect(Duration::from_millis(400)).await;
            assert!(
                start.elapsed() < Duration::from_millis(650),
                "round {round}"
            );
            assert!(collection.outcomes[0].success, "round {round}");
            let last = read.lock().unwrap().last().cloned().unwrap();
            assert_eq!(last, ["first", "last"], "round {round}");
        }
        assert_eq!(
            wedged.entered.load(Ordering::SeqCst),
            1,
            "the blocked device is not read again while its read is blocked"
        );
        let totals = scheduler.totals();
        assert_eq!(
            totals.errors,
            vec![("three", 1)],
            "one error: the blocked read"
        );
        assert_eq!(totals.fs_timeouts, 1);
        assert_eq!(totals.blocked.len(), 1);
        assert_eq!(totals.blocked[0].device, "class/net/stuck");

        hold.store(false, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(5);
        while !fs.blocked().is_empty() || fs.abandoned() > 0 {
            assert!(Instant::now() < until, "the blocked read never finished");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let collection = scheduler.collect(Duration::from_millis(400)).await;
        assert!(collection.outcomes[0].success);
        assert_eq!(
            read.lock().unwrap().last().cloned().unwrap(),
            ["first", "stuck", "last"],
            "the device is back once its read returned"
        );
        assert_eq!(scheduler.totals().errors, vec![("three", 1)]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_scrape_joining_a_long_collection_answers_in_time() {
        let calls = Arc::new(AtomicUsize::new(0));
        let scheduler = Arc::new(Scheduler::new(vec![Box::new(Slow {
            calls: calls.clone(),
            sleep: Duration::from_millis(800),
        })]));
        let long = {
            let s = Arc::clone(&scheduler);
            tokio::spawn(async move { s.collect(Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let start = Instant::now();
        let short = scheduler.collect(Duration::from_millis(200)).await;
        assert!(start.elapsed() < Duration::from_millis(600));
        assert!(!short.outcomes[0].success);
        assert!(long.await.unwrap().outcomes[0].success);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn timeout_from_the_scrapers_header() {
        let offset = Duration::from_millis(500);
        let max = Duration::from_secs(10);
        assert_eq!(scrape_timeout(None, offset, max), max);
        assert_eq!(
            scrape_timeout(Some("4"), offset, max),
            Duration::from_millis(3500)
        );
        assert_eq!(scrape_timeout(Some("30"), offset, max), max);
        assert_eq!(
            scrape_timeout(Some("0.4"), offset, max),
            Duration::from_millis(200)
        );
        assert_eq!(scrape_timeout(Some("junk"), offset, max), max);
        assert_eq!(scrape_timeout(Some("-3"), offset, max), max);
    }
}
