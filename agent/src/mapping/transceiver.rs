//! Maps the `transceiver` source's snapshot to metric families.
//!
//! Names: `railscope_transceiver_*`, one set per netdev with a module, labelled `netdev`;
//! per-lane series also `lane` ("1".."8", 1-based as SFF-8636, CMIS and ethtool number
//! lanes), thresholds `level` (`high_alarm`, `high_warning`, `low_warning`, `low_alarm`),
//! flags `flag`. Values in base units: watts (the modules' 0.1 µW; dashboards convert to
//! dBm, which has no value for 0 W), amperes, volts, degrees Celsius. Identity is on
//! `railscope_transceiver_info`. A module whose last read failed has only
//! `railscope_transceiver_up` (0), its read errors and the time of its last good read.

use railscope_collectors::sources::transceiver::{Levels, ModuleState, Snapshot, Thresholds};

use crate::exposition::Family;

/// A threshold family and the monitor it bounds.
type ThresholdOf = fn(&Thresholds) -> Option<Levels>;

/// The `transceiver` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_transceiver",
        "Transceiver module identity from its EEPROM (ethtool netlink MODULE_EEPROM_GET): management spec, form factor, vendor, part number, revision, serial, connector and media.",
    );
    let mut lanes = Family::gauge(
        "railscope_transceiver_lanes",
        "Lanes whose RX/TX power or TX bias the module monitors (SFP 1, SFF-8636 4, CMIS 8 per bank; 0 without diagnostics).",
    );
    let mut temperature = Family::gauge(
        "railscope_transceiver_temperature_celsius",
        "Module temperature in degrees Celsius (module EEPROM diagnostics, 1/256 °C resolution).",
    );
    let mut voltage = Family::gauge(
        "railscope_transceiver_supply_voltage_volts",
        "Module supply voltage (Vcc) in volts (module EEPROM diagnostics, 100 µV resolution).",
    );
    let mut rx_power = Family::gauge(
        "railscope_transceiver_rx_power_watts",
        "Received optical power of the lane in watts (module EEPROM diagnostics, 0.1 µW resolution; average or OMA as the module declares, see the collector docs).",
    );
    let mut tx_power = Family::gauge(
        "railscope_transceiver_tx_power_watts",
        "Transmitted optical power of the lane in watts (module EEPROM diagnostics, 0.1 µW resolution).",
    );
    let mut tx_bias = Family::gauge(
        "railscope_transceiver_tx_bias_amperes",
        "Laser bias current of the lane in amperes (module EEPROM diagnostics, 2 µA resolution, times the CMIS multiplier).",
    );
    let mut thresholds: [(Family, ThresholdOf); 5] = [
        (
            Family::gauge(
                "railscope_transceiver_temperature_threshold_celsius",
                "Module temperature alarm and warning thresholds in degrees Celsius, as the module's EEPROM gives them.",
            ),
            |t| t.temperature,
        ),
        (
            Family::gauge(
                "railscope_transceiver_supply_voltage_threshold_volts",
                "Module supply voltage alarm and warning thresholds in volts, as the module's EEPROM gives them.",
            ),
            |t| t.voltage,
        ),
        (
            Family::gauge(
                "railscope_transceiver_rx_power_threshold_watts",
                "Per-lane received power alarm and warning thresholds in watts, as the module's EEPROM gives them.",
            ),
            |t| t.rx_power,
        ),
        (
            Family::gauge(
                "railscope_transceiver_tx_power_threshold_watts",
                "Per-lane transmitted power alarm and warning thresholds in watts, as the module's EEPROM gives them.",
            ),
            |t| t.tx_power,
        ),
        (
            Family::gauge(
                "railscope_transceiver_tx_bias_threshold_amperes",
                "Per-lane laser bias current alarm and warning thresholds in amperes, as the module's EEPROM gives them.",
            ),
            |t| t.tx_bias,
        ),
    ];
    let mut lane_flag = Family::gauge(
        "railscope_transceiver_lane_flag",
        "1 when the module reports the lane flag (LOS, LOL, TX fault, power and bias alarms and warnings; latched flags as of the last read, which clears them), 0 when not; only flags the module implements.",
    );
    let mut module_flag = Family::gauge(
        "railscope_transceiver_module_flag",
        "1 when the module reports the module-level flag (temperature and voltage alarms and warnings, module fault), 0 when not; only flags the module implements.",
    );
    let mut state = Family::gauge(
        "railscope_transceiver_module_state",
        "CMIS module state (lower page byte 3): 1 for the current state, 0 for the others.",
    );
    let mut up = Family::gauge(
        "railscope_transceiver_up",
        "1 when the last read of the module EEPROM succeeded, 0 when it failed (module removed, read error, inconsistent data).",
    );
    let mut last_read = Family::gauge(
        "railscope_transceiver_last_read_timestamp_seconds",
        "Unix time of the last successful module diagnostics read (reads run at most every --collector.transceiver.interval).",
    );
    let mut errors = Family::counter(
        "railscope_transceiver_read_errors",
        "Failed reads of the module EEPROM since the agent started.",
    );
    for m in &snapshot.modules {
        let netdev = || ("netdev", m.netdev.clone());
        up.push([netdev()], m.up);
        errors.push([netdev()], m.read_errors);
        if let Some(t) = m.last_read {
            last_read.push([netdev()], t);
        }
        let Some(mi) = m.info.as_ref() else {
            continue;
        };
        let id = &mi.identity;
        info.push(
            [
                netdev(),
                ("spec", id.spec.as_str().to_owned()),
                ("type", id.kind.clone()),
                ("vendor", id.vendor.clone()),
                ("part_number", id.part_number.clone()),
                ("revision", id.revision.clone()),
                ("serial", id.serial.clone()),
                ("connector", id.connector.clone()),
                ("media", id.media.clone()),
            ],
            1u64,
        );
        for (family, of) in &mut thresholds {
            if let Some(levels) = of(&mi.thresholds) {
                for (level, value) in levels.labelled() {
                    family.push([netdev(), ("level", level.to_owned())], value);
                }
            }
        }
        let Some(d) = m.diagnostics.as_ref() else {
            continue;
        };
        lanes.push([netdev()], d.lanes.len() as u64);
        if let Some(v) = d.temperature {
            temperature.push([netdev()], v);
        }
        if let Some(v) = d.voltage {
            voltage.push([netdev()], v);
        }
        for lane in &d.lanes {
            let labels = || vec![netdev(), ("lane", lane.lane.to_string())];
            if let Some(v) = lane.rx_power {
                rx_power.push(labels(), v);
            }
            if let Some(v) = lane.tx_power {
                tx_power.push(labels(), v);
            }
            if let Some(v) = lane.tx_bias {
                tx_bias.push(labels(), v);
            }
        }
        for (lane, flag, set) in &d.lane_flags {
            lane_flag.push(
                [
                    netdev(),
                    ("lane", lane.to_string()),
                    ("flag", flag.as_str().to_owned()),
                ],
                *set,
            );
        }
        for (flag, set) in &d.module_flags {
            module_flag.push([netdev(), ("flag", flag.as_str().to_owned())], *set);
        }
        if let Some(current) = d.state {
            for s in ModuleState::ALL {
                state.push([netdev(), ("state", s.as_str().to_owned())], s == current);
            }
        }
    }
    let mut out = vec![
        info,
        lanes,
        temperature,
        voltage,
        rx_power,
        tx_power,
        tx_bias,
    ];
    out.extend(thresholds.into_iter().map(|(f, _)| f));
    out.extend([lane_flag, module_flag, state, up, last_read, errors]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};
    use railscope_collectors::sources::transceiver::hexdump::Capture;
    use railscope_collectors::sources::transceiver::{Module, eeprom};

    const CMIS: &str =
        include_str!("../../../tests/fixtures/transceiver/cmis-qsfpdd-400g-dr4/ethtool-m-hex.txt");
    const SFP: &str = include_str!(
        "../../../tests/fixtures/transceiver/sff8472-finisar-ftlx8571d3bcl/ethtool-m-hex.txt"
    );

    const QSFP28: &str =
        include_str!("../../../tests/fixtures/transceiver/sff8636-qsfp28-sr4/ethtool-m-hex.txt");

    #[test]
    fn a_qsfp28_has_115_series() {
        let text = encode(
            families(&Snapshot {
                modules: vec![module("eth3", QSFP28)],
            }),
            Format::Prometheus,
        );
        let all = text
            .lines()
            .filter(|l| l.starts_with("railscope_transceiver_"))
            .count();
        assert_eq!(all, 115, "{text}");
        assert!(text.contains(
            "railscope_transceiver_lane_flag{netdev=\"eth3\",lane=\"2\",flag=\"rx_los\"} 1"
        ));
    }

    fn module(netdev: &str, text: &str) -> Module {
        let mut capture = Capture::parse(text).unwrap();
        let info = eeprom::identify(&mut capture).unwrap();
        let diagnostics = eeprom::diagnostics(&mut capture, &info).unwrap();
        Module {
            netdev: netdev.into(),
            up: true,
            info: Some(info),
            diagnostics: Some(diagnostics),
            last_read: Some(1_700_000_000.0),
            read_errors: 0,
        }
    }

    fn count(text: &str, prefix: &str) -> usize {
        text.lines().filter(|l| l.starts_with(prefix)).count()
    }

    #[test]
    fn a_cmis_module_maps_to_the_contracts_families() {
        let snapshot = Snapshot {
            modules: vec![module("eth0", CMIS)],
        };
        let text = encode(families(&snapshot), Format::Prometheus);
        for line in [
            "railscope_transceiver_info{netdev=\"eth0\",spec=\"cmis\",type=\"QSFP-DD\",vendor=\"ACME OPTICS\",part_number=\"QDD-400G-DR4-S\",revision=\"B1\",serial=\"ACX2140001234\",connector=\"mpo_1x12\",media=\"optical\"} 1",
            "railscope_transceiver_lanes{netdev=\"eth0\"} 8",
            "railscope_transceiver_temperature_celsius{netdev=\"eth0\"} 41.5",
            "railscope_transceiver_tx_bias_amperes{netdev=\"eth0\",lane=\"1\"} 0.0164",
            "railscope_transceiver_tx_bias_threshold_amperes{netdev=\"eth0\",level=\"high_alarm\"} 0.03",
            "railscope_transceiver_lane_flag{netdev=\"eth0\",lane=\"5\",flag=\"rx_los\"} 1",
            "railscope_transceiver_module_flag{netdev=\"eth0\",flag=\"temperature_high_warning\"} 1",
            "railscope_transceiver_module_state{netdev=\"eth0\",state=\"ready\"} 1",
            "railscope_transceiver_module_state{netdev=\"eth0\",state=\"fault\"} 0",
            "railscope_transceiver_up{netdev=\"eth0\"} 1",
            "railscope_transceiver_last_read_timestamp_seconds{netdev=\"eth0\"} 1700000000.0",
            "railscope_transceiver_read_errors_total{netdev=\"eth0\"} 0",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
        // Series per CMIS 8-lane module (the docs' table).
        let all = text
            .lines()
            .filter(|l| l.starts_with("railscope_transceiver_"))
            .count();
        assert_eq!(count(&text, "railscope_transceiver_rx_power_watts{"), 8);
        assert_eq!(count(&text, "railscope_transceiver_lane_flag{"), 8 * 17);
        assert_eq!(count(&text, "railscope_transceiver_module_flag{"), 9);
        assert_eq!(all, 201, "{text}");
    }

    #[test]
    fn a_failed_module_keeps_only_up_errors_and_last_read() {
        let mut m = module("eth1", SFP);
        m.up = false;
        m.info = None;
        m.diagnostics = None;
        m.read_errors = 3;
        let text = encode(families(&Snapshot { modules: vec![m] }), Format::Prometheus);
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("railscope_transceiver_"))
            .collect();
        assert_eq!(
            series,
            [
                "railscope_transceiver_up{netdev=\"eth1\"} 0",
                "railscope_transceiver_last_read_timestamp_seconds{netdev=\"eth1\"} 1700000000.0",
                "railscope_transceiver_read_errors_total{netdev=\"eth1\"} 3",
            ]
        );
    }

    #[test]
    fn an_sfp_has_its_series_and_no_module_state() {
        let text = encode(
            families(&Snapshot {
                modules: vec![module("eth2", SFP)],
            }),
            Format::Prometheus,
        );
        assert!(
            text.contains("railscope_transceiver_rx_power_watts{netdev=\"eth2\",lane=\"1\"} 4e-7"),
            "{text}"
        );
        assert_eq!(count(&text, "railscope_transceiver_module_state{"), 0);
        let all = text
            .lines()
            .filter(|l| l.starts_with("railscope_transceiver_"))
            .count();
        assert_eq!(all, 52, "{text}");
    }
}
