//! The rendered Kubernetes base validates and passes a security scan:
//!
//! * `kubectl kustomize packaging/kubernetes` renders it;
//! * the core objects (ServiceAccount, DaemonSet, Service, ConfigMap) validate strictly
//!   (unknown fields rejected) with `kubernetes-validate` against Kubernetes [`K8S_VERSION`];
//! * the ServiceMonitor and PrometheusRule validate with `jsonschema` against
//!   `packaging/kubernetes/schemas/*.json` (the prometheus-operator CRD fields railscope uses);
//! * `checkov` finds nothing: every finding is fixed, or skipped on its object with a
//!   `checkov.io/skipN: CKV_..=reason` annotation, and the skipped set is [`SKIPPED`].
//!
//! Tools: `kubectl`, and `kubernetes-validate` and `checkov` from PyPI in a virtual
//! environment, `$RAILSCOPE_K8S_VENV` (default `/opt/railscope-k8s`), whose Python also
//! provides PyYAML and jsonschema (dependencies of both). A missing tool fails the test,
//! naming its package (`scripts/test` installs them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use railscope_tests::{missing_tool, runs, workspace};

/// The Kubernetes version whose schemas the core objects must satisfy: the oldest that
/// kubernetes-validate 1.37.0 ships, so the base applies to every cluster it knows.
const K8S_VERSION: &str = "1.33.0";

/// Every checkov finding that stays, as (check, resource); each carries its reason in an
/// annotation on the object (see packaging/README.md). A new finding must be fixed or added
/// here and there.
const SKIPPED: &[(&str, &str)] = &[
    (
        "CKV2_K8S_6",
        "Pod.default.railscope.app.kubernetes.io/component-exporter.app.kubernetes.io/name-railscope",
    ),
    ("CKV_K8S_15", "DaemonSet.default.railscope"),
    ("CKV_K8S_19", "DaemonSet.default.railscope"),
    ("CKV_K8S_21", "ConfigMap.default.railscope-dashboards"),
    ("CKV_K8S_21", "DaemonSet.default.railscope"),
    ("CKV_K8S_21", "Service.default.railscope"),
    ("CKV_K8S_21", "ServiceAccount.default.railscope"),
    ("CKV_K8S_43", "DaemonSet.default.railscope"),
];

/// Splits the rendered stream (argv[1]) into the core objects (written to argv[2]) and the
/// two custom resources, validated against argv[3] (ServiceMonitor) and argv[4]
/// (PrometheusRule). It also checks that the schemas reject a typo and a rule that is both
/// record and alert, so that a schema that accepts anything cannot pass.
const SPLIT_AND_VALIDATE: &str = r#"
import copy, json, sys
import jsonschema, yaml

rendered, core_out, sm_schema, pr_schema = sys.argv[1:5]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
schemas = {
    "ServiceMonitor": json.load(open(sm_schema)),
    "PrometheusRule": json.load(open(pr_schema)),
}

def errors(kind, doc):
    cls = jsonschema.validators.validator_for(schemas[kind])
    cls.check_schema(schemas[kind])
    v = cls(schemas[kind], format_checker=cls.FORMAT_CHECKER)
    return ["%s %s: %s at %s" % (kind, doc["metadata"]["name"], e.message, "/".join(map(str, e.absolute_path)))
            for e in v.iter_errors(doc)]

core, found, failed = [], {}, []
for d in docs:
    if d.get("apiVersion") == "monitoring.coreos.com/v1":
        kind = d["kind"]
        if kind not in schemas:
            failed.append("no schema for %s" % kind)
            continue
        found[kind] = d
        failed += errors(kind, d)
    else:
        core.append(d)
for kind in schemas:
    if kind not in found:
        failed.append("the base has no %s" % kind)

if not failed:
    bad = copy.deepcopy(found["ServiceMonitor"])
    bad["spec"]["endpoints"][0]["intervall"] = bad["spec"]["endpoints"][0].pop("interval")
    if not errors("ServiceMonitor", bad):
        failed.append("the ServiceMonitor schema accepts a misspelt field")
    bad = copy.deepcopy(found["PrometheusRule"])
    rule = bad["spec"]["groups"][0]["rules"][0]
    rule["alert"] = "Both"; rule["record"] = "both:record"
    if not errors("PrometheusRule", bad):
        failed.append("the PrometheusRule schema accepts a rule that is both record and alert")
    bad = copy.deepcopy(found["PrometheusRule"])
    bad["spec"]["groups"][0]["interval"] = "1 minute"
    if not errors("PrometheusRule", bad):
        failed.append("the PrometheusRule schema accepts a malformed duration")
    bad = copy.deepcopy(found["ServiceMonitor"])
    bad["spec"]["serviceDiscoveryRole"] = "EndpointSlices"
    if not errors("ServiceMonitor", bad):
        failed.append("the ServiceMonitor schema accepts an unknown serviceDiscoveryRole")

yaml.safe_dump_all(core, open(core_out, "w"), sort_keys=False)
print(json.dumps({"core": sorted(d["kind"] for d in core),
                  "custom": sorted(found),
                  "rules": sum(len(g.get("rules", [])) for g in found.get("PrometheusRule", {}).get("spec", {}).get("groups", []))}))
if failed:
    sys.exit("\n".join(failed))
"#;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(cmd: &mut Command) -> Output {
    railscope_tests::output(cmd)
}

fn run_ok(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = run(cmd);
    assert!(out.status.success(), "{shown} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The virtual environment with the PyPI tools, after checking that they and `kubectl` are
/// there; a missing one fails the test, naming its package.
fn venv() -> PathBuf {
    let venv = std::env::var_os("RAILSCOPE_K8S_VENV")
        .map_or_else(|| PathBuf::from("/opt/railscope-k8s"), PathBuf::from);
    let missing: Vec<_> = ["python", "kubernetes-validate", "checkov"]
        .iter()
        .filter(|t| !venv.join("bin").join(t).is_file())
        .collect();
    if !missing.is_empty() {
        missing_tool(
            &format!("{missing:?} in {}", venv.display()),
            &format!(
                "the PyPI packages kubernetes-validate==1.37.0 and checkov==3.3.30 in a virtual \
                 environment (python3 -m venv {0} && {0}/bin/pip install \
                 kubernetes-validate==1.37.0 checkov==3.3.30; $RAILSCOPE_K8S_VENV names another)",
                venv.display()
            ),
        );
    }
    if !runs("kubectl", &["version", "--client"]) {
        missing_tool(
            "kubectl",
            "the package kubectl of the Kubernetes apt repository (pkgs.k8s.io)",
        );
    }
    venv
}

fn tool(venv: &Path, name: &str) -> Command {
    let mut cmd = Command::new(venv.join("bin").join(name));
    // Neither tool may reach the network: the test runs offline.
    cmd.env("BC_SKIP_MAPPING", "TRUE")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// Renders the kustomization in `dir` into `out` (`railscope.yaml` and `core.yaml`), checks
/// the custom resources against the schemas and the core objects, strictly, against the
/// Kubernetes schemas, and returns the rendered path.
fn render_and_validate(venv: &Path, kustomization: &Path, out: &Path) -> PathBuf {
    let schemas = workspace().join("packaging/kubernetes/schemas");
    let rendered = out.join("railscope.yaml");
    let core = out.join("core.yaml");
    std::fs::write(
        &rendered,
        run_ok(Command::new("kubectl").arg("kustomize").arg(kustomization)),
    )
    .unwrap();

    // The custom resources against their schemas; the core objects split off.
    let summary: serde_json::Value = serde_json::from_str(&run_ok(
        tool(venv, "python")
            .arg("-c")
            .arg(SPLIT_AND_VALIDATE)
            .arg(&rendered)
            .arg(&core)
            .arg(schemas.join("servicemonitor.json"))
            .arg(schemas.join("prometheusrule.json")),
    ))
    .unwrap();
    assert_eq!(
        summary["core"],
        serde_json::json!(["ConfigMap", "DaemonSet", "Service", "ServiceAccount"])
    );
    assert_eq!(
        summary["custom"],
        serde_json::json!(["PrometheusRule", "ServiceMonitor"])
    );
    assert!(summary["rules"].as_u64().unwrap() > 0, "{summary}");

    // The core objects, strictly, against the Kubernetes schemas.
    let out = run(tool(venv, "kubernetes-validate")
        .arg("--strict")
        .arg("--kubernetes-version")
        .arg(K8S_VERSION)
        .arg(&core));
    let said = text(&out);
    assert!(out.status.success(), "kubernetes-validate failed:\n{said}");
    for object in [
        "serviceaccount/railscope",
        "daemonset/railscope",
        "service/railscope",
        "configmap/railscope-dashboards",
    ] {
        assert!(
            said.contains(&format!("passed for resource {object} against version")),
            "kubernetes-validate did not validate {object}:\n{said}"
        );
    }
    assert!(
        !said.contains("WARN"),
        "kubernetes-validate warned:\n{said}"
    );
    rendered
}

/// The worked overlay renders, validates, and sets what its comments say.
#[test]
fn the_gpu_cluster_overlay_validates_and_sets_what_it_says() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let rendered = render_and_validate(
        &venv,
        &workspace().join("packaging/overlays/gpu-cluster"),
        dir.path(),
    );
    let docs = run_ok(
        tool(&venv, "python")
            .arg("-c")
            .arg("import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))")
            .arg(&rendered),
    );
    let docs: Vec<serde_json::Value> = serde_json::from_str(&docs).unwrap();
    let kind = |k: &str| docs.iter().find(|d| d["kind"] == k).unwrap().clone();
    assert!(
        docs.iter()
            .all(|d| d["metadata"]["namespace"] == "monitoring")
    );
    let pod = &kind("DaemonSet")["spec"]["template"]["spec"];
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.example.invalid/railscope:0.1.0"
    );
    let monitor = kind("ServiceMonitor");
    assert_eq!(monitor["spec"]["serviceDiscoveryRole"], "EndpointSlice");
    assert_eq!(
        monitor["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    assert_eq!(
        kind("PrometheusRule")["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
}

#[test]
fn kubernetes_base_validates_and_passes_checkov() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let rendered =
        render_and_validate(&venv, &workspace().join("packaging/kubernetes"), dir.path());
    let core = dir.path().join("core.yaml");

    // ... and it does reject an unknown field (strict mode is on).
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        std::fs::read_to_string(&core).unwrap().replacen(
            "readOnlyRootFilesystem:",
            "readOnlyRootFileSystem:",
            1,
        ),
    )
    .unwrap();
    let out = run(tool(&venv, "kubernetes-validate")
        .arg("--strict")
        .arg("--kubernetes-version")
        .arg(K8S_VERSION)
        .arg(&broken));
    assert!(
        !out.status.success(),
        "kubernetes-validate accepted a misspelt field:\n{}",
        text(&out)
    );

    // checkov: no failed check; every skip has its reason.
    let out = run(tool(&venv, "checkov")
        .arg("--file")
        .arg(&rendered)
        .arg("--framework")
        .arg("kubernetes")
        .arg("--compact")
        .arg("--skip-download")
        .arg("--output")
        .arg("json"));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("checkov wrote no JSON report ({e}):\n{}", text(&out)));
    let failed: Vec<String> = report["results"]["failed_checks"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| format!("{} {} ({})", c["check_id"], c["resource"], c["check_name"]))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        failed.is_empty(),
        "checkov found, fix each or skip it with a reason on its object:\n{}",
        failed.join("\n")
    );
    assert!(out.status.success(), "checkov failed:\n{}", text(&out));
    assert_eq!(
        report["summary"]["parsing_errors"], 0,
        "{}",
        report["summary"]
    );
    assert!(report["summary"]["passed"].as_u64().unwrap() > 0);
    let mut skipped: Vec<(String, String)> = report["results"]["skipped_checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let reason = c["check_result"]["suppress_comment"].as_str().unwrap_or("");
            assert!(
                reason.len() > 10,
                "{} on {} is skipped without a reason",
                c["check_id"],
                c["resource"]
            );
            (
                c["check_id"].as_str().unwrap().to_owned(),
                c["resource"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    skipped.sort();
    let expected: Vec<(String, String)> = SKIPPED
        .iter()
        .map(|(c, r)| ((*c).to_owned(), (*r).to_owned()))
        .collect();
    assert_eq!(skipped, expected, "the skipped checkov findings changed");
}
