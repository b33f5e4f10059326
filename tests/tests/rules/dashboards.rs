//! The Grafana dashboards in `dashboards/`: they are what the mixin's jsonnet
//! (`mixin/dashboards/`, parameters in `mixin/config.libsonnet`) renders, valid JSON with the
//! expected uids, unique panel ids and the template variables `datasource`, `job`, `instance`,
//! `rail`, `pod` and `workload`; every panel has a query, every query parses (`promtool check
//! rules`), names only series that railscope exports (a golden file, the README), that the
//! recording rules define, or that Prometheus makes itself, and narrows every selector to `$job`
//! and `$instance`. The threshold lines are the alert levels of the rules, every runbook link
//! names an alert with a runbook entry, and the mixin's parameters (UIDs, a cluster variable,
//! thresholds) take effect.
//!
//! The JSON is flattened by a short `python3` script (python3 is always present); the rendered
//! JSON comes from the `jsonnet` command (Debian package `jsonnet`), parsed with serde_json.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use railscope_tests::names::known_series;
use railscope_tests::{require, workspace};
use serde_json::Value;

const DASHBOARDS: &[(&str, &str)] = &[
    ("railscope-node.json", "railscope-node"),
    ("railscope-fleet.json", "railscope-fleet"),
];

/// Series Prometheus itself produces.
const BUILTINS: &[&str] = &["ALERTS", "up", "scrape_duration_seconds"];

/// Recording rules that hold one value per adapter model or link layer for the whole fleet:
/// the peers a port is compared with. They have no `instance` or `job` by design, and narrowing
/// them to the chosen nodes would compare a node with itself.
fn fleet_level(name: &str) -> bool {
    name.contains(":median_by_")
}

const FLATTEN: &str = r#"
import json, sys
def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))
def one_line(s):
    return " ".join(str(s).split())
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    print("DASH", path, d.get("uid"), d.get("schemaVersion"), sep="\t")
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query", "")
        print("VAR", v.get("name"), v.get("type"), one_line(q), v.get("multi"),
              v.get("includeAll"), v.get("allValue"), sep="\t")
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr"):
            print("EXPR", "annotation", "A", one_line(a["expr"]), sep="\t")
    for p in walk(d.get("panels", [])):
        targets = p.get("targets", [])
        print("PANEL", p.get("id"), p.get("type"), one_line(p.get("title")), len(targets), sep="\t")
        for t in targets:
            print("EXPR", p.get("id"), t.get("refId"), one_line(t.get("expr", "")), sep="\t")
"#;

#[derive(Debug, Default)]
struct Dashboard {
    uid: String,
    schema_version: u32,
    /// name → (type, query, multi, includeAll, allValue)
    vars: BTreeMap<String, [String; 5]>,
    /// (id, type, title, targets)
    panels: Vec<(String, String, String, usize)>,
    /// (panel id, refId, expr)
    exprs: Vec<(String, String, String)>,
}

fn load() -> Vec<Dashboard> {
    let dir = workspace().join("dashboards");
    let out = Command::new("python3")
        .arg("-c")
        .arg(FLATTEN)
        .args(DASHBOARDS.iter().map(|(f, _)| dir.join(f)))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "a dashboard is not valid JSON:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut dashboards: Vec<Dashboard> = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "DASH" => dashboards.push(Dashboard {
                uid: f[2].to_string(),
                schema_version: f[3].parse().unwrap_or(0),
                ..Dashboard::default()
            }),
            "VAR" => {
                let d = dashboards.last_mut().unwrap();
                let v = [f[2], f[3], f[4], f[5], f[6]].map(str::to_string);
                assert!(
                    d.vars.insert(f[1].to_string(), v).is_none(),
                    "{}: variable {} twice",
                    d.uid,
                    f[1]
                );
            }
            "PANEL" => dashboards.last_mut().unwrap().panels.push((
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
                f[4].parse().unwrap(),
            )),
            "EXPR" => dashboards.last_mut().unwrap().exprs.push((
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
            )),
            other => panic!("unexpected line {other}"),
        }
    }
    assert_eq!(dashboards.len(), DASHBOARDS.len());
    dashboards
}

/// Identifiers that are PromQL syntax, not series.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "inf",
    "nan",
];
/// Keywords followed by a parenthesized list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Skips from `open` at `i` to just past its `close`, stepping over quoted strings.
fn skip_group(b: &[u8], mut i: usize, open: u8, close: u8) -> usize {
    let mut depth = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!("unbalanced {}", open as char)
}

/// The series an expression selects: (metric name, its label matchers or "").
fn selectors(expr: &str) -> Vec<(String, String)> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < b.len() && b[i] != c {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'[' => i = skip_group(b, i, b'[', b']'),
            b'{' => panic!("a selector without a metric name in {expr}"),
            b'0'..=b'9' | b'.' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    let exp = b[i] == b'e' || b[i] == b'E';
                    i += 1;
                    if exp && i < b.len() && (b[i] == b'-' || b[i] == b'+') {
                        i += 1;
                    }
                }
            }
            c if ident(c) => {
                let start = i;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                let name = &expr[start..i];
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                let next = b.get(j).copied();
                if LABEL_LISTS.contains(&name) {
                    if next == Some(b'(') {
                        i = skip_group(b, j, b'(', b')');
                    }
                } else if KEYWORDS.contains(&name) || next == Some(b'(') {
                    // syntax or a function call
                } else if next == Some(b'{') {
                    let end = skip_group(b, j, b'{', b'}');
                    out.push((name.to_string(), expr[j + 1..end - 1].to_string()));
                    i = end;
                } else {
                    out.push((name.to_string(), String::new()));
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The mixin's dashboards with its default parameters, as `python3 mixin/render.py` renders
/// them.
const DEFAULT_CONFIG: &str =
    r#"(import "dashboards/dashboards.libsonnet")((import "config.libsonnet")._config)"#;

/// Renders a jsonnet expression with `-J mixin` from the repository root and parses the JSON.
fn render(expr: &str) -> Value {
    let jsonnet = require("jsonnet", "jsonnet");
    let out = Command::new(jsonnet)
        .current_dir(workspace())
        .args(["-J", "mixin", "-e", expr])
        .output()
        .expect("jsonnet");
    assert!(
        out.status.success(),
        "jsonnet -J mixin -e '{expr}' failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("jsonnet writes JSON")
}

/// A committed dashboard, parsed.
fn committed(file: &str) -> Value {
    let path = workspace().join("dashboards").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} is not valid JSON: {e}"))
}

/// Where two JSON values differ, if they do. Numbers compare by value: jsonnet writes
/// `0.20000000000000001` and `1` where Python writes `0.2` and may write `1.0`.
fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            // Within an ulp or two: both sides come from the same double, printed with 17 or
            // with the fewest digits, and serde_json's parsing is not always correctly rounded.
            (x != y && (x - y).abs() > 4.0 * f64::EPSILON * x.abs().max(y.abs()))
                .then(|| format!("{at}: {x} != {y}"))
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(v), Some(w)) => difference(v, w, &format!("{at}/{k}")),
                (Some(_), None) => Some(format!("{at}/{k}: only in the first")),
                (None, _) => Some(format!("{at}/{k}: only in the second")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| difference(v, w, &format!("{at}/{i}"))),
        _ => (a != b).then(|| format!("{at}: {a} != {b}")),
    }
}

/// Every panel of a dashboard, those inside collapsed rows too.
fn all_panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
        for p in panels.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The panel titled `title`, which must exist once.
fn panel<'a>(dashboard: &'a Value, title: &str) -> &'a Value {
    let found: Vec<&Value> = all_panels(dashboard)
        .into_iter()
        .filter(|p| p["title"] == title)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{}: panels titled {title:?}",
        dashboard["uid"]
    );
    found[0]
}

/// The value of a panel's dashed threshold line (its red step).
fn threshold_line(panel: &Value) -> f64 {
    let defaults = &panel["fieldConfig"]["defaults"];
    let style = defaults["custom"]["thresholdsStyle"]["mode"].as_str();
    assert!(
        matches!(style, Some("dashed" | "line+area" | "dashed+area")),
        "{}: no threshold line ({style:?})",
        panel["title"]
    );
    let steps = defaults["thresholds"]["steps"].as_array().unwrap();
    let red: Vec<f64> = steps
        .iter()
        .filter(|s| s["color"] == "red")
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(red.len(), 1, "{}: {steps:?}", panel["title"]);
    red[0]
}

#[test]
fn dashboards_are_what_the_mixin_renders() {
    let rendered = render(DEFAULT_CONFIG);
    let files: BTreeSet<&str> = rendered
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        files,
        DASHBOARDS.iter().map(|(f, _)| *f).collect(),
        "the mixin renders other dashboards than dashboards/ holds"
    );
    for (file, _) in DASHBOARDS {
        if let Some(diff) = difference(&committed(file), &rendered[*file], file) {
            panic!(
                "dashboards/{file} is not what mixin/dashboards renders (run python3 mixin/render.py): {diff}"
            );
        }
    }
}

#[test]
fn dashboards_have_their_uids_unique_panels_and_variables() {
    let dashboards = load();
    let mut uids = BTreeSet::new();
    for (d, (file, uid)) in dashboards.iter().zip(DASHBOARDS) {
        assert_eq!(d.uid, *uid, "{file}");
        assert!(uids.insert(d.uid.clone()), "uid {} twice", d.uid);
        assert!(
            d.schema_version >= 38,
            "{file}: schemaVersion {}",
            d.schema_version
        );

        let mut ids = BTreeSet::new();
        for (id, kind, title, targets) in &d.panels {
            assert!(ids.insert(id.clone()), "{file}: panel id {id} twice");
            if kind != "row" {
                assert!(*targets >= 1, "{file}: panel {id} {title:?} has no query");
            }
        }
        assert!(
            d.panels.len() >= 20,
            "{file}: only {} panels",
            d.panels.len()
        );
        let mut refs = BTreeSet::new();
        for (panel, refid, expr) in &d.exprs {
            assert!(
                !expr.is_empty(),
                "{file}: panel {panel} {refid} has no expr"
            );
            assert!(
                refs.insert((panel.clone(), refid.clone())),
                "{file}: panel {panel} has refId {refid} twice"
            );
        }

        let var = |name: &str| {
            d.vars
                .get(name)
                .unwrap_or_else(|| panic!("{file}: no variable {name}"))
        };
        let ds = var("datasource");
        assert_eq!(
            (ds[0].as_str(), ds[1].as_str()),
            ("datasource", "prometheus")
        );
        for name in ["job", "instance", "rail"] {
            assert_eq!(var(name)[0], "query", "{file}: {name}");
        }
        assert!(var("rail")[1].contains("railscope_rail_info"), "{file}");
        assert!(var("rail")[1].contains("$instance"), "{file}");
        assert!(var("instance")[1].contains("$job"), "{file}");
        // "All" must be a regular expression that also matches an absent label.
        for v in d.vars.values().filter(|v| v[3] == "True") {
            assert_eq!(v[4], ".*", "{file}: {v:?}");
        }
        let fleet = d.uid == "railscope-fleet";
        assert_eq!(
            var("instance")[2] == "True",
            fleet,
            "{file}: instance multi"
        );
    }
}

#[test]
fn every_query_names_known_series_and_narrows_to_the_chosen_nodes() {
    let (exported, recorded) = known_series();
    let mut checked = 0;
    for (d, (file, _)) in load().iter().zip(DASHBOARDS) {
        for v in d.vars.values().filter(|v| v[0] == "query") {
            let metric = v[1]
                .strip_prefix("label_values(")
                .and_then(|q| q.split(['{', ',']).next())
                .unwrap_or_else(|| panic!("{file}: variable query {}", v[1]));
            assert!(exported.contains(metric), "{file}: variable on {metric}");
        }
        for (panel, refid, expr) in &d.exprs {
            let at = format!("{file} panel {panel} {refid}: {expr}");
            // Every query is about the chosen nodes; even fleet comparisons list those nodes
            // only (their peer values are fleet-level, below).
            assert!(expr.contains("$instance"), "{at}: does not use $instance");
            let sels = selectors(expr);
            assert!(!sels.is_empty(), "{at}: selects nothing");
            for (name, matchers) in sels {
                if name.contains(':') {
                    assert!(recorded.contains(&name), "{at}: no recording rule {name}");
                    if fleet_level(&name) {
                        continue;
                    }
                    // Recording rules aggregate job away; instance stays.
                    assert!(
                        matchers.contains(r#"instance=~"$instance""#),
                        "{at}: {name} not narrowed to $instance"
                    );
                } else if name == "ALERTS" {
                    assert!(
                        matchers.contains(r#"alertname=~"Railscope.*""#)
                            && matchers.contains(r#"instance=~"$instance""#),
                        "{at}: ALERTS not narrowed to railscope alerts of $instance"
                    );
                } else {
                    assert!(
                        exported.contains(&name) || BUILTINS.contains(&name.as_str()),
                        "{at}: {name} is in no golden file, recording rule or LIVE_ONLY"
                    );
                    assert!(
                        matchers.contains(r#"job=~"$job""#)
                            && matchers.contains(r#"instance=~"$instance""#),
                        "{at}: {name} not narrowed to $job and $instance"
                    );
                }
                checked += 1;
            }
            // Port series follow the rail variable.
            if expr.contains("railscope_ib_port_") || expr.contains("railscope_rdma_port_") {
                assert!(expr.contains("$rail"), "{at}: a port query without $rail");
            }
        }
    }
    assert!(checked > 200, "only {checked} selectors");
}

#[test]
fn selectors_are_found_in_promql() {
    let s = selectors(
        r#"sum by (rail) (rate(a_total{job=~"$job"}[5m]) * on (instance) group_left (rail) b{x="{"}) / c:d:e > bool 1e-12 or vector(0)"#,
    );
    let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a_total", "b", "c:d:e"]);
    assert_eq!(s[0].1, r#"job=~"$job""#);
}

#[test]
fn every_query_parses() {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::from("groups:\n  - name: dashboards\n    rules:\n");
    let mut n = 0;
    for d in load() {
        for (panel, refid, expr) in &d.exprs {
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$__range", "1h")
                .replace("$cluster", ".*")
                .replace("$job", ".*")
                .replace("$instance", ".*")
                .replace("$rail", ".*")
                .replace("$pod", ".*")
                .replace("$workload", ".*");
            assert!(!expr.contains('$'), "an unknown variable in {expr}");
            let name = format!("dashboard:{}:{panel}{refid}", d.uid.replace('-', "_"));
            let quoted = expr.replace('\\', "\\\\").replace('"', "\\\"");
            yaml.push_str(&format!(
                "      - record: {name}\n        expr: \"{quoted}\"\n"
            ));
            n += 1;
        }
    }
    let path = dir.path().join("dashboards.rules.yml");
    std::fs::write(&path, yaml).unwrap();
    let out = railscope_tests::output(
        Command::new("promtool")
            .arg("check")
            .arg("rules")
            .arg(&path),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool check rules failed:\n{text}");
    assert!(
        text.contains(&format!("SUCCESS: {n} rules found")),
        "{text}"
    );
}

/// The block of `alert` in alerts/railscope.rules.yml, up to the next rule.
fn alert_block<'a>(rules: &'a str, alert: &str) -> &'a str {
    rules
        .split(&format!("- alert: {alert}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("alerts/railscope.rules.yml has no alert {alert}"))
        .split("\n      - ")
        .next()
        .unwrap()
}

/// The number at the start of `text` (up to a space, a parenthesis or the end of the line).
fn number_at(text: &str) -> f64 {
    let token = text.trim_start().split([' ', ')', '\n']).next().unwrap();
    token
        .parse()
        .unwrap_or_else(|e| panic!("not a number: {token:?} ({e})"))
}

/// A field of the mixin's default `_config.thresholds`, rendered.
fn config_threshold(thresholds: &Value, name: &str) -> f64 {
    thresholds[name]
        .as_f64()
        .unwrap_or_else(|| panic!("config.libsonnet has no thresholds.{name}"))
}

/// The alert levels drawn on the panels are the rules' own and the mixin's parameters: the
/// PFC pause fraction line is where RailscopePFCPauseStorm fires, the bit error rate line is
/// the factor of RailscopeSymbolErrorsAboveBER, the GPU temperature line is the configured one.
#[test]
fn threshold_lines_are_the_alert_levels() {
    let thresholds = render(r#"(import "config.libsonnet")._config.thresholds"#);
    let rendered = render(DEFAULT_CONFIG);
    let node = &rendered["railscope-node.json"];
    let fleet = &rendered["railscope-fleet.json"];
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();

    // RailscopePFCPauseStorm: `(rate(railscope_pfc_pause_duration_seconds_total[5m])) > 0.2`.
    let storm = alert_block(&rules, "RailscopePFCPauseStorm");
    let fired: Vec<f64> = storm
        .lines()
        .filter(|l| l.contains("rate(railscope_pfc_pause_duration_seconds_total"))
        .map(|l| {
            number_at(
                l.rsplit_once("[5m])) > ")
                    .unwrap_or_else(|| panic!("RailscopePFCPauseStorm: no threshold in {l}"))
                    .1,
            )
        })
        .collect();
    assert!(!fired.is_empty(), "RailscopePFCPauseStorm:\n{storm}");
    let fraction = config_threshold(&thresholds, "pfcPauseFraction");
    for level in &fired {
        assert_eq!(
            *level, fraction,
            "RailscopePFCPauseStorm fires at {level}:\n{storm}"
        );
    }
    assert_eq!(threshold_line(panel(node, "PFC pause fraction")), fraction);
    // The fleet's table turns red there too.
    let steps = &panel(fleet, "Priorities paused the most (top 20)")["fieldConfig"]["defaults"]["thresholds"]
        ["steps"];
    assert_eq!(
        steps.as_array().unwrap().last().unwrap()["value"].as_f64(),
        Some(fraction)
    );

    // RailscopeSymbolErrorsAboveBER: `> on (...) (railscope_ib_port_rate_bytes_per_second * 8 * 1e-12)`.
    let ber_rule = alert_block(&rules, "RailscopeSymbolErrorsAboveBER");
    let after_rate = ber_rule
        .split("railscope_ib_port_rate_bytes_per_second")
        .nth(1)
        .unwrap_or_else(|| panic!("RailscopeSymbolErrorsAboveBER:\n{ber_rule}"));
    let factor = number_at(
        after_rate
            .split_once("* 8 * ")
            .unwrap_or_else(|| {
                panic!("RailscopeSymbolErrorsAboveBER: no `* 8 * <BER>`:\n{ber_rule}")
            })
            .1,
    );
    assert_eq!(factor, config_threshold(&thresholds, "symbolErrorBER"));
    let ber = panel(node, "Bit error rate (symbol errors per bit)");
    assert_eq!(threshold_line(ber), factor);
    assert_eq!(
        ber["fieldConfig"]["defaults"]["custom"]["scaleDistribution"]["type"], "log",
        "the bit error rate panel has a log scale"
    );
    let expr = ber["targets"][0]["expr"].as_str().unwrap();
    for part in [
        "rate(railscope_ib_port_symbol_errors_total{",
        "railscope_ib_port_rate_bytes_per_second{",
        "* 8",
        "$rail",
    ] {
        assert!(
            expr.contains(part),
            "the bit error rate query lacks {part}: {expr}"
        );
    }

    assert_eq!(
        threshold_line(panel(node, "Temperature")),
        config_threshold(&thresholds, "gpuTemperatureCelsius")
    );
}

/// Every runbook link of a panel names an alert of the rules, points at an absolute URL whose
/// anchor is the alert's name in lower case, and RUNBOOK.md has that heading.
#[test]
fn runbook_links_name_alerts_with_a_runbook_entry() {
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();
    let runbook = std::fs::read_to_string(workspace().join("alerts/RUNBOOK.md")).unwrap();
    let alerts: BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::trim)
        .collect();
    assert!(alerts.len() >= 25, "only {} alerts", alerts.len());
    let mut linked = BTreeSet::new();
    let mut links = 0;
    for (file, _) in DASHBOARDS {
        let dashboard = committed(file);
        for p in all_panels(&dashboard) {
            let title = &p["title"];
            let mut on_panel = BTreeSet::new();
            for link in p["links"].as_array().into_iter().flatten() {
                let at = format!("{file} panel {title}: {link}");
                let alert = link["title"]
                    .as_str()
                    .and_then(|t| t.strip_prefix("Runbook: "))
                    .unwrap_or_else(|| panic!("{at}: not a runbook link"));
                assert!(
                    alerts.contains(alert),
                    "{at}: no alert {alert} in the rules"
                );
                assert!(on_panel.insert(alert), "{at}: {alert} twice");
                let url = link["url"].as_str().unwrap();
                assert!(url.starts_with("https://"), "{at}: not an absolute URL");
                let anchor = alert.to_lowercase();
                assert!(url.ends_with(&format!("#{anchor}")), "{at}: not #{anchor}");
                assert!(
                    runbook.contains(&format!("### {alert}\n")),
                    "{at}: RUNBOOK.md has no heading for #{anchor}"
                );
                assert_eq!(link["targetBlank"], true, "{at}");
                linked.insert(alert.to_owned());
                links += 1;
            }
        }
    }
    assert!(links >= 60, "only {links} runbook links");
    assert!(linked.len() >= 35, "only {} alerts linked", linked.len());
}

/// The mixin's parameters take effect: UIDs, a cluster variable that every query follows, the
/// scrape jobs the job variable offers, and the thresholds.
#[test]
fn dashboards_follow_the_mixin_parameters() {
    let rendered = render(
        r#"(import "dashboards/dashboards.libsonnet")((import "config.libsonnet")._config + {showMultiCluster: true, clusterLabel: "k8s_cluster", railscopeSelector: "job=\"gpu\"", dashboardUIDs: {node: "n1", fleet: "f1"}, thresholds+: {pfcPauseFraction: 0.3}})"#,
    );
    let cluster = r#"k8s_cluster=~"$cluster""#;
    let mut exprs = 0;
    for (file, uid) in [
        ("railscope-node.json", "n1"),
        ("railscope-fleet.json", "f1"),
    ] {
        let d = &rendered[file];
        assert_eq!(d["uid"], uid, "{file}");
        let vars = d["templating"]["list"].as_array().unwrap();
        let names: Vec<&str> = vars.iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "datasource",
                "cluster",
                "job",
                "instance",
                "rail",
                "pod",
                "workload"
            ],
            "{file}"
        );
        let query = |name: &str| {
            let v = vars.iter().find(|v| v["name"] == name).unwrap();
            assert_eq!(v["definition"], v["query"]["query"], "{file}: {name}");
            v["query"]["query"].as_str().unwrap().to_owned()
        };
        let q = query("cluster");
        assert!(
            q.starts_with("label_values(") && q.ends_with(", k8s_cluster)"),
            "{file}: cluster variable {q}"
        );
        assert!(
            query("job").contains(r#"job="gpu""#),
            "{file}: {}",
            query("job")
        );
        for name in ["job", "instance", "rail", "pod", "workload"] {
            assert!(
                query(name).contains(cluster),
                "{file}: {name} {}",
                query(name)
            );
        }

        let mut all: Vec<String> = d["annotations"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["expr"].as_str().map(str::to_owned))
            .collect();
        for p in all_panels(d) {
            for t in p["targets"].as_array().into_iter().flatten() {
                all.push(t["expr"].as_str().unwrap().to_owned());
            }
            // Links to the node dashboard use its UID and keep the cluster.
            for link in p["fieldConfig"]["defaults"]["links"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let url = link["url"].as_str().unwrap();
                assert!(
                    url.starts_with("/d/n1/") && url.contains("${cluster:queryparam}"),
                    "{file}: {url}"
                );
            }
        }
        for expr in &all {
            if expr.contains(r#"job=~"$job""#) || expr.contains("ALERTS{") {
                assert!(expr.contains(cluster), "{file}: no {cluster} in {expr}");
                exprs += 1;
            }
        }
    }
    assert!(exprs > 100, "only {exprs} queries");
    let node = &rendered["railscope-node.json"];
    assert_eq!(threshold_line(panel(node, "PFC pause fraction")), 0.3);

    // Without showMultiCluster, nothing of it: the committed dashboards have no cluster.
    for (file, _) in DASHBOARDS {
        let text = std::fs::read_to_string(workspace().join("dashboards").join(file)).unwrap();
        assert!(!text.contains("$cluster"), "{file} mentions $cluster");
    }
}
