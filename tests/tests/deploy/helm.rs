//! The Helm chart `packaging/helm/railscope`, with Helm's own engine (Helm v4's Go library
//! through the PyPI package `helm-python-sdk`, no `helm` binary):
//!
//! * `helm lint --strict` finds nothing, with the defaults and with every switch on;
//! * the default render is the kustomize base's objects (in the release's namespace), and
//!   each switch changes exactly what it needs ([`VARIANTS`]); a switch with a kustomize
//!   component renders the DaemonSet of the base with that component;
//! * every variant validates and passes checkov as the base does (`k8s_validate`'s helpers);
//! * values.schema.json rejects a misspelt key and a wrong type, naming the value;
//! * the rule template's default is `packaging/kubernetes/prometheusrule.yaml`, and a mixin
//!   parameter set through the values changes the expression it is in, and nothing else.
//!
//! Tools: `kubectl`, the virtual environment of `k8s_validate` (`$RAILSCOPE_K8S_VENV`), and
//! `helm-python-sdk==0.2.2` in its own virtual environment, `$RAILSCOPE_HELM_VENV` (default
//! `/opt/railscope-helm`). A missing tool fails the test, naming its package.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use railscope_tests::{missing_tool, workspace, yaml_to_json};

use crate::k8s_validate::{SKIPPED, checkov, overlay_with, run, run_ok, text, validate, venv};

/// The namespace of every render: the chart's objects land in the release's namespace, the
/// base's in the one its overlay sets.
const NAMESPACE: &str = "monitoring";

/// Lints or renders the chart (argv[2]) with the values argv[3] (JSON) in namespace argv[4],
/// release `railscope`: `lint` prints Helm's report as JSON, `render` the manifests as one
/// YAML stream. A values error (the schema's) exits 3 with Helm's message on stderr.
const HELM: &str = r#"
import json, sys
import helm_python as helm

mode, chart, values, namespace = sys.argv[1:5]
values = json.loads(values)
if mode == "lint":
    print(json.dumps(helm.lint(chart, values, strict=True, namespace=namespace)))
    sys.exit(0)
try:
    with helm.Chart.load(chart) as c:
        manifests = c.render(values, name="railscope", namespace=namespace)
except helm.HelmValuesError as e:
    sys.exit(print(e, file=sys.stderr) or 3)
print("\n---\n".join(m for _, m in sorted(manifests.items()) if m.strip()))
"#;

/// The virtual environment with helm-python-sdk; a missing one fails the test, naming it.
fn helm_venv() -> PathBuf {
    let venv = std::env::var_os("RAILSCOPE_HELM_VENV")
        .map_or_else(|| PathBuf::from("/opt/railscope-helm"), PathBuf::from);
    let python = venv.join("bin/python");
    let found = python.is_file()
        && Command::new(&python)
            .args(["-c", "import helm_python"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !found {
        missing_tool(
            &format!("helm-python-sdk in {}", venv.display()),
            &format!(
                "the PyPI package helm-python-sdk==0.2.2 in a virtual environment (python3 -m \
                 venv {0} && {0}/bin/pip install helm-python-sdk==0.2.2; $RAILSCOPE_HELM_VENV \
                 names another)",
                venv.display()
            ),
        );
    }
    venv
}

fn chart() -> PathBuf {
    workspace().join("packaging/helm/railscope")
}

fn helm(venv: &Path, mode: &str, values: &Value) -> std::process::Output {
    run(Command::new(venv.join("bin/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("-c")
        .arg(HELM)
        .arg(mode)
        .arg(chart())
        .arg(values.to_string())
        .arg(NAMESPACE))
}

/// The chart rendered with `values`, as YAML.
fn render_text(venv: &Path, values: &Value) -> String {
    let out = helm(venv, "render", values);
    assert!(
        out.status.success(),
        "the chart did not render with {values}:\n{}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Objects by `Kind/name`.
fn objects(stream: &str) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for d in yaml_to_json(stream).as_array().unwrap() {
        let key = format!(
            "{}/{}",
            d["kind"].as_str().unwrap(),
            d["metadata"]["name"].as_str().unwrap()
        );
        assert!(out.insert(key.clone(), d.clone()).is_none(), "{key} twice");
    }
    out
}

fn render(venv: &Path, values: &Value) -> BTreeMap<String, Value> {
    objects(&render_text(venv, values))
}

/// The kustomize base with `components`, in [`NAMESPACE`].
fn kustomize(components: &[&str]) -> BTreeMap<String, Value> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        overlay_with(dir.path(), Some(NAMESPACE), components),
    )
    .unwrap();
    objects(&run_ok(
        Command::new("kubectl").arg("kustomize").arg(dir.path()),
    ))
}

/// Every leaf of `v` (scalars, and empty lists and maps) by its path under `prefix`.
fn leaves(v: &Value, prefix: &str, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, &format!("{prefix}/{k}"), out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, &format!("{prefix}/{i}"), out);
            }
        }
        _ => {
            out.insert(prefix.to_owned(), v.clone());
        }
    }
}

/// What `variant` changes against `base`: objects added and removed, and of the objects in
/// both, the leaves set (new or changed, with their new value) and the leaves gone.
#[derive(Debug, PartialEq, Default)]
struct Diff {
    added: BTreeSet<String>,
    removed: BTreeSet<String>,
    set: BTreeMap<String, Value>,
    gone: BTreeSet<String>,
}

fn diff(base: &BTreeMap<String, Value>, variant: &BTreeMap<String, Value>) -> Diff {
    let mut d = Diff::default();
    for (key, new) in variant {
        let Some(old) = base.get(key) else {
            d.added.insert(key.clone());
            continue;
        };
        let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
        leaves(old, key, &mut a);
        leaves(new, key, &mut b);
        for (path, value) in &b {
            if a.get(path) != Some(value) {
                d.set.insert(path.clone(), value.clone());
            }
        }
        d.gone
            .extend(a.keys().filter(|p| !b.contains_key(*p)).cloned());
    }
    d.removed
        .extend(base.keys().filter(|k| !variant.contains_key(*k)).cloned());
    d
}

const DS: &str = "DaemonSet/railscope";
const POD: &str = "DaemonSet/railscope/spec/template/spec";
const CONTAINER: &str = "DaemonSet/railscope/spec/template/spec/containers/0";

/// An expected leaf: `Value::Null` stands for any value (a checksum, a skip's reason, which
/// is checked to name its check instead).
type Leaf = (String, Value);

fn leaf(path: &str, value: Value) -> Leaf {
    (path.to_owned(), value)
}

fn c(path: &str, value: Value) -> Leaf {
    leaf(&format!("{CONTAINER}/{path}"), value)
}

fn p(path: &str, value: Value) -> Leaf {
    leaf(&format!("{POD}/{path}"), value)
}

/// What every web config variant changes: the flag, and the Secret mounted at
/// /etc/railscope/web; then `more`.
fn web_config_mounted(more: Vec<Leaf>) -> Vec<Leaf> {
    let mut leaves = vec![
        c(
            "args/3",
            json!("--web.config.file=/etc/railscope/web/web-config.yml"),
        ),
        c("volumeMounts/2/name", json!("web-config")),
        c("volumeMounts/2/mountPath", json!("/etc/railscope/web")),
        c("volumeMounts/2/readOnly", json!(true)),
        p("volumes/2/name", json!("web-config")),
        p("volumes/2/secret/secretName", json!("railscope-web")),
    ];
    leaves.extend(more);
    leaves
}

/// The checkov skip annotation `n` for `check`.
fn skip(n: u32, check: &str) -> Leaf {
    leaf(
        &format!("{DS}/metadata/annotations/checkov.io/skip{n}"),
        json!(format!("{check}=")),
    )
}

fn uid_0() -> Vec<Leaf> {
    vec![
        c("securityContext/runAsUser", json!(0)),
        c("securityContext/runAsNonRoot", json!(false)),
        skip(6, "CKV_K8S_23"),
        skip(7, "CKV_K8S_40"),
    ]
}

struct Variant {
    name: &'static str,
    values: Value,
    /// The kustomize component that does the same, if there is one.
    component: Option<&'static str>,
    added: &'static [&'static str],
    removed: &'static [&'static str],
    set: Vec<Leaf>,
    gone: Vec<&'static str>,
    /// checkov's skips beyond the base's, as (check, `Kind.name`).
    skips: &'static [(&'static str, &'static str)],
}

#[allow(clippy::too_many_lines)]
fn variants() -> Vec<Variant> {
    let socket = "/var/lib/kubelet/pod-resources";
    vec![
        Variant {
            name: "workload.kubelet",
            values: json!({"workload": {"kubelet": {"enabled": true}}}),
            component: Some("workload-kubelet"),
            added: &[],
            removed: &[],
            set: [
                vec![
                    c(
                        "args/3",
                        json!(format!(
                            "--collector.workload.kubelet-socket={socket}/kubelet.sock"
                        )),
                    ),
                    c("volumeMounts/2/name", json!("pod-resources")),
                    c("volumeMounts/2/mountPath", json!(socket)),
                    c("volumeMounts/2/readOnly", json!(true)),
                    p("volumes/2/name", json!("pod-resources")),
                    p("volumes/2/hostPath/path", json!(socket)),
                    p("volumes/2/hostPath/type", json!("Directory")),
                ],
                uid_0(),
            ]
            .concat(),
            gone: vec![],
            skips: &[
                ("CKV_K8S_23", "DaemonSet.railscope"),
                ("CKV_K8S_40", "DaemonSet.railscope"),
            ],
        },
        Variant {
            name: "kernelLog",
            values: json!({"kernelLog": {"enabled": true}}),
            component: Some("kernel-log"),
            added: &[],
            removed: &[],
            set: [
                vec![
                    c("args/3", json!("--collector.kmsg.reader=syslog")),
                    c("securityContext/capabilities/add/0", json!("SYSLOG")),
                    skip(8, "CKV_K8S_25"),
                ],
                uid_0(),
            ]
            .concat(),
            gone: vec![],
            skips: &[
                ("CKV_K8S_23", "DaemonSet.railscope"),
                ("CKV_K8S_25", "DaemonSet.railscope"),
                ("CKV_K8S_40", "DaemonSet.railscope"),
            ],
        },
        Variant {
            name: "neighbour",
            values: json!({"neighbour": {"enabled": true}}),
            component: Some("neighbour"),
            added: &[],
            removed: &[],
            set: [
                vec![
                    c("securityContext/capabilities/add/0", json!("NET_RAW")),
                    c("volumeMounts/2/name", json!("infiniband")),
                    c("volumeMounts/2/mountPath", json!("/dev/infiniband")),
                    c("volumeMounts/2/readOnly", json!(true)),
                    p("volumes/2/name", json!("infiniband")),
                    p("volumes/2/hostPath/path", json!("/dev/infiniband")),
                    p("volumes/2/hostPath/type", json!("DirectoryOrCreate")),
                    skip(8, "CKV_K8S_25"),
                ],
                uid_0(),
            ]
            .concat(),
            gone: vec![],
            skips: &[
                ("CKV_K8S_23", "DaemonSet.railscope"),
                ("CKV_K8S_25", "DaemonSet.railscope"),
                ("CKV_K8S_40", "DaemonSet.railscope"),
            ],
        },
        Variant {
            name: "transceiver",
            values: json!({"transceiver": {"enabled": true}}),
            component: Some("transceiver"),
            added: &[],
            removed: &[],
            set: [
                vec![
                    c("securityContext/capabilities/add/0", json!("NET_ADMIN")),
                    skip(8, "CKV_K8S_25"),
                ],
                uid_0(),
            ]
            .concat(),
            gone: vec![],
            skips: &[
                ("CKV_K8S_23", "DaemonSet.railscope"),
                ("CKV_K8S_25", "DaemonSet.railscope"),
                ("CKV_K8S_40", "DaemonSet.railscope"),
            ],
        },
        Variant {
            name: "otlp",
            values: json!({"otlp": {"enabled": true}}),
            component: Some("otlp-push"),
            added: &[],
            removed: &[],
            set: vec![
                c(
                    "args/3",
                    json!("--otlp.endpoint=http://opentelemetry-collector.opentelemetry.svc:4317"),
                ),
                c("args/4", json!("--otlp.interval=30s")),
            ],
            gone: vec![],
            skips: &[],
        },
        Variant {
            name: "webConfig with TLS",
            values: json!({
                "webConfig": {"enabled": true, "existingSecret": "railscope-web", "tls": true},
                "serviceMonitor": {"tlsConfig": {"insecureSkipVerify": true}},
            }),
            component: None,
            added: &[],
            removed: &[],
            set: web_config_mounted(vec![
                c("readinessProbe/httpGet/scheme", json!("HTTPS")),
                c("livenessProbe/httpGet/scheme", json!("HTTPS")),
                leaf(
                    "ServiceMonitor/railscope/spec/endpoints/0/scheme",
                    json!("https"),
                ),
                leaf(
                    "ServiceMonitor/railscope/spec/endpoints/0/tlsConfig/insecureSkipVerify",
                    json!(true),
                ),
            ]),
            gone: vec![],
            skips: &[],
        },
        Variant {
            name: "webConfig with basic auth",
            values: json!({
                "webConfig": {"enabled": true, "existingSecret": "railscope-web", "basicAuth": true},
            }),
            component: None,
            added: &[],
            removed: &[],
            set: web_config_mounted(vec![
                c("readinessProbe/tcpSocket/port", json!("metrics")),
                c("livenessProbe/tcpSocket/port", json!("metrics")),
            ]),
            gone: vec![
                "DaemonSet/railscope/spec/template/spec/containers/0/readinessProbe/httpGet/path",
                "DaemonSet/railscope/spec/template/spec/containers/0/readinessProbe/httpGet/port",
                "DaemonSet/railscope/spec/template/spec/containers/0/livenessProbe/httpGet/path",
                "DaemonSet/railscope/spec/template/spec/containers/0/livenessProbe/httpGet/port",
            ],
            skips: &[],
        },
        Variant {
            name: "config file",
            values: json!({"config": {"log": {"level": "debug"}}}),
            component: None,
            added: &["ConfigMap/railscope-config"],
            removed: &[],
            set: vec![
                c(
                    "args/3",
                    json!("--config.file=/etc/railscope/config/railscope.yml"),
                ),
                c("volumeMounts/2/name", json!("config")),
                c("volumeMounts/2/mountPath", json!("/etc/railscope/config")),
                c("volumeMounts/2/readOnly", json!(true)),
                p("volumes/2/name", json!("config")),
                p("volumes/2/configMap/name", json!("railscope-config")),
                leaf(
                    "DaemonSet/railscope/spec/template/metadata/annotations/checksum/config",
                    Value::Null,
                ),
            ],
            gone: vec![],
            skips: &[("CKV_K8S_21", "ConfigMap.railscope-config")],
        },
        Variant {
            name: "podMonitor",
            values: json!({"serviceMonitor": {"enabled": false}, "podMonitor": {"enabled": true}}),
            component: None,
            added: &["PodMonitor/railscope"],
            removed: &["ServiceMonitor/railscope"],
            set: vec![],
            gone: vec![],
            skips: &[],
        },
        Variant {
            name: "prometheusRule and dashboards off",
            values: json!({"prometheusRule": {"enabled": false}, "dashboards": {"enabled": false}}),
            component: None,
            added: &[],
            removed: &["ConfigMap/railscope-dashboards", "PrometheusRule/railscope"],
            set: vec![],
            gone: vec![],
            skips: &[],
        },
    ]
}

/// `Kind.name` of a checkov resource (`Kind.namespace.name[.labels]`), the namespace dropped.
fn short(resource: &str) -> String {
    let parts: Vec<&str> = resource.splitn(4, '.').collect();
    format!("{}.{}", parts[0], parts[2])
}

fn short_all(skips: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = skips.iter().map(|(c, r)| (c.clone(), short(r))).collect();
    out.sort();
    out
}

/// Every value at once (the podMonitor in place of the ServiceMonitor).
fn everything() -> Value {
    json!({
        "workload": {"kubelet": {"enabled": true}},
        "kernelLog": {"enabled": true},
        "neighbour": {"enabled": true},
        "transceiver": {"enabled": true},
        "otlp": {"enabled": true},
        "webConfig": {"enabled": true, "existingSecret": "railscope-web", "tls": true},
        "config": {"log": {"level": "debug"}},
        "serviceMonitor": {"enabled": false},
        "podMonitor": {"enabled": true, "additionalLabels": {"release": "kube-prometheus-stack"}},
        "prometheusRule": {"additionalLabels": {"release": "kube-prometheus-stack"}},
        "image": {"digest": format!("sha256:{}", "0".repeat(64))},
        "runtimeClassName": "nvidia",
        "priorityClassName": "system-node-critical",
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "extraArgs": ["--no-collector.pci"],
    })
}

fn lint_findings(venv: &Path, values: &Value) -> Vec<String> {
    let out = helm(venv, "lint", values);
    assert!(
        out.status.success(),
        "helm lint did not run:\n{}",
        text(&out)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["total_charts_linted"], 1, "{report}");
    let mut found: Vec<String> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("error: {e}"))
        .collect();
    // Severity 2 is a warning, 3 an error; 1 (information: "icon is recommended") passes.
    found.extend(
        report["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["severity"].as_u64().unwrap() >= 2)
            .map(|m| format!("{}: {}", m["path"], m["error"])),
    );
    found
}

#[test]
fn chart_lints_clean_strict() {
    let venv = helm_venv();
    for values in [json!({}), everything()] {
        let found = lint_findings(&venv, &values);
        assert!(
            found.is_empty(),
            "helm lint --strict with {values}:\n{found:#?}"
        );
    }
    // ... and lint does report: a value the schema rejects is an error.
    let found = lint_findings(&venv, &json!({"serviceMonitor": {"intreval": "30s"}}));
    assert!(
        found.iter().any(|f| f.contains("intreval")),
        "helm lint passed a misspelt value: {found:?}"
    );
}

#[test]
fn default_render_is_the_kustomize_base() {
    let venv = helm_venv();
    let chart = render(&venv, &json!({}));
    let base = kustomize(&[]);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        base.keys().collect::<Vec<_>>()
    );
    assert_eq!(diff(&base, &chart), Diff::default());
    assert!(
        chart
            .values()
            .all(|o| o["metadata"]["namespace"] == NAMESPACE)
    );
}

/// Checks `got` against the variant's expectations.
fn assert_diff(v: &Variant, got: &Diff) {
    let name = v.name;
    let strs = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(got.added, strs(v.added), "{name}: objects added");
    assert_eq!(got.removed, strs(v.removed), "{name}: objects removed");
    assert_eq!(got.gone, strs(&v.gone), "{name}: leaves removed");
    let want: BTreeMap<String, Value> = v.set.iter().cloned().collect();
    assert_eq!(
        got.set.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{name}: leaves set"
    );
    for (path, value) in &want {
        let have = &got.set[path];
        match value {
            Value::Null => assert!(!have.is_null(), "{name}: {path}"),
            Value::String(s) if path.contains("checkov.io/skip") => assert!(
                have.as_str().unwrap().starts_with(s)
                    && have.as_str().unwrap().len() > s.len() + 10,
                "{name}: {path} is {have}, not {s}<reason>"
            ),
            _ => assert_eq!(have, value, "{name}: {path}"),
        }
    }
}

#[test]
fn each_switch_changes_exactly_what_it_needs() {
    let venv = helm_venv();
    let default = render(&venv, &json!({}));
    for v in variants() {
        let rendered = render(&venv, &v.values);
        assert_diff(&v, &diff(&default, &rendered));
        // A switch with a kustomize component renders what the component does.
        if let Some(component) = v.component {
            assert_eq!(
                diff(&kustomize(&[component]), &rendered),
                Diff::default(),
                "{}: the chart and components/{component} differ",
                v.name
            );
        }
    }
    // The PodMonitor scrapes as the ServiceMonitor did.
    let pod = render(
        &venv,
        &json!({"serviceMonitor": {"enabled": false}, "podMonitor": {"enabled": true}}),
    );
    let (pm, sm) = (
        &pod["PodMonitor/railscope"]["spec"],
        &default["ServiceMonitor/railscope"]["spec"],
    );
    assert_eq!(pm["podMetricsEndpoints"], sm["endpoints"]);
    assert_eq!(pm["selector"], sm["selector"]);
    // Both at once would scrape every agent twice.
    let out = helm(&venv, "render", &json!({"podMonitor": {"enabled": true}}));
    assert!(!out.status.success());
    assert!(text(&out).contains("enable one"), "{}", text(&out));
    // The flags the switches pass are the agent's (it parses them, then prints its version).
    // The files the two file flags name exist in the pod only.
    let all = render(&venv, &everything());
    let c = &all["DaemonSet/railscope"]["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .filter(|a| !a.starts_with("--config.file") && !a.starts_with("--web.config.file"))
        .collect();
    assert!(args.len() > 6, "{args:?}");
    let out = run(Command::new(railscope_tests::binary())
        .args(&args)
        .arg("--version"));
    assert!(
        out.status.success(),
        "the agent rejects {args:?}:\n{}",
        text(&out)
    );
}

/// A render checkov sees: its name, its values, checkov's skips beyond the base's, and the
/// base's objects it does not render (`Kind.name`).
type Case = (
    String,
    Value,
    Vec<(&'static str, &'static str)>,
    Vec<String>,
);

#[test]
fn every_variant_validates_and_passes_checkov() {
    let k8s = venv();
    let venv = helm_venv();
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<Case> = vec![("default".into(), json!({}), vec![], vec![])];
    for v in variants() {
        let removed = v.removed.iter().map(|k| k.replace('/', ".")).collect();
        cases.push((v.name.to_owned(), v.values, v.skips.to_vec(), removed));
    }
    cases.push((
        "everything".into(),
        everything(),
        vec![
            ("CKV_K8S_21", "ConfigMap.railscope-config"),
            ("CKV_K8S_23", "DaemonSet.railscope"),
            ("CKV_K8S_25", "DaemonSet.railscope"),
            ("CKV_K8S_40", "DaemonSet.railscope"),
        ],
        vec![],
    ));
    let mut files = Vec::new();
    for (i, (name, values, _, _)) in cases.iter().enumerate() {
        let rendered = dir.path().join(format!("variant-{i}.yaml"));
        std::fs::write(&rendered, render_text(&venv, values)).unwrap();
        let summary = validate(&k8s, &rendered, &dir.path().join(format!("core-{i}.yaml")));
        assert!(
            summary["core"].as_array().unwrap().len() >= 3,
            "{name}: {summary}"
        );
        files.push(rendered);
    }
    let skipped = checkov(&k8s, &files);
    for ((name, _, extra, removed), got) in cases.iter().zip(&skipped) {
        let mut want: Vec<(String, String)> = SKIPPED
            .iter()
            .map(|(c, r)| ((*c).to_owned(), short(r)))
            .filter(|(_, r)| !removed.contains(r))
            .chain(
                extra
                    .iter()
                    .map(|(c, r)| ((*c).to_owned(), (*r).to_owned())),
            )
            .collect();
        want.sort();
        assert_eq!(short_all(got), want, "{name}: the skipped checkov findings");
    }
}

#[test]
fn invalid_values_fail_the_schema_naming_the_value() {
    let venv = helm_venv();
    for (values, named) in [
        (json!({"serviceMonitor": {"intreval": "30s"}}), "intreval"),
        (
            json!({"kernelLog": {"enabled": "yes"}}),
            "/kernelLog/enabled",
        ),
        (
            json!({"image": {"pullPolicy": "Sometimes"}}),
            "/image/pullPolicy",
        ),
        (
            json!({"serviceMonitor": {"interval": "30 seconds"}}),
            "/serviceMonitor/interval",
        ),
        (json!({"resources": {"request": {}}}), "request"),
        (
            json!({"prometheusRule": {"params": {"thresholds": {"pfcPauseFraction": "high"}}}}),
            "/prometheusRule/params/thresholds/pfcPauseFraction",
        ),
        (
            json!({"prometheusRule": {"params": {"thresholds": {"pfcPause": 0.3}}}}),
            "pfcPause",
        ),
        (json!({"workload": {"kubelet": {"enable": true}}}), "enable"),
    ] {
        let out = helm(&venv, "render", &values);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(3), "{values} rendered:\n{said}");
        assert!(
            said.contains(named),
            "the schema's error for {values} does not name {named}:\n{said}"
        );
    }
}

/// The rule named `alert` (or recorded as `alert`) in a PrometheusRule object.
fn rule<'a>(pr: &'a Value, name: &str) -> &'a Value {
    pr["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["alert"] == name || r["record"] == name)
        .unwrap_or_else(|| panic!("no rule {name}"))
}

#[test]
fn rule_parameters_are_the_mixin_defaults_and_change_their_expressions() {
    let venv = helm_venv();
    let shipped = yaml_to_json(
        &std::fs::read_to_string(workspace().join("packaging/kubernetes/prometheusrule.yaml"))
            .unwrap(),
    );
    let default = render(&venv, &json!({}));
    let pr = &default["PrometheusRule/railscope"];
    assert_eq!(pr["spec"], shipped[0]["spec"]);

    let changed = render(
        &venv,
        &json!({"prometheusRule": {"params": {
            "thresholds": {"pfcPauseFraction": 0.35, "railImbalanceRatio": 0.4},
            "runbookURLPattern": "https://wiki.example.org/runbook#%s",
        }}}),
    );
    let now = &changed["PrometheusRule/railscope"];
    let storm = rule(now, "RailscopePFCPauseStorm");
    let was = rule(pr, "RailscopePFCPauseStorm");
    let expr = was["expr"].as_str().unwrap();
    assert!(expr.contains("> 0.2"), "{expr}");
    assert_eq!(
        storm["expr"].as_str().unwrap(),
        expr.replace("> 0.2", "> 0.35")
    );
    assert_eq!(
        storm["annotations"]["runbook_url"],
        "https://wiki.example.org/runbook#railscopepfcpausestorm"
    );
    // A value the words derive from (railImbalanceRatio, as a percentage).
    let imbalance = rule(now, "RailscopeRailImbalance");
    let text = imbalance["annotations"].to_string();
    assert!(text.contains("40%"), "{text}");
    assert!(
        !rule(pr, "RailscopeRailImbalance")["annotations"]
            .to_string()
            .contains("40%")
    );
    // Nothing but the parameters changed: the default values give the default rules back.
    let back = render(
        &venv,
        &json!({"prometheusRule": {"params": {"thresholds": {"pfcPauseFraction": 0.2, "railImbalanceRatio": 0.5}}}}),
    );
    assert_eq!(back["PrometheusRule/railscope"], *pr);
}
