//! Network namespaces for the tests that need real netdevs (`ip netns`, iproute2; root), and
//! the relay that reaches an agent listening on a namespace's loopback.
//!
//! The test process cannot enter a namespace itself (that needs `setns`, and this crate has no
//! `unsafe`), so whatever runs inside one is started with `ip netns exec`, which also mounts
//! the namespace's own sysfs for it. HTTP to an agent started with
//! [`Agent::in_netns`](crate::Agent::in_netns) goes through [`Relay`], a small `python3`
//! program run inside the namespace.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip` with `args`; panics with its output when it fails, and names the package when it
/// is missing (a missing tool is a failure, never a skip).
pub fn ip(args: &[&str]) -> Output {
    let out = crate::output(Command::new("ip").args(args));
    assert!(
        out.status.success(),
        "ip {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A network namespace with its loopback up, named `rs-<tag>-<pid>-<n>` (unique among the
/// tests of one run and across concurrent runs); deleted, with every netdev left in it, when
/// dropped.
pub struct Netns {
    name: String,
    dir: tempfile::TempDir,
}

impl Netns {
    /// Creates the namespace.
    pub fn new(tag: &str) -> Netns {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rs-{tag}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        // A namespace left by an earlier run with the same pid.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns {
            name,
            dir: tempfile::tempdir().unwrap(),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A scratch directory that lives as long as the namespace.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `ip -n <namespace> args…`.
    pub fn ip(&self, args: &[&str]) -> Output {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec`, which execs it:
    /// the child's pid is the program's own).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Runs `command` (program and arguments) inside the namespace; panics when it fails.
    pub fn exec(&self, command: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(command);
        ip(&all)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// The relay's program (`python3`, which the test suite requires): for every line of standard
/// input (a path), GETs it from `$RAILSCOPE_RELAY_ADDR` and writes `RELAY <status>
/// <length>\n` and the body to standard output (status 0 when nothing answers); ends at the
/// end of its input.
const RELAY: &str = r#"
import http.client, os, sys
host, port = os.environ["RAILSCOPE_RELAY_ADDR"].rsplit(":", 1)
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

/// HTTP GETs to `addr` inside a namespace, one at a time, through one long-lived relay
/// process; killed when dropped.
pub struct Relay {
    child: Child,
    to_relay: ChildStdin,
    from_relay: BufReader<ChildStdout>,
}

impl Relay {
    /// Starts the relay inside `ns`, asking `addr` (`127.0.0.1:9477`).
    pub fn start(ns: &Netns, addr: &str) -> Relay {
        let mut cmd = ns.command("python3");
        cmd.args(["-c", RELAY])
            .env("RAILSCOPE_RELAY_ADDR", addr)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = crate::spawn(&mut cmd);
        let to_relay = child.stdin.take().unwrap();
        let from_relay = BufReader::new(child.stdout.take().unwrap());
        Relay {
            child,
            to_relay,
            from_relay,
        }
    }

    /// GETs `path`: (status, body); status 0 when nothing answers.
    pub fn get(&mut self, path: &str) -> (u16, Vec<u8>) {
        writeln!(self.to_relay, "{path}").unwrap();
        self.to_relay.flush().unwrap();
        let mut line = String::new();
        let head = loop {
            line.clear();
            let n = self.from_relay.read_line(&mut line).unwrap();
            assert!(n > 0, "the relay ended (is python3 installed?)");
            if let Some(head) = line.trim_end().strip_prefix("RELAY ") {
                break head.to_owned();
            }
        };
        let (status, len) = head.split_once(' ').unwrap();
        let mut body = vec![0; len.parse().unwrap()];
        self.from_relay.read_exact(&mut body).unwrap();
        (status.parse().unwrap(), body)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
