//! Doctor's thresholds and XID classes have one source, the mixin's config: `mixin/render.py`
//! writes the ones doctor uses into `agent/src/doctor/checks/rules.rs`, and `--check` fails
//! while that file says something else. Each test changes the config in a copy of `mixin/`
//! and checks this checkout's committed files against it (`--repo`), writing nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use railscope_tests::{require, workspace};

const DOCTOR_RULES: &str = "agent/src/doctor/checks/rules.rs";

/// A copy of the repository's `mixin/` in `dir`.
fn copy_mixin(dir: &Path) -> std::path::PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let mixin = dir.join("mixin");
    copy(&workspace().join("mixin"), &mixin);
    mixin
}

/// The copy's config with `from` replaced by `to` (exactly once).
fn edit_config(mixin: &Path, from: &str, to: &str) {
    let path = mixin.join("config.libsonnet");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} in config.libsonnet"
    );
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

/// `render.py --check` of the copy against this checkout.
fn check(mixin: &Path) -> Output {
    require("jsonnet", "jsonnet");
    std::process::Command::new("python3")
        .arg(mixin.join("render.py"))
        .args(["--check", "--repo"])
        .arg(workspace())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}); install python3 and python3-yaml"))
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stale(out: &Output, path: &str) -> bool {
    said(out)
        .lines()
        .any(|l| l.ends_with(&format!("{path} is stale")))
}

#[test]
fn doctor_rules_agree_with_the_unchanged_config() {
    let dir = tempfile::tempdir().unwrap();
    let mixin = copy_mixin(dir.path());
    let out = check(&mixin);
    assert!(
        out.status.success(),
        "run python3 mixin/render.py:\n{}",
        said(&out)
    );
}

/// Changes `from` to `to` in a copy of the mixin's config, and asserts that the check of this
/// checkout's files then fails naming doctor's file.
fn changed_in_the_config_only_makes_doctor_rules_stale(from: &str, to: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mixin = copy_mixin(dir.path());
    edit_config(&mixin, from, to);
    let out = check(&mixin);
    assert!(!out.status.success(), "the check passed:\n{}", said(&out));
    assert!(
        stale(&out, DOCTOR_RULES),
        "{DOCTOR_RULES} not named:\n{}",
        said(&out)
    );
}

#[test]
fn roce_mtu_changed_in_the_config_only_makes_doctor_rules_stale() {
    changed_in_the_config_only_makes_doctor_rules_stale(
        "roceMTUBytes: 4096,",
        "roceMTUBytes: 2048,",
    );
}

#[test]
fn xid_class_changed_in_the_config_only_makes_doctor_rules_stale() {
    changed_in_the_config_only_makes_doctor_rules_stale(
        "warning: [92, 94, 154],",
        "warning: [92, 94, 154, 999],",
    );
}

#[test]
fn memlock_floor_changed_in_the_config_only_makes_doctor_rules_stale() {
    changed_in_the_config_only_makes_doctor_rules_stale(
        "memlockBytes: 1073741824,",
        "memlockBytes: 2147483648,",
    );
}

/// A threshold only the alerts use leaves doctor's file as it is: the file holds what doctor
/// shares with the rules, nothing more.
#[test]
fn threshold_doctor_does_not_use_leaves_doctor_rules_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mixin = copy_mixin(dir.path());
    edit_config(&mixin, "scrapeSeconds: 5,", "scrapeSeconds: 7,");
    let out = check(&mixin);
    assert!(!out.status.success(), "the check passed:\n{}", said(&out));
    assert!(
        stale(&out, "alerts/railscope.rules.yml"),
        "the rule file not named:\n{}",
        said(&out)
    );
    assert!(
        !stale(&out, DOCTOR_RULES),
        "{DOCTOR_RULES} named:\n{}",
        said(&out)
    );
}

/// Doctor's checks read the generated constants, not numbers of their own: the literals the
/// rules used to be restated as are gone from the step modules.
#[test]
fn doctor_checks_restate_no_shared_threshold() {
    let checks = workspace().join("agent/src/doctor/checks");
    for entry in std::fs::read_dir(&checks).unwrap() {
        let path = entry.unwrap().path();
        // The step modules; their tests (checks/tests/) write expositions, not thresholds.
        if path.is_dir() || path.file_name().unwrap() == "rules.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for literal in [
            "4096.0",
            "1073741824",
            "155, 156, 158",
            "92, 94, 154",
            ">= 40.0",
        ] {
            assert!(
                !text.contains(literal),
                "{} restates {literal}: use the constant in rules.rs",
                path.display()
            );
        }
    }
}

/// Every alert a doctor finding points at (`.alert("Railscope...")`) is an alert the shipped
/// rules define: a finding's alert names the runbook entry the operator reads next, and a
/// renamed alert must not leave doctor pointing at nothing.
#[test]
fn every_alert_doctor_names_is_a_shipped_alert() {
    let rules = std::fs::read_to_string(workspace().join("alerts/railscope.rules.yml")).unwrap();
    let shipped: std::collections::BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    let dir = workspace().join("agent/src/doctor/checks");
    let mut named = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for piece in text.split('"').skip(1).step_by(2) {
            if piece.starts_with("Railscope") && piece.chars().all(|c| c.is_ascii_alphanumeric()) {
                named.insert((piece.to_owned(), path.file_name().unwrap().to_owned()));
            }
        }
    }
    assert!(
        named.len() > 20,
        "found the doctor's alert names: {named:?}"
    );
    let missing: Vec<_> = named
        .iter()
        .filter(|(a, _)| !shipped.contains(a.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "doctor names alerts the rules do not define: {missing:?}"
    );
}
