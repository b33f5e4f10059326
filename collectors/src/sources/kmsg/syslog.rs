//! The kernel log as `syslog(2)` gives it: parsing a `SYSLOG_ACTION_READ_ALL` buffer, and
//! finding the records in it that an earlier read did not have.
//!
//! `SYSLOG_ACTION_READ_ALL` copies the newest records of the ring buffer that fit, oldest
//! first, without consuming them; each read is the whole buffer again. kernel/printk/printk.c
//! (`syslog_print_all`, `record_print_text`, `info_print_prefix`) prints each record as
//!
//! ```text
//! <prio>[sssss.uuuuuu][cccccc] message\n
//! ```
//!
//! * `<prio>`: `(facility << 3) | level` in decimal (`print_syslog`), always there;
//! * `[%5lu.%06lu]`: the record's timestamp (seconds since boot, padded with spaces to five
//!   digits, and microseconds), only while `printk.time` is on (`print_time`; the parameter
//!   is read once per `READ_ALL`, so one buffer has one format);
//! * `[%6s]`: the caller, `T<pid>` or `C<cpu>`, only in kernels built with
//!   `CONFIG_PRINTK_CALLER`;
//! * one space after the timestamp or the caller when either is printed, none after `<prio>`
//!   alone.
//!
//! A record whose text holds newlines is printed as several lines, each with the same
//! prefix. The record's dictionary (`SUBSYSTEM=`, `DEVICE=`), which `/dev/kmsg` prints as
//! continuation lines, is not printed. A read returns whole records only, and the buffer
//! ends with a newline; a last line without one (a shorter buffer than the kernel filled) is
//! left for the next read.
//!
//! The timestamp is `ts_nsec / 1000`, the same microseconds `/dev/kmsg` prints in its
//! header, so a record read either way gives the same time.
//!
//! [`Tracker`] finds the new lines of each read; see its docs.

use std::hash::{DefaultHasher, Hash, Hasher};

/// One line of a `SYSLOG_ACTION_READ_ALL` buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// `(facility << 3) | level`; `None` for a line without the `<prio>` prefix.
    pub priority: Option<u32>,
    /// The record's timestamp in microseconds since boot; `None` while `printk.time` is off.
    pub micros: Option<u64>,
    /// The message text, prefix removed, as bytes (the kernel log need not be UTF-8).
    pub message: &'a [u8],
}

/// Parses one line (without its newline).
pub fn parse_line(line: &[u8]) -> Line<'_> {
    let (priority, rest) = match priority(line) {
        Some((p, rest)) => (Some(p), rest),
        None => (None, line),
    };
    let (micros, rest) = match timestamp(rest) {
        Some((m, rest)) => (Some(m), rest),
        None => (None, rest),
    };
    let (caller, rest) = match caller(rest) {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let message = if micros.is_some() || caller {
        rest.strip_prefix(b" ").unwrap_or(rest)
    } else {
        rest
    };
    Line {
        priority,
        micros,
        message,
    }
}

/// The complete lines of `buffer`: every line that ends with a newline, empty ones left out.
pub fn lines(buffer: &[u8]) -> impl Iterator<Item = Line<'_>> {
    let complete = buffer
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    buffer[..complete]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(parse_line)
}

/// `<digits>` at the start of `text`.
fn priority(text: &[u8]) -> Option<(u32, &[u8])> {
    let rest = text.strip_prefix(b"<")?;
    let end = rest.iter().position(|&b| b == b'>')?;
    let value = decimal(&rest[..end])?;
    Some((u32::try_from(value).ok()?, &rest[end + 1..]))
}

/// `[%5lu.%06lu]` at the start of `text`, in microseconds.
fn timestamp(text: &[u8]) -> Option<(u64, &[u8])> {
    let rest = text.strip_prefix(b"[")?;
    let end = rest.iter().position(|&b| b == b']')?;
    let inside = &rest[..end];
    let digits = &inside[inside.iter().position(|&b| b != b' ')?..];
    let dot = digits.iter().position(|&b| b == b'.')?;
    let (seconds, micros) = (&digits[..dot], &digits[dot + 1..]);
    if micros.len() != 6 {
        return None;
    }
    let value = decimal(seconds)?
        .checked_mul(1_000_000)?
        .checked_add(decimal(micros)?)?;
    Some((value, &rest[end + 1..]))
}

/// `[%6s]` of `T<pid>` or `C<cpu>` at the start of `text`: what follows it.
fn caller(text: &[u8]) -> Option<&[u8]> {
    let rest = text.strip_prefix(b"[")?;
    let end = rest.iter().position(|&b| b == b']')?;
    let inside = &rest[..end];
    let id = &inside[inside.iter().position(|&b| b != b' ')?..];
    let (kind, number) = id.split_first()?;
    (matches!(kind, b'T' | b'C') && decimal(number).is_some()).then_some(&rest[end + 1..])
}

/// Decimal digits only (at least one) as a number.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// What identifies a line between reads: its timestamp and a hash of its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    micros: Option<u64>,
    text: u64,
}

impl Key {
    fn of(line: &Line<'_>) -> Key {
        let mut hasher = DefaultHasher::new();
        line.message.hash(&mut hasher);
        Key {
            micros: line.micros,
            text: hasher.finish(),
        }
    }
}

/// What one read brought: its new lines, oldest first, and whether records may have been
/// lost before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll<'a> {
    /// Lines no earlier read had.
    pub new: Vec<Line<'a>>,
    /// The last line of the read before had left the buffer: it wrapped (or was cleared
    /// with `dmesg -C`) between the two reads, so records logged in between may be lost.
    pub gap: bool,
}

/// Finds the new lines of each `SYSLOG_ACTION_READ_ALL` buffer, given every buffer in turn.
///
/// The ring buffer is a window that only moves forward: each read is a suffix of what was
/// there at the read before, then the records logged since. So the lines already seen are
/// the longest start of the new buffer that is also an end of the last one (compared by
/// timestamp and message, found in linear time with the Knuth–Morris–Pratt failure
/// function), and the new ones are those after it. Identical messages with equal
/// timestamps are told apart by their place in that sequence, so none is counted twice or
/// lost.
///
/// * The one case this cannot tell apart: the buffer wraps between two reads and a new
///   record repeats the last ones seen exactly, message and microsecond alike; it is taken
///   for one already counted. The kernel stamps records in nanoseconds and prints
///   microseconds, so this needs the same message twice within a microsecond.
/// * The first read: every line is new (the boot's backlog, as the device path counts it).
/// * Nothing of the last read is left (the buffer wrapped past it, or was cleared): every
///   line with a later timestamp than the last line seen, or the same timestamp and a
///   message not seen at it, is new, and the read is a [`Poll::gap`]. Without timestamps
///   every line is new then.
/// * `printk.time` off: the same comparison on messages alone. While the buffer has not
///   wrapped past the last read this is exact; once it has, a line identical to the one it
///   replaced cannot be told from it, so new lines that repeat the last ones seen exactly
///   may go uncounted. No line is counted twice while the last read's lines are still there.
/// * `printk.time` switched between two reads: the lines are compared by message alone; if
///   no start of the new buffer ends the old one (switching it off lets more, shorter lines
///   fit, so the window reaches back), the new lines are those after the last occurrence of
///   the last message seen.
#[derive(Debug, Default)]
pub struct Tracker {
    /// The keys of the last read's lines; `None` before the first read.
    seen: Option<Vec<Key>>,
}

impl Tracker {
    /// A tracker that has read nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The new lines of `buffer`, the whole of the latest `SYSLOG_ACTION_READ_ALL`.
    pub fn poll<'a>(&mut self, buffer: &'a [u8]) -> Poll<'a> {
        let lines: Vec<Line<'a>> = lines(buffer).collect();
        let keys: Vec<Key> = lines.iter().map(Key::of).collect();
        let poll = match self.seen.as_deref() {
            None => Poll {
                new: lines,
                gap: false,
            },
            Some(seen) => resume(seen, &keys, lines),
        };
        self.seen = Some(keys);
        poll
    }
}

fn resume<'a>(seen: &[Key], now: &[Key], lines: Vec<Line<'a>>) -> Poll<'a> {
    let (Some(last), Some(first)) = (seen.last(), now.first()) else {
        return Poll {
            new: lines,
            gap: false,
        };
    };
    let from = |at: usize, lines: Vec<Line<'a>>| Poll {
        new: lines.into_iter().skip(at).collect(),
        gap: false,
    };
    if last.micros.is_some() == first.micros.is_some() {
        // One format: compare timestamps and messages.
        if now.len() >= seen.len() && now[..seen.len()] == *seen {
            return from(seen.len(), lines);
        }
        let at = overlap(seen, now);
        if at > 0 {
            return from(at, lines);
        }
        let Some(after) = last.micros else {
            return Poll {
                new: lines,
                gap: true,
            };
        };
        // Nothing of the last read is left: what is later than its last line is new.
        let at_last: Vec<u64> = seen
            .iter()
            .filter(|k| k.micros == Some(after))
            .map(|k| k.text)
            .collect();
        let mut matched = vec![false; at_last.len()];
        let new = lines
            .into_iter()
            .zip(now)
            .filter(|(_, key)| match key.micros {
                Some(m) if m > after => true,
                Some(m) if m == after => {
                    // Seen at that time already, once for each time it was seen.
                    match (0..at_last.len()).find(|&i| !matched[i] && at_last[i] == key.text) {
                        Some(i) => {
                            matched[i] = true;
                            false
                        }
                        None => true,
                    }
                }
                _ => false,
            })
            .map(|(line, _)| line)
            .collect();
        return Poll { new, gap: true };
    }
    // printk.time was switched between the reads: compare messages alone.
    let texts = |keys: &[Key]| keys.iter().map(|k| k.text).collect::<Vec<_>>();
    let (seen_texts, now_texts) = (texts(seen), texts(now));
    let at = overlap(&seen_texts, &now_texts);
    if at > 0 {
        return from(at, lines);
    }
    match now_texts.iter().rposition(|&t| t == last.text) {
        Some(i) => from(i + 1, lines),
        None => Poll {
            new: lines,
            gap: true,
        },
    }
}

/// The length of the longest start of `now` that is also an end of `seen`.
fn overlap<T: PartialEq>(seen: &[T], now: &[T]) -> usize {
    if now.is_empty() {
        return 0;
    }
    // fail[i]: the longest proper start of now[..=i] that is also an end of it.
    let mut fail = vec![0usize; now.len()];
    let mut k = 0;
    for i in 1..now.len() {
        while k > 0 && now[i] != now[k] {
            k = fail[k - 1];
        }
        if now[i] == now[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut q = 0;
    for x in seen {
        while q > 0 && (q == now.len() || *x != now[q]) {
            q = fail[q - 1];
        }
        if *x == now[q] {
            q += 1;
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A READ_ALL buffer of `(micros, message)` records as the kernel prints them with
    /// printk.time on (`None`: off).
    fn buffer(records: &[(Option<u64>, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (micros, message) in records {
            out.extend_from_slice(b"<3>");
            if let Some(m) = micros {
                out.extend_from_slice(
                    format!("[{:5}.{:06}] ", m / 1_000_000, m % 1_000_000).as_bytes(),
                );
            }
            out.extend_from_slice(message.as_bytes());
            out.push(b'\n');
        }
        out
    }

    fn timed(records: &[(u64, &str)]) -> Vec<u8> {
        let records: Vec<(Option<u64>, &str)> =
            records.iter().map(|&(m, t)| (Some(m), t)).collect();
        buffer(&records)
    }

    fn untimed(records: &[&str]) -> Vec<u8> {
        let records: Vec<(Option<u64>, &str)> = records.iter().map(|&t| (None, t)).collect();
        buffer(&records)
    }

    /// The new messages of `buffer` and whether it was a gap.
    fn read(tracker: &mut Tracker, buffer: Vec<u8>) -> (Vec<String>, bool) {
        let poll = tracker.poll(&buffer);
        (messages(&poll), poll.gap)
    }

    fn messages(poll: &Poll<'_>) -> Vec<String> {
        poll.new
            .iter()
            .map(|l| String::from_utf8_lossy(l.message).into_owned())
            .collect()
    }

    #[test]
    fn the_kernels_line_formats() {
        assert_eq!(
            parse_line(b"<6>[    0.000000] Linux version 6.1.0"),
            Line {
                priority: Some(6),
                micros: Some(0),
                message: b"Linux version 6.1.0"
            }
        );
        assert_eq!(
            parse_line(b"<4>[12345.678901] NVRM: Xid (PCI:0000:2b:00): 79, pid=1"),
            Line {
                priority: Some(4),
                micros: Some(12_345_678_901),
                message: b"NVRM: Xid (PCI:0000:2b:00): 79, pid=1"
            }
        );
        // More than five digits of seconds (over 27 hours of uptime) are not padded.
        assert_eq!(
            parse_line(b"<11>[1234567.000001] x").micros,
            Some(1_234_567_000_001)
        );
        // CONFIG_PRINTK_CALLER: the caller after the time, or alone with printk.time off.
        let with_caller = parse_line(b"<6>[    1.500000][    T1] Run /init as init process");
        assert_eq!(
            (with_caller.micros, with_caller.message),
            (Some(1_500_000), &b"Run /init as init process"[..])
        );
        let caller_only = parse_line(b"<6>[  C12] mlx5_core 0000:18:00.0: x");
        assert_eq!(
            (caller_only.micros, caller_only.message),
            (None, &b"mlx5_core 0000:18:00.0: x"[..])
        );
        // printk.time off: the message follows the priority directly, brackets and all.
        assert_eq!(
            parse_line(b"<6>[drm] Initialized"),
            Line {
                priority: Some(6),
                micros: None,
                message: b"[drm] Initialized"
            }
        );
        assert_eq!(
            parse_line(b"no prefix").message,
            b"no prefix",
            "a line without <prio> is all message"
        );
        assert_eq!(parse_line(b"<6>[ 1.5] x").micros, None, "not %06lu");
        assert_eq!(parse_line(b"<99999999999>x").priority, None);
    }

    #[test]
    fn a_truncated_last_line_waits_for_the_next_read() {
        let mut tracker = Tracker::new();
        let mut first = timed(&[(1, "a"), (2, "b")]);
        first.extend_from_slice(b"<3>[    0.000003] c cut sh");
        assert_eq!(messages(&tracker.poll(&first)), ["a", "b"]);
        let second = timed(&[(1, "a"), (2, "b"), (3, "c cut short")]);
        assert_eq!(messages(&tracker.poll(&second)), ["c cut short"]);
    }

    #[test]
    fn the_first_read_is_the_backlog_and_appended_records_are_new_once() {
        let mut tracker = Tracker::new();
        let one = timed(&[(10, "a"), (20, "b")]);
        let poll = tracker.poll(&one);
        assert_eq!(
            (messages(&poll), poll.gap),
            (vec!["a".into(), "b".into()], false)
        );
        assert!(tracker.poll(&one).new.is_empty(), "the same buffer again");
        let two = timed(&[(10, "a"), (20, "b"), (30, "c"), (40, "d")]);
        assert_eq!(messages(&tracker.poll(&two)), ["c", "d"]);
        assert!(tracker.poll(&two).new.is_empty());
    }

    #[test]
    fn equal_timestamps_and_repeated_messages_are_each_counted_once() {
        let mut tracker = Tracker::new();
        let x2 = read(&mut tracker, timed(&[(5, "x"), (5, "x")]));
        assert_eq!(x2, (vec!["x".into(), "x".into()], false));
        // A third identical record with the same timestamp, and another message at it.
        let more = read(
            &mut tracker,
            timed(&[(5, "x"), (5, "x"), (5, "x"), (5, "y")]),
        );
        assert_eq!(more.0, ["x", "y"]);
        // Identical messages, new timestamps.
        let later = read(
            &mut tracker,
            timed(&[(5, "x"), (5, "x"), (5, "x"), (5, "y"), (6, "x"), (7, "x")]),
        );
        assert_eq!(later.0, ["x", "x"]);
    }

    #[test]
    fn a_wrapped_buffer_keeps_what_is_left_and_counts_what_is_new() {
        let mut tracker = Tracker::new();
        read(&mut tracker, timed(&[(1, "a"), (2, "b"), (3, "c")]));
        // The oldest two scrolled out, two are new; the last seen is still there.
        let poll = read(&mut tracker, timed(&[(3, "c"), (4, "d"), (5, "e")]));
        assert_eq!(poll, (vec!["d".into(), "e".into()], false));
        // Everything seen scrolled out: every later record is new, and that is a gap.
        let poll = read(&mut tracker, timed(&[(7, "g"), (8, "h")]));
        assert_eq!(poll, (vec!["g".into(), "h".into()], true));
        // The oldest left has the last seen one's time: told apart by message.
        read(&mut tracker, timed(&[(8, "h"), (9, "i"), (9, "j")]));
        let poll = read(&mut tracker, timed(&[(9, "j"), (9, "k")]));
        assert_eq!(poll, (vec!["k".into()], false));
        let poll = read(&mut tracker, timed(&[(9, "k"), (9, "k2"), (10, "l")]));
        assert_eq!(poll, (vec!["k2".into(), "l".into()], false));
        // Scrolled out, and the first left has the last seen time but another message.
        let poll = read(&mut tracker, timed(&[(10, "l2"), (11, "m")]));
        assert_eq!(poll, (vec!["l2".into(), "m".into()], true));
        // Scrolled out, the records at the last seen time are those already read, and a
        // record logged before them (another CPU's clock) is not new.
        read(&mut tracker, timed(&[(11, "m"), (12, "n"), (12, "o")]));
        let poll = read(
            &mut tracker,
            timed(&[(11, "late"), (12, "o"), (12, "n"), (13, "p")]),
        );
        assert_eq!(poll, (vec!["p".into()], true));
    }

    #[test]
    fn a_cleared_buffer_then_new_records() {
        let mut tracker = Tracker::new();
        read(&mut tracker, timed(&[(1, "a"), (2, "b")]));
        assert_eq!(read(&mut tracker, Vec::new()), (vec![], false));
        let poll = read(&mut tracker, timed(&[(3, "c")]));
        assert_eq!(poll, (vec!["c".into()], false));
    }

    #[test]
    fn printk_time_off_matches_on_the_overlap_of_messages() {
        let mut tracker = Tracker::new();
        let first = read(&mut tracker, untimed(&["a", "b", "b"]));
        assert_eq!(first.0, ["a", "b", "b"]);
        // Appended, repeating the last lines: the old buffer is still all there.
        let poll = read(&mut tracker, untimed(&["a", "b", "b", "b", "b"]));
        assert_eq!(poll, (vec!["b".into(), "b".into()], false));
        // Wrapped by two, two new.
        let poll = read(&mut tracker, untimed(&["b", "b", "b", "c", "d"]));
        assert_eq!(poll, (vec!["c".into(), "d".into()], false));
        // Wrapped past everything seen: all new, a gap.
        let poll = read(&mut tracker, untimed(&["e", "f"]));
        assert_eq!(poll, (vec!["e".into(), "f".into()], true));
        // Wrapped by one, one new record that repeats an older one.
        read(&mut tracker, untimed(&["e", "f", "e"]));
        let poll = read(&mut tracker, untimed(&["f", "e", "f"]));
        assert_eq!(poll, (vec!["f".into()], false));
        // The limit: a buffer of one message repeated, wrapped by one with one more of it,
        // cannot be told from a buffer unchanged.
        let mut tracker = Tracker::new();
        read(&mut tracker, untimed(&["x", "x"]));
        assert_eq!(read(&mut tracker, untimed(&["x", "x"])), (vec![], false));
    }

    #[test]
    fn printk_time_switched_between_reads_counts_nothing_twice() {
        let mut tracker = Tracker::new();
        read(&mut tracker, timed(&[(1, "a"), (2, "b")]));
        // Off: more of the older records fit, the window reaches back before "a".
        let poll = read(&mut tracker, untimed(&["older", "a", "b", "c"]));
        assert_eq!(poll.0, ["c"]);
        // On again, "d" new.
        let poll = read(&mut tracker, timed(&[(2, "b"), (3, "c"), (4, "d")]));
        assert_eq!(poll.0, ["d"]);
    }

    #[test]
    fn non_utf8_bytes_are_kept_as_bytes() {
        let mut tracker = Tracker::new();
        let mut buf = b"<4>[    1.000000] caf\xe9 \xff\xfe\n".to_vec();
        let poll = tracker.poll(&buf);
        assert_eq!(poll.new[0].message, b"caf\xe9 \xff\xfe");
        buf.extend_from_slice(b"<4>[    1.000000] caf\xe9 \xff\xff\n");
        assert_eq!(tracker.poll(&buf).new[0].message, b"caf\xe9 \xff\xff");
    }

    #[test]
    fn overlap_is_the_longest_start_that_ends_the_last_read() {
        assert_eq!(overlap(&[1, 2, 3], &[2, 3, 4]), 2);
        assert_eq!(overlap(&[1, 2, 3], &[1, 2, 3]), 3);
        assert_eq!(overlap(&[1, 2, 3, 1, 2], &[1, 2]), 2);
        assert_eq!(overlap(&[1, 2, 1, 2], &[1, 2, 1, 2, 1, 2]), 4);
        assert_eq!(overlap(&[1, 1, 1], &[1, 1, 2]), 2);
        assert_eq!(overlap(&[3], &[1, 2]), 0);
        assert_eq!(overlap::<u8>(&[], &[1]), 0);
        assert_eq!(overlap::<u8>(&[1], &[]), 0);
    }
}
