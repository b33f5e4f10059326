//! The agent with only the `gpu` collector, on the fake NVML library (`tests/fake-nvml`),
//! and the fixture helpers the GPU tests share.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nvidia_ml_fake::fixture::Fixture;

use crate::{Agent, Sample, parse_samples, workspace};

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
    agent: Agent,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
}

impl GpuAgent {
    /// Starts the agent on `fixture_file` with `extra` flags and waits until it is ready:
    /// its start-up collection is done (it waits for a hung GPU up to its deadline); scrapes
    /// then start collections of their own.
    pub fn start(fixture_file: &Path, extra: &[&str]) -> GpuAgent {
        let lib = fake_library();
        let mut args = vec![
            "--collector.disable-defaults",
            "--collector.gpu",
            "--collector.gpu.nvml-library",
            lib.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut agent = Agent::launch(&args, &[("RAILSCOPE_FAKE_NVML", fixture_file.as_os_str())]);
        agent.wait_ready();
        let addr = agent.addr;
        GpuAgent { agent, addr }
    }

    /// What the agent logged so far.
    pub fn log(&self) -> String {
        self.agent.log()
    }

    /// One scrape with the given scrape timeout header: the text and how long it took.
    pub fn scrape(&self, timeout_header: &str) -> (String, Duration) {
        let start = Instant::now();
        let resp = self.agent.get(
            "/metrics",
            &[("X-Prometheus-Scrape-Timeout-Seconds", timeout_header)],
        );
        assert_eq!(resp.status, 200, "{}", self.agent.log());
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
