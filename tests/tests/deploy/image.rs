//! The container image (`packaging/build-image`): built here as an OCI image layout with
//! umoci, without a container engine or a base image. The test checks the layout's index,
//! manifest and config (user, entrypoint, port, labels) and the layer's files, then runs the
//! image's own binary, on the image's own C libraries only, in its unpacked root file system
//! (`chroot` as the image's user 65532) against a fixture tree, and scrapes it.
//!
//! A second test runs the image under a real container engine: Debian's `podman` with `crun`,
//! straight from the OCI layout (`oci:<layout>:<tag>`), as a DaemonSet would run it (the
//! image's user and entrypoint, the host's sysfs and procfs mounted read-only under /host,
//! host network), and scrapes it from outside. What neither proves: containerd or CRI-O
//! (the kubelet's runtimes), which read the same layout once it is in a registry
//! (`skopeo copy oci:…`). Needs root (chroot, and umoci keeps file ownership only as root)
//! and the Debian packages `umoci`, `podman` and `crun`; a missing tool is a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use railscope_tests::{
    binary, copy_fixture, free_port, get, parse_samples, require, run_ok, workspace,
};

fn blob(layout: &Path, digest: &serde_json::Value) -> Vec<u8> {
    let digest = digest.as_str().unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();
    std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap()
}

/// The scrape of an agent on `h100-cx7-ndr-ib` shows its eight ports.
fn assert_serves_the_fixture(text: &str) {
    let samples = parse_samples(text);
    let ports = samples
        .iter()
        .filter(|s| s.name == "railscope_ib_port_state")
        .count();
    assert!(ports >= 8, "{ports} ports:\n{text}");
}

/// The agent's /metrics once it answers 200.
fn metrics(addr: std::net::SocketAddr) -> Option<String> {
    get(addr, "/metrics", &[])
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text())
}

/// What `cmd` printed, after it succeeded.
fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_ok(cmd).stdout).into_owned()
}

#[test]
fn the_image_holds_what_it_needs_and_its_binary_serves_metrics() {
    require("umoci", "umoci");
    require("chroot", "coreutils");
    let uid = stdout_of(Command::new("id").arg("-u"));
    assert_eq!(uid.trim(), "0", "building and running the image needs root");
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("oci");
    run_ok(
        Command::new(workspace().join("packaging/build-image"))
            .arg(binary())
            .arg(&layout),
    );

    // Index → manifest → config.
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let entry = &index["manifests"][0];
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        env!("CARGO_PKG_VERSION")
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&layout, &entry["digest"])).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&blob(&layout, &manifest["config"]["digest"])).unwrap();
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(c["Entrypoint"], serde_json::json!(["/usr/bin/railscope"]));
    assert!(c["ExposedPorts"]["9477/tcp"].is_object(), "{c}");
    assert_eq!(
        c["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        c["Labels"]["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);

    // The layer: the binary, its libraries and loader, the user; no shell.
    let layer = dir.path().join("layer.tar.gz");
    std::fs::write(&layer, blob(&layout, &manifest["layers"][0]["digest"])).unwrap();
    let files = stdout_of(Command::new("tar").arg("tzf").arg(&layer));
    for want in [
        "usr/bin/railscope",
        "lib64/ld-linux-x86-64.so.2",
        "etc/passwd",
        "usr/share/doc/railscope/copyright",
    ] {
        assert!(
            files.lines().any(|l| l.trim_start_matches("./") == want),
            "{want}:\n{files}"
        );
    }
    assert!(files.lines().any(|l| l.ends_with("/libc.so.6")), "{files}");
    assert!(
        !files.lines().any(|l| l.ends_with("bin/sh")),
        "a shell in the image"
    );

    // Its binary, on its own libraries, as its user, against a fixture tree.
    let bundle = dir.path().join("bundle");
    run_ok(
        Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!(
                "{}:{}",
                layout.display(),
                env!("CARGO_PKG_VERSION")
            ))
            .arg(&bundle),
    );
    let rootfs = bundle.join("rootfs");
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains(":65532:65532:"), "{passwd}");
    copy_fixture("h100-cx7-ndr-ib", &rootfs.join("fixture"));
    let port = free_port();
    let mut agent = Command::new("chroot")
        .arg("--userspec=65532:65532")
        .arg(&rootfs)
        .args([
            "/usr/bin/railscope",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--path.sysfs",
            "/fixture/sys",
            "--path.procfs",
            "/fixture/proc",
            "--collector.disable-defaults",
            "--collector.infiniband",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    let text = loop {
        if let Some(text) = metrics(addr) {
            break text;
        }
        if let Some(status) = agent.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(agent.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the image's binary exited ({status}):\n{err}");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no answer");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = agent.kill();
    let _ = agent.wait();
    assert_serves_the_fixture(&text);
}

/// The image under podman and crun, from the OCI layout, with a fixture tree as the host's
/// /sys and /proc. podman keeps its state in a temporary directory (`--root`, `--runroot`,
/// the vfs driver: nothing of the machine's own podman is touched). Two settings make it run
/// in a sandboxed CI machine as on a node: no default rlimits (`default_ulimits = []`: podman
/// raises RLIMIT_NPROC, which an unprivileged sandbox forbids), and no cgroups for the
/// container (`--cgroups=disabled`; where the machine mixes cgroup v1 with a v2 hierarchy that
/// has controllers, crun refuses it, so the v2 mount is unmounted in a private mount
/// namespace first: on a pure v1 or v2 machine that step does nothing).
#[test]
fn the_image_runs_under_podman() {
    require("umoci", "umoci");
    let podman = require("podman", "podman");
    require("crun", "crun");
    require("unshare", "util-linux");
    let dir = tempfile::tempdir().unwrap();
    // podman names an `oci:` image after its path, and a name must be lower case: the layout
    // goes where the path has no capitals (tempfile's names have).
    let layout = std::env::temp_dir().join(format!("railscope-oci-{}", std::process::id()));
    struct Gone(std::path::PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _gone = Gone(layout.clone());
    run_ok(
        Command::new(workspace().join("packaging/build-image"))
            .arg(binary())
            .arg(&layout),
    );
    let conf = dir.path().join("containers.conf");
    std::fs::write(
        &conf,
        "[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )
    .unwrap();
    let fixture = copy_fixture("h100-cx7-ndr-ib", &dir.path().join("host"));
    let name = format!("railscope-test-{}", std::process::id());
    // podman with its state in the temporary directory.
    let base: Vec<String> = vec![
        "--root".into(),
        dir.path().join("root").display().to_string(),
        "--runroot".into(),
        dir.path().join("run").display().to_string(),
        "--storage-driver".into(),
        "vfs".into(),
    ];
    let engine = |args: &[&str]| {
        let mut cmd = Command::new(&podman);
        cmd.env("CONTAINERS_CONF", &conf).args(&base).args(args);
        cmd
    };
    struct Removed<F: Fn()>(F);
    impl<F: Fn()> Drop for Removed<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    let _removed = Removed(|| {
        let _ = engine(&["rm", "-f", &name]).output();
    });
    let port = free_port();
    let image = format!("oci:{}:{}", layout.display(), env!("CARGO_PKG_VERSION"));
    let volume = format!("{}:/host:ro", fixture.display());
    let listen = format!("--web.listen-address=127.0.0.1:{port}");
    // `podman run` in a private mount namespace without a mixed-in cgroup v2 mount; the
    // command and its arguments reach `sh` as "$0" "$@", unquoted by nothing.
    run_ok(
        Command::new("unshare")
            .args([
                "-m",
                "sh",
                "-c",
                "umount /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\"",
            ])
            .arg(&podman)
            .args(&base)
            .args([
                "run",
                "-d",
                "--name",
                &name,
                "--network=host",
                "--cgroups=disabled",
                "-v",
                &volume,
                &image,
                "--path.sysfs=/host/sys",
                "--path.procfs=/host/proc",
                &listen,
            ])
            .env("CONTAINERS_CONF", &conf),
    );

    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    let text = loop {
        if let Some(text) = metrics(addr) {
            break text;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let logs = engine(&["logs", &name]).output().unwrap();
            panic!(
                "the container does not answer:\n{}",
                String::from_utf8_lossy(&logs.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_serves_the_fixture(&text);
    // It runs as the image's user, not as root.
    let user = stdout_of(&mut engine(&[
        "inspect",
        "--format",
        "{{.Config.User}}",
        &name,
    ]));
    assert_eq!(user.trim(), "65532:65532");
    let pid = stdout_of(&mut engine(&[
        "inspect",
        "--format",
        "{{.State.Pid}}",
        &name,
    ]));
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|u| u == "65532"),
        "the agent runs as {uid}"
    );
}
