//! The alert rules: promtool accepts them and their unit tests pass, every alert has a
//! severity, a summary naming the node and a runbook entry that exists in RUNBOOK.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use railscope_tests::{shipped_alerts, workspace};

fn promtool(args: &[&str]) -> String {
    let out = railscope_tests::output(
        Command::new("promtool")
            .args(args)
            .current_dir(workspace().join("alerts")),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn rules_are_valid_and_their_unit_tests_pass() {
    promtool(&[
        "check",
        "rules",
        "railscope.rules.yml",
        "expectations.example.yml",
    ]);
    let mut tests: Vec<String> = std::fs::read_dir(workspace().join("alerts/tests"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| format!("tests/{}", e.file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".test.yml"))
        .collect();
    tests.sort();
    assert!(tests.len() >= 2);
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let out = promtool(&args);
    assert_eq!(out.matches("SUCCESS").count(), tests.len(), "{out}");
}

/// The base of every runbook link in the shipped rules: config.libsonnet's runbookURLPattern
/// up to its `%s`.
fn runbook_base() -> String {
    let config = std::fs::read_to_string(workspace().join("mixin/config.libsonnet")).unwrap();
    let pattern = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("runbookURLPattern: '"))
        .expect("config.libsonnet sets runbookURLPattern");
    pattern.split("%s").next().unwrap().to_owned()
}

#[test]
fn every_alert_has_severity_summary_and_runbook() {
    let runbook = std::fs::read_to_string(workspace().join("alerts/RUNBOOK.md")).unwrap();
    let tests: String = std::fs::read_dir(workspace().join("alerts/tests"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".test.yml"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    let base = runbook_base();
    assert!(
        base.starts_with("https://") && base.contains("/RUNBOOK.md#"),
        "runbookURLPattern is not an absolute link into RUNBOOK.md: {base}"
    );
    let mut alerts = 0;
    for rule in shipped_alerts() {
        let name = rule["alert"].as_str().unwrap();
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name} has severity {severity:?}"
        );
        let summary = rule["annotations"]["summary"].as_str().unwrap_or_default();
        assert!(
            // Fleet-wide alerts name the rail across all nodes, the NVLink domain across its
            // nodes, or the switch with the ports of several nodes behind it, instead.
            summary.starts_with("{{ $labels.instance }}")
                || summary.starts_with("Rail {{ $labels.rail }}")
                || summary.starts_with("NVLink domain {{ $labels.cluster_uuid }}")
                || summary.starts_with("Switch {{ $labels.neighbour }}"),
            "{name}'s summary does not start with the node: {summary}"
        );
        // Absolute, from the configured base, and the anchor of the alert's RUNBOOK heading.
        assert_eq!(
            rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_default(),
            format!("{base}{}", name.to_lowercase()),
            "{name}'s runbook_url"
        );
        assert!(
            runbook.contains(&format!("### {name}\n")),
            "RUNBOOK.md has no section for {name}"
        );
        assert!(
            tests.contains(&format!(
                "alertname: {name}\n        exp_alerts:\n          - exp_labels:"
            )),
            "{name} is never shown firing in a unit test"
        );
        alerts += 1;
    }
    assert!(alerts >= 25, "only {alerts} alerts");
}

/// The README's alert table lists every alert of the rules, in their order, with its
/// severity, and says when it fires in words (no annotation templates).
#[test]
fn the_readme_alert_table_matches_the_rules() {
    let readme = std::fs::read_to_string(workspace().join("docs/alerts.md")).unwrap();
    let from_rules: Vec<(String, String)> = shipped_alerts()
        .iter()
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_owned(),
                r["labels"]["severity"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let table = readme
        .split("| alert | severity | fires when |\n|---|---|---|\n")
        .nth(1)
        .expect("docs/alerts.md has no alert table");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    let from_readme: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r[0].trim_matches('`').to_owned(), r[1].to_owned()))
        .collect();
    assert_eq!(from_readme, from_rules);
    for r in &rows {
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(
            !r[2].contains("{{") && r[2].ends_with('.'),
            "{}: says when it fires in words, as one or more sentences: {}",
            r[0],
            r[2]
        );
    }
}

/// Every runbook entry is Meaning / Impact / Diagnosis / Mitigation, in that order, and its
/// diagnosis names at least one command; the XID table has a row for each XID the rules
/// name, and names the alert the rules raise for it.
#[test]
fn runbook_entries_have_the_four_sections_and_the_xid_table_its_codes() {
    let runbook = std::fs::read_to_string(workspace().join("alerts/RUNBOOK.md")).unwrap();
    let alerts = shipped_alerts();
    let mut entries = 0;
    for entry in runbook.split("\n### ").skip(1) {
        let name = entry.lines().next().unwrap();
        let body = entry.split("\n## ").next().unwrap();
        let at = |part: &str| {
            body.find(&format!("**{part}.**"))
                .unwrap_or_else(|| panic!("{name} has no {part} section"))
        };
        let (m, i, d, g) = (
            at("Meaning"),
            at("Impact"),
            at("Diagnosis"),
            at("Mitigation"),
        );
        assert!(m < i && i < d && d < g, "{name}: sections out of order");
        assert!(
            body[d..g].contains('`'),
            "{name}: the diagnosis names no command"
        );
        entries += 1;
    }
    assert_eq!(entries, alerts.len());
    let table = runbook
        .split("## XID table")
        .nth(1)
        .expect("RUNBOOK has an XID table");
    for code in [
        13, 31, 43, 45, 46, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154,
    ] {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("| {code} |")))
            .unwrap_or_else(|| panic!("no XID table row for {code}"));
        // The alert the row names is the one whose xid regex holds the code.
        for alert in [
            "RailscopeGPUXidHardware",
            "RailscopeGPUXidWarning",
            "RailscopeGPUXidApplication",
        ] {
            let rule = alerts.iter().find(|r| r["alert"] == alert).unwrap();
            let regex = rule["expr"]
                .as_str()
                .unwrap()
                .split("xid=~\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap();
            let raised = regex.split('|').any(|c| c == code.to_string());
            assert_eq!(
                row.contains(alert),
                raised,
                "XID {code}: the table and the rules disagree on {alert}: {row}"
            );
        }
    }
}
