use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::error::ErrorKind;
use crate::fs::{Fault, FaultFs, Roots};

fn sysfs(tree: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(tree)
        .join("sys")
}

fn source(tree: &str, fs: Arc<FaultFs>) -> Arc<HwmonSource> {
    Arc::new(HwmonSource::new(
        &Roots {
            sysfs: sysfs(tree),
            procfs: PathBuf::from("/nonexistent"),
        },
        fs,
    ))
}

fn collect(src: &Arc<HwmonSource>) -> Report<Snapshot> {
    crate::run::standalone("hwmon", |run| src.collect(run))
}

fn nic<'a>(snapshot: &'a Snapshot, device: &str) -> &'a NicHwmon {
    snapshot
        .nics
        .iter()
        .find(|n| n.rdma_devices == [device])
        .unwrap_or_else(|| panic!("no hwmon for {device}"))
}

#[test]
fn every_connectx_of_the_dgx_has_its_asic_and_module_sensor() {
    let report = collect(&source("h100-cx7-ndr-ib", Arc::new(FaultFs::new())));
    assert_eq!(report.errors, vec![]);
    assert_eq!(report.absent, None);
    let snapshot = report.data.unwrap();
    assert_eq!(snapshot.nics.len(), 8);
    let first = nic(&snapshot, "mlx5_0");
    assert_eq!(first.pci_address, "0000:18:00.0");
    assert_eq!(first.netdevs, ["ibp24s0"]);
    assert_eq!(first.hwmon, "hwmon2");
    assert_eq!(first.chip.as_deref(), Some("mlx5"));
    assert_eq!(
        first.sensors,
        [
            Sensor {
                channel: 1,
                sensor: "asic".to_owned(),
                temperature: Some(65.625),
                highest: Some(70.25),
                critical: Some(105.0),
            },
            Sensor {
                channel: 2,
                sensor: "module0".to_owned(),
                temperature: Some(46.875),
                highest: Some(48.5),
                critical: Some(75.0),
            },
        ]
    );
}

#[test]
fn a_malformed_reading_costs_its_own_series_and_a_missing_threshold_nothing() {
    let report = collect(&source("h100-cx7-ndr-ib-faults", Arc::new(FaultFs::new())));
    let snapshot = report.data.unwrap();
    assert_eq!(snapshot.nics.len(), 8, "every NIC is still there");
    // mlx5_7's module reading is garbage: one parse error naming the file, and only the
    // current temperature of that channel is gone.
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, ErrorKind::Parse);
    assert!(
        report.errors[0]
            .path()
            .unwrap()
            .ends_with("class/hwmon/hwmon9/temp2_input")
    );
    let broken = nic(&snapshot, "mlx5_7");
    assert_eq!(broken.sensors[1].temperature, None);
    assert!(broken.sensors[1].highest.is_some());
    assert_eq!(broken.sensors[1].critical, Some(75.0));
    assert_eq!(broken.sensors[0].temperature.map(|t| t > 0.0), Some(true));
    // mlx5_6's module has no temp2_crit: no threshold, no error, the rest read.
    let unbounded = nic(&snapshot, "mlx5_6");
    assert_eq!(unbounded.sensors[1].critical, None);
    assert!(unbounded.sensors[1].temperature.is_some());
    // mlx5_4's module runs 1.5 degC under its threshold.
    let hot = nic(&snapshot, "mlx5_4");
    assert_eq!(hot.sensors[1].temperature, Some(73.5));
    assert_eq!(hot.sensors[1].critical, Some(75.0));
}

#[test]
fn a_failing_read_costs_that_file_and_enodata_is_no_reading() {
    let dev = sysfs("h100-cx7-ndr-ib").join("class/hwmon");
    let fs = Arc::new(
        FaultFs::new()
            .fault(dev.join("hwmon2/temp1_input"), Fault::Errno(libc::EIO))
            .fault(dev.join("hwmon3/temp2_input"), Fault::Errno(libc::ENODATA)),
    );
    let report = collect(&source("h100-cx7-ndr-ib", fs));
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].errno, Some(libc::EIO));
    let snapshot = report.data.unwrap();
    let failed = nic(&snapshot, "mlx5_0");
    assert_eq!(failed.sensors[0].temperature, None);
    assert_eq!(failed.sensors[0].highest, Some(70.25));
    assert!(failed.sensors[1].temperature.is_some());
    let no_reading = nic(&snapshot, "mlx5_1");
    assert_eq!(no_reading.sensors[1].temperature, None);
    assert!(no_reading.sensors[1].highest.is_some());
}

#[test]
fn thresholds_labels_and_listings_are_read_once_readings_every_time() {
    let fs = Arc::new(FaultFs::new());
    let src = source("h100-cx7-ndr-ib", fs.clone());
    let first = collect(&src);
    assert_eq!(first.errors, vec![]);
    let seen = fs.accessed().len();
    let second = collect(&src);
    assert_eq!(second.data, first.data);
    let again = fs.accessed()[seen..].to_vec();
    let read = |suffix: &str| again.iter().any(|p| p.to_string_lossy().ends_with(suffix));
    for kept in ["_crit", "_label", "hwmon2/name", "0000:18:00.0/hwmon"] {
        assert!(!read(kept), "{kept} was read again");
    }
    for fresh in ["hwmon2/temp1_input", "hwmon9/temp2_highest"] {
        assert!(read(fresh), "{fresh} was not read again");
    }
}

#[test]
fn a_node_without_nic_hwmon_devices_is_absent_not_failed() {
    let report = collect(&source("cx6dx-roce-2port", Arc::new(FaultFs::new())));
    assert_eq!(report.errors, vec![]);
    assert!(report.absent.is_some());
    assert_eq!(report.data.unwrap().nics, vec![]);
}
