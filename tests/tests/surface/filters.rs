//! `collect[]` and `exclude[]` on the metrics path, as node_exporter reads them: which
//! families a filtered scrape holds (each family's owner checked against an agent that has
//! only that collector enabled), the 400s, real clients' spellings of the query, and source
//! runs shared by overlapping filtered scrapes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::Command;

use railscope_tests::{Agent, Sample, find, output, parse_samples};

const TREE: &str = "cx6dx-roce-2port";

/// The agent's own families: exposed whatever the filter.
const OWN: &[&str] = &[
    "railscope_build_info",
    "railscope_collections_total",
    "railscope_scrape_requests_total",
    "railscope_sysfs_read_timeouts_total",
    "railscope_sysfs_refused_files",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
];

fn scrape(agent: &Agent, path: &str) -> Vec<Sample> {
    let resp = agent.get(path, &[]);
    assert_eq!(resp.status, 200, "{path}: {}", resp.text());
    parse_samples(&resp.text())
}

fn names(samples: &[Sample]) -> BTreeSet<String> {
    samples.iter().map(|s| s.name.clone()).collect()
}

/// The `collector` labels of the `railscope_collector_*` series.
fn collectors(samples: &[Sample]) -> BTreeSet<String> {
    samples
        .iter()
        .filter(|s| s.name.starts_with("railscope_collector_"))
        .map(|s| s.labels["collector"].clone())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn collect_exposes_only_that_collector_and_the_agents_own_series() {
    let agent = Agent::fixture(TREE, &[]);
    let full = scrape(&agent, "/metrics");
    let filtered = scrape(&agent, "/metrics?collect[]=infiniband");
    // Every family's owner: those of an agent with infiniband alone.
    let alone = Agent::fixture(
        TREE,
        &["--collector.disable-defaults", "--collector.infiniband"],
    );
    assert_eq!(names(&filtered), names(&scrape(&alone, "/metrics")));
    assert!(
        names(&filtered)
            .iter()
            .any(|n| n.starts_with("railscope_ib_"))
    );
    for own in OWN {
        assert!(names(&filtered).contains(*own), "{own} missing");
    }
    for other in ["railscope_pci_", "railscope_netdev_"] {
        assert!(names(&full).iter().any(|n| n.starts_with(other)), "{other}");
        assert!(
            !names(&filtered).iter().any(|n| n.starts_with(other)),
            "{other}"
        );
    }
    assert_eq!(collectors(&filtered), set(&["infiniband"]));
    assert_eq!(
        find(
            &filtered,
            "railscope_collector_success",
            &[("collector", "infiniband")]
        )[0]
        .value,
        1.0
    );
    assert!(collectors(&full).len() > 3, "{:?}", collectors(&full));
}

#[test]
fn exclude_exposes_every_enabled_collector_but_those() {
    let agent = Agent::fixture(TREE, &[]);
    let filtered = scrape(&agent, "/metrics?exclude[]=infiniband&exclude[]=pci");
    let without = Agent::fixture(TREE, &["--no-collector.infiniband", "--no-collector.pci"]);
    assert_eq!(names(&filtered), names(&scrape(&without, "/metrics")));
    let mut want = collectors(&scrape(&agent, "/metrics"));
    want.remove("infiniband");
    want.remove("pci");
    assert_eq!(collectors(&filtered), want);
    // A name exclude[] does not know is ignored, as node_exporter does.
    let ignored = scrape(&agent, "/metrics?exclude[]=nonesuch");
    assert_eq!(
        collectors(&ignored),
        collectors(&scrape(&agent, "/metrics"))
    );
    // Excluding every enabled collector leaves the agent's own series.
    let all: Vec<String> = collectors(&scrape(&agent, "/metrics"))
        .iter()
        .map(|c| format!("exclude[]={c}"))
        .collect();
    let none = scrape(&agent, &format!("/metrics?{}", all.join("&")));
    assert!(collectors(&none).is_empty());
    assert!(names(&none).contains("railscope_build_info"));
    assert!(!names(&none).iter().any(|n| n.starts_with("railscope_ib_")));
}

#[test]
fn unknown_or_disabled_collectors_and_combined_filters_are_400_naming_them() {
    let agent = Agent::fixture(TREE, &["--no-collector.gpu"]);
    for (query, says) in [
        (
            "collect[]=infiniband&collect[]=cpu",
            "unknown collector: \"cpu\"",
        ),
        ("collect[]=gpu", "disabled collector: \"gpu\""),
        ("collect[]=", "unknown collector: \"\""),
        (
            "collect[]=infiniband&exclude[]=pci",
            "Combined collect[] and exclude[] queries are not allowed.",
        ),
    ] {
        let resp = agent.get(&format!("/metrics?{query}"), &[]);
        assert_eq!(resp.status, 400, "{query}");
        assert!(resp.text().contains(says), "{query}: {}", resp.text());
    }
    // Excluding a disabled collector is no error.
    assert_eq!(agent.get("/metrics?exclude[]=gpu", &[]).status, 200);
}

/// node_exporter's README pattern, `curl 'host:port/metrics?collect[]=cpu&collect[]=meminfo'`,
/// with railscope's collectors, as curl sends it literally and percent-encoded (as
/// Prometheus's `params:` does).
#[test]
fn node_exporters_documented_queries_behave_the_same() {
    let agent = Agent::fixture(TREE, &[]);
    let literal = format!(
        "http://{}/metrics?collect[]=infiniband&collect[]=netdev",
        agent.addr
    );
    let curl = |args: &[&str]| {
        let out = output(Command::new("curl").args(["-sS", "--fail"]).args(args));
        assert!(out.status.success(), "curl {args:?}: {out:?}");
        parse_samples(&String::from_utf8(out.stdout).unwrap())
    };
    let got = curl(&["-g", &literal]);
    assert_eq!(collectors(&got), set(&["infiniband", "netdev"]));
    let encoded = curl(&[
        "--get",
        "--data-urlencode",
        "collect[]=infiniband",
        "--data-urlencode",
        "collect[]=netdev",
        &format!("http://{}/metrics", agent.addr),
    ]);
    assert_eq!(names(&encoded), names(&got));
    let excluded = curl(&[
        "--get",
        "--data-urlencode",
        "exclude[]=netdev",
        &format!("http://{}/metrics", agent.addr),
    ]);
    let mut want = collectors(&scrape(&agent, "/metrics"));
    want.remove("netdev");
    assert_eq!(collectors(&excluded), want);
}

/// `railscope_collector_runs_total` counts source runs: a filtered scrape runs its sources
/// alone.
#[test]
fn a_filtered_scrape_runs_only_its_collectors() {
    let agent = Agent::fixture(TREE, &[]);
    let runs = |samples: &[Sample], collector: &str| {
        find(
            samples,
            "railscope_collector_runs_total",
            &[("collector", collector)],
        )[0]
        .value
    };
    let before = scrape(&agent, "/metrics");
    scrape(&agent, "/metrics?collect[]=infiniband");
    let after = scrape(&agent, "/metrics");
    // The full scrape after it ran every collector once more; the filtered one, infiniband.
    assert_eq!(
        runs(&after, "infiniband"),
        runs(&before, "infiniband") + 2.0
    );
    assert_eq!(runs(&after, "pci"), runs(&before, "pci") + 1.0);
}

#[test]
fn the_landing_page_links_each_collectors_metrics() {
    let agent = Agent::fixture(TREE, &[]);
    let html = agent.get("/", &[]).text();
    assert!(
        html.contains("href=\"/metrics?collect[]=infiniband\""),
        "{html}"
    );
    assert!(html.contains("exclude[]="), "{html}");
}
