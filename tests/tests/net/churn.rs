//! Netdevs that come and go leave nothing behind: a Kubernetes node creates and deletes veths
//! all day, and every cache keyed by a netdev must let go of it when it goes away.
//!
//! The real binary runs in a network namespace of its own (`ip netns add`, with a name unique
//! to this run; root is needed, as in CI), started with `ip netns exec` (which also mounts
//! that namespace's sysfs, so `/sys/class/net` lists its netdevs only) and every netdev
//! selected by the `netdev`, `ethtool` and `dcb` collectors (`device-include` `.*`). Then a
//! few hundred cycles, each: create a veth pair with a fresh name, scrape, delete it, scrape.
//! Checked in every cycle:
//!
//! * while the pair exists, both ends are read (`railscope_netdev_info`) and their attribute
//!   files are kept open (`railscope_open_files_kept` above its baseline);
//! * once it is deleted, the next scrape has no series that names either end, and
//!   `railscope_open_files_kept` is back at its baseline at once (not after the two minutes
//!   an unread file is kept);
//! * no collector reports an error, and the agent logs no warning.
//!
//! At the end, the agent's open descriptors are back near their baseline, and its resident
//! memory grew by less than a few MiB over the run: a sanity bound only, as resident memory
//! moves with the allocator. The bytes per cycle are measured with `scripts/churn-bench`.
//!
//! The test process cannot enter a network namespace itself (this crate has no `unsafe` and
//! no `libc`), so HTTP to the agent, bound to the namespace's loopback, goes through a small
//! relay run under `ip netns exec` ([`RELAY`]): it reads one path a line on its standard
//! input and answers each on its standard output. A missing `ip` tool, or a namespace that cannot be created, is
//! a failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use railscope_tests::{Sample, binary, find, parse_samples, value};

/// The address the relay asks, when this binary runs as the relay.
const RELAY_ENV: &str = "RAILSCOPE_CHURN_RELAY";
/// Where the agent listens inside its namespace.
const AGENT_ADDR: &str = "127.0.0.1:9479";
/// How many veth pairs come and go.
const CYCLES: usize = 300;
/// The most resident memory may grow over the cycles after the first tenth (a sanity bound;
/// see the module docs).
const RSS_SLACK_KIB: u64 = 8 * 1024;
/// The collectors under test.
const COLLECTORS: [&str; 3] = ["netdev", "ethtool", "dcb"];

/// The relay run inside the namespace (`python3`, which the test suite requires): for every
/// line of standard input (a path), GETs it from `$RAILSCOPE_CHURN_RELAY` and writes
/// `RELAY <status> <length>\n` and the body to standard output (status 0 when nothing
/// answers); ends at the end of its input.
const RELAY: &str = r#"
import http.client, os, sys
host, port = os.environ["RAILSCOPE_CHURN_RELAY"].rsplit(":", 1)
out = sys.stdout.buffer
for line in sys.stdin:
    try:
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("GET", line.strip())
        r = c.getresponse()
        status, body = r.status, r.read()
        c.close()
    except OSError:
        status, body = 0, b""
    out.write(b"RELAY %d %d\n" % (status, len(body)))
    out.write(body)
    out.flush()
"#;

/// Runs `cmd`, panicking with its output when it fails.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({e}); install iproute2"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A network namespace; deleted (with every netdev left in it) when dropped.
struct Netns {
    name: String,
    dir: tempfile::TempDir,
}

impl Netns {
    fn new() -> Netns {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rs-churn-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns {
            name,
            dir: tempfile::tempdir().unwrap(),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Runs `ip -n <namespace> args…`.
    fn ip(&self, args: &[&str]) {
        run(Command::new("ip").args(["-n", &self.name]).args(args));
    }

    /// Runs `commands` (one a line) with `ip -n <namespace> -batch -`.
    fn ip_batch(&self, commands: &str) {
        let mut child = Command::new("ip")
            .args(["-n", &self.name, "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run ip ({e}); install iproute2"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(commands.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "ip -batch failed on {commands:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The agent inside the namespace, and the relay that reaches it; both killed when dropped.
struct NetnsAgent {
    child: Child,
    log: PathBuf,
    relay: Child,
    to_relay: ChildStdin,
    from_relay: BufReader<ChildStdout>,
}

impl NetnsAgent {
    fn start(ns: &Netns, args: &[&str]) -> NetnsAgent {
        let log = ns.dir.path().join("agent.log");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(binary())
            .args(["--web.listen-address", AGENT_ADDR])
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run ip ({e}); install iproute2"));
        let mut relay = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .args(["python3", "-c", RELAY])
            .env(RELAY_ENV, AGENT_ADDR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run ip ({e}); install iproute2"));
        let to_relay = relay.stdin.take().unwrap();
        let from_relay = BufReader::new(relay.stdout.take().unwrap());
        let mut agent = NetnsAgent {
            child,
            log,
            relay,
            to_relay,
            from_relay,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = agent.child.try_wait().unwrap() {
                panic!("railscope exited with {status}:\n{}", agent.log());
            }
            if agent.get("/-/ready").0 == 200 {
                return agent;
            }
            assert!(
                Instant::now() < deadline,
                "railscope did not become ready:\n{}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GETs `path` through the relay: (status, body); status 0 when nothing answers.
    fn get(&mut self, path: &str) -> (u16, String) {
        writeln!(self.to_relay, "{path}").unwrap();
        self.to_relay.flush().unwrap();
        let mut line = String::new();
        // The test harness writes lines of its own around the relay's answers.
        let head = loop {
            line.clear();
            let n = self.from_relay.read_line(&mut line).unwrap();
            assert!(n > 0, "the relay ended");
            if let Some(head) = line.trim_end().strip_prefix("RELAY ") {
                break head.to_owned();
            }
        };
        let (status, len) = head.split_once(' ').unwrap();
        let mut body = vec![0; len.parse().unwrap()];
        self.from_relay.read_exact(&mut body).unwrap();
        (status.parse().unwrap(), String::from_utf8(body).unwrap())
    }

    fn scrape(&mut self) -> Vec<Sample> {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "{}", self.log());
        parse_samples(&body)
    }

    /// A field of the agent's `/proc/<pid>/status` (`VmRSS` in KiB). `ip netns exec` execs
    /// the agent: the child is the agent's own process.
    fn status(&self, field: &str) -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/<agent>/status"))
    }

    /// How many descriptors the agent has open.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }
}

impl Drop for NetnsAgent {
    fn drop(&mut self) {
        let _ = self.relay.kill();
        let _ = self.relay.wait();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kept(s: &[Sample]) -> f64 {
    value(s, "railscope_open_files_kept", &[])
}

/// Every collector under test succeeded without errors.
fn assert_clean(s: &[Sample], when: &str) {
    for collector in COLLECTORS {
        let labels = [("collector", collector)];
        assert_eq!(
            value(s, "railscope_collector_success", &labels),
            1.0,
            "{collector} did not succeed {when}"
        );
        assert_eq!(
            value(s, "railscope_collector_last_errors", &labels),
            0.0,
            "{collector} reported errors {when}"
        );
    }
}

/// The samples with a label value naming one of `netdevs`.
fn naming<'a>(s: &'a [Sample], netdevs: &[&str]) -> Vec<&'a Sample> {
    s.iter()
        .filter(|x| x.labels.values().any(|v| netdevs.contains(&v.as_str())))
        .collect()
}

#[test]
fn veths_that_come_and_go_leave_nothing_behind() {
    let ns = Netns::new();
    let mut agent = NetnsAgent::start(
        &ns,
        &[
            "--collector.disable-defaults",
            "--collector.netdev",
            "--collector.ethtool",
            "--collector.dcb",
            "--collector.netdev.device-include",
            ".*",
            "--collector.ethtool.device-include",
            ".*",
            "--collector.dcb.device-include",
            ".*",
            "--log.level",
            "warn",
        ],
    );
    let s0 = agent.scrape();
    assert_clean(&s0, "before any veth");
    // `lo` alone, read over rtnetlink.
    assert_eq!(find(&s0, "railscope_netdev_info", &[]).len(), 1, "{s0:?}");
    let baseline = kept(&agent.scrape());
    let fds0 = agent.open_fds();
    let mut rss_warm = 0;
    let start = Instant::now();
    for i in 0..CYCLES {
        if i == CYCLES / 10 {
            rss_warm = agent.status("VmRSS");
        }
        let (a, b) = (format!("vcA{i}"), format!("vcB{i}"));
        ns.ip_batch(&format!(
            "link add {a} type veth peer name {b}\nlink set {a} up\n"
        ));
        let s = agent.scrape();
        assert_clean(&s, &format!("with {a}"));
        for nd in [&a, &b] {
            assert_eq!(
                find(&s, "railscope_netdev_info", &[("netdev", nd)]).len(),
                1,
                "cycle {i}: {nd} was not read"
            );
        }
        assert!(
            kept(&s) > baseline,
            "cycle {i}: nothing of {a} or {b} is kept open (baseline {baseline})"
        );

        ns.ip(&["link", "del", &a]);
        let s = agent.scrape();
        assert_clean(&s, &format!("after {a} was deleted"));
        let left = naming(&s, &[&a, &b]);
        assert!(
            left.is_empty(),
            "cycle {i}: series of deleted netdevs: {left:?}"
        );
        assert_eq!(
            kept(&s),
            baseline,
            "cycle {i}: files kept open for deleted netdevs"
        );
    }
    let took = start.elapsed();
    let rss_end = agent.status("VmRSS");
    let fds_end = agent.open_fds();
    println!(
        "{CYCLES} veth pairs created and deleted in {:.1} s; resident memory {rss_warm} KiB after {} cycles, {rss_end} KiB at the end; {fds0} descriptors open before, {fds_end} after",
        took.as_secs_f64(),
        CYCLES / 10
    );
    // Open descriptors: the baseline, give or take the connections being closed.
    assert!(
        fds_end <= fds0 + 4,
        "descriptors grew from {fds0} to {fds_end}"
    );
    assert!(
        rss_end <= rss_warm + RSS_SLACK_KIB,
        "resident memory grew from {rss_warm} KiB to {rss_end} KiB over {} cycles",
        CYCLES - CYCLES / 10
    );
    let log = agent.log();
    assert!(
        !log.lines()
            .any(|l| l.contains("level=warn") || l.contains("level=error")),
        "the agent logged:\n{log}"
    );
}
