//! Decoding on kernel-shaped bytes, and the live kernel's (empty) devlink.

use std::sync::Arc;

use super::wire::{self, *};
use super::*;
use crate::fs::RealFs;
use crate::netlink::testing::{cstr, datagram, message, nla};
use crate::netlink::{NLM_F_MULTI, NLMSG_DONE, messages};
use crate::run::standalone;
use std::time::Duration;

const FAM: u16 = 0x14;

use crate::hexfixture::hex;

macro_rules! fixture {
    ($name:literal) => {
        hex(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/devlink/",
            $name
        )))
    };
}

fn genl(cmd: u8, flags: u16, seq: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![cmd, 1, 0, 0];
    body.extend(attrs.concat());
    message(FAM, flags, seq, &body)
}

/// A nest as devlink writes it: `nla_nest_start_noflag`, no `NLA_F_NESTED`.
fn nest(ty: u16, children: &[Vec<u8>]) -> Vec<u8> {
    nla(ty, &children.concat())
}

fn handle_attrs(bus: &str, dev: &str) -> Vec<Vec<u8>> {
    vec![
        nla(ATTR_BUS_NAME, &cstr(bus)),
        nla(ATTR_DEV_NAME, &cstr(dev)),
    ]
}

/// An mlx5 port reporter as `devlink_nl_health_reporter_fill()` writes it: `tx` of port
/// 65535 (mlx5's uplink port index), in error, graceful period 500 ms, no dump stored.
fn mlx5_tx(seq: u32) -> Vec<u8> {
    let mut attrs = handle_attrs("pci", "0000:18:00.0");
    attrs.push(nla(ATTR_PORT_INDEX, &65535u32.to_ne_bytes()));
    attrs.push(nest(
        ATTR_HEALTH_REPORTER,
        &[
            nla(ATTR_HEALTH_REPORTER_NAME, &cstr("tx")),
            nla(ATTR_HEALTH_REPORTER_STATE, &[1]),
            nla(ATTR_HEALTH_REPORTER_ERR_COUNT, &3u64.to_ne_bytes()),
            nla(ATTR_HEALTH_REPORTER_RECOVER_COUNT, &2u64.to_ne_bytes()),
            nla(ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD, &500u64.to_ne_bytes()),
            nla(ATTR_HEALTH_REPORTER_AUTO_RECOVER, &[1]),
            nla(ATTR_HEALTH_REPORTER_AUTO_DUMP, &[1]),
        ],
    ));
    genl(CMD_HEALTH_REPORTER_GET, NLM_F_MULTI, seq, &attrs)
}

#[test]
fn requests_are_laid_out_as_the_kernel_reads_them() {
    let dump = wire::encode_dump(FAM, CMD_HEALTH_REPORTER_GET, 5);
    let m = messages(&dump).unwrap()[0];
    assert_eq!((m.ty, m.flags, m.seq), (FAM, 0x301, 5));
    assert_eq!(m.payload, &[CMD_HEALTH_REPORTER_GET, 1, 0, 0]);
    let info = wire::encode_info_get(
        FAM,
        &Handle {
            bus: "pci".into(),
            name: "0000:18:00.0".into(),
        },
        6,
    );
    let m = messages(&info).unwrap()[0];
    assert_eq!((m.ty, m.flags), (FAM, 0x1), "a doit: no NLM_F_DUMP");
    assert_eq!(m.payload[0], CMD_INFO_GET);
    let attrs = crate::netlink::attributes(&m.payload[4..]).unwrap();
    assert_eq!(attrs[0], (ATTR_BUS_NAME, &b"pci\0"[..]));
    assert_eq!(attrs[1].0, ATTR_DEV_NAME);
    assert_eq!(crate::netlink::c_string(attrs[1].1), b"0000:18:00.0");
}

#[cfg(target_endian = "little")]
#[test]
fn the_netdevsim_dump_gives_both_reporters_and_the_dummys_recovery() {
    let bytes = fixture!("netdevsim-health-dump.hex");
    let all = messages(&bytes).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[2].done_errno(), Some(0));
    let (h, empty) = wire::decode_reporter(&all[0]).unwrap();
    assert_eq!(h.to_string(), "netdevsim/netdevsim1");
    assert_eq!(empty.name, "empty");
    assert_eq!(empty.port, None);
    assert_eq!(empty.state, Some(ReporterState::Healthy));
    assert_eq!((empty.errors, empty.recoveries), (Some(0), Some(0)));
    // No recover op: no graceful period, no auto-recover; never dumped: no timestamps.
    assert_eq!((empty.graceful_period_ms, empty.auto_recover), (None, None));
    assert_eq!((empty.dump_jiffies_ms, empty.dump_unix_ns), (None, None));
    assert_eq!(empty.auto_dump, Some(true));
    let (_, dummy) = wire::decode_reporter(&all[1]).unwrap();
    assert_eq!(dummy.name, "dummy");
    assert_eq!(dummy.state, Some(ReporterState::Healthy));
    assert_eq!((dummy.errors, dummy.recoveries), (Some(1), Some(1)));
    assert_eq!(dummy.graceful_period_ms, Some(0));
    assert_eq!(dummy.auto_recover, Some(true));
    assert_eq!(dummy.dump_jiffies_ms, Some(4_295_212_345));
    assert_eq!(dummy.dump_unix_ns, Some(1_796_300_000_123_456_789));
}

#[cfg(target_endian = "little")]
#[test]
fn the_netdevsim_info_gives_driver_and_versions() {
    let bytes = fixture!("netdevsim-info.hex");
    let m = messages(&bytes).unwrap()[0];
    let (h, info) = wire::decode_info(&m).unwrap();
    assert_eq!(h.to_string(), "netdevsim/netdevsim1");
    assert_eq!(info.driver.as_deref(), Some("netdevsim"));
    assert_eq!(info.serial_number, None);
    let v: Vec<_> = info
        .versions
        .iter()
        .map(|v| (v.kind.as_str(), v.name.as_str(), v.value.as_str()))
        .collect();
    assert_eq!(
        v,
        [
            ("stored", "fw.mgmt", "10.20.30"),
            ("running", "fw.mgmt", "10.20.30"),
            ("running", "fw", "11.22.33")
        ]
    );
}

#[cfg(target_endian = "little")]
#[test]
fn a_dump_that_fails_after_one_instance_keeps_it_and_says_eio() {
    let bytes = fixture!("get-dump-then-eio.hex");
    let all = messages(&bytes).unwrap();
    assert_eq!(all.len(), 2);
    let h = wire::decode_instance(&all[0]).unwrap();
    assert_eq!(h.to_string(), "pci/0000:18:00.0");
    assert_eq!(all[1].done_errno(), Some(libc::EIO));
}

#[test]
fn a_multi_message_dump_of_device_and_port_reporters() {
    let mut fw_fatal = handle_attrs("pci", "0000:18:00.0");
    fw_fatal.push(nest(
        ATTR_HEALTH_REPORTER,
        &[
            nla(ATTR_HEALTH_REPORTER_NAME, &cstr("fw_fatal")),
            nla(ATTR_HEALTH_REPORTER_STATE, &[0]),
            nla(ATTR_HEALTH_REPORTER_ERR_COUNT, &0u64.to_ne_bytes()),
            nla(ATTR_HEALTH_REPORTER_RECOVER_COUNT, &0u64.to_ne_bytes()),
            nla(
                ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD,
                &60_000u64.to_ne_bytes(),
            ),
            // DEVLINK_ATTR_PAD before a u64, as architectures without efficient unaligned
            // access write it, and an attribute this build does not know.
            nla(ATTR_PAD, &[]),
            nla(ATTR_HEALTH_REPORTER_AUTO_RECOVER, &[1]),
            nla(200, &[9, 9, 9, 9]),
        ],
    ));
    let dgram = datagram(&[
        genl(CMD_HEALTH_REPORTER_GET, NLM_F_MULTI, 9, &fw_fatal),
        mlx5_tx(9),
        message(NLMSG_DONE, NLM_F_MULTI, 9, &0i32.to_ne_bytes()),
    ]);
    let all = messages(&dgram).unwrap();
    let (h, r) = wire::decode_reporter(&all[0]).unwrap();
    assert_eq!(h.to_string(), "pci/0000:18:00.0");
    assert_eq!((r.name.as_str(), r.port), ("fw_fatal", None));
    assert_eq!(r.graceful_period_ms, Some(60_000));
    assert_eq!(r.auto_dump, None);
    let (_, tx) = wire::decode_reporter(&all[1]).unwrap();
    assert_eq!((tx.name.as_str(), tx.port), ("tx", Some(65535)));
    assert_eq!(tx.state, Some(ReporterState::Error));
    assert_eq!((tx.errors, tx.recoveries), (Some(3), Some(2)));
    assert_eq!(all[2].done_errno(), Some(0));
}

#[test]
fn malformed_reporters_are_errors_never_wrong_values() {
    // A count of 3 bytes, an empty state, no name, no nest, no handle.
    let bad = |children: Vec<Vec<u8>>| {
        let mut attrs = handle_attrs("pci", "0000:18:00.0");
        attrs.push(nest(ATTR_HEALTH_REPORTER, &children));
        genl(CMD_HEALTH_REPORTER_GET, NLM_F_MULTI, 1, &attrs)
    };
    let name = || nla(ATTR_HEALTH_REPORTER_NAME, &cstr("rx"));
    for bytes in [
        bad(vec![
            name(),
            nla(ATTR_HEALTH_REPORTER_ERR_COUNT, &[1, 2, 3]),
        ]),
        bad(vec![name(), nla(ATTR_HEALTH_REPORTER_STATE, &[])]),
        bad(vec![nla(ATTR_HEALTH_REPORTER_STATE, &[0])]),
        genl(CMD_HEALTH_REPORTER_GET, 0, 1, &handle_attrs("pci", "x")),
        genl(
            CMD_HEALTH_REPORTER_GET,
            0,
            1,
            &[nest(ATTR_HEALTH_REPORTER, &[name()])],
        ),
    ] {
        let m = messages(&bytes).unwrap()[0];
        assert!(wire::decode_reporter(&m).is_err(), "{bytes:?}");
    }
    // A 4-byte count (NLA_UINT) is a count.
    let m = bad(vec![
        name(),
        nla(ATTR_HEALTH_REPORTER_ERR_COUNT, &7u32.to_ne_bytes()),
    ]);
    let (_, r) = wire::decode_reporter(&messages(&m).unwrap()[0]).unwrap();
    assert_eq!(r.errors, Some(7));
    // A version without a name costs the info.
    let mut attrs = handle_attrs("pci", "0000:18:00.0");
    attrs.push(nest(
        ATTR_INFO_VERSION_RUNNING,
        &[nla(ATTR_INFO_VERSION_VALUE, &cstr("1"))],
    ));
    let m = genl(CMD_INFO_GET, 0, 1, &attrs);
    assert!(wire::decode_info(&messages(&m).unwrap()[0]).is_err());
}

/// Whether the running kernel has the devlink family (the host's does not: its kernel is
/// built without `CONFIG_NET_DEVLINK`; the QEMU lab's Debian kernel has it).
fn kernel_has_devlink() -> bool {
    let mut socket = GenlSocket::open(Duration::from_secs(2)).unwrap();
    match socket.family(wire::FAMILY) {
        Ok(_) => true,
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => false,
        Err(err) => panic!("nlctrl: {err}"),
    }
}

/// The live kernel: without the devlink family the source is absent and says why, with no
/// error; with it (and no instance, as on a machine without NICs) the dumps succeed and
/// there is nothing, no error.
#[test]
fn the_running_kernel_gives_no_error_with_or_without_devlink() {
    let source = Arc::new(DevlinkSource::new(
        Arc::new(RealFs),
        PathBuf::from(crate::fs::DEFAULT_SYSFS),
    ));
    let report = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(report.errors, vec![]);
    let data = report.data.unwrap();
    if !kernel_has_devlink() {
        let reason = report.absent.unwrap();
        assert!(
            reason.contains("no devlink generic netlink family"),
            "{reason}"
        );
        assert_eq!(data, Snapshot::default());
    } else if data.devices.is_empty() {
        assert!(report.absent.is_some(), "nothing is reported absent");
    }
    // Asking again (the kept socket, or a fresh one) gives the same.
    let again = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(again.errors, vec![]);
    assert_eq!(again.data.unwrap(), data);
}

/// Where the kernel has devlink, it takes the `INFO_GET` request as well formed: for an
/// instance it does not have it answers `ENODEV` (`devlink_get_from_attrs_lock()`), which is
/// no info and no error, not `EINVAL` (a request its policy refuses). Without the family the
/// request cannot be sent: `ENOENT`.
#[test]
fn the_running_kernel_takes_the_info_request() {
    let netlink = Netlink::default();
    let asked = netlink.ask_info(&pci("0000:ff:1f.7"));
    if kernel_has_devlink() {
        assert_eq!(asked, Ok(None));
    } else {
        assert_eq!(asked.unwrap_err().errno, Some(libc::ENOENT));
    }
}

/// A kernel that answers with canned instances, reporters and info, and counts the info
/// requests.
#[derive(Debug, Default)]
struct FakeKernel {
    absent: Option<String>,
    instances: Vec<Handle>,
    reporters: Vec<(Handle, Reporter)>,
    infos: std::sync::Mutex<Vec<String>>,
}

impl Transport for FakeKernel {
    fn dump(&self) -> Dumped {
        match &self.absent {
            Some(reason) => Dumped::Absent(reason.clone()),
            None => Dumped::Read {
                instances: self.instances.clone(),
                reporters: self.reporters.clone(),
                errors: Vec::new(),
            },
        }
    }

    fn info(&self, handle: &Handle) -> Result<Option<Info>, CollectError> {
        self.infos.lock().unwrap().push(handle.to_string());
        match handle.name.as_str() {
            // A firmware command that fails.
            "0000:3b:00.1" => Err(error(
                Some(&handle.to_string()),
                format!("DEVLINK_CMD_INFO_GET {handle}"),
                &io::Error::from_raw_os_error(libc::EIO),
            )),
            _ => Ok(Some(Info {
                driver: Some("mlx5_core".into()),
                ..Info::default()
            })),
        }
    }
}

fn pci(name: &str) -> Handle {
    Handle {
        bus: "pci".into(),
        name: name.into(),
    }
}

fn fixture_sysfs(tree: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(tree)
        .join("sys")
}

fn fake_source(kernel: FakeKernel) -> (Arc<DevlinkSource>, Arc<FakeKernel>) {
    let kernel = Arc::new(kernel);
    let source = Arc::new(DevlinkSource::with_transport(
        Arc::new(RealFs),
        fixture_sysfs("cx6dx-roce-2port"),
        kernel.clone(),
    ));
    (source, kernel)
}

fn reporter(name: &str, port: Option<u32>) -> Reporter {
    let (_, mut r) = wire::decode_reporter(&messages(&mlx5_tx(1)).unwrap()[0]).unwrap();
    r.name = name.into();
    r.port = port;
    r
}

#[test]
fn instances_get_their_pci_function_rdma_devices_and_reporters() {
    let (source, kernel) = fake_source(FakeKernel {
        instances: vec![
            pci("0000:3b:00.0"),
            pci("0000:3b:00.1"),
            pci("0000:99:00.0"),
        ],
        reporters: vec![
            (pci("0000:3b:00.0"), reporter("fw", None)),
            (pci("0000:3b:00.0"), reporter("tx", Some(65535))),
            (pci("0000:3b:00.1"), reporter("fw_fatal", None)),
            // Of an instance whose device is not under this sysfs root (the live kernel's,
            // seen by an agent run against a fixture tree): left out.
            (pci("0000:99:00.0"), reporter("fw", None)),
        ],
        ..FakeKernel::default()
    });
    let report = standalone(SPEC.name, |run| source.read_in(run));
    // The failed info of 0000:3b:00.1 is its only error; its reporters are still there.
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].errno, Some(libc::EIO));
    assert_eq!(report.errors[0].device.as_deref(), Some("pci/0000:3b:00.1"));
    let data = report.data.unwrap();
    let handles: Vec<_> = data.devices.iter().map(Device::handle).collect();
    assert_eq!(handles, ["pci/0000:3b:00.0", "pci/0000:3b:00.1"]);
    let first = &data.devices[0];
    assert_eq!(first.pci_address.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(first.rdma_devices, ["mlx5_0"]);
    assert_eq!(
        first.info.as_ref().and_then(|i| i.driver.as_deref()),
        Some("mlx5_core")
    );
    let names: Vec<_> = first
        .reporters
        .iter()
        .map(|r| (r.name.as_str(), r.port))
        .collect();
    assert_eq!(names, [("fw", None), ("tx", Some(65535))]);
    let second = &data.devices[1];
    assert_eq!(second.rdma_devices, ["mlx5_1"]);
    assert_eq!(second.info, None);
    assert_eq!(second.reporters[0].name, "fw_fatal");

    // Info is kept: the next collection asks only the instance whose info failed.
    kernel.infos.lock().unwrap().clear();
    let again = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(*kernel.infos.lock().unwrap(), ["pci/0000:3b:00.1"]);
    assert_eq!(
        again.data.unwrap().devices[0].info,
        first.info,
        "the kept info is reported"
    );
}

#[test]
fn no_family_and_no_instance_are_absent_not_errors() {
    let (source, _) = fake_source(FakeKernel {
        absent: Some("the kernel has no devlink generic netlink family".into()),
        ..FakeKernel::default()
    });
    let report = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(report.errors, vec![]);
    assert!(report.absent.unwrap().contains("no devlink"));
    let (source, _) = fake_source(FakeKernel::default());
    let report = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(report.errors, vec![]);
    assert!(report.absent.is_some());
    assert_eq!(report.data.unwrap(), Snapshot::default());
}

#[test]
fn absent_reasons_are_enoent_and_eperm_only() {
    for errno in [libc::ENOENT, libc::EPERM, libc::EACCES] {
        assert!(absent_reason(&io::Error::from_raw_os_error(errno), "x").is_some());
    }
    for errno in [libc::EIO, libc::ETIMEDOUT, libc::EINVAL] {
        assert!(absent_reason(&io::Error::from_raw_os_error(errno), "x").is_none());
    }
}
