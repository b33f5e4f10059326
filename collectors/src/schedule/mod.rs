//! The scrape scheduler: hands each collection its deadline, runs every enabled source on a
//! collection lane, and takes each source's result up as soon as it is there. [`Scheduler`]
//! answers the agent's scrapes and pushes with a [`Collection`] (`collection`).
//!
//! * Deadline: the scraper's `X-Prometheus-Scrape-Timeout-Seconds` less an offset, capped by
//!   `--scrape.timeout-max`. A collection's deadline is the earliest among the scrapes
//!   waiting for it: a scrape that joins a running collection brings it forward, so a 3 s
//!   scrape arriving during a 10 s start-up collection gets its answer in time, with every
//!   device that was ready by then. Inside a source, the deadline is enforced per device by
//!   `crate::run`: a stuck device costs only its own series.
//! * Publishing: each source's outcome is posted as soon as it returns; a scrape answers at
//!   its own deadline with what is posted, and a source that has not returned is reported
//!   failed in that scrape. Its thread is left to finish, and until it does the source is not
//!   started again, so a call that hangs costs one thread, not one per scrape.
//! * Coalescing: a scrape that arrives while a collection is running joins it instead of
//!   reading the node again. A scrape may ask for some sources only
//!   ([`Scheduler::collect_only`], `collect[]`/`exclude[]`): its collection runs those alone, and
//!   a scrape that joins a running collection shares the sources both ask for and adds the ones
//!   only it asks for to the same collection. So every source runs at most once however many
//!   scrapes overlap, whatever each of them asks for; a scrape waits for its own sources only.
//! * Width: at most [`collect_width`] sources collect at once (2 to 4, by the CPUs the agent
//!   may use), on the collection lanes (`lanes`); the rest wait their turn. A source
//!   that has run for 20 ms gives its lane up, so slow sources (a cold start, a hung device)
//!   run side by side as if there were no lanes and never hold the others back; a source
//!   whose turn comes after the deadline does not start.
//! * Errors each source reports are counted per collector and each distinct one (origin,
//!   kind, errno) is logged once; a source that misses its deadline is logged when it starts
//!   and when it ends.
//!
//! # Two kinds of threads
//!
//! A collection runs on two kinds of threads, for two jobs, and they are kept apart:
//!
//! * **Lanes** (`lanes`) run *sources*: one FIFO queue, at most [`collect_width`] jobs at a
//!   time, idle lanes ending after two minutes. The bound is for memory, not speed: a
//!   source's thread mostly waits for its units, and every thread that allocates keeps a
//!   glibc arena of its own (the agent caps arenas at the lane count). A job that runs
//!   past 20 ms gives its lane up, so a slow source never holds the others back.
//! * **The unit pool** (`crate::run`) runs a source's *per-device units*: unbounded and
//!   unqueued, a unit with no idle worker gets a fresh thread, idle workers ending after a
//!   minute. A unit that blocks in the kernel is fenced and left behind, and the next unit
//!   must start at once on another thread; a bound or a queue there would let one wedged
//!   device hold up the rest.
//!
//! Merged, one of the two would break: a bounded pool stalls behind fenced units, an
//! unbounded one runs every source at once.
//!
//! # Why it lives in the collectors crate
//!
//! The deadline model is one piece from the scrape down to the blocked read: the
//! [`Deadline`] a scrape lowers, the [`crate::run::Run`] that enforces it per device, the
//! guard that fences a blocked read (`crate::fs::guard`), and this scheduler that runs the
//! sources under it and takes their outcomes up. It uses only this crate's types (the
//! [`crate::registry`], its sources and errors) and knows nothing of HTTP or the exposition:
//! the agent calls [`Scheduler::collect`] with a timeout and maps the [`Collection`] it gets.
//! Kept together, the timing is tested in one crate, against real sources and the guard.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{CollectError, ErrorKind};
use crate::registry::{AnySource, Collectors, SourceReport};
use crate::run::Deadline;

mod collection;
pub(crate) mod lanes;

pub use collection::{Collection, SourceOutcome, Totals};
use lanes::{Lanes, Ticket};

/// The target of the scheduler's log lines, as the agent has always logged them (the
/// `target` of a JSON log line), so log filters and queries over them keep matching.
const LOG_TARGET: &str = "railscope::scheduler";

/// How long a source may run before it gives its collection lane up (looked at every 10 ms).
const SLOW: Duration = Duration::from_millis(20);

/// How long past its deadline a scrape waits for the sources to hand over what they have.
const JOIN_GRACE: Duration = Duration::from_millis(250);

/// How many distinct errors of one collection are remembered for log-once; past this,
/// errors are still counted, and logged at `warn` again in the next collection.
const LOGGED_ERRORS_CAP: usize = 10_000;

/// What identifies an error for log-once: origin, kind and errno (per collector).
type ErrorKey = (String, &'static str, Option<i32>);

struct SourceSlot {
    source: Arc<dyn AnySource>,
    /// Whether a thread of this source is running now.
    running: Arc<AtomicBool>,
    /// Whether the running thread missed its collection's deadline.
    late: Arc<AtomicBool>,
    errors_total: AtomicU64,
    /// Times it started to collect.
    runs_total: Arc<AtomicU64>,
    /// The errors of its last collection, for logging each error once when it starts.
    seen_errors: Mutex<HashSet<ErrorKey>>,
}

/// What a source's job on its lane sends back.
enum Ran {
    /// Its turn came after the collection's deadline; it did not start.
    NotStarted,
    /// It returned (`None`: it panicked) after running this long.
    Returned(Option<SourceReport>, Duration),
}

/// One collection in progress: its deadline, the sources asked for and the outcomes posted
/// so far.
struct Inflight {
    sequence: u64,
    started: Instant,
    blocked_at_start: Vec<crate::fs::BlockedDevice>,
    deadline: Arc<Deadline>,
    board: Mutex<Board>,
    /// Every source asked for has posted.
    done: AtomicBool,
    posted: tokio::sync::Notify,
}

/// What a collection's sources posted, by source index.
struct Board {
    /// Whether a scrape of this collection asked for the source (it was started).
    asked: Vec<bool>,
    posted: Vec<Option<Arc<SourceOutcome>>>,
}

impl Board {
    fn complete(&self, wanted: &[bool]) -> bool {
        wanted
            .iter()
            .zip(&self.posted)
            .all(|(want, posted)| !want || posted.is_some())
    }
}

impl Inflight {
    /// Posts source `index`'s outcome unless one is there; true when it was posted.
    fn post(&self, index: usize, outcome: impl FnOnce() -> SourceOutcome) -> bool {
        let mut board = lock(&self.board);
        if board.posted[index].is_some() {
            return false;
        }
        board.posted[index] = Some(Arc::new(outcome()));
        if board.complete(&board.asked) {
            self.done.store(true, Ordering::Release);
        }
        drop(board);
        self.posted.notify_waiters();
        true
    }

    /// Asks for the sources of `wanted` in this collection: the indices it did not run yet,
    /// to be started now, or `None` when the collection is over (every source it asked for
    /// has posted), so a new one must start.
    fn ask(&self, wanted: &[bool]) -> Option<Vec<usize>> {
        let mut board = lock(&self.board);
        if self.done.load(Ordering::Acquire) {
            return None;
        }
        let mut new = Vec::new();
        for (index, want) in wanted.iter().enumerate() {
            if *want && !board.asked[index] {
                board.asked[index] = true;
                new.push(index);
            }
        }
        Some(new)
    }

    /// Waits until every source of `wanted` (`None`: every source asked for) has posted or
    /// `until` comes; true when every one has.
    async fn wait(&self, until: Instant, wanted: Option<&[bool]>) -> bool {
        loop {
            let posted = self.posted.notified();
            tokio::pin!(posted);
            posted.as_mut().enable();
            let complete = match wanted {
                None => self.done.load(Ordering::Acquire),
                Some(wanted) => lock(&self.board).complete(wanted),
            };
            if complete {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::select! {
                () = posted => {}
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => {}
            }
        }
    }

    /// The collection as one scrape sees it: the sources of `wanted`, in registry order.
    fn view(&self, names: &[&'static str], wanted: &[bool]) -> Collection {
        let board = lock(&self.board);
        let elapsed = self.started.elapsed();
        Collection {
            outcomes: names
                .iter()
                .zip(board.posted.iter())
                .zip(wanted)
                .filter(|(_, want)| **want)
                .map(|((name, posted), _)| {
                    posted
                        .clone()
                        .unwrap_or_else(|| Arc::new(SourceOutcome::failed(name, elapsed)))
                })
                .collect(),
            sequence: self.sequence,
            blocked_at_start: self.blocked_at_start.clone(),
        }
    }
}

/// Runs collections; cheap to share behind an `Arc`.
pub struct Scheduler {
    slots: Vec<SourceSlot>,
    collectors: Option<Collectors>,
    inflight: Mutex<Option<Arc<Inflight>>>,
    /// The last collection a scrape was answered with, and when.
    last: Mutex<Option<(Instant, Arc<Collection>)>>,
    sequence: AtomicU64,
    requests: AtomicU64,
    logged_absent: Mutex<HashSet<&'static str>>,
    /// The threads sources collect on.
    lanes: Arc<Lanes>,
}

/// How many sources collect at once: the CPUs this process may use, at least 2 and at most 4.
pub fn collect_width() -> usize {
    std::thread::available_parallelism()
        .map_or(2, std::num::NonZeroUsize::get)
        .clamp(2, 4)
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("sources", &self.source_names())
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler over the enabled sources, in registry order.
    pub fn new(mut collectors: Collectors) -> Self {
        let sources = std::mem::take(&mut collectors.sources);
        let mut scheduler = Self::from_sources(sources);
        scheduler.collectors = Some(collectors);
        scheduler
    }

    /// A scheduler over `sources` alone (no guarded file system to report on).
    pub(crate) fn from_sources(sources: Vec<Box<dyn AnySource>>) -> Self {
        Scheduler {
            slots: sources
                .into_iter()
                .map(|source| SourceSlot {
                    source: Arc::from(source),
                    running: Arc::new(AtomicBool::new(false)),
                    late: Arc::new(AtomicBool::new(false)),
                    errors_total: AtomicU64::new(0),
                    runs_total: Arc::new(AtomicU64::new(0)),
                    seen_errors: Mutex::new(HashSet::new()),
                })
                .collect(),
            collectors: None,
            inflight: Mutex::new(None),
            last: Mutex::new(None),
            sequence: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            logged_absent: Mutex::new(HashSet::new()),
            lanes: Lanes::new(collect_width()),
        }
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
            runs: self
                .slots
                .iter()
                .map(|s| (s.source.name(), s.runs_total.load(Ordering::Relaxed)))
                .collect(),
            collections: self.sequence.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            blocked: self
                .collectors
                .as_ref()
                .map(Collectors::blocked)
                .unwrap_or_default(),
            fs_timeouts: self.collectors.as_ref().map_or(0, Collectors::fs_timeouts),
            files_kept: self.collectors.as_ref().and_then(Collectors::files_kept),
            refused_files: self
                .collectors
                .as_ref()
                .map_or(0, Collectors::refused_files),
        }
    }

    /// Answers one scrape whose sources may take `timeout`: joins the running collection
    /// (bringing its deadline forward to this scrape's) or starts one, and returns at this
    /// scrape's deadline at the latest with every source that has posted by then.
    pub async fn collect(self: &Arc<Self>, timeout: Duration) -> Arc<Collection> {
        let all = vec![true; self.slots.len()];
        let collection = self.collect_wanted(timeout, &all).await;
        *lock(&self.last) = Some((Instant::now(), Arc::clone(&collection)));
        collection
    }

    /// Like [`Scheduler::collect`], for the sources named in `names` alone (names of sources
    /// that are not enabled are ignored): the collection holds their outcomes only, in
    /// registry order. A scrape that joins a running collection shares the sources both ask
    /// for and starts the others in it, so that no source runs twice for overlapping scrapes.
    pub async fn collect_only(
        self: &Arc<Self>,
        timeout: Duration,
        names: &[&str],
    ) -> Arc<Collection> {
        let wanted: Vec<bool> = self
            .slots
            .iter()
            .map(|s| names.contains(&s.source.name()))
            .collect();
        if wanted.iter().all(|w| *w) {
            return self.collect(timeout).await;
        }
        self.collect_wanted(timeout, &wanted).await
    }

    async fn collect_wanted(
        self: &Arc<Self>,
        timeout: Duration,
        wanted: &[bool],
    ) -> Arc<Collection> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !wanted.iter().any(|w| *w) {
            return Arc::new(Collection {
                outcomes: Vec::new(),
                sequence: self.sequence.load(Ordering::Relaxed),
                blocked_at_start: Vec::new(),
            });
        }
        let deadline = Instant::now() + timeout;
        let inflight = {
            let mut current = lock(&self.inflight);
            let joined = current.as_ref().and_then(|running| {
                let new = running.ask(wanted)?;
                running.deadline.lower(deadline);
                Some((Arc::clone(running), new))
            });
            match joined {
                Some((running, new)) => {
                    for index in new {
                        self.start_source(index, &running);
                    }
                    running
                }
                None => {
                    let started = self.start(deadline, wanted);
                    *current = Some(Arc::clone(&started));
                    started
                }
            }
        };
        inflight.wait(deadline + JOIN_GRACE, Some(wanted)).await;
        Arc::new(inflight.view(&self.source_names(), wanted))
    }

    /// Like [`Scheduler::collect`], but a collection that finished at most `max_age` ago
    /// answers at once (OTLP push shares scrapes' collections this way).
    pub async fn collect_recent(
        self: &Arc<Self>,
        max_age: Duration,
        timeout: Duration,
    ) -> Arc<Collection> {
        if let Some((at, collection)) = lock(&self.last).as_ref()
            && at.elapsed() <= max_age
        {
            return Arc::clone(collection);
        }
        self.collect(timeout).await
    }

    /// Starts a collection with `deadline`: every source of `wanted` on a collection lane, and
    /// a task that closes the collection at its deadline.
    fn start(self: &Arc<Self>, deadline: Instant, wanted: &[bool]) -> Arc<Inflight> {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed) + 1;
        let inflight = Arc::new(Inflight {
            sequence,
            started: Instant::now(),
            blocked_at_start: self
                .collectors
                .as_ref()
                .map(Collectors::blocked)
                .unwrap_or_default(),
            deadline: Arc::new(Deadline::new(deadline)),
            board: Mutex::new(Board {
                asked: wanted.to_vec(),
                posted: vec![None; self.slots.len()],
            }),
            done: AtomicBool::new(!wanted.iter().any(|w| *w)),
            posted: tokio::sync::Notify::new(),
        });
        for (index, want) in wanted.iter().enumerate() {
            if *want {
                self.start_source(index, &inflight);
            }
        }
        let this = Arc::clone(self);
        let closing = Arc::clone(&inflight);
        tokio::spawn(async move { this.close_at_deadline(&closing).await });
        inflight
    }

    fn start_source(self: &Arc<Self>, index: usize, inflight: &Arc<Inflight>) {
        let slot = &self.slots[index];
        let name = slot.source.name();
        if slot.running.swap(true, Ordering::AcqRel) {
            // Still inside an earlier collection that missed its deadline (logged then).
            inflight.post(index, || SourceOutcome::failed(name, Duration::ZERO));
            slot.errors_total.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                target: LOG_TARGET,
                collector = name,
                "Skipping collection: the previous one has not returned yet."
            );
            return;
        }
        let source = Arc::clone(&slot.source);
        let running = Arc::clone(&slot.running);
        let late = Arc::clone(&slot.late);
        let runs = Arc::clone(&slot.runs_total);
        let deadline = Arc::clone(&inflight.deadline);
        let queued = Instant::now();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ticket = self.lanes.submit(move || {
            if Instant::now() >= deadline.at() {
                // Its turn came too late to start.
                let _ = tx.send(Ran::NotStarted);
                return;
            }
            let began = Instant::now();
            runs.fetch_add(1, Ordering::Relaxed);
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| source.collect(&deadline)));
            if late.swap(false, Ordering::AcqRel) {
                tracing::info!(
                    target: LOG_TARGET,
                    collector = name,
                    after_seconds = began.elapsed().as_secs_f64(),
                    "A collector that missed its deadline returned; it runs again from the next collection."
                );
            }
            running.store(false, Ordering::Release);
            let _ = tx.send(Ran::Returned(result.ok(), began.elapsed()));
        });
        let this = Arc::clone(self);
        let inflight = Arc::clone(inflight);
        tokio::spawn(async move {
            match this.wait_for(rx, &ticket, &inflight.deadline).await {
                Ran::Returned(report, took) => {
                    inflight.post(index, || this.outcome(index, report, took));
                }
                Ran::NotStarted => this.not_started(index, &inflight, queued.elapsed()),
            }
        });
    }

    /// Waits for what a source's job sends back. A job that has run for [`SLOW`], or is
    /// still running when the collection's deadline (and its grace) has passed, gives its
    /// lane up: slow sources run side by side, and the queue behind them goes on.
    async fn wait_for(
        &self,
        mut rx: tokio::sync::oneshot::Receiver<Ran>,
        ticket: &Ticket,
        deadline: &Deadline,
    ) -> Ran {
        let lost = || Ran::Returned(None, Duration::ZERO);
        loop {
            // Look again at least every 10 ms: a joining scrape may bring the deadline
            // forward, and a job may have become slow.
            let until =
                (deadline.at() + JOIN_GRACE).min(Instant::now() + Duration::from_millis(10));
            tokio::select! {
                ran = &mut rx => return ran.unwrap_or_else(|_| lost()),
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => {}
            }
            let now = Instant::now();
            let slow = ticket.running_for().is_some_and(|t| t >= SLOW);
            if now >= deadline.at() + JOIN_GRACE || slow {
                self.lanes.give_up(ticket);
                if ticket.given_up() || now >= deadline.at() + JOIN_GRACE {
                    return rx.await.unwrap_or_else(|_| lost());
                }
            }
        }
    }

    /// Source `index` did not start: its turn came after the deadline. It failed in this
    /// collection, but it never ran, so it is not late (the deadline may have marked it so).
    fn not_started(&self, index: usize, inflight: &Inflight, waited: Duration) {
        let slot = &self.slots[index];
        let name = slot.source.name();
        if inflight.post(index, || SourceOutcome::failed(name, waited)) {
            slot.errors_total.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                target: LOG_TARGET,
                collector = name,
                waited_seconds = waited.as_secs_f64(),
                "Collector's turn came after the scrape deadline; its series are missing from this scrape."
            );
        }
        slot.late.store(false, Ordering::Release);
        slot.running.store(false, Ordering::Release);
    }

    /// At the collection's deadline (which may come forward while it waits), every source
    /// that has not posted is reported failed, and the collection is over.
    async fn close_at_deadline(&self, inflight: &Arc<Inflight>) {
        loop {
            let until = inflight.deadline.at() + JOIN_GRACE;
            // Look again at least every 10 ms: a joining scrape may bring the deadline forward.
            if inflight
                .wait(until.min(Instant::now() + Duration::from_millis(10)), None)
                .await
            {
                break;
            }
            if Instant::now() < inflight.deadline.at() + JOIN_GRACE {
                continue;
            }
            let asked = lock(&inflight.board).asked.clone();
            for (index, slot) in self.slots.iter().enumerate() {
                if !asked[index] {
                    continue;
                }
                let name = slot.source.name();
                let elapsed = inflight.started.elapsed();
                // Marked late under the board's lock, before a source that never got its
                // turn can look (`start_source`).
                let posted = inflight.post(index, || {
                    slot.late.store(true, Ordering::Release);
                    SourceOutcome::failed(name, elapsed)
                });
                if posted {
                    slot.errors_total.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        target: LOG_TARGET,
                        collector = name,
                        timeout_seconds = elapsed.as_secs_f64(),
                        "Collector missed the scrape deadline; its series are missing until it returns."
                    );
                }
            }
            break;
        }
        let mut current = lock(&self.inflight);
        if current
            .as_ref()
            .is_some_and(|c| c.sequence == inflight.sequence)
        {
            *current = None;
        }
    }

    /// Counts and logs what source `index` returned (`None`: it panicked).
    fn outcome(
        &self,
        index: usize,
        report: Option<SourceReport>,
        duration: Duration,
    ) -> SourceOutcome {
        let slot = &self.slots[index];
        let name = slot.source.name();
        let report = match report {
            Some(report) => report,
            None => {
                slot.errors_total.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    target: LOG_TARGET,
                    collector = name,
                    "Collector panicked; its series are missing from this scrape."
                );
                return SourceOutcome::failed(name, duration);
            }
        };
        if let Some(reason) = &report.absent {
            self.log_absent(name, reason);
        }
        // Reads skipped because their device is blocked are not counted one by one: the read
        // that blocked was, and the device shows in `railscope_sysfs_blocked_seconds` until it
        // returns. Nor are reads of files that refused them before and back off: the first
        // refusal was counted and logged. Timeouts were logged when they happened.
        // An error is logged when it starts: when the last collection of this source did not
        // have it. Remembering only the last collection's errors keeps this bounded however
        // many netdevs and devices come and go.
        let mut errors = 0;
        let mut seen = HashSet::new();
        let mut before = lock(&slot.seen_errors);
        for error in report
            .errors
            .iter()
            .filter(|e| !matches!(e.kind, ErrorKind::Skipped | ErrorKind::Refused))
        {
            errors += 1;
            if error.kind != ErrorKind::Timeout {
                let key = error_key(error);
                let first = !before.contains(&key);
                log_error(name, error, first);
                if seen.len() < LOGGED_ERRORS_CAP {
                    seen.insert(key);
                }
            }
        }
        *before = seen;
        drop(before);
        slot.errors_total
            .fetch_add(errors as u64, Ordering::Relaxed);
        SourceOutcome {
            name,
            success: report.data.is_some(),
            duration,
            data: report.data,
            errors,
        }
    }

    fn log_absent(&self, name: &'static str, reason: &str) {
        let mut logged = lock(&self.logged_absent);
        if logged.insert(name) {
            tracing::info!(
                target: LOG_TARGET,
                collector = name,
                reason,
                "Subsystem not present; the collector reports nothing."
            );
        }
    }
}

/// What identifies an error for logging it once: origin, kind and errno.
fn error_key(error: &CollectError) -> ErrorKey {
    (error.origin.to_string(), error.kind.as_str(), error.errno)
}

/// Logs a failed read: at `warn` when it starts (`first`), at `debug` while it lasts.
fn log_error(name: &'static str, error: &CollectError, first: bool) {
    let errno = error.errno_name().unwrap_or_default();
    let device = error.device.as_deref().unwrap_or_default();
    let path = error.origin.to_string();
    if first {
        tracing::warn!(target: LOG_TARGET, collector = name, device, path, errno, kind = error.kind.as_str(), error = %error, "Failed to read a value; its series are skipped.");
    } else {
        tracing::debug!(target: LOG_TARGET, collector = name, device, path, errno, kind = error.kind.as_str(), error = %error, "Failed to read a value; its series are skipped.");
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    use crate::registry::SourceData;
    use crate::run::{Run, Work};
    use crate::sources::infiniband::{Device, Snapshot};
    use std::sync::atomic::AtomicUsize;

    fn devices(names: &[&str]) -> SourceData {
        SourceData::Infiniband(Snapshot {
            devices: names
                .iter()
                .map(|n| Device {
                    name: (*n).to_owned(),
                    ..Device::default()
                })
                .collect(),
        })
    }

    fn names(outcome: &SourceOutcome) -> Vec<String> {
        match &outcome.data {
            Some(SourceData::Infiniband(s)) => s.devices.iter().map(|d| d.name.clone()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[derive(Debug)]
    struct Slow {
        calls: Arc<AtomicUsize>,
        sleep: Duration,
    }

    impl AnySource for Slow {
        fn name(&self) -> &'static str {
            "slow"
        }
        fn collect(&self, _: &Deadline) -> SourceReport {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.sleep);
            SourceReport {
                data: Some(devices(&["slow"])),
                errors: Vec::new(),
                absent: None,
            }
        }
    }

    #[derive(Debug)]
    struct Panics;

    impl AnySource for Panics {
        fn name(&self) -> &'static str {
            "panics"
        }
        fn collect(&self, _: &Deadline) -> SourceReport {
            panic!("a source bug")
        }
    }

    /// Reads three devices through `Run::each`; `hang` blocks for `hang_for`.
    #[derive(Debug)]
    struct ThreeDevices {
        work: Work,
        hang_for: Duration,
        entered: Arc<AtomicUsize>,
    }

    impl AnySource for ThreeDevices {
        fn name(&self) -> &'static str {
            "three"
        }
        fn collect(&self, deadline: &Deadline) -> SourceReport {
            let run = Run::new(deadline, &self.work);
            let (hang_for, entered) = (self.hang_for, Arc::clone(&self.entered));
            let units = run.each(
                ["first", "hang", "last"].map(String::from).to_vec(),
                1,
                move |key| {
                    if key == "hang" {
                        entered.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(hang_for);
                    }
                    key.to_owned()
                },
            );
            let read: Vec<String> = units.into_iter().filter_map(|(_, u)| u.done()).collect();
            let read: Vec<&str> = read.iter().map(String::as_str).collect();
            SourceReport {
                data: Some(devices(&read)),
                errors: run.into_errors(),
                absent: None,
            }
        }
    }

    fn scheduler(sources: Vec<Box<dyn AnySource>>) -> Arc<Scheduler> {
        Arc::new(Scheduler::from_sources(sources))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_scrapes_share_one_collection() {
        let calls = Arc::new(AtomicUsize::new(0));
        let scheduler = scheduler(vec![Box::new(Slow {
            calls: calls.clone(),
            sleep: Duration::from_millis(200),
        })]);
        let scrapes: Vec<_> = (0..20)
            .map(|_| {
                let s = Arc::clone(&scheduler);
                tokio::spawn(async move { s.collect(Duration::from_secs(5)).await.sequence })
            })
            .collect();
        let mut sequences = Vec::new();
        for scrape in scrapes {
            sequences.push(scrape.await.unwrap());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(sequences.iter().all(|&s| s == 1));
        assert_eq!(scheduler.totals().requests, 20);
        // The next scrape starts a new collection.
        assert_eq!(scheduler.collect(Duration::from_secs(5)).await.sequence, 2);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// Counts its runs; while `gate` is shut, a run waits (up to 10 s) for it to open.
    #[derive(Debug)]
    struct Gated {
        name: &'static str,
        calls: Arc<AtomicUsize>,
        gate: Arc<AtomicBool>,
    }

    impl AnySource for Gated {
        fn name(&self) -> &'static str {
            self.name
        }
        fn collect(&self, _: &Deadline) -> SourceReport {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let until = Instant::now() + Duration::from_secs(10);
            while !self.gate.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            SourceReport {
                data: Some(devices(&[self.name])),
                errors: Vec::new(),
                absent: None,
            }
        }
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Two scrapes with overlapping filters (`collect[]=a&collect[]=b`, then
    /// `collect[]=b&collect[]=c` while the first runs) share one collection: each source runs
    /// once, each scrape gets its own sources, and the second does not wait for `a`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn overlapping_filtered_scrapes_run_each_source_once() {
        let gate = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicBool::new(true));
        let calls: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
        let scheduler = scheduler(vec![
            Box::new(Gated {
                name: "a",
                calls: calls[0].clone(),
                gate: gate.clone(),
            }),
            Box::new(Gated {
                name: "b",
                calls: calls[1].clone(),
                gate: open.clone(),
            }),
            Box::new(Gated {
                name: "c",
                calls: calls[2].clone(),
                gate: open.clone(),
            }),
        ]);
        let first = {
            let s = Arc::clone(&scheduler);
            tokio::spawn(async move { s.collect_only(Duration::from_secs(20), &["a", "b"]).await })
        };
        until("a to start", || calls[0].load(Ordering::SeqCst) == 1).await;
        until("b to run", || calls[1].load(Ordering::SeqCst) == 1).await;
        let second = scheduler
            .collect_only(Duration::from_secs(20), &["c", "b"])
            .await;
        assert_eq!(second.sequence, 1, "it joined the running collection");
        let names: Vec<&str> = second.outcomes.iter().map(|o| o.name).collect();
        assert_eq!(names, ["b", "c"]);
        assert!(second.outcomes.iter().all(|o| o.success));
        assert!(!first.is_finished(), "the first scrape waits for a");
        gate.store(true, Ordering::SeqCst);
        let first = first.await.unwrap();
        assert_eq!(first.sequence, 1);
        let names: Vec<&str> = first.outcomes.iter().map(|o| o.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(first.outcomes.iter().all(|o| o.success));
        let runs: Vec<usize> = calls.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        assert_eq!(runs, [1, 1, 1], "each source ran once for both scrapes");
        assert_eq!(scheduler.totals().runs, vec![("a", 1), ("b", 1), ("c", 1)]);
        assert_eq!(scheduler.totals().collections, 1);
        assert_eq!(scheduler.totals().requests, 2);
        // Once it is over, a scrape starts a collection of its own sources only.
        let third = scheduler.collect_only(Duration::from_secs(5), &["c"]).await;
        assert_eq!(third.sequence, 2);
        assert_eq!(scheduler.totals().runs, vec![("a", 1), ("b", 1), ("c", 2)]);
        // A scrape that asks for nothing runs nothing.
        let none = scheduler.collect_only(Duration::from_secs(5), &[]).await;
        assert!(none.outcomes.is_empty());
        assert_eq!(scheduler.totals().collections, 2);
    }

    /// Sources queue for `collect_width` lanes, but slow ones give their lane up: healthy
    /// sources queued behind more hung sources than there are lanes still answer in the
    /// first scrape, and fast collections use no more threads than there are lanes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hung_sources_beyond_the_lanes_hide_no_healthy_one() {
        let width = collect_width();
        let hung = Arc::new(AtomicUsize::new(0));
        let fast = Arc::new(AtomicUsize::new(0));
        let mut sources: Vec<Box<dyn AnySource>> = Vec::new();
        for _ in 0..width + 2 {
            sources.push(Box::new(Slow {
                calls: hung.clone(),
                sleep: Duration::from_millis(2000),
            }));
        }
        for _ in 0..3 {
            sources.push(Box::new(Slow {
                calls: fast.clone(),
                sleep: Duration::from_millis(1),
            }));
        }
        let scheduler = scheduler(sources);
        let first = scheduler.collect(Duration::from_millis(800)).await;
        let ok: Vec<bool> = first.outcomes.iter().map(|o| o.success).collect();
        let mut want = vec![false; width + 2];
        want.extend([true; 3]);
        assert_eq!(ok, want);
        assert_eq!(
            hung.load(Ordering::SeqCst),
            width + 2,
            "every hung source started"
        );
        assert_eq!(fast.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fast_sources_run_on_no_more_threads_than_lanes() {
        #[derive(Debug)]
        struct Where(Arc<Mutex<HashSet<std::thread::ThreadId>>>);
        impl AnySource for Where {
            fn name(&self) -> &'static str {
                "where"
            }
            fn collect(&self, _: &Deadline) -> SourceReport {
                lock(&self.0).insert(std::thread::current().id());
                SourceReport {
                    data: Some(devices(&["here"])),
                    errors: Vec::new(),
                    absent: None,
                }
            }
        }
        let threads = Arc::new(Mutex::new(HashSet::new()));
        let sources: Vec<Box<dyn AnySource>> = (0..8)
            .map(|_| Box::new(Where(threads.clone())) as Box<dyn AnySource>)
            .collect();
        let scheduler = scheduler(sources);
        for _ in 0..20 {
            let c = scheduler.collect(Duration::from_secs(5)).await;
            assert!(c.outcomes.iter().all(|o| o.success));
        }
        // One more than the lanes at most: a lane preempted for 20 ms in the middle of a job
        // on a loaded machine has its job given up and a lane started in its place. One
        // thread per source would be eight.
        let used = lock(&threads).len();
        assert!(
            (1..=collect_width() + 1).contains(&used),
            "{used} threads for {} lanes",
            collect_width()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_source_misses_the_deadline_and_is_not_restarted_while_stuck() {
        let calls = Arc::new(AtomicUsize::new(0));
        let scheduler = scheduler(vec![
            Box::new(Slow {
                calls: calls.clone(),
                sleep: Duration::from_millis(1500),
            }),
            Box::new(Panics),
        ]);
        let start = Instant::now();
        let first = scheduler.collect(Duration::from_millis(200)).await;
        assert!(
            start.elapsed() < Duration::from_millis(1200),
            "the scrape waited for the hung source"
        );
        assert!(!first.outcomes[0].success);
        assert!(
            !first.outcomes[1].success,
            "a panicking source is reported failed"
        );
        // Let the first collection close, then scrape again while the source is stuck.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let second = scheduler.collect(Duration::from_millis(200)).await;
        assert!(second.sequence > first.sequence);
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_scrape_joining_a_long_collection_gets_every_device_ready_in_time() {
        let calls = Arc::new(AtomicUsize::new(0));
        let entered = Arc::new(AtomicUsize::new(0));
        let scheduler = scheduler(vec![
            Box::new(Slow {
                calls: calls.clone(),
                sleep: Duration::from_millis(20),
            }),
            Box::new(ThreeDevices {
                work: Work::new("three", None),
                hang_for: Duration::from_millis(2500),
                entered: entered.clone(),
            }),
        ]);
        // A start-up collection with a long deadline ...
        let long = {
            let s = Arc::clone(&scheduler);
            tokio::spawn(async move { s.collect(Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // ... joined by a scrape with a short one.
        let start = Instant::now();
        let short = scheduler.collect(Duration::from_millis(400)).await;
        let took = start.elapsed();
        assert!(took < Duration::from_millis(700), "{took:?}");
        assert_eq!(short.sequence, 1, "it joined the running collection");
        assert!(short.outcomes.iter().all(|o| o.success), "{short:?}");
        assert_eq!(names(&short.outcomes[0]), ["slow"]);
        assert_eq!(
            names(&short.outcomes[1]),
            ["first", "last"],
            "every device but the stuck one"
        );
        assert_eq!(short.outcomes[1].errors, 1, "the stuck device's timeout");
        let long = long.await.unwrap();
        assert_eq!(long.sequence, 1);
        assert_eq!(names(&long.outcomes[1]), ["first", "last"]);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // While the stuck device's read runs, later collections skip it at once.
        let start = Instant::now();
        let next = scheduler.collect(Duration::from_secs(5)).await;
        assert!(start.elapsed() < Duration::from_millis(1000));
        assert_eq!(names(&next.outcomes[1]), ["first", "last"]);
        assert_eq!(next.outcomes[1].errors, 0, "counted once");
        assert_eq!(entered.load(Ordering::SeqCst), 1);
    }

    /// Every collection fails on a netdev of its own, as veths that come and go do.
    #[derive(Debug)]
    struct Churn {
        round: AtomicUsize,
    }

    impl AnySource for Churn {
        fn name(&self) -> &'static str {
            "churn"
        }
        fn collect(&self, _: &Deadline) -> SourceReport {
            let round = self.round.fetch_add(1, Ordering::SeqCst);
            let path = format!("/s/class/net/veth{round}/mtu");
            let steady = CollectError::io(
                Some("eth0"),
                std::path::Path::new("/s/class/net/eth0/speed"),
                &std::io::Error::from_raw_os_error(5), // EIO
            );
            SourceReport {
                data: Some(devices(&[])),
                errors: vec![
                    steady,
                    CollectError::io(
                        Some("veth"),
                        std::path::Path::new(&path),
                        &std::io::Error::from_raw_os_error(19), // ENODEV
                    ),
                ],
                absent: None,
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn errors_of_devices_that_come_and_go_leave_nothing_behind() {
        let scheduler = scheduler(vec![Box::new(Churn {
            round: AtomicUsize::new(0),
        })]);
        for _ in 0..200 {
            scheduler.collect(Duration::from_secs(5)).await;
        }
        assert_eq!(scheduler.totals().errors, vec![("churn", 400)]);
        assert_eq!(
            lock(&scheduler.slots[0].seen_errors).len(),
            2,
            "only the last collection's errors are remembered"
        );
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
