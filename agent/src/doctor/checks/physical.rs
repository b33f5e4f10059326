//! Step 12, the physical layer: what the transceiver modules, the PHY and the NICs' firmware
//! health reporters say, under the port counters. The same conditions as the alerts of the
//! same names, on one collection: values against the module's own thresholds, one lane
//! against its siblings, the latched module flags, why a link is down, and devlink reporters
//! in error. What needs a rate over hours (pre-FEC BER, uncorrectable FEC blocks, a reporter's
//! error count rising, link flaps) is the alerts' job; this step says so rather than guess
//! from one reading.

use std::collections::BTreeMap;

use super::rules::{
    TRANSCEIVER_LANE_IMBALANCE_DB, TRANSCEIVER_LANE_LIT_WATTS,
    TRANSCEIVER_TEMPERATURE_MARGIN_CELSIUS,
};
use super::{Finding, Node, Severity, count, ok, skip};
use crate::doctor::facts::Sample;

const EEPROM: &str = "ethtool netlink MODULE_EEPROM_GET";
const LINKSTATE: &str = "ethtool netlink LINKSTATE_GET";
const DEVLINK: &str = "devlink HEALTH_REPORTER_GET";

/// Watts as dBm, as ethtool -m prints optical power ("-inf" for no light).
fn dbm(watts: f64) -> String {
    if watts <= 0.0 {
        "-inf dBm".to_owned()
    } else {
        format!("{:.2} dBm", 10.0 * (watts * 1000.0).log10())
    }
}

fn lane_label(s: &Sample) -> String {
    format!("lane {}", s.label("lane"))
}

/// One module's threshold of `family` at `level`, when the module advertises one (0 is none).
fn threshold(node: &Node, family: &str, netdev: &str, level: &str) -> Option<f64> {
    node.facts
        .value(family, &[("netdev", netdev), ("level", level)])
        .filter(|v| *v != 0.0)
}

pub(super) fn physical(node: &Node) -> Vec<Finding> {
    let facts = node.facts;
    let mut out = Vec::new();
    let mut modules: BTreeMap<String, Vec<&Sample>> = BTreeMap::new();
    for s in facts.all("railscope_transceiver_rx_power_watts") {
        modules
            .entry(s.label("netdev").to_owned())
            .or_default()
            .push(s);
    }
    let identified: Vec<&Sample> = facts.all("railscope_transceiver_info").collect();
    let reporters: Vec<&Sample> = facts
        .all("railscope_devlink_health_reporter_healthy")
        .collect();
    let links: Vec<&Sample> = facts.all("railscope_phy_link_up").collect();
    if identified.is_empty() && reporters.is_empty() && links.is_empty() {
        out.push(skip(
            "physical",
            "no transceiver, PHY or devlink health facts (InfiniBand-mode ports have no module EEPROM or FEC over ethtool: the hwmon collector gives their module temperature; or the transceiver, phy and devlink collectors are off)",
        ));
        return out;
    }
    for (netdev, lanes) in &modules {
        let name = |s: &Sample| format!("{netdev} {}", lane_label(s));
        let low_alarm = threshold(
            node,
            "railscope_transceiver_rx_power_threshold_watts",
            netdev,
            "low_alarm",
        );
        let low_warning = threshold(
            node,
            "railscope_transceiver_rx_power_threshold_watts",
            netdev,
            "low_warning",
        );
        for s in lanes {
            let (severity, limit, level) = match (low_alarm, low_warning) {
                (Some(a), _) if s.value < a => (Severity::Critical, a, "low alarm"),
                (_, Some(w)) if s.value < w => (Severity::Warning, w, "low warning"),
                _ => continue,
            };
            out.push(
                Finding::new(severity, "transceiver_rx_power_low", name(s))
                    .summary(format!(
                        "{} receives {}, below the module's {level} threshold of {}",
                        name(s),
                        dbm(s.value),
                        dbm(limit)
                    ))
                    .evidence("RX power", dbm(s.value), EEPROM)
                    .evidence(format!("RX power {level} threshold"), dbm(limit), EEPROM)
                    .meaning("Too little light reaches this lane: the link corrects more bit errors the lower it goes, and loses frames or flaps below the alarm level.")
                    .fix("Clean both ends of the fibre and reseat the module; check the far end's TX power; replace the cable, then the module.")
                    .alert(if severity == Severity::Critical {
                        "RailscopeTransceiverRxPowerLowAlarm"
                    } else {
                        "RailscopeTransceiverRxPowerLowWarning"
                    }),
            );
        }
        // One lane far below the best lane of the same module, while the module has light
        // (a dark lane counts as 1e-7 W, -40 dBm, as in the alert).
        let best = lanes.iter().map(|s| s.value).fold(0.0_f64, f64::max);
        if best > TRANSCEIVER_LANE_LIT_WATTS && lanes.len() > 1 {
            for s in lanes {
                let below = 10.0 * (best / s.value.max(1e-7)).log10();
                if below > TRANSCEIVER_LANE_IMBALANCE_DB {
                    out.push(
                        Finding::new(Severity::Warning, "transceiver_lane_imbalance", name(s))
                            .summary(format!(
                                "{} receives {} against {} on the module's best lane ({:.1} dB below, more than {TRANSCEIVER_LANE_IMBALANCE_DB} dB)",
                                name(s),
                                dbm(s.value),
                                dbm(best),
                                below
                            ))
                            .evidence("RX power of this lane", dbm(s.value), EEPROM)
                            .evidence("RX power of the best lane", dbm(best), EEPROM)
                            .meaning("One lane of a multi-lane link is much weaker than its siblings: a dirty or damaged connector or fibre, not a weak transmitter at the far end (that would dim every lane).")
                            .fix("Inspect and clean the connector (MPO/MTP end faces) at both ends; swap the cable; then the module.")
                            .alert("RailscopeTransceiverLaneImbalance"),
                    );
                }
            }
        }
    }
    // Latched flags: loss of signal or lock (on a netdev that is up), TX faults, and the
    // module's own alarms, as the alerts of the same names read them.
    for s in facts
        .all("railscope_transceiver_lane_flag")
        .filter(|s| s.value == 1.0)
    {
        let flag = s.label("flag");
        let netdev = s.label("netdev");
        let (alert, meaning, fix) = match flag {
            "rx_los" | "tx_los" | "rx_lol" | "tx_lol" => {
                if facts.value("railscope_netdev_up", &[("netdev", netdev)]) != Some(1.0) {
                    continue;
                }
                (
                    "RailscopeTransceiverLossOfSignal",
                    "The module lost the incoming light or the lock on its signal on this lane: the link drops or retrains.",
                    "Check the fibre and the far end's module on that lane; clean and reseat both ends.",
                )
            }
            "tx_fault" => (
                "RailscopeTransceiverFault",
                "The module's transmitter on this lane reports a fault: it sends no light or a bad signal.",
                "Reseat the module; replace it if the TX fault returns.",
            ),
            f if f.ends_with("_alarm") => (
                "RailscopeTransceiverAlarmFlag",
                "A value of this lane passed the module's own alarm threshold since the previous read.",
                "Read the lane's values (ethtool -m); the alarm's measure says what to look at (power: fibre and connectors; bias: the laser ageing).",
            ),
            _ => continue,
        };
        let subject = format!("{netdev} {}", lane_label(s));
        out.push(
            Finding::new(Severity::Warning, "transceiver_flag", subject.clone())
                .summary(format!("the module of {subject} raised {flag}"))
                .evidence(flag, "set since the previous read", EEPROM)
                .meaning(meaning)
                .fix(fix)
                .alert(alert),
        );
    }
    for s in facts
        .all("railscope_transceiver_module_flag")
        .filter(|s| s.value == 1.0)
    {
        let flag = s.label("flag");
        let (alert, meaning) = match flag {
            "module_fault" => (
                "RailscopeTransceiverFault",
                "The module is in its fault state and does not carry traffic reliably.",
            ),
            f if f.ends_with("_alarm") => (
                "RailscopeTransceiverAlarmFlag",
                "The module's temperature or supply voltage passed its own alarm threshold since the previous read.",
            ),
            _ => continue,
        };
        out.push(
            Finding::new(Severity::Warning, "transceiver_flag", s.label("netdev"))
                .summary(format!("the module of {} raised {flag}", s.label("netdev")))
                .evidence(flag, "set since the previous read", EEPROM)
                .meaning(meaning)
                .fix("Reseat the module and check the cage's airflow; replace the module if it persists.")
                .alert(alert),
        );
    }
    // TX bias and TX power beyond the module's alarm thresholds.
    for (family, thresholds, measure) in [
        (
            "railscope_transceiver_tx_bias_amperes",
            "railscope_transceiver_tx_bias_threshold_amperes",
            "laser bias current",
        ),
        (
            "railscope_transceiver_tx_power_watts",
            "railscope_transceiver_tx_power_threshold_watts",
            "transmit power",
        ),
    ] {
        for s in facts.all(family) {
            let netdev = s.label("netdev");
            let high = threshold(node, thresholds, netdev, "high_alarm");
            let low = threshold(node, thresholds, netdev, "low_alarm");
            let limit = match (high, low) {
                (Some(h), _) if s.value > h => ("high alarm", h),
                (_, Some(l)) if s.value < l => ("low alarm", l),
                _ => continue,
            };
            let subject = format!("{netdev} {}", lane_label(s));
            out.push(
                Finding::new(Severity::Warning, "transceiver_tx_out_of_range", subject.clone())
                    .summary(format!(
                        "{subject}: {measure} {} is beyond its {} threshold {}",
                        s.value, limit.0, limit.1
                    ))
                    .evidence(measure, format!("{}", s.value), EEPROM)
                    .evidence(format!("{} threshold", limit.0), format!("{}", limit.1), EEPROM)
                    .meaning("The module's laser runs outside its own limits: an ageing or failing laser, or a module that is too hot.")
                    .fix("Replace the module at the next maintenance window; sooner if the lane's errors climb.")
                    .alert("RailscopeTransceiverTxOutOfRange"),
            );
        }
    }
    // Module temperature against its own high warning threshold.
    for s in facts.all("railscope_transceiver_temperature_celsius") {
        let netdev = s.label("netdev");
        let Some(high) = threshold(
            node,
            "railscope_transceiver_temperature_threshold_celsius",
            netdev,
            "high_warning",
        ) else {
            continue;
        };
        if s.value >= high - TRANSCEIVER_TEMPERATURE_MARGIN_CELSIUS {
            out.push(
                Finding::new(Severity::Warning, "transceiver_temperature", netdev)
                    .summary(format!(
                        "the module of {netdev} is at {:.1} °C, within {TRANSCEIVER_TEMPERATURE_MARGIN_CELSIUS} °C of its high warning threshold of {high:.1} °C",
                        s.value
                    ))
                    .evidence("module temperature", format!("{:.1} °C", s.value), EEPROM)
                    .evidence("high warning threshold", format!("{high:.1} °C"), EEPROM)
                    .meaning("A hot module's laser weakens and its error rate climbs; past its alarm threshold it may shut down.")
                    .fix("Check the airflow of the cage and the fans; a module much hotter than its neighbours is failing.")
                    .alert("RailscopeTransceiverTemperatureHigh"),
            );
        }
    }
    // Why a link is down, as the driver says.
    let mut down = 0;
    for s in &links {
        if s.value != 0.0 {
            continue;
        }
        let netdev = s.label("netdev");
        down += 1;
        let reason = facts
            .matching("railscope_phy_link_ext_state", &[("netdev", netdev)])
            .next()
            .map(|r| {
                if r.label("substate").is_empty() {
                    r.label("state").to_owned()
                } else {
                    format!("{} ({})", r.label("state"), r.label("substate"))
                }
            });
        let Some(reason) = reason else { continue };
        out.push(
            Finding::new(Severity::Warning, "link_down_reason", netdev)
                .summary(format!("{netdev} has no link: {reason}"))
                .evidence("extended link state", reason, LINKSTATE)
                .meaning("The driver says why the link does not come up; the reason points at the cable, the module, the far end or the configuration.")
                .fix("no_cable or module: check the cable and the module; link_training_failure or bad_signal_integrity: reseat and clean, then swap the cable; autoneg or link_logical_mismatch: compare speed and FEC with the switch port.")
                .alert("RailscopeNetdevLinkDownReason"),
        );
    }
    for s in &reporters {
        if s.value != 0.0 {
            continue;
        }
        let reporter = s.label("reporter");
        let mut subject = s.label("devlink").to_owned();
        if !s.label("port").is_empty() {
            subject = format!("{subject} port {}", s.label("port"));
        }
        let fatal = reporter == "fw_fatal";
        out.push(
            Finding::new(
                if fatal { Severity::Critical } else { Severity::Warning },
                "devlink_reporter_error",
                subject.clone(),
            )
            .summary(format!("the devlink health reporter {reporter} of {subject} is in error"))
            .evidence(format!("{reporter} state"), "error", DEVLINK)
            .evidence(
                "errors so far",
                format!(
                    "{}",
                    facts
                        .value(
                            "railscope_devlink_health_reporter_errors_total",
                            &[("devlink", s.label("devlink")), ("port", s.label("port")), ("reporter", reporter)],
                        )
                        .unwrap_or(0.0)
                ),
                DEVLINK,
            )
            .meaning(if fatal {
                "The NIC's firmware hit a fatal error and its recovery did not complete: the device may be unusable until reset."
            } else {
                "The driver saw a firmware or datapath error it could not recover from on its own."
            })
            .fix(format!(
                "devlink health diagnose {} reporter {reporter}; devlink health dump show ... for the dump; devlink health recover to retry; a fw_fatal that does not recover needs a device reset or a reboot.",
                s.label("devlink")
            ))
            .alert(if fatal {
                "RailscopeDevlinkFirmwareFatal"
            } else {
                "RailscopeDevlinkHealthReporterErrors"
            }),
        );
    }
    if out.is_empty() {
        let lanes: usize = modules.values().map(Vec::len).sum();
        out.push(ok(
            "physical",
            format!(
                "{} with {} within their thresholds, {} up, {} healthy (pre-FEC BER, uncorrectable FEC blocks and flaps need rates: see the alerts)",
                count(identified.len(), "transceiver module", "transceiver modules"),
                count(lanes, "lane", "lanes"),
                count(links.len() - down, "PHY link", "PHY links"),
                count(reporters.len(), "devlink reporter", "devlink reporters"),
            ),
        ));
    }
    out
}
