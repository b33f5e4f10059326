//! The `workload` source against a real gRPC server playing the kubelet's PodResources v1
//! service on a unix socket (generated from the same `.proto` as the agent's client): pods
//! holding whole GPUs, MIG slices, a shared HCA, an SR-IOV VF and a DRA claim; a pod going
//! away between scrapes; the kubelet restarting, hanging, and appearing after the agent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::Fixture;
use railscope_podresources::{ClaimResource, ContainerResources, DynamicResource};
use railscope_tests::gpu::{fake_library, fixture};
use railscope_tests::kubelet::{Server, State, container, devices, pod};
use railscope_tests::{
    Agent, Sample, find, fixtures, parse_samples, promtool_check_metrics, value, workspace,
};

/// The node: the DGX H100 sysfs tree and the fake NVML's MIG fixture, GPU 0 in MIG mode
/// (seven 1g.10gb) and GPU 1 taken out of it (a whole GPU).
struct Node {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    nvml: PathBuf,
    /// The RDMA shared device plugin's config: `rdma/hca_shared_devices_a` is the HCA
    /// behind the IPoIB netdev ibp64s0 (mlx5_1).
    shared_config: PathBuf,
    gpu1_uuid: String,
    mig_uuid: String,
}

fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Fixture::load(&fixture("h100-mig.json")).unwrap();
    f.gpus[1].mig = None;
    f.gpus[1].not_supported.clear();
    let gpu1_uuid = f.gpus[1].uuid.clone();
    let mig_uuid = f.gpus[0].mig.as_ref().unwrap().devices[2].uuid.clone();
    let nvml = dir.path().join("nvml.json");
    f.save(&nvml).unwrap();
    let shared_config = dir.path().join("rdma-shared.json");
    std::fs::write(
        &shared_config,
        r#"{"periodicUpdateInterval": 300, "configList": [{"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 1000, "selectors": {"ifNames": ["ibp64s0"]}}]}"#,
    )
    .unwrap();
    Node {
        shared_config,
        socket: dir.path().join("kubelet.sock"),
        nvml,
        gpu1_uuid,
        mig_uuid,
        _dir: dir,
    }
}

fn start_agent(node: &Node) -> Agent {
    let lib = fake_library();
    let tree = fixtures().join("h100-cx7-ndr-ib");
    Agent::launch(
        &[
            "--path.sysfs",
            tree.join("sys").to_str().unwrap(),
            "--path.procfs",
            tree.join("proc").to_str().unwrap(),
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.infiniband",
            "--collector.workload",
            "--collector.gpu.nvml-library",
            lib.to_str().unwrap(),
            &format!(
                "--collector.workload.kubelet-socket={}",
                node.socket.display()
            ),
            &format!(
                "--collector.workload.rdma-shared-config={}",
                node.shared_config.display()
            ),
        ],
        &[("RAILSCOPE_FAKE_NVML", node.nvml.as_os_str())],
    )
}

fn scrape(agent: &Agent, timeout: &str) -> (Vec<Sample>, Duration) {
    let start = Instant::now();
    let text = scrape_text(agent, timeout);
    (parse_samples(&text), start.elapsed())
}

fn scrape_text(agent: &Agent, timeout: &str) -> String {
    let resp = agent.get(
        "/metrics",
        &[("X-Prometheus-Scrape-Timeout-Seconds", timeout)],
    );
    assert_eq!(resp.status, 200);
    resp.text()
}

/// The `railscope_workload_*` families of `text` against `tests/golden/<name>.prom`
/// (`UPDATE_GOLDEN=1` writes it).
fn golden(name: &str, text: &str) {
    promtool_check_metrics(text);
    let got: String = text
        .lines()
        .filter(|l| {
            l.starts_with("railscope_workload_")
                || l.starts_with("# HELP railscope_workload_")
                || l.starts_with("# TYPE railscope_workload_")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let path = workspace()
        .join("tests/golden")
        .join(format!("{name}.prom"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_GOLDEN=1", path.display()));
    assert_eq!(got, want, "{} differs", path.display());
}

/// (namespace, pod, container, resource, device_id, gpu, gpu_instance, pci_address,
/// rdma_device) of every device info series.
fn held(s: &[Sample]) -> Vec<[String; 9]> {
    let mut out: Vec<[String; 9]> = find(s, "railscope_workload_device_info", &[])
        .iter()
        .map(|x| {
            [
                "namespace",
                "pod",
                "container",
                "resource",
                "device_id",
                "gpu",
                "gpu_instance",
                "pci_address",
                "rdma_device",
            ]
            .map(|k| x.labels.get(k).cloned().unwrap_or_default())
        })
        .collect();
    out.sort();
    out
}

fn row(v: [&str; 9]) -> [String; 9] {
    v.map(str::to_owned)
}

#[test]
fn pods_and_their_devices_follow_the_kubelet() {
    let node = node();
    let state = Arc::new(Mutex::new(State::default()));
    {
        let mut s = state.lock().unwrap();
        s.pods = vec![
            pod(
                "train",
                "llama-0",
                vec![container(
                    "worker",
                    vec![
                        devices("nvidia.com/gpu", &[node.gpu1_uuid.as_str()]),
                        // An SR-IOV VF by PCI address (here mlx5_1's function).
                        devices("nvidia.com/sriov_rdma_vf", &["0000:40:00.0"]),
                        devices("rdma/hca_shared_devices_a", &["hca_shared_0"]),
                    ],
                )],
            ),
            pod(
                "infer",
                "small-1",
                vec![
                    container(
                        "server",
                        vec![devices("nvidia.com/mig-1g.10gb", &[node.mig_uuid.as_str()])],
                    ),
                    // A sidecar without devices.
                    container("proxy", Vec::new()),
                ],
            ),
            pod(
                "dra",
                "claimed-0",
                vec![ContainerResources {
                    name: "main".into(),
                    dynamic_resources: vec![DynamicResource {
                        claim_name: "gpu-claim".into(),
                        claim_namespace: "dra".into(),
                        claim_resources: vec![ClaimResource {
                            driver_name: "gpu.nvidia.com".into(),
                            pool_name: "node-1".into(),
                            device_name: "gpu-1".into(),
                            ..Default::default()
                        }],
                    }],
                    ..Default::default()
                }],
            ),
            pod(
                "kube-system",
                "coredns-1",
                vec![container("coredns", Vec::new())],
            ),
        ];
        s.allocatable = vec![
            devices("nvidia.com/gpu", &[node.gpu1_uuid.as_str()]),
            devices(
                "nvidia.com/mig-1g.10gb",
                &["a", "b", "c", "d", "e", "f", "g"],
            ),
        ];
    }
    let server = Server::start(&node.socket, &state);
    let mut agent = start_agent(&node);
    agent.wait_ready();
    let text = scrape_text(&agent, "5");
    golden("workload-kubelet", &text);
    let s = parse_samples(&text);
    assert_eq!(value(&s, "railscope_workload_kubelet_up", &[]), 1.0);
    assert_eq!(value(&s, "railscope_workload_kubelet_pods", &[]), 4.0);
    assert_eq!(
        value(
            &s,
            "railscope_workload_allocatable_devices",
            &[("resource", "nvidia.com/mig-1g.10gb")]
        ),
        7.0
    );
    let gpu1 = node.gpu1_uuid.as_str();
    let mig = node.mig_uuid.as_str();
    assert_eq!(
        held(&s),
        vec![
            row([
                "dra",
                "claimed-0",
                "main",
                "gpu.nvidia.com",
                "gpu-1",
                "",
                "",
                "",
                ""
            ]),
            row([
                "infer",
                "small-1",
                "server",
                "nvidia.com/mig-1g.10gb",
                mig,
                "0",
                "9",
                "",
                ""
            ]),
            row([
                "train",
                "llama-0",
                "worker",
                "nvidia.com/gpu",
                gpu1,
                "1",
                "",
                "",
                ""
            ]),
            row([
                "train",
                "llama-0",
                "worker",
                "nvidia.com/sriov_rdma_vf",
                "0000:40:00.0",
                "",
                "",
                "0000:40:00.0",
                "mlx5_1"
            ]),
            row([
                "train",
                "llama-0",
                "worker",
                "rdma/hca_shared_devices_a",
                "hca_shared_0",
                "",
                "",
                "0000:40:00.0",
                "mlx5_1"
            ]),
        ]
    );
    let claim = find(
        &s,
        "railscope_workload_device_info",
        &[("pod", "claimed-0")],
    );
    assert_eq!(claim[0].labels["claim"], "gpu-claim");
    assert_eq!(claim[0].labels["claim_namespace"], "dra");

    // The inference pod goes away: its series go with it at the next scrape.
    state.lock().unwrap().pods.retain(|p| p.name != "small-1");
    let (s, _) = scrape(&agent, "5");
    assert!(find(&s, "railscope_workload_device_info", &[("pod", "small-1")]).is_empty());
    assert_eq!(held(&s).len(), 4);

    // The kubelet restarts: while it is gone the source says so and costs nothing else;
    // the new kubelet at the same path is reached again without restarting the agent.
    drop(server);
    let (s, _) = scrape(&agent, "5");
    assert!(
        find(&s, "railscope_workload_kubelet_up", &[]).is_empty(),
        "no socket: absent"
    );
    assert!(held(&s).is_empty());
    assert_eq!(
        find(&s, "railscope_gpu_up", &[]).len(),
        2,
        "the GPUs are still read"
    );
    let _server = Server::start(&node.socket, &state);
    let (s, _) = scrape(&agent, "5");
    assert_eq!(value(&s, "railscope_workload_kubelet_up", &[]), 1.0);
    assert_eq!(held(&s).len(), 4);
    let log = agent.log();
    let status = agent.terminate();
    assert!(status.success(), "{status}: {log}");
}

/// The kubelet's state with one pod holding GPU 1.
fn one_pod_on_gpu1(node: &Node) -> Arc<Mutex<State>> {
    let state = Arc::new(Mutex::new(State::default()));
    state.lock().unwrap().pods = vec![pod(
        "train",
        "llama-0",
        vec![container(
            "worker",
            vec![devices("nvidia.com/gpu", &[node.gpu1_uuid.as_str()])],
        )],
    )];
    state
}

/// A kubelet that does not answer costs only this source, within the scrape's deadline,
/// and is counted as the collector's error.
#[test]
fn a_hung_kubelet_costs_only_its_own_series() {
    let node = node();
    let state = one_pod_on_gpu1(&node);
    let _server = Server::start(&node.socket, &state);
    let mut agent = start_agent(&node);
    agent.wait_ready();
    assert_eq!(held(&scrape(&agent, "5").0).len(), 1);
    state.lock().unwrap().delay = Duration::from_secs(60);
    let (s, took) = scrape(&agent, "2");
    assert!(
        took < Duration::from_millis(2500),
        "the scrape took {took:?}"
    );
    assert_eq!(value(&s, "railscope_workload_kubelet_up", &[]), 0.0);
    assert!(held(&s).is_empty());
    assert!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "workload")]
        ) >= 1.0
    );
    assert_eq!(find(&s, "railscope_gpu_up", &[]).len(), 2);
    assert_eq!(
        find(&s, "railscope_ib_port_info", &[]).len(),
        8,
        "the RDMA ports are still read"
    );
    state.lock().unwrap().delay = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, _) = scrape(&agent, "5");
        if held(&s).len() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kubelet's answers never came back"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// No socket at start (a node whose kubelet starts after the agent): the source is absent,
/// with no error, and is picked up once the socket appears.
#[test]
fn a_kubelet_that_starts_later_is_picked_up() {
    let node = node();
    let state = one_pod_on_gpu1(&node);
    let mut agent = start_agent(&node);
    agent.wait_ready();
    let (s, _) = scrape(&agent, "5");
    assert!(find(&s, "railscope_workload_kubelet_up", &[]).is_empty());
    assert_eq!(
        value(
            &s,
            "railscope_collector_errors_total",
            &[("collector", "workload")]
        ),
        0.0
    );
    let _server = Server::start(&node.socket, &state);
    let (s, _) = scrape(&agent, "5");
    assert_eq!(value(&s, "railscope_workload_kubelet_up", &[]), 1.0);
    assert_eq!(held(&s).len(), 1);
}

/// The process scan on a procfs tree with Slurm jobs (three cgroup layouts, a SLUID among them), two pods (both
/// kubelet cgroup drivers), a service and a login session (`tests/fixtures/workload-procfs`,
/// whose `expected.json` says what each process is), with the fake NVML's running processes:
/// each device node is attributed to its workload, GPUs by minor number and, in MIG mode, by
/// the GPU instance NVML runs the process on; RDMA devices by their uverbs node.
#[test]
fn processes_are_attributed_to_their_job_pod_unit_or_session() {
    use nvidia_ml_fake::fixture::Process;
    let tree = fixtures().join("workload-procfs");
    let dir = tempfile::tempdir().unwrap();
    let mut f = Fixture::load(&fixture("h100-mig.json")).unwrap();
    // The Slurm step runs on MIG GPU instance 9 of GPU 0; the pod on GPU 1 (out of MIG).
    f.gpus[0].processes = vec![Process {
        pid: 4242,
        used_gpu_memory: Some(1 << 30),
        gpu_instance_id: Some(9),
        compute_instance_id: Some(0),
    }];
    f.gpus[1].mig = None;
    f.gpus[1].not_supported.clear();
    f.gpus[1].processes = vec![Process {
        pid: 5150,
        used_gpu_memory: Some(2 << 30),
        gpu_instance_id: None,
        compute_instance_id: None,
    }];
    let nvml = dir.path().join("nvml.json");
    f.save(&nvml).unwrap();
    let lib = fake_library();
    let mut agent = Agent::launch(
        &[
            "--path.sysfs",
            tree.join("sysfs").to_str().unwrap(),
            "--path.procfs",
            tree.join("proc").to_str().unwrap(),
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.workload",
            "--collector.gpu.nvml-library",
            lib.to_str().unwrap(),
        ],
        &[("RAILSCOPE_FAKE_NVML", nvml.as_os_str())],
    );
    agent.wait_ready();
    let text = scrape_text(&agent, "5");
    golden("workload-procfs", &text);
    let s = parse_samples(&text);
    let mut rows: Vec<[String; 6]> = find(&s, "railscope_workload_process_device_info", &[])
        .iter()
        .map(|x| {
            [
                "kind",
                "workload",
                "device_node",
                "gpu",
                "gpu_instance",
                "rdma_device",
            ]
            .map(|k| x.labels.get(k).cloned().unwrap_or_default())
        })
        .collect();
    rows.sort();
    let r = |v: [&str; 6]| v.map(str::to_owned);
    assert_eq!(
        rows,
        vec![
            r([
                "kubernetes",
                "1f2e3d4c-5b6a-4789-8abc-def012345678",
                "nvidia1",
                "1",
                "",
                ""
            ]),
            r([
                "kubernetes",
                "1f2e3d4c-5b6a-4789-8abc-def012345678",
                "uverbs1",
                "",
                "",
                "mlx5_1"
            ]),
            // GPU 2 is not on this node's NVML: the device node is still named.
            r([
                "kubernetes",
                "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d",
                "nvidia2",
                "",
                "",
                ""
            ]),
            r(["session", "session-3.scope", "uverbs2", "", "", "mlx5_2"]),
            r(["slurm", "73512", "nvidia0", "0", "9", ""]),
            r(["slurm", "73512", "uverbs0", "", "", "mlx5_0"]),
            // Slurm 26.05 names the job's cgroup by its SLUID; GPU 3 is not on NVML either.
            r(["slurm", "sEKNKTV3WPV500", "nvidia3", "", "", ""]),
        ]
    );
    // Cross-check with what the fixture says of each process.
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tree.join("expected.json")).unwrap())
            .unwrap();
    for p in expected["processes"].as_array().unwrap() {
        let workload = ["job", "pod_uid", "unit"]
            .iter()
            .find_map(|k| p[*k].as_str())
            .unwrap_or_default();
        for d in p["devices"].as_array().unwrap() {
            let node = d.as_str().unwrap().rsplit('/').next().unwrap();
            assert!(
                rows.iter().any(|row| row[0] == p["kind"].as_str().unwrap()
                    && row[1] == workload
                    && row[2] == node),
                "{p} {node} missing from {rows:?}"
            );
        }
    }
    assert_eq!(
        value(&s, "railscope_workload_processes_scanned", &[]),
        expected["processes"].as_array().unwrap().len() as f64
            + expected["skipped"].as_array().unwrap().len() as f64
    );
    assert!(
        find(&s, "railscope_workload_kubelet_up", &[]).is_empty(),
        "no kubelet here"
    );
}
