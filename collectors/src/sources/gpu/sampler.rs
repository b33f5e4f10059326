//! PCIe traffic off the scrape path: a background sampler that reads each GPU's PCIe traffic
//! on its own cadence and publishes the last reading with its age; a scrape copies what was
//! published and makes no PCIe traffic call of its own (except the first reading of a GPU,
//! below).
//!
//! # What is read
//!
//! * **Byte counters** where the driver has them: NVML fields 197/198
//!   (`NVML_FI_DEV_PCIE_COUNT_TX_BYTES`/`RX_BYTES`; on the H200 of
//!   `shared/reference/h200-nvml/`, driver 580.159.04, they answer and move with the load;
//!   fields 185/186, which that reference's notes list with them, are
//!   `NVML_FI_DEV_POWER_AVERAGE`/`POWER_INSTANT` in mW). They are `unsigned int`: they
//!   wrap every 4 GiB, 68 ms at PCIe Gen5 x16 line rate. The sampler carries them into 64-bit
//!   totals ([`accumulate`]), which is exact as long as no more than 4 GiB pass between two
//!   reads. So the counters are read every [`COUNTER_SLOW`] while quiet, and as soon as a
//!   read shows traffic, at the period in which the link at its maximum generation and
//!   width cannot move 4 GiB ([`wrap_safe_period`]: 55 ms at Gen5 x16), until it has been
//!   quiet for [`HOT_HOLD`] ([`next_pace`]): a bursty job keeps the fast pace between its
//!   bursts. What this cannot see: more than 4 GiB in the one quiet period in which traffic
//!   starts after [`HOT_HOLD`] of quiet (over 4 GiB/s within a second); those whole wraps
//!   are lost and the total undercounts, never goes back. Reading faster than the link can
//!   wrap all the time would make that exact, at 18 reads a second per GPU when idle.
//! * **NVML's 20 ms throughput sample** (`nvmlDeviceGetPcieThroughput`, TX and RX, 21 ms
//!   and 0.9 ms of CPU each on the H200) on GPUs without the counters: at most every
//!   `--collector.gpu.pcie-throughput-interval` ([`DEFAULT_INTERVAL`]), and only once a
//!   scrape has read the previous sample. A 20 ms window says as much whenever it is taken,
//!   so a sample nobody reads is not taken: with scrapes further apart than the interval
//!   the sampler costs what the scrape's own two calls cost before (one pair per scrape),
//!   never more, and the scrape no longer waits 42 ms for them; the value a scrape exports
//!   was taken after the previous scrape.
//!
//! # Threads
//!
//! One sampler thread for all GPUs. Each round runs the GPUs that are due as units of
//! [`Run::each`] with a deadline of its own ([`SAMPLE_DEADLINE`]): the GPUs are read in
//! parallel on the shared worker pool, a GPU whose call hangs in the driver is reported late
//! (logged once by `run`, counted as one `timeout` error of the collector at the next
//! scrape), its worker is left to finish and it is not asked again until that call returns,
//! while the other GPUs keep their cadence. The sampler thread itself never calls NVML, so
//! nothing it holds waits on a wedged GPU. One thread per GPU would give the same isolation
//! with more threads and more wake-ups; `run` already gives it per unit.
//!
//! A GPU whose sampler unit is late is `timeout` for the scrapes too (they do not start a
//! second call that would hang beside it), exactly as when the hanging call was made by a
//! scrape. Conversely the sampler leaves alone a GPU that the last collection found lost,
//! timed out or failed ([`Sampler::forget`]); the first collection that reads it again takes
//! its first PCIe reading inline (`Sampler::fill`) and hands it to the sampler: so the
//! first scrape of every GPU has PCIe traffic, and a counter is re-based after a GPU reset
//! rather than read across it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::PcieUtilCounter;

use super::raw::{self, FieldCounter};
use super::types::Gpu;
use super::{Calls, SPEC};
use crate::error::{CollectError, ErrorKind};
use crate::run::{Deadline, Run, Work};

/// `--collector.gpu.pcie-throughput-interval` unless given.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// The shortest interval the option takes (other than 0, which turns the sampler off).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The longest time between two reads of the byte counters.
pub const COUNTER_SLOW: Duration = Duration::from_secs(1);

/// How old the last counter reading may be and still be exported (three missed reads and
/// a late round): a sampler that stopped must not make a link look quiet.
const COUNTER_STALE: Duration = Duration::from_secs(5);

/// The deadline of one sampling round: a GPU that has not answered after half of it is
/// late (`run`'s rule). The two throughput calls take 42 ms on a healthy H200.
pub const SAMPLE_DEADLINE: Duration = Duration::from_secs(2);

/// `NVML_FI_DEV_PCIE_COUNT_TX_BYTES` and `_RX_BYTES` (`nvml.h`).
const FI_PCIE_TX_BYTES: u32 = 197;
const FI_PCIE_RX_BYTES: u32 = 198;

/// How many sampler errors wait for the next collection at most; more are dropped.
const MAX_PENDING_ERRORS: usize = 256;

/// Parses `--collector.gpu.pcie-throughput-interval`: `0` (off) or a duration of at least
/// [`MIN_INTERVAL`] such as `5s`, `1500ms`, `1m`.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    parse_interval_or_off(
        text,
        "0 turns the PCIe sampler off",
        "each sample of a GPU without byte counters blocks 42 ms",
    )
}

/// Parses an interval option: `0` (`zero` says what it does) or a duration of at least
/// [`MIN_INTERVAL`] such as `5s`, `1500ms`, `1m` (`why_min` says why not shorter).
pub fn parse_interval_or_off(text: &str, zero: &str, why_min: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("{text:?} is not a duration such as 5s, 1500ms or 1m ({zero})");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit..];
        total += number * factor;
    }
    let interval = Duration::try_from_secs_f64(total).map_err(|_| bad())?;
    if interval.is_zero() {
        Ok(Duration::ZERO)
    } else if interval < MIN_INTERVAL {
        Err(format!(
            "{text:?} is shorter than {}s ({why_min}; {zero})",
            MIN_INTERVAL.as_secs()
        ))
    } else {
        Ok(interval)
    }
}

/// The longest time between two reads of a `bits`-bit byte counter in which the link, at
/// generation `generation` and `width` lanes, cannot move as many bytes as the counter
/// holds, a fifth kept back for timer slack; at most [`COUNTER_SLOW`]. An unknown
/// generation or width counts as the fastest (Gen6 x16).
pub fn wrap_safe_period(bits: u32, generation: Option<u32>, width: Option<u32>) -> Duration {
    if bits >= 64 {
        return COUNTER_SLOW;
    }
    // Bytes per second per lane and direction: the transfer rate less line encoding.
    let per_lane = match generation {
        Some(1) => 2.5e9 * 0.8 / 8.0,
        Some(2) => 5.0e9 * 0.8 / 8.0,
        Some(3) => 8.0e9 * 128.0 / 130.0 / 8.0,
        Some(4) => 16.0e9 * 128.0 / 130.0 / 8.0,
        Some(5) => 32.0e9 * 128.0 / 130.0 / 8.0,
        _ => 64.0e9 / 8.0,
    };
    let lanes = f64::from(width.filter(|w| *w > 0).unwrap_or(16));
    let span = (1u64 << bits) as f64;
    Duration::try_from_secs_f64(span / (per_lane * lanes) * 0.8)
        .unwrap_or(COUNTER_SLOW)
        .clamp(Duration::from_millis(5), COUNTER_SLOW)
}

/// How long the counters keep the fast pace after the last read that showed traffic.
pub const HOT_HOLD: Duration = Duration::from_secs(10);

/// How often the byte counters of a GPU are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pace {
    /// To the next read.
    pub period: Duration,
    /// Until when the fast pace holds (the last read that showed traffic, plus
    /// [`HOT_HOLD`]).
    pub hot_until: Option<Instant>,
}

/// The pace after a read at `now` of a `bits`-bit counter that moved by `delta` (the larger
/// direction) since the read before: to `floor` when it moved a sixty-fourth of its span or
/// more (traffic, or a wrap seen modulo the span), held there for [`HOT_HOLD`]; once quiet
/// that long, doubled per read up to `slow`.
pub fn next_pace(
    pace: Pace,
    delta: u64,
    bits: u32,
    floor: Duration,
    slow: Duration,
    now: Instant,
) -> Pace {
    let span = if bits >= 64 { u64::MAX } else { 1u64 << bits };
    let slow = slow.max(floor);
    if delta >= span / 64 {
        return Pace {
            period: floor,
            hot_until: Some(now + HOT_HOLD),
        };
    }
    let hot = pace.hot_until.is_some_and(|h| now < h);
    let period = if hot {
        pace.period
    } else {
        pace.period.saturating_mul(2)
    };
    Pace {
        period: period.clamp(floor, slow),
        hot_until: pace.hot_until.filter(|_| hot),
    }
}

/// Byte totals carried over the counters' wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// The counters as last read (TX, RX); `None` after the GPU was lost or unreadable, so
    /// that the next reading is a new base rather than a difference across a reset.
    pub raw: Option<[FieldCounter; 2]>,
    /// Bytes (TX, RX): the first reading, plus every difference since.
    pub total: [u64; 2],
}

/// Adds a new reading of the counters to `before`; returns the new totals and the larger
/// of the two differences.
pub fn accumulate(before: Option<Totals>, now: [FieldCounter; 2]) -> (Totals, u64) {
    let Some(before) = before else {
        return (
            Totals {
                raw: Some(now),
                total: [now[0].value, now[1].value],
            },
            0,
        );
    };
    let Some(raw) = before.raw else {
        return (
            Totals {
                raw: Some(now),
                total: before.total,
            },
            0,
        );
    };
    let mut total = before.total;
    let mut largest = 0;
    for i in 0..2 {
        let d = difference(raw[i], now[i]);
        total[i] = total[i].wrapping_add(d);
        largest = largest.max(d);
    }
    (
        Totals {
            raw: Some(now),
            total,
        },
        largest,
    )
}

/// How far a counter moved from `before` to `now`: modulo its span for a 32-bit counter;
/// a 64-bit one that went back was reset and counts from zero.
fn difference(before: FieldCounter, now: FieldCounter) -> u64 {
    if before.bits != now.bits {
        return 0;
    }
    if now.bits >= 64 {
        return if now.value >= before.value {
            now.value - before.value
        } else {
            now.value
        };
    }
    now.value.wrapping_sub(before.value) & ((1u64 << now.bits) - 1)
}

/// What a GPU's PCIe traffic is read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    /// Not read yet: the counters are tried first.
    #[default]
    Unknown,
    /// Fields 197/198.
    Counters,
    /// `nvmlDeviceGetPcieThroughput`.
    Throughput,
}

/// One reading.
#[derive(Debug, Clone, Copy)]
enum Reading {
    Counters([FieldCounter; 2]),
    /// KB/s, TX and RX.
    Throughput(u32, u32),
}

/// What the sampler keeps and publishes of one GPU.
#[derive(Debug, Default)]
struct Slot {
    /// Bumped by [`Sampler::forget`]: a reading begun before is dropped.
    generation: u64,
    /// Whether the sampler reads it (it has a first reading, and the last collection found
    /// it answering).
    live: bool,
    mode: Mode,
    /// When the sampler reads it next.
    next: Option<Instant>,
    /// Counters: the pace of reads (a zero period: not read yet), and the shortest period.
    pace: Pace,
    floor: Duration,
    /// Max PCIe generation and width, for the floor.
    link: (Option<u32>, Option<u32>),
    /// Published: the last throughput sample, the totals, and when they were read.
    throughput: Option<(u32, u32)>,
    totals: Option<Totals>,
    at: Option<Instant>,
    /// A scrape has read the last throughput sample: the next one may be taken.
    read: bool,
}

impl Slot {
    /// Whether a new reading is wanted once its time comes: always for the counters (they
    /// must not wrap unseen), for the throughput sample only once a scrape read the last.
    fn wanted(&self) -> bool {
        self.live && (self.mode == Mode::Counters || self.read)
    }

    /// Whether the sampler reads it at `now`.
    fn due(&self, now: Instant) -> bool {
        self.wanted() && self.next.is_some_and(|n| n <= now)
    }

    /// The time from one reading to the next; `interval` is the throughput sample's.
    fn period(&self, interval: Duration) -> Duration {
        match self.mode {
            Mode::Counters if !self.pace.period.is_zero() => self.pace.period,
            Mode::Counters => COUNTER_SLOW,
            _ => interval,
        }
    }
}

/// The PCIe sampler of all GPUs; see the module docs.
#[derive(Debug)]
pub struct Sampler {
    nvml: &'static Nvml,
    interval: Duration,
    slots: Vec<Mutex<Slot>>,
    work: Work,
    errors: Mutex<Vec<CollectError>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn key(index: u32) -> String {
    format!("gpu{index}")
}

fn index_of(key: &str) -> u32 {
    key.trim_start_matches("gpu").parse().unwrap_or(u32::MAX)
}

impl Sampler {
    /// A sampler of `count` GPUs with its thread started; `None` when `interval` is zero
    /// (off) or the thread cannot start (logged).
    pub fn start(nvml: &'static Nvml, count: u32, interval: Duration) -> Option<Arc<Sampler>> {
        if interval.is_zero() {
            return None;
        }
        let sampler = Arc::new(Sampler {
            nvml,
            interval,
            slots: (0..count).map(|_| Mutex::new(Slot::default())).collect(),
            work: Work::new(SPEC.name, None),
            errors: Mutex::new(Vec::new()),
        });
        let thread = Arc::clone(&sampler);
        match std::thread::Builder::new()
            .name("railscope-pcie".into())
            .spawn(move || thread.run())
        {
            Ok(_) => Some(sampler),
            Err(err) => {
                tracing::error!(collector = SPEC.name, error = %err, "Cannot start the PCIe sampler thread; PCIe traffic of GPUs is not exported.");
                None
            }
        }
    }

    /// GPUs whose sampler unit is late: a call on them hangs in the driver.
    pub fn busy(&self) -> HashSet<u32> {
        self.work
            .busy()
            .into_iter()
            .map(|(k, _)| index_of(&k))
            .collect()
    }

    /// The errors met since the last call (failed calls, and a unit that became late).
    pub fn take_errors(&self) -> Vec<CollectError> {
        std::mem::take(&mut *lock(&self.errors))
    }

    /// The GPU was lost, timed out or failed: no reading of it is published or taken until
    /// a collection reads it again; a reading under way is dropped; its totals are kept
    /// and its counters re-based at the next reading.
    pub fn forget(&self, index: u32) {
        let Some(slot) = self.slots.get(index as usize) else {
            return;
        };
        let mut s = lock(slot);
        s.generation = s.generation.wrapping_add(1);
        s.live = false;
        s.next = None;
        s.throughput = None;
        s.at = None;
        if let Some(t) = s.totals.as_mut() {
            t.raw = None;
        }
    }

    /// Puts the last published PCIe traffic of GPU `index` into `gpu`. A GPU the sampler
    /// does not read yet is read here, on the collection's unit (`calls` counts its
    /// failures), and handed to the sampler. `max_link` is its max PCIe generation and
    /// width.
    pub(crate) fn fill(
        &self,
        device: &Device<'_>,
        index: u32,
        gpu: &mut Gpu,
        calls: &mut Calls,
        max_link: (Option<u32>, Option<u32>),
    ) {
        let Some(slot) = self.slots.get(index as usize) else {
            return;
        };
        let (live, generation, mode) = {
            let mut s = lock(slot);
            s.link = max_link;
            (s.live, s.generation, s.mode)
        };
        if !live {
            let (mode, reading) = read(self.nvml, device, mode, calls);
            if calls.lost {
                return;
            }
            let now = Instant::now();
            let mut s = lock(slot);
            if s.generation != generation {
                return;
            }
            s.live = true;
            s.pace = Pace::default(); // the floor, once the counters' width is known
            self.commit(&mut s, mode, reading, now);
        }
        let now = Instant::now();
        let mut s = lock(slot);
        if !s.live {
            return;
        }
        s.read = true;
        match s.mode {
            // A counter the sampler stopped reading must not look like a quiet link.
            Mode::Counters
                if s.at
                    .is_some_and(|at| now.saturating_duration_since(at) <= COUNTER_STALE) =>
            {
                gpu.pcie_bytes = s.totals.map(|t| (t.total[0], t.total[1]));
            }
            Mode::Throughput => gpu.pcie_throughput_kbps = s.throughput,
            _ => {}
        }
    }

    /// Publishes `reading` (or its absence) taken at `now` into `s`, and schedules the next.
    fn commit(&self, s: &mut Slot, mode: Mode, reading: Option<Reading>, now: Instant) {
        s.mode = mode;
        match reading {
            Some(Reading::Throughput(tx, rx)) => {
                s.throughput = Some((tx, rx));
                s.at = Some(now);
                s.read = false;
            }
            Some(Reading::Counters(c)) => {
                let bits = c[0].bits.max(c[1].bits);
                s.floor = wrap_safe_period(bits, s.link.0, s.link.1);
                let (totals, delta) = accumulate(s.totals, c);
                s.pace = if s.pace.period.is_zero() {
                    Pace {
                        period: s.floor,
                        hot_until: None,
                    }
                } else {
                    next_pace(s.pace, delta, bits, s.floor, COUNTER_SLOW, now)
                };
                s.totals = Some(totals);
                s.at = Some(now);
            }
            // A failed throughput sample has no value now; a counter keeps its last.
            None => {
                s.throughput = None;
                s.read = false;
            }
        }
        s.next = Some(now + s.period(self.interval));
    }

    /// The sampler thread: runs the GPUs that are due, then sleeps until the next is.
    fn run(self: Arc<Self>) {
        loop {
            let now = Instant::now();
            let due = self.take_due(now);
            if !due.is_empty() {
                let deadline = Deadline::new(now + SAMPLE_DEADLINE);
                let run = Run::new(&deadline, &self.work);
                let me = Arc::clone(&self);
                let width = due.len();
                let keys = due.into_iter().map(key).collect();
                drop(run.each(keys, width, move |k| me.sample(index_of(k))));
                self.pend(run.into_errors());
            }
            // A sample waiting to be read wakes nobody; a scrape that reads it is seen at the
            // next wake, at most COUNTER_SLOW later.
            let wake = self
                .slots
                .iter()
                .filter_map(|s| {
                    let s = lock(s);
                    s.next.filter(|_| s.wanted())
                })
                .min()
                .unwrap_or(now + COUNTER_SLOW);
            let sleep = wake
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), COUNTER_SLOW);
            std::thread::sleep(sleep);
        }
    }

    /// The live GPUs due at `now` (a throughput sample only once the last was read), each
    /// scheduled one period on (a GPU whose unit is late is then reported late at once by
    /// `run` without a new call).
    fn take_due(&self, now: Instant) -> Vec<u32> {
        let mut due = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let mut s = lock(slot);
            if s.due(now) {
                s.next = Some(now + s.period(self.interval));
                due.push(i as u32);
            }
        }
        due
    }

    /// One reading of GPU `index`, on a worker of the pool.
    fn sample(&self, index: u32) {
        let Some(slot) = self.slots.get(index as usize) else {
            return;
        };
        let (live, generation, mode) = {
            let s = lock(slot);
            (s.live, s.generation, s.mode)
        };
        if !live {
            return;
        }
        let mut calls = Calls::default();
        let (mode, reading) = match self.nvml.device_by_index(index) {
            Ok(device) => read(self.nvml, &device, mode, &mut calls),
            Err(e) => {
                calls.ok::<()>("nvmlDeviceGetHandleByIndex", Err(e));
                (mode, None)
            }
        };
        let k = key(index);
        self.pend(
            calls
                .failures
                .iter()
                .map(|(call, detail)| {
                    CollectError::nvml(Some(&k), call, ErrorKind::Io, detail.clone())
                })
                .collect(),
        );
        if calls.lost {
            // The next collection finds it lost, and logs it.
            self.forget(index);
            return;
        }
        let mut s = lock(slot);
        if s.generation == generation {
            self.commit(&mut s, mode, reading, Instant::now());
        }
    }

    fn pend(&self, errors: Vec<CollectError>) {
        if errors.is_empty() {
            return;
        }
        let mut pending = lock(&self.errors);
        let room = MAX_PENDING_ERRORS.saturating_sub(pending.len());
        pending.extend(errors.into_iter().take(room));
    }
}

/// Reads GPU PCIe traffic the way `mode` says: the byte counters unless they are known to
/// be missing, else the two throughput samples. Returns the mode learnt.
fn read(
    nvml: &Nvml,
    device: &Device<'_>,
    mode: Mode,
    calls: &mut Calls,
) -> (Mode, Option<Reading>) {
    if mode != Mode::Throughput {
        let counters = raw::field_counters(
            nvml,
            device,
            &[(FI_PCIE_TX_BYTES, 0), (FI_PCIE_RX_BYTES, 0)],
        )
        .and_then(|v| match v.as_slice() {
            [Ok(tx), Ok(rx)] => Ok([*tx, *rx]),
            [Err(code), _] | [_, Err(code)] => Err(*code),
            _ => Err(999),
        });
        match counters {
            Ok(c) => return (Mode::Counters, Some(Reading::Counters(c))),
            // GPU_IS_LOST; or the counters worked before: a failure, not a missing feature.
            Err(code) if code == 15 || mode == Mode::Counters => {
                calls.code::<()>("nvmlDeviceGetFieldValues", Err(code));
                return (mode, None);
            }
            // NOT_SUPPORTED or any other answer the first time: no counters here.
            Err(_) => {}
        }
    }
    let tx = calls.ok(
        "nvmlDeviceGetPcieThroughput",
        device.pcie_throughput(PcieUtilCounter::Send),
    );
    let rx = calls.ok(
        "nvmlDeviceGetPcieThroughput",
        device.pcie_throughput(PcieUtilCounter::Receive),
    );
    (
        Mode::Throughput,
        tx.zip(rx).map(|(tx, rx)| Reading::Throughput(tx, rx)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c32(value: u64) -> FieldCounter {
        FieldCounter { value, bits: 32 }
    }

    #[test]
    fn the_interval_option() {
        assert_eq!(parse_interval("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_interval("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_interval("0"), Ok(Duration::ZERO));
        assert_eq!(parse_interval("0s"), Ok(Duration::ZERO));
        for bad in ["", "5", "s", "5 s", "-1s", "fast", "500ms", "1e3s"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            parse_interval("500ms")
                .unwrap_err()
                .contains("shorter than 1s")
        );
    }

    #[test]
    fn counters_are_carried_over_their_wraps() {
        let (t, d) = accumulate(None, [c32(100), c32(4_294_967_000)]);
        assert_eq!(
            (t.total, d),
            ([100, 4_294_967_000], 0),
            "starts at the reading"
        );
        // RX wraps: 296 bytes to the top, then 704 more.
        let (t, d) = accumulate(Some(t), [c32(1100), c32(704)]);
        assert_eq!(t.total, [1100, 4_294_967_000 + 1000]);
        assert_eq!(d, 1000);
        // A GPU reset (forget): the next reading is a new base; nothing goes back.
        let (t, d) = accumulate(Some(Totals { raw: None, ..t }), [c32(5), c32(7)]);
        assert_eq!((t.total, d), ([1100, 4_294_968_000], 0));
        let (t, _) = accumulate(Some(t), [c32(10), c32(7)]);
        assert_eq!(t.total, [1105, 4_294_968_000]);
    }

    #[test]
    fn a_64_bit_counter_that_goes_back_was_reset() {
        let c64 = |value| FieldCounter { value, bits: 64 };
        let (t, _) = accumulate(None, [c64(1 << 40), c64(10)]);
        let (t, d) = accumulate(Some(t), [c64(5), c64(20)]);
        assert_eq!(t.total, [(1 << 40) + 5, 20]);
        assert_eq!(d, 10);
    }

    #[test]
    fn the_counter_period_cannot_miss_a_wrap_at_line_rate() {
        let gen5x16 = wrap_safe_period(32, Some(5), Some(16));
        // 2^32 B at 63 GB/s is 68 ms; a fifth kept back.
        assert!(
            gen5x16 > Duration::from_millis(50) && gen5x16 < Duration::from_millis(60),
            "{gen5x16:?}"
        );
        assert!(wrap_safe_period(32, Some(4), Some(8)) > gen5x16 * 3);
        assert!(
            wrap_safe_period(32, None, None) < gen5x16,
            "unknown is fastest"
        );
        assert_eq!(wrap_safe_period(64, Some(5), Some(16)), COUNTER_SLOW);
        assert_eq!(wrap_safe_period(32, Some(1), Some(1)), COUNTER_SLOW);
    }

    #[test]
    fn a_throughput_sample_nobody_read_is_not_taken_again() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(60);
        let mut s = Slot {
            live: true,
            mode: Mode::Throughput,
            next: Some(t0 + DEFAULT_INTERVAL),
            throughput: Some((1, 2)),
            at: Some(t0),
            ..Slot::default()
        };
        assert!(!s.due(later), "not read by any scrape");
        s.read = true;
        assert!(
            !s.due(t0 + Duration::from_secs(1)),
            "read, but within the interval"
        );
        assert!(s.due(t0 + DEFAULT_INTERVAL));
        // Counters are read on their cadence, scraped or not.
        s.mode = Mode::Counters;
        s.read = false;
        assert!(s.due(later));
        // A GPU that is not live (lost, timed out, not read yet) is never due.
        s.live = false;
        assert!(!s.due(later));
    }

    #[test]
    fn the_counter_pace_follows_the_traffic() {
        let floor = Duration::from_millis(54);
        let slow = COUNTER_SLOW;
        let span = 1u64 << 32;
        let t0 = Instant::now();
        let quiet = Pace {
            period: slow,
            hot_until: None,
        };
        // Traffic (or a wrap seen modulo the span): straight to the floor.
        for delta in [span / 64, span / 16, span - 1] {
            let p = next_pace(quiet, delta, 32, floor, slow, t0);
            assert_eq!(p.period, floor, "{delta}");
            assert_eq!(p.hot_until, Some(t0 + HOT_HOLD));
        }
        // Held at the floor between bursts, for HOT_HOLD after the last one.
        let mut p = next_pace(quiet, span / 8, 32, floor, slow, t0);
        let mut t = t0;
        while t < t0 + HOT_HOLD {
            p = next_pace(p, 1_000, 32, floor, slow, t);
            assert_eq!(p.period, floor, "{:?} after the burst", t - t0);
            t += p.period;
        }
        // Then back off, doubling, to the slow period.
        let mut steps = 0;
        while p.period < slow {
            p = next_pace(p, 1_000, 32, floor, slow, t);
            t += p.period;
            steps += 1;
        }
        assert_eq!(p, quiet);
        assert!(steps <= 5, "{steps}");
        // A 64-bit counter never needs the floor.
        let wide = wrap_safe_period(64, Some(5), Some(16));
        assert_eq!(next_pace(quiet, 1 << 40, 64, wide, slow, t0).period, slow);
    }
}
