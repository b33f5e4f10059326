//! Decoding on kernel-shaped bytes, and the live kernel's (empty) devlink.

use std::sync::Arc;

use super::wire::{self, *};
use super::*;
use crate::fs::RealFs;
use crate::netlink::testing::{cstr, datagram, message, nla};
use crate::netlink::{NLM_F_MULTI, NLMSG_DONE, messages};
use crate::run::standalone;

const FAM: u16 = 0x14;

/// The bytes of an annotated hex fixture: `#` starts a comment, whitespace is ignored.
fn hex(text: &str) -> Vec<u8> {
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

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

/// The live kernel (no devlink instance here): the dumps succeed and there is nothing, no
/// error. A kernel without the family would say so as absent, never as an error.
#[test]
fn the_running_kernel_dumps_nothing_and_that_is_not_an_error() {
    let source = Arc::new(DevlinkSource::new(
        Arc::new(RealFs),
        PathBuf::from(crate::fs::DEFAULT_SYSFS),
    ));
    let report = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(report.errors, vec![]);
    let data = report.data.unwrap();
    if data.devices.is_empty() {
        assert!(report.absent.is_some(), "nothing is reported absent");
    }
    // Asking again uses the kept socket and gives the same.
    let again = standalone(SPEC.name, |run| source.read_in(run));
    assert_eq!(again.errors, vec![]);
    assert_eq!(again.data.unwrap(), data);
}
