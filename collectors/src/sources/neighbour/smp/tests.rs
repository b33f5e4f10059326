//! Tests of the SMP reader on byte replies rebuilt from a real fabric's `smpquery` /
//! `ibnetdiscover` output (`tests/fixtures/smp/`, see its README), on a replaying
//! transport, and on sysfs trees.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use super::mad::{self, Attr, LaneSpeed, NodeType, ReplyError, Request};
use super::umad::{Transport, UmadError, find_umad};
use super::{ErrorKind, Neighbour, query, query_port};
use crate::fs::RealFs;

use crate::hexfixture::hex;

macro_rules! fixture {
    ($name:literal) => {
        hex(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/smp/",
            $name
        )))
    };
}

/// The low transaction-id word of the fixtures' first request.
const TID: u32 = 0x5ca1_ab1e;
/// The kernel's high word in the fixtures' replies.
const HI_TID: u64 = 0x31 << 32;

fn request(attr: Attr, attr_mod: u32, n: u32) -> Request {
    Request {
        agent_id: 0,
        tid: u64::from(TID + n),
        attr,
        attr_mod,
        local_port: 1,
        timeout_ms: 500,
    }
}

fn data(reply: &[u8], attr: Attr, attr_mod: u32, n: u32) -> [u8; mad::SMP_DATA_LEN] {
    mad::decode_reply(reply, &request(attr, attr_mod, n)).unwrap()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

// ---------------------------------------------------------------------------------------
// Encoding

#[test]
fn a_get_is_a_one_hop_directed_route_smp_out_of_the_local_port() {
    let req = Request {
        agent_id: 3,
        tid: 0x0000_0000_1234_5678,
        attr: Attr::PortInfo,
        attr_mod: 16,
        local_port: 2,
        timeout_ms: 250,
    };
    let b = mad::encode_get(&req);
    assert_eq!(b.len(), 320);
    // umad header: host-order id, status, timeout_ms, retries, length; be qpn and lid.
    assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 3);
    assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 0);
    assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), 250);
    assert_eq!(
        u32::from_ne_bytes(b[12..16].try_into().unwrap()),
        0,
        "no retries"
    );
    assert_eq!(u32::from_ne_bytes(b[16..20].try_into().unwrap()), 320);
    assert_eq!(&b[20..24], &[0, 0, 0, 0], "QP0");
    assert_eq!(&b[28..30], &[0xff, 0xff], "permissive LID");
    assert!(b[30..64].iter().all(|&x| x == 0), "no GRH, pkey index 0");
    let smp = &b[64..];
    assert_eq!(
        &smp[0..4],
        &[1, 0x81, 1, 0x01],
        "base 1, class 0x81, version 1, Get"
    );
    assert_eq!(&smp[4..6], &[0, 0], "status 0, D bit clear");
    assert_eq!(&smp[6..8], &[0, 1], "hop_ptr 0, hop_cnt 1");
    assert_eq!(&smp[8..16], &[0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78]);
    assert_eq!(&smp[16..18], &[0x00, 0x15], "PortInfo");
    assert_eq!(&smp[20..24], &[0, 0, 0, 16], "attr_mod 16");
    assert!(smp[24..32].iter().all(|&x| x == 0), "M_Key 0");
    assert_eq!(
        &smp[32..36],
        &[0xff, 0xff, 0xff, 0xff],
        "DrSLID, DrDLID permissive"
    );
    assert!(
        smp[36..128].iter().all(|&x| x == 0),
        "reserved and data zero"
    );
    assert_eq!(&smp[128..130], &[0, 2], "initial_path {{0, local port}}");
    assert!(smp[130..].iter().all(|&x| x == 0));
}

#[test]
fn attribute_ids_are_the_iba_ones() {
    assert_eq!(Attr::NodeDescription.id(), 0x0010);
    assert_eq!(Attr::NodeInfo.id(), 0x0011);
    assert_eq!(Attr::PortInfo.id(), 0x0015);
}

#[test]
fn ioctl_numbers_are_the_uapi_ones() {
    // _IOWR(0x1b, 4, 40 bytes), _IOW(0x1b, 2, 4 bytes), _IO(0x1b, 3).
    assert_eq!(super::umad::IB_USER_MAD_REGISTER_AGENT2, 0xc028_1b04);
    assert_eq!(super::umad::IB_USER_MAD_UNREGISTER_AGENT, 0x4004_1b02);
    assert_eq!(super::umad::IB_USER_MAD_ENABLE_PKEY, 0x0000_1b03);
}

// ---------------------------------------------------------------------------------------
// Decoding real switches' replies (little-endian umad headers: x86_64 recordings)

#[cfg(target_endian = "little")]
#[test]
fn mqm9700_node_info() {
    let node = mad::decode_node_info(&data(
        &fixture!("mqm9700-ndr/node-info.hex"),
        Attr::NodeInfo,
        0,
        0,
    ));
    assert_eq!(node.node_type, NodeType::Switch);
    assert_eq!(node.num_ports, 64);
    assert_eq!(node.node_guid, 0xb0cf_0e03_00d6_6c80);
    assert_eq!(node.system_image_guid, 0xb0cf_0e03_00d6_6c80);
    assert_eq!(node.port_guid, 0xb0cf_0e03_00d6_6c80);
    assert_eq!(node.local_port_num, 16);
    assert_eq!(node.vendor_id, 0x0002c9);
    assert_eq!(node.device_id, 0xd2f2);
    assert_eq!((node.base_version, node.class_version), (1, 1));
    assert_eq!(node.partition_cap, 8);
}

#[cfg(target_endian = "little")]
#[test]
fn mqm9700_node_description() {
    let text = mad::decode_node_description(&data(
        &fixture!("mqm9700-ndr/node-description.hex"),
        Attr::NodeDescription,
        0,
        1,
    ));
    assert_eq!(text, "MF0;DCXNYD-IB03-D1F2-D207-F08-U45:MQM9700/U1");
}

#[cfg(target_endian = "little")]
#[test]
fn mqm9700_port_is_4x_ndr_like_the_host_end() {
    let port = mad::decode_port_info(&data(
        &fixture!("mqm9700-ndr/port-info.hex"),
        Attr::PortInfo,
        16,
        2,
    ));
    assert_eq!(port.local_port_num, 16);
    assert_eq!((port.port_state, port.phys_state), (4, 5), "Active, LinkUp");
    assert_eq!(port.link_width_active, 2);
    assert_eq!(port.width_lanes(), Some(4));
    assert_eq!(port.link_speed_active, 0, "'Extended speed'");
    assert_eq!(port.link_speed_ext_active, 8);
    assert_eq!(port.lane_speed(), Some(LaneSpeed::Ndr));
    // "400 Gb/sec (4X NDR)" at the host end: 400e9 / 8.
    assert_eq!(port.rate_bytes_per_second(), Some(50_000_000_000));
    assert_eq!(port.neighbor_mtu, 5);
}

#[cfg(target_endian = "little")]
#[test]
fn mqm9700_split_port_is_2x_ndr() {
    let node = mad::decode_node_info(&data(
        &fixture!("mqm9700-ndr200-split/node-info.hex"),
        Attr::NodeInfo,
        0,
        0,
    ));
    assert_eq!((node.num_ports, node.local_port_num), (128, 3));
    let port = mad::decode_port_info(&data(
        &fixture!("mqm9700-ndr200-split/port-info.hex"),
        Attr::PortInfo,
        3,
        2,
    ));
    assert_eq!(port.link_width_active, 16, "2X is 16 since IBA 1.4");
    assert_eq!(port.width_lanes(), Some(2));
    // "200 Gb/sec (2X NDR)" at the host end.
    assert_eq!(port.rate_bytes_per_second(), Some(25_000_000_000));
}

#[cfg(target_endian = "little")]
#[test]
fn connectx3_fdr_port_takes_the_extended_speed_over_qdr() {
    let port = mad::decode_port_info(&data(
        &fixture!("connectx3-fdr/port-info.hex"),
        Attr::PortInfo,
        1,
        2,
    ));
    assert_eq!(port.capability_mask, 0x0251_486a);
    assert_eq!((port.lid, port.sm_lid), (3, 3));
    assert_eq!(port.link_speed_active, 4, "10.0 Gbps");
    assert_eq!(port.link_speed_ext_active, 1, "14.0625 Gbps");
    assert_eq!(port.link_width_enabled, 1);
    assert_eq!(port.link_width_supported, 3);
    assert_eq!(port.lane_speed(), Some(LaneSpeed::Fdr));
    // ibstat "Rate: 56": 4 × 14 Gb/s.
    assert_eq!(port.rate_bytes_per_second(), Some(7_000_000_000));
}

#[test]
fn every_speed_and_width_gives_the_kernels_rate() {
    // (PortInfo fields, kernel per-lane deci-Gb/s from ib_speed_attrs[]).
    let speeds: [((u8, u8, u8), u64); 8] = [
        ((1, 0, 0), 25),
        ((2, 0, 0), 50),
        ((4, 0, 0), 100),
        ((4, 1, 0), 140),
        ((4, 2, 0), 250),
        ((4, 4, 0), 500),
        ((4, 8, 0), 1000),
        ((4, 8, 1), 2000),
    ];
    for ((base, ext, ext2), lane) in speeds {
        for (width, lanes) in [(1u8, 1u64), (16, 2), (2, 4), (4, 8), (8, 12)] {
            let mut d = [0u8; 64];
            d[31] = width;
            d[35] = base << 4;
            d[62] = ext << 4;
            d[56] = ext2 << 5;
            let port = mad::decode_port_info(&d);
            assert_eq!(
                port.rate_bytes_per_second(),
                Some(lanes * lane * 100_000_000 / 8),
                "speed {base}/{ext}/{ext2} width {width}"
            );
        }
    }
}

#[test]
fn values_no_speed_or_width_has_give_nothing() {
    let mut d = [0u8; 64];
    d[31] = 2;
    assert_eq!(mad::decode_port_info(&d).lane_speed(), None, "speed 0");
    d[35] = 3 << 4;
    assert_eq!(mad::decode_port_info(&d).lane_speed(), None, "speed 3");
    d[35] = 4 << 4;
    d[62] = 3 << 4;
    assert_eq!(mad::decode_port_info(&d).lane_speed(), None, "ext speed 3");
    d[62] = 0;
    d[31] = 3;
    assert_eq!(mad::decode_port_info(&d).width_lanes(), None, "width 3");
    assert_eq!(mad::decode_port_info(&d).rate_bytes_per_second(), None);
}

#[test]
fn node_descriptions_are_printable_ascii_up_to_the_first_nul() {
    let mut d = [0u8; 64];
    d[..13].copy_from_slice(b" sw\x01\xc3\xa9-leaf\t ");
    d[14] = b'x'; // after the NUL: ignored
    assert_eq!(mad::decode_node_description(&d), "sw???-leaf?");
    let full = [b'a'; 64];
    assert_eq!(
        mad::decode_node_description(&full).len(),
        64,
        "no NUL at all"
    );
    assert_eq!(mad::decode_node_description(&[0u8; 64]), "");
}

// ---------------------------------------------------------------------------------------
// Replies that cannot be used

#[cfg(target_endian = "little")]
#[test]
fn truncated_replies_are_errors() {
    let reply = fixture!("mqm9700-ndr/node-info.hex");
    for len in [0, 10, 63, 64, 87, 88, 200, 319] {
        let err = mad::decode_reply(&reply[..len], &request(Attr::NodeInfo, 0, 0)).unwrap_err();
        assert!(matches!(err, ReplyError::Truncated { .. }), "{len}: {err}");
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}

#[cfg(target_endian = "little")]
#[test]
fn a_reply_to_another_request_is_told_apart_by_the_low_tid_word() {
    let reply = fixture!("mqm9700-ndr/node-info.hex");
    // The fixture's high word is the kernel's: a request with high word 0 matches it.
    assert!(mad::decode_reply(&reply, &request(Attr::NodeInfo, 0, 0)).is_ok());
    let err = mad::decode_reply(&reply, &request(Attr::NodeInfo, 0, 1)).unwrap_err();
    assert_eq!(
        err,
        ReplyError::OtherTid {
            expected: TID + 1,
            got: HI_TID | u64::from(TID)
        }
    );
}

#[cfg(target_endian = "little")]
#[test]
fn garbled_replies_are_errors() {
    let good = fixture!("mqm9700-ndr/node-info.hex");
    let req = request(Attr::NodeInfo, 0, 0);
    let cases: [(usize, u8, &str); 5] = [
        (64, 2, "base version"),
        (65, 0x01, "class"),
        (66, 2, "class version"),
        (67, 0x01, "method"),
        (64 + 17, 0x15, "attribute"),
    ];
    for (at, value, what) in cases {
        let mut bad = good.clone();
        bad[at] = value;
        let err = mad::decode_reply(&bad, &req).unwrap_err();
        assert!(matches!(err, ReplyError::Unexpected(_)), "{what}: {err:?}");
    }
    // A umad status the kernel never sets on a reply.
    let mut bad = good.clone();
    bad[4] = 5;
    assert_eq!(
        mad::decode_reply(&bad, &req),
        Err(ReplyError::UmadStatus(5))
    );
}

#[cfg(target_endian = "little")]
#[test]
fn a_status_with_error_bits_is_a_refusal() {
    let reply = fixture!("errors/port-info-invalid-modifier.hex");
    let err = mad::decode_reply(&reply, &request(Attr::PortInfo, 200, 2)).unwrap_err();
    assert_eq!(err, ReplyError::Status(0x801c));
    assert!(
        err.to_string()
            .contains("invalid attribute or attribute modifier value"),
        "{err}"
    );
    assert_eq!(mad::describe_status(0x8001), "busy");
    assert_eq!(mad::describe_status(0x0008), "method not supported");
    assert_eq!(
        mad::describe_status(0x000c),
        "method/attribute combination not supported"
    );
    assert_eq!(mad::describe_status(0x8100), "class-specific error");
}

#[cfg(target_endian = "little")]
#[test]
fn the_kernels_timeout_answer_is_a_timeout() {
    let reply = fixture!("errors/node-info-timeout.hex");
    assert_eq!(reply.len(), 88, "umad header and IB_MGMT_MAD_HDR");
    assert_eq!(
        mad::decode_reply(&reply, &request(Attr::NodeInfo, 0, 0)),
        Err(ReplyError::Timeout)
    );
}

// ---------------------------------------------------------------------------------------
// The query over a replaying transport

/// Answers each request with the next recorded reply (or nothing).
struct Replay {
    replies: VecDeque<Option<Vec<u8>>>,
    sent: Vec<Vec<u8>>,
    fail_send: Option<i32>,
}

impl Replay {
    fn new(replies: Vec<Option<Vec<u8>>>) -> Self {
        Replay {
            replies: replies.into(),
            sent: Vec::new(),
            fail_send: None,
        }
    }
}

impl Transport for Replay {
    fn send(&mut self, packet: &[u8]) -> Result<(), UmadError> {
        if let Some(errno) = self.fail_send {
            return Err(UmadError::Io {
                call: "write",
                err: io::Error::from_raw_os_error(errno),
            });
        }
        self.sent.push(packet.to_vec());
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], _deadline: Instant) -> Result<Option<usize>, UmadError> {
        match self.replies.pop_front().flatten() {
            Some(reply) => {
                let n = reply.len().min(buf.len());
                buf[..n].copy_from_slice(&reply[..n]);
                Ok(Some(n))
            }
            None => Ok(None),
        }
    }

    fn agent_id(&self) -> u32 {
        7
    }
}

#[cfg(target_endian = "little")]
fn mqm9700() -> Vec<Option<Vec<u8>>> {
    vec![
        Some(fixture!("mqm9700-ndr/node-info.hex")),
        Some(fixture!("mqm9700-ndr/node-description.hex")),
        Some(fixture!("mqm9700-ndr/port-info.hex")),
    ]
}

#[cfg(target_endian = "little")]
#[test]
fn a_query_asks_node_info_then_the_name_then_the_port_it_arrived_on() {
    let mut t = Replay::new(mqm9700());
    let n: Neighbour = query(&mut t, 1, TID, Duration::from_millis(500), far()).unwrap();
    assert_eq!(
        n.description,
        "MF0;DCXNYD-IB03-D1F2-D207-F08-U45:MQM9700/U1"
    );
    assert_eq!(n.neighbour_id(), "0xb0cf0e0300d66c80");
    assert_eq!(n.neighbour_port(), "16");
    assert_eq!(n.link_width_lanes(), Some(4));
    assert_eq!(n.rate_bytes_per_second(), Some(50_000_000_000));

    let asked: Vec<(u16, u32, u32, u32)> = t
        .sent
        .iter()
        .map(|p| {
            let smp = &p[64..];
            (
                u16::from_be_bytes([smp[16], smp[17]]),
                u32::from_be_bytes(smp[20..24].try_into().unwrap()),
                u32::from_be_bytes(smp[12..16].try_into().unwrap()),
                u32::from_ne_bytes(p[0..4].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        asked,
        [
            (0x0011, 0, TID, 7),
            (0x0010, 0, TID + 1, 7),
            (0x0015, 16, TID + 2, 7),
        ]
    );
}

#[cfg(target_endian = "little")]
#[test]
fn a_late_reply_to_an_earlier_request_is_skipped() {
    let mut replies = mqm9700();
    // A stray copy of the NodeInfo reply arrives before the NodeDescription one.
    replies.insert(1, Some(fixture!("mqm9700-ndr/node-info.hex")));
    let mut t = Replay::new(replies);
    let n = query(&mut t, 1, TID, Duration::from_millis(500), far()).unwrap();
    assert_eq!(n.neighbour_port(), "16");
}

#[cfg(target_endian = "little")]
#[test]
fn query_failures_have_their_kinds() {
    let timeout = ms(500);
    // No answer at all (M_Key protection, a down link): our own deadline.
    let mut t = Replay::new(vec![None]);
    let err = query(&mut t, 1, TID, timeout, far()).unwrap_err();
    assert_eq!(
        (err.kind, err.attr),
        (ErrorKind::Timeout, Some(Attr::NodeInfo))
    );
    assert_eq!(err.kind.status(), Some("timeout"));

    // The kernel's ETIMEDOUT.
    let mut t = Replay::new(vec![Some(fixture!("errors/node-info-timeout.hex"))]);
    let err = query(&mut t, 1, TID, timeout, far()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.detail.contains("ETIMEDOUT"), "{err}");

    // A refused PortInfo (the fixture answers TID + 2 with status 0x801c).
    let mut replies = mqm9700();
    replies[2] = Some(fixture!("errors/port-info-invalid-modifier.hex"));
    let mut t = Replay::new(replies);
    let err = query(&mut t, 1, TID, timeout, far()).unwrap_err();
    assert_eq!(
        (err.kind, err.attr),
        (ErrorKind::Refused, Some(Attr::PortInfo))
    );
    assert_eq!(err.kind.status(), Some("refused"));
    assert!(err.to_string().contains("0x801c"), "{err}");

    // A garbled reply.
    let mut replies = mqm9700();
    let mut bad = fixture!("mqm9700-ndr/node-description.hex");
    bad.truncate(100);
    replies[1] = Some(bad);
    let mut t = Replay::new(replies);
    let err = query(&mut t, 1, TID, timeout, far()).unwrap_err();
    assert_eq!(
        (err.kind, err.attr),
        (ErrorKind::Failed, Some(Attr::NodeDescription))
    );
    assert_eq!(err.kind.status(), None);
    assert_eq!(
        err.to_collect_error().kind,
        crate::error::ErrorKind::Parse,
        "{err}"
    );

    // The kernel refused the write.
    let mut t = Replay::new(mqm9700());
    t.fail_send = Some(libc::EINVAL);
    let err = query(&mut t, 1, TID, timeout, far()).unwrap_err();
    assert_eq!(
        (err.kind, err.errno),
        (ErrorKind::Failed, Some(libc::EINVAL))
    );

    // A deadline already past: nothing is sent.
    let mut t = Replay::new(mqm9700());
    let err = query(&mut t, 1, TID, timeout, Instant::now()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(t.sent.is_empty());
}

#[cfg(target_endian = "little")]
#[test]
fn an_implausible_local_port_is_an_error() {
    let mut replies = mqm9700();
    let mut bad = fixture!("mqm9700-ndr/node-info.hex");
    bad[64 + 64 + 36] = 65; // LocalPortNum 65 of 64 ports
    replies[0] = Some(bad);
    let mut t = Replay::new(replies);
    let err = query(&mut t, 1, TID, ms(500), far()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Failed);
    assert!(err.detail.contains("LocalPortNum 65 of 64"), "{err}");
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------------------------------
// Finding the umad device

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_umad_device_of_a_port_is_found_by_ibdev_and_port() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    write(&sys, "class/infiniband_mad/abi_version", "5\n");
    for (n, dev, port) in [(0, "mlx5_0", 1), (1, "mlx5_1", 1), (2, "mlx5_1", 2)] {
        write(
            &sys,
            &format!("class/infiniband_mad/umad{n}/ibdev"),
            &format!("{dev}\n"),
        );
        write(
            &sys,
            &format!("class/infiniband_mad/umad{n}/port"),
            &format!("{port}\n"),
        );
        write(
            &sys,
            &format!("class/infiniband_mad/issm{n}/ibdev"),
            &format!("{dev}\n"),
        );
        write(
            &sys,
            &format!("class/infiniband_mad/issm{n}/port"),
            &format!("{port}\n"),
        );
    }
    let dev = Path::new("/dev");
    let found = find_umad(&RealFs, &sys, dev, "mlx5_1", 2).unwrap().unwrap();
    assert_eq!(found.name, "umad2");
    assert_eq!(found.dev_path, Path::new("/dev/infiniband/umad2"));
    assert_eq!(
        find_umad(&RealFs, &sys, dev, "mlx5_0", 1)
            .unwrap()
            .unwrap()
            .name,
        "umad0"
    );
    assert_eq!(find_umad(&RealFs, &sys, dev, "mlx5_0", 2).unwrap(), None);
    assert_eq!(find_umad(&RealFs, &sys, dev, "siw0", 1).unwrap(), None);
}

#[test]
fn a_sysfs_without_infiniband_mad_is_no_umad_device() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("class/net")).unwrap();
    assert_eq!(
        find_umad(&RealFs, &sys, Path::new("/dev"), "mlx5_0", 1).unwrap(),
        None
    );
    let err = query_port(
        &RealFs,
        &sys,
        Path::new("/dev"),
        "mlx5_0",
        1,
        ms(100),
        far(),
    )
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotAvailable);
    assert_eq!(err.kind.status(), Some("not_available"));
    assert!(err.to_string().contains("no umad device"), "{err}");
    assert_eq!(
        err.to_collect_error().kind,
        crate::error::ErrorKind::Unavailable
    );
}

/// This host: whatever it has, asking does not panic and gives a clean answer. Without RDMA
/// devices (the build machines) that is "not available".
#[test]
fn the_host_answers_cleanly() {
    let sys = Path::new(crate::fs::DEFAULT_SYSFS);
    match query_port(
        &RealFs,
        sys,
        Path::new("/dev"),
        "mlx5_0",
        1,
        ms(200),
        Instant::now() + ms(2000),
    ) {
        Ok(n) => assert!(!n.neighbour_id().is_empty()),
        Err(err) => assert!(!err.detail.is_empty(), "{err:?}"),
    }
}

#[test]
fn a_missing_device_node_is_not_available_and_no_access_is_no_permission() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    let dev = dir.path().join("dev");
    write(&sys, "class/infiniband_mad/umad0/ibdev", "mlx5_0\n");
    write(&sys, "class/infiniband_mad/umad0/port", "1\n");
    // The sysfs says umad0 exists, but the container has no /dev/infiniband.
    let err = query_port(&RealFs, &sys, &dev, "mlx5_0", 1, ms(100), far()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotAvailable, "{err}");
    assert_eq!(err.errno, Some(libc::ENOENT));
    assert_eq!(
        err.dev_path.as_deref(),
        Some(dev.join("infiniband/umad0").as_path())
    );

    // A node that may not be opened read-write (root bypasses the mode: skip then).
    write(&dev, "infiniband/umad0", "");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        dev.join("infiniband/umad0"),
        std::fs::Permissions::from_mode(0o400),
    )
    .unwrap();
    // Root opens it regardless of the mode; the effective uid is the third `Uid:` field.
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    let err = query_port(&RealFs, &sys, &dev, "mlx5_0", 1, ms(100), far()).unwrap_err();
    if root {
        // Root opens the plain file; the ioctl then fails (ENOTTY): not available.
        assert_eq!(err.kind, ErrorKind::NotAvailable, "{err}");
    } else {
        assert_eq!(err.kind, ErrorKind::NoPermission, "{err}");
        assert_eq!(err.kind.status(), Some("no_permission"));
    }
}

#[cfg(target_endian = "little")]
#[test]
fn no_bytes_make_the_decoders_panic() {
    // Every prefix and thousands of byte flips of a real reply, and random packets.
    let good = fixture!("mqm9700-ndr/port-info.hex");
    let req = request(Attr::PortInfo, 16, 2);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut decoded = 0;
    for len in 0..=good.len() {
        let _ = mad::decode_reply(&good[..len], &req);
    }
    for _ in 0..5000 {
        let mut bytes = good.clone();
        for _ in 0..(next() % 8) {
            let at = (next() % bytes.len() as u64) as usize;
            bytes[at] = next() as u8;
        }
        let len = (next() % (bytes.len() as u64 + 1)) as usize;
        if let Ok(data) = mad::decode_reply(&bytes[..len], &req) {
            decoded += 1;
            let port = mad::decode_port_info(&data);
            let _ = (port.lane_speed(), port.rate_bytes_per_second());
            let _ = mad::decode_node_info(&data);
            let _ = mad::decode_node_description(&data);
        }
    }
    assert!(decoded > 0, "some flips leave a usable reply");
}
