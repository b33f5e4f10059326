//! The end-to-end proof of the alert rules: four railscope agents on loopback, each on its
//! own copy of the DGX H100 fixture tree and fake NVML fixture, and a fifth RoCE node in a
//! network namespace of its own whose veth reports mlx5 PFC statistics through the
//! `tests/fake-ethtool` LD_PRELOAD shim, and two GB200 compute trays of one NVL72 rack (one
//! NVLink domain, fake NVML only), all scraped by a real Prometheus (Debian package) with the
//! rules loaded, alerting through a real Alertmanager (with the shipped NVLink-domain inhibit
//! rule) to a webhook receiver in this test. Faults are injected by changing fixture files
//! during the run (a port at 2X, a rail whose counters stop, a lost GPU, an inactive NVLink,
//! PFC pause time climbing, one node's bad cable that must not raise the rail's fleet alert, an
//! XID only the kernel log saw; in the rack, an unhealthy GPU and a lost one that must raise one
//! domain alert above their own, a C2C link down, NVLink FEC high bins climbing), and the test
//! asserts that exactly the matching alerts arrive, with the right labels, and that the
//! dashboards' queries return data. The same fleet and faults run again on sharded Prometheus
//! (two shards with the node-local rules, VictoriaMetrics, vmalert with the fleet-wide rules;
//! Debian package `victoria-metrics`), and the same alerts must arrive.
//!
//! The fleet's agents run on sysfs fixtures, where the neighbour collector has nothing to
//! hear (no LLDP frames, no umad device): its collector is off on them, and a switch layer
//! in this test serves each node's neighbour series instead (the switch and switch port at
//! the far end of every port, as the collector exports them), scraped by the same Prometheus
//! with `honor_labels` under the node's `instance` and the agents' `job`, by the shard that
//! scrapes the node. The collector itself is tested against lldpd and SMP byte replies
//! elsewhere (tests/tests/net/lldp.rs, the neighbour source's tests). On it: two nodes'
//! rail-3 ports behind one leaf log symbol errors (one switch alert, their port alerts
//! inhibited beneath it) and one node's rail-5 cable moves to another leaf (miscabled).
//!
//! The rules run with every duration divided by 60 (`for: 10m` becomes `for: 10s`, `[5m]`
//! becomes `[5s]`) and a one-second scrape and evaluation interval, so the run fits in CI.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::Fixture;
use railscope_tests::{binary, fixtures, free_port, get, kubelet, tool, webhook, workspace};

/// A network namespace with a veth pair to it, removed when dropped: the test host of the
/// RoCE node, whose netdev is a real link in its namespace.
struct Netns {
    name: String,
    host_if: String,
}

impl Netns {
    fn create() -> Netns {
        let id = std::process::id() % 10_000;
        let ns = Netns {
            name: format!("rsfleet{id}"),
            host_if: format!("rsfa{id}"),
        };
        let peer = format!("rsfb{id}");
        let run = |args: &[&str]| {
            let out = Command::new("ip")
                .args(args)
                .output()
                .expect("the ip tool (Debian package iproute2)");
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let _ = Command::new("ip").args(["netns", "del", &ns.name]).output();
        let _ = Command::new("ip")
            .args(["link", "del", &ns.host_if])
            .output();
        run(&["netns", "add", &ns.name]);
        run(&[
            "link",
            "add",
            &ns.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
        ]);
        run(&["link", "set", &peer, "netns", &ns.name]);
        run(&["addr", "add", "10.233.77.1/30", "dev", &ns.host_if]);
        run(&["link", "set", &ns.host_if, "up"]);
        run(&[
            "netns",
            "exec",
            &ns.name,
            "ip",
            "addr",
            "add",
            "10.233.77.2/30",
            "dev",
            &peer,
        ]);
        run(&["netns", "exec", &ns.name, "ip", "link", "set", &peer, "up"]);
        run(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"]);
        ns
    }

    fn peer(&self) -> String {
        self.host_if.replace("rsfa", "rsfb")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

/// mlx5 statistics of a netdev with PFC on priority 3, as `<name> <value>` lines.
fn write_ethtool_stats(path: &Path, rx_pause_us: u64) {
    std::fs::write(
        path,
        format!(
            "rx_prio3_pause 1200\nrx_prio3_pause_duration {rx_pause_us}\ntx_prio3_pause 35\ntx_prio3_pause_duration 2100\nrx_prio3_pause_transition 600\ntx_pause_storm_warning_events 0\ntx_pause_storm_error_events 0\n\
             rx_prio3_bytes 81234567890\nrx_prio3_packets 20112233\ntx_prio3_bytes 80123456789\ntx_prio3_packets 19887766\n\
             rx_prio3_discards 0\nrx_prio3_buf_discard 12\nrx_prio3_cong_discard 0\nrx_prio3_marked 4410\nrx_out_of_buffer 3\n\
             rx_discards_phy 0\ntx_discards_phy 0\nrx_pause_ctrl_phy 1200\ntx_pause_ctrl_phy 35\nrx_corrected_bits_phy 901\n\
             rx_pcs_symbol_err_phy 0\nlink_down_events_phy 1\nrx_vport_rdma_unicast_packets 19000000\n\
             rx_vport_rdma_unicast_bytes 79000000000\ntx_vport_rdma_unicast_packets 18800000\n\
             tx_vport_rdma_unicast_bytes 78500000000\nrx_ecn_mark 0\n"
        ),
    )
    .unwrap();
}

/// Kills the child processes when the test ends, however it ends.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The rule file with durations divided by 60 for a fast run.
fn fast_rules() -> String {
    fast("alerts/railscope.rules.yml")
}

/// A rule file of the repository (`alerts/...`) with durations divided by 60, as above.
fn fast(file: &str) -> String {
    let rules = std::fs::read_to_string(workspace().join(file)).unwrap();
    let mut out = String::with_capacity(rules.len());
    let mut rest = rules.as_str();
    // Durations appear as `[<n><unit>]`, `for: <n><unit>`, `offset <n><unit>` and
    // `interval: <n><unit>`; scale each number+unit token.
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (number, after) = tail.split_at(digits);
        let prev = out.chars().last().unwrap_or(' ');
        let duration_context = matches!(prev, '[' | ' ')
            && (out.ends_with("for: ")
                || out.ends_with("offset ")
                || out.ends_with("interval: ")
                || prev == '[');
        let unit = after.chars().next().unwrap_or(' ');
        let next = after.chars().nth(1).unwrap_or(' ');
        let is_unit = matches!(unit, 'm' | 'h') && !next.is_ascii_alphanumeric();
        if duration_context && is_unit {
            out.push_str(number);
            out.push(if unit == 'm' { 's' } else { 'm' });
            rest = &after[1..];
        } else {
            out.push_str(number);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// One simulated node: a copy of the fixture tree and of the fake NVML fixture.
struct Node {
    name: String,
    sys: PathBuf,
    nvml: PathBuf,
    /// The file of /dev/kmsg records its kmsg collector follows.
    kmsg: PathBuf,
    port: u16,
}

fn copy_tree(from: &Path, to: &Path) {
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success()
    );
}

/// Adds `words` to a PMA data counter file. The new value is written beside the node's tree
/// and renamed over the counter, so that the agent never reads the file truncated and empty
/// (`fs::write` truncates first): that read is an error of its collector.
fn bump(path: &Path, words: u64) {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let v: u64 = std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let root = path
        .ancestors()
        .find(|a| a.ends_with("sys"))
        .and_then(Path::parent)
        .unwrap();
    let tmp = root.join(format!(".bump-{}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, format!("{}\n", v + words)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn wait_http(port: u16, path: &str) {
    wait_http_at("127.0.0.1", port, path);
}

fn wait_http_at(host: &str, port: u16, path: &str) {
    let addr = format!("{host}:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !get(addr, path, &[]).is_ok_and(|r| r.status == 200) {
        assert!(
            Instant::now() < deadline,
            "127.0.0.1:{port}{path} never answered"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The switch layer: each node's `railscope_neighbour_*` series, as the neighbour collector
/// exports them, at `/<node>` (see the module comment). Rail k's port of every IB node is
/// behind leaf k (`MF0;leaf-r<k>:MQM9700/U1`, switch port = the node's number) over SMPs, the
/// far end trained as the host (4X NDR); the RoCE node's netdev is behind `tor-roce` over
/// LLDP. Once `moved` is set, n2's rail-5 cable is in another leaf's port.
struct Switches {
    port: u16,
}

fn neighbour_series(node: &str, roce_netdev: &str, moved: bool, now: f64) -> String {
    let mut out = String::from(
        "# TYPE railscope_neighbour_info gauge
# TYPE railscope_neighbour_status gauge
# TYPE railscope_neighbour_changes_total counter
",
    );
    let statuses = [
        "ok",
        "no_frames",
        "not_available",
        "refused",
        "no_permission",
        "timeout",
    ];
    let mut link = |labels: String,
                    name: &str,
                    id: &str,
                    port: &str,
                    description: &str,
                    changes: u32,
                    ib: bool| {
        out.push_str(&format!(
            "railscope_neighbour_info{{{labels},neighbour=\"{name}\",neighbour_id=\"{id}\",neighbour_port=\"{port}\",neighbour_port_description=\"{description}\"}} 1\n"
        ));
        for status in statuses {
            out.push_str(&format!(
                "railscope_neighbour_status{{{labels},status=\"{status}\"}} {}\n",
                u8::from(status == "ok")
            ));
        }
        out.push_str(&format!(
            "railscope_neighbour_changes_total{{{labels}}} {changes}\nrailscope_neighbour_last_seen_timestamp_seconds{{{labels}}} {now}\n"
        ));
        if ib {
            out.push_str(&format!(
                "railscope_neighbour_link_width_lanes{{{labels}}} 4\nrailscope_neighbour_rate_bytes_per_second{{{labels}}} 50000000000\n"
            ));
        } else {
            out.push_str(&format!(
                "railscope_neighbour_ttl_seconds{{{labels}}} 120\nrailscope_neighbour_max_frame_size_bytes{{{labels}}} 9216\n"
            ));
        }
    };
    let base = format!("instance=\"{node}\",job=\"railscope\"");
    if node == "n5" {
        link(
            format!("{base},device=\"\",port=\"\",netdev=\"{roce_netdev}\",protocol=\"lldp\""),
            "tor-roce",
            "aa:bb:cc:00:01:00",
            "Ethernet1/5",
            "to n5",
            0,
            false,
        );
        return out;
    }
    let number = &node[1..];
    for rail in 0..8 {
        let labels =
            format!("{base},device=\"mlx5_{rail}\",port=\"1\",netdev=\"\",protocol=\"smp\"");
        let (leaf, port, changes) = if moved && node == "n2" && rail == 5 {
            (
                "MF0;leaf-r5-spare:MQM9700/U1".to_owned(),
                "33".to_owned(),
                1,
            )
        } else {
            (format!("MF0;leaf-r{rail}:MQM9700/U1"), number.to_owned(), 0)
        };
        link(
            labels,
            &leaf,
            &format!("0xb8cef60300a1b2{rail:02x}"),
            &port,
            "",
            changes,
            true,
        );
    }
    out
}

impl Switches {
    fn start(roce_netdev: String, moved: Arc<AtomicBool>) -> Switches {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match std::io::Read::read(&mut stream, &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let node = text
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .trim_start_matches('/')
                    .to_owned();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64()
                    .floor();
                let body =
                    neighbour_series(&node, &roce_netdev, moved.load(Ordering::Relaxed), now);
                let _ = std::io::Write::write_all(
                    &mut stream,
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        });
        Switches { port }
    }

    /// The scrape job of the switch layer: one target per node at `/<node>`, carrying the
    /// address of the node's agent (`__tmp_agent`), which a shard keeps or drops as it does the
    /// agent (`__address__` there).
    fn scrape_config(&self, nodes: &[(String, String)]) -> String {
        let mut out = String::from(
            "  - job_name: switch-layer\n    honor_labels: true\n    static_configs:\n",
        );
        for (node, agent) in nodes {
            out.push_str(&format!(
                "      - targets: ['127.0.0.1:{}']\n        labels:\n          __metrics_path__: /{node}\n          __tmp_agent: '{agent}'\n",
                self.port
            ));
        }
        out
    }
}

/// The fleet tests start many processes and a network namespace each: one at a time.
static ONE_FLEET: Mutex<()> = Mutex::new(());

#[test]
fn injected_faults_reach_alertmanager_as_exactly_the_matching_alerts() {
    fleet(Rules::OnePrometheus);
}

/// The same fleet and faults on sharded Prometheus: two shards (every other target), each
/// scraping its half of the nodes and evaluating the node-local rules
/// (`alerts/railscope.node.rules.yml`), remote-writing to VictoriaMetrics, where `vmalert`
/// evaluates the fleet-wide rules (`alerts/railscope.fleet.rules.yml`). The same alerts must
/// arrive with the same labels, the fleet-wide ones (n1's port below its peers) included,
/// whichever shard its peers are on.
#[test]
fn on_sharded_prometheus_and_victoriametrics_the_same_alerts_arrive() {
    fleet(Rules::Sharded);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// One Prometheus scrapes every node and evaluates every rule.
    OnePrometheus,
    /// Two Prometheus shards with the node-local rules, VictoriaMetrics and vmalert with the
    /// fleet-wide ones.
    Sharded,
}

/// What the fleet's GPUs report beyond the H100 fixture, healthy throughout, so that every
/// dashboard panel has data: GPM activity, the clock-event counters, NVLink5 counters on
/// every link and NVLink-C2C (Blackwell and Grace-Blackwell report these; the fleet is a test
/// of the rules and dashboards, not a model of one machine), a fabric route recovery in
/// progress on one GPU (transient: no alert), and on node 1 GPU 7 in MIG mode.
fn healthy_telemetry(f: &mut Fixture, node: usize) {
    use nvidia_ml_fake::fixture::{
        C2c, C2cLink, FieldOverride, FieldType, Gpm, Memory, Mig, MigDevice, NvLink5,
    };
    for (g, gpu) in f.gpus.iter_mut().enumerate() {
        let load = 80.0 + g as f64;
        gpu.gpm = Some(Gpm {
            metrics: [
                (1, load + 10.0),
                (2, load),
                (3, 30.0),
                (4, 2.0),
                (5, load - 10.0),
                (7, load - 10.0),
                (10, 40.0),
                (11, 0.0),
                (12, 5.0),
                (13, 1.0),
                (20, 2000.0),
                (21, 6000.0),
                (60, 90_000.0),
                (61, 90_000.0),
            ]
            .into_iter()
            .collect(),
        });
        // Driver 550: the thermal and power-brake counters are ids 251-253.
        for id in [74, 76, 251, 252, 253] {
            gpu.fields.push(FieldOverride {
                id,
                scope: None,
                value: 1_000_000.0,
                value_type: FieldType::Ull,
                error: None,
            });
        }
        for link in &mut gpu.nvlinks {
            link.nvlink5 = Some(NvLink5 {
                effective_ber: 1e-15,
                symbol_ber: 2e-9,
                ..NvLink5::default()
            });
        }
        gpu.c2c = Some(C2c {
            links: vec![
                C2cLink {
                    active: true,
                    max_bw_mbps: 44_712,
                };
                2
            ],
            ..C2c::default()
        });
    }
    if let Some(fabric) = f.gpus[0].fabric.as_mut() {
        // Route recovery TRUE, the other conditions FALSE.
        fabric.health_mask = 0xA6;
    }
    if node == 1 {
        let gpu = &mut f.gpus[7];
        gpu.mig = Some(Mig {
            current_mode: 1,
            pending_mode: 1,
            max_devices: 7,
            devices: (0..2u32)
                .map(|i| MigDevice {
                    gpu_instance_id: 1 + i,
                    compute_instance_id: 0,
                    uuid: format!("MIG-4f1d7c2a-9b3e-5d60-8a21-00000000000{i}"),
                    name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb".to_owned(),
                    memory: Some(Memory {
                        total: 42_412_802_048,
                        reserved: 0,
                        used: 1 << 30,
                    }),
                    gpm: None,
                })
                .collect(),
        });
    }
}

/// One compute tray of a GB200 NVL72 rack as `gb200-tray.json` models it, its two faults
/// cleared (GPU 2's link 11 reads as its clean neighbour, GPU 3's fabric as healthy), at
/// tray index `tray` of the rack: every tray of the rack shares the chassis serial, the
/// fabric's cluster UUID and clique, so the trays of the fleet form one NVLink domain.
fn healthy_tray(f: &mut Fixture, tray: u8) {
    let clean = f.gpus[2].nvlinks[10].nvlink5.clone();
    f.gpus[2].nvlinks[11].nvlink5 = clean;
    f.gpus[3].fabric = f.gpus[0].fabric.clone();
    for gpu in &mut f.gpus {
        let platform = gpu.platform.as_mut().unwrap();
        platform.tray_index = tray;
        // Slots count the switch trays too: slot = tray + 1 in the modelled rack.
        platform.slot_number = tray + 1;
    }
}

/// A GB200 tray node of the fleet: only its gpu collector runs.
struct Tray {
    name: String,
    nvml: PathBuf,
    port: u16,
}

fn fleet(mode: Rules) {
    let _one = ONE_FLEET.lock().unwrap_or_else(|e| e.into_inner());
    tool("prometheus");
    tool("prometheus-alertmanager");
    let dir = tempfile::tempdir().unwrap();
    let mut procs = Procs(Vec::new());
    let lib = nvidia_ml_fake::library_path().unwrap();

    // Four nodes of the same model.
    let mut nodes = Vec::new();
    let mut kubelets = Vec::new();
    for i in 1..=4 {
        let root = dir.path().join(format!("n{i}"));
        copy_tree(&fixtures().join("h100-cx7-ndr-ib"), &root);
        let nvml = root.join("nvml.json");
        let mut f = Fixture::load(&workspace().join("tests/fake-nvml/fixtures/h100-sxm-8gpu.json"))
            .unwrap();
        healthy_telemetry(&mut f, i);
        f.save(&nvml).unwrap();
        let kmsg = root.join("kmsg");
        std::fs::write(&kmsg, "").unwrap();
        // n4 is a Kubernetes node: its kubelet gave GPU 2 to a training pod, and its /proc
        // has the processes of the workload-procfs fixture (a Slurm step, pods, a service).
        let mut workload = Vec::new();
        if i == 4 {
            let socket = root.join("kubelet.sock");
            let state = Arc::new(Mutex::new(kubelet::State::default()));
            state.lock().unwrap().pods = vec![kubelet::pod(
                "train",
                "llama-7",
                vec![kubelet::container(
                    "worker",
                    vec![kubelet::devices(
                        "nvidia.com/gpu",
                        &[f.gpus[2].uuid.as_str()],
                    )],
                )],
            )];
            kubelets.push(kubelet::Server::start(&socket, &state));
            workload.push(format!(
                "--collector.workload.kubelet-socket={}",
                socket.display()
            ));
            for entry in std::fs::read_dir(fixtures().join("workload-procfs/proc")).unwrap() {
                let entry = entry.unwrap();
                if entry.file_name().to_string_lossy().parse::<u32>().is_ok() {
                    copy_tree(&entry.path(), &root.join("proc").join(entry.file_name()));
                }
            }
        }
        let port = free_port();
        let child = Command::new(binary())
            .args([
                "--web.listen-address",
                &format!("127.0.0.1:{port}"),
                "--log.level",
                "error",
                // The switch layer serves this node's neighbour series (module comment).
                "--no-collector.neighbour",
            ])
            .arg("--path.sysfs")
            .arg(root.join("sys"))
            .arg("--path.procfs")
            .arg(root.join("proc"))
            .arg("--collector.gpu.nvml-library")
            .arg(&lib)
            .arg(format!("--collector.kmsg.path={}", kmsg.display()))
            .args(&workload)
            .env("RAILSCOPE_FAKE_NVML", &nvml)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        procs.0.push(child);
        nodes.push(Node {
            name: format!("n{i}"),
            sys: root.join("sys"),
            nvml,
            kmsg,
            port,
        });
    }

    // n6, n7: trays 3 and 4 of one GB200 NVL72 rack, one NVLink domain; the GPU collector
    // alone, reading the FEC history every second.
    let mut trays = Vec::new();
    for (i, tray) in [(6, 3u8), (7, 4u8)] {
        let root = dir.path().join(format!("n{i}"));
        std::fs::create_dir_all(root.join("sys")).unwrap();
        let nvml = root.join("nvml.json");
        let mut f =
            Fixture::load(&workspace().join("tests/fake-nvml/fixtures/gb200-tray.json")).unwrap();
        healthy_tray(&mut f, tray);
        f.save(&nvml).unwrap();
        let port = free_port();
        let child = Command::new(binary())
            .args([
                "--web.listen-address",
                &format!("127.0.0.1:{port}"),
                "--log.level",
                "error",
                "--collector.disable-defaults",
                "--collector.gpu",
                "--collector.gpu.fec-history-interval=1s",
            ])
            .arg("--path.sysfs")
            .arg(root.join("sys"))
            .arg("--collector.gpu.nvml-library")
            .arg(&lib)
            .env("RAILSCOPE_FAKE_NVML", &nvml)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        procs.0.push(child);
        trays.push(Tray {
            name: format!("n{i}"),
            nvml,
            port,
        });
    }

    // n5: a RoCE node in its own network namespace, whose real veth reports mlx5 PFC
    // statistics through the LD_PRELOAD shim in tests/fake-ethtool.
    let netns = Netns::create();
    let shim = binary()
        .parent()
        .unwrap()
        .join("librailscope_fake_ethtool.so");
    assert!(
        shim.is_file(),
        "{} missing: cargo build --workspace builds it",
        shim.display()
    );
    let ethtool_stats = dir.path().join("ethtool-stats");
    write_ethtool_stats(&ethtool_stats, 5_000_000);
    let roce_port = free_port();
    procs.0.push(
        Command::new("ip")
            .args(["netns", "exec", &netns.name, "env"])
            .arg(format!("LD_PRELOAD={}", shim.display()))
            .arg(format!(
                "RAILSCOPE_FAKE_ETHTOOL={}",
                ethtool_stats.display()
            ))
            .arg(format!("RAILSCOPE_FAKE_ETHTOOL_NETDEV={}", netns.peer()))
            .arg(binary())
            .args([
                "--web.listen-address",
                &format!("10.233.77.2:{roce_port}"),
                "--log.level",
                "error",
            ])
            .args([
                "--collector.disable-defaults",
                "--collector.ethtool",
                "--collector.netdev",
                "--collector.dcb",
            ])
            .arg(format!(
                "--collector.ethtool.device-include=^{}$",
                netns.peer()
            ))
            .arg(format!(
                "--collector.netdev.device-include=^{}$",
                netns.peer()
            ))
            .arg(format!("--collector.dcb.device-include=^{}$", netns.peer()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // The switch layer: the neighbour series of n1-n5.
    let moved = Arc::new(AtomicBool::new(false));
    let switches = Switches::start(netns.peer(), Arc::clone(&moved));
    let switch_targets: Vec<(String, String)> = nodes
        .iter()
        .map(|n| (n.name.clone(), format!("127.0.0.1:{}", n.port)))
        .chain([("n5".to_owned(), format!("10.233.77.2:{roce_port}"))])
        .collect();
    let switch_job = switches.scrape_config(&switch_targets);

    // Traffic on every rail of every node: 1 GB/s of data words per port, until a rail stops.
    let stopped: Arc<Mutex<BTreeSet<(String, String)>>> = Arc::new(Mutex::new(BTreeSet::new()));
    let running = Arc::new(AtomicBool::new(true));
    {
        let nodes: Vec<(String, PathBuf)> = nodes
            .iter()
            .map(|n| (n.name.clone(), n.sys.clone()))
            .collect();
        let (stopped, running) = (Arc::clone(&stopped), Arc::clone(&running));
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                for (name, sys) in &nodes {
                    for dev in 0..8 {
                        let device = format!("mlx5_{dev}");
                        if stopped
                            .lock()
                            .unwrap()
                            .contains(&(name.clone(), device.clone()))
                        {
                            continue;
                        }
                        let counters = sys
                            .join("class/infiniband")
                            .join(&device)
                            .join("ports/1/counters");
                        bump(&counters.join("port_xmit_data"), 125_000_000);
                        bump(&counters.join("port_rcv_data"), 125_000_000);
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }

    // Alertmanager delivering to the webhook.
    let received = Arc::new(Mutex::new(Vec::new()));
    let hook = webhook(Arc::clone(&received));
    let am_port = free_port();
    let am_config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &am_config,
        format!(
            "route:\n  receiver: test\n  group_by: [alertname, instance]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: http://127.0.0.1:{hook}/\n        send_resolved: false\ninhibit_rules:\n{}",
            shipped_inhibit_rule("RailscopeNVLinkDomainDegraded")
                + &shipped_inhibit_rule("RailscopeSwitchSuspect")
        ),
    )
    .unwrap();
    procs.0.push(
        railscope_tests::alertmanager_command(&am_config, dir.path(), am_port)
            .spawn()
            .unwrap(),
    );

    // Prometheus (or its shards, VictoriaMetrics and vmalert) with the fast rules.
    let mut targets: Vec<String> = nodes
        .iter()
        .map(|n| format!("'127.0.0.1:{}'", n.port))
        .collect();
    targets.extend(trays.iter().map(|t| format!("'127.0.0.1:{}'", t.port)));
    targets.push(format!("'10.233.77.2:{roce_port}'"));
    let mut relabel: String = nodes
        .iter()
        .map(|n| (n.port, &n.name))
        .chain(trays.iter().map(|t| (t.port, &t.name)))
        .map(|(port, name)| format!("      - source_labels: [__address__]\n        regex: '127.0.0.1:{port}'\n        target_label: instance\n        replacement: {name}\n"))
        .collect();
    relabel.push_str(&format!("      - source_labels: [__address__]\n        regex: '10.233.77.2:{roce_port}'\n        target_label: instance\n        replacement: n5\n"));
    let mut shard_ports = Vec::new();
    let prom_port = match mode {
        Rules::OnePrometheus => {
            let rules = dir.path().join("railscope.rules.yml");
            std::fs::write(&rules, fast_rules()).unwrap();
            let port = free_port();
            let config = dir.path().join("prometheus.yml");
            std::fs::write(
                &config,
                prometheus_config(&rules, am_port, &targets, &relabel, &switch_job, None),
            )
            .unwrap();
            check_config(&config);
            procs.0.push(
                railscope_tests::prometheus_command(&config, dir.path(), port)
                    .spawn()
                    .unwrap(),
            );
            wait_http(port, "/-/ready");
            port
        }
        Rules::Sharded => {
            let (vm_port, shards) = sharded(
                dir.path(),
                am_port,
                &targets,
                &relabel,
                &switch_job,
                &mut procs,
            );
            shard_ports = shards;
            vm_port
        }
    };
    for node in &nodes {
        wait_http(node.port, "/-/ready");
    }
    for tray in &trays {
        wait_http(tray.port, "/-/ready");
    }
    wait_http_at("10.233.77.2", roce_port, "/-/ready");
    wait_http(am_port, "/-/ready");
    wait_http(prom_port, "/-/ready");

    // A healthy fleet for a while: nothing may fire.
    std::thread::sleep(Duration::from_secs(25));
    let baseline: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, v)| alert_names(v))
        .collect();
    assert!(
        baseline.is_empty(),
        "alerts on a healthy fleet: {baseline:?}"
    );
    // Sharded: each shard scrapes part of the fleet, so peers and rails span shards.
    if mode == Rules::Sharded {
        let scraped: Vec<f64> = shard_ports
            .iter()
            .map(|port| {
                let addr = format!("127.0.0.1:{port}").parse().unwrap();
                let answer =
                    railscope_tests::prometheus_query(addr, "count(up{job=\"railscope\"} == 1)");
                answer["data"]["result"][0]["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0)
            })
            .collect();
        assert!(
            scraped.iter().all(|n| *n >= 1.0) && scraped.iter().sum::<f64>() == 7.0,
            "targets per shard: {scraped:?}"
        );
    }

    // Inject the faults.
    let injected = Instant::now();
    // n1: mlx5_2 retrains at 2X.
    std::fs::write(
        nodes[0].sys.join("class/infiniband/mlx5_2/ports/1/rate"),
        "200 Gb/sec (2X NDR)\n",
    )
    .unwrap();
    // n2: rail 3's counters stop while its siblings carry traffic.
    stopped
        .lock()
        .unwrap()
        .insert(("n2".to_owned(), "mlx5_3".to_owned()));
    // n3: GPU 4 falls off the bus.
    let mut f = Fixture::load(&nodes[2].nvml).unwrap();
    f.gpus[4].lost = true;
    f.save(&nodes[2].nvml).unwrap();
    // n5: priority 3 is paused 60 % of the time.
    {
        let (path, running) = (ethtool_stats.clone(), Arc::clone(&running));
        std::thread::spawn(move || {
            let mut paused_us = 5_000_000u64;
            while running.load(Ordering::Relaxed) {
                paused_us += 300_000;
                write_ethtool_stats(&path, paused_us);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }
    // n4: mlx5_6's cable goes bad: symbol errors far above the BER limit, on this one node.
    // Its port alert must come, and the rail's fleet alert (a leaf switch) must not.
    {
        let (counter, running) = (
            nodes[3]
                .sys
                .join("class/infiniband/mlx5_6/ports/1/counters/symbol_error"),
            Arc::clone(&running),
        );
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                bump(&counter, 50);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }
    // n4: GPU 2 logs XID 79 in the kernel log only (NVML never delivered it): the XID alert
    // must come from the kmsg collector, for that GPU.
    {
        let f = Fixture::load(&nodes[3].nvml).unwrap();
        let bus_id = &f.gpus[2].pci.bus_id; // 00000000:1B:00.0
        let address = bus_id[4..bus_id.len() - 2].to_ascii_lowercase();
        let uptime: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let record = format!(
            "4,1200,{},-;NVRM: Xid (PCI:{address}): 79, pid=3113, name=python3, GPU has fallen off the bus.\n",
            (uptime * 1e6) as u64
        );
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&nodes[3].kmsg)
            .unwrap();
        std::io::Write::write_all(&mut log, record.as_bytes()).unwrap();
    }
    // n4: GPU 1's NVLink 7 goes inactive.
    let mut f = Fixture::load(&nodes[3].nvml).unwrap();
    f.gpus[1].nvlinks[7].active = false;
    f.save(&nodes[3].nvml).unwrap();

    // The NVLink domain of n6 and n7: n6's GPU 1 fabric turns unhealthy and n7's GPU 0 falls
    // off the bus, so 6 of its 8 GPUs are healthy. Both GPUs' own alerts are inhibited beneath
    // the one domain alert.
    let mut f = Fixture::load(&trays[0].nvml).unwrap();
    f.gpus[1].fabric.as_mut().unwrap().health_summary = 2;
    f.save(&trays[0].nvml).unwrap();
    let mut f = Fixture::load(&trays[1].nvml).unwrap();
    f.gpus[0].lost = true;
    // n7: GPU 2, C2C enabled, loses C2C link 3.
    f.gpus[2].c2c.as_mut().unwrap().links[3].active = false;
    f.save(&trays[1].nvml).unwrap();
    // n6: GPU 0's NVLink 3 corrects ever more symbols per codeword: its high FEC bins climb.
    {
        let (path, running) = (trays[0].nvml.clone(), Arc::clone(&running));
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                let mut f = Fixture::load(&path).unwrap();
                let history = f.gpus[0].nvlinks[3]
                    .nvlink5
                    .as_mut()
                    .unwrap()
                    .fec_history
                    .as_mut()
                    .unwrap();
                for bin in &mut history[8..] {
                    *bin += 100;
                }
                f.save(&path).unwrap();
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }
    // Leaf 3: n1's and n3's rail-3 ports log symbol errors far above the BER limit at once:
    // one switch alert naming the leaf, and their port alerts beneath it.
    {
        let counters: Vec<PathBuf> = [&nodes[0], &nodes[2]]
            .iter()
            .map(|n| {
                n.sys
                    .join("class/infiniband/mlx5_3/ports/1/counters/symbol_error")
            })
            .collect();
        let running = Arc::clone(&running);
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                for counter in &counters {
                    bump(counter, 50);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
    }
    // n2: its rail-5 cable moves to a spare leaf, where no other node's rail 5 is.
    moved.store(true, Ordering::Relaxed);

    // What an alert above them inhibits (alert, node: the alert above): each may reach the
    // webhook only before the alert above does (the fast rules give the domain alert 2 s of
    // `for` and the switch alert 5 s, faster than the fleet path on a loaded machine, than the
    // 15 s of the symbol error alerts), and must be inhibited once it is in.
    let above: BTreeMap<(&str, &str), (&str, &str)> = [
        (
            ("RailscopeGPUFabricUnhealthy", "n6"),
            ("RailscopeNVLinkDomainDegraded", ""),
        ),
        (
            ("RailscopeGPULost", "n7"),
            ("RailscopeNVLinkDomainDegraded", ""),
        ),
        (
            ("RailscopeSymbolErrorsAboveBER", "n1"),
            ("RailscopeSwitchSuspect", ""),
        ),
        (
            ("RailscopeSymbolErrorsAboveBER", "n3"),
            ("RailscopeSwitchSuspect", ""),
        ),
    ]
    .into();
    let beneath: BTreeSet<(&str, &str)> = above.keys().copied().collect();

    let expected: BTreeSet<(&str, &str)> = [
        ("RailscopePortRateBelowPeers", "n1"),
        ("RailscopePortWidthBelowPeers", "n1"),
        ("RailscopeRailImbalance", "n2"),
        ("RailscopeGPULost", "n3"),
        ("RailscopeNVLinkInactive", "n4"),
        ("RailscopeSymbolErrorsAboveBER", "n4"),
        ("RailscopeGPUXidHardware", "n4"),
        ("RailscopePFCPauseStorm", "n5"),
        ("RailscopeNVLinkDomainDegraded", ""),
        ("RailscopeGPUC2CLinkDown", "n7"),
        ("RailscopeNVLinkFECHistoryRising", "n6"),
        ("RailscopeSwitchSuspect", ""),
        ("RailscopeRailMiscabled", "n2"),
        ("RailscopeNeighbourChanged", "n2"),
    ]
    .into();
    // Once every expected alert arrived, a few more seconds for any that must not (such as
    // RailscopeRailErrorsAcrossFleet for n4's cable, which would fire with the port alert).
    let mut complete: Option<Instant> = None;
    // The fleet-wide alerts of the sharded layout take the longest path (shard recording
    // rules, remote write, VictoriaMetrics, vmalert's recording rules, then its alerts): on a
    // loaded 2-core machine that once took more than 90 s. The wait ends as soon as they
    // are all in.
    let deadline =
        Instant::now() + Duration::from_secs(if mode == Rules::Sharded { 240 } else { 90 });
    let mut first_seen: BTreeMap<(String, String), Duration> = BTreeMap::new();
    loop {
        for (at, value) in received.lock().unwrap().iter() {
            for alert in value["alerts"].as_array().into_iter().flatten() {
                let name = alert["labels"]["alertname"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let instance = alert["labels"]["instance"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                first_seen
                    .entry((name, instance))
                    .or_insert_with(|| at.saturating_duration_since(injected));
            }
        }
        let seen: BTreeSet<(&str, &str)> = first_seen
            .keys()
            .map(|(a, i)| (a.as_str(), i.as_str()))
            .filter(|k| !beneath.contains(k))
            .collect();
        if expected.is_subset(&seen) {
            let since = *complete.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    running.store(false, Ordering::Relaxed);
    eprintln!("{mode:?}: time for each alert to arrive: {first_seen:?}");
    let seen: BTreeSet<(&str, &str)> = first_seen
        .keys()
        .map(|(a, i)| (a.as_str(), i.as_str()))
        .filter(|k| !beneath.contains(k))
        .collect();
    if seen != expected {
        // What the rule store holds, for the next reader of a failure.
        let addr: std::net::SocketAddr = format!("127.0.0.1:{prom_port}").parse().unwrap();
        for q in [
            "railscope:ib_port_rate_bytes_per_second:by_model",
            "railscope:ib_port_rate_bytes_per_second:median_by_model",
            "ALERTS",
        ] {
            eprintln!("{q}: {}", railscope_tests::prometheus_query(addr, q));
        }
    }
    assert_eq!(
        seen, expected,
        "alerts that reached the webhook (time to arrive: {first_seen:?})"
    );
    // An alert that an alert above inhibits reached the webhook, if at all, no later than
    // the alert above; now Alertmanager holds each of them, inhibited.
    for ((name, instance), (source, source_instance)) in &above {
        let source_at = first_seen[&((*source).to_owned(), (*source_instance).to_owned())];
        if let Some(at) = first_seen.get(&((*name).to_owned(), (*instance).to_owned())) {
            assert!(
                *at <= source_at,
                "{name} on {instance} reached the webhook at {at:?}, after {source} at {source_at:?}"
            );
        }
    }
    let am: std::net::SocketAddr = format!("127.0.0.1:{am_port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let alerts: serde_json::Value = get(am, "/api/v2/alerts", &[])
            .ok()
            .and_then(|r| serde_json::from_slice(&r.body).ok())
            .unwrap_or_default();
        let inhibited = |name: &str, instance: &str| {
            alerts.as_array().into_iter().flatten().any(|a| {
                a["labels"]["alertname"] == name
                    && a["labels"]["instance"] == instance
                    && a["status"]["state"] == "suppressed"
                    && a["status"]["inhibitedBy"]
                        .as_array()
                        .is_some_and(|by| !by.is_empty())
            })
        };
        if beneath.iter().all(|(n, i)| inhibited(n, i)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all of {beneath:?} are inhibited in Alertmanager: {alerts}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The right labels: device, port and rail for the port alerts, gpu and link for the others.
    let all: Vec<serde_json::Value> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, v)| v["alerts"].as_array().cloned().unwrap_or_default())
        .collect();
    let labels_on = |name: &str, instance: &str| {
        all.iter()
            .find(|a| a["labels"]["alertname"] == name && a["labels"]["instance"] == instance)
            .map(|a| a["labels"].clone())
            .unwrap_or_else(|| panic!("no {name} on {instance}"))
    };
    let labels = |name: &str| {
        all.iter()
            .find(|a| a["labels"]["alertname"] == name)
            .map(|a| a["labels"].clone())
            .unwrap()
    };
    let rate = labels("RailscopePortRateBelowPeers");
    assert_eq!(
        (
            rate["device"].as_str(),
            rate["port"].as_str(),
            rate["rail"].as_str()
        ),
        (Some("mlx5_2"), Some("1"), Some("2"))
    );
    // A fleet-wide alert carries the same labels however the rules are deployed (vmalert adds
    // the name of its rule group, `alertgroup`).
    let mut names: Vec<&str> = rate
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "alertgroup")
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "alertname",
            "device",
            "hca_type",
            "instance",
            "job",
            "neighbour",
            "neighbour_port",
            "port",
            "rail",
            "severity"
        ],
        "{rate}"
    );
    // The port alerts name the switch port at the far end.
    assert_eq!(
        (rate["neighbour"].as_str(), rate["neighbour_port"].as_str()),
        (Some("MF0;leaf-r2:MQM9700/U1"), Some("1")),
        "{rate}"
    );
    let imbalance = labels("RailscopeRailImbalance");
    assert_eq!(
        (imbalance["device"].as_str(), imbalance["rail"].as_str()),
        (Some("mlx5_3"), Some("3"))
    );
    let lost = labels_on("RailscopeGPULost", "n3");
    assert_eq!(
        (
            lost["gpu"].as_str(),
            lost["state"].as_str(),
            lost["rail"].as_str()
        ),
        (Some("4"), Some("lost"), Some("4"))
    );
    let storm = labels("RailscopePFCPauseStorm");
    assert_eq!(
        (
            storm["netdev"].as_str(),
            storm["priority"].as_str(),
            storm["neighbour"].as_str()
        ),
        (Some(netns.peer().as_str()), Some("3"), Some("tor-roce"))
    );
    // One switch alert for leaf 3, naming both nodes; the miscabled node's rail and leaves.
    let switch = all
        .iter()
        .find(|a| a["labels"]["alertname"] == "RailscopeSwitchSuspect")
        .unwrap();
    assert_eq!(
        switch["labels"]["neighbour"].as_str(),
        Some("MF0;leaf-r3:MQM9700/U1"),
        "{switch}"
    );
    let said = format!(
        "{} {}",
        switch["annotations"]["summary"], switch["annotations"]["description"]
    );
    for part in [
        "n1, n3",
        "n1 mlx5_3 port 1 (switch port 1",
        "n3 mlx5_3 port 1 (switch port 3",
    ] {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    let miscabled = labels_on("RailscopeRailMiscabled", "n2");
    assert_eq!(
        (
            miscabled["rail"].as_str(),
            miscabled["neighbour"].as_str(),
            miscabled["expected_neighbour"].as_str()
        ),
        (
            Some("5"),
            Some("MF0;leaf-r5-spare:MQM9700/U1"),
            Some("MF0;leaf-r5:MQM9700/U1")
        ),
        "{miscabled}"
    );
    // The kernel log's XID, on the GPU it names, with that GPU's identity.
    let xid = labels("RailscopeGPUXidHardware");
    assert_eq!(
        (xid["gpu"].as_str(), xid["xid"].as_str()),
        (Some("2"), Some("79")),
        "{xid}"
    );
    assert!(
        xid["uuid"].as_str().is_some_and(|u| u.starts_with("GPU-")),
        "{xid}"
    );
    // ... and the pod that held that GPU, from n4's kubelet, in its workload annotation.
    let xid_alert = all
        .iter()
        .find(|a| a["labels"]["alertname"] == "RailscopeGPUXidHardware")
        .unwrap();
    assert!(
        xid_alert["annotations"]["workload"]
            .as_str()
            .is_some_and(|w| w.contains("train/llama-7")),
        "{xid_alert}"
    );
    let link = labels("RailscopeNVLinkInactive");
    assert_eq!(
        (link["gpu"].as_str(), link["link"].as_str()),
        (Some("1"), Some("7"))
    );
    // The rack: one domain alert naming the nodes, trays and GPUs at fault; the C2C and FEC
    // alerts with the GPU's tray and slot.
    let domain = all
        .iter()
        .find(|a| a["labels"]["alertname"] == "RailscopeNVLinkDomainDegraded")
        .unwrap();
    assert_eq!(
        (
            domain["labels"]["cluster_uuid"].as_str(),
            domain["labels"]["clique_id"].as_str()
        ),
        (Some("8c2f6e1a-4b7d-4d93-9a05-e3b1c7f2d468"), Some("32767")),
        "{domain}"
    );
    let said = format!(
        "{} {}",
        domain["annotations"]["summary"], domain["annotations"]["description"]
    );
    for part in [
        "6 of 8",
        "n6",
        "tray 3",
        "unhealthy",
        "n7",
        "tray 4",
        "lost",
    ] {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    let c2c = labels_on("RailscopeGPUC2CLinkDown", "n7");
    assert_eq!(
        (
            c2c["gpu"].as_str(),
            c2c["link"].as_str(),
            c2c["tray"].as_str(),
            c2c["slot"].as_str()
        ),
        (Some("2"), Some("3"), Some("4"), Some("5")),
        "{c2c}"
    );
    let fec = labels_on("RailscopeNVLinkFECHistoryRising", "n6");
    assert_eq!(
        (
            fec["gpu"].as_str(),
            fec["link"].as_str(),
            fec["tray"].as_str(),
            fec["slot"].as_str()
        ),
        (Some("0"), Some("3"), Some("3"), Some("4")),
        "{fec}"
    );
    for a in &all {
        let instance = a["labels"]["instance"].as_str();
        assert!(
            a["annotations"]["summary"]
                .as_str()
                .is_some_and(|s| match instance {
                    Some(instance) => s.starts_with(instance),
                    // A domain spans nodes: its summary names the domain; a switch's, the
                    // switch.
                    None => s.starts_with("NVLink domain") || s.starts_with("Switch "),
                }),
            "{a}"
        );
        assert!(
            a["annotations"]["runbook_url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://") && u.contains("/RUNBOOK.md#"))
        );
    }
    eprintln!("time from injection to webhook: {first_seen:?}");

    // Every dashboard query runs on this Prometheus; all but the live-only ones return data.
    // (The dashboards read the one Prometheus, or the global store's Prometheus-compatible
    // API: the sharded run checks the alerts only.)
    if mode == Rules::OnePrometheus {
        let empty = empty_dashboard_queries(prom_port);
        assert!(
            empty.is_empty(),
            "dashboard queries without data on the fleet: {empty:#?}"
        );
    }
}

/// A Prometheus configuration: `rules`, alerts to the Alertmanager on `am_port`, every
/// railscope target relabelled to its node name and, for a shard, only the targets whose
/// address hashes to `shard` of 2, remote-written to `remote_write`; and the switch layer's
/// job `switch_job`, its targets kept by the shard that keeps their node.
fn prometheus_config(
    rules: &Path,
    am_port: u16,
    targets: &[String],
    relabel: &str,
    switch_job: &str,
    shard: Option<(u32, u16)>,
) -> String {
    // A shard keeps every other target, by position: a hash of the agents' addresses (random
    // ports) would put all seven on one shard in one run of 64, and the test needs both
    // shards to hold part of the fleet.
    let keep_by = |label: &str, n: u32| {
        let mine: Vec<String> = targets
            .iter()
            .enumerate()
            .filter(|(i, _)| *i as u32 % 2 == n)
            .map(|(_, t)| regex_escape(t.trim_matches('\'')))
            .collect();
        format!(
            "      - source_labels: [{label}]\n        regex: '{}'\n        action: keep\n",
            mine.join("|")
        )
    };
    let switches = match shard {
        Some((n, _)) => format!(
            "{switch_job}    relabel_configs:\n{}",
            keep_by("__tmp_agent", n)
        ),
        None => switch_job.to_owned(),
    };
    let (keep, write) = match shard {
        Some((n, vm_port)) => (
            keep_by("__address__", n),
            format!(
                "remote_write:\n  - url: http://127.0.0.1:{vm_port}/api/v1/write\n    queue_config:\n      batch_send_deadline: 500ms\n      min_backoff: 100ms\n      max_backoff: 1s\n"
            ),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\n{write}scrape_configs:\n  - job_name: railscope\n    static_configs:\n      - targets: [{}]\n    relabel_configs:\n{keep}{relabel}{switches}",
        rules.display(),
        targets.join(", ")
    )
}

/// `text` as a regular expression that matches only itself (addresses: dots).
fn regex_escape(text: &str) -> String {
    text.replace('.', "\\.")
}

fn check_config(config: &Path) {
    let check = Command::new("promtool")
        .arg("check")
        .arg("config")
        .arg(config)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

/// Starts VictoriaMetrics, two Prometheus shards with the node-local rules writing to it, and
/// vmalert with the fleet-wide rules reading it; returns VictoriaMetrics' port (its
/// Prometheus-compatible query API) and the shards' ports.
fn sharded(
    dir: &Path,
    am_port: u16,
    targets: &[String],
    relabel: &str,
    switch_job: &str,
    procs: &mut Procs,
) -> (u16, Vec<u16>) {
    let vm = tool("victoria-metrics");
    let vmalert = tool("vmalert");
    let vm_port = free_port();
    procs.0.push(
        Command::new(&vm)
            .arg(format!("-storageDataPath={}", dir.join("vm").display()))
            .arg(format!("-httpListenAddr=127.0.0.1:{vm_port}"))
            // Answer queries with the newest samples (by default the last 30 s are held back
            // for late ones) and without a result cache, as a one-second test needs.
            .arg("-search.latencyOffset=0s")
            .arg("-search.disableCache")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_http(vm_port, "/health");
    let node_rules = dir.join("railscope.node.rules.yml");
    std::fs::write(&node_rules, fast("alerts/railscope.node.rules.yml")).unwrap();
    let mut shards = Vec::new();
    for shard in 0..2 {
        let config = dir.join(format!("prometheus-{shard}.yml"));
        std::fs::write(
            &config,
            prometheus_config(
                &node_rules,
                am_port,
                targets,
                relabel,
                switch_job,
                Some((shard, vm_port)),
            ),
        )
        .unwrap();
        check_config(&config);
        let port = free_port();
        let data = dir.join(format!("shard-{shard}"));
        std::fs::create_dir_all(&data).unwrap();
        procs.0.push(
            railscope_tests::prometheus_command(&config, &data, port)
                .spawn()
                .unwrap(),
        );
        wait_http(port, "/-/ready");
        shards.push(port);
    }
    let fleet_rules = dir.join("railscope.fleet.rules.yml");
    std::fs::write(&fleet_rules, fast("alerts/railscope.fleet.rules.yml")).unwrap();
    let vmalert_port = free_port();
    procs.0.push(
        Command::new(&vmalert)
            .arg(format!("-rule={}", fleet_rules.display()))
            .arg(format!("-datasource.url=http://127.0.0.1:{vm_port}"))
            .arg(format!("-remoteWrite.url=http://127.0.0.1:{vm_port}"))
            .arg(format!("-notifier.url=http://127.0.0.1:{am_port}"))
            .arg(format!("-httpListenAddr=127.0.0.1:{vmalert_port}"))
            .arg("-evaluationInterval=1s")
            .arg("-remoteWrite.flushInterval=500ms")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_http(vmalert_port, "/health");
    (vm_port, shards)
}

/// Metrics that are absent on this fleet, so the queries using them are empty: veth has
/// no DCB, InfiniBand ports get their active MTU only from verbs on a live node and no RoCE
/// RDMA device is in the fleet, OFED's extra PMA counters exist on no DGX node, AER types and
/// XID codes appear with their first error, H100s have no retired pages (they remap rows),
/// and the fleet's fake GPUs report no NVLink5 FEC histogram. Its veth netdevs have no
/// transceiver module, no FEC or extended link state, and no devlink device: the physical
/// layer's queries are empty (the pre-FEC BER recording rule with them).
const ABSENT_ON_THIS_FLEET: &[&str] = &[
    "railscope_transceiver_",
    "railscope_phy_",
    "railscope:phy_pre_fec_ber",
    "railscope_devlink_",
    "railscope_dcb_",
    "active_mtu_bytes",
    "railscope_ib_port_netdev_mtu_bytes",
    "railscope_ib_port_pma_other_total",
    "railscope_pci_aer_errors_by_type_total",
    "railscope_gpu_xid_errors_total",
    "railscope_gpu_retired_pages",
];

/// Runs every dashboard query (variables set to match everything) and returns those that
/// failed or returned nothing, leaving out queries that need live-only metrics.
fn empty_dashboard_queries(prom_port: u16) -> Vec<String> {
    let script = r#"
import json, sys
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
for path in sys.argv[1:]:
    d = json.load(open(path))
    for p in walk(d.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                print(" ".join(t["expr"].split()))
"#;
    let dir = workspace().join("dashboards");
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.join("railscope-node.json"))
        .arg(dir.join("railscope-fleet.json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let addr = format!("127.0.0.1:{prom_port}").parse().unwrap();
    let mut empty = Vec::new();
    for expr in String::from_utf8(out.stdout).unwrap().lines() {
        let query = expr
            .replace("$__rate_interval", "10s")
            .replace("$__range", "1m")
            .replace("$__interval", "1s")
            .replace("$job", "railscope")
            .replace("$instance", ".*")
            .replace("$rail", ".*")
            .replace("$pod", ".*")
            .replace("$workload", ".*");
        let resp = get(
            addr,
            &format!(
                "/api/v1/query?query={}",
                railscope_tests::percent_encode(&query)
            ),
            &[],
        )
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&resp.body).unwrap_or_default();
        let ok = body["status"] == "success";
        let has_data = body["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
            || body["data"]["resultType"] == "scalar";
        if !ok || (!has_data && !ABSENT_ON_THIS_FLEET.iter().any(|m| expr.contains(m))) {
            empty.push(format!(
                "{expr} -> {}",
                if ok {
                    "no data".to_owned()
                } else {
                    body["error"].to_string()
                }
            ));
        }
    }
    empty
}

fn alert_names(value: &serde_json::Value) -> Vec<String> {
    value["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            format!(
                "{}@{}",
                a["labels"]["alertname"].as_str().unwrap_or("?"),
                a["labels"]["instance"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[test]
fn the_fast_rules_still_parse_and_keep_their_alerts() {
    let fast = fast_rules();
    assert!(
        fast.contains("for: 10s")
            && fast.contains("[5s]")
            && fast.contains("[1m]")
            && fast.contains("offset 15s")
    );
    assert!(!fast.contains("[5m]") && !fast.contains("for: 10m"));
    assert!(
        fast.contains("> 1000000000") && fast.contains("0.5 *"),
        "numbers that are not durations are untouched"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fast.yml");
    std::fs::write(&path, &fast).unwrap();
    let out = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        fast.matches("- alert: ").count(),
        std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml"))
            .unwrap()
            .matches("- alert: ")
            .count()
    );
}

/// The shipped inhibit rule (`alerts/alertmanager.example.yml`) whose source is `source`, as
/// the text of one `inhibit_rules` item.
fn shipped_inhibit_rule(source: &str) -> String {
    let example =
        std::fs::read_to_string(workspace().join("alerts/alertmanager.example.yml")).unwrap();
    let start = example
        .find(&format!("  - source_matchers: ['alertname=\"{source}\"']"))
        .unwrap_or_else(|| panic!("no inhibit rule with source {source}"));
    let rest = &example[start..];
    let end = rest[1..]
        .find("\n  - ")
        .map(|i| i + 2)
        .unwrap_or(rest.len());
    rest[..end].to_owned()
}
