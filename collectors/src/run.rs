//! How a collection runs: the one timeout model every source uses.
//!
//! The agent hands each collection a [`Deadline`]: the earliest deadline among the scrapes
//! waiting for it. It can only come closer: a scrape with a short timeout that joins a
//! longer collection brings it forward ([`Deadline::lower`]), so everything below acts on
//! the deadline of the most impatient scrape.
//!
//! A source splits its work into *units*, one per device (an RDMA device, a GPU, a
//! netdev), and runs them with [`Run::each`]:
//!
//! * Units run on worker threads, `width` at a time (one for sysfs sources, which read
//!   fastest in sequence; one per GPU for NVML, whose calls take milliseconds), while the
//!   source's own thread watches them.
//! * A unit that runs past its wait (half the time that was left to the deadline when it
//!   started, at least [`MIN_WAIT`]) is *late*: it is reported [`Unit::Late`], counted once as
//!   a timeout, logged once, and fenced (the file-system reads of its thread fail at once
//!   from then on, and the device whose read blocked is skipped by every reader,
//!   see [`crate::fs::guard`]). A fresh worker takes over the units still queued, so a stuck
//!   device costs only its own series.
//! * At the deadline every unit still running is late and every unit not yet started is
//!   [`Unit::NotStarted`]; the source assembles what is done and returns.
//! * A late unit's thread is left to finish. Until it does, its device is *busy*: later
//!   collections report it late at once without starting it again, so a device that hangs
//!   holds exactly one thread however many scrapes come. When the thread returns, the
//!   device is logged as answering again and the next collection reads it.
//!
//! Worker threads come from a small pool shared by every source; an idle worker ends after
//! a minute.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::error::{CollectError, ErrorKind, Origin};
use crate::fs::guard::{self, GuardedFs};

/// The shortest wait for one unit, even when the deadline has passed.
pub const MIN_WAIT: Duration = Duration::from_millis(50);

/// The longest the watching thread sleeps before it looks at the deadline again (a scrape
/// that joins may have brought it forward).
const POLL: Duration = Duration::from_millis(10);

/// How long an idle pool worker waits for work before it ends.
const IDLE: Duration = Duration::from_secs(60);

/// A collection's deadline: the earliest deadline among the scrapes waiting for it.
#[derive(Debug)]
pub struct Deadline {
    /// Nanoseconds after [`epoch`].
    at: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn to_nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

impl Deadline {
    /// A deadline at `at`.
    pub fn new(at: Instant) -> Self {
        Deadline {
            at: AtomicU64::new(to_nanos(at)),
        }
    }

    /// When it is now.
    pub fn at(&self) -> Instant {
        epoch() + Duration::from_nanos(self.at.load(Ordering::Acquire))
    }

    /// Brings it forward to `at` when that is earlier; never moves it later.
    pub fn lower(&self, at: Instant) {
        self.at.fetch_min(to_nanos(at), Ordering::AcqRel);
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at()
    }
}

/// How one unit of a [`Run::each`] went.
#[derive(Debug)]
pub enum Unit<R> {
    /// It returned in time.
    Done(R),
    /// It did not return in time, in this collection or (still) since an earlier one; its
    /// thread is left to finish.
    Late {
        /// How long it has been running.
        running_for: Duration,
    },
    /// The deadline came before it could start.
    NotStarted,
    /// It panicked: a bug, reported as the unit failing.
    Panicked,
}

impl<R> Unit<R> {
    /// The result, when it returned in time.
    pub fn done(self) -> Option<R> {
        match self {
            Unit::Done(r) => Some(r),
            _ => None,
        }
    }
}

/// The state a source keeps between collections: which of its devices are busy with a late
/// unit. Built by the registry, one per source.
#[derive(Debug)]
pub struct Work {
    source: &'static str,
    guard: Option<Arc<GuardedFs>>,
    busy: Arc<Mutex<HashMap<String, Busy>>>,
}

#[derive(Debug, Clone, Copy)]
struct Busy {
    attempt: u64,
    since: Instant,
}

impl Work {
    /// The state of source `source`, whose file-system reads go through `guard`.
    pub fn new(source: &'static str, guard: Option<Arc<GuardedFs>>) -> Self {
        Work {
            source,
            guard,
            busy: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The devices whose late unit has not returned yet, with how long each has run.
    pub fn busy(&self) -> Vec<(String, Duration)> {
        let mut out: Vec<_> = lock(&self.busy)
            .iter()
            .map(|(k, b)| (k.clone(), b.since.elapsed()))
            .collect();
        out.sort();
        out
    }
}

/// One collection of one source: its deadline, and the errors of its late units.
#[derive(Debug)]
pub struct Run<'a> {
    deadline: &'a Deadline,
    work: &'a Work,
    errors: Mutex<Vec<CollectError>>,
}

impl<'a> Run<'a> {
    /// A collection of the source whose state is `work`, under `deadline`.
    pub fn new(deadline: &'a Deadline, work: &'a Work) -> Self {
        Run {
            deadline,
            work,
            errors: Mutex::new(Vec::new()),
        }
    }

    /// The deadline as it is now (it may still come forward).
    pub fn deadline(&self) -> Instant {
        self.deadline.at()
    }

    /// The errors this run recorded (one timeout per unit that became late in it).
    pub fn into_errors(self) -> Vec<CollectError> {
        self.errors.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` once for every key, `width` units at a time, and returns how each went,
    /// in the order of `keys`; see the module docs. Keys name devices: a key whose unit of
    /// an earlier collection is still running is not started again.
    pub fn each<R, F>(&self, keys: Vec<String>, width: usize, work: F) -> Vec<(String, Unit<R>)>
    where
        R: Send + 'static,
        F: Fn(&str) -> R + Send + Sync + 'static,
    {
        if keys.is_empty() {
            return Vec::new();
        }
        let job = Arc::new(Job {
            state: Mutex::new(JobState {
                slots: keys.iter().map(|_| Slot::Queued).collect(),
                next: 0,
                closed: false,
                dead: HashSet::new(),
                next_runner: 0,
            }),
            cv: Condvar::new(),
            keys,
            work: Box::new(work),
            source: self.work.source,
            guard: self.work.guard.clone(),
            busy: Arc::clone(&self.work.busy),
        });
        let width = width.clamp(1, job.keys.len());
        for _ in 0..width {
            job.spawn_runner();
        }
        self.watch(&job);
        let mut state = lock(&job.state);
        let slots = std::mem::take(&mut state.slots);
        drop(state);
        job.keys
            .iter()
            .cloned()
            .zip(slots)
            .map(|(key, slot)| {
                let unit = match slot {
                    Slot::Done(r) => Unit::Done(r),
                    Slot::Panicked => Unit::Panicked,
                    Slot::Late { since } => Unit::Late {
                        running_for: since.elapsed(),
                    },
                    Slot::Queued | Slot::Running { .. } => Unit::NotStarted,
                };
                (key, unit)
            })
            .collect()
    }

    /// Waits until every unit is resolved or the deadline comes, fencing units past their
    /// wait on the way.
    fn watch<R: Send + 'static>(&self, job: &Arc<Job<R>>) {
        let mut state = lock(&job.state);
        loop {
            if state.slots.iter().all(Slot::resolved) && state.next >= state.slots.len() {
                break;
            }
            let now = Instant::now();
            let deadline = self.deadline.at();
            if now >= deadline {
                state.closed = true;
                for i in 0..state.slots.len() {
                    if let Slot::Running { .. } = state.slots[i] {
                        self.fence(job, &mut state, i, false);
                    }
                }
                break;
            }
            let mut wake = deadline.min(now + POLL);
            for i in 0..state.slots.len() {
                if let Slot::Running { started, .. } = state.slots[i] {
                    let wait = (deadline.saturating_duration_since(started) / 2).max(MIN_WAIT);
                    if now >= started + wait {
                        self.fence(job, &mut state, i, true);
                    } else {
                        wake = wake.min(started + wait);
                    }
                }
            }
            let timeout = wake.saturating_duration_since(Instant::now());
            state = job
                .cv
                .wait_timeout(state, timeout)
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Makes unit `i` late: its device is busy until its thread returns, its attempt is
    /// fenced, and (when `replace`) a fresh runner takes over the queue.
    fn fence<R: Send + 'static>(
        &self,
        job: &Arc<Job<R>>,
        state: &mut JobState<R>,
        i: usize,
        replace: bool,
    ) {
        let Slot::Running {
            started,
            attempt,
            runner,
        } = state.slots[i]
        else {
            return;
        };
        state.slots[i] = Slot::Late { since: started };
        state.dead.insert(runner);
        let key = &job.keys[i];
        lock(&job.busy).insert(
            key.clone(),
            Busy {
                attempt,
                since: started,
            },
        );
        let blocked = job.guard.as_ref().and_then(|g| g.fence(attempt));
        let waited = started.elapsed();
        let (origin, detail) = match &blocked {
            Some(b) => (
                Origin::File(b.path.clone()),
                format!(
                    "a read under {} did not return within {:.3}s; the device is skipped until it does",
                    b.device,
                    waited.as_secs_f64()
                ),
            ),
            None => (
                Origin::Device {
                    source: job.source,
                    device: key.clone(),
                },
                format!(
                    "{key} did not answer within {:.3}s; it is skipped until it does",
                    waited.as_secs_f64()
                ),
            ),
        };
        if blocked.is_some() {
            tracing::warn!(
                collector = job.source,
                device = key.as_str(),
                path = %origin,
                waited_seconds = waited.as_secs_f64(),
                "A read blocked in the kernel past its wait; the device is skipped until the read returns."
            );
        } else {
            tracing::warn!(
                collector = job.source,
                device = key.as_str(),
                waited_seconds = waited.as_secs_f64(),
                "A device did not answer in time; its series are skipped until it does."
            );
        }
        lock(&self.errors).push(CollectError::at(
            Some(key),
            origin,
            ErrorKind::Timeout,
            detail,
        ));
        if replace && state.next < state.slots.len() && !state.closed {
            job.spawn_runner_locked(state);
        }
    }
}

/// Runs `f` with a collection of its own (state that no one else shares, a deadline five
/// seconds away): for reading a source outside the agent, as tests and tools do.
pub fn standalone<R>(source: &'static str, f: impl FnOnce(&Run<'_>) -> R) -> R {
    let work = Work::new(source, None);
    let deadline = Deadline::new(Instant::now() + Duration::from_secs(5));
    f(&Run::new(&deadline, &work))
}

/// What a unit that reads one device returns: the device (when there is one to report) and
/// the errors met reading it.
pub type DeviceRead<T> = (Option<T>, Vec<CollectError>);

/// The devices of `units` that were read, in order, with the errors met reading them added
/// to `errors`; a unit that is late or was not started adds nothing (its timeout is the
/// run's error).
pub fn gather<T>(
    units: Vec<(String, Unit<DeviceRead<T>>)>,
    errors: &mut Vec<CollectError>,
) -> Vec<T> {
    let mut out = Vec::with_capacity(units.len());
    for (_, unit) in units {
        if let Some((item, mut unit_errors)) = unit.done() {
            out.extend(item);
            errors.append(&mut unit_errors);
        }
    }
    out
}

enum Slot<R> {
    Queued,
    Running {
        started: Instant,
        attempt: u64,
        runner: u64,
    },
    Done(R),
    Late {
        since: Instant,
    },
    Panicked,
}

impl<R> Slot<R> {
    fn resolved(&self) -> bool {
        !matches!(self, Slot::Queued | Slot::Running { .. })
    }
}

struct JobState<R> {
    slots: Vec<Slot<R>>,
    /// The next queued unit.
    next: usize,
    /// The deadline passed: start nothing more.
    closed: bool,
    /// Runners whose unit was fenced: they stop when their unit returns.
    dead: HashSet<u64>,
    next_runner: u64,
}

type WorkFn<R> = Box<dyn Fn(&str) -> R + Send + Sync>;

struct Job<R> {
    state: Mutex<JobState<R>>,
    cv: Condvar,
    keys: Vec<String>,
    work: WorkFn<R>,
    source: &'static str,
    guard: Option<Arc<GuardedFs>>,
    busy: Arc<Mutex<HashMap<String, Busy>>>,
}

impl<R: Send + 'static> Job<R> {
    fn spawn_runner(self: &Arc<Self>) {
        let mut state = lock(&self.state);
        self.spawn_runner_locked(&mut state);
    }

    fn spawn_runner_locked(self: &Arc<Self>, state: &mut JobState<R>) {
        let runner = state.next_runner;
        state.next_runner += 1;
        let job = Arc::clone(self);
        pool().submit(Box::new(move || job.run(runner)));
    }

    /// Wakes the watching thread once every unit is resolved. It does not need waking for
    /// each unit: it looks at the units that started at least every [`POLL`], well before
    /// any of them is due to be fenced, so waking it per unit (eight times a collection on
    /// an eight-NIC node) would only cost context switches.
    fn notify_if_finished(cv: &Condvar, state: &JobState<R>) {
        if state.next >= state.slots.len() && state.slots.iter().all(Slot::resolved) {
            cv.notify_all();
        }
    }

    /// A runner: takes queued units one after another until none is left, the deadline
    /// passed, or its own unit was fenced.
    fn run(&self, runner: u64) {
        loop {
            let mut state = lock(&self.state);
            if state.closed || state.dead.contains(&runner) || state.next >= state.slots.len() {
                return;
            }
            let i = state.next;
            state.next += 1;
            let key = &self.keys[i];
            if let Some(busy) = lock(&self.busy).get(key).copied() {
                state.slots[i] = Slot::Late { since: busy.since };
                Self::notify_if_finished(&self.cv, &state);
                continue;
            }
            let attempt = guard::next_attempt();
            state.slots[i] = Slot::Running {
                started: Instant::now(),
                attempt,
                runner,
            };
            drop(state);
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                guard::with_attempt(attempt, || (self.work)(key))
            }));
            if let Some(guard) = &self.guard {
                guard.finish_attempt(attempt);
            }
            let mut state = lock(&self.state);
            // The collection may be over (its slots taken) when a late unit returns.
            let mine = matches!(state.slots.get(i), Some(Slot::Running { attempt: a, .. }) if *a == attempt);
            if mine {
                state.slots[i] = match result {
                    Ok(r) => Slot::Done(r),
                    Err(_) => {
                        tracing::error!(
                            collector = self.source,
                            device = key.as_str(),
                            "Reading a device panicked; its series are missing from this scrape."
                        );
                        Slot::Panicked
                    }
                };
                Self::notify_if_finished(&self.cv, &state);
                continue;
            }
            // Fenced while it ran: the collection moved on without this answer.
            drop(state);
            let mut busy = lock(&self.busy);
            if let Some(b) = busy.get(key).copied()
                && b.attempt == attempt
            {
                busy.remove(key);
                drop(busy);
                tracing::info!(
                    collector = self.source,
                    device = key.as_str(),
                    after_seconds = b.since.elapsed().as_secs_f64(),
                    "A device that did not answer in time answered again; it is read from the next collection on."
                );
            }
            return;
        }
    }
}

type Task = Box<dyn FnOnce() + Send>;

/// Worker threads shared by every source. An idle worker waits for a task on its own channel;
/// a task with no idle worker gets a fresh thread.
struct Pool {
    idle: Mutex<VecDeque<(u64, mpsc::Sender<Task>)>>,
    next_id: AtomicU64,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        idle: Mutex::new(VecDeque::new()),
        next_id: AtomicU64::new(0),
    })
}

impl Pool {
    fn submit(&'static self, task: Task) {
        let mut task = task;
        loop {
            let idle = lock(&self.idle).pop_back();
            match idle {
                Some((_, worker)) => match worker.send(task) {
                    Ok(()) => return,
                    // The worker ended between being listed and being sent to.
                    Err(mpsc::SendError(t)) => task = t,
                },
                None => break,
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("railscope-work".into())
            .spawn(move || self.worker(id, task));
        if let Err(err) = spawned {
            tracing::error!(error = %err, "Failed to start a worker thread.");
        }
    }

    fn worker(&'static self, id: u64, first: Task) {
        first();
        let (tx, rx) = mpsc::channel::<Task>();
        loop {
            lock(&self.idle).push_back((id, tx.clone()));
            match rx.recv_timeout(IDLE) {
                Ok(task) => task(),
                Err(_) => {
                    let mut idle = lock(&self.idle);
                    if let Some(pos) = idle.iter().position(|(w, _)| *w == id) {
                        idle.remove(pos);
                        return;
                    }
                    drop(idle);
                    // Taken off the idle list by a submit that is sending to us now.
                    match rx.recv() {
                        Ok(task) => task(),
                        Err(_) => return,
                    }
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    fn work() -> Work {
        Work::new("test", None)
    }

    #[test]
    fn every_unit_done_in_order() {
        let w = work();
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(5));
        let run = Run::new(&deadline, &w);
        let keys: Vec<String> = (0..20).map(|i| format!("d{i}")).collect();
        for width in [1, 3, 20] {
            let out = run.each(keys.clone(), width, |k| k.len());
            assert_eq!(out.len(), 20);
            for (i, (key, unit)) in out.into_iter().enumerate() {
                assert_eq!(key, format!("d{i}"));
                assert_eq!(unit.done(), Some(key.len()));
            }
        }
        assert!(run.into_errors().is_empty());
    }

    /// Units named `hang*` block until `release` is set.
    fn hanging(release: Arc<AtomicBool>, entered: Arc<AtomicUsize>) -> impl Fn(&str) -> u32 {
        move |key: &str| {
            if key.starts_with("hang") {
                entered.fetch_add(1, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            7
        }
    }

    #[test]
    fn a_hanging_unit_costs_itself_and_is_not_started_again_while_busy() {
        let w = work();
        let release = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(AtomicUsize::new(0));
        let keys: Vec<String> = ["a", "hang", "b", "c"].map(String::from).to_vec();
        for round in 0..3 {
            let deadline = Deadline::new(Instant::now() + Duration::from_millis(400));
            let run = Run::new(&deadline, &w);
            let start = Instant::now();
            let out = run.each(keys.clone(), 1, hanging(release.clone(), entered.clone()));
            assert!(
                start.elapsed() < Duration::from_millis(380),
                "round {round}: the queue moved on well before the deadline"
            );
            let names: Vec<_> = out
                .iter()
                .filter(|(_, u)| matches!(u, Unit::Done(7)))
                .map(|(k, _)| k.as_str())
                .collect();
            assert_eq!(names, ["a", "b", "c"], "round {round}");
            assert!(matches!(out[1].1, Unit::Late { .. }));
            let errors = run.into_errors();
            assert_eq!(errors.len(), usize::from(round == 0), "counted once");
        }
        assert_eq!(entered.load(Ordering::SeqCst), 1, "started once");
        assert_eq!(w.busy().len(), 1);
        release.store(true, Ordering::SeqCst);
        let until = Instant::now() + Duration::from_secs(5);
        while !w.busy().is_empty() {
            assert!(Instant::now() < until);
            std::thread::sleep(Duration::from_millis(5));
        }
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(5));
        let run = Run::new(&deadline, &w);
        let out = run.each(keys, 1, |_| 1);
        assert!(out.iter().all(|(_, u)| matches!(u, Unit::Done(1))));
    }

    #[test]
    fn lowering_the_deadline_cuts_a_running_collection_short() {
        let w = work();
        let release = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(AtomicUsize::new(0));
        let deadline = Arc::new(Deadline::new(Instant::now() + Duration::from_secs(30)));
        let lowerer = {
            let deadline = Arc::clone(&deadline);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                deadline.lower(Instant::now() + Duration::from_millis(200));
                deadline.lower(Instant::now() + Duration::from_secs(60)); // never later
            })
        };
        let run = Run::new(&deadline, &w);
        let start = Instant::now();
        let keys: Vec<String> = ["hang1", "hang2", "x"].map(String::from).to_vec();
        let out = run.each(keys, 3, hanging(release.clone(), entered));
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(150) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert!(matches!(out[0].1, Unit::Late { .. }));
        assert!(matches!(out[1].1, Unit::Late { .. }));
        assert!(matches!(out[2].1, Unit::Done(7)));
        assert_eq!(run.into_errors().len(), 2);
        lowerer.join().unwrap();
        release.store(true, Ordering::SeqCst);
    }

    #[test]
    fn a_panicking_unit_is_reported_alone() {
        let w = work();
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(5));
        let run = Run::new(&deadline, &w);
        let out = run.each(["a", "boom", "b"].map(String::from).to_vec(), 1, |k| {
            assert_ne!(k, "boom", "a unit bug");
            1
        });
        assert!(matches!(out[0].1, Unit::Done(1)));
        assert!(matches!(out[1].1, Unit::Panicked));
        assert!(matches!(out[2].1, Unit::Done(1)));
    }
}
