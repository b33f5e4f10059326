//! The exposition encoder alone, on about 20,000 synthetic samples:
//! `cargo run --release -p railscope --example encoding_cost [RUNS]` (default 300).

fn main() {
    let runs = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    print!("{}", railscope::bench::encoding(runs));
}
