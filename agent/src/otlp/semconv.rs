//! Where the OpenTelemetry hardware semantic conventions name what railscope measures:
//! with `--otlp.hardware-semconv`, these families are pushed under the convention's name,
//! instrument, unit and attributes instead of railscope's. Everything else (RDMA ports,
//! PFC and congestion, NVLink, PCIe links, the agent itself) has no convention and keeps
//! its name.
//!
//! Attributes: `hw.type` (`gpu` or `network`) and `hw.id` (the GPU index or the netdev
//! name) are added; `direction` becomes `hw.direction` with `receive`/`transmit`; an ECC
//! error's `type` becomes `error.type`. Every other railscope label stays as it is, so a
//! GPU series still carries `gpu` and joins with `railscope_gpu_info`.

/// The instrument a convention prescribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instrument {
    /// A monotonic cumulative sum.
    Counter,
    /// A non-monotonic cumulative sum.
    UpDownCounter,
    /// A gauge.
    Gauge,
}

/// One family's convention.
#[derive(Debug)]
pub(crate) struct Rule {
    /// railscope's family name (without `_total`).
    pub(crate) family: &'static str,
    /// The convention's metric name.
    pub(crate) name: &'static str,
    /// The convention's instrument.
    pub(crate) instrument: Instrument,
    /// The convention's unit (UCUM).
    pub(crate) unit: &'static str,
    /// The convention's description.
    pub(crate) description: &'static str,
    /// `hw.type`.
    pub(crate) hw_type: &'static str,
    /// The railscope label whose value is `hw.id`.
    pub(crate) id_label: &'static str,
    /// railscope labels renamed to the convention's attributes.
    pub(crate) renames: &'static [(&'static str, &'static str)],
    /// Constant attributes.
    pub(crate) extra: &'static [(&'static str, &'static str)],
}

const DIRECTION: &[(&str, &str)] = &[("direction", "hw.direction")];

/// The mapping, documented in `docs/otlp.md`.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        family: "railscope_gpu_memory_total_bytes",
        name: "hw.gpu.memory.limit",
        instrument: Instrument::UpDownCounter,
        unit: "By",
        description: "Size of the GPU memory",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[],
    },
    Rule {
        family: "railscope_gpu_memory_used_bytes",
        name: "hw.gpu.memory.usage",
        instrument: Instrument::UpDownCounter,
        unit: "By",
        description: "GPU memory used",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[],
    },
    Rule {
        family: "railscope_gpu_utilization_ratio",
        name: "hw.gpu.utilization",
        instrument: Instrument::Gauge,
        unit: "1",
        description: "Fraction of time spent in a specific task",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[("hw.gpu.task", "general")],
    },
    Rule {
        family: "railscope_gpu_encoder_utilization_ratio",
        name: "hw.gpu.utilization",
        instrument: Instrument::Gauge,
        unit: "1",
        description: "Fraction of time spent in a specific task",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[("hw.gpu.task", "encoder")],
    },
    Rule {
        family: "railscope_gpu_decoder_utilization_ratio",
        name: "hw.gpu.utilization",
        instrument: Instrument::Gauge,
        unit: "1",
        description: "Fraction of time spent in a specific task",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[("hw.gpu.task", "decoder")],
    },
    Rule {
        family: "railscope_gpu_power_watts",
        name: "hw.gpu.power",
        instrument: Instrument::Gauge,
        unit: "W",
        description: "GPU instantaneous power consumption in Watts",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[],
    },
    Rule {
        family: "railscope_gpu_energy_joules",
        name: "hw.energy",
        instrument: Instrument::Counter,
        unit: "J",
        description: "Energy consumed by the component",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[],
        extra: &[],
    },
    Rule {
        family: "railscope_gpu_pcie_bytes",
        name: "hw.gpu.io",
        instrument: Instrument::Counter,
        unit: "By",
        description: "Received and transmitted bytes by the GPU",
        hw_type: "gpu",
        id_label: "gpu",
        renames: DIRECTION,
        extra: &[],
    },
    Rule {
        family: "railscope_gpu_ecc_errors",
        name: "hw.errors",
        instrument: Instrument::Counter,
        unit: "{error}",
        description: "Number of errors encountered by the component",
        hw_type: "gpu",
        id_label: "gpu",
        renames: &[("type", "error.type")],
        extra: &[],
    },
    Rule {
        family: "railscope_netdev_errors",
        name: "hw.errors",
        instrument: Instrument::Counter,
        unit: "{error}",
        description: "Number of errors encountered by the component",
        hw_type: "network",
        id_label: "netdev",
        renames: DIRECTION,
        extra: &[("error.type", "_OTHER")],
    },
    Rule {
        family: "railscope_netdev_bytes",
        name: "hw.network.io",
        instrument: Instrument::Counter,
        unit: "By",
        description: "Received and transmitted network traffic in bytes",
        hw_type: "network",
        id_label: "netdev",
        renames: DIRECTION,
        extra: &[],
    },
    Rule {
        family: "railscope_netdev_packets",
        name: "hw.network.packets",
        instrument: Instrument::Counter,
        unit: "{packet}",
        description: "Received and transmitted network traffic in packets (or frames)",
        hw_type: "network",
        id_label: "netdev",
        renames: DIRECTION,
        extra: &[],
    },
    Rule {
        family: "railscope_netdev_speed_bytes_per_second",
        name: "hw.network.bandwidth.limit",
        instrument: Instrument::UpDownCounter,
        unit: "By/s",
        description: "Link speed",
        hw_type: "network",
        id_label: "netdev",
        renames: &[],
        extra: &[],
    },
    Rule {
        family: "railscope_netdev_carrier",
        name: "hw.network.up",
        instrument: Instrument::UpDownCounter,
        unit: "1",
        description: "Link status: 1 (up) or 0 (down)",
        hw_type: "network",
        id_label: "netdev",
        renames: &[],
        extra: &[],
    },
];

/// The convention for `family`, if there is one.
pub(crate) fn rule(family: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.family == family)
}

/// A label value as the convention spells it: directions become `receive`/`transmit`.
pub(crate) fn value<'a>(attribute: &str, value: &'a str) -> &'a str {
    match (attribute, value) {
        ("hw.direction", "rx") => "receive",
        ("hw.direction", "tx") => "transmit",
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_instrument_and_unit_per_name() {
        for a in RULES {
            assert_eq!(RULES.iter().filter(|b| b.family == a.family).count(), 1);
            for b in RULES.iter().filter(|b| b.name == a.name) {
                assert_eq!((a.instrument, a.unit), (b.instrument, b.unit), "{}", a.name);
            }
        }
        assert_eq!(value("hw.direction", "rx"), "receive");
        assert_eq!(value("hw.direction", "tx"), "transmit");
        assert_eq!(value("error.type", "rx"), "rx");
    }
}
