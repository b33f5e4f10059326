//! Helpers for railscope's end-to-end tests: find and start the real `railscope` binary
//! ([`Agent`]: against a fixture tree, or inside a network namespace, [`netns`]), talk HTTP to
//! it, parse ([`parse_samples`]) and normalize its exposition, and run `promtool` and the
//! other tools the tests need ([`require`]: a missing tool is a failure naming its package).
//!
//! The binary is `$RAILSCOPE_BIN` when set (to test an installed package), else the one Cargo
//! built next to the test executable (`target/<profile>/railscope`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod gpu;
pub mod kubelet;
pub mod names;
pub mod netns;
pub mod otlp;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The fixture trees' directory.
pub fn fixtures() -> PathBuf {
    workspace().join("tests/fixtures")
}

/// The names of every fixture tree (directories with a `sys/`).
pub fn fixture_trees() -> Vec<String> {
    let mut trees: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("sys").is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    trees.sort();
    assert!(
        !trees.is_empty(),
        "no fixture trees under {}",
        fixtures().display()
    );
    trees
}

/// The railscope binary under test.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("RAILSCOPE_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/railscope
    let bin = exe.parent().unwrap().parent().unwrap().join("railscope");
    assert!(
        bin.is_file(),
        "{} does not exist: build it first with `cargo build -p railscope` (scripts/test does)",
        bin.display()
    );
    bin
}

/// The flags that point the agent at the tree at `root`: its `sys/`, its `proc/` (a tree
/// without one reads nothing from the host), and no NVML (a fixture node has none of this
/// machine's GPUs).
pub fn tree_args(root: &Path) -> Vec<String> {
    vec![
        "--path.sysfs".into(),
        root.join("sys").display().to_string(),
        "--path.procfs".into(),
        root.join("proc").display().to_string(),
        "--collector.gpu.nvml-library".into(),
        "/nonexistent/libnvidia-ml.so.1".into(),
    ]
}

/// Copies the fixture tree `tree` (symlinks and all) to `to`, which must not exist yet, and
/// returns `to`.
pub fn copy_fixture(tree: &str, to: &Path) -> PathBuf {
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixtures().join(tree))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {tree} {}", to.display());
    to.to_path_buf()
}

/// A `prometheus` command (Debian package `prometheus`) that reads `config`, keeps its TSDB in
/// `dir/tsdb` and serves on `127.0.0.1:port`, its output discarded.
pub fn prometheus_command(config: &Path, dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// A `prometheus-alertmanager` command (Debian package `prometheus-alertmanager`) that reads
/// `config`, keeps its state in `dir/am`, serves on `127.0.0.1:port` and forms no cluster,
/// its output discarded.
pub fn alertmanager_command(config: &Path, dir: &Path, port: u16) -> Command {
    let mut cmd = Command::new("prometheus-alertmanager");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("am").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Percent-encodes `text` for a URL query value.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Runs a PromQL instant query against the Prometheus at `addr`: its JSON answer, or `Null`
/// when it does not answer 200 with JSON.
pub fn prometheus_query(addr: SocketAddr, query: &str) -> serde_json::Value {
    match get(
        addr,
        &format!("/api/v1/query?query={}", percent_encode(query)),
        &[],
    ) {
        Ok(r) if r.status == 200 => serde_json::from_slice(&r.body).unwrap_or_default(),
        _ => serde_json::Value::Null,
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running agent; killed when dropped.
pub struct Agent {
    /// The child process (the agent's own, also when started in a network namespace).
    pub child: Child,
    /// Where it listens (inside its namespace, for [`Agent::in_netns`]).
    pub addr: SocketAddr,
    log: PathBuf,
    /// What reaches an agent inside a network namespace.
    relay: Option<Mutex<netns::Relay>>,
    _dir: tempfile::TempDir,
}

/// What tells that a starting agent serves.
#[derive(Clone, Copy)]
enum Serving {
    /// `/-/healthy` answers 200 over plain HTTP.
    Healthy,
    /// Its port accepts connections (a TLS or basic-auth listener).
    Listening,
}

/// Where an agent started with [`Agent::in_netns`] listens, on its namespace's loopback.
pub const NETNS_AGENT_ADDR: &str = "127.0.0.1:9477";

impl Agent {
    /// Starts the agent on a free port with `args` and waits until `/-/ready` answers 200.
    pub fn start(args: &[&str]) -> Agent {
        let mut agent = Agent::launch(args, &[]);
        agent.wait_ready();
        agent
    }

    /// Starts the agent on a free port with `args` and environment `env`, and waits only
    /// until it serves (`/-/healthy`): its start-up collection may still be running.
    pub fn launch(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Agent {
        Agent::wrapped(Command::new(binary()), args, env)
    }

    /// Starts `cmd`, a wrapper that execs the binary (`setpriv … -- <binary()>`), on a free
    /// port with `args` and environment `env`, and waits until it serves (`/-/healthy`).
    pub fn wrapped(cmd: Command, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Agent {
        let listen = format!("127.0.0.1:{}", free_port());
        Agent::spawn(cmd, &listen, None, Serving::Healthy, args, env)
    }

    /// Starts the agent on a free port with `args` and waits only until its port accepts
    /// connections: for a web config whose listener answers no plain, anonymous `/-/healthy`
    /// (TLS, basic auth). Its clients speak TLS ([`Agent::url`]) or send credentials.
    pub fn listening(args: &[&str]) -> Agent {
        let listen = format!("127.0.0.1:{}", free_port());
        Agent::spawn(
            Command::new(binary()),
            &listen,
            None,
            Serving::Listening,
            args,
            &[],
        )
    }

    /// `https://<addr><path>`, for a client of an agent started with [`Agent::listening`].
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Starts the agent inside the network namespace `ns` (`ip netns exec`, so that it sees
    /// the namespace's netdevs and sysfs), listening on [`NETNS_AGENT_ADDR`] there, and waits
    /// until `/-/ready` answers 200. Requests reach it through a [`netns::Relay`]: only
    /// [`Agent::get`] without headers and [`Agent::scrape`], not [`Agent::addr`].
    pub fn in_netns(ns: &netns::Netns, args: &[&str]) -> Agent {
        let relay = netns::Relay::start(ns, NETNS_AGENT_ADDR);
        let mut agent = Agent::spawn(
            ns.command(binary()),
            NETNS_AGENT_ADDR,
            Some(relay),
            Serving::Healthy,
            args,
            &[],
        );
        agent.wait_ready();
        agent
    }

    /// Spawns `cmd` (the binary, or a wrapper that execs it) listening on `listen`, and waits
    /// until it serves.
    fn spawn(
        mut cmd: Command,
        listen: &str,
        relay: Option<netns::Relay>,
        serving: Serving,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        let child = cmd
            .arg("--web.listen-address")
            .arg(listen)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| cannot_run(&cmd, &e));
        let mut agent = Agent {
            child,
            addr: listen.parse().unwrap(),
            log,
            relay: relay.map(Mutex::new),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = agent.child.try_wait().unwrap() {
                panic!("railscope exited with {status}:\n{}", agent.log());
            }
            let up = match serving {
                Serving::Healthy => agent
                    .try_get("/-/healthy", &[])
                    .is_ok_and(|resp| resp.status == 200),
                Serving::Listening => TcpStream::connect(agent.addr).is_ok(),
            };
            if up {
                return agent;
            }
            assert!(
                Instant::now() < deadline,
                "railscope did not start:\n{}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts the agent with `--web.systemd-socket` under `systemd-socket-activate -l
    /// 127.0.0.1:<free port> <activate…>` (the Debian package systemd), which execs it with the
    /// socket once a first connection arrives, and waits until `/-/ready` answers 200 on that
    /// socket. Its own `--web.listen-address` is ignored then, as it must be.
    pub fn socket_activated(activate: &[&str], args: &[&str]) -> Agent {
        let listen = format!("127.0.0.1:{}", free_port());
        let mut cmd = Command::new("systemd-socket-activate");
        cmd.arg("-l")
            .arg(&listen)
            .args(activate)
            .arg(binary())
            .arg("--web.systemd-socket");
        let mut agent = Agent::spawn(cmd, &listen, None, Serving::Healthy, args, &[]);
        agent.wait_ready();
        agent
    }

    /// Starts the agent against a fixture tree.
    pub fn fixture(tree: &str, extra: &[&str]) -> Agent {
        Agent::tree(&fixtures().join(tree), extra)
    }

    /// Starts the agent against the tree at `root` (a fixture or a changed copy of one).
    pub fn tree(root: &Path, extra: &[&str]) -> Agent {
        let args = tree_args(root);
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        Agent::start(&args)
    }

    /// Waits until `/-/ready` answers 200 (the start-up collection is done; it waits up to
    /// its deadline for a device that hangs), for up to 30 s.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("railscope exited with {status}:\n{}", self.log());
            }
            if self
                .try_get("/-/ready", &[])
                .is_ok_and(|resp| resp.status == 200)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("railscope did not become ready:\n{}", self.log());
    }

    /// What the agent logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GETs `path`.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.try_get(path, headers)
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log()))
    }

    /// GETs `path`: an error when nothing answers.
    fn try_get(&self, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
        let Some(relay) = &self.relay else {
            return get(self.addr, path, headers);
        };
        assert!(
            headers.is_empty(),
            "the relay into a network namespace sends no headers"
        );
        match relay.lock().unwrap().get(path) {
            (0, _) => Err(std::io::Error::other("nothing answered in the namespace")),
            (status, body) => Ok(Response {
                status,
                headers: BTreeMap::new(),
                body,
            }),
        }
    }

    /// Scrapes `/metrics` in the Prometheus text format.
    pub fn scrape(&self) -> String {
        let resp = self.get("/metrics", &[]);
        assert_eq!(resp.status, 200, "{}", self.log());
        resp.text()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM failed");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "railscope ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body (de-chunked, not decompressed).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// A minimal HTTP/1.1 client (one request per connection).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad status line"))?;
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// GETs `path`.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    request(addr, "GET", path, headers)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size =
            usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        data = &data[line_end + 2..];
        if size == 0 || data.len() < size {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// One parsed sample of a text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample name.
    pub name: String,
    /// Its labels, unescaped.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
    /// Its value as written (`1234`, `4.5e-05`, `+Inf`).
    pub text: String,
}

/// Parses the samples of an exposition, in the Prometheus text format or OpenMetrics (its
/// `# EOF` is a comment like any other), strictly: a label value may hold only the `\\`,
/// `\"` and `\n` escapes and must be closed, a label appears once, and the value is one token
/// with no timestamp after it. Anything else fails the test, naming the line.
pub fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect()
}

fn parse_sample(line: &str) -> Sample {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value: {line:?}"));
    let name = line[..name_end].to_owned();
    let mut chars = line[name_end..].chars();
    let mut labels = BTreeMap::new();
    let mut rest: String = chars.clone().collect();
    if rest.starts_with('{') {
        chars.next();
        loop {
            let label: String = chars.by_ref().take_while(|c| *c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line:?}");
            let mut value = String::new();
            loop {
                match chars
                    .next()
                    .unwrap_or_else(|| panic!("unclosed label value: {line:?}"))
                {
                    '\\' => match chars.next() {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => panic!("invalid escape \\{other:?} in {line:?}"),
                    },
                    '"' => break,
                    c => value.push(c),
                }
            }
            assert!(
                labels.insert(label, value).is_none(),
                "a label repeats: {line:?}"
            );
            match chars.next() {
                Some(',') => {}
                Some('}') => break,
                other => panic!("{other:?} after a label value in {line:?}"),
            }
        }
        rest = chars.collect();
    }
    let text = rest
        .strip_prefix(' ')
        .unwrap_or_else(|| panic!("no space before the value: {line:?}"));
    assert!(
        !text.is_empty() && !text.contains(' '),
        "not one value: {line:?}"
    );
    let value = match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v
            .parse()
            .unwrap_or_else(|e| panic!("bad value {v:?} ({e}): {line:?}")),
    };
    Sample {
        name,
        labels,
        value,
        text: text.to_owned(),
    }
}

/// Finds samples by name and a subset of labels.
pub fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// The value of the one sample matching name and labels.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(samples, name, labels);
    assert_eq!(
        found.len(),
        1,
        "expected one {name}{labels:?}, found {found:?}"
    );
    found[0].value
}

/// Families whose values change from run to run, left out of golden files.
pub const VOLATILE_FAMILIES: &[&str] = &[
    "railscope_build_info",
    "railscope_collector_duration_seconds",
    "railscope_collector_runs_total",
    "railscope_collections_total",
    "railscope_scrape_requests_total",
    "railscope_open_files_kept",
    "process_",
];

/// Removes the volatile families (samples and their HELP/TYPE lines).
pub fn normalize(text: &str) -> String {
    let volatile = |name: &str| {
        VOLATILE_FAMILIES
            .iter()
            .any(|v| name == *v || (v.ends_with('_') && name.starts_with(v)))
    };
    let mut out = String::new();
    for line in text.lines() {
        let name = if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            rest.split(' ').next().unwrap_or_default()
        } else {
            line.split(['{', ' ']).next().unwrap_or_default()
        };
        if !volatile(name) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Runs `promtool check metrics` on `text`; panics with its output on failure or when
/// promtool is missing (a missing tool is a failure, never a skip).
pub fn promtool_check_metrics(text: &str) {
    let out = output_with_input(Command::new("promtool").args(["check", "metrics"]), text);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics failed:\n{report}"
    );
}

/// A webhook receiver on a free loopback port: collects every notification Alertmanager
/// posts, with when it came.
pub fn webhook(received: Arc<Mutex<Vec<(Instant, serde_json::Value)>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            // Read headers, then Content-Length bytes of body.
            let body = loop {
                let Ok(n) = stream.read(&mut chunk) else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            if let Some(body) = body
                && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body)
            {
                received.lock().unwrap().push((Instant::now(), value));
            }
        }
    });
    port
}

/// Fails the test because `what` is missing, saying how to install it (`install`: "the Debian
/// package iproute2", "the PyPI package checkov==3.3.30 in …"). The one policy for every tool
/// the tests run, in CI and on a developer's machine alike: a missing tool is a failure that
/// names its package, never a skip (`scripts/test` installs them or names them the same way).
pub fn missing_tool(what: &str, install: &str) -> ! {
    panic!("{what} is missing: install {install} (a missing tool fails the test, never skips it)")
}

/// Where each tool the tests run comes from, as `scripts/test` installs it: what
/// [`output`] names when one is missing.
pub const TOOLS: &[(&str, &str)] = &[
    ("promtool", "the Debian package prometheus"),
    ("prometheus", "the Debian package prometheus"),
    (
        "prometheus-alertmanager",
        "the Debian package prometheus-alertmanager",
    ),
    ("amtool", "the Debian package prometheus-alertmanager"),
    ("vmalert", "the Debian package victoria-metrics"),
    ("victoria-metrics", "the Debian package victoria-metrics"),
    ("python3", "the Debian packages python3 and python3-yaml"),
    ("ip", "the Debian package iproute2"),
    ("systemd-analyze", "the Debian package systemd"),
    ("systemd-socket-activate", "the Debian package systemd"),
    ("setpriv", "the Debian package util-linux"),
    ("unshare", "the Debian package util-linux"),
    ("dpkg", "the Debian package dpkg"),
    ("adduser", "the Debian package adduser"),
    ("openssl", "the Debian package openssl"),
    ("curl", "the Debian package curl"),
    ("jsonnet", "the Debian package jsonnet"),
    ("umoci", "the Debian package umoci"),
    ("podman", "the Debian package podman"),
    ("crun", "the Debian package crun"),
    (
        "kubectl",
        "the package kubectl of the Kubernetes apt repository (pkgs.k8s.io)",
    ),
];

/// Runs `cmd` and returns its output; a program that is not there is [`missing_tool`], naming
/// its package from [`TOOLS`].
pub fn output(cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| cannot_run(cmd, &e))
}

/// Runs `cmd` with `input` on its standard input and returns its output; like [`output`], a
/// tool of [`TOOLS`] that is not installed is [`missing_tool`], naming its package.
pub fn output_with_input(cmd: &mut Command, input: &str) -> std::process::Output {
    let mut child = spawn(
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Starts `cmd`; like [`output`], a tool of [`TOOLS`] that is not installed is
/// [`missing_tool`], naming its package.
pub fn spawn(cmd: &mut Command) -> std::process::Child {
    cmd.spawn().unwrap_or_else(|e| cannot_run(cmd, &e))
}

fn cannot_run(cmd: &Command, e: &std::io::Error) -> ! {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let name = program.rsplit('/').next().unwrap_or_default();
    match TOOLS.iter().find(|(tool, _)| *tool == name) {
        Some((_, install)) if e.kind() == std::io::ErrorKind::NotFound => {
            missing_tool(&program, install)
        }
        _ => panic!("cannot run {cmd:?}: {e}"),
    }
}

/// Whether `command args…` runs and succeeds, its output discarded.
pub fn runs(command: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> bool {
    Command::new(command)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `name`, after checking that it runs (`--version` or `version`); [`missing_tool`] naming
/// the Debian package `package` when it does not.
pub fn require(name: &str, package: &str) -> String {
    if !(runs(name, &["--version"]) || runs(name, &["version"])) {
        missing_tool(name, &format!("the Debian package {package}"));
    }
    name.to_owned()
}

/// `name`, one of [`TOOLS`], after checking that it runs (`--version` or `version`);
/// [`missing_tool`] naming its package when it does not.
pub fn tool(name: &str) -> String {
    let (_, install) = TOOLS
        .iter()
        .find(|(tool, _)| *tool == name)
        .unwrap_or_else(|| panic!("{name} is not one of the tools in TOOLS"));
    if !(runs(name, &["--version"]) || runs(name, &["version"])) {
        missing_tool(name, install);
    }
    name.to_owned()
}

/// Runs `cmd` and returns its output, panicking with the output when it fails.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// YAML (one or more documents) as JSON, through PyYAML (Debian: python3-yaml).
pub fn yaml_to_json(yaml: &str) -> serde_json::Value {
    let out = output_with_input(
        Command::new("python3").args([
            "-c",
            "import json, sys, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ]),
        yaml,
    );
    assert!(
        out.status.success(),
        "python3 with PyYAML failed (install python3-yaml):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rules of a rule file (every group's, in order), parsed.
pub fn rules_of(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc = yaml_to_json(&text);
    doc[0]["groups"]
        .as_array()
        .expect("a rule file has groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

/// The alerts of alerts/railscope.rules.yml, parsed, in file order.
pub fn shipped_alerts() -> Vec<serde_json::Value> {
    rules_of(&workspace().join("alerts/railscope.rules.yml"))
        .into_iter()
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// A CA and certificates it signed, made with the openssl CLI (P-256 keys).
pub struct Pki {
    dir: PathBuf,
    name: String,
}

impl Pki {
    /// Makes a CA named `name` in `dir`.
    pub fn new(dir: &Path, name: &str) -> Pki {
        require("openssl", "openssl");
        let pki = Pki {
            dir: dir.to_path_buf(),
            name: name.to_owned(),
        };
        run_ok(
            Command::new("openssl")
                .args([
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-days",
                    "2",
                ])
                .arg("-keyout")
                .arg(pki.ca_key())
                .arg("-out")
                .arg(pki.ca())
                .args(["-subj", &format!("/CN={name} test CA")])
                .args(["-addext", "basicConstraints=critical,CA:TRUE"])
                .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
        );
        pki
    }

    /// The CA's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.crt", self.name))
    }

    fn ca_key(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.key", self.name))
    }

    /// Issues a certificate for `cn`: `server` (SAN 127.0.0.1, localhost) or `client`.
    /// Returns (certificate, key).
    pub fn issue(&self, cn: &str, server: bool) -> (PathBuf, PathBuf) {
        let stem = self.dir.join(format!("{}-{cn}", self.name));
        let (crt, key, csr, ext) = (
            stem.with_extension("crt"),
            stem.with_extension("key"),
            stem.with_extension("csr"),
            stem.with_extension("ext"),
        );
        let usage = if server {
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        } else {
            "extendedKeyUsage=clientAuth\n"
        };
        std::fs::write(
            &ext,
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{usage}"),
        )
        .unwrap();
        run_ok(
            Command::new("openssl")
                .args([
                    "req",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&csr)
                .args(["-subj", &format!("/CN={cn}")]),
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let serial = format!("0x{nanos:x}");
        run_ok(
            Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-set_serial", &serial])
                .arg("-in")
                .arg(&csr)
                .arg("-CA")
                .arg(self.ca())
                .arg("-CAkey")
                .arg(self.ca_key())
                .arg("-extfile")
                .arg(&ext)
                .arg("-out")
                .arg(&crt),
        );
        (crt, key)
    }
}
