//! The rendered Kubernetes base validates and passes a security scan:
//!
//! * `kubectl kustomize packaging/kubernetes` renders it;
//! * the core objects (ServiceAccount, DaemonSet, Service, ConfigMap) validate strictly
//!   (unknown fields rejected) with `kubernetes-validate` against Kubernetes [`K8S_VERSION`];
//! * the ServiceMonitor and PrometheusRule validate with `jsonschema` against
//!   `packaging/kubernetes/schemas/*.json` (the prometheus-operator CRD fields railscope uses);
//! * `checkov` finds nothing: every finding is fixed, or skipped on its object with a
//!   `checkov.io/skipN: CKV_..=reason` annotation, and the skipped set is [`SKIPPED`];
//! * the base with each component (workload-kubelet, kernel-log, neighbour, transceiver,
//!   otlp-push) does the same, the components that run the container as uid 0 skipping
//!   [`SKIPPED_UID_0`] (and kernel-log, neighbour and transceiver `CKV_K8S_25`, their added
//!   capability).
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
pub(crate) const K8S_VERSION: &str = "1.33.0";

/// Every checkov finding that stays, as (check, resource); each carries its reason in an
/// annotation on the object (see packaging/README.md). A new finding must be fixed or added
/// here and there.
pub(crate) const SKIPPED: &[(&str, &str)] = &[
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
/// custom resources, validated against argv[3] (ServiceMonitor), argv[4] (PrometheusRule) and
/// argv[5] (PodMonitor). With the ServiceMonitor and the PrometheusRule there it also checks
/// that the schemas reject a typo and a rule that is both record and alert, so that a schema
/// that accepts anything cannot pass.
const SPLIT_AND_VALIDATE: &str = r#"
import copy, json, sys
import jsonschema, yaml

rendered, core_out, sm_schema, pr_schema, pm_schema = sys.argv[1:6]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
schemas = {
    "ServiceMonitor": json.load(open(sm_schema)),
    "PrometheusRule": json.load(open(pr_schema)),
    "PodMonitor": json.load(open(pm_schema)),
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
if not failed and {"ServiceMonitor", "PrometheusRule"} <= set(found):
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

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) fn run(cmd: &mut Command) -> Output {
    railscope_tests::output(cmd)
}

pub(crate) fn run_ok(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = run(cmd);
    assert!(out.status.success(), "{shown} failed:\n{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The virtual environment with the PyPI tools, after checking that they and `kubectl` are
/// there; a missing one fails the test, naming its package.
pub(crate) fn venv() -> PathBuf {
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

pub(crate) fn tool(venv: &Path, name: &str) -> Command {
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
    let rendered = out.join("railscope.yaml");
    std::fs::write(
        &rendered,
        run_ok(Command::new("kubectl").arg("kustomize").arg(kustomization)),
    )
    .unwrap();
    let summary = validate(venv, &rendered, &out.join("core.yaml"));
    assert_eq!(
        summary["core"],
        serde_json::json!(["ConfigMap", "DaemonSet", "Service", "ServiceAccount"])
    );
    assert_eq!(
        summary["custom"],
        serde_json::json!(["PrometheusRule", "ServiceMonitor"])
    );
    assert!(summary["rules"].as_u64().unwrap() > 0, "{summary}");
    rendered
}

/// Checks the rendered stream `rendered`: its custom resources against the schemas, its core
/// objects (split off into `core`), strictly, against the Kubernetes schemas, every one of
/// them named by kubernetes-validate as passed. Returns the kinds found (`core`, `custom`) and
/// the number of rules.
pub(crate) fn validate(venv: &Path, rendered: &Path, core: &Path) -> serde_json::Value {
    let schemas = workspace().join("packaging/kubernetes/schemas");
    // The custom resources against their schemas; the core objects split off.
    let summary: serde_json::Value = serde_json::from_str(&run_ok(
        tool(venv, "python")
            .arg("-c")
            .arg(SPLIT_AND_VALIDATE)
            .arg(rendered)
            .arg(core)
            .arg(schemas.join("servicemonitor.json"))
            .arg(schemas.join("prometheusrule.json"))
            .arg(schemas.join("podmonitor.json")),
    ))
    .unwrap();

    // The core objects, strictly, against the Kubernetes schemas.
    let out = run(tool(venv, "kubernetes-validate")
        .arg("--strict")
        .arg("--kubernetes-version")
        .arg(K8S_VERSION)
        .arg(core));
    let said = text(&out);
    assert!(out.status.success(), "kubernetes-validate failed:\n{said}");
    let names = run_ok(
        tool(venv, "python")
            .arg("-c")
            .arg("import sys, yaml; [print('%s/%s' % (d['kind'].lower(), d['metadata']['name'])) for d in yaml.safe_load_all(open(sys.argv[1])) if d]")
            .arg(core),
    );
    for object in names.lines() {
        assert!(
            said.contains(&format!("passed for resource {object} against version")),
            "kubernetes-validate did not validate {object}:\n{said}"
        );
    }
    assert!(names.lines().count() >= 3, "{names}");
    assert!(
        !said.contains("WARN"),
        "kubernetes-validate warned:\n{said}"
    );
    summary
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
    let skipped = checkov(&venv, &[rendered]).pop().unwrap();
    assert_eq!(
        skipped,
        expected(SKIPPED),
        "the skipped checkov findings changed"
    );
}

/// `skips` as checkov's (check, resource) pairs, sorted.
pub(crate) fn expected(skips: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = skips
        .iter()
        .map(|(c, r)| ((*c).to_owned(), (*r).to_owned()))
        .collect();
    out.sort();
    out
}

/// Runs checkov once over `files` (each a rendered stream in its own directory, or of its own
/// name) and returns, per file in that order, the findings it skipped as sorted (check,
/// resource) pairs, after checking that it failed none, parsed every file, passed some checks
/// and that every skip carries a reason.
pub(crate) fn checkov(venv: &Path, files: &[PathBuf]) -> Vec<Vec<(String, String)>> {
    let mut cmd = tool(venv, "checkov");
    for f in files {
        cmd.arg("--file").arg(f);
    }
    let out = run(cmd
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
                .map(|c| {
                    format!(
                        "{} {} in {} ({})",
                        c["check_id"], c["resource"], c["file_path"], c["check_name"]
                    )
                })
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
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut per_file = vec![Vec::new(); files.len()];
    for c in report["results"]["skipped_checks"].as_array().unwrap() {
        let reason = c["check_result"]["suppress_comment"].as_str().unwrap_or("");
        assert!(
            reason.len() > 10,
            "{} on {} is skipped without a reason",
            c["check_id"],
            c["resource"]
        );
        let path = c["file_path"].as_str().unwrap();
        let i = names
            .iter()
            .position(|n| path.ends_with(&format!("/{n}")))
            .unwrap_or_else(|| panic!("checkov named a file it was not given: {path}"));
        per_file[i].push((
            c["check_id"].as_str().unwrap().to_owned(),
            c["resource"].as_str().unwrap().to_owned(),
        ));
    }
    for skips in &mut per_file {
        skips.sort();
    }
    per_file
}

/// The checkov findings a component that runs the container as uid 0 adds, skipped on the
/// DaemonSet with their reason.
const SKIPPED_UID_0: &[(&str, &str)] = &[
    ("CKV_K8S_23", "DaemonSet.default.railscope"),
    ("CKV_K8S_40", "DaemonSet.default.railscope"),
];

/// The base with each component that changes the pod's security (workload-kubelet,
/// kernel-log, neighbour, transceiver) renders, validates, and passes checkov with exactly the skips the component
/// adds, each with its reason.
#[test]
fn components_validate_and_pass_checkov() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let components = [
        "workload-kubelet",
        "kernel-log",
        "otlp-push",
        "neighbour",
        "transceiver",
    ];
    let mut files = Vec::new();
    for component in components {
        let overlay = dir.path().join(component);
        std::fs::create_dir(&overlay).unwrap();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            overlay_with(&overlay, None, &[component]),
        )
        .unwrap();
        let out = dir.path().join(format!("{component}.out"));
        std::fs::create_dir(&out).unwrap();
        let rendered = render_and_validate(&venv, &overlay, &out);
        let named = dir.path().join(format!("{component}.yaml"));
        std::fs::copy(&rendered, &named).unwrap();
        files.push(named);
    }
    let skipped = checkov(&venv, &files);
    let uid_0 = [SKIPPED, SKIPPED_UID_0].concat();
    let capability = [
        SKIPPED,
        SKIPPED_UID_0,
        &[("CKV_K8S_25", "DaemonSet.default.railscope")],
    ]
    .concat();
    assert_eq!(skipped[0], expected(&uid_0), "workload-kubelet");
    assert_eq!(skipped[1], expected(&capability), "kernel-log");
    assert_eq!(skipped[2], expected(SKIPPED), "otlp-push");
    assert_eq!(skipped[3], expected(&capability), "neighbour");
    assert_eq!(skipped[4], expected(&capability), "transceiver");
}

/// A kustomization, to be written in `dir`, of the base with `components`, in `namespace`.
pub(crate) fn overlay_with(dir: &Path, namespace: Option<&str>, components: &[&str]) -> String {
    // kustomize takes other kustomizations by relative path only.
    let up = "../".repeat(dir.components().count() - 1);
    let rel = |p: &str| {
        let abs = workspace().join(p);
        format!("{up}{}", abs.strip_prefix("/").unwrap().display())
    };
    let mut k = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [{}]\n",
        rel("packaging/kubernetes")
    );
    if let Some(ns) = namespace {
        k += &format!("namespace: {ns}\n");
    }
    if !components.is_empty() {
        let list: Vec<String> = components
            .iter()
            .map(|c| rel(&format!("packaging/kubernetes/components/{c}")))
            .collect();
        k += &format!("components: [{}]\n", list.join(", "));
    }
    k
}
