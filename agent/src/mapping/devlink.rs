//! Maps the `devlink` source's snapshot to metric families.
//!
//! Names: `railscope_devlink_health_reporter_*`, one series per health reporter, labelled
//! `devlink` (the instance's handle, `pci/0000:18:00.0`), `pci_address` (empty off PCI),
//! `device` (the PCI function's RDMA devices, comma-joined; empty for none), `port` (the
//! devlink port index of a port reporter, empty for a device reporter) and `reporter`;
//! `railscope_devlink_info` and `railscope_devlink_version_info` for what the device's info
//! says.

use railscope_collectors::sources::devlink::{ReporterState, Snapshot};

use crate::exposition::Family;

/// The `devlink` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut healthy = Family::gauge(
        "railscope_devlink_health_reporter_healthy",
        "1 when the devlink health reporter is healthy, 0 while it is in error (an error was reported and not recovered: mlx5 fw_fatal in error means the device needs a reset).",
    );
    let mut errors = Family::counter(
        "railscope_devlink_health_reporter_errors",
        "Errors the devlink health reporter has reported since it was created (driver load or devlink reload).",
    );
    let mut recoveries = Family::counter(
        "railscope_devlink_health_reporter_recoveries",
        "Successful recoveries of the devlink health reporter since it was created; errors rising faster than recoveries means recovery fails or is held back by the graceful period.",
    );
    let mut last_dump = Family::gauge(
        "railscope_devlink_health_reporter_last_dump_timestamp_seconds",
        "Unix time (seconds) when the devlink health reporter's stored dump was taken (DUMP_TS_NS, wall clock); no series while no dump is stored.",
    );
    let mut graceful = Family::gauge(
        "railscope_devlink_health_reporter_graceful_period_seconds",
        "Shortest time in seconds between two automatic recoveries of the devlink health reporter; an error within it after a recovery leaves the reporter in error.",
    );
    let mut auto_recover = Family::gauge(
        "railscope_devlink_health_reporter_auto_recover",
        "1 when the devlink health reporter recovers automatically on error, 0 when recovery waits for an operator.",
    );
    let mut info = Family::info(
        "railscope_devlink",
        "A devlink instance: its driver and serial numbers (devlink dev info).",
    );
    let mut version = Family::info(
        "railscope_devlink_version",
        "A version of a devlink instance (devlink dev info): fixed (hardware), running (now) or stored (in flash: runs after the next reset).",
    );
    for dev in &snapshot.devices {
        let handle = dev.handle();
        let pci_address = dev.pci_address.clone().unwrap_or_default();
        let device = dev.rdma_devices.join(",");
        for r in &dev.reporters {
            let labels = || {
                vec![
                    ("devlink", handle.clone()),
                    ("pci_address", pci_address.clone()),
                    ("device", device.clone()),
                    ("port", r.port.map(|p| p.to_string()).unwrap_or_default()),
                    ("reporter", r.name.clone()),
                ]
            };
            match r.state {
                Some(ReporterState::Healthy) => healthy.push(labels(), 1u64),
                Some(ReporterState::Error) => healthy.push(labels(), 0u64),
                Some(ReporterState::Other(_)) | None => {}
            }
            if let Some(v) = r.errors {
                errors.push(labels(), v);
            }
            if let Some(v) = r.recoveries {
                recoveries.push(labels(), v);
            }
            if let Some(ns) = r.dump_unix_ns {
                last_dump.push(labels(), ns as f64 / 1e9);
            }
            if let Some(ms) = r.graceful_period_ms {
                graceful.push(labels(), ms as f64 / 1e3);
            }
            if let Some(v) = r.auto_recover {
                auto_recover.push(labels(), v);
            }
        }
        let dev_info = dev.info.clone().unwrap_or_default();
        info.push(
            [
                ("devlink", handle.clone()),
                ("pci_address", pci_address.clone()),
                ("device", device.clone()),
                ("driver", dev_info.driver.clone().unwrap_or_default()),
                (
                    "serial_number",
                    dev_info.serial_number.clone().unwrap_or_default(),
                ),
                (
                    "board_serial_number",
                    dev_info.board_serial_number.clone().unwrap_or_default(),
                ),
            ],
            1u64,
        );
        for v in &dev_info.versions {
            version.push(
                [
                    ("devlink", handle.clone()),
                    ("pci_address", pci_address.clone()),
                    ("kind", v.kind.as_str().to_owned()),
                    ("name", v.name.clone()),
                    ("version", v.value.clone()),
                ],
                1u64,
            );
        }
    }
    vec![
        healthy,
        errors,
        recoveries,
        last_dump,
        graceful,
        auto_recover,
        info,
        version,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};
    use railscope_collectors::sources::devlink::{Device, Info, Reporter, Version, VersionKind};

    fn reporter(name: &str, port: Option<u32>, state: ReporterState) -> Reporter {
        Reporter {
            port,
            name: name.into(),
            state: Some(state),
            errors: Some(3),
            recoveries: Some(2),
            dump_jiffies_ms: Some(4_295_212_345),
            dump_unix_ns: Some(1_796_300_000_500_000_000),
            graceful_period_ms: Some(500),
            auto_recover: Some(true),
            auto_dump: Some(true),
        }
    }

    #[test]
    fn reporters_and_info_become_the_contracts_families() {
        let mut fw = reporter("fw", None, ReporterState::Healthy);
        (fw.graceful_period_ms, fw.auto_recover, fw.dump_unix_ns) = (None, None, None);
        let snapshot = Snapshot {
            devices: vec![
                Device {
                    bus: "pci".into(),
                    name: "0000:18:00.0".into(),
                    pci_address: Some("0000:18:00.0".into()),
                    rdma_devices: vec!["mlx5_0".into()],
                    info: Some(Info {
                        driver: Some("mlx5_core".into()),
                        serial_number: Some("MT2241X01234".into()),
                        board_serial_number: None,
                        versions: vec![Version {
                            kind: VersionKind::Running,
                            name: "fw.version".into(),
                            value: "28.39.1002".into(),
                        }],
                    }),
                    reporters: vec![fw, reporter("tx", Some(65535), ReporterState::Error)],
                },
                Device {
                    bus: "netdevsim".into(),
                    name: "netdevsim1".into(),
                    pci_address: None,
                    rdma_devices: vec![],
                    info: None,
                    reporters: vec![],
                },
            ],
        };
        let text = encode(families(&snapshot), Format::Prometheus);
        for line in [
            r#"railscope_devlink_health_reporter_healthy{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="",reporter="fw"} 1"#,
            r#"railscope_devlink_health_reporter_healthy{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 0"#,
            r#"railscope_devlink_health_reporter_errors_total{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 3"#,
            r#"railscope_devlink_health_reporter_recoveries_total{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 2"#,
            r#"railscope_devlink_health_reporter_last_dump_timestamp_seconds{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 1796300000.5"#,
            r#"railscope_devlink_health_reporter_graceful_period_seconds{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 0.5"#,
            r#"railscope_devlink_health_reporter_auto_recover{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="65535",reporter="tx"} 1"#,
            r#"railscope_devlink_info{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",driver="mlx5_core",serial_number="MT2241X01234",board_serial_number=""} 1"#,
            r#"railscope_devlink_info{devlink="netdevsim/netdevsim1",pci_address="",device="",driver="",serial_number="",board_serial_number=""} 1"#,
            r#"railscope_devlink_version_info{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",kind="running",name="fw.version",version="28.39.1002"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        // fw has no recover op: no graceful period, no auto-recover, no dump stored.
        assert!(!text.contains(r#"graceful_period_seconds{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="",reporter="fw"}"#));
        assert!(!text.contains(r#"last_dump_timestamp_seconds{devlink="pci/0000:18:00.0",pci_address="0000:18:00.0",device="mlx5_0",port="",reporter="fw"}"#));
    }
}
