//! Starts the real binary against every fixture tree and diffs its exposition against the
//! tree's golden file (`tests/golden/<tree>.prom`). `promtool check metrics` lints every
//! golden file and every live scrape. Set `UPDATE_GOLDEN=1` to rewrite the golden files after
//! an intended change, and review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use railscope_tests::{Agent, fixture_trees, normalize, promtool_check_metrics, workspace};

#[test]
fn every_fixture_tree_matches_its_golden_exposition() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for tree in fixture_trees() {
        let agent = Agent::fixture(&tree, &[]);
        let live = agent.scrape();
        promtool_check_metrics(&live);
        let got = normalize(&live);
        let path = workspace()
            .join("tests/golden")
            .join(format!("{tree}.prom"));
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
                path.display()
            )
        });
        if got != want {
            let diff: Vec<String> = diff_lines(&want, &got);
            failures.push(format!(
                "{tree}: exposition differs from {}:\n{}",
                path.display(),
                diff.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_golden_file_passes_promtool() {
    let mut checked = 0;
    for tree in fixture_trees() {
        let path = workspace()
            .join("tests/golden")
            .join(format!("{tree}.prom"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            text.contains("railscope_ib_port_state"),
            "{tree}: golden file has no port"
        );
        promtool_check_metrics(&text);
        checked += 1;
    }
    assert_eq!(checked, fixture_trees().len());
}

/// Lines only in `want` (`-`) or only in `got` (`+`), at most 40 of them.
fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let want_set: std::collections::HashSet<&str> = want.lines().collect();
    let got_set: std::collections::HashSet<&str> = got.lines().collect();
    let mut out: Vec<String> = want
        .lines()
        .filter(|l| !got_set.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    out.extend(
        got.lines()
            .filter(|l| !want_set.contains(l))
            .map(|l| format!("+ {l}")),
    );
    if out.is_empty() {
        out.push("(same lines, different order)".to_owned());
    }
    out.truncate(40);
    out
}
