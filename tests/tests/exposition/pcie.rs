//! PCIe, topology, rails and GPUDirect readiness against the real binary: each tree's
//! GPU×NIC distance matrix equals the `nvidia-smi topo -m` matrix written in its README,
//! rails come out the same on nodes whose device names differ, and PCIe faults show.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use railscope_tests::{Agent, Sample, find, fixture_trees, fixtures, parse_samples, value};

/// The expected matrix from a tree README's "Expected `nvidia-smi topo -m`" section: a
/// markdown table with a header `| | NIC0 | NIC1 | ...`, rows `| GPU0 | PIX | NODE | ...`
/// and a legend `NICk: <device> (...)`. Returns (device, gpu index) → level.
fn readme_matrix(tree: &str) -> Option<BTreeMap<(String, String), String>> {
    let readme = std::fs::read_to_string(fixtures().join(tree).join("README.md")).unwrap();
    let section = readme.split("## Expected `nvidia-smi topo -m`").nth(1)?;
    let section = section.split("\n## ").next().unwrap();
    let mut legend = BTreeMap::new();
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for line in section.lines().map(str::trim) {
        if line.starts_with('|') {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            if cells.get(1).is_some_and(|c| c.starts_with("NIC")) && cells[0].is_empty() {
                columns = cells[1..].to_vec();
            } else if cells[0].starts_with("GPU") {
                rows.push((cells[0].clone(), cells[1..].to_vec()));
            }
        } else if let Some(rest) = line.strip_prefix("NIC")
            && let Some((n, device)) = rest.split_once(':')
            && n.chars().all(|c| c.is_ascii_digit())
        {
            let device = device.split_whitespace().next().unwrap().to_owned();
            legend.insert(format!("NIC{n}"), device);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut matrix = BTreeMap::new();
    for (gpu, cells) in rows {
        assert_eq!(
            cells.len(),
            columns.len(),
            "{tree}: row {gpu} has {} cells for {} NICs",
            cells.len(),
            columns.len()
        );
        for (nic, level) in columns.iter().zip(cells) {
            let device = legend
                .get(nic)
                .unwrap_or_else(|| panic!("{tree}: no legend for {nic}"));
            matrix.insert(
                (device.clone(), gpu.trim_start_matches("GPU").to_owned()),
                level,
            );
        }
    }
    Some(matrix)
}

fn exported_matrix(samples: &[Sample]) -> BTreeMap<(String, String), String> {
    find(samples, "railscope_topology_nic_gpu_distance", &[])
        .into_iter()
        .map(|s| {
            (
                (s.labels["device"].clone(), s.labels["gpu"].clone()),
                s.labels["level"].clone(),
            )
        })
        .collect()
}

fn rails_by_address(samples: &[Sample]) -> BTreeMap<String, String> {
    find(samples, "railscope_rail_info", &[])
        .into_iter()
        .map(|s| (s.labels["pci_address"].clone(), s.labels["rail"].clone()))
        .collect()
}

fn level_value(level: &str) -> f64 {
    match level {
        "PIX" => 10.0,
        "PXB" => 20.0,
        "PHB" => 30.0,
        "NODE" => 40.0,
        "SYS" => 50.0,
        other => panic!("unknown level {other}"),
    }
}

#[test]
fn distance_matrices_match_nvidia_smi_topo_in_every_readme() {
    let mut compared = 0;
    for tree in fixture_trees() {
        let agent = Agent::fixture(&tree, &[]);
        let samples = parse_samples(&agent.scrape());
        let exported = exported_matrix(&samples);
        match readme_matrix(&tree) {
            Some(expected) => {
                assert_eq!(
                    exported, expected,
                    "{tree}: distance matrix differs from its README"
                );
                for s in find(&samples, "railscope_topology_nic_gpu_distance", &[]) {
                    assert_eq!(s.value, level_value(&s.labels["level"]));
                }
                compared += 1;
            }
            None => assert!(
                exported.is_empty(),
                "{tree}: distances exported but the README has no topo block"
            ),
        }
    }
    assert!(compared >= 4, "only {compared} trees have a topo matrix");
}

#[test]
fn healthy_dgx_node() {
    let agent = Agent::fixture("h100-cx7-ndr-ib", &[]);
    let s = parse_samples(&agent.scrape());
    for i in 0..8 {
        let dev = format!("mlx5_{i}");
        let gpu = i.to_string();
        let rail = find(&s, "railscope_rail_info", &[("device", &dev)]);
        assert_eq!(rail.len(), 1, "{dev}");
        assert_eq!(
            (
                rail[0].labels["rail"].as_str(),
                rail[0].labels["gpu"].as_str(),
                rail[0].labels["source"].as_str()
            ),
            (gpu.as_str(), gpu.as_str(), "derived")
        );
        let nearest = find(
            &s,
            "railscope_topology_nic_nearest_gpu_info",
            &[("device", &dev)],
        );
        assert_eq!(nearest.len(), 1);
        assert_eq!(
            (
                nearest[0].labels["gpu"].as_str(),
                nearest[0].labels["level"].as_str()
            ),
            (gpu.as_str(), "PIX")
        );
    }
    assert_eq!(find(&s, "railscope_topology_gpu_info", &[]).len(), 8);
    for w in find(&s, "railscope_pci_link_width_lanes", &[]) {
        assert_eq!(w.value, 16.0, "{:?}", w.labels);
    }
    assert!(
        find(&s, "railscope_pci_acs_state", &[("state", "redirect")])
            .iter()
            .all(|x| x.value == 0.0)
    );
    assert!(
        !find(&s, "railscope_pci_acs_state", &[("state", "no_redirect")])
            .iter()
            .all(|x| x.value == 0.0)
    );
    assert_eq!(
        value(&s, "railscope_host_gpudirect_rdma_module_loaded", &[]),
        1.0
    );
    assert_eq!(
        value(&s, "railscope_host_iommu_mode", &[("mode", "passthrough")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_host_memlock_limit_bytes",
            &[("process", "init"), ("limit", "soft")]
        ),
        f64::INFINITY
    );
    for c in ["infiniband", "pci", "topology", "host"] {
        assert_eq!(
            value(&s, "railscope_collector_success", &[("collector", c)]),
            1.0,
            "{c}"
        );
        assert_eq!(
            value(&s, "railscope_collector_last_errors", &[("collector", c)]),
            0.0,
            "{c}"
        );
    }
}

#[test]
fn pcie_faults_show() {
    let agent = Agent::fixture("h100-pcie-faults", &[]);
    let s = parse_samples(&agent.scrape());
    let addr = |dev: &str| {
        find(&s, "railscope_pci_device_info", &[("rdma_device", dev)])[0].labels["pci_address"]
            .clone()
    };
    let gpu_addr = |gpu: &str| {
        find(&s, "railscope_pci_device_info", &[("gpu", gpu)])[0].labels["pci_address"].clone()
    };
    // mlx5_3 at x8 of x16.
    let a = addr("mlx5_3");
    assert_eq!(
        value(&s, "railscope_pci_link_width_lanes", &[("pci_address", &a)]),
        8.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_pci_link_max_width_lanes",
            &[("pci_address", &a)]
        ),
        16.0
    );
    // GPU 4 at Gen4 in a Gen5 slot.
    let g = gpu_addr("4");
    assert_eq!(
        value(
            &s,
            "railscope_pci_link_speed_transfers_per_second",
            &[("pci_address", &g)]
        ),
        16e9
    );
    assert_eq!(
        value(
            &s,
            "railscope_pci_link_max_speed_transfers_per_second",
            &[("pci_address", &g)]
        ),
        32e9
    );
    // AER on mlx5_1.
    let a = addr("mlx5_1");
    assert!(
        value(
            &s,
            "railscope_pci_aer_errors_total",
            &[("pci_address", &a), ("severity", "correctable")]
        ) > 0.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_pci_aer_errors_by_type_total",
            &[
                ("pci_address", &a),
                ("severity", "nonfatal"),
                ("type", "CmpltTO")
            ]
        ),
        1.0
    );
    // ACS redirect on exactly one bridge.
    let redirect: Vec<_> = find(&s, "railscope_pci_acs_state", &[("state", "redirect")])
        .into_iter()
        .filter(|x| x.value == 1.0)
        .collect();
    assert_eq!(redirect.len(), 1, "{redirect:?}");
    // mlx5_7 on the other socket keeps rail 7 but its GPU is across the sockets.
    assert_eq!(
        value(
            &s,
            "railscope_topology_nic_gpu_distance",
            &[("device", "mlx5_7"), ("gpu", "7")]
        ),
        50.0
    );
    let nearest = find(
        &s,
        "railscope_topology_nic_nearest_gpu_info",
        &[("device", "mlx5_7")],
    );
    assert!(
        nearest.iter().all(|n| n.labels["level"] == "NODE"),
        "{nearest:?}"
    );
    assert_eq!(
        find(&s, "railscope_rail_info", &[("device", "mlx5_7")])[0].labels["rail"],
        "7"
    );
    // Host.
    assert_eq!(
        value(&s, "railscope_host_gpudirect_rdma_module_loaded", &[]),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_host_kernel_module_loaded",
            &[("module", "nvidia")]
        ),
        1.0
    );
    assert_eq!(
        value(&s, "railscope_host_iommu_mode", &[("mode", "translated")]),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "railscope_host_memlock_limit_bytes",
            &[("process", "init"), ("limit", "soft")]
        ),
        65536.0
    );
}

#[test]
fn rails_do_not_depend_on_device_names() {
    let healthy = parse_samples(&Agent::fixture("h100-cx7-ndr-ib", &[]).scrape());
    let frontend = Agent::fixture(
        "h100-frontend-nic-first",
        &["--collector.topology.rail-exclude", "^0000:0c:00\\.0$"],
    );
    let other = parse_samples(&frontend.scrape());
    let a = rails_by_address(&healthy);
    let b = rails_by_address(&other);
    assert_eq!(a.len(), 8);
    assert_eq!(a, b, "the same hardware must get the same rails");
    assert_eq!(
        find(&other, "railscope_rail_info", &[("device", "mlx5_1")])[0].labels["rail"],
        "0"
    );
    assert!(
        find(&other, "railscope_rail_info", &[("device", "mlx5_0")]).is_empty(),
        "the front-end NIC is excluded"
    );

    // Without the exclusion the front-end NIC comes after the compute rails.
    let plain = parse_samples(&Agent::fixture("h100-frontend-nic-first", &[]).scrape());
    let fe = &find(&plain, "railscope_rail_info", &[("device", "mlx5_0")])[0];
    assert_eq!(
        (fe.labels["rail"].as_str(), fe.labels["source"].as_str()),
        ("8", "pci_order")
    );
    let mut compute = rails_by_address(&plain);
    compute.remove("0000:0c:00.0");
    assert_eq!(compute, a);

    // Configured rails replace the derivation.
    let pinned = Agent::fixture(
        "h100-frontend-nic-first",
        &["--collector.topology.rails", "mlx5_8=0,0000:18:00.0=7"],
    );
    let pinned = parse_samples(&pinned.scrape());
    let got: BTreeMap<_, _> = find(&pinned, "railscope_rail_info", &[])
        .into_iter()
        .map(|x| {
            (
                x.labels["device"].clone(),
                (x.labels["rail"].clone(), x.labels["source"].clone()),
            )
        })
        .collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got["mlx5_8"], ("0".to_owned(), "configured".to_owned()));
    assert_eq!(got["mlx5_1"], ("7".to_owned(), "configured".to_owned()));
}

#[test]
fn aer_errors_climbing_show_as_a_moving_counter() {
    let dir = tempfile::tempdir().unwrap();
    let copy = railscope_tests::copy_fixture("h100-cx7-ndr-ib", &dir.path().join("tree"));
    let sys = copy.join("sys");
    let agent = Agent::tree(&copy, &[]);
    let nic = std::fs::canonicalize(sys.join("class/infiniband/mlx5_0/device")).unwrap();
    let address = nic.file_name().unwrap().to_str().unwrap().to_owned();
    let labels = [
        ("pci_address", address.as_str()),
        ("severity", "correctable"),
    ];
    let before = value(
        &parse_samples(&agent.scrape()),
        "railscope_pci_aer_errors_total",
        &labels,
    );
    assert_eq!(before, 0.0);
    let file = nic.join("aer_dev_correctable");
    let text = std::fs::read_to_string(&file).unwrap();
    let bumped: String = text
        .lines()
        .map(|l| match l.split_once(' ') {
            Some(("RxErr", _)) => "RxErr 41".to_owned(),
            Some(("TOTAL_ERR_COR", _)) => "TOTAL_ERR_COR 41".to_owned(),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&file, bumped).unwrap();
    let after = parse_samples(&agent.scrape());
    assert_eq!(
        value(&after, "railscope_pci_aer_errors_total", &labels),
        41.0
    );
    assert_eq!(
        value(
            &after,
            "railscope_pci_aer_errors_by_type_total",
            &[labels[0], labels[1], ("type", "RxErr")]
        ),
        41.0
    );
}
