//! The container image (`packaging/build-image`): built here as an OCI image layout with
//! umoci, without a container engine or a base image. The test checks the layout's index,
//! manifest and config (user, entrypoint, port, labels) and the layer's files, then runs the
//! image's own binary, on the image's own C libraries only, in its unpacked root file system
//! (`chroot` as the image's user 65532) against a fixture tree, and scrapes it.
//!
//! What this does not prove: that a container runtime (containerd, CRI-O, podman) starts it;
//! no engine runs on this machine. The layout is what `skopeo copy oci:…` and `podman load`
//! read. Needs root (chroot, and umoci keeps file ownership only as root) and the Debian
//! package `umoci`; a missing tool is a failure.

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
        if let Ok(r) = get(addr, "/metrics", &[])
            && r.status == 200
        {
            break r.text();
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
    let samples = parse_samples(&text);
    assert!(
        samples
            .iter()
            .filter(|s| s.name == "railscope_ib_port_state")
            .count()
            >= 8,
        "{text}"
    );
}
