//! The monitoring mixin (`mixin/`): the shipped rule file, PrometheusRule and dashboards are
//! what it renders with its default parameters, and every parameter reaches every rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use railscope_tests::{rules_of, shipped_alerts, workspace, yaml_to_json};

fn render(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(workspace().join("mixin/render.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install python3"))
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn render_with(config: &str, dir: &Path) -> Output {
    let file = dir.join("overrides.libsonnet");
    std::fs::write(&file, config).unwrap();
    render(&[
        "--config",
        file.to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
    ])
}

#[test]
fn shipped_files_are_what_the_mixin_renders() {
    let out = render(&["--check"]);
    assert!(
        out.status.success(),
        "run python3 mixin/render.py (it needs the Debian package jsonnet):\n{}",
        said(&out)
    );
}

/// Raw series (not recording rules) named in a PromQL expression, with what follows each.
fn raw_series(expr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let bytes = expr.as_bytes();
    for (i, _) in expr.match_indices("railscope_") {
        let before = if i == 0 { b' ' } else { bytes[i - 1] };
        if before == b':' || before.is_ascii_alphanumeric() || before == b'_' {
            continue;
        }
        let name_len = expr[i..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(expr.len() - i);
        let name = &expr[i..i + name_len];
        let rest = &expr[i + name_len..];
        found.push((name.to_owned(), rest.chars().take(40).collect()));
    }
    found
}

/// The label lists of every `by (...)` and `on (...)` in an expression.
fn grouping_lists(expr: &str) -> Vec<String> {
    let mut lists = Vec::new();
    for keyword in ["by (", "on ("] {
        for (i, _) in expr.match_indices(keyword) {
            let rest = &expr[i + keyword.len()..];
            lists.push(rest[..rest.find(')').unwrap()].to_owned());
        }
    }
    lists
}

#[test]
fn every_parameter_reaches_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    let out = render_with(
        r#"{
  _config+:: {
    railscopeSelector: 'job="gpu-fabric"',
    clusterLabel: 'k8s_cluster',
    runbookURLPattern: 'https://runbooks.example.org/railscope/%s',
    severityOverrides: { RailscopePortRateBelowPeers: 'critical', RailscopeGPULost: 'warning' },
    thresholds+: { pfcPauseFraction: 0.35, symbolErrorBER: 1e-13, cnpPerSecond: 20000 },
    xids+: { hardware: [79, 48] },
  },
}
"#,
        dir.path(),
    );
    assert!(out.status.success(), "render failed:\n{}", said(&out));
    let file = dir.path().join("out/railscope.rules.yml");
    let check =
        railscope_tests::output(Command::new("promtool").args(["check", "rules"]).arg(&file));
    assert!(check.status.success(), "{}", said(&check));

    let rules = rules_of(&file);
    let shipped = shipped_alerts();
    assert_eq!(
        rules.iter().filter(|r| r.get("alert").is_some()).count(),
        shipped.len()
    );
    for rule in &rules {
        let name = rule
            .get("alert")
            .or_else(|| rule.get("record"))
            .and_then(|n| n.as_str())
            .unwrap();
        let expr = rule["expr"].as_str().unwrap();
        // The selector is on every raw series, and on `up` and `scrape_duration_seconds`.
        for (series, after) in raw_series(expr) {
            assert!(
                after.starts_with("{job=\"gpu-fabric\""),
                "{name}: {series} without the selector: {series}{after}"
            );
        }
        for meta in ["up{", "scrape_duration_seconds{"] {
            if let Some(i) = expr.find(meta) {
                assert!(
                    expr[i + meta.len()..].starts_with("job=\"gpu-fabric\""),
                    "{name}: {expr}"
                );
            }
        }
        // The cluster label leads every aggregation and join, except the joins with the
        // configured expectations, which are per adapter model in any cluster.
        for list in grouping_lists(expr) {
            assert!(
                list.starts_with("k8s_cluster, ") || list == "k8s_cluster" || list == "hca_type",
                "{name}: ({list}) does not keep the cluster label"
            );
        }
        assert!(!expr.contains("cluster, ") || expr.contains("k8s_cluster, "));
        if let Some(alert) = rule.get("alert").and_then(|a| a.as_str()) {
            assert_eq!(
                rule["annotations"]["runbook_url"],
                format!(
                    "https://runbooks.example.org/railscope/{}",
                    alert.to_lowercase()
                )
            );
            let default = shipped.iter().find(|s| s["alert"] == alert).unwrap();
            let severity = match alert {
                "RailscopePortRateBelowPeers" => "critical",
                "RailscopeGPULost" => "warning",
                _ => default["labels"]["severity"].as_str().unwrap(),
            };
            assert_eq!(rule["labels"]["severity"], severity, "{alert}");
        }
        let wants: &[&str] = match name {
            "RailscopePFCPauseStorm" => &["> 0.35"],
            "RailscopeSymbolErrorsAboveBER" => &["* 1e-13)"],
            "RailscopeCNPSurge" => &["> 20000"],
            "RailscopeGPUXidHardware" => &["xid=~\"79|48\""],
            _ => &[],
        };
        for want in wants {
            assert!(expr.contains(want), "{name} lacks {want}: {expr}");
        }
        if name == "RailscopeSymbolErrorsAboveBER" {
            let summary = rule["annotations"]["summary"].as_str().unwrap();
            assert!(summary.contains("the 1e-13 BER limit"), "{summary}");
        }
    }

    // The PrometheusRule is the same rules; the dashboards come along.
    let spec =
        yaml_to_json(&std::fs::read_to_string(dir.path().join("out/prometheusrule.yaml")).unwrap());
    let file_doc = yaml_to_json(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(spec[0]["kind"], "PrometheusRule");
    assert_eq!(spec[0]["spec"], file_doc[0]);
    for dashboard in ["railscope-node.json", "railscope-fleet.json"] {
        assert!(dir.path().join("out/dashboards").join(dashboard).is_file());
    }
}

#[test]
fn a_bad_parameter_stops_the_render_and_names_it() {
    for (config, field, detail) in [
        (
            "{ _config+:: { severityOverrides: { RailscopeNoSuchAlert: 'critical' } } }",
            "severityOverrides",
            "RailscopeNoSuchAlert",
        ),
        (
            "{ _config+:: { severityOverrides: { RailscopePortDown: 'page' } } }",
            "severityOverrides",
            "RailscopePortDown",
        ),
        (
            "{ _config+:: { runbookURLPattern: 'https://runbooks.example.org/railscope' } }",
            "runbookURLPattern",
            "%s",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = render_with(config, dir.path());
        let text = said(&out);
        assert!(!out.status.success(), "{config} rendered:\n{text}");
        assert!(
            text.contains(field) && text.contains(detail),
            "{config}: the error does not name {field} ({detail}):\n{text}"
        );
        assert!(!dir.path().join("out").exists(), "{config} wrote files");
    }
}

/// The expression without its PromQL comments.
fn code(expr: &str) -> String {
    expr.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Aggregations of an expression that neither keep `instance` (`by` a list with it, or
/// `without` a list without it) nor are followed by a grouping at all: what makes a rule
/// aggregate across nodes.
fn aggregations_across_nodes(expr: &str) -> Vec<String> {
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    let mut across = Vec::new();
    let bytes = expr.as_bytes();
    for agg in AGGREGATIONS {
        for (i, _) in expr.match_indices(agg) {
            let before_ok = i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            let rest = &expr[i + agg.len()..];
            let word_ends = !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if !before_ok || !word_ends {
                continue;
            }
            let rest = rest.trim_start();
            let keeps = if let Some(list) = rest.strip_prefix("by (") {
                list[..list.find(')').unwrap()]
                    .split(", ")
                    .any(|l| l == "instance")
            } else if let Some(list) = rest.strip_prefix("without (") {
                !list[..list.find(')').unwrap()]
                    .split(", ")
                    .any(|l| l == "instance")
            } else {
                // `max (...)` or `max(...)` over everything; anything else is not a call.
                !rest.starts_with('(')
            };
            if !keeps {
                across.push(format!(
                    "{agg} {}",
                    rest.chars().take(30).collect::<String>()
                ));
            }
        }
    }
    if expr.contains("scalar(") {
        across.push("scalar(".to_owned());
    }
    across
}

/// The split for sharded Prometheus: every rule is in exactly one of the node-local and
/// fleet-wide files, unchanged; node-local rules keep `instance` in every join and
/// aggregation (so a shard holding some nodes computes them right); fleet-wide rules read
/// only recording rules, never a raw per-port series, and do compare across nodes.
#[test]
fn node_local_and_fleet_wide_rules_are_split_by_what_they_join() {
    let all = rules_of(&workspace().join("alerts/railscope.rules.yml"));
    let node = rules_of(&workspace().join("alerts/railscope.node.rules.yml"));
    let fleet = rules_of(&workspace().join("alerts/railscope.fleet.rules.yml"));
    assert_eq!(node.len() + fleet.len(), all.len());
    for rule in &all {
        assert!(
            node.contains(rule) != fleet.contains(rule),
            "{rule} is not in exactly one of the split files"
        );
    }
    let name = |r: &serde_json::Value| {
        r.get("alert")
            .or_else(|| r.get("record"))
            .and_then(|n| n.as_str())
            .unwrap()
            .to_owned()
    };
    for rule in &node {
        let expr = code(rule["expr"].as_str().unwrap());
        for list in grouping_lists(&expr) {
            assert!(
                list.split(", ").any(|l| l == "instance") || list == "hca_type",
                "node-local {}: ({list}) joins across nodes",
                name(rule)
            );
        }
        let across = aggregations_across_nodes(&expr);
        assert!(
            across.is_empty(),
            "node-local {} aggregates across nodes: {across:?}",
            name(rule)
        );
    }
    assert!(fleet.len() >= 5, "{} fleet-wide rules", fleet.len());
    for rule in &fleet {
        let expr = code(rule["expr"].as_str().unwrap());
        assert_eq!(
            raw_series(&expr),
            Vec::<(String, String)>::new(),
            "fleet-wide {} reads raw series",
            name(rule)
        );
        assert!(
            !expr.contains("up{") && !expr.contains("scrape_duration"),
            "{}",
            name(rule)
        );
        let joins_across = grouping_lists(&expr)
            .iter()
            .any(|l| !l.split(", ").any(|x| x == "instance"));
        assert!(
            joins_across || !aggregations_across_nodes(&expr).is_empty(),
            "fleet-wide {} compares nothing across nodes: it belongs with the node-local rules",
            name(rule)
        );
    }
    // Every rule the fleet-wide ones read is recorded somewhere.
    let recorded: Vec<String> = all
        .iter()
        .filter_map(|r| r.get("record"))
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    for rule in &fleet {
        let expr = code(rule["expr"].as_str().unwrap());
        for (i, _) in expr.match_indices("railscope:") {
            let series: String = expr[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            assert!(
                recorded.contains(&series) || series.ends_with(":expected"),
                "fleet-wide {} reads {series}, which no rule records",
                name(rule)
            );
        }
    }
}
