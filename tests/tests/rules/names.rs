//! Metric names checked in one place: every `railscope_*` family name that the mixin, the
//! rendered rules and dashboards, doctor, the OTLP semantic conventions and the expected
//! inventory type by hand is a family the agent exports (a golden exposition holds it, or it
//! is live-only or volatile: `railscope_tests::names`). Recording rules (`railscope:...`) are
//! rules, not families, and are not matched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use railscope_tests::names::{known_series, references, unknown};
use railscope_tests::workspace;

/// The files under `dir` (recursively) whose names end in `ext`.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.to_string_lossy().ends_with(ext) {
            out.push(path);
        }
    }
}

/// Every file that types railscope's metric names by hand.
fn sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut out = Vec::new();
    files(&root.join("mixin"), ".libsonnet", &mut out);
    files(&root.join("alerts"), ".yml", &mut out);
    files(&root.join("dashboards"), ".json", &mut out);
    files(&root.join("agent/src/doctor"), ".rs", &mut out);
    out.push(root.join("agent/src/otlp/semconv.rs"));
    out.push(root.join("agent/src/inventory.rs"));
    out
}

#[test]
fn every_name_referred_to_is_a_family_railscope_exports() {
    let (exported, _) = known_series();
    let mut bad = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        names.extend(references(&text));
        for name in unknown(&text, &exported) {
            let at = path.strip_prefix(workspace()).unwrap_or(&path);
            bad.push(format!("{}: {name}", at.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "names that no golden file, LIVE_ONLY or VOLATILE_FAMILIES holds:\n{}",
        bad.join("\n")
    );
    assert!(
        names.len() > 100,
        "only {} names: are the sources read?",
        names.len()
    );
}

#[test]
fn misspelt_name_is_unknown() {
    let (exported, _) = known_series();
    let mtu = workspace().join("agent/src/doctor/checks/mtu.rs");
    let text = std::fs::read_to_string(mtu).unwrap();
    assert!(text.contains("\"railscope_ib_port_active_mtu_bytes\""));
    assert_eq!(unknown(&text, &exported), Vec::<String>::new());
    let misspelt = text.replace(
        "\"railscope_ib_port_active_mtu_bytes\"",
        "\"railscope_ib_port_active_mtu_byte\"",
    );
    assert_eq!(
        unknown(&misspelt, &exported),
        ["railscope_ib_port_active_mtu_byte"]
    );
}

/// How the agent's code names families, and what is not a family name.
#[test]
fn family_names_as_code_and_rules_write_them() {
    let (exported, _) = known_series();
    let text = r#"
        family(families, "railscope_ib_port")            info family, without _info
        Family::counter("railscope_ib_port_data_bytes")   counter, without _total
        rate(railscope_ib_port_data_bytes_total[5m])      sample name
        {__name__=~"railscope_nvlink_.*"}                 a prefix
        railscope:port_rail:info                          a recording rule
        use railscope_collectors::Snapshot;               a crate
    "#;
    assert_eq!(unknown(text, &exported), Vec::<String>::new());
    assert_eq!(
        references(text).into_iter().collect::<Vec<_>>(),
        [
            "railscope_ib_port",
            "railscope_ib_port_data_bytes",
            "railscope_ib_port_data_bytes_total",
            "railscope_nvlink_",
        ]
    );
    assert_eq!(
        unknown("railscope_nvlinks_ railscope_ib_port_dat_bytes", &exported),
        ["railscope_ib_port_dat_bytes", "railscope_nvlinks_"]
    );
}
