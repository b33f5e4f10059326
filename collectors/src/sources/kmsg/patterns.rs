//! The table of kernel-log messages the `kmsg` source counts: which message is which kind of
//! event, and the labels taken from it. Labels are identifiers only (a PCI address, an XID
//! code, a severity word), never message text, so every kind has a bounded set of series.
//!
//! | kind | message (format string) | labels | printed by |
//! |---|---|---|---|
//! | `xid` | `NVRM: Xid (PCI:%04x:%02x:%02x): %d, ...` (older drivers: `NVRM: Xid (%04x:%02x:%02x): %d, ...`) | `xid`, `pci_address` (function 0 added) | NVIDIA kernel module, `nvErrorLog` |
//! | `sxid` | `nvidia-nvswitch%d: SXid (PCI:%s): %05d, Fatal, ...` / `Non-fatal` | `sxid`, `pci_address`, `severity` (`fatal`, `nonfatal`) | NVIDIA NVSwitch driver |
//! | `mlx5_cmd_timeout` | `mlx5_core <bdf>: ...: %s(0x%x) timeout. Will cause a leak of a command resource`, `... No done completion` | `pci_address` | drivers/net/ethernet/mellanox/mlx5/core/cmd.c |
//! | `mlx5_cmd_failed` | `mlx5_core <bdf>: mlx5_cmd_out_err:...: %s(0x%x) op_mod(0x%x) failed, status %s(0x%x), syndrome (0x%x)...` | `pci_address` | cmd.c `mlx5_cmd_out_err` (6.x), `mlx5_cmd_check` (5.x: `... failed, status ...`) |
//! | `mlx5_health` | `mlx5_core <bdf>: ... device's health compromised - reached miss count`, `... Fatal error %u detected`, `... health recovery flow aborted`, `... synd 0x%x: ...` | `pci_address` | core/health.c |
//! | `mlx5_module` | `mlx5_core <bdf>: ... Port module event[error]: module %u, Cable error, %s` | `pci_address` | core/port.c / events.c `mlx5_port_module_event` |
//! | `pcie_link_down` | `pcieport <bdf>: pciehp: Slot(%s): Link Down`, `... Card not present` | `pci_address` (the port) | drivers/pci/hotplug/pciehp_ctrl.c |
//! | `pcie_aer` | `pcieport <bdf>: AER: %s error message received from %s` (6.x), `AER: %s error received: %s` (5.x and before); `%s` is `Corrected`, `Uncorrected (Non-Fatal)`, `Uncorrected (Fatal)`, with `Multiple ` in front for several | `pci_address` (the device the error came from), `severity` (`corrected`, `nonfatal`, `fatal`) | drivers/pci/pcie/aer.c |
//! | `pcie_power` | `mlx5_core <bdf>: ... Detected insufficient power on the PCIe slot (%uW).`, `... powered down due to insufficient/unadvertised power on the PCIe slot` | `pci_address` | core/events.c `pcie_core`, `port_module` |
//! | `ib_link_down` | `<driver> <bdf> <ibdev>: Port: %u Link DOWN` | `pci_address`, `device`, `port` | drivers/infiniband/core/device.c (kernels from 2025) |
//!
//! Variants accepted, from kernels and drivers of several generations: `Xid (0000:01:00)`
//! without `PCI:` (old drivers) and `Xid (PCI:0000:01:00 GPU-I:05)` under MIG; AER's
//! `Corrected`/`Uncorrected` (to 6.5) and `Correctable`/`Uncorrectable` (6.6 on), each with an
//! optional `Multiple `, and its three ways of naming the source (`message received from
//! <bdf>`, `received: <bdf>`, and 4.x's requester `id=00e5`, decoded with the port's domain);
//! mlx5 messages with and without the `func:line:(pid N):` prefix; `mlx5_cmd_check` (5.x) and
//! `mlx5_cmd_out_err` (6.x); pciehp as `pcieport <bdf>: pciehp: Slot(%s): ...` and as the old
//! `pciehp <bdf>:pcieNN: slot(%s): Link Down event`. `Link Down/Up ignored (recovered by DPC)`
//! is no link down.
//!
//! `tests/fixtures/kmsg/samples.txt` holds real lines of each kind (and lines that must match
//! none), with where each came from; a test runs every one through [`classify`].

/// What one kernel-log message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The kind (the table above).
    pub kind: &'static str,
    /// Its labels, in a fixed order per kind.
    pub labels: Vec<(&'static str, String)>,
}

/// Every kind, in the order the table lists them.
pub const KINDS: &[&str] = &[
    "xid",
    "sxid",
    "mlx5_cmd_timeout",
    "mlx5_cmd_failed",
    "mlx5_health",
    "mlx5_module",
    "pcie_link_down",
    "pcie_aer",
    "pcie_power",
    "ib_link_down",
];

/// The event `message` reports (the text after the record's `;`), if it is one of the table's.
pub fn classify(message: &str) -> Option<Event> {
    let message = message.trim_end();
    if let Some(rest) = after(message, "NVRM: Xid (") {
        return xid(rest);
    }
    if let Some(at) = message.find(": SXid (")
        && message.starts_with("nvidia-nvswitch")
    {
        return sxid(&message[at + ": SXid (".len()..]);
    }
    if let Some((driver, device, text)) = device_message(message) {
        // `ibdev_*` messages name the PCI function and the RDMA device: `<bdf> <ibdev>`.
        if let Some((address, ibdev)) = device.split_once(' ') {
            return ib_link_down(address, ibdev, text);
        }
        return match driver {
            "mlx5_core" => mlx5(device, text),
            "pcieport" => pcieport(device, text),
            "pciehp" => old_pciehp(device, text),
            _ => None,
        };
    }
    None
}

fn event(kind: &'static str, labels: Vec<(&'static str, String)>) -> Option<Event> {
    Some(Event { kind, labels })
}

fn after<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.find(prefix).map(|at| &text[at + prefix.len()..])
}

/// `NVRM: Xid (PCI:0000:2b:00): 79, pid=...`: the address and the code.
fn xid(rest: &str) -> Option<Event> {
    let (address, rest) = rest.split_once("): ")?;
    let address = address.strip_prefix("PCI:").unwrap_or(address);
    // Under MIG the instance follows the address: `PCI:0000:01:00 GPU-I:05`.
    let address = address.split_whitespace().next()?;
    let code = leading_number(rest)?;
    event(
        "xid",
        vec![
            ("xid", code.to_string()),
            ("pci_address", function_zero(address)?),
        ],
    )
}

/// `SXid (PCI:0000:05:00.0): 12028, Non-fatal, ...`.
fn sxid(rest: &str) -> Option<Event> {
    let (address, rest) = rest.split_once("): ")?;
    let address = address.strip_prefix("PCI:").unwrap_or(address);
    let code = leading_number(rest)?;
    let severity = rest
        .split(',')
        .nth(1)
        .map(str::trim)
        .map(|s| s.to_ascii_lowercase().replace('-', ""))
        .filter(|s| s == "fatal" || s == "nonfatal")?;
    event(
        "sxid",
        vec![
            ("sxid", code.to_string()),
            ("pci_address", pci_address(address)?),
            ("severity", severity),
        ],
    )
}

/// A device message: `<driver> <device>: <text>` (`dev_err` and friends).
fn device_message(message: &str) -> Option<(&str, &str, &str)> {
    let (driver, rest) = message.split_once(' ')?;
    let (device, text) = rest.split_once(": ")?;
    Some((driver, device, text))
}

fn mlx5(device: &str, text: &str) -> Option<Event> {
    let address = pci_address(device)?;
    let kind = if text.contains("insufficient power on the PCIe slot")
        || text.contains("insufficient/unadvertised power on the PCIe slot")
    {
        "pcie_power"
    } else if text.contains(") timeout. Will cause a leak of a command resource")
        || text.contains(" No done completion")
        || (text.contains("cmd_work_handler") && text.contains("timeout"))
    {
        "mlx5_cmd_timeout"
    } else if text.contains(") failed, status ") {
        "mlx5_cmd_failed"
    } else if text.contains("health compromised")
        || (text.contains("Fatal error") && text.contains("detected"))
        || text.contains("health recovery flow aborted")
        || text.contains("internal error")
        || text.contains("synd 0x")
    {
        "mlx5_health"
    } else if text.contains("Port module event[error]")
        || (text.contains("Port module event") && text.contains("Cable unplugged"))
    {
        "mlx5_module"
    } else {
        return None;
    };
    event(kind, vec![("pci_address", address)])
}

fn pcieport(device: &str, text: &str) -> Option<Event> {
    let port = pci_address(device)?;
    if let Some(pciehp) = text.strip_prefix("pciehp: ") {
        if pciehp.ends_with(": Link Down") || pciehp.ends_with(": Card not present") {
            return event("pcie_link_down", vec![("pci_address", port)]);
        }
        return None;
    }
    let aer = text.strip_prefix("AER: ")?;
    let aer = aer.strip_prefix("Multiple ").unwrap_or(aer);
    let severity = if aer.starts_with("Corrected error") || aer.starts_with("Correctable error") {
        "corrected"
    } else if aer.starts_with("Uncorrected (Non-Fatal) error")
        || aer.starts_with("Uncorrectable (Non-Fatal) error")
    {
        "nonfatal"
    } else if aer.starts_with("Uncorrected (Fatal) error")
        || aer.starts_with("Uncorrectable (Fatal) error")
    {
        "fatal"
    } else {
        return None;
    };
    // 6.x: `... error message received from 0000:41:00.0`; 5.x: `... error received:
    // 0000:41:00.0`; 4.x: `... error received: id=00e5`, the requester ID (bus, device and
    // function) in the port's domain.
    let from = aer
        .rsplit_once(" received from ")
        .or_else(|| aer.rsplit_once(" received: "))
        .and_then(|(_, from)| from.split_whitespace().next());
    let source = match from {
        Some(id) if id.starts_with("id=") => requester(&port, &id[3..]),
        Some(address) => pci_address(address),
        None => None,
    }
    .unwrap_or(port);
    event(
        "pcie_aer",
        vec![("pci_address", source), ("severity", severity.to_owned())],
    )
}

/// The old pciehp form: `pciehp 0000:02:05.0:pcie24: slot(6): Link Down event`.
fn old_pciehp(device: &str, text: &str) -> Option<Event> {
    let port = pci_address(device.get(..12)?)?;
    let text = text.trim_end_matches(" event");
    (text.ends_with(": Link Down") || text.ends_with(": Card not present")).then(|| Event {
        kind: "pcie_link_down",
        labels: vec![("pci_address", port)],
    })
}

/// `Port: 1 Link DOWN` of an RDMA device (`ibdev_info`).
fn ib_link_down(address: &str, ibdev: &str, text: &str) -> Option<Event> {
    let rest = text.strip_prefix("Port: ")?;
    let (port, state) = rest.split_once(' ')?;
    if state != "Link DOWN" || port.parse::<u32>().is_err() {
        return None;
    }
    event(
        "ib_link_down",
        vec![
            ("pci_address", pci_address(address)?),
            ("device", ibdev.to_owned()),
            ("port", port.to_owned()),
        ],
    )
}

/// A 16-bit PCI requester ID (`00e5`: bus 0x00, device 0x1c, function 5) as an address in
/// the domain of `port`.
fn requester(port: &str, id: &str) -> Option<String> {
    let id = u16::from_str_radix(id, 16).ok()?;
    pci_address(&format!(
        "{}:{:02x}:{:02x}.{:x}",
        port.get(..4)?,
        id >> 8,
        (id >> 3) & 0x1f,
        id & 7
    ))
}

fn leading_number(text: &str) -> Option<u32> {
    let digits: String = text
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A full PCI address (`0000:41:00.0`), lower case; `None` for anything else.
fn pci_address(text: &str) -> Option<String> {
    let text = text.trim();
    let bytes = text.as_bytes();
    let ok = bytes.len() == 12
        && bytes[4] == b':'
        && bytes[7] == b':'
        && bytes[10] == b'.'
        && text
            .char_indices()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit());
    ok.then(|| text.to_ascii_lowercase())
}

/// The NVIDIA driver's `0000:2b:00` (domain, bus, device) as a full address of function 0.
fn function_zero(text: &str) -> Option<String> {
    pci_address(&format!("{}.0", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(e: &Event) -> String {
        e.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every real line of `tests/fixtures/kmsg/samples.txt` is the kind it says, with its
    /// labels; every `none` line matches nothing.
    #[test]
    fn real_lines_are_classified_as_their_sample_says() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/kmsg/samples.txt"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let mut lines = 0;
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let mut parts = line.splitn(3, '|');
            let (kind, want, message) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            let got = classify(message);
            if kind == "none" {
                assert_eq!(got, None, "{message}");
            } else {
                let e = got.unwrap_or_else(|| panic!("{message}: not classified, expected {kind}"));
                assert_eq!((e.kind, labels(&e).as_str()), (kind, want), "{message}");
                seen.insert(e.kind);
            }
            lines += 1;
        }
        assert!(lines >= 60, "{lines} samples");
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>().len(),
            KINDS.len(),
            "a kind without samples"
        );
    }

    #[test]
    fn the_table_kinds() {
        for (message, kind, want) in [
            (
                "NVRM: Xid (PCI:0000:2b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
                "xid",
                "xid=79,pci_address=0000:2b:00.0",
            ),
            (
                "NVRM: Xid (0000:B1:00): 13, Graphics Exception",
                "xid",
                "xid=13,pci_address=0000:b1:00.0",
            ),
            (
                "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
                "sxid",
                "sxid=12028,pci_address=0000:05:00.0,severity=nonfatal",
            ),
            (
                "mlx5_core 0000:b1:00.0: wait_func:1034:(pid 1234): ACCESS_REG(0x805) timeout. Will cause a leak of a command resource",
                "mlx5_cmd_timeout",
                "pci_address=0000:b1:00.0",
            ),
            (
                "pcieport 0000:00:03.1: AER: Uncorrected (Fatal) error message received from 0000:41:00.0",
                "pcie_aer",
                "pci_address=0000:41:00.0,severity=fatal",
            ),
            (
                "pcieport 0000:00:01.0: pciehp: Slot(1): Link Down",
                "pcie_link_down",
                "pci_address=0000:00:01.0",
            ),
        ] {
            let e = classify(message).unwrap_or_else(|| panic!("{message}: no event"));
            assert_eq!((e.kind, labels(&e).as_str()), (kind, want), "{message}");
        }
        for message in [
            "mlx5_core 0000:b1:00.0: mlx5e: IPoIB, netdev ib0 link up",
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05",
            "pcieport 0000:00:01.0: AER: enabled with IRQ 26",
            "nvidia-nvswitch0: probe",
        ] {
            assert_eq!(classify(message), None, "{message}");
        }
    }
}
