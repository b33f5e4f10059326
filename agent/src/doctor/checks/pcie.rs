//! Step 3, PCIe: the current link width (and a NIC's speed) of every NIC and GPU function against
//! its maximum and the expectation, and uncorrectable AER errors.

use super::{Finding, Node, Severity, count, ok, pci_file, pcie_gen, skip};
use crate::doctor::facts::{Facts, Sample};

pub(super) fn pcie(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut fine = 0;
    let mut seen = 0;
    let mut functions: Vec<&Sample> = facts
        .all("railscope_pci_device_info")
        .filter(|s| matches!(s.label("role"), "nic" | "gpu"))
        .collect();
    functions.sort_by(|a, b| a.label("pci_address").cmp(b.label("pci_address")));
    let expected_pcie_width =
        facts.value("railscope_inventory_expected_pcie_link_width_lanes", &[]);
    let expected_pcie_speed = facts.value(
        "railscope_inventory_expected_pcie_link_speed_transfers_per_second",
        &[],
    );
    let expected = (expected_pcie_width, expected_pcie_speed);
    for f in functions {
        seen += 1;
        if function(facts, f, expected, &mut out) {
            fine += 1;
        }
    }
    if seen == 0 {
        out.push(skip(
            "pcie",
            "no NIC or GPU PCI functions (the pci collector is off, or none found)",
        ));
    } else if fine > 0 {
        out.push(ok(
            "pcie",
            format!(
                "{} of {} at full width{}",
                fine,
                count(seen, "NIC and GPU function", "NIC and GPU functions"),
                " and (NICs) full speed"
            ),
        ));
    }
    out
}

/// The findings of one NIC or GPU function against its maximum and the expected width and speed
/// (`expected`); whether it has none.
fn function(
    facts: &Facts,
    f: &Sample,
    expected: (Option<f64>, Option<f64>),
    out: &mut Vec<Finding>,
) -> bool {
    let (expected_pcie_width, expected_pcie_speed) = expected;
    let addr = f.label("pci_address");
    let key = [("pci_address", addr)];
    let who = match f.label("role") {
        "gpu" => format!("GPU {} ({addr})", f.label("gpu")),
        _ if !f.label("rdma_device").is_empty() => {
            format!("{} ({addr})", f.label("rdma_device"))
        }
        _ => format!("NIC {addr}"),
    };
    let width = facts.value("railscope_pci_link_width_lanes", &key);
    let max_width = facts.value("railscope_pci_link_max_width_lanes", &key);
    let speed = facts.value("railscope_pci_link_speed_transfers_per_second", &key);
    let max_speed = facts.value("railscope_pci_link_max_speed_transfers_per_second", &key);
    let mut bad = false;
    if let (Some(w), Some(m)) = (width, max_width)
        && w < m
    {
        bad = true;
        out.push(
            Finding::new(Severity::Warning, "pcie_width", who.clone())
                .summary(format!("{who} runs PCIe x{w}, its maximum is x{m}"))
                .evidence("width", format!("x{w}"), pci_file(addr, "current_link_width"))
                .evidence("maximum", format!("x{m}"), pci_file(addr, "max_link_width"))
                .meaning("Half the lanes halve the host and GPUDirect bandwidth of this device; NCCL cannot see it.")
                .fix("Reseat the card or its riser; check the slot's bifurcation setting in the BIOS. lspci -vv -s <address> shows LnkSta against LnkCap.")
                .alert("RailscopePCIeWidthDegraded"),
        );
    }
    // A GPU lowers its link speed at idle to save power: only a NIC's speed is checked.
    if f.label("role") == "nic"
        && let (Some(s), Some(m)) = (speed, max_speed)
        && s < m
    {
        bad = true;
        out.push(
            Finding::new(Severity::Warning, "pcie_speed", who.clone())
                .summary(format!("{who} runs PCIe {}, its maximum is {}", pcie_gen(s), pcie_gen(m)))
                .evidence("speed", pcie_gen(s), pci_file(addr, "current_link_speed"))
                .evidence("maximum", pcie_gen(m), pci_file(addr, "max_link_speed"))
                .meaning("The NIC trained at a lower PCIe generation: its host bandwidth is below its network bandwidth.")
                .fix("Reseat the card; check the slot's generation setting in the BIOS and the riser. lspci -vv -s <address>.")
                .alert("RailscopePCIeSpeedDegraded"),
        );
    }
    // A card in a slot wired x8 trains x8 of an x8 maximum: only an expectation shows it.
    if !bad
        && let (Some(w), Some(want)) = (width, expected_pcie_width)
        && w < want
    {
        bad = true;
        out.push(
            Finding::new(Severity::Warning, "pcie_width_expected", who.clone())
                .summary(format!("{who} runs PCIe x{w}, expected x{want}"))
                .evidence("width", format!("x{w}"), pci_file(addr, "current_link_width"))
                .evidence("expected", format!("x{want}"), "the config file's expected section")
                .meaning("The device trained at its slot's width, below what the node must have: a card in the wrong slot, or a riser wired narrower.")
                .fix("Move the card to a full-width slot, or check the riser and the slot's bifurcation in the BIOS.")
                .alert("RailscopePCIeWidthDegraded"),
        );
    }
    if !bad
        && f.label("role") == "nic"
        && let (Some(sp), Some(want)) = (speed, expected_pcie_speed)
        && sp < want
    {
        bad = true;
        out.push(
            Finding::new(Severity::Warning, "pcie_speed_expected", who.clone())
                .summary(format!("{who} runs PCIe {}, expected {}", pcie_gen(sp), pcie_gen(want)))
                .evidence("speed", pcie_gen(sp), pci_file(addr, "current_link_speed"))
                .evidence("expected", pcie_gen(want), "the config file's expected section")
                .meaning("The NIC trained below the generation the node must have: its host bandwidth is below its network bandwidth.")
                .fix("Check the slot's generation in the BIOS and the riser, and that the card is the expected model.")
                .alert("RailscopePCIeSpeedDegraded"),
        );
    }
    for sev in ["fatal", "nonfatal"] {
        if let Some(n) = facts.value(
            "railscope_pci_aer_errors_total",
            &[("pci_address", addr), ("severity", sev)],
        ) && n > 0.0
        {
            bad = true;
            out.push(
                Finding::new(Severity::Critical, "pcie_aer_uncorrectable", who.clone())
                    .summary(format!("{who} has {n} uncorrectable ({sev}) AER errors since boot"))
                    .evidence(format!("AER {sev}"), format!("{n}"), pci_file(addr, &format!("aer_dev_{sev}")))
                    .meaning("Uncorrectable PCIe errors corrupt or drop transactions; the device may be reset or fall off the bus.")
                    .fix("Drain the node and reseat or replace the device; the kernel log names the error type.")
                    .alert("RailscopePCIeAERUncorrectable"),
            );
        }
    }
    !bad
}
