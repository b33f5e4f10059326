//! The series budget: how many series each collector exports on each fixture node, as the
//! README's "Series per node" table states them. The agent runs once per collector
//! (`--collector.disable-defaults --collector.<name>`) on every fixture tree, the DGX one with
//! the fake NVML's 8-GPU H100 fixture, and its own families (`railscope_collector_*`,
//! `process_*`, ...) are counted apart. A change that moves a count by more than the margin
//! fails here until the table is updated: at 10,000 nodes every series per node is 10,000 in
//! the store.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use railscope_tests::{Agent, fixtures, parse_samples, tree_args, workspace};

/// Every collector, in the registry's order.
fn collectors() -> Vec<&'static str> {
    railscope_collectors::SOURCES
        .iter()
        .map(|s| s.name)
        .collect()
}

/// The fixture of the DGX-class node, which also gets the 8-GPU fake NVML.
const DGX: &str = "h100-cx7-ndr-ib";

/// How far a count may move without the table being updated: 2 %, and at least 2 series.
fn within_margin(budget: usize, actual: usize) -> bool {
    let margin = (budget / 50).max(2);
    actual.abs_diff(budget) <= margin
}

/// The agent's own families, exported whatever the collectors.
fn own(name: &str) -> bool {
    name.starts_with("process_")
        || name.starts_with("railscope_collector_")
        || name.starts_with("railscope_sysfs_")
        || matches!(
            name,
            "railscope_build_info"
                | "railscope_collections_total"
                | "railscope_scrape_requests_total"
                | "railscope_open_files_kept"
        )
}

/// (series of the collector, the agent's own series) on `tree` with only `collector`.
fn count(tree: &str, collector: &str) -> (usize, usize) {
    let root = fixtures().join(tree);
    let mut args = tree_args(&root);
    let mut env = Vec::new();
    let nvml = workspace().join("tests/fake-nvml/fixtures/h100-sxm-8gpu.json");
    let lib = nvidia_ml_fake::library_path().expect("the fake NVML library");
    if tree == DGX && collector == "gpu" {
        // tree_args points NVML nowhere; the DGX node gets the fake with 8 H100s instead.
        let at = args
            .iter()
            .position(|a| a == "--collector.gpu.nvml-library")
            .unwrap();
        args[at + 1] = lib.display().to_string();
        env.push(("RAILSCOPE_FAKE_NVML", nvml.as_os_str()));
    }
    args.push("--collector.disable-defaults".to_owned());
    args.push(format!("--collector.{collector}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = Agent::launch(&args, &env);
    // The second scrape: sources that learn something on their first pass have run once.
    let _ = agent.scrape();
    let samples = parse_samples(&agent.scrape());
    let mine = samples.iter().filter(|s| !own(&s.name)).count();
    (mine, samples.len() - mine)
}

/// The README's table: fixture → the counts of its row, in registry order, then the
/// agent's own and the total.
fn budget() -> BTreeMap<String, Vec<usize>> {
    let readme = std::fs::read_to_string(workspace().join("docs/fleet.md")).unwrap();
    let header = format!(
        "| fixture | {} | agent | total |\n",
        collectors().join(" | ")
    );
    let table = readme
        .split(&header)
        .nth(1)
        .expect("docs/fleet.md has the series-per-node table");
    table
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let name = cells[0]
                .split_whitespace()
                .next()
                .unwrap()
                .trim_matches('`')
                .to_owned();
            let counts = cells[1..]
                .iter()
                .map(|c| c.replace(',', "").parse().unwrap())
                .collect();
            (name, counts)
        })
        .collect()
}

#[test]
fn every_fixture_stays_within_its_series_budget() {
    let trees = railscope_tests::fixture_trees();
    let budget = budget();
    let mut measured: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for tree in &trees {
        let mut row = Vec::new();
        let mut agent_own = 0;
        for collector in collectors() {
            let (mine, own) = count(tree, collector);
            row.push(mine);
            agent_own = agent_own.max(own);
        }
        let total = row.iter().sum::<usize>() + agent_own;
        row.push(agent_own);
        row.push(total);
        measured.insert(tree.clone(), row);
    }
    let table: String = measured
        .iter()
        .map(|(tree, row)| {
            let gpu = if tree == DGX { " (+8 fake H100s)" } else { "" };
            format!(
                "| `{tree}`{gpu} | {} |\n",
                row.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        })
        .collect();
    let names = collectors();
    let mut wrong = Vec::new();
    for (tree, row) in &measured {
        match budget.get(tree) {
            None => wrong.push(format!("{tree}: no row in the README's table")),
            Some(want) => {
                for (i, (b, a)) in want.iter().zip(row).enumerate() {
                    if !within_margin(*b, *a) {
                        let column = names.get(i).copied().unwrap_or(if i == names.len() {
                            "agent"
                        } else {
                            "total"
                        });
                        wrong.push(format!("{tree} {column}: budget {b}, exported {a}"));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty() && budget.len() == measured.len(),
        "the series budget moved (update docs/fleet.md's \"Series per node\" table if that is intended):\n  {}\nmeasured:\n{table}",
        wrong.join("\n  ")
    );
}
