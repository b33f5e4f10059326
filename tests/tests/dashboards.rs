//! The Grafana dashboards in `dashboards/`: they are what `dashboards/generate.py` writes, valid
//! JSON with the expected uids, unique panel ids and the template variables `datasource`, `job`,
//! `instance` and `rail`; every panel has a query, every query parses (`promtool check rules`),
//! names only series that railscope exports (a golden file, the README), that the recording
//! rules define, or that Prometheus makes itself, and narrows every selector to `$job` and
//! `$instance`.
//!
//! The JSON is flattened by a short `python3` script (python3 is always present; the crate has
//! no JSON parser of its own), and the checks run here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use railscope_tests::{VOLATILE_FAMILIES, workspace};

const DASHBOARDS: &[(&str, &str)] = &[
    ("railscope-node.json", "railscope-node"),
    ("railscope-fleet.json", "railscope-fleet"),
];

/// Series Prometheus itself produces.
const BUILTINS: &[&str] = &["ALERTS", "up", "scrape_duration_seconds"];

/// Series every agent exports that no golden file holds, each with the reason. The README
/// must document each of them (checked below). Panels built only on these return no data on an
/// agent that reads a fixture tree, so an end-to-end run against fixture agents sees them empty:
/// * the `ethtool` and `dcb` collectors ask only netdevs of the agent's own network namespace
///   (fixture netdevs are not), and the netdev traffic counters come from rtnetlink alone;
/// * XID counts arrive from NVML event threads and are left out of the goldens (`gpu.rs`), though
///   the fake NVML's fault fixtures produce them;
/// * the agent's own volatile families (`VOLATILE_FAMILIES`) are exported by every agent and only
///   left out of the goldens because their values change.
const LIVE_ONLY: &[&str] = &[
    "railscope_pfc_pause_duration_seconds_total",
    "railscope_pfc_pause_frames_total",
    "railscope_pfc_pause_storm_events_total",
    "railscope_netdev_priority_discards_total",
    "railscope_netdev_out_of_buffer_discards_total",
    "railscope_netdev_phy_fec_corrected_bit_errors_total",
    "railscope_netdev_phy_symbol_errors_total",
    "railscope_netdev_bytes_total",
    "railscope_netdev_errors_total",
    "railscope_netdev_drops_total",
    "railscope_netdev_carrier_changes_total",
    "railscope_dcb_pfc_enabled",
    "railscope_gpu_xid_errors_total",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
];

/// Recording rules that hold one value per adapter model or link layer for the whole fleet:
/// the peers a port is compared with. They have no `instance` or `job` by design, and narrowing
/// them to the chosen nodes would compare a node with itself.
fn fleet_level(name: &str) -> bool {
    name.contains(":max_by_")
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

/// Every series name the golden files hold, the recording rules define, or the README documents
/// as live-only.
fn known_series() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut exported = BTreeSet::new();
    for e in std::fs::read_dir(workspace().join("tests/golden")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "prom") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let name = line
                    .strip_prefix("# TYPE ")
                    .unwrap_or(line)
                    .split(['{', ' '])
                    .next()
                    .unwrap();
                if !name.is_empty() && !name.starts_with('#') {
                    exported.insert(name.to_string());
                }
            }
        }
    }
    assert!(exported.contains("railscope_rail_info"), "no golden files?");
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    for name in LIVE_ONLY {
        assert!(
            readme.contains(&format!("`{name}")) || readme.contains(&format!("{name}`")),
            "{name} is not documented in README.md"
        );
        exported.insert(name.to_string());
    }
    for family in VOLATILE_FAMILIES {
        if !family.ends_with('_') {
            exported.insert(family.to_string());
        }
    }
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();
    let recorded: BTreeSet<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .map(|r| r.trim().to_string())
        .collect();
    assert!(recorded.contains("railscope:port_rail:info"));
    (exported, recorded)
}

#[test]
fn dashboards_are_generated_from_generate_py() {
    let out = Command::new("python3")
        .arg(workspace().join("dashboards/generate.py"))
        .arg("--check")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
                .replace("$job", ".*")
                .replace("$instance", ".*")
                .replace("$rail", ".*");
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
    let out = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}); install the Debian package `prometheus`")
        });
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

/// The alert levels drawn on the panels are the rules' own: `PFC_STORM_FRACTION` in
/// generate.py is the threshold of RailscopePFCPauseStorm, and a panel draws it.
#[test]
fn alert_levels_on_panels_are_the_rules() {
    let generate = std::fs::read_to_string(workspace().join("dashboards/generate.py")).unwrap();
    let fraction = generate
        .lines()
        .find_map(|l| l.strip_prefix("PFC_STORM_FRACTION = "))
        .and_then(|v| v.split_whitespace().next())
        .expect("generate.py sets PFC_STORM_FRACTION");
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();
    let storm = rules
        .split("- alert: RailscopePFCPauseStorm")
        .nth(1)
        .unwrap()
        .split("- alert: ")
        .next()
        .unwrap();
    assert!(
        storm.contains(&format!(
            "(rate(railscope_pfc_pause_duration_seconds_total[5m])) > {fraction}"
        )),
        "RailscopePFCPauseStorm does not fire at {fraction}:\n{storm}"
    );
    let node = std::fs::read_to_string(workspace().join("dashboards/railscope-node.json")).unwrap();
    let node: serde_json::Value = serde_json::from_str(&node).unwrap();
    let drawn = node["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| std::iter::once(p).chain(p["panels"].as_array().into_iter().flatten()))
        .find(|p| p["title"] == "PFC pause fraction")
        .map(|p| p["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"].clone())
        .expect("the node dashboard has a PFC pause fraction panel");
    assert_eq!(drawn.as_f64(), fraction.parse::<f64>().ok());
}
