//! The agent with only the `gpu` collector, on the fake NVML library (`tests/fake-nvml`),
//! and the fixture helpers the GPU tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::Fixture;

use crate::{Sample, binary, free_port, get, parse_samples, workspace};

/// The fake NVML library, built if needed.
pub fn fake_library() -> PathBuf {
    nvidia_ml_fake::library_path().expect("the fake NVML library")
}

/// A fixture of the fake NVML library by file name.
pub fn fixture(name: &str) -> PathBuf {
    workspace().join("tests/fake-nvml/fixtures").join(name)
}

/// A copy of fixture `name` at `dir/live.json`, to change while an agent reads it.
pub fn live_fixture(dir: &Path, name: &str) -> (PathBuf, Fixture) {
    let live = dir.join("live.json");
    let f = Fixture::load(&fixture(name)).unwrap();
    f.save(&live).unwrap();
    (live, f)
}

/// The agent with only the gpu collector, on the fake library driven by a fixture file.
pub struct GpuAgent {
    child: std::process::Child,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
}

impl GpuAgent {
    /// Starts the agent on `fixture_file` with `extra` flags and waits until it is ready.
    pub fn start(fixture_file: &Path, extra: &[&str]) -> GpuAgent {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let lib = fake_library();
        let child = Command::new(binary())
            .args([
                "--web.listen-address",
                &listen,
                "--collector.disable-defaults",
                "--collector.gpu",
            ])
            .arg("--collector.gpu.nvml-library")
            .arg(&lib)
            .args(extra)
            .env("RAILSCOPE_FAKE_NVML", fixture_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = listen.parse().unwrap();
        // Ready once the start-up collection is done (it waits for a hung GPU up to its
        // deadline); scrapes then start collections of their own.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !get(addr, "/-/ready", &[]).is_ok_and(|r| r.status == 200) {
            assert!(Instant::now() < deadline, "agent did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        GpuAgent { child, addr }
    }

    /// One scrape with the given scrape timeout header: the text and how long it took.
    pub fn scrape(&self, timeout_header: &str) -> (String, Duration) {
        let start = Instant::now();
        let resp = get(
            self.addr,
            "/metrics",
            &[("X-Prometheus-Scrape-Timeout-Seconds", timeout_header)],
        )
        .unwrap();
        assert_eq!(resp.status, 200);
        (resp.text(), start.elapsed())
    }

    /// One scrape, parsed.
    pub fn samples(&self) -> Vec<Sample> {
        parse_samples(&self.scrape("5").0)
    }

    /// Scrapes until `done` holds of a scrape, for up to 8 s.
    pub fn poll(&self, mut done: impl FnMut(&[Sample]) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(8);
        loop {
            if done(&self.samples()) {
                return;
            }
            assert!(Instant::now() < deadline, "{what} never showed");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for GpuAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
