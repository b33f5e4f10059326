//! Property tests of the kmsg source's parsers: the lines of a `syslog(2)` buffer and the
//! tracking of new records across reads of a ring buffer that wraps. See
//! [`crate::strategies`] for the two kinds of property.

use proptest::prelude::*;

use crate::sources::kmsg::syslog::{Tracker, parse_line};
use crate::sources::kmsg::{patterns, syslog};
use crate::strategies::{config, text};

/// A record: its timestamp in microseconds (`None`: printk.time off) and message.
type Record = (Option<u64>, String);

/// One line as `record_print_text` prints it, newline included.
fn render(priority: u32, record: &Record, caller: Option<u32>) -> Vec<u8> {
    let mut out = format!("<{priority}>").into_bytes();
    if let Some(m) = record.0 {
        out.extend_from_slice(format!("[{:5}.{:06}]", m / 1_000_000, m % 1_000_000).as_bytes());
    }
    if let Some(pid) = caller {
        out.extend_from_slice(format!("[{:>6}]", format!("T{pid}")).as_bytes());
    }
    if record.0.is_some() || caller.is_some() {
        out.push(b' ');
    }
    out.extend_from_slice(record.1.as_bytes());
    out.push(b'\n');
    out
}

fn buffer(records: &[Record]) -> Vec<u8> {
    records.iter().flat_map(|r| render(3, r, None)).collect()
}

/// A message as printk stores it: no newline, and (so that printk.time off cannot make it
/// look like a timestamp or caller) not starting with `[`.
fn message() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["a", "b", "NVRM: Xid (PCI:0000:2b:00): 79, pid=1"])
            .prop_map(str::to_owned),
        "[^\n\\[][^\n]{0,30}",
    ]
}

/// What happens between two reads: records logged, with how far each one's timestamp is
/// from the one before (often 0: equal timestamps).
fn steps() -> impl Strategy<Value = Vec<Vec<(u64, String)>>> {
    prop::collection::vec(
        prop::collection::vec(
            (prop_oneof![Just(0u64), 0u64..3, 0u64..2_000_000], message()),
            0..8,
        ),
        1..12,
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn kmsg_parsers_never_panic(text in text(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let line = parse_line(text.as_bytes());
        prop_assert!(text.as_bytes().ends_with(line.message));
        let _ = parse_line(&bytes);
        let mut tracker = Tracker::new();
        let _ = tracker.poll(&bytes);
        let _ = tracker.poll(text.as_bytes());
        let _ = patterns::classify(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn a_printed_line_parses_back(
        priority in 0u32..192,
        micros in prop::option::of(0u64..1 << 50),
        caller in prop::option::of(1u32..4_194_304),
        message in message(),
    ) {
        let record = (micros, message.clone());
        let bytes = render(priority, &record, caller);
        let lines: Vec<_> = syslog::lines(&bytes).collect();
        prop_assert_eq!(lines.len(), 1);
        prop_assert_eq!(lines[0].priority, Some(priority));
        prop_assert_eq!(lines[0].micros, micros);
        prop_assert_eq!(lines[0].message, message.as_bytes());
    }

    /// A ring buffer of `capacity` records, read after each step: while each step logs fewer
    /// records than the buffer holds (the last one read is always still there), every read
    /// gives exactly the records logged since the one before, however the buffer wrapped and
    /// however many timestamps are equal. Records are unique by timestamp and message, as the
    /// kernel's are in practice.
    #[test]
    fn every_record_is_read_exactly_once(
        steps in steps(),
        capacity in 1usize..12,
        timed in any::<bool>(),
    ) {
        let mut tracker = Tracker::new();
        let mut ring: Vec<Record> = Vec::new();
        let mut clock = 1_000_000u64;
        let mut serial = 0u32;
        let mut first = true;
        for step in steps {
            let step: Vec<_> = step.into_iter().take(if first { usize::MAX } else { capacity - 1 }).collect();
            let mut logged = Vec::new();
            for (delta, message) in step {
                clock += delta;
                serial += 1;
                // Unique messages: without timestamps that is what lets a wrapped buffer be
                // told from a repeated record.
                let record = (timed.then_some(clock), format!("{message} #{serial}"));
                logged.push(record.clone());
                ring.push(record);
            }
            if ring.len() > capacity {
                let excess = ring.len() - capacity;
                ring.drain(..excess);
                if first {
                    logged.drain(..excess);
                }
            }
            first = false;
            let bytes = buffer(&ring);
            let poll = tracker.poll(&bytes);
            let got: Vec<String> = poll.new.iter().map(|l| String::from_utf8_lossy(l.message).into_owned()).collect();
            let want: Vec<String> = logged.iter().map(|r| r.1.clone()).collect();
            prop_assert_eq!(got, want);
            prop_assert!(!poll.gap);
        }
    }

    /// Without timestamps and without wrapping (the buffer holds everything), repeated
    /// messages are no problem: each read gives exactly what was logged since the last.
    #[test]
    fn printk_time_off_reads_every_record_once_while_the_buffer_holds_them(steps in steps()) {
        let mut tracker = Tracker::new();
        let mut ring: Vec<Record> = Vec::new();
        for step in steps {
            let logged: Vec<Record> = step.into_iter().map(|(_, m)| (None, m)).collect();
            ring.extend(logged.iter().cloned());
            let bytes = buffer(&ring);
            let poll = tracker.poll(&bytes);
            let got: Vec<String> = poll.new.iter().map(|l| String::from_utf8_lossy(l.message).into_owned()).collect();
            let want: Vec<String> = logged.into_iter().map(|r| r.1).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// When everything read before has scrolled out, every record left is new, once, and the
    /// read is a gap.
    #[test]
    fn a_buffer_wrapped_past_the_last_read_is_a_gap(
        before in prop::collection::vec(message(), 1..6),
        after in prop::collection::vec(message(), 1..6),
        timed in any::<bool>(),
    ) {
        let stamp = |i: usize| timed.then_some(1_000_000 + i as u64);
        let old: Vec<Record> = before.iter().enumerate().map(|(i, m)| (stamp(i), format!("old {m}"))).collect();
        let new: Vec<Record> = after.iter().enumerate().map(|(i, m)| (stamp(100 + i), format!("new {m}"))).collect();
        let mut tracker = Tracker::new();
        tracker.poll(&buffer(&old));
        let bytes = buffer(&new);
        let poll = tracker.poll(&bytes);
        prop_assert_eq!(poll.new.len(), new.len());
        prop_assert!(poll.gap);
        prop_assert!(tracker.poll(&bytes).new.is_empty());
    }
}
