//! `railscope doctor` with the real binary: golden reports (text and JSON) for every fixture
//! tree, and for the DGX tree with every fake NVML fixture; the faults fixtures' findings
//! are exactly their documented faults; `--from` gives the same findings as a local run,
//! over plain HTTP and over TLS with basic auth; NCCL variables in the environment that
//! contradict the node are findings; the exit status is the verdict; the cabling step on fleet
//! nodes' scrapes plus neighbour series (golden), and against an agent that hears a real lldpd
//! on a veth. Set `UPDATE_GOLDEN=1`
//! to rewrite the golden files (`tests/golden/doctor/`) after an intended change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use railscope_tests::{Agent, Pki, binary, fixture_trees, fixtures, tree_args, workspace};

const DGX: &str = "h100-cx7-ndr-ib";

/// The DGX tree's arguments with the fake NVML library, and the environment naming `nvml`.
fn with_nvml(nvml: &str) -> (Vec<String>, Env) {
    let mut args = tree_args(&fixtures().join(DGX));
    let lib = nvidia_ml_fake::library_path().expect("the fake NVML library");
    let at = args
        .iter()
        .position(|a| a == "--collector.gpu.nvml-library")
        .unwrap();
    args[at + 1] = lib.display().to_string();
    let fixture = workspace().join(format!("tests/fake-nvml/fixtures/{nvml}.json"));
    (
        args,
        vec![("RAILSCOPE_FAKE_NVML".to_owned(), fixture.into_os_string())],
    )
}

/// Runs `railscope doctor` with `args` and `env` (and no other NCCL_* variable); returns the
/// exit status and stdout, with the workspace path replaced by `$WORKSPACE`.
fn doctor(args: &[String], env: &[(String, OsString)]) -> (i32, String) {
    let mut cmd = Command::new(binary());
    cmd.arg("doctor").args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NCCL_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.code().is_some(),
        "doctor was killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap(),
        stdout.replace(&workspace().display().to_string(), "$WORKSPACE"),
    )
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// Environment variables for a run.
type Env = Vec<(String, OsString)>;

/// Every case: (golden name, arguments, environment).
fn cases() -> Vec<(String, Vec<String>, Env)> {
    let mut cases = Vec::new();
    for tree in fixture_trees() {
        cases.push((tree.clone(), tree_args(&fixtures().join(&tree)), Vec::new()));
    }
    let mut nvml: Vec<String> = std::fs::read_dir(workspace().join("tests/fake-nvml/fixtures"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_owned)
        })
        .collect();
    nvml.sort();
    for n in nvml {
        let (args, env) = with_nvml(&n);
        cases.push((format!("{DGX}+{n}"), args, env));
    }
    cases
}

fn golden(name: &str, ext: &str) -> PathBuf {
    workspace()
        .join("tests/golden/doctor")
        .join(format!("{name}.{ext}"))
}

#[test]
fn every_fixture_matches_its_golden_report() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    if update {
        std::fs::create_dir_all(workspace().join("tests/golden/doctor")).unwrap();
    }
    let mut failures = Vec::new();
    for (name, args, env) in cases() {
        for (ext, format) in [("txt", "text"), ("json", "json")] {
            let mut args = args.clone();
            args.extend(["--output".to_owned(), format.to_owned()]);
            args.extend(["--color".to_owned(), "never".to_owned()]);
            let path = golden(&name, ext);
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            // XIDs arrive from NVML's event threads: a run may finish before the fake's
            // events are delivered. The report is right when it equals the golden one within
            // a few runs (in update mode, the run that has the most findings).
            let mut got = (0, String::new());
            for _ in 0..5 {
                let run = doctor(&args, &env);
                let done = if update {
                    run.1.len() >= got.1.len() && run.1.contains("XID")
                } else {
                    run.1 == want
                };
                if run.1.len() >= got.1.len() {
                    got = run;
                }
                if done {
                    break;
                }
            }
            let (code, text) = got;
            // The exit status is the worst finding.
            let report = if ext == "json" {
                json(&text)
            } else {
                serde_json::Value::Null
            };
            if ext == "json" {
                assert_eq!(
                    report["exit_code"].as_i64(),
                    Some(code as i64),
                    "{name}: exit status and report disagree"
                );
            }
            if update {
                std::fs::write(&path, &text).unwrap();
                continue;
            }
            if text != want {
                failures.push(format!(
                    "{name}.{ext} differs from {}:\n--- want\n{want}\n--- got\n{text}",
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// (severity, check, subject) of every warning and critical finding.
fn problems(report: &serde_json::Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for step in report["steps"].as_array().unwrap() {
        for f in step["findings"].as_array().unwrap() {
            let severity = f["severity"].as_str().unwrap();
            if severity == "warning" || severity == "critical" {
                out.insert((
                    severity.to_owned(),
                    f["check"].as_str().unwrap().to_owned(),
                    f["subject"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    out
}

fn set(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

fn json_args(mut args: Vec<String>) -> Vec<String> {
    args.extend(["--output".to_owned(), "json".to_owned()]);
    args
}

#[test]
fn faults_fixtures_show_their_faults_and_nothing_else() {
    // tests/fixtures/h100-cx7-ndr-ib-faults/README.md: mlx5_5 down, mlx5_2 at 2X 200 Gb/s,
    // mlx5_6's PMA counters saturated, three broken files of mlx5_7 and its malformed module
    // temperature.
    let (code, text) = doctor(
        &json_args(tree_args(&fixtures().join("h100-cx7-ndr-ib-faults"))),
        &[],
    );
    assert_eq!(code, 2);
    assert_eq!(
        problems(&json(&text)),
        set(&[
            ("critical", "port_down", "mlx5_5 port 1"),
            ("warning", "port_rate", "mlx5_2 port 1"),
            ("warning", "port_width", "mlx5_2 port 1"),
            ("warning", "pma_saturated", "mlx5_6 port 1"),
            ("warning", "collector_errors", "collector infiniband"),
            ("warning", "collector_errors", "collector hwmon"),
        ])
    );
    // tests/fixtures/h100-pcie-faults/README.md: the PCIe and GPUDirect faults.
    let (code, text) = doctor(
        &json_args(tree_args(&fixtures().join("h100-pcie-faults"))),
        &[],
    );
    assert_eq!(code, 2);
    assert_eq!(
        problems(&json(&text)),
        set(&[
            (
                "critical",
                "pcie_aer_uncorrectable",
                "mlx5_1 (0000:40:00.0)"
            ),
            ("warning", "pcie_width", "mlx5_3 (0000:5e:00.0)"),
            ("warning", "peermem", ""),
            ("warning", "iommu", ""),
            ("warning", "acs", "0000:4e:01.0"),
            ("warning", "memlock", ""),
            ("warning", "nic_far_from_gpu", "mlx5_7"),
        ])
    );
    // The healthy DGX node with 8 healthy H100s: nothing.
    let (args, env) = with_nvml("h100-sxm-8gpu");
    let (code, text) = doctor(&json_args(args), &env);
    assert_eq!(problems(&json(&text)), BTreeSet::new(), "{text}");
    assert_eq!(code, 0);
}

/// The report without its source line, for comparing two inputs.
fn findings(text: &str) -> serde_json::Value {
    let mut report = json(text);
    report.as_object_mut().unwrap().remove("source");
    report
}

#[test]
fn from_a_running_agent_gives_the_same_findings_as_a_local_run() {
    for tree in [
        "h100-cx7-ndr-ib-faults",
        "h100-pcie-faults",
        "cx6dx-roce-2port",
    ] {
        let args = tree_args(&fixtures().join(tree));
        let (local_code, local) = doctor(&json_args(args), &[]);
        let agent = Agent::fixture(tree, &[]);
        let url = format!("http://{}/metrics", agent.addr);
        let (code, remote) = doctor(&json_args(vec!["--from".to_owned(), url.clone()]), &[]);
        assert_eq!(code, local_code, "{tree}");
        assert_eq!(findings(&remote), findings(&local), "{tree}");
        assert_eq!(
            json(&remote)["source"].as_str(),
            Some(format!("the agent at {url}").as_str())
        );
    }
}

#[test]
fn from_an_agent_behind_tls_and_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "doctor");
    let (cert, key) = pki.issue("server", true);
    let web = dir.path().join("web.yml");
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  oncall: '{hash}'\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret\n").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "guess\n").unwrap();
    let tree = "h100-pcie-faults";
    // The agent answers TLS only, so wait for its port rather than for /-/healthy.
    let mut args = tree_args(&fixtures().join(tree));
    args.push("--web.config.file".into());
    args.push(web.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::listening(&args);
    let url = agent.url("/metrics");
    let from = |password: &PathBuf| {
        json_args(vec![
            "--from".to_owned(),
            url.clone(),
            "--from.ca-file".to_owned(),
            pki.ca().display().to_string(),
            "--from.username".to_owned(),
            "oncall".to_owned(),
            "--from.password-file".to_owned(),
            password.display().to_string(),
        ])
    };
    let (code, remote) = doctor(&from(&password), &[]);
    let (local_code, local) = doctor(&json_args(tree_args(&fixtures().join(tree))), &[]);
    assert_eq!(code, local_code);
    assert_eq!(findings(&remote), findings(&local));

    // A wrong password, no CA, a closed port: the diagnosis cannot run (3), and says why.
    let (code, out) = doctor(&from(&wrong), &[]);
    assert_eq!(code, 3, "{out}");
    let (code, _) = doctor(&json_args(vec!["--from".to_owned(), url.clone()]), &[]);
    assert_eq!(code, 3);
    let closed = format!("http://127.0.0.1:{}/metrics", railscope_tests::free_port());
    let (code, _) = doctor(&json_args(vec!["--from".to_owned(), closed]), &[]);
    assert_eq!(code, 3);
}

#[test]
fn nccl_variables_that_contradict_the_node_are_findings() {
    let args = json_args(tree_args(&fixtures().join("cx6dx-roce-2port")));
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect()
    };
    let nccl = |pairs: &[(&str, &str)]| {
        let (_, text) = doctor(&args, &env(pairs));
        problems(&json(&text))
            .into_iter()
            .filter(|(_, check, _)| check == "nccl_env")
            .map(|(_, _, subject)| subject)
            .collect::<Vec<_>>()
    };
    // What the node has: mlx5_0 and mlx5_1, RoCE v2 GID at index 3.
    assert_eq!(
        nccl(&[
            ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"),
            ("NCCL_IB_GID_INDEX", "3")
        ]),
        Vec::<String>::new()
    );
    assert_eq!(
        nccl(&[
            ("NCCL_IB_HCA", "mlx5_4,mlx5_5"),
            ("NCCL_IB_GID_INDEX", "0"),
            ("NCCL_IB_DISABLE", "1")
        ]),
        vec!["NCCL_IB_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA"]
    );
    // A list that leaves a rail out.
    assert_eq!(nccl(&[("NCCL_IB_HCA", "=mlx5_0")]), vec!["NCCL_IB_HCA"]);
    // The hints themselves.
    let (_, text) = doctor(&args, &[]);
    let hints: Vec<(String, String)> = json(&text)["nccl"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap().to_owned(),
                h["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        hints,
        vec![
            ("NCCL_IB_HCA".to_owned(), "=mlx5_0:1,mlx5_1:1".to_owned()),
            ("NCCL_IB_GID_INDEX".to_owned(), "3".to_owned()),
        ]
    );
}

#[test]
fn front_end_nic_is_the_socket_interface_not_a_rail() {
    let (code, text) = doctor(
        &json_args(tree_args(&fixtures().join("h100-frontend-nic-first"))),
        &[],
    );
    assert_eq!(code, 0, "{text}");
    let report = json(&text);
    let hint = |name: &str| {
        report["nccl"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == name)
            .map(|h| h["value"].as_str().unwrap().to_owned())
    };
    assert_eq!(
        hint("NCCL_IB_HCA").as_deref(),
        Some("=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1")
    );
    assert_eq!(hint("NCCL_SOCKET_IFNAME").as_deref(), Some("=eno1np0"));
    assert_eq!(hint("NCCL_NET_GDR_LEVEL").as_deref(), Some("PIX"));
}

#[test]
fn bad_doctor_flags_name_the_flag() {
    for (args, flag) in [
        (vec!["--output", "yaml"], "--output"),
        (vec!["--color", "sometimes"], "--color"),
        (vec!["--from", "ftp://x/metrics"], "--from"),
        (vec!["--from.username", "a"], "--from.username"),
    ] {
        let out = Command::new(binary())
            .arg("doctor")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

#[test]
fn expected_inventory_from_the_config_and_from_a_running_agent() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railscope.yml");
    std::fs::write(
        &config,
        "expected:\n  rdma-ports: 9\n  rdma-port-rate-gbps: 400\n  rdma-port-width: 4\n  pcie-generation: 5\n  pcie-width: 16\n",
    )
    .unwrap();
    let tree = "h100-cx7-ndr-ib-faults";
    let mut args = tree_args(&fixtures().join(tree));
    args.extend(["--config.file".to_owned(), config.display().to_string()]);
    let (code, local) = doctor(&json_args(args), &[]);
    assert_eq!(code, 2);
    // The node has 8 ports of the 9 it must have; 5 are up at 400 Gb/s 4X (mlx5_5 is down,
    // mlx5_2 at 200 Gb/s 2X, mlx5_7's rate unreadable); mlx5_2 is judged against the
    // expectation, not its peers.
    assert_eq!(
        problems(&json(&local)),
        set(&[
            ("critical", "inventory", "rdma_port"),
            ("warning", "inventory", "rdma_port_up"),
            ("critical", "port_down", "mlx5_5 port 1"),
            ("warning", "port_rate", "mlx5_2 port 1"),
            ("warning", "port_width", "mlx5_2 port 1"),
            ("warning", "pma_saturated", "mlx5_6 port 1"),
            ("warning", "collector_errors", "collector infiniband"),
            ("warning", "collector_errors", "collector hwmon"),
        ])
    );
    let report = json(&local);
    let rate = report["steps"][1]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "port_rate")
        .unwrap()
        .clone();
    assert_eq!(rate["alert"], "RailscopePortRateBelowExpected");
    // The agent exports the inventory; doctor reads it from there to the same findings.
    let agent = Agent::fixture(tree, &["--config.file", config.to_str().unwrap()]);
    let scrape = agent.scrape();
    for line in [
        "railscope_inventory_expected{kind=\"rdma_port\"} 9",
        "railscope_inventory_present{kind=\"rdma_port\"} 8",
        "railscope_inventory_present{kind=\"rdma_port_up\"} 5",
        "railscope_inventory_expected_port_rate_bytes_per_second 50000000000",
    ] {
        assert!(scrape.contains(line), "missing {line}");
    }
    let url = format!("http://{}/metrics", agent.addr);
    let (code, remote) = doctor(&json_args(vec!["--from".to_owned(), url]), &[]);
    assert_eq!(code, 2);
    assert_eq!(findings(&remote), findings(&local));
}

/// Serves `text` as a Prometheus exposition at `http://ADDR/metrics` to every GET, from a
/// thread of its own, for as long as the test runs.
fn serve(text: String) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    addr
}

/// The neighbour series the `neighbour` collector exports for one link (status `status`,
/// `neighbour` = (name, id, port, port description) when one is known), and `extra` far-end
/// families as (family without `railscope_neighbour_`, value).
fn neighbour_link(
    (device, netdev, protocol): (&str, &str, &str),
    status: &str,
    neighbour: Option<(&str, &str, &str, &str)>,
    extra: &[(&str, f64)],
) -> String {
    let key = format!(r#"device="{device}",port="1",netdev="{netdev}",protocol="{protocol}""#);
    let mut out = vec![format!("railscope_neighbour_changes_total{{{key}}} 0")];
    for s in [
        "ok",
        "no_frames",
        "not_available",
        "refused",
        "no_permission",
        "timeout",
    ] {
        out.push(format!(
            r#"railscope_neighbour_status{{{key},status="{s}"}} {}"#,
            u8::from(s == status)
        ));
    }
    if let Some((name, id, port, description)) = neighbour {
        out.push(format!(
            r#"railscope_neighbour_info{{{key},neighbour="{name}",neighbour_id="{id}",neighbour_port="{port}",neighbour_port_description="{description}"}} 1"#
        ));
        out.push(format!(
            "railscope_neighbour_last_seen_timestamp_seconds{{{key}}} 1764770000"
        ));
    }
    for (family, value) in extra {
        if let Some(on) = family.strip_prefix("pfc_enabled=") {
            for p in 0..8 {
                out.push(format!(
                    r#"railscope_neighbour_pfc_enabled{{{key},priority="{p}"}} {}"#,
                    u8::from(on.split(',').any(|o| o == p.to_string()))
                ));
            }
        } else {
            out.push(format!("railscope_neighbour_{family}{{{key}}} {value}"));
        }
    }
    out.join("\n") + "\n"
}

/// The cabling cases: (golden name, the fleet node's scrape, the neighbour series added).
fn cabling_cases() -> Vec<(&'static str, &'static str, String)> {
    // The DGX H100 node: eight NDR ports, rails 0-7 by GPU. Rail r's leaf is leaf-r<r>-*;
    // rail 3's cable went to rail 2's leaf, rail 5's far end trained at 2X, mlx5_7's umad is
    // not readable by the agent.
    let mut dgx = String::from(
        "railscope_inventory_expected_rail_neighbour_info{rail=\"0\",pattern=\"^leaf-r0-\"} 1\n",
    );
    for rail in 1..8 {
        dgx.push_str(&format!(
            "railscope_inventory_expected_rail_neighbour_info{{rail=\"{rail}\",pattern=\"^leaf-r{rail}-\"}} 1\n"
        ));
    }
    // (device, rail, netdev) as the node's scrape says (the SMP links carry the port's IPoIB
    // netdev, as the neighbour collector labels them there).
    let scrape =
        std::fs::read_to_string(workspace().join("tests/golden/h100-cx7-ndr-ib.prom")).unwrap();
    let label_of = |line: &str, name: &str| {
        line.split(&format!("{name}=\""))
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned()
    };
    let rails: Vec<(String, String, String)> = scrape
        .lines()
        .filter(|l| l.starts_with("railscope_rail_info{"))
        .map(|l| {
            let device = label_of(l, "device");
            let netdev = scrape
                .lines()
                .find(|p| {
                    p.starts_with(&format!("railscope_neighbour_status{{device=\"{device}\""))
                })
                .map(|p| label_of(p, "netdev"))
                .unwrap_or_default();
            (device, label_of(l, "rail"), netdev)
        })
        .collect();
    assert_eq!(rails.len(), 8, "the DGX node's rails");
    for (n, (device, rail, netdev)) in rails.iter().enumerate() {
        let device = device.as_str();
        if device == "mlx5_7" {
            dgx.push_str(&neighbour_link(
                (device, "", "smp"),
                "no_permission",
                None,
                &[],
            ));
            continue;
        }
        let leaf = if rail == "3" { "2" } else { rail.as_str() };
        let width = if rail == "5" { 2.0 } else { 4.0 };
        dgx.push_str(&neighbour_link(
            (device, netdev, "smp"),
            "ok",
            Some((
                &format!("leaf-r{leaf}-a MQM9790"),
                &format!("0x0c42a10300a1b2{n:02x}"),
                &format!("{}", 17 + n),
                "",
            )),
            &[
                ("link_width_lanes", width),
                ("rate_bytes_per_second", 12.5e9 * width),
            ],
        ));
    }
    // The RoCE node: ens1f0np0 (MTU 1500) on a 9216-byte switch port with PFC on 3; ens1f1np1
    // (MTU 4200) on a switch port left at 1518 bytes, lldpd reading its neighbour.
    let mut roce = neighbour_link(
        ("mlx5_0", "ens1f0np0", "lldp"),
        "ok",
        Some((
            "tor-a07",
            "b8:59:9f:0a:0b:0c",
            "Ethernet1/12",
            "node17 port 0",
        )),
        &[
            ("ttl_seconds", 120.0),
            ("max_frame_size_bytes", 9216.0),
            ("pfc_enabled=3", 0.0),
            ("pfc_willing", 0.0),
        ],
    );
    roce.push_str(&neighbour_link(
        ("mlx5_1", "ens1f1np1", "lldpd"),
        "ok",
        Some((
            "tor-a07",
            "b8:59:9f:0a:0b:0c",
            "Ethernet1/13",
            "node17 port 1",
        )),
        &[("ttl_seconds", 120.0), ("max_frame_size_bytes", 1518.0)],
    ));
    vec![
        ("cabling-h100-cx7-ndr-ib", "h100-cx7-ndr-ib", dgx),
        ("cabling-cx6dx-roce-2port", "cx6dx-roce-2port", roce),
    ]
}

/// Doctor's cabling step on the fleet's nodes: a node's scrape (the golden exposition of its
/// fixture tree) plus the neighbour series its switches would give, served as a running
/// agent's, read with `--from`; the report (text and JSON) is golden.
#[test]
fn from_prints_the_cabling_table_of_fleet_nodes() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for (name, tree, neighbours) in cabling_cases() {
        // The fixture node's own neighbour series (no umad, no LLDP there) make way for those of
        // a cabled node.
        let scrape: String =
            std::fs::read_to_string(workspace().join(format!("tests/golden/{tree}.prom")))
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("railscope_neighbour"))
                .map(|l| format!("{l}\n"))
                .collect();
        let addr = serve(format!("{scrape}{neighbours}"));
        let url = format!("http://{addr}/metrics");
        for (ext, format) in [("txt", "text"), ("json", "json")] {
            let (code, out) = doctor(
                &[
                    "--from".to_owned(),
                    url.clone(),
                    "--output".to_owned(),
                    format.to_owned(),
                    "--color".to_owned(),
                    "never".to_owned(),
                ],
                &[],
            );
            assert!(
                out.contains("Cabling") || out.contains("cabling"),
                "{name}: {out}"
            );
            let out = out.replace(&url, "http://ADDR/metrics");
            let path = golden(name, ext);
            if update {
                std::fs::write(&path, &out).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(out, want, "{name}.{ext} differs from {}", path.display());
            if ext == "json" {
                assert_eq!(json(&out)["exit_code"].as_i64(), Some(code as i64));
            }
        }
    }
    // What the goldens must show, beyond being stable.
    let dgx = std::fs::read_to_string(golden("cabling-h100-cx7-ndr-ib", "json")).unwrap();
    let got = problems(&json(&dgx));
    for want in [
        ("warning", "rail_miscabled", "mlx5_3 port 1"),
        ("warning", "neighbour_rate_lower", "mlx5_5 port 1"),
    ] {
        let want = (want.0.to_owned(), want.1.to_owned(), want.2.to_owned());
        assert!(got.contains(&want), "{want:?} in {got:?}");
    }
    let roce = std::fs::read_to_string(golden("cabling-cx6dx-roce-2port", "txt")).unwrap();
    assert!(roce.contains("ens1f1np1 has MTU 4200 (4218 B frames) but its switch port tor-a07 Ethernet1/13 takes frames of at most 1518 B"), "{roce}");
    assert!(roce.contains("frame 9216 B, PFC 3"), "{roce}");
}

/// lldpd (Debian's package) in `ns` on `ifname`, with a private control socket; stopped and
/// reaped when dropped.
struct Lldpd {
    child: std::process::Child,
    ctl: PathBuf,
}

impl Lldpd {
    fn start(ns: &railscope_tests::netns::Netns, ifname: &str) -> Lldpd {
        // lldpd has no --version; -v prints its version and exits.
        let runs = Command::new("lldpd")
            .arg("-v")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            railscope_tests::missing_tool("lldpd", "the Debian package lldpd");
        }
        let ctl = ns.dir().join("lldpd.ctl");
        let conf = ns.dir().join("none.conf");
        std::fs::write(&conf, "").unwrap();
        let child = ns
            .command("lldpd")
            .args(["-d", "-k", "-i", "-u"])
            .arg(&ctl)
            .arg("-O")
            .arg(&conf)
            .args(["-I", ifname])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ctl.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "lldpd made no control socket"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Lldpd { child, ctl }
    }

    fn cli(&self, ns: &railscope_tests::netns::Netns, args: &str) {
        let mut command = vec!["lldpcli", "-u", self.ctl.to_str().unwrap()];
        command.extend(args.split(' '));
        let out = ns.exec(&command);
        assert!(out.status.success(), "lldpcli {args}: {out:?}");
    }
}

impl Drop for Lldpd {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The cabling step against a real neighbour: lldpd on the far end of a veth (in a network
/// namespace of its own) calls itself leaf-07 and announces a switch port that takes frames of
/// at most 1518 bytes and PFC on priority 3; the agent (with CAP_NET_RAW: the test runs as
/// root) hears it on its end, at MTU 9000. `railscope doctor --from` the agent lists the
/// netdev's neighbour in the table, with the far end's frame size and PFC, and finds the MTU
/// above the switch port's frame size.
#[test]
fn cabling_table_of_an_agent_hearing_lldpd() {
    use railscope_tests::netns::Netns;
    let peer = Netns::new("cabling-peer");
    let host = Netns::new("cabling-host");
    let (ours, theirs) = ("cbh0", "cbp0");
    host.ip(&["link", "add", ours, "type", "veth", "peer", "name", theirs]);
    host.ip(&["link", "set", theirs, "netns", peer.name()]);
    host.ip(&["link", "set", ours, "mtu", "9000", "up"]);
    peer.ip(&["link", "set", theirs, "mtu", "9000", "up"]);
    let lldpd = Lldpd::start(&peer, theirs);
    lldpd.cli(&peer, "configure system hostname leaf-07");
    lldpd.cli(&peer, "configure lldp tx-interval 1");
    // IEEE 802.1Qaz PFC Configuration (willing 0, capability 8, priority 3 enabled) and IEEE
    // 802.3 Maximum Frame Size 1518 (0x05ee), as custom TLVs: lldpd sends neither of its own.
    lldpd.cli(
        &peer,
        "configure lldp custom-tlv oui 00,80,c2 subtype 11 oui-info 08,08",
    );
    lldpd.cli(
        &peer,
        "configure lldp custom-tlv oui 00,12,0f subtype 4 oui-info 05,ee",
    );
    let agent = Agent::in_netns(
        &host,
        &[
            "--path.sysfs",
            "/sys",
            "--collector.disable-defaults",
            "--collector.neighbour",
            "--collector.netdev",
            "--collector.netdev.device-include",
            &format!("^{ours}$"),
            "--collector.neighbour.device-include",
            &format!("^{ours}$"),
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = agent.scrape();
        if s.contains("railscope_neighbour_info{")
            && s.contains("railscope_neighbour_max_frame_size_bytes{")
            && s.contains("railscope_neighbour_pfc_enabled{")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no neighbour within 20 s:\n{s}\n{}",
            agent.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let url = format!("http://{}/metrics", agent.addr);
    let run = |format: &str| {
        let out = host
            .command(binary())
            .args([
                "doctor", "--from", &url, "--output", format, "--color", "never",
            ])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let (code, report) = run("json");
    assert_eq!(code, Some(1), "{report}");
    let report = json(&report);
    let step = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "cabling")
        .unwrap();
    let rows = step["table"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{step:#}");
    let row = &rows[0];
    assert_eq!(row["netdev"], ours);
    assert_eq!(row["neighbour"], "leaf-07");
    assert_eq!(row["protocol"], "lldp");
    assert_eq!(row["far_end"], "frame 1518 B, PFC 3");
    assert_eq!(row["status"], "ok");
    assert_eq!(
        (row["device"].as_str(), row["rail"].as_str()),
        (Some(""), Some(""))
    );
    let findings: Vec<(&str, &str, &str)> = step["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap(),
                f["check"].as_str().unwrap(),
                f["subject"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(findings, [("warning", "neighbour_frame_size", ours)]);
    assert_eq!(
        step["findings"][0]["alert"],
        "RailscopeNeighbourFrameSizeBelowMTU"
    );
    let (_, text) = run("text");
    assert!(
        text.contains(&format!(
            "{ours} has MTU 9000 (9018 B frames) but its switch port leaf-07"
        )),
        "{text}"
    );
    assert!(text.contains("frame 1518 B, PFC 3  ok"), "{text}");
}

/// `expected.rail-neighbours` from the config file: the agent exports each rail's pattern for
/// the rules and doctor; a pattern that is not a regular expression stops the agent and doctor
/// at start-up, naming the rail's key.
#[test]
fn rail_neighbour_patterns_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("railscope.yml");
    std::fs::write(
        &config,
        "expected:\n  rail-neighbours:\n    0: \"^leaf-r0-\"\n    \"3\": '^leaf-a3-\\d+'\n",
    )
    .unwrap();
    let agent = Agent::fixture(DGX, &["--config.file", config.to_str().unwrap()]);
    let scrape = agent.scrape();
    let lines: Vec<&str> = scrape
        .lines()
        .filter(|l| l.starts_with("railscope_inventory_expected_rail_neighbour_info"))
        .collect();
    assert_eq!(
        lines,
        [
            r#"railscope_inventory_expected_rail_neighbour_info{rail="0",pattern="^leaf-r0-"} 1"#,
            r#"railscope_inventory_expected_rail_neighbour_info{rail="3",pattern="^leaf-a3-\\d+"} 1"#,
        ],
        "{scrape}"
    );
    railscope_tests::promtool_check_metrics(&scrape);
    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "expected:\n  rail-neighbours:\n    2: \"^leaf-(\"\n").unwrap();
    for command in [vec![], vec!["doctor"]] {
        let out = Command::new(binary())
            .args(&command)
            .args(["--config.file", bad.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{command:?}: {stderr}");
        assert!(
            stderr.contains("expected.rail-neighbours.2")
                && stderr.contains("not a regular expression"),
            "{command:?}: {stderr}"
        );
    }
}
