//! What the `workload` source costs a scrape: the agent (release build) with only that
//! collector, against a fake kubelet listing N pods (each with one GPU, one MIG slice, one
//! VF and one shared HCA) and the host's own /proc, scraped back to back.
//!
//! `cargo build --release -p railscope && cargo run --release -p railscope-tests --example
//! workload_cost -- [PODS...]` (default 0 and 100; the agent is `target/release/railscope`,
//! or `$RAILSCOPE_BIN`). Prints, per pod count: the source's collection time (p50 and p99 of
//! `railscope_collector_duration_seconds{collector="workload"}` over the scrapes), the
//! agent's CPU per scrape from /proc/<pid>/stat, the series, and the process scan alone.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use railscope_tests::kubelet::{self, Server, State};
use railscope_tests::{Agent, find, parse_samples};

const SCRAPES: usize = 200;

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a pod count"))
        .collect();
    let counts = if counts.is_empty() {
        vec![0, 100]
    } else {
        counts
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    println!("| pods | source p50 ms | source p99 ms | agent CPU ms/scrape | series |");
    println!("|---|---|---|---|---|");
    for n in counts {
        let state = Arc::new(Mutex::new(State::default()));
        state.lock().unwrap().pods = (0..n)
            .map(|i| {
                kubelet::pod(
                    "train",
                    &format!("job-{i}"),
                    vec![kubelet::container(
                        "worker",
                        vec![
                            kubelet::devices(
                                "nvidia.com/gpu",
                                &[&format!("GPU-{i:08x}-0000-0000-0000-000000000000")],
                            ),
                            kubelet::devices(
                                "nvidia.com/mig-1g.10gb",
                                &[&format!("MIG-{i:08x}-0000-0000-0000-000000000000")],
                            ),
                            kubelet::devices(
                                "nvidia.com/sriov_rdma_vf",
                                &[&format!(
                                    "0000:{:02x}:{:02x}.{}",
                                    0x3b + i / 256,
                                    (i / 8) % 32,
                                    i % 8
                                )],
                            ),
                            kubelet::devices("rdma/hca_shared_devices_a", &[&format!("{i}")]),
                        ],
                    )],
                )
            })
            .collect();
        let _server = Server::start(&socket, &state);
        let agent = Agent::start(&[
            "--collector.disable-defaults",
            "--collector.workload",
            &format!("--collector.workload.kubelet-socket={}", socket.display()),
            "--log.level",
            "warn",
        ]);
        let pid = agent.child.id();
        let mut durations = Vec::new();
        let cpu0 = cpu_ticks(pid);
        let mut series = 0;
        for _ in 0..SCRAPES {
            let s = parse_samples(&agent.scrape());
            series = s.len();
            durations.push(
                find(
                    &s,
                    "railscope_collector_duration_seconds",
                    &[("collector", "workload")],
                )[0]
                .value
                    * 1000.0,
            );
        }
        let cpu = (cpu_ticks(pid) - cpu0) as f64 * 10.0 / SCRAPES as f64;
        println!(
            "| {n} | {:.2} | {:.2} | {:.2} | {series} |",
            percentile(&mut durations, 0.5),
            percentile(&mut durations, 0.99),
            cpu
        );
        drop(agent);
    }
    let start = Instant::now();
    let mut scanned = 0;
    for _ in 0..20 {
        scanned =
            railscope_collectors::sources::workload::processes::scan(std::path::Path::new("/proc"))
                .1;
    }
    println!(
        "\nprocess scan of this host's /proc ({scanned} processes): {:.2} ms each (every 30 s)",
        start.elapsed().as_secs_f64() * 1000.0 / 20.0
    );
}
