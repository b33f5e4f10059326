//! Step 11, the kernel log: the XID, SXID, NIC firmware, module and PCIe slot events the kmsg
//! collector counted.

use super::gpu_health::xid_severity;
use super::{Finding, Node, Severity, count, ok, skip};
use crate::doctor::facts::Sample;

pub(super) fn kernel_log(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    if !facts.has("railscope_kmsg_records_total") {
        out.push(skip(
            "kernel",
            "the kernel log is not read (the kmsg collector is off or cannot open /dev/kmsg)",
        ));
        return out;
    }
    let mut events: Vec<&Sample> = facts
        .all("railscope_kmsg_events_total")
        .filter(|s| s.value > 0.0)
        .collect();
    events.sort_by(|a, b| {
        (
            a.label("kind"),
            a.label("device"),
            a.label("pci_address"),
            a.label("code"),
        )
            .cmp(&(
                b.label("kind"),
                b.label("device"),
                b.label("pci_address"),
                b.label("code"),
            ))
    });
    for e in events {
        let kind = e.label("kind");
        let (severity, alert, meaning) = classify(e);
        let subject = [e.label("device"), e.label("pci_address")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let code = if e.label("code").is_empty() {
            String::new()
        } else {
            format!(" {}", e.label("code"))
        };
        let mut f = Finding::new(severity, "kernel_log", subject.clone())
            .summary(format!(
                "{kind}{code}{}: {}",
                if subject.is_empty() {
                    String::new()
                } else {
                    format!(" on {subject}")
                },
                count(e.value as usize, "event", "events")
            ))
            .evidence(
                format!("{kind}{code} events"),
                format!("{}", e.value),
                "/dev/kmsg",
            );
        if severity > Severity::Ok {
            f = f.meaning(meaning).fix("Read the kernel log around the event (journalctl -k) and follow the RUNBOOK entry.");
        }
        if let Some(a) = alert {
            f = f.alert(a);
        }
        out.push(f);
    }
    if out.is_empty() {
        out.push(ok(
            "kernel",
            "no XID, SXID, NIC firmware, module or PCIe slot event in the kernel log",
        ));
    }
    out
}

/// A kernel-log event's severity, alert and meaning, by its kind (and an XID's class).
fn classify(e: &Sample) -> (Severity, Option<&'static str>, &'static str) {
    match e.label("kind") {
        "mlx5_cmd_timeout" => (
            Severity::Critical,
            Some("RailscopeNICFirmwareUnresponsive"),
            "The NIC's firmware stopped answering commands: the port may be hung.",
        ),
        "sxid" if e.label("severity") == "fatal" => (
            Severity::Critical,
            Some("RailscopeNVSwitchFatalSXid"),
            "A fatal NVSwitch error: NVLink traffic through it is lost until the fabric is reset.",
        ),
        "sxid" => (
            Severity::Warning,
            Some("RailscopeNVSwitchSXid"),
            "An NVSwitch error the switch recovered from.",
        ),
        "xid" => {
            let (s, a) = e
                .label("code")
                .parse()
                .map(xid_severity)
                .unwrap_or((Severity::Warning, None));
            (s, a, "An XID the GPU driver logged.")
        }
        "mlx5_module" => (
            Severity::Warning,
            Some("RailscopeNICModuleError"),
            "The NIC reported a cable or transceiver module problem.",
        ),
        "pcie_link_down" => (
            Severity::Warning,
            Some("RailscopePCIeSlotLinkDown"),
            "A PCIe slot's link went down: the device behind it left the bus.",
        ),
        "pcie_power" => (
            Severity::Warning,
            Some("RailscopePCIeSlotPowerInsufficient"),
            "A PCIe slot reported insufficient power.",
        ),
        _ => (
            Severity::Warning,
            None,
            "A kernel-log event railscope watches for.",
        ),
    }
}
