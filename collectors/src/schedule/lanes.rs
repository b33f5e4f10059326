//! Collection lanes: the threads that run sources' collections, a fixed number at a time.
//!
//! A source's thread mostly waits for the workers that read its devices
//! ([`crate::run`]), so running every source at once buys no speed on a node
//! that scrapes in milliseconds, and every thread that allocates keeps an allocator arena
//! of its own: eight sources on eight threads cost about 5 MB more resident memory than
//! the same sources on two. So jobs queue, and `width` lanes take them in order; a lane
//! that finishes one takes the next at once, without a round trip through the runtime.
//!
//! A job its caller gives up on while it runs ([`Lanes::give_up`]: it is slow, or its
//! collection's deadline has passed) no longer counts toward the width: a fresh lane starts
//! if jobs are waiting, so a slow or stuck source never holds the others back. When the job
//! returns, its thread ends if the lanes are complete without it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The target of the lanes' log lines, as the agent has always logged them.
const LOG_TARGET: &str = "railscope::lanes";

/// How long an idle lane waits for a job before it ends.
const IDLE: Duration = Duration::from_secs(120);

type Job = Box<dyn FnOnce() + Send>;

/// The lanes; cheap to share behind an `Arc`.
pub(crate) struct Lanes {
    width: usize,
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(Job, Ticket)>,
    /// Lane threads alive, stuck ones included.
    threads: usize,
    /// Lanes waiting for a job.
    idle: usize,
    /// Wake-ups sent to idle lanes and not yet taken: an idle lane already woken for one
    /// job is not there for the next.
    woken: usize,
    /// Lanes whose job was given up and has not returned.
    stuck: usize,
}

impl State {
    fn working(&self) -> usize {
        self.threads - self.stuck
    }
}

const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
const GIVEN_UP: u8 = 3;

/// One job's standing (queued, running, done or given up) and when it started to run.
#[derive(Clone)]
pub(crate) struct Ticket(Arc<Standing>);

struct Standing {
    state: AtomicU8,
    started: OnceLock<Instant>,
}

impl Ticket {
    fn queued() -> Self {
        Ticket(Arc::new(Standing {
            state: AtomicU8::new(QUEUED),
            started: OnceLock::new(),
        }))
    }

    fn state(&self) -> &AtomicU8 {
        &self.0.state
    }

    /// How long its job has been running, while it runs and counts toward the width.
    pub(crate) fn running_for(&self) -> Option<Duration> {
        if self.state().load(Ordering::Acquire) != RUNNING {
            return None;
        }
        self.0.started.get().map(Instant::elapsed)
    }

    /// Whether its job was given up while running.
    pub(crate) fn given_up(&self) -> bool {
        self.state().load(Ordering::Acquire) == GIVEN_UP
    }
}

impl Lanes {
    /// Lanes that run `width` jobs at a time (at least one).
    pub(crate) fn new(width: usize) -> Arc<Self> {
        Arc::new(Lanes {
            width: width.max(1),
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
        })
    }

    /// Queues `job`; the ticket tells the lanes when its caller gives up on it.
    pub(crate) fn submit(self: &Arc<Self>, job: impl FnOnce() + Send + 'static) -> Ticket {
        let ticket = Ticket::queued();
        let mut state = lock(&self.state);
        state.queue.push_back((Box::new(job), ticket.clone()));
        self.wake(state);
        ticket
    }

    /// Gives up on the job of `ticket` if it is running: its lane stops counting toward the
    /// width. A job still queued stays queued (its caller decides what running late means).
    pub(crate) fn give_up(self: &Arc<Self>, ticket: &Ticket) {
        if ticket
            .state()
            .compare_exchange(RUNNING, GIVEN_UP, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let mut state = lock(&self.state);
            state.stuck += 1;
            self.wake(state);
        }
    }

    /// Lanes, alive and not stuck, for diagnostics and tests.
    #[cfg(test)]
    fn threads(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.threads, state.stuck)
    }

    /// Hands the queue's next job to an idle lane, or starts a lane while fewer than
    /// `width` are working.
    fn wake(self: &Arc<Self>, mut state: MutexGuard<'_, State>) {
        if state.queue.is_empty() {
            return;
        }
        if state.idle > state.woken {
            state.woken += 1;
            drop(state);
            self.ready.notify_one();
            return;
        }
        if state.working() >= self.width {
            return;
        }
        state.threads += 1;
        drop(state);
        let lanes = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("railscope-collect".into())
            .spawn(move || lanes.lane());
        if let Err(err) = spawned {
            lock(&self.state).threads -= 1;
            tracing::error!(target: LOG_TARGET, error = %err, "Failed to start a collection thread.");
        }
    }

    fn lane(self: Arc<Self>) {
        let mut state = lock(&self.state);
        loop {
            let Some((job, ticket)) = state.queue.pop_front() else {
                state.idle += 1;
                let (next, timeout) = self
                    .ready
                    .wait_timeout(state, IDLE)
                    .unwrap_or_else(|e| e.into_inner());
                state = next;
                state.idle -= 1;
                // Whichever lane wakes takes the next job, woken for it or not.
                state.woken = state.woken.saturating_sub(1);
                if timeout.timed_out() && state.queue.is_empty() {
                    state.threads -= 1;
                    return;
                }
                continue;
            };
            drop(state);
            let _ = ticket.0.started.set(Instant::now());
            ticket.state().store(RUNNING, Ordering::Release);
            // A job catches its own panics; one that escapes ends only this job.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            let given_up = ticket
                .state()
                .compare_exchange(RUNNING, DONE, Ordering::AcqRel, Ordering::Acquire)
                .is_err();
            state = lock(&self.state);
            if given_up {
                state.stuck -= 1;
                // Replaced while it was stuck: the lanes are complete without this one.
                if state.working() > self.width {
                    state.threads -= 1;
                    return;
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
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::time::Instant;

    /// Jobs run `width` at a time, on no more than `width` threads.
    #[test]
    fn jobs_run_width_at_a_time_on_width_threads() {
        let lanes = Lanes::new(2);
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let names = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let (tx, rx) = mpsc::channel();
        for _ in 0..12 {
            let (now, most, names, tx) = (
                Arc::clone(&now),
                Arc::clone(&most),
                Arc::clone(&names),
                tx.clone(),
            );
            lanes.submit(move || {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                lock(&names).insert(std::thread::current().id());
                std::thread::sleep(Duration::from_millis(5));
                now.fetch_sub(1, Ordering::SeqCst);
                tx.send(()).unwrap();
            });
        }
        for _ in 0..12 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(lock(&names).len(), 2);
        assert_eq!(lanes.threads(), (2, 0));
    }

    /// A burst of jobs on one idle lane of two: the idle lane is woken for the first job
    /// and a second lane starts for the next, so two run at once (each job waits for the
    /// other: with one lane they would never finish).
    #[test]
    fn a_burst_on_one_idle_lane_starts_the_second() {
        let lanes = Lanes::new(2);
        let (tx, rx) = mpsc::channel();
        lanes.submit(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let start = Instant::now();
        while lanes.threads() != (1, 0) || lock(&lanes.state).idle != 1 {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(1));
        }
        let both = Arc::new(std::sync::Barrier::new(2));
        let (tx, rx) = mpsc::channel();
        for _ in 0..2 {
            let (both, tx) = (Arc::clone(&both), tx.clone());
            lanes.submit(move || {
                both.wait();
                tx.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert_eq!(lanes.threads(), (2, 0));
    }

    /// A job given up no longer holds a lane: the queue goes on; when it returns, its
    /// thread ends.
    #[test]
    fn a_stuck_job_given_up_holds_no_lane() {
        let lanes = Lanes::new(1);
        let (release, stuck_waits) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel();
        let stuck = lanes.submit(move || {
            started_tx.send(()).unwrap();
            stuck_waits.recv().unwrap();
        });
        started.recv_timeout(Duration::from_secs(10)).unwrap();
        let (tx, rx) = mpsc::channel();
        lanes.submit(move || tx.send(()).unwrap());
        // One lane, busy: the second job waits.
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        lanes.give_up(&stuck);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(lanes.threads(), (2, 1));
        release.send(()).unwrap();
        let start = Instant::now();
        while lanes.threads() != (1, 0) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                lanes.threads()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Giving up a job that is done changes nothing.
        lanes.give_up(&stuck);
        assert_eq!(lanes.threads(), (1, 0));
    }

    /// A job that panics ends, and its lane goes on with the next job.
    #[test]
    fn a_panicking_job_costs_only_itself() {
        let lanes = Lanes::new(1);
        lanes.submit(|| panic!("a job that panics"));
        let (tx, rx) = mpsc::channel();
        lanes.submit(move || tx.send(std::thread::current().id()).unwrap());
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(lanes.threads(), (1, 0));
    }
}
