//! Hostile sysfs: the real agent reads a fixture tree through a FUSE mirror
//! (`tests/hostile-fs`) that misbehaves on chosen paths: reads that fail with EINVAL, EIO or
//! ENODEV, a whole device whose files fail, a read that blocks far past the scrape timeout,
//! garbage bytes, a megabyte of text, a device that is listed but gone when read, a broken
//! PCI and a broken netdev attribute.
//!
//! One mount and one agent serve every case; the rules change between cases. Against each
//! case the agent must answer every scrape with 200 within the scrape timeout, with output
//! `promtool` accepts, keep every series that does not belong to the broken file or device
//! with its baseline value, drop the broken one, count the error, keep its thread count
//! bounded, and never panic. A blocked device must come back once its read returns. The test
//! prints, per case, the worst scrape time, the thread counts and the series counts. A second
//! test shows a file that refuses reads left alone for its back-off, then read again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use railscope_tests::{
    Agent, Sample, VOLATILE_FAMILIES, fixtures, get, parse_samples, promtool_check_metrics,
};

/// The tree the mount mirrors.
const TREE: &str = "h100-cx7-ndr-ib";
/// What every scrape announces in `X-Prometheus-Scrape-Timeout-Seconds`, and must beat; also
/// the agent's `--scrape.timeout-max`. The agent keeps 0.5 s of it for encoding, and a blocked
/// read is waited for half of what is left: 3 s leaves the rest of a debug build's collection
/// enough time on a loaded two-core machine.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);
/// Scrapes per case (the blocked case takes more).
const SCRAPES: usize = 5;
/// How long the blocked read sleeps: several scrape timeouts.
const BLOCK: Duration = Duration::from_secs(10);
/// Scrapes while the read is blocked.
const BLOCKED_SCRAPES: usize = 12;
/// How many threads past the most any unblocked case used the blocked case may hold: the
/// stuck read's own thread and some slack, far below one per scrape.
const THREAD_SLACK: u64 = 4;

/// The hostile-fs binary Cargo built next to the agent (`cargo build --workspace` builds both).
fn hostile_fs_binary() -> PathBuf {
    let bin = railscope_tests::binary()
        .parent()
        .unwrap()
        .join("railscope-hostile-fs");
    assert!(
        bin.is_file(),
        "{} does not exist: build it first with `cargo build -p railscope-hostile-fs` \
         (scripts/test builds the whole workspace)",
        bin.display()
    );
    bin
}

/// A mounted hostile mirror; unmounted when dropped, also on panic.
struct HostileMount {
    child: Child,
    lines: Receiver<String>,
    mountpoint: PathBuf,
    rules: PathBuf,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl HostileMount {
    fn start(source: &Path) -> HostileMount {
        assert!(
            Path::new("/dev/fuse").exists(),
            "/dev/fuse is missing: this test needs FUSE (load the `fuse` kernel module; in a \
             container, pass the device /dev/fuse and CAP_SYS_ADMIN)"
        );
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("sys");
        std::fs::create_dir(&mountpoint).unwrap();
        let rules = dir.path().join("rules");
        std::fs::write(&rules, "").unwrap();
        let stderr = dir.path().join("hostile-fs.log");
        let mut child = Command::new(hostile_fs_binary())
            .arg(source)
            .arg(&mountpoint)
            .arg(&rules)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut mount = HostileMount {
            child,
            lines,
            mountpoint,
            rules,
            stderr,
            _dir: dir,
        };
        mount.expect_line("mounted");
        mount
    }

    fn expect_line(&mut self, want: &str) {
        match self.lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) if line == want => {}
            got => panic!(
                "railscope-hostile-fs said {got:?}, not {want:?}; its log:\n{}",
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            ),
        }
    }

    /// Puts `rules` in force and waits until the mount says they are.
    fn set_rules(&mut self, rules: &str) {
        let tmp = self.rules.with_extension("new");
        std::fs::write(&tmp, rules).unwrap();
        std::fs::rename(&tmp, &self.rules).unwrap();
        signal("-HUP", self.child.id());
        self.expect_line("reloaded");
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for HostileMount {
    fn drop(&mut self) {
        // SIGTERM: the mount detaches itself and exits; failing that, kill it and detach here.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(' ').nth(4) == self.mountpoint.to_str());
        if mounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
    }
}

fn signal(sig: &str, pid: u32) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// The agent's thread count, from procfs.
fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Series identity: name and labels.
fn key(s: &Sample) -> String {
    format!("{}{:?}", s.name, s.labels)
}

fn volatile(name: &str) -> bool {
    VOLATILE_FAMILIES
        .iter()
        .any(|v| name == *v || (v.ends_with('_') && name.starts_with(v)))
        || matches!(
            name,
            "railscope_collector_errors_total" | "railscope_collector_last_errors"
        )
}

/// Whether any label of `s` has the value `v` (a device name, a PCI address, a netdev).
fn touches(s: &Sample, v: &str) -> bool {
    s.labels.values().any(|x| x == v)
}

fn errors_total(samples: &[Sample], collector: &str) -> f64 {
    samples
        .iter()
        .find(|s| {
            s.name == "railscope_collector_errors_total"
                && s.labels.get("collector").map(String::as_str) == Some(collector)
        })
        .map(|s| s.value)
        .unwrap_or(f64::NAN)
}

fn present(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> bool {
    samples.iter().any(|s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
    })
}

/// One misbehaviour.
struct Case {
    name: &'static str,
    rules: &'static str,
    /// The collector whose error count must rise.
    collector: &'static str,
    /// Series that may differ from the baseline (the broken file's or device's).
    broken: fn(&Sample) -> bool,
    /// Series that must be missing while the rule is in force.
    gone: &'static [(&'static str, &'static [(&'static str, &'static str)])],
    /// Two fragments of the warning the agent must log about it (path, errno or kind).
    logged: (&'static str, &'static str),
    /// An RDMA device the case takes away. Derived rails number the matched GPUs compactly,
    /// so the ports after it may move up a rail; each must keep a rail.
    takes_device: Option<&'static str>,
}

/// What one case measured.
struct Outcome {
    name: &'static str,
    worst: Duration,
    threads: (u64, u64),
    series: usize,
    errors: (f64, f64),
}

struct Run {
    agent: Agent,
    /// The baseline's series by identity, less the volatile families.
    baseline: BTreeMap<String, Sample>,
    failures: Vec<String>,
    outcomes: Vec<Outcome>,
}

impl Run {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    /// One scrape: 200 within the scrape timeout, clean for promtool. Returns its samples and
    /// how long it took.
    fn scrape(&mut self, case: &str, n: usize) -> Option<(Vec<Sample>, Duration)> {
        let start = Instant::now();
        let resp = get(
            self.agent.addr,
            "/metrics",
            &[(
                "X-Prometheus-Scrape-Timeout-Seconds",
                &SCRAPE_TIMEOUT.as_secs().to_string(),
            )],
        );
        let took = start.elapsed();
        let resp = match resp {
            Ok(resp) => resp,
            Err(err) => {
                self.failures
                    .push(format!("{case}: scrape {n} failed after {took:?}: {err}"));
                return None;
            }
        };
        self.check(took < SCRAPE_TIMEOUT, || {
            format!("{case}: scrape {n} took {took:?}, past the {SCRAPE_TIMEOUT:?} scrape timeout")
        });
        if resp.status != 200 {
            self.failures
                .push(format!("{case}: scrape {n} answered {}", resp.status));
            return None;
        }
        let text = resp.text();
        promtool_check_metrics(&text);
        Some((parse_samples(&text), took))
    }

    /// Every baseline series that `broken` does not claim is there with its baseline value.
    fn compare(
        &mut self,
        case: &str,
        n: usize,
        samples: &[Sample],
        broken: &dyn Fn(&Sample) -> bool,
    ) {
        let now: BTreeMap<String, f64> = samples
            .iter()
            .filter(|s| !volatile(&s.name))
            .map(|s| (key(s), s.value))
            .collect();
        let mut lost = Vec::new();
        for (k, b) in self.baseline.iter().filter(|(_, b)| !broken(b)) {
            match now.get(k) {
                Some(x) if *x == b.value => {}
                Some(x) => lost.push(format!("{k} = {x}, baseline {}", b.value)),
                None => lost.push(format!("{k} missing")),
            }
        }
        if !lost.is_empty() {
            let total = lost.len();
            lost.truncate(12);
            self.failures.push(format!(
                "{case}: scrape {n}: {total} unbroken series lost or changed, e.g.:\n    {}",
                lost.join("\n    ")
            ));
        }
    }

    /// Every port of the baseline but those of `gone` still has a rail.
    fn rails_kept(&mut self, case: &str, n: usize, samples: &[Sample], gone: &str) {
        let want: Vec<(String, String)> = self
            .baseline
            .values()
            .filter(|b| b.name == "railscope_rail_info" && !touches(b, gone))
            .map(|b| (b.labels["device"].clone(), b.labels["port"].clone()))
            .collect();
        for (device, port) in want {
            let kept = present(
                samples,
                "railscope_rail_info",
                &[("device", &device), ("port", &port)],
            );
            self.check(kept, || {
                format!("{case}: scrape {n}: {device} port {port} lost its rail")
            });
        }
    }

    fn run_case(&mut self, mount: &mut HostileMount, case: &Case, before: &[Sample]) {
        mount.set_rules(case.rules);
        let pid = self.agent.child.id();
        let errors_before = errors_total(before, case.collector);
        let mut worst = Duration::ZERO;
        let (mut tmin, mut tmax) = (u64::MAX, 0);
        let mut last = Vec::new();
        for n in 1..=SCRAPES {
            let Some((s, took)) = self.scrape(case.name, n) else {
                continue;
            };
            worst = worst.max(took);
            let t = threads(pid);
            tmin = tmin.min(t);
            tmax = tmax.max(t);
            let broken = |x: &Sample| {
                (case.broken)(x) || (case.takes_device.is_some() && x.name == "railscope_rail_info")
            };
            self.compare(case.name, n, &s, &broken);
            if let Some(dev) = case.takes_device {
                self.rails_kept(case.name, n, &s, dev);
            }
            for (name, labels) in case.gone {
                self.check(!present(&s, name, labels), || {
                    format!(
                        "{}: scrape {n}: {name}{labels:?} is still exported",
                        case.name
                    )
                });
            }
            last = s;
        }
        let errors_after = errors_total(&last, case.collector);
        self.check(errors_after > errors_before, || {
            format!(
                "{}: railscope_collector_errors_total{{collector=\"{}\"}} did not rise: {errors_before} -> {errors_after}",
                case.name, case.collector
            )
        });
        let log = self.agent.log();
        let (path, why) = case.logged;
        self.check(
            log.lines()
                .any(|l| l.contains("\"level\":\"WARN\"") && l.contains(path) && l.contains(why)),
            || {
                format!(
                    "{}: no warning naming {path} and {why} in the log",
                    case.name
                )
            },
        );
        self.outcomes.push(Outcome {
            name: case.name,
            worst,
            threads: (tmin, tmax),
            series: last.len(),
            errors: (errors_before, errors_after),
        });
    }
}

fn dev_port(s: &Sample, dev: &str) -> bool {
    s.labels.get("device").map(String::as_str) == Some(dev)
        && s.labels.get("port").map(String::as_str) == Some("1")
}

fn read_errors_of(s: &Sample, dev: &str) -> bool {
    s.name == "railscope_ib_device_read_errors" && touches(s, dev)
}

const CASES: &[Case] = &[
    Case {
        name: "EINVAL on a PMA counter",
        rules: "**/infiniband/mlx5_0/ports/1/counters/symbol_error read-errno EINVAL\n",
        collector: "infiniband",
        broken: |s| {
            read_errors_of(s, "mlx5_0")
                || (dev_port(s, "mlx5_0")
                    && (s.name == "railscope_ib_port_symbol_errors_total"
                        || (s.name == "railscope_ib_port_pma_saturated"
                            && s.labels["counter"] == "symbol_error")))
        },
        gone: &[(
            "railscope_ib_port_symbol_errors_total",
            &[("device", "mlx5_0"), ("port", "1")],
        )],
        logged: ("counters/symbol_error", "\"errno\":\"EINVAL\""),
        takes_device: None,
    },
    Case {
        name: "EIO on a PMA counter",
        rules: "**/infiniband/mlx5_1/ports/1/counters/port_rcv_errors read-errno EIO\n",
        collector: "infiniband",
        broken: |s| {
            read_errors_of(s, "mlx5_1")
                || (dev_port(s, "mlx5_1")
                    && (s.name == "railscope_ib_port_receive_errors_total"
                        || (s.name == "railscope_ib_port_pma_saturated"
                            && s.labels["counter"] == "port_rcv_errors")))
        },
        gone: &[(
            "railscope_ib_port_receive_errors_total",
            &[("device", "mlx5_1"), ("port", "1")],
        )],
        logged: ("counters/port_rcv_errors", "\"errno\":\"EIO\""),
        takes_device: None,
    },
    Case {
        name: "ENODEV opening a PMA counter",
        rules: "**/infiniband/mlx5_2/ports/1/counters/link_downed open-errno ENODEV\n",
        collector: "infiniband",
        broken: |s| {
            read_errors_of(s, "mlx5_2")
                || (dev_port(s, "mlx5_2")
                    && (s.name == "railscope_ib_port_link_downed_total"
                        || (s.name == "railscope_ib_port_pma_saturated"
                            && s.labels["counter"] == "link_downed")))
        },
        gone: &[(
            "railscope_ib_port_link_downed_total",
            &[("device", "mlx5_2"), ("port", "1")],
        )],
        logged: ("counters/link_downed", "\"errno\":\"ENODEV\""),
        takes_device: None,
    },
    Case {
        name: "EIO on every file of a device",
        rules: "devices/**/infiniband/mlx5_3 read-errno EIO\n",
        collector: "infiniband",
        broken: |s| touches(s, "mlx5_3"),
        gone: &[
            ("railscope_ib_port_state", &[("device", "mlx5_3")]),
            (
                "railscope_ib_port_symbol_errors_total",
                &[("device", "mlx5_3")],
            ),
            ("railscope_rdma_port_hw_stat_total", &[("device", "mlx5_3")]),
        ],
        logged: ("mlx5_3/ports/1/state", "\"errno\":\"EIO\""),
        takes_device: None,
    },
    Case {
        name: "garbage bytes in a port's rate",
        rules: "**/infiniband/mlx5_4/ports/1/rate garbage\n",
        collector: "infiniband",
        broken: |s| {
            read_errors_of(s, "mlx5_4")
                || (dev_port(s, "mlx5_4")
                    && matches!(
                        s.name.as_str(),
                        "railscope_ib_port_rate_bytes_per_second"
                            | "railscope_ib_port_link_width_lanes"
                            | "railscope_ib_port_info"
                    ))
        },
        gone: &[
            (
                "railscope_ib_port_rate_bytes_per_second",
                &[("device", "mlx5_4"), ("port", "1")],
            ),
            (
                "railscope_ib_port_link_width_lanes",
                &[("device", "mlx5_4"), ("port", "1")],
            ),
        ],
        logged: ("mlx5_4/ports/1/rate", "\"kind\":\"parse\""),
        takes_device: None,
    },
    Case {
        name: "1 MiB of text in a port's phys_state",
        rules: "**/infiniband/mlx5_5/ports/1/phys_state big 1048576\n",
        collector: "infiniband",
        broken: |s| {
            read_errors_of(s, "mlx5_5")
                || (dev_port(s, "mlx5_5")
                    && matches!(
                        s.name.as_str(),
                        "railscope_ib_port_phys_state" | "railscope_ib_port_info"
                    ))
        },
        gone: &[(
            "railscope_ib_port_phys_state",
            &[("device", "mlx5_5"), ("port", "1")],
        )],
        logged: ("mlx5_5/ports/1/phys_state", "\"errno\":\"EFBIG\""),
        takes_device: None,
    },
    // A device that is gone takes with it what only it brought: its PCI function and the
    // bridge port above it (the pci source follows RDMA devices to their NICs).
    Case {
        name: "device listed, then gone (class link)",
        rules: "class/infiniband/mlx5_6 vanish\n",
        collector: "infiniband",
        broken: |s| {
            touches(s, "mlx5_6") || touches(s, "0000:ce:00.0") || touches(s, "0000:cd:00.0")
        },
        gone: &[("railscope_ib_port_state", &[("device", "mlx5_6")])],
        logged: ("mlx5_6", "\"kind\":\"vanished\""),
        takes_device: Some("mlx5_6"),
    },
    Case {
        name: "device listed, then gone (device directory)",
        rules: "devices/**/infiniband/mlx5_7 vanish\n",
        collector: "infiniband",
        broken: |s| {
            touches(s, "mlx5_7") || touches(s, "0000:dc:00.0") || touches(s, "0000:db:00.0")
        },
        gone: &[("railscope_ib_port_state", &[("device", "mlx5_7")])],
        logged: ("mlx5_7", "\"kind\":\"vanished\""),
        takes_device: Some("mlx5_7"),
    },
    Case {
        name: "EIO on a NIC's PCI current_link_speed",
        rules: "devices/**/0000:18:00.0/current_link_speed read-errno EIO\n",
        collector: "pci",
        broken: |s| {
            s.name == "railscope_pci_link_speed_transfers_per_second" && touches(s, "0000:18:00.0")
        },
        gone: &[(
            "railscope_pci_link_speed_transfers_per_second",
            &[("pci_address", "0000:18:00.0")],
        )],
        logged: ("current_link_speed", "\"errno\":\"EIO\""),
        takes_device: None,
    },
    Case {
        name: "EINVAL on a netdev's mtu",
        rules: "devices/**/net/ibp24s0/mtu read-errno EINVAL\n",
        collector: "netdev",
        broken: |s| s.name == "railscope_netdev_mtu_bytes" && touches(s, "ibp24s0"),
        gone: &[("railscope_netdev_mtu_bytes", &[("netdev", "ibp24s0")])],
        logged: ("ibp24s0/mtu", "\"errno\":\"EINVAL\""),
        takes_device: None,
    },
];

/// The blocked device of the last case.
const STUCK: &str = "mlx5_1";

/// What may differ from the baseline while `STUCK` is blocked: its own series, whether the
/// collector succeeded, and the timeout count. Its NIC's PCI series and every other port's
/// rail stay exactly as they were: a blocked device's links still resolve, so the pci and
/// topology collectors still find the NIC behind it.
fn blocked_may_differ(s: &Sample) -> bool {
    touches(s, STUCK)
        || s.name == "railscope_collector_success"
        || s.name == "railscope_sysfs_read_timeouts_total"
}

/// The agent on the mount, with the tree's procfs, and `extra` flags.
fn agent_on(mount: &HostileMount, extra: &[&str]) -> Agent {
    let proc = fixtures().join(TREE).join("proc");
    let mut args = vec![
        "--path.sysfs",
        mount.mountpoint.to_str().unwrap(),
        "--path.procfs",
        proc.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Agent::start(&args)
}

#[test]
fn hostile_sysfs_costs_only_what_is_broken() {
    let started = Instant::now();
    let mut mount = HostileMount::start(&fixtures().join(TREE).join("sys"));
    let agent = agent_on(
        &mount,
        &[
            "--collector.gpu.nvml-library",
            "/nonexistent/libnvidia-ml.so.1",
            "--scrape.timeout-max",
            &format!("{}s", SCRAPE_TIMEOUT.as_secs()),
            "--log.format",
            "json",
            // Each case starts from a healed tree: files that refused reads in one case are
            // read again in the next at once. The back-off has a test of its own below.
            "--sysfs.refused-backoff",
            "0s",
        ],
    );
    let pid = agent.child.id();
    let mut run = Run {
        agent,
        baseline: BTreeMap::new(),
        failures: Vec::new(),
        outcomes: Vec::new(),
    };

    // Baseline: the same tree through the same mount, nothing broken.
    let mut worst = Duration::ZERO;
    let (mut tmin, mut tmax) = (u64::MAX, 0);
    let mut base = Vec::new();
    for n in 1..=3 {
        let (s, took) = run
            .scrape("baseline", n)
            .unwrap_or_else(|| panic!("baseline scrape {n} failed: {:?}", run.failures));
        worst = worst.max(took);
        let t = threads(pid);
        tmin = tmin.min(t);
        tmax = tmax.max(t);
        base = s;
    }
    assert!(
        run.failures.is_empty(),
        "the baseline must pass: {:?}",
        run.failures
    );
    assert_eq!(
        base.iter()
            .filter(|s| s.name == "railscope_ib_port_state")
            .count(),
        8,
        "the baseline exports every port"
    );
    for s in base
        .iter()
        .filter(|s| s.name == "railscope_collector_success")
    {
        assert_eq!(s.value, 1.0, "baseline: {s:?}");
    }
    run.baseline = base
        .iter()
        .filter(|s| !volatile(&s.name))
        .map(|s| (key(s), s.clone()))
        .collect();
    run.outcomes.push(Outcome {
        name: "baseline (no misbehaviour)",
        worst,
        threads: (tmin, tmax),
        series: base.len(),
        errors: (f64::NAN, errors_total(&base, "infiniband")),
    });

    let mut before = base.clone();
    for case in CASES {
        run.run_case(&mut mount, case, &before);
        // The next case starts from a clean tree: its error count is read after the reset.
        mount.set_rules("");
        match run.scrape(case.name, 0) {
            Some((s, _)) => before = s,
            None => before = Vec::new(),
        }
    }
    let unblocked_max = run.outcomes.iter().map(|o| o.threads.1).max().unwrap();

    // A read of one port's `state` blocks for several scrape timeouts.
    let case = "read blocked 10 s on a port's state";
    mount.set_rules(&format!(
        "**/infiniband/{STUCK}/ports/1/state block {}\n",
        BLOCK.as_secs()
    ));
    let blocked_at = Instant::now();
    let errors_before = errors_total(&before, "infiniband");
    let mut worst = Duration::ZERO;
    let (mut tmin, mut tmax) = (u64::MAX, 0);
    let mut last = Vec::new();
    let mut thread_counts = Vec::new();
    let mut stuck_timeouts = None;
    for n in 1..=BLOCKED_SCRAPES {
        let Some((s, took)) = run.scrape(case, n) else {
            continue;
        };
        let finished = blocked_at.elapsed();
        worst = worst.max(took);
        let t = threads(pid);
        thread_counts.push(t);
        tmin = tmin.min(t);
        tmax = tmax.max(t);
        // Everything not of the stuck device stays; collector success may go either way.
        run.compare(case, n, &s, &blocked_may_differ);
        run.rails_kept(case, n, &s, STUCK);
        // Before the blocked read can have returned, the stuck device is skipped and named,
        // and its one read is the only one that timed out, however many scrapes come.
        if n > 1 && finished < BLOCK {
            run.check(
                !present(&s, "railscope_ib_port_state", &[("device", STUCK)]),
                || format!("{case}: scrape {n}: {STUCK} state exported while its read is stuck"),
            );
            let named = s.iter().any(|x| {
                x.name == "railscope_sysfs_blocked_seconds"
                    && x.labels.get("path").is_some_and(|p| p.ends_with(STUCK))
                    && x.value > 0.0
            });
            run.check(named, || {
                format!("{case}: scrape {n}: no railscope_sysfs_blocked_seconds for {STUCK}")
            });
            // The first scrape may time out more than the stuck read (a slow read near the
            // deadline); after it, nothing new times out while the device is skipped.
            let timeouts = s
                .iter()
                .find(|x| x.name == "railscope_sysfs_read_timeouts_total")
                .map(|x| x.value);
            let first = *stuck_timeouts.get_or_insert(timeouts);
            run.check(
                timeouts.is_some_and(|t| t >= 1.0) && timeouts == first,
                || {
                    format!(
                        "{case}: scrape {n}: railscope_sysfs_read_timeouts_total is {timeouts:?}, \
                         was {first:?} on the first scrape after the block"
                    )
                },
            );
        }
        last = s;
    }
    let errors_after = errors_total(&last, "infiniband");
    run.check(errors_after > errors_before, || {
        format!(
            "{case}: railscope_collector_errors_total{{collector=\"infiniband\"}} did not rise: {errors_before} -> {errors_after}"
        )
    });
    run.check(tmax <= unblocked_max + THREAD_SLACK, || {
        format!(
            "{case}: threads pile up: {thread_counts:?} (unblocked cases peaked at {unblocked_max})"
        )
    });

    let log = run.agent.log();
    let stuck_file = format!("{STUCK}/ports/1/state");
    run.check(
        log.lines().any(|l| {
            l.contains("\"level\":\"WARN\"") && l.contains(&stuck_file) && l.contains("blocked")
        }),
        || format!("{case}: no warning of a blocked read naming {stuck_file} in the log"),
    );

    // The fault clears; once the stuck read returns, the device comes back. The scrape that
    // first shows it again may have read other sources before it returned; the one after it
    // is the baseline again.
    mount.set_rules("");
    let mut back = None;
    let mut n = BLOCKED_SCRAPES;
    let give_up = BLOCK * 2 + SCRAPE_TIMEOUT;
    while back.is_none() && blocked_at.elapsed() < give_up {
        n += 1;
        if let Some((s, took)) = run.scrape(case, n) {
            worst = worst.max(took);
            let t = threads(pid);
            tmin = tmin.min(t);
            tmax = tmax.max(t);
            if present(&s, "railscope_ib_port_state", &[("device", STUCK)]) {
                back = Some(blocked_at.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    run.check(back.is_some(), || {
        format!("{case}: {STUCK} did not come back within {give_up:?} of the block")
    });
    if back.is_some() {
        n += 1;
        if let Some((s, took)) = run.scrape(case, n) {
            worst = worst.max(took);
            run.compare(case, n, &s, &|s| {
                s.name == "railscope_sysfs_read_timeouts_total"
            });
            last = s;
        }
    }
    run.outcomes.push(Outcome {
        name: case,
        worst,
        threads: (tmin, tmax),
        series: last.len(),
        errors: (errors_before, errors_after),
    });

    // Never panicked, still serving.
    let alive = run.agent.child.try_wait().unwrap().is_none();
    run.check(alive, || "the agent exited".to_owned());
    let log = run.agent.log();
    run.check(!log.contains("panicked"), || {
        format!("the agent panicked:\n{log}")
    });
    run.check(mount.alive(), || "railscope-hostile-fs exited".to_owned());

    let mut report = format!(
        "hostile sysfs ({TREE}, scrape timeout {SCRAPE_TIMEOUT:?}, {:.1} s in all):\n",
        started.elapsed().as_secs_f64()
    );
    report.push_str(&format!(
        "  {:<46} {:>12} {:>10} {:>14} {:>20}\n",
        "case", "worst scrape", "threads", "series", "errors_total"
    ));
    let base_series = run.outcomes[0].series;
    for o in &run.outcomes {
        report.push_str(&format!(
            "  {:<46} {:>9.0} ms {:>5}-{:<4} {:>6} / {:<5} {:>8} -> {:<8}\n",
            o.name,
            o.worst.as_secs_f64() * 1000.0,
            o.threads.0,
            o.threads.1,
            o.series,
            base_series,
            o.errors.0,
            o.errors.1
        ));
    }
    if let Some(back) = back {
        report.push_str(&format!(
            "  {STUCK} back {:.1} s after its read blocked\n",
            back.as_secs_f64()
        ));
    }
    println!("{report}");
    assert!(
        run.failures.is_empty(),
        "{} failed checks:\n  {}\n\n{report}",
        run.failures.len(),
        run.failures.join("\n  ")
    );
}

/// A file the driver refuses (EINVAL at every read, as ConnectX limited PFs answer some
/// attributes) through the FUSE mount: the refusal is counted once and its series is absent;
/// while it backs off the file is not read, which shows once it is healed: its series stays
/// absent until the back-off ends, then comes back.
#[test]
fn a_refused_file_is_left_alone_while_it_backs_off() {
    const BACKOFF: Duration = Duration::from_secs(5);
    let mut mount = HostileMount::start(&fixtures().join(TREE).join("sys"));
    let agent = agent_on(
        &mount,
        &[
            "--collector.disable-defaults",
            "--collector.infiniband",
            "--sysfs.refused-backoff",
            &format!("{}s", BACKOFF.as_secs()),
        ],
    );
    let series = (
        "railscope_ib_port_symbol_errors_total",
        [("device", "mlx5_0"), ("port", "1")],
    );
    let scrape = || parse_samples(&agent.scrape());
    let refused = |s: &[Sample]| {
        s.iter()
            .find(|x| x.name == "railscope_sysfs_refused_files")
            .map(|x| x.value)
    };
    let before = scrape();
    assert!(present(&before, series.0, &series.1));
    let errors_before = errors_total(&before, "infiniband");

    mount.set_rules("**/infiniband/mlx5_0/ports/1/counters/symbol_error read-errno EINVAL\n");
    let refused_at = Instant::now();
    let first = scrape();
    assert!(!present(&first, series.0, &series.1));
    assert!(present(&first, series.0, &[("device", "mlx5_1")]));
    assert_eq!(errors_total(&first, "infiniband"), errors_before + 1.0);
    assert_eq!(refused(&first), Some(1.0));
    // Counted once: more scrapes during the back-off add no error.
    for _ in 0..3 {
        let s = scrape();
        assert!(!present(&s, series.0, &series.1));
        assert_eq!(errors_total(&s, "infiniband"), errors_before + 1.0);
    }
    // Healed, but not read while it backs off: still absent.
    mount.set_rules("");
    let healed = scrape();
    assert!(
        refused_at.elapsed() < BACKOFF,
        "too slow to see the back-off: {:?}",
        refused_at.elapsed()
    );
    assert!(
        !present(&healed, series.0, &series.1),
        "read during its back-off"
    );
    // The back-off ends: read again, exported, forgotten.
    std::thread::sleep(BACKOFF.saturating_sub(refused_at.elapsed()) + Duration::from_millis(500));
    let back = scrape();
    assert!(present(&back, series.0, &series.1));
    assert_eq!(refused(&back), Some(0.0));
    assert_eq!(errors_total(&back, "infiniband"), errors_before + 1.0);
}
