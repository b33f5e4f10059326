//! Load on loopback against a fixture tree: bursts of concurrent scrapes beyond
//! `--web.max-requests` (every one answered, 200 or the documented 503, and concurrent
//! scrapes sharing collections), then tens of thousands of scrapes in sequence over
//! keep-alive with resident memory and thread count staying flat. The figures are printed
//! (`cargo test --test surface load:: -- --nocapture`) for the record; `scripts/bench-scrape` gives
//! the same figures for a release build.
//!
//! The long sequence runs against the `topology` collector alone (it still reads the
//! fixture's PCI tree on every collection): what it exercises is the HTTP surface and the
//! scheduler, and a full DGX exposition costs some 100 ms to encode in a debug build.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use railscope_tests::{Agent, get, parse_samples, value};

const BURST: usize = 300;
const SEQUENTIAL: usize = 20_000;

/// A field of `/proc/<pid>/status` (`VmRSS` in KiB, `Threads`).
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// (scrape requests, collections) as the agent counts them.
fn totals(agent: &Agent) -> (f64, f64) {
    let samples = parse_samples(&agent.scrape());
    (
        value(&samples, "railscope_scrape_requests_total", &[]),
        value(&samples, "railscope_collections_total", &[]),
    )
}

/// An HTTP/1.1 client on one keep-alive connection.
struct KeepAlive {
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    fn connect(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        KeepAlive {
            reader: BufReader::new(stream),
        }
    }

    /// GETs `path`; returns status and body length.
    fn get(&mut self, path: &str) -> (u16, usize) {
        let request = format!("GET {path} HTTP/1.1\r\nHost: railscope\r\n\r\n");
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut length = None;
        let mut chunked = false;
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = Some(value.trim().parse::<usize>().unwrap()),
                "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
                "connection" => assert!(
                    !value.trim().eq_ignore_ascii_case("close"),
                    "the agent closed a keep-alive connection"
                ),
                _ => {}
            }
        }
        let mut total = 0;
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).unwrap();
                total += size;
                if size == 0 {
                    break;
                }
            }
        } else {
            let mut body = vec![0; length.expect("no content-length")];
            self.reader.read_exact(&mut body).unwrap();
            total = body.len();
        }
        (status, total)
    }
}

/// Sends `BURST` scrapes at once, each on its own connection; returns (status, body) of each
/// and the wall time.
fn burst(addr: SocketAddr) -> (Vec<(u16, String)>, Duration) {
    let barrier = Arc::new(Barrier::new(BURST + 1));
    let threads: Vec<_> = (0..BURST)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let resp = get(addr, "/metrics", &[("Accept-Encoding", "gzip")])
                    .unwrap_or_else(|e| panic!("a concurrent scrape got no answer: {e}"));
                let text = if resp.status == 200 {
                    String::new()
                } else {
                    resp.text()
                };
                (resp.status, text)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let answers: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    (answers, start.elapsed())
}

#[test]
fn a_burst_over_max_requests_is_answered_200_or_503() {
    let agent = Agent::fixture("h100-cx7-ndr-ib", &[]);
    let (scrapes0, collections0) = totals(&agent);
    let (answers, took) = burst(agent.addr);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s == 503).collect();
    let (scrapes1, collections1) = totals(&agent);
    // The final `totals` scrape itself counts once.
    let (scrapes, collections) = (scrapes1 - scrapes0 - 1.0, collections1 - collections0);
    println!(
        "burst of {BURST} at --web.max-requests 40 (full DGX H100 fixture): {ok} x 200, {} x 503 in {:.2} s ({:.0} answers/s); {scrapes} scrapes served by {collections} collections",
        refused.len(),
        took.as_secs_f64(),
        BURST as f64 / took.as_secs_f64()
    );
    assert_eq!(
        ok + refused.len(),
        BURST,
        "every scrape is answered 200 or 503: {:?}",
        answers.iter().map(|(s, _)| s).collect::<Vec<_>>()
    );
    assert!(ok >= 1, "no scrape was served");
    assert!(
        !refused.is_empty(),
        "{BURST} simultaneous scrapes never had more than 40 in flight"
    );
    for (_, body) in &refused {
        assert_eq!(
            body,
            "Limit of concurrent requests reached (40), try again later.\n"
        );
    }
    assert_eq!(
        scrapes, ok as f64,
        "scrape_requests_total counts the served scrapes"
    );
    assert!(
        collections * 2.0 <= scrapes,
        "concurrent scrapes should share collections: {collections} collections for {scrapes} scrapes"
    );
    // The agent is healthy afterwards and serves again at once.
    assert_eq!(agent.get("/metrics", &[]).status, 200);
}

#[test]
fn an_unlimited_burst_is_served_whole_and_shares_collections() {
    let agent = Agent::fixture(
        "h100-cx7-ndr-ib",
        &[
            "--web.max-requests",
            "0",
            "--collector.disable-defaults",
            "--collector.topology",
        ],
    );
    let pid = agent.child.id();
    let (scrapes0, collections0) = totals(&agent);
    let (answers, took) = burst(agent.addr);
    let (scrapes1, collections1) = totals(&agent);
    let (scrapes, collections) = (scrapes1 - scrapes0 - 1.0, collections1 - collections0);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    let threads = proc_status(pid, "Threads");
    println!(
        "burst of {BURST} without a limit (topology collector): {ok} x 200 in {:.2} s ({:.0} scrapes/s); {collections} collections for {scrapes} scrapes ({:.3} per scrape); {threads} threads after",
        took.as_secs_f64(),
        BURST as f64 / took.as_secs_f64(),
        collections / scrapes
    );
    assert_eq!(ok, BURST, "without a limit every scrape is served");
    assert_eq!(scrapes, BURST as f64);
    assert!(
        collections * 3.0 <= scrapes,
        "concurrent scrapes should share collections: {collections} collections for {scrapes} scrapes"
    );
    // Two runtime workers, at most 64 blocking threads (they exit when idle), the main thread.
    assert!(threads <= 2 + 64 + 4, "{threads} threads after the burst");
}

/// The sequence runs with no collector: each scrape still goes through the HTTP surface,
/// the scheduler (a collection of zero sources), the agent's own process metrics and the
/// encoder, at about 1 ms a scrape in a debug build instead of 3 ms with one collector.
#[test]
fn a_long_sequence_keeps_memory_and_threads_flat() {
    let agent = Agent::fixture("h100-cx7-ndr-ib", &["--collector.disable-defaults"]);
    let pid = agent.child.id();
    let mut client = KeepAlive::connect(agent.addr);
    for _ in 0..1_000 {
        assert_eq!(client.get("/metrics").0, 200);
    }
    let (rss_warm, threads_warm) = (proc_status(pid, "VmRSS"), proc_status(pid, "Threads"));
    let (scrapes0, collections0) = totals(&agent);
    let start = Instant::now();
    let mut bytes = 0;
    for i in 0..SEQUENTIAL {
        let (status, len) = client.get("/metrics");
        assert_eq!(status, 200, "scrape {i} of the sequence");
        bytes += len;
    }
    let took = start.elapsed();
    let (scrapes1, collections1) = totals(&agent);
    let (rss_end, threads_end) = (proc_status(pid, "VmRSS"), proc_status(pid, "Threads"));
    println!(
        "{SEQUENTIAL} scrapes in sequence over one keep-alive connection: {:.1} s ({:.0} scrapes/s, {} bytes each); {:.3} collections per scrape",
        took.as_secs_f64(),
        SEQUENTIAL as f64 / took.as_secs_f64(),
        bytes / SEQUENTIAL,
        (collections1 - collections0) / (scrapes1 - scrapes0)
    );
    println!(
        "resident memory {rss_warm} KiB after 1000 warm-up scrapes, {rss_end} KiB after {SEQUENTIAL} more; threads {threads_warm} then {threads_end}"
    );
    assert_eq!(scrapes1 - scrapes0 - 1.0, SEQUENTIAL as f64);
    assert!(
        rss_end * 2 <= rss_warm * 3 + 16 * 1024 * 2,
        "resident memory grew from {rss_warm} KiB to {rss_end} KiB"
    );
    assert!(
        threads_end <= threads_warm + 4,
        "threads grew from {threads_warm} to {threads_end}"
    );
}
