//! A benchmark of the exposition encoder alone (no collection, no mapping), for
//! `cargo run --release -p railscope --example encoding_cost`. Not part of the agent's API.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::exposition::{Family, Format, Label, encode};

/// Encodes about 20,000 synthetic samples `runs` times in each format and reports the
/// median, least and mean time per encode.
pub fn encoding(runs: usize) -> String {
    let runs = runs.max(1);
    let families: Arc<[Family]> = synthetic().into();
    let samples: usize = families.iter().map(|f| f.samples.len()).sum();
    let mut report = String::new();
    for format in [Format::Prometheus, Format::OpenMetrics] {
        let mut bytes = 0;
        for _ in 0..runs.div_ceil(10) {
            bytes = encode(Arc::clone(&families), format).len();
        }
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let start = std::time::Instant::now();
                let text = encode(Arc::clone(&families), format);
                let elapsed = start.elapsed().as_secs_f64() * 1e6;
                std::hint::black_box(text);
                elapsed
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let _ = writeln!(
            report,
            "encode {format:?}: {samples} samples, {bytes} bytes: median {:.0} µs, min {:.0} µs, mean {mean:.0} µs per encode ({runs} runs)",
            times[runs / 2],
            times[0]
        );
    }
    report
}

/// About 20,000 samples shaped like a large node's scrape: 200 families of 100 samples;
/// counters (big integers, shared device labels), float and integer gauges (some with a
/// unit), info families with owned label values (a tenth of them needing escapes).
fn synthetic() -> Vec<Family> {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let devices: Vec<Label> = (0..16)
        .map(|d| Label::shared(&format!("mlx5_{d}")))
        .collect();
    let mut families = Vec::new();
    for f in 0..200usize {
        let unit = if f % 3 == 0 { "_bytes" } else { "" };
        let help = leak(format!("Synthetic family {f} of the encoding benchmark."));
        let mut family = match f % 10 {
            0..=5 => Family::counter(leak(format!("railscope_bench_counter_{f}{unit}")), help),
            6..=8 => Family::gauge(leak(format!("railscope_bench_gauge_{f}{unit}")), help),
            _ => Family::info(leak(format!("railscope_bench_{f}")), help),
        };
        family.reserve(100);
        for s in 0..100usize {
            let device = devices[s % 16].clone();
            let port = Label::number((s / 16 + 1) as u32);
            let direction = Label::Static(if s % 2 == 0 { "rx" } else { "tx" });
            match f % 10 {
                0..=5 => family.push(
                    [("device", device), ("port", port), ("direction", direction)],
                    ((f * 1_000_003 + s * 7_919) as u64).wrapping_mul(1_000_000_007),
                ),
                6 | 7 => family.push(
                    [("device", device), ("port", port)],
                    s as f64 * 0.37 + f as f64 / 3.0,
                ),
                8 if s % 2 == 0 => {
                    family.push([("device", device), ("port", port)], (s * 4096) as u64)
                }
                8 => family.push([("device", device), ("port", port)], -(s as i64)),
                _ => family.push(
                    [
                        ("device", device),
                        ("port", port),
                        ("fw_ver", Label::Owned(format!("28.39.{s}"))),
                        ("board_id", Label::Owned("MT_0000000838".to_owned())),
                        (
                            "hca_type",
                            Label::Owned(if s % 10 == 0 {
                                "MT4129 \"CX7\"".to_owned()
                            } else {
                                "MT4129".to_owned()
                            }),
                        ),
                    ],
                    1u64,
                ),
            }
        }
        families.push(family);
    }
    families
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_benchmark_encodes_twenty_thousand_samples_in_both_formats() {
        let report = super::encoding(2);
        assert_eq!(report.lines().count(), 2, "{report}");
        assert!(
            report.contains("encode Prometheus: 20000 samples"),
            "{report}"
        );
        assert!(
            report.contains("encode OpenMetrics: 20000 samples"),
            "{report}"
        );
    }
}
