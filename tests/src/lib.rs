//! Helpers for railscope's end-to-end tests: find and start the real `railscope` binary
//! against a fixture tree, talk HTTP to it, parse and normalize its exposition, and run
//! `promtool`.
//!
//! The binary is `$RAILSCOPE_BIN` when set (to test an installed package), else the one Cargo
//! built next to the test executable (`target/<profile>/railscope`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod gpu;
pub mod kubelet;
pub mod names;
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
    /// The child process.
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

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
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(binary())
            .arg("--web.listen-address")
            .arg(&listen)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut agent = Agent {
            child,
            addr: listen.parse().unwrap(),
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = agent.child.try_wait().unwrap() {
                panic!("railscope exited with {status}:\n{}", agent.log());
            }
            if get(agent.addr, "/-/healthy", &[]).is_ok_and(|resp| resp.status == 200) {
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

    /// Waits until `/-/ready` answers 200 (the start-up collection is done).
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("railscope exited with {status}:\n{}", self.log());
            }
            if get(self.addr, "/-/ready", &[]).is_ok_and(|resp| resp.status == 200) {
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
        get(self.addr, path, headers).unwrap()
    }

    /// Scrapes `/metrics` in the Prometheus text format.
    pub fn scrape(&self) -> String {
        let resp = self.get("/metrics", &[]);
        assert_eq!(resp.status, 200);
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
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Parses the samples of a Prometheus text exposition (enough of the format for the tests:
/// the agent's own output).
pub fn parse_samples(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap(),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => (
                name.to_owned(),
                parse_labels(rest.strip_suffix('}').unwrap()),
            ),
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

fn parse_labels(mut text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !text.is_empty() {
        let (name, rest) = text.split_once("=\"").unwrap();
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let mut end = rest.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => {}
                },
                '"' => {
                    end = i;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(name.to_owned(), value);
        text = rest[end + 1..].trim_start_matches(',');
    }
    labels
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
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}); install the Debian package `prometheus`")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
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

/// `name`, after checking that it runs (`--version` or `version`): a missing tool is a
/// failure naming the Debian package to install, never a skip.
pub fn require(name: &str, package: &str) -> String {
    let runs = |arg: &str| {
        Command::new(name)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(
        runs("--version") || runs("version"),
        "{name} is missing: install the Debian package {package}"
    );
    name.to_owned()
}

/// A tool of the Debian packages prometheus and prometheus-alertmanager ([`require`]).
pub fn tool(name: &str) -> String {
    require(name, "prometheus or prometheus-alertmanager")
}

/// Runs `cmd` and returns its output, panicking with the output when it fails.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
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
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install python3 and python3-yaml"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
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
