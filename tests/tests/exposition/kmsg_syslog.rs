//! The `kmsg` collector's `syslog(2)` reader end to end, on this machine's real kernel log.
//! The test writes marker records into the log through `/dev/kmsg` (an XID 79 and a ConnectX
//! command timeout, on a PCI address no other run or boot uses), then runs the agent:
//!
//! * in a private mount namespace with a tmpfs over `/dev` (`unshare -m`), so that it cannot
//!   open `/dev/kmsg`, with `--collector.kmsg.reader=auto`: it falls back to `syslog(2)`;
//! * with `--collector.kmsg.reader=syslog`, beside one with `--collector.kmsg.reader=device`:
//!   both export the same series for the same records;
//! * without `CAP_SYSLOG` (`setpriv`, nothing changed host-wide): where
//!   `kernel.dmesg_restrict` is 1 the collector is absent and says so once, where it is 0 the
//!   kernel lets everyone read the log and the collector reads it.
//!
//! Each count is checked exactly: a marker XID 13 written after each batch shows when a read
//! has passed the batch, and the batch's count must then be what was written, neither less
//! nor doubled, also after the agent restarts and reads the backlog again. Writing to the
//! kernel log and hiding `/dev` need root; the CI runs these tests as root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hash::{BuildHasher, RandomState};
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use railscope_tests::{Agent, find, parse_samples, promtool_check_metrics, tool, tree_args, value};

/// Fails the test unless it runs as root.
fn require_root(what: &str) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap();
    assert_eq!(
        euid, "0",
        "this test must run as root: it {what} (the CI runs the tests as root)"
    );
}

/// A PCI domain and bus (`1a2b:3c`) no real device has and no other test or run uses.
fn unique_bus() -> String {
    let seed = RandomState::new().hash_one((std::process::id(), Instant::now()));
    format!("{:04x}:{:02x}", 0x1000 + seed % 0xe000, (seed >> 16) & 0xff)
}

/// Writes `records` into the kernel log, each through a `/dev/kmsg` opened for it: the
/// kernel limits writes per open file (`kernel.printk_devkmsg=ratelimit`, ten per five
/// seconds) and drops the rest without an error. Each ends with a newline: a record without
/// one stays open for a continuation, and no reader sees it until another record is logged.
fn log(records: &[String]) {
    for record in records {
        let mut kmsg = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/kmsg")
            .unwrap_or_else(|e| panic!("cannot open /dev/kmsg for writing: {e}"));
        kmsg.write_all(format!("{record}\n").as_bytes())
            .unwrap_or_else(|e| panic!("cannot write {record:?} to /dev/kmsg: {e}"));
    }
}

/// The marker records of one bus.
struct Markers {
    bus: String,
}

impl Markers {
    fn xid(&self, code: u32) -> String {
        format!(
            "<3>NVRM: Xid (PCI:{}:00): {code}, pid=4242, name=railscope-test, GPU has fallen off the bus.",
            self.bus
        )
    }

    fn mlx5_timeout(&self) -> String {
        format!(
            "<3>mlx5_core {}:00.1: wait_func:1034:(pid 4711): ACCESS_REG(0x805) timeout. Will cause a leak of a command resource",
            self.bus
        )
    }

    fn gpu(&self) -> String {
        format!("{}:00.0", self.bus)
    }

    fn nic(&self) -> String {
        format!("{}:00.1", self.bus)
    }

    /// `xid` XID 79 records and `mlx5` command timeouts, then one marker XID 13.
    fn batch(&self, xid: usize, mlx5: usize) -> Vec<String> {
        let mut records = vec![self.xid(79); xid];
        records.extend(std::iter::repeat_n(self.mlx5_timeout(), mlx5));
        records.push(self.xid(13));
        records
    }

    /// Scrapes `agent` until it has counted `sentinels` XID 13 records (every record written
    /// before the last of them has been read then), and returns that scrape; fails after 30 s.
    fn scrape_after(&self, agent: &Agent, sentinels: f64) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = agent.scrape();
            let s = parse_samples(&text);
            let counted = find_owned(&s, "railscope_kmsg_events_total", &self.xid_labels("13"))
                .first()
                .map_or(0.0, |x| x.value);
            assert!(
                counted <= sentinels,
                "{counted} marker XIDs 13 counted, {sentinels} written:\n{text}"
            );
            if counted == sentinels {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not count {sentinels} marker XIDs 13 of {} within 30 s:\n{text}\n{}",
                self.bus,
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn xid_labels(&self, code: &str) -> Vec<(&'static str, String)> {
        vec![
            ("kind", "xid".to_owned()),
            ("pci_address", self.gpu()),
            ("code", code.to_owned()),
        ]
    }

    /// The XID 79 and mlx5 counts of a scrape.
    fn counts(&self, text: &str) -> (f64, f64) {
        let s = parse_samples(text);
        let xid = find_owned(&s, "railscope_kmsg_events_total", &self.xid_labels("79"));
        assert_eq!(xid.len(), 1, "{text}");
        let nic = self.nic();
        let mlx5 = value(
            &s,
            "railscope_kmsg_events_total",
            &[("kind", "mlx5_cmd_timeout"), ("pci_address", nic.as_str())],
        );
        (xid[0].value, mlx5)
    }
}

/// [`find`] with owned label values.
fn find_owned<'a>(
    samples: &'a [railscope_tests::Sample],
    name: &str,
    labels: &[(&'static str, String)],
) -> Vec<&'a railscope_tests::Sample> {
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    find(samples, name, &labels)
}

fn reader_of(text: &str) -> String {
    let s = parse_samples(text);
    let readers = find(&s, "railscope_kmsg_reader_info", &[]);
    assert_eq!(readers.len(), 1, "{text}");
    assert_eq!(readers[0].value, 1.0);
    readers[0].labels["reader"].clone()
}

/// The fixture tree's arguments (no host sysfs is read) and `extra`.
fn args(extra: &[&str]) -> Vec<String> {
    let mut args = tree_args(&railscope_tests::fixtures().join("h100-cx7-ndr-ib"));
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// The agent with `args`, in a mount namespace of its own whose `/dev` is an empty tmpfs:
/// `/dev/kmsg` does not exist for it, as in a container that is given no device.
fn without_dev(args: &[String]) -> Agent {
    let unshare = tool("unshare");
    let mut cmd = Command::new(unshare);
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "mount -t tmpfs railscope-no-dev /dev && test ! -e /dev/kmsg && exec \"$0\" \"$@\"",
    ])
    .arg(railscope_tests::binary());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut agent = Agent::wrapped(cmd, &args, &[]);
    agent.wait_ready();
    agent
}

#[test]
fn without_dev_kmsg_the_agent_reads_the_kernel_log_through_syslog_once_per_record() {
    require_root("writes to /dev/kmsg and hides /dev in a mount namespace");
    let m = Markers { bus: unique_bus() };
    // The boot's backlog: three XIDs 79 and two command timeouts.
    log(&m.batch(3, 2));
    let args = args(&[
        "--collector.kmsg.path=/dev/kmsg",
        "--collector.kmsg.reader=auto",
    ]);
    let agent = without_dev(&args);
    let text = m.scrape_after(&agent, 1.0);
    promtool_check_metrics(&text);
    assert_eq!(reader_of(&text), "syslog", "{}", agent.log());
    assert_eq!(m.counts(&text), (3.0, 2.0), "the backlog, each record once");
    let s = parse_samples(&text);
    assert_eq!(
        value(&s, "railscope_collector_success", &[("collector", "kmsg")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "kmsg")]
        ),
        0.0
    );
    // The XID's time: the record's timestamp on the boot's clock, in the past.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = find_owned(
        &s,
        "railscope_kmsg_event_last_seen_seconds",
        &m.xid_labels("79"),
    )[0]
    .value;
    assert!(
        at <= now + 1.0 && at > now - 600.0,
        "{at} is not just now ({now})"
    );

    // More records: counted once, whatever number of reads see them.
    log(&m.batch(2, 1));
    let text = m.scrape_after(&agent, 2.0);
    assert_eq!(m.counts(&text), (5.0, 3.0), "the new records, once each");

    // Restarted, the agent counts the whole buffer once: not doubled.
    drop(agent);
    let agent = without_dev(&args);
    let text = m.scrape_after(&agent, 2.0);
    assert_eq!(reader_of(&text), "syslog");
    assert_eq!(m.counts(&text), (5.0, 3.0), "the backlog after a restart");
    log(&m.batch(1, 0));
    let text = m.scrape_after(&agent, 3.0);
    assert_eq!(m.counts(&text), (6.0, 3.0));
    assert!(!agent.log().contains("panicked"), "{}", agent.log());
}

#[test]
fn the_syslog_and_device_readers_export_the_same_series() {
    require_root("writes to /dev/kmsg and reads the kernel log");
    let m = Markers { bus: unique_bus() };
    log(&m.batch(2, 1));
    let syslog = Agent::start(
        &args(&["--collector.kmsg.reader=syslog"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let device = Agent::start(
        &args(&[
            "--collector.kmsg.reader=device",
            "--collector.kmsg.path=/dev/kmsg",
        ])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    let (from_syslog, from_device) = (m.scrape_after(&syslog, 1.0), m.scrape_after(&device, 1.0));
    assert_eq!(reader_of(&from_syslog), "syslog");
    assert_eq!(reader_of(&from_device), "device");
    promtool_check_metrics(&from_syslog);
    assert_eq!(m.counts(&from_syslog), (2.0, 1.0));
    assert_eq!(m.counts(&from_device), (2.0, 1.0));
    // The same series (kind and labels) for this run's records, with the same times: both
    // readers take the record's microseconds since boot. Each agent estimates the boot time
    // from its own clocks, so the times agree to a few milliseconds.
    let ours = |text: &str| {
        let mut out: Vec<(String, std::collections::BTreeMap<String, String>, f64)> =
            parse_samples(text)
                .into_iter()
                .filter(|x| x.name.starts_with("railscope_kmsg_event"))
                .filter(|x| x.labels.values().any(|v| v.starts_with(m.bus.as_str())))
                .map(|x| (x.name, x.labels, x.value))
                .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    };
    let (a, b) = (ours(&from_syslog), ours(&from_device));
    assert_eq!(a.len(), 6, "three series, counted and timed: {a:?}");
    assert_eq!(a.len(), b.len());
    let timed = std::fs::read_to_string("/sys/module/printk/parameters/time")
        .is_ok_and(|t| t.trim() == "Y");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.0, &x.1), (&y.0, &y.1));
        if x.0 == "railscope_kmsg_events_total" {
            assert_eq!(x.2, y.2, "{x:?} {y:?}");
        } else if timed {
            assert!((x.2 - y.2).abs() < 0.1, "{x:?} {y:?}");
        }
    }
}

#[test]
fn without_cap_syslog_the_kernel_log_is_absent_and_said_once() {
    require_root("drops CAP_SYSLOG from a root process");
    let setpriv = tool("setpriv");
    // Readable without CAP_SYSLOG only where kernel.dmesg_restrict is 0; this test sets
    // nothing host-wide and checks what the kernel's setting means.
    let restricted = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
        .unwrap()
        .trim()
        == "1";
    for (reader, extra) in [
        ("auto", "--collector.kmsg.path=/dev/kmsg"),
        ("syslog", "--log.format=json"),
    ] {
        let mut cmd = Command::new(&setpriv);
        cmd.args(["--inh-caps=-syslog", "--bounding-set=-syslog", "--"])
            .arg(railscope_tests::binary());
        let args = args(&[&format!("--collector.kmsg.reader={reader}"), extra]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut agent = Agent::wrapped(cmd, &args, &[]);
        agent.wait_ready();
        let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .map(|c| u64::from_str_radix(c.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(caps & (1 << 34), 0, "CAP_SYSLOG (34) is still effective");
        let mut text = String::new();
        for _ in 0..3 {
            text = agent.scrape();
        }
        let s = parse_samples(&text);
        assert_eq!(
            value(&s, "railscope_collector_success", &[("collector", "kmsg")]),
            1.0,
            "{reader}"
        );
        assert_eq!(
            value(
                &s,
                "railscope_collector_errors_total",
                &[("collector", "kmsg")]
            ),
            0.0,
            "{reader}: absent is not an error"
        );
        if restricted {
            assert!(
                s.iter().all(|x| !x.name.starts_with("railscope_kmsg_")),
                "{reader}: kmsg series without CAP_SYSLOG:\n{text}"
            );
            let log = agent.log();
            let said = log.lines().filter(|l| l.contains("CAP_SYSLOG")).count();
            assert_eq!(said, 1, "{reader}: said once, not per scrape:\n{log}");
            assert!(log.contains("syslog(2)"), "{reader}: {log}");
        } else {
            let want = if reader == "auto" { "device" } else { "syslog" };
            let deadline = Instant::now() + Duration::from_secs(30);
            while find(&parse_samples(&text), "railscope_kmsg_reader_info", &[]).is_empty() {
                assert!(Instant::now() < deadline, "{reader}: {}", agent.log());
                std::thread::sleep(Duration::from_millis(100));
                text = agent.scrape();
            }
            assert_eq!(reader_of(&text), want, "dmesg_restrict=0 lets anyone read");
        }
    }
}
