//! Reader tests over small trees written in a temporary directory with verbatim kernel text,
//! and [`FaultFs`] for the errnos that plain files cannot produce.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::fs::{Fault, FaultFs, RealFs};

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        Tree {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn sys(&self) -> PathBuf {
        self.dir.path().join("sys")
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.sys().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn symlink(&self, rel: &str, target: &str) {
        let path = self.sys().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// An mlx5 PCI device with one InfiniBand port.
    fn ib_device(&self, name: &str, pci: &str) {
        let dev = format!("devices/pci0000:00/0000:00:01.0/{pci}/infiniband/{name}");
        self.symlink(&format!("class/infiniband/{name}"), &format!("../../{dev}"));
        self.symlink(&format!("{dev}/device"), &format!("../../../{pci}"));
        self.write(
            &format!("devices/pci0000:00/0000:00:01.0/{pci}/numa_node"),
            "1\n",
        );
        self.symlink(
            &format!("devices/pci0000:00/0000:00:01.0/{pci}/driver"),
            "../../../../bus/pci/drivers/mlx5_core",
        );
        let files = [
            ("node_type", "1: CA\n"),
            ("node_guid", "a088:c203:0045:7b10\n"),
            ("sys_image_guid", "a088:c203:0045:7b10\n"),
            ("fw_ver", "28.39.1002\n"),
            ("hca_type", "MT4129\n"),
            ("board_id", "MT_0000000838\n"),
            ("ports/1/state", "4: ACTIVE\n"),
            ("ports/1/phys_state", "5: LinkUp\n"),
            ("ports/1/rate", "400 Gb/sec (4X NDR)\n"),
            ("ports/1/link_layer", "InfiniBand\n"),
            ("ports/1/lid", "0x1a3\n"),
            ("ports/1/sm_lid", "0x1\n"),
            ("ports/1/counters/symbol_error", "0\n"),
            ("ports/1/counters/link_downed", "1\n"),
            ("ports/1/counters/port_rcv_errors", "3\n"),
            ("ports/1/counters/port_xmit_data", "123456789012\n"),
            ("ports/1/counters/port_rcv_data", "98765432109\n"),
            ("ports/1/counters/unicast_xmit_packets", "1000\n"),
            ("ports/1/hw_counters/out_of_buffer", "7\n"),
            ("ports/1/hw_counters/lifespan", "12\n"),
            (
                "ports/1/gids/0",
                "fe80:0000:0000:0000:a088:c203:0045:7b10\n",
            ),
            (
                "ports/1/gids/1",
                "0000:0000:0000:0000:0000:0000:0000:0000\n",
            ),
            ("ports/1/gid_attrs/types/0", "IB/RoCE v1\n"),
        ];
        for (rel, content) in files {
            self.write(&format!("{dev}/{rel}"), content);
        }
    }

    /// An mlx5 RoCE port whose netdev has MTU `mtu`.
    fn roce_device(&self, name: &str, pci: &str, netdev: &str, mtu: u32) {
        let dev = format!("devices/pci0000:00/0000:00:02.0/{pci}/infiniband/{name}");
        self.symlink(&format!("class/infiniband/{name}"), &format!("../../{dev}"));
        self.symlink(&format!("{dev}/device"), &format!("../../../{pci}"));
        self.symlink(
            &format!("devices/pci0000:00/0000:00:02.0/{pci}/driver"),
            "../../../../bus/pci/drivers/mlx5_core",
        );
        let net = format!("devices/pci0000:00/0000:00:02.0/{pci}/net/{netdev}");
        self.write(&format!("{net}/mtu"), &format!("{mtu}\n"));
        self.symlink(&format!("class/net/{netdev}"), &format!("../../{net}"));
        let files = [
            ("node_type", "1: CA\n".to_owned()),
            ("ports/1/state", "4: ACTIVE\n".to_owned()),
            ("ports/1/phys_state", "5: LinkUp\n".to_owned()),
            ("ports/1/rate", "100 Gb/sec (4X EDR)\n".to_owned()),
            ("ports/1/link_layer", "Ethernet\n".to_owned()),
            ("ports/1/lid", "0x0\n".to_owned()),
            (
                "ports/1/gids/0",
                "fe80:0000:0000:0000:0ac4:7aff:fe12:3456\n".to_owned(),
            ),
            (
                "ports/1/gids/1",
                "fe80:0000:0000:0000:0ac4:7aff:fe12:3456\n".to_owned(),
            ),
            (
                "ports/1/gids/2",
                "0000:0000:0000:0000:0000:0000:0000:0000\n".to_owned(),
            ),
            (
                "ports/1/gids/3",
                "0000:0000:0000:0000:0000:ffff:0a0a:0a01\n".to_owned(),
            ),
            ("ports/1/gid_attrs/types/0", "IB/RoCE v1\n".to_owned()),
            ("ports/1/gid_attrs/types/1", "RoCE v2\n".to_owned()),
            ("ports/1/gid_attrs/types/3", "RoCE v2\n".to_owned()),
            ("ports/1/gid_attrs/ndevs/0", format!("{netdev}\n")),
            ("ports/1/gid_attrs/ndevs/1", format!("{netdev}\n")),
            ("ports/1/gid_attrs/ndevs/3", format!("{netdev}\n")),
        ];
        for (rel, content) in files {
            self.write(&format!("{dev}/{rel}"), &content);
        }
    }

    fn dev_path(&self, name: &str, rel: &str) -> PathBuf {
        self.sys().join("class/infiniband").join(name).join(rel)
    }
}

fn source(tree: &Tree, fs: Arc<dyn Fs>) -> InfinibandSource {
    let roots = Roots {
        sysfs: tree.sys(),
        procfs: PathBuf::from("/nonexistent"),
    };
    InfinibandSource::new(&roots, fs, None, None)
}

fn snapshot(report: &Report<Snapshot>) -> &Snapshot {
    report.data.as_ref().expect("data")
}

fn counter<'a>(port: &'a Port, name: &str) -> Option<&'a PmaCounter> {
    port.pma.iter().find(|c| &*c.name == name)
}

#[test]
fn reads_an_infiniband_device() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    let report = source(&tree, Arc::new(RealFs)).read();
    assert_eq!(report.errors, vec![]);
    let dev = &snapshot(&report).devices[0];
    assert_eq!(dev.name, "mlx5_0");
    assert_eq!(
        dev.node_type,
        Some(Enumerated {
            value: 1,
            name: "CA".into()
        })
    );
    assert_eq!(dev.fw_ver.as_deref(), Some("28.39.1002"));
    assert_eq!(dev.hca_type.as_deref(), Some("MT4129"));
    assert_eq!(dev.pci_address.as_deref(), Some("0000:18:00.0"));
    assert_eq!(dev.numa_node, Some(1));
    assert_eq!(dev.driver.as_deref(), Some("mlx5_core"));
    let port = &dev.ports[0];
    assert_eq!(port.number, 1);
    assert_eq!(port.state.as_ref().unwrap().value, 4);
    assert_eq!(port.phys_state.as_ref().unwrap().name, "LinkUp");
    assert_eq!(port.rate.as_ref().unwrap().bits_per_second, 400_000_000_000);
    assert_eq!((port.lid, port.sm_lid), (Some(0x1a3), Some(1)));
    // The extended group is present (unicast file), so data counters are 64-bit.
    assert_eq!(counter(port, "port_xmit_data").unwrap().bits, Some(64));
    assert_eq!(counter(port, "link_downed").unwrap().bits, Some(8));
    assert_eq!(
        port.hw_counters,
        vec![HwCounter {
            name: "out_of_buffer".into(),
            value: 7
        }]
    );
    assert_eq!(port.hw_counters_lifespan_ms, Some(12));
    let gids = port.gids.as_ref().unwrap();
    assert_eq!(gids.len(), 1, "the zero GID is an empty slot");
    assert_eq!(gids[0].gid_type.as_deref(), Some("IB/RoCE v1"));
    assert_eq!(gids[0].netdev, None);
    assert_eq!(port.netdev, None, "InfiniBand ports have no RoCE netdev");
    assert_eq!(port.active_mtu, None);
}

#[test]
fn roce_active_mtu_follows_the_netdev_mtu() {
    let tree = Tree::new();
    tree.roce_device("mlx5_0", "0000:3b:00.0", "ens1f0np0", 1500);
    tree.roce_device("mlx5_1", "0000:3b:00.1", "ens1f1np1", 4200);
    let report = source(&tree, Arc::new(RealFs)).read();
    assert_eq!(report.errors, vec![]);
    let devices = &snapshot(&report).devices;
    let p0 = &devices[0].ports[0];
    let p1 = &devices[1].ports[0];
    assert_eq!(
        (p0.netdev.as_deref(), p0.netdev_mtu, p0.active_mtu),
        (Some("ens1f0np0"), Some(1500), Some(1024))
    );
    assert_eq!(
        (p1.netdev.as_deref(), p1.netdev_mtu, p1.active_mtu),
        (Some("ens1f1np1"), Some(4200), Some(4096))
    );
    assert_eq!(p0.mtu_rule, Some(MtuRule::Iboe));
    let gids = p0.gids.as_ref().unwrap();
    assert_eq!(gids.iter().map(|g| g.index).collect::<Vec<_>>(), [0, 1, 3]);
    assert_eq!(gids[2].gid_type.as_deref(), Some("RoCE v2"));
    assert_eq!(p0.lid, None, "lid is only read on InfiniBand ports");
}

#[test]
fn einval_on_a_pma_counter_costs_only_that_counter() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    let bad = tree.dev_path("mlx5_0", "ports/1/counters/port_rcv_errors");
    let fs = FaultFs::new().fault(bad.clone(), Fault::Errno(libc::EINVAL));
    let report = source(&tree, Arc::new(fs)).read();
    assert_eq!(report.errors.len(), 1);
    let err = &report.errors[0];
    assert_eq!(
        (err.path(), err.errno, err.kind),
        (Some(bad.as_path()), Some(libc::EINVAL), ErrorKind::Io)
    );
    assert_eq!(err.device.as_deref(), Some("mlx5_0"));
    assert!(err.to_string().contains("EINVAL"), "{err}");
    let devices = &snapshot(&report).devices;
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0].errors, 1);
    assert_eq!(devices[1].errors, 0);
    let port = &devices[0].ports[0];
    assert!(counter(port, "port_rcv_errors").is_none());
    assert_eq!(counter(port, "link_downed").unwrap().value, 1);
    assert_eq!(port.state.as_ref().unwrap().value, 4);
    assert!(counter(&devices[1].ports[0], "port_rcv_errors").is_some());
}

#[test]
fn no_pma_and_garbage_are_reported_per_file() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.write(
        "class/infiniband/mlx5_0/ports/1/counters/symbol_error",
        "N/A (no PMA)\n",
    );
    tree.write(
        "class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer",
        "-1\n",
    );
    tree.write("class/infiniband/mlx5_0/ports/1/rate", "fast\n");
    let report = source(&tree, Arc::new(RealFs)).read();
    let kinds: Vec<_> = report
        .errors
        .iter()
        .map(|e| {
            (
                e.path()
                    .and_then(|p| p.file_name())
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned(),
                e.kind,
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("rate".to_owned(), ErrorKind::Parse),
            ("symbol_error".to_owned(), ErrorKind::Unavailable),
            ("out_of_buffer".to_owned(), ErrorKind::Parse),
        ]
    );
    let port = &snapshot(&report).devices[0].ports[0];
    assert_eq!(port.rate, None);
    assert!(counter(port, "symbol_error").is_none());
    assert!(port.hw_counters.is_empty());
    assert_eq!(port.hw_counters_lifespan_ms, Some(12));
    assert_eq!(counter(port, "port_rcv_errors").unwrap().value, 3);
}

#[test]
fn excluded_devices_are_never_read() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    tree.ib_device("mlx5_10", "0000:3a:00.0");
    let fs = Arc::new(FaultFs::new());
    let roots = Roots {
        sysfs: tree.sys(),
        procfs: PathBuf::from("/nonexistent"),
    };
    let src = InfinibandSource::new(
        &roots,
        fs.clone(),
        None,
        Some(regex::Regex::new("^mlx5_1$").unwrap()),
    );
    let report = src.read();
    let names: Vec<_> = snapshot(&report)
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["mlx5_0", "mlx5_10"]);
    let excluded = tree.sys().join("class/infiniband/mlx5_1");
    assert!(
        fs.accessed().iter().all(|p| !p.starts_with(&excluded)),
        "an excluded device was read"
    );

    let include = InfinibandSource::new(
        &roots,
        Arc::new(RealFs),
        Some(regex::Regex::new("mlx5_1").unwrap()),
        None,
    );
    let names: Vec<_> = snapshot(&include.read())
        .devices
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(
        names,
        ["mlx5_1", "mlx5_10"],
        "include patterns are unanchored, like node_exporter's"
    );
}

#[test]
fn a_device_that_vanishes_mid_collection_is_dropped_with_one_error() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    let real_dir = tree
        .sys()
        .join("devices/pci0000:00/0000:00:01.0/0000:18:00.0/infiniband/mlx5_0");
    let trigger = tree.dev_path("mlx5_0", "ports");
    let fs = FaultFs::new().hook(move |path: &Path| {
        if path == trigger {
            let _ = std::fs::remove_dir_all(&real_dir);
        }
    });
    let report = source(&tree, Arc::new(fs)).read();
    let devices = &snapshot(&report).devices;
    assert_eq!(
        devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["mlx5_1"]
    );
    assert_eq!(devices[0].ports[0].state.as_ref().unwrap().value, 4);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, ErrorKind::Vanished);
    assert_eq!(report.errors[0].device.as_deref(), Some("mlx5_0"));
}

#[test]
fn a_blocked_device_costs_only_itself_and_is_not_reported_vanished() {
    use crate::fs::GuardedFs;
    use crate::run::{Deadline, Run, Work};
    use std::time::{Duration, Instant};
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    // mlx5_0's state read hangs past the deadline, like a read stuck in the driver.
    let stuck = tree.dev_path("mlx5_0", "ports/1/state");
    let inner = FaultFs::new().hook(move |path: &Path| {
        if path == stuck {
            std::thread::sleep(Duration::from_millis(800));
        }
    });
    let roots = Roots {
        sysfs: tree.sys(),
        procfs: PathBuf::from("/nonexistent"),
    };
    let fs = Arc::new(GuardedFs::new(Arc::new(inner), roots));
    let src = source(&tree, fs.clone());
    let work = Work::new("infiniband", Some(fs.clone()));
    let read = || {
        let deadline = Deadline::new(Instant::now() + Duration::from_millis(400));
        let run = Run::new(&deadline, &work);
        let mut report = src.read_in(&run);
        report.errors.extend(run.into_errors());
        report
    };
    for round in 0..2 {
        let start = Instant::now();
        let report = read();
        assert!(
            start.elapsed() < Duration::from_millis(390),
            "round {round}"
        );
        let devices = &snapshot(&report).devices;
        assert_eq!(
            devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["mlx5_1"],
            "round {round}: the blocked device is skipped, the other read in full"
        );
        assert_eq!(devices[0].ports[0].state.as_ref().unwrap().value, 4);
        assert_eq!(devices[0].errors, 0);
        if round == 0 {
            // One timeout, naming the read that blocked; not reported as vanished (the
            // guard cannot say whether its directory still exists).
            assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
            assert_eq!(report.errors[0].kind, ErrorKind::Timeout);
            assert_eq!(report.errors[0].device.as_deref(), Some("mlx5_0"));
            assert!(
                report.errors[0]
                    .path()
                    .is_some_and(|p| p.ends_with("mlx5_0/ports/1/state"))
            );
            assert_eq!(fs.blocked().len(), 1);
        } else {
            assert!(
                report.errors.is_empty(),
                "counted once: {:?}",
                report.errors
            );
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    while !work.busy().is_empty() {
        assert!(Instant::now() < until, "the blocked read never returned");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(fs.blocked().is_empty());
}

#[test]
fn enodev_on_every_file_of_one_device_leaves_the_other_intact() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    let mut fs = FaultFs::new();
    for rel in [
        "node_type",
        "fw_ver",
        "ports/1/state",
        "ports/1/rate",
        "ports/1/counters",
        "ports/1/gids",
    ] {
        fs = fs.fault(tree.dev_path("mlx5_0", rel), Fault::Errno(libc::ENODEV));
    }
    let report = source(&tree, Arc::new(fs)).read();
    assert_eq!(report.errors.len(), 6);
    assert!(
        report
            .errors
            .iter()
            .all(|e| e.errno == Some(libc::ENODEV) && e.device.as_deref() == Some("mlx5_0"))
    );
    let devices = &snapshot(&report).devices;
    assert_eq!(devices.len(), 2);
    assert_eq!(
        devices[0].ports[0].phys_state.as_ref().unwrap().value,
        5,
        "the down port's other files still read"
    );
    assert_eq!(devices[1].errors, 0);
    assert_eq!(devices[1].ports[0].pma.len(), 6);
}

#[test]
fn gid_attribute_einval_is_the_kernels_empty_slot_answer_not_an_error() {
    let tree = Tree::new();
    tree.roce_device("mlx5_0", "0000:3b:00.0", "ens1f0np0", 9000);
    let fs = FaultFs::new()
        .fault(
            tree.dev_path("mlx5_0", "ports/1/gid_attrs/types/3"),
            Fault::Errno(libc::EINVAL),
        )
        .fault(
            tree.dev_path("mlx5_0", "ports/1/gid_attrs/ndevs/3"),
            Fault::Errno(libc::EINVAL),
        )
        .fault(
            tree.dev_path("mlx5_0", "ports/1/gid_attrs/ndevs/1"),
            Fault::Errno(libc::EIO),
        );
    let report = source(&tree, Arc::new(fs)).read();
    assert_eq!(
        report.errors.len(),
        1,
        "only EIO is an error: {:?}",
        report.errors
    );
    assert_eq!(report.errors[0].errno, Some(libc::EIO));
    let gids = snapshot(&report).devices[0].ports[0].gids.clone().unwrap();
    assert_eq!(
        gids[2],
        Gid {
            index: 3,
            gid: "0000:0000:0000:0000:0000:ffff:0a0a:0a01".into(),
            gid_type: None,
            netdev: None
        }
    );
}

#[test]
fn missing_subsystem_is_absent_not_an_error() {
    let tree = Tree::new();
    std::fs::create_dir_all(tree.sys()).unwrap();
    let report = source(&tree, Arc::new(RealFs)).read();
    assert!(report.absent.is_some());
    assert!(report.errors.is_empty());
    assert!(snapshot(&report).devices.is_empty());
}

#[test]
fn unreadable_class_directory_fails_the_source() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    let fs = FaultFs::new().fault(
        tree.sys().join("class/infiniband"),
        Fault::Errno(libc::EACCES),
    );
    let report = source(&tree, Arc::new(fs)).read();
    assert!(report.data.is_none());
    assert_eq!(report.errors[0].errno, Some(libc::EACCES));
}

#[test]
fn saturated_counters_and_legacy_counters_ext() {
    let tree = Tree::new();
    tree.ib_device("mlx4_0", "0000:04:00.0");
    let base = "class/infiniband/mlx4_0/ports/1";
    std::fs::remove_file(tree.sys().join(base).join("counters/unicast_xmit_packets")).unwrap();
    tree.write(&format!("{base}/counters/port_xmit_data"), "4294967295\n");
    tree.write(&format!("{base}/counters/port_xmit_wait"), "4294967295\n");
    tree.write(&format!("{base}/counters/link_downed"), "255\n");
    tree.write(&format!("{base}/counters/symbol_error"), "65535\n");
    tree.write(&format!("{base}/counters/port_rcv_discards"), "12\n");
    tree.write(
        &format!("{base}/counters_ext/port_xmit_data_64"),
        "81985529216486895\n",
    );
    let report = source(&tree, Arc::new(RealFs)).read();
    assert_eq!(report.errors, vec![]);
    let port = &snapshot(&report).devices[0].ports[0];
    let xmit = counter(port, "port_xmit_data").unwrap();
    assert_eq!(
        (xmit.value, xmit.bits, xmit.dir),
        (81985529216486895, Some(64), PmaDir::CountersExt)
    );
    assert!(!xmit.saturated());
    // Without the extended group the base data counter is 32-bit.
    let rcv = counter(port, "port_rcv_data").unwrap();
    assert_eq!(
        rcv.bits,
        Some(64),
        "98765432109 does not fit in 32 bits, so the counter is 64-bit"
    );
    for name in ["port_xmit_wait", "link_downed", "symbol_error"] {
        assert!(counter(port, name).unwrap().saturated(), "{name}");
    }
    assert!(!counter(port, "port_rcv_errors").unwrap().saturated());
    let unknown = counter(port, "port_rcv_discards").unwrap();
    assert_eq!((unknown.value, unknown.bits), (12, None));
}

/// An mlx4 port on an old OFED kernel, as node_exporter's own fixture has it: the base
/// group's data and packet counters read 0 (with the extended attributes present, so they
/// look 64-bit), the legacy `counters_ext/*_64` files count. The counting ones are exported.
#[test]
fn legacy_counters_ext_replace_base_counters_that_do_not_count() {
    let tree = Tree::new();
    tree.ib_device("mlx4_0", "0000:04:00.0");
    let base = "class/infiniband/mlx4_0/ports/1";
    for name in [
        "port_rcv_data",
        "port_xmit_data",
        "port_rcv_packets",
        "port_xmit_packets",
        "unicast_rcv_packets",
        "unicast_xmit_packets",
        "multicast_rcv_packets",
        "multicast_xmit_packets",
    ] {
        tree.write(&format!("{base}/counters/{name}"), "0\n");
    }
    for (file, value) in [
        ("port_rcv_data_64", "7140831478"),
        ("port_xmit_data_64", "6911239117"),
        ("port_rcv_packets_64", "62394871"),
        ("port_xmit_packets_64", "0"),
        ("port_unicast_rcv_packets", "62388432"),
        ("port_unicast_xmit_packets", "61047381"),
        ("port_multicast_rcv_packets", "6439"),
        ("port_multicast_xmit_packets", "0"),
    ] {
        tree.write(
            &format!("{base}/counters_ext/{file}"),
            &format!("{value}\n"),
        );
    }
    let report = source(&tree, Arc::new(RealFs)).read();
    assert_eq!(report.errors, vec![]);
    let port = &snapshot(&report).devices[0].ports[0];
    for (name, value, dir) in [
        ("port_rcv_data", 7140831478, PmaDir::CountersExt),
        ("port_xmit_data", 6911239117, PmaDir::CountersExt),
        ("port_rcv_packets", 62394871, PmaDir::CountersExt),
        ("unicast_rcv_packets", 62388432, PmaDir::CountersExt),
        ("unicast_xmit_packets", 61047381, PmaDir::CountersExt),
        ("multicast_rcv_packets", 6439, PmaDir::CountersExt),
        // Both read 0: the base counter stays (a legacy 0 does not count either).
        ("port_xmit_packets", 0, PmaDir::Counters),
        ("multicast_xmit_packets", 0, PmaDir::Counters),
    ] {
        let c = counter(port, name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!((c.value, c.dir, c.bits), (value, dir, Some(64)), "{name}");
    }
    // Each counter once.
    let names: Vec<_> = port.pma.iter().map(|c| &*c.name).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(names.len(), unique.len(), "{names:?}");
}

#[test]
fn software_devices_without_pci_function() {
    let tree = Tree::new();
    let dev = "devices/virtual/infiniband/rxe0";
    tree.symlink("class/infiniband/rxe0", &format!("../../{dev}"));
    tree.write(&format!("{dev}/fw_ver"), "\n");
    tree.write(&format!("{dev}/parent"), "veth0\n");
    tree.write(&format!("{dev}/node_type"), "1: CA\n");
    tree.write(&format!("{dev}/ports/1/link_layer"), "Ethernet\n");
    tree.write(&format!("{dev}/ports/1/state"), "1: DOWN\n");
    tree.write(&format!("{dev}/ports/1/phys_state"), "3: Disabled\n");
    tree.write(&format!("{dev}/ports/1/rate"), "10 Gb/sec (1X FDR10)\n");
    tree.write("devices/virtual/net/veth0/mtu", "4200\n");
    tree.symlink("class/net/veth0", "../../devices/virtual/net/veth0");
    let report = source(&tree, Arc::new(RealFs)).read();
    assert_eq!(report.errors, vec![]);
    let dev = &snapshot(&report).devices[0];
    assert_eq!(
        (
            dev.fw_ver.as_deref(),
            dev.pci_address.as_deref(),
            dev.driver.as_deref()
        ),
        (None, None, Some("rdma_rxe"))
    );
    let port = &dev.ports[0];
    assert_eq!(
        port.state.as_ref().unwrap().name,
        "DOWN",
        "down ports stay visible"
    );
    assert_eq!(
        (port.netdev.as_deref(), port.active_mtu, port.mtu_rule),
        (Some("veth0"), Some(4096), Some(MtuRule::Rxe))
    );
}

#[test]
fn gid_changes_are_seen_the_next_scrape_with_few_reads_in_between() {
    let tree = Tree::new();
    tree.roce_device("mlx5_0", "0000:18:00.0", "ens1f0np0", 4200);
    // 255 slots, as on mlx5 RoCE; all but 0, 1 and 3 free.
    for i in 4..255 {
        tree.write(
            &format!(
                "devices/pci0000:00/0000:00:02.0/0000:18:00.0/infiniband/mlx5_0/ports/1/gids/{i}"
            ),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        );
    }
    let fs = Arc::new(FaultFs::new());
    let src = source(&tree, fs.clone());
    let gid_reads = || {
        fs.accessed()
            .iter()
            .filter(|p| p.to_string_lossy().contains("/gids/"))
            .count()
    };
    let indexes = |report: &Report<Snapshot>| -> Vec<u32> {
        snapshot(report).devices[0].ports[0]
            .gids
            .iter()
            .flatten()
            .map(|g| g.index)
            .collect()
    };
    let first = src.read();
    assert_eq!(indexes(&first), [0, 1, 3]);
    let full = gid_reads();
    assert!(full >= 255, "the first read reads every slot: {full}");
    let second = src.read();
    assert_eq!(indexes(&second), [0, 1, 3]);
    let probe = gid_reads() - full;
    assert!(
        probe <= 3 + GID_FREE_PROBES,
        "in between, occupied slots and a few free ones: {probe}"
    );
    // A GID added in the lowest free slot (2) is seen the next scrape.
    tree.write(
        "devices/pci0000:00/0000:00:02.0/0000:18:00.0/infiniband/mlx5_0/ports/1/gids/2",
        "0000:0000:0000:0000:0000:ffff:0a0a:0a02\n",
    );
    assert_eq!(indexes(&src.read()), [0, 1, 2, 3]);
    // And one removed.
    tree.write(
        "devices/pci0000:00/0000:00:02.0/0000:18:00.0/infiniband/mlx5_0/ports/1/gids/3",
        "0000:0000:0000:0000:0000:0000:0000:0000\n",
    );
    assert_eq!(indexes(&src.read()), [0, 1, 2]);
}

#[test]
fn what_does_not_change_is_read_once_until_a_read_fails() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    let fs = Arc::new(FaultFs::new());
    let src = source(&tree, fs.clone());
    let first = src.read();
    assert_eq!(first.errors, vec![]);
    let seen = fs.accessed().len();
    let second = src.read();
    assert_eq!(snapshot(&second), snapshot(&first));
    let again: Vec<PathBuf> = fs.accessed()[seen..].to_vec();
    let read = |rel: &str| again.contains(&tree.dev_path("mlx5_0", rel));
    for kept in [
        "fw_ver",
        "node_guid",
        "board_id",
        "device",
        "ports",
        "ports/1/link_layer",
        "ports/1/counters",
        "ports/1/hw_counters",
    ] {
        assert!(!read(kept), "{kept} was read again: {again:?}");
    }
    for fresh in [
        "ports/1/state",
        "ports/1/rate",
        "ports/1/counters/port_xmit_data",
        "ports/1/hw_counters/out_of_buffer",
        "ports/1/gids/0",
    ] {
        assert!(read(fresh), "{fresh} was not read again: {again:?}");
    }

    // A new firmware is not looked for while nothing says the device changed...
    tree.write(
        "devices/pci0000:00/0000:00:01.0/0000:18:00.0/infiniband/mlx5_0/fw_ver",
        "28.40.1000\n",
    );
    let fw = |report: &Report<Snapshot>| snapshot(report).devices[0].fw_ver.clone();
    assert_eq!(fw(&src.read()).as_deref(), Some("28.39.1002"));
    // ...but a read that fails makes the next collection read everything again.
    let rate = "devices/pci0000:00/0000:00:01.0/0000:18:00.0/infiniband/mlx5_0/ports/1/rate";
    tree.write(rate, "garbage\n");
    assert_eq!(src.read().errors.len(), 1);
    tree.write(rate, "400 Gb/sec (4X NDR)\n");
    let after = src.read();
    assert_eq!(after.errors, vec![]);
    assert_eq!(fw(&after).as_deref(), Some("28.40.1000"));
}

#[test]
fn a_device_whose_name_is_gone_is_reported_vanished_though_its_layout_is_known() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    tree.ib_device("mlx5_1", "0000:2a:00.0");
    let src = source(&tree, Arc::new(RealFs));
    assert_eq!(snapshot(&src.read()).devices.len(), 2);
    // The class link goes while the directory listing still names it (the order in which
    // the kernel removes a device): the device is gone, not half-read.
    let fs = FaultFs::new().hook({
        let link = tree.sys().join("class/infiniband/mlx5_1");
        let listing = tree.sys().join("class/infiniband");
        move |path: &Path| {
            if path != listing && link.exists() {
                std::fs::remove_file(&link).unwrap();
            }
        }
    });
    let src2 = InfinibandSource {
        fs: Arc::new(fs),
        ..src.clone()
    };
    let report = src2.read();
    let names: Vec<_> = snapshot(&report).devices.iter().map(|d| &d.name).collect();
    assert_eq!(names, ["mlx5_0"]);
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.kind == ErrorKind::Vanished && e.device.as_deref() == Some("mlx5_1")),
        "{:?}",
        report.errors
    );
}

/// A file system whose chosen files refuse reads with `EINVAL` while they are in `failing`,
/// counting the reads that reach it.
#[derive(Debug, Default)]
struct Refusing {
    failing: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    reads: std::sync::Mutex<std::collections::HashMap<PathBuf, usize>>,
}

impl Refusing {
    fn reads(&self, path: &Path) -> usize {
        self.reads.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

impl Fs for Refusing {
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        *self
            .reads
            .lock()
            .unwrap()
            .entry(path.to_path_buf())
            .or_default() += 1;
        if self.failing.lock().unwrap().contains(path) {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        RealFs.read(path)
    }
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<crate::fs::DirEntry>> {
        RealFs.read_dir(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        RealFs.read_link(path)
    }
    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        RealFs.canonicalize(path)
    }
}

/// A counter the driver refuses (as ConnectX limited PFs refuse some attributes, logging an
/// ACCESS_REG error at every read): the first refusal is an error; then the file is not read
/// again while it backs off, and costs only its own series; a retry refused again is no new
/// error; once it answers, it is read and exported again.
#[test]
fn a_refused_counter_is_not_read_again_while_it_backs_off() {
    let tree = Tree::new();
    tree.ib_device("mlx5_0", "0000:18:00.0");
    let file = tree
        .sys()
        .join("class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors");
    let inner = Arc::new(Refusing::default());
    inner.failing.lock().unwrap().insert(file.clone());
    let roots = Roots {
        sysfs: tree.sys(),
        procfs: PathBuf::from("/nonexistent"),
    };
    let guard = Arc::new(crate::fs::GuardedFs::new(
        Arc::clone(&inner) as Arc<dyn Fs>,
        roots,
    ));
    let src = source(&tree, Arc::clone(&guard) as Arc<dyn Fs>);
    let kinds = |report: &Report<Snapshot>| -> Vec<(ErrorKind, Option<i32>)> {
        report.errors.iter().map(|e| (e.kind, e.errno)).collect()
    };

    // First scrape: the refusal is an ordinary error, counted, and only its series is gone.
    let report = src.read();
    assert_eq!(kinds(&report), vec![(ErrorKind::Io, Some(libc::EINVAL))]);
    let port = &snapshot(&report).devices[0].ports[0];
    assert!(counter(port, "port_rcv_errors").is_none());
    assert!(counter(port, "symbol_error").is_some());
    assert_eq!(inner.reads(&file), 1);
    assert_eq!(guard.refused_files(), 1);

    // While it backs off: not read at all, a refusal that is not counted.
    for _ in 0..3 {
        let report = src.read();
        assert_eq!(kinds(&report), vec![(ErrorKind::Refused, None)]);
        assert!(counter(&snapshot(&report).devices[0].ports[0], "symbol_error").is_some());
    }
    assert_eq!(inner.reads(&file), 1, "read again during its back-off");

    // The back-off ends: one retry, refused again, still not a new error.
    guard.expire_refusals();
    let report = src.read();
    assert_eq!(inner.reads(&file), 2);
    assert_eq!(kinds(&report), vec![(ErrorKind::Refused, None)]);
    let _ = src.read();
    assert_eq!(inner.reads(&file), 2, "retried before its doubled back-off");

    // It answers again: read, exported, forgotten.
    inner.failing.lock().unwrap().clear();
    guard.expire_refusals();
    let report = src.read();
    assert_eq!(kinds(&report), vec![]);
    let port = &snapshot(&report).devices[0].ports[0];
    assert_eq!(counter(port, "port_rcv_errors").map(|c| c.value), Some(3));
    assert_eq!(guard.refused_files(), 0);
    let _ = src.read();
    assert_eq!(inner.reads(&file), 4);
}
