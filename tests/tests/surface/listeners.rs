//! Listeners, as exporter-toolkit has them: `--web.listen-address` repeated (one listener
//! each, basic auth on every one), a bind failure naming its address, and systemd socket
//! activation (`--web.systemd-socket`) under `systemd-socket-activate`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpListener};
use std::process::Command;

use railscope_tests::{Agent, binary, fixtures, free_port, get, output, parse_samples, tree_args};

const TREE: &str = "cx6dx-roce-2port";

fn args(extra: &[&str]) -> Vec<String> {
    let mut args = tree_args(&fixtures().join(TREE));
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

fn serves_metrics(addr: SocketAddr, headers: &[(&str, &str)]) {
    let resp = get(addr, "/metrics", headers).unwrap();
    assert_eq!(resp.status, 200, "{addr}");
    let samples = parse_samples(&resp.text());
    assert!(
        samples.iter().any(|s| s.name == "railscope_ib_port_state"),
        "{addr}"
    );
}

#[test]
fn each_listen_address_is_a_listener() {
    let second: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = args(&["--web.listen-address", &second.to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::start(&args);
    serves_metrics(agent.addr, &[]);
    serves_metrics(second, &[]);
    assert!(agent.terminate().success());
}

#[test]
fn basic_auth_applies_to_every_listener() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("web.yml");
    let hash = bcrypt::hash("secret", 4).unwrap();
    std::fs::write(&config, format!("basic_auth_users:\n  prom: '{hash}'\n")).unwrap();
    let second: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let args = args(&[
        "--web.listen-address",
        &second.to_string(),
        "--web.config.file",
        config.to_str().unwrap(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::listening(&args);
    // "prom:secret"
    let auth = [("Authorization", "Basic cHJvbTpzZWNyZXQ=")];
    for addr in [agent.addr, second] {
        assert_eq!(get(addr, "/metrics", &[]).unwrap().status, 401, "{addr}");
        serves_metrics(addr, &auth);
    }
}

#[test]
fn a_second_address_that_cannot_be_bound_stops_start_up_naming_it() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let first = format!("127.0.0.1:{}", free_port());
    let out = output(Command::new(binary()).args(args(&[])).args([
        "--web.listen-address",
        &first,
        "--web.listen-address",
        &busy,
    ]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("failed to listen on {busy}")),
        "{stderr}"
    );
    let out = output(Command::new(binary()).args(args(&[])).args([
        "--web.listen-address",
        &first,
        "--web.listen-address",
        "localhost",
    ]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--web.listen-address (web.listen-address)")
            && stderr.contains("localhost"),
        "{stderr}"
    );
}

#[test]
fn the_config_files_listen_address_takes_a_list() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (free_port(), free_port());
    let config = dir.path().join("railscope.yml");
    std::fs::write(
        &config,
        format!("web:\n  listen-address: [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\n"),
    )
    .unwrap();
    let mut child = Command::new(binary())
        .args(args(&["--config.file", config.to_str().unwrap()]))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for port in [a, b] {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        while get(addr, "/-/healthy", &[]).map(|r| r.status).ok() != Some(200) {
            assert!(child.try_wait().unwrap().is_none(), "railscope exited");
            assert!(std::time::Instant::now() < deadline, "{addr} never served");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn socket_activation_serves_metrics() {
    let mut args = args(&[]);
    args.extend(["--log.level".into(), "info".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::socket_activated(&[], &args);
    serves_metrics(agent.addr, &[]);
    assert!(
        agent
            .log()
            .contains("Listening on systemd activated listeners"),
        "{}",
        agent.log()
    );
    let named = Agent::socket_activated(&["--fdname=metrics"], &args);
    serves_metrics(named.addr, &[]);
    assert!(named.log().contains("sockets=metrics"), "{}", named.log());
    assert!(named.terminate().success());
}

#[test]
fn systemd_socket_without_passed_sockets_fails_clearly() {
    let out = output(
        Command::new(binary())
            .args(args(&["--web.systemd-socket"]))
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID"),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--web.systemd-socket: no socket activation file descriptors found"),
        "{stderr}"
    );
    // Sockets passed to another process are not this one's.
    let out = output(
        Command::new(binary())
            .args(args(&["--web.systemd-socket"]))
            .env("LISTEN_FDS", "1")
            .env("LISTEN_PID", "1"),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no socket activation file descriptors"),
        "{out:?}"
    );
}
