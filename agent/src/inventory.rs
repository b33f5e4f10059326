//! The expected inventory: what a node of this kind must have (the config file's `expected`
//! section), exported next to what the last collection found, so that a GPU or a NIC that
//! is missing — one that vanished, or one the node booted without — is a rule's business
//! (`RailscopeInventoryMissing`, `RailscopeInventoryDegraded`) and doctor's, although its own
//! series are gone.
//!
//! Present counts are taken from the families the collection mapped to, so they are what a
//! scrape shows: `gpu` (GPUs NVML reports, lost ones included), `rdma_port` (ports the
//! infiniband collector reports), `rdma_port_up` (of those, ACTIVE and LinkUp, at the
//! expected rate and width where given) and `nvlink_up` (NVLinks up). A kind's present count
//! is exported only when its collector completed: a collector that failed says so itself
//! (`railscope_collector_success`), and a count of 0 from it would be a false page. So is a
//! kind whose collector a scrape's `collect[]` or `exclude[]` left out.
//!
//! The expected neighbour per rail (`expected.rail-neighbours`) is exported as
//! `railscope_inventory_expected_rail_neighbour_info{rail,pattern}`, one series per configured
//! rail, for `RailscopeRailMiscabled` and doctor's cabling step to match the neighbour
//! collector's `neighbour` label against.

use railscope_collectors::Collection;

use crate::cli::expected::Inventory;
use crate::exposition::{Family, Label};

impl Inventory {
    fn is_empty(&self) -> bool {
        *self == Inventory::default()
    }
}

fn family<'a>(families: &'a [Family], name: &str) -> Option<&'a Family> {
    families.iter().find(|f| f.name == name)
}

fn label<'a>(labels: &'a [(&'static str, Label)], name: &str) -> &'a str {
    labels
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// The value of `name`'s sample for one port.
fn port_value(families: &[Family], name: &str, device: &str, port: &str) -> Option<f64> {
    family(families, name)?
        .samples
        .iter()
        .find(|s| label(&s.labels, "device") == device && label(&s.labels, "port") == port)
        .map(|s| s.value.as_f64())
}

/// The inventory families for `expected`, counting what `families` (this collection's)
/// show; a kind's present count only where `exposed` admits its collector (the scrape's
/// `collect[]` and `exclude[]`).
pub(crate) fn families(
    expected: &Inventory,
    collection: &Collection,
    families: &[Family],
    exposed: &dyn Fn(&str) -> bool,
) -> Vec<Family> {
    if expected.is_empty() {
        return Vec::new();
    }
    // Whether a source completed, and produced data this scrape exposes.
    let ran = |source: &str| {
        exposed(source)
            && collection
                .outcomes
                .iter()
                .find(|o| o.name == source)
                .is_some_and(|o| o.success)
    };
    let mut want = Family::gauge(
        "railscope_inventory_expected",
        "What the node must have, by kind (gpu, rdma_port, rdma_port_up, nvlink_up), from the config file's expected section.",
    );
    let mut have = Family::gauge(
        "railscope_inventory_present",
        "What the last collection found, by kind: gpu (GPUs NVML reports), rdma_port (RDMA ports), rdma_port_up (ACTIVE/LinkUp at the expected rate and width), nvlink_up (NVLinks up). Absent while the kind's collector fails.",
    );
    let ports = family(families, "railscope_ib_port").map(|f| f.samples.as_slice());
    let mut push = |kind: &'static str, expected: Option<u64>, present: Option<u64>| {
        if let Some(e) = expected {
            want.push([("kind", kind)], e);
            if let Some(p) = present {
                have.push([("kind", kind)], p);
            }
        }
    };
    let infiniband = ran("infiniband");
    let port_count = infiniband.then(|| ports.map_or(0, <[_]>::len) as u64);
    push("rdma_port", expected.rdma_ports, port_count);
    let up = infiniband.then(|| {
        ports.map_or(0, |ports| {
            ports
                .iter()
                .filter(|s| {
                    let (device, port) = (label(&s.labels, "device"), label(&s.labels, "port"));
                    let state = label(&s.labels, "state") == "ACTIVE"
                        && matches!(label(&s.labels, "phys_state"), "LinkUp" | "<unknown>");
                    let rate = expected.rdma_port_rate.is_none_or(|want| {
                        port_value(
                            families,
                            "railscope_ib_port_rate_bytes_per_second",
                            device,
                            port,
                        )
                        .is_some_and(|r| r >= want)
                    });
                    let width = expected.rdma_port_width.is_none_or(|want| {
                        port_value(families, "railscope_ib_port_link_width_lanes", device, port)
                            .is_some_and(|w| w >= want as f64)
                    });
                    state && rate && width
                })
                .count() as u64
        })
    });
    push("rdma_port_up", expected.rdma_ports, up);
    let gpu = ran("gpu");
    let gpus = gpu.then(|| family(families, "railscope_gpu").map_or(0, |f| f.samples.len() as u64));
    push("gpu", expected.gpus, gpus);
    let links = gpu.then(|| {
        family(families, "railscope_nvlink_up").map_or(0, |f| {
            f.samples.iter().filter(|s| s.value.as_f64() == 1.0).count() as u64
        })
    });
    push(
        "nvlink_up",
        expected
            .gpus
            .zip(expected.nvlinks_per_gpu)
            .map(|(g, l)| g * l),
        links,
    );
    let mut out = vec![want, have];
    let mut threshold = |name: &'static str, help: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            let mut f = Family::gauge(name, help);
            f.push_unlabelled(v);
            out.push(f);
        }
    };
    threshold(
        "railscope_inventory_expected_port_rate_bytes_per_second",
        "The rate every RDMA port must run at, from the config file's expected section.",
        expected.rdma_port_rate,
    );
    threshold(
        "railscope_inventory_expected_port_width_lanes",
        "The link width every RDMA port must run, from the config file's expected section.",
        expected.rdma_port_width.map(|w| w as f64),
    );
    threshold(
        "railscope_inventory_expected_pcie_link_speed_transfers_per_second",
        "The PCIe link speed every NIC and GPU must run at, from the config file's expected section.",
        expected.pcie_speed,
    );
    threshold(
        "railscope_inventory_expected_pcie_link_width_lanes",
        "The PCIe link width every NIC and GPU must run, from the config file's expected section.",
        expected.pcie_width.map(|w| w as f64),
    );
    if !expected.rail_neighbours.is_empty() {
        let mut f = Family::info(
            "railscope_inventory_expected_rail_neighbour",
            "The regular expression the neighbour (LLDP System Name / IB NodeDescription) of every port on the rail must match, from the config file's expected.rail-neighbours.",
        );
        for (rail, pattern) in &expected.rail_neighbours {
            f.push(
                [("rail", rail.to_string()), ("pattern", pattern.clone())],
                1u64,
            );
        }
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};

    #[test]
    fn each_rail_pattern_is_one_info_series() {
        let expected = Inventory {
            rail_neighbours: vec![(0, "^leaf-0[1-4]".to_owned()), (3, "^leaf-a3-".to_owned())],
            ..Inventory::default()
        };
        let collection = Collection {
            outcomes: Vec::new(),
            sequence: 1,
            blocked_at_start: Vec::new(),
        };
        let text = encode(
            families(&expected, &collection, &[], &|_| true),
            Format::Prometheus,
        );
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("railscope_inventory_expected_rail_neighbour"))
            .collect();
        assert_eq!(
            lines,
            [
                r#"railscope_inventory_expected_rail_neighbour_info{rail="0",pattern="^leaf-0[1-4]"} 1"#,
                r#"railscope_inventory_expected_rail_neighbour_info{rail="3",pattern="^leaf-a3-"} 1"#,
            ]
        );
        let none = families(&Inventory::default(), &collection, &[], &|_| true);
        assert!(none.is_empty());
    }
}
