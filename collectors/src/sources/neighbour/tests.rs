//! Tests of the `neighbour` source: the LLDP parser over the frames of `tests/fixtures/lldp/`
//! (lldpd's own, captured; a switch's, constructed) and malformed ones, the receiver's table
//! over time (TTL expiry, shutdown, changes, the timeout, no permission), the netdev-to-RDMA
//! port labels over a fixture tree, and the SMP seam with a test double of the probe.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::lldp::parse::{self, ParseError, encode, parse_frame, parse_lldpdu};
use super::lldp::{Failure, Mode, Receiver, Table};
use super::*;
use crate::fs::{FaultFs, Roots};

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/lldp")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An Ethernet frame around `du`.
fn frame(du: &[u8]) -> Vec<u8> {
    let mut f = parse::NEAREST_BRIDGE.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xcc]);
    f.extend_from_slice(du);
    f
}

fn mandatory(name: &str, ttl: u16) -> Vec<(u8, Vec<u8>)> {
    vec![
        (1, [&[4u8][..], &[0x0c, 0x42, 0xa1, 0, 0, 1]].concat()),
        (2, [&[5u8][..], b"swp1"].concat()),
        (3, ttl.to_be_bytes().to_vec()),
        (5, name.as_bytes().to_vec()),
    ]
}

fn du(name: &str, ttl: u16) -> Vec<u8> {
    let mut tlvs = mandatory(name, ttl);
    tlvs.push((0, vec![]));
    frame(&encode(&tlvs))
}

// --- The parser -------------------------------------------------------------------------

#[test]
fn lldpds_own_lldpdu_with_custom_pfc_and_frame_size_tlvs() {
    let du = parse_frame(&fixture("lldpd-1.0.16-veth.bin")).unwrap();
    assert_eq!(du.chassis_id.subtype, parse::CHASSIS_MAC);
    assert_eq!(du.chassis_id.chassis_text(), "2a:68:ed:d3:43:2f");
    assert_eq!(du.port_id.subtype, parse::PORT_MAC);
    assert_eq!(du.port_id.port_text(), "2a:68:ed:d3:43:2f");
    assert_eq!(du.ttl, 4);
    assert_eq!(du.port_description.as_deref(), Some("nbB"));
    assert_eq!(du.system_name.as_deref(), Some("leaf-07"));
    assert_eq!(
        du.system_description.as_deref(),
        Some("Debian GNU/Linux 12 (bookworm)")
    );
    assert_eq!(du.max_frame_size, Some(9002));
    let pfc = du.pfc.unwrap();
    assert_eq!((pfc.willing, pfc.mbc, pfc.capability), (false, false, 8));
    assert!(pfc.is_enabled(3));
    assert!((0..8).filter(|p| *p != 3).all(|p| !pfc.is_enabled(p)));
    assert!(du.mac_phy.is_some());
    assert_eq!(du.management_addresses.len(), 1);
    assert_eq!(du.management_addresses[0].family, 2); // IPv6 link-local
    assert_eq!(du.ets, None);
}

#[test]
fn a_roce_switch_port_with_ets_pfc_and_the_roce_application_priority() {
    let du = parse_frame(&fixture("cumulus-sn5600-roce.bin")).unwrap();
    assert_eq!(du.chassis_id.chassis_text(), "0c:42:a1:12:34:00");
    assert_eq!(du.port_id.port_text(), "swp12");
    assert_eq!(du.ttl, 120);
    assert_eq!(
        du.port_description.as_deref(),
        Some("to gpu-node-3 ens1f0np0")
    );
    assert_eq!(du.max_frame_size, Some(9216));
    assert_eq!(
        du.pfc,
        Some(Pfc {
            willing: false,
            mbc: false,
            capability: 8,
            enabled: 0x08
        })
    );
    let ets = du.ets.unwrap();
    assert_eq!(ets.priority_tc, [0, 0, 0, 3, 0, 0, 6, 0]);
    assert_eq!(ets.tc_bandwidth, [50, 0, 0, 50, 0, 0, 0, 0]);
    assert_eq!(ets.tsa[3], 2);
    assert_eq!(du.app_priorities.len(), 2);
    assert_eq!(du.roce_priority(), Some(3));
    assert_eq!(du.management_addresses[0].address, vec![10, 0, 0, 7]);
}

#[test]
fn a_shutdown_lldpdu_is_no_error() {
    let du = parse_frame(&fixture("lldpd-1.0.16-shutdown.bin")).unwrap();
    assert!(du.is_shutdown());
    assert_eq!(du.system_name, None);
}

#[test]
fn malformed_lldpdus_are_clear_errors() {
    // A TLV whose length runs past the end.
    let mut bad = encode(&mandatory("leaf", 120));
    bad.extend_from_slice(&[0x0a, 0x40, b'x']); // System Name, length 64, 1 byte
    assert!(matches!(
        parse_lldpdu(&bad),
        Err(ParseError::PastEnd {
            tlv_type: 5,
            length: 64,
            left: 1,
            ..
        })
    ));
    // TTL missing: Port ID then System Name.
    let no_ttl = encode(&[
        mandatory("x", 1)[0].clone(),
        mandatory("x", 1)[1].clone(),
        (5, b"x".to_vec()),
    ]);
    let err = parse_lldpdu(&no_ttl).unwrap_err();
    assert_eq!(
        err.to_string(),
        "TTL TLV is missing from the first three TLVs"
    );
    // Out of order: Port ID first.
    let swapped = encode(&[mandatory("x", 1)[1].clone(), mandatory("x", 1)[0].clone()]);
    assert_eq!(
        parse_lldpdu(&swapped).unwrap_err().to_string(),
        "Port ID TLV is not the second TLV"
    );
    // Chassis ID subtype 0; empty; End with a length.
    let mut t = mandatory("x", 1);
    t[0].1[0] = 0;
    assert!(matches!(
        parse_lldpdu(&encode(&t)),
        Err(ParseError::Invalid {
            tlv: "Chassis ID",
            ..
        })
    ));
    assert!(matches!(
        parse_lldpdu(&[]),
        Err(ParseError::Mandatory {
            tlv: "Chassis ID",
            ..
        })
    ));
    let mut t = mandatory("x", 1);
    t.push((0, vec![0]));
    assert!(matches!(
        parse_lldpdu(&encode(&t)),
        Err(ParseError::Invalid { tlv: "End", .. })
    ));
    // Not LLDP; too short.
    let mut f = du("x", 1);
    f[12] = 0x08;
    f[13] = 0x00;
    assert_eq!(
        parse_frame(&f),
        Err(ParseError::NotLldp { ethertype: 0x0800 })
    );
    assert_eq!(parse_frame(&f[..10]), Err(ParseError::TooShort { len: 10 }));
}

#[test]
fn what_follows_the_end_tlv_is_padding_and_short_org_tlvs_are_ignored() {
    let mut t = mandatory("leaf", 120);
    t.push((127, vec![0x00, 0x80, 0xc2, 0x0b, 0x08])); // PFC without its enable byte
    t.push((127, vec![0x00, 0x12])); // shorter than an OUI
    t.push((0, vec![]));
    let mut bytes = encode(&t);
    bytes.extend_from_slice(&[0xff; 7]); // not TLVs: after End
    let du = parse_lldpdu(&bytes).unwrap();
    assert_eq!(du.pfc, None);
    assert_eq!(du.system_name.as_deref(), Some("leaf"));
}

#[test]
fn ids_as_text() {
    let id = |subtype, value: &[u8]| parse::Id {
        subtype,
        value: value.to_vec(),
    };
    assert_eq!(id(5, &[1, 10, 0, 0, 7]).chassis_text(), "10.0.0.7");
    assert_eq!(id(7, b"leaf-07").chassis_text(), "leaf-07");
    assert_eq!(id(7, &[0, 1, 0xff]).chassis_text(), "00:01:ff");
    assert_eq!(id(3, &[1, 2, 3, 4, 5, 6]).port_text(), "01:02:03:04:05:06");
    assert_eq!(id(5, b"Ethernet12").port_text(), "Ethernet12");
}

#[test]
fn label_text_is_printable_ascii_and_bounded() {
    assert_eq!(label_text("leaf-07\0\0\0"), "leaf-07");
    assert_eq!(label_text("sw\u{e9}\n1"), "sw??1");
    assert_eq!(label_text(&"x".repeat(300)).len(), MAX_LABEL_BYTES);
}

#[test]
fn durations_of_options() {
    let values = |v: &str| OptionValues::from_iter([("lldp-timeout", v)]);
    let d = |v: &str| duration_option(&values(v), "lldp-timeout", DEFAULT_LLDP_TIMEOUT);
    assert_eq!(d("90").unwrap(), Duration::from_secs(90));
    assert_eq!(d("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(d("1h").unwrap(), Duration::from_secs(3600));
    assert!(d("0").is_err());
    assert!(d("5ms").unwrap_err().to_string().contains("lldp-timeout"));
    assert_eq!(
        duration_option(&OptionValues::new(), "x", DEFAULT_SMP_INTERVAL).unwrap(),
        DEFAULT_SMP_INTERVAL
    );
}

proptest! {
    #[test]
    fn the_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_frame(&bytes);
        let _ = parse_lldpdu(&bytes);
    }

    #[test]
    fn any_truncation_of_a_real_lldpdu_is_an_error_or_a_prefix(cut in 0usize..154) {
        let f = fixture("lldpd-1.0.16-veth.bin");
        // Cut anywhere: never a panic; an Ok only once the mandatory TLVs are in.
        if let Ok(du) = parse_frame(&f[..cut]) {
            prop_assert_eq!(du.ttl, 4);
        }
    }

    #[test]
    fn system_names_come_back_as_sent(name in "[ -~]{1,64}", ttl in 1u16..) {
        let du = parse_frame(&du(&name, ttl)).unwrap();
        prop_assert_eq!(du.ttl, ttl);
        prop_assert_eq!(super::lldp::identity(&du).name, name.trim_end().to_owned());
    }
}

// --- The receiver's table ---------------------------------------------------------------

const T: Duration = Duration::from_secs(90);

fn table_with(ports: &[(u32, &str)], now: Instant) -> Table {
    let mut t = Table::default();
    let sel: Vec<(u32, String)> = ports.iter().map(|(i, n)| (*i, (*n).to_owned())).collect();
    t.select(&sel, now);
    t
}

fn one(t: &mut Table, now: Instant) -> (Link, Vec<ParseError>) {
    let mut v = t.view(now, T);
    assert_eq!(v.len(), 1);
    v.remove(0)
}

#[test]
fn a_neighbour_is_known_until_its_ttl_runs_out() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA")], t0);
    // Nothing heard: no status before the timeout, no_frames after.
    assert_eq!(one(&mut t, t0 + Duration::from_secs(10)).0.status, None);
    assert_eq!(one(&mut t, t0 + T).0.status, Some(Status::NoFrames));
    t.record(7, &fixture("cumulus-sn5600-roce.bin"), t0 + T, 1000.0);
    t.record(8, &du("other", 120), t0 + T, 1000.0); // not selected: dropped
    let (link, errors) = one(&mut t, t0 + T + Duration::from_secs(1));
    assert!(errors.is_empty());
    assert_eq!(link.status, Some(Status::Ok));
    let n = link.neighbour.unwrap();
    assert_eq!(
        (
            n.name.as_str(),
            n.id.as_str(),
            n.port.as_str(),
            n.port_description.as_str()
        ),
        (
            "leaf-07",
            "0c:42:a1:12:34:00",
            "swp12",
            "to gpu-node-3 ens1f0np0"
        )
    );
    assert_eq!(
        (link.ttl, link.max_frame_size, link.roce_priority),
        (Some(120), Some(9216), Some(3))
    );
    assert_eq!(link.last_seen, Some(1000.0));
    // 120 s later the TTL has run out.
    let (link, _) = one(&mut t, t0 + T + Duration::from_secs(120));
    assert_eq!(link.status, Some(Status::NoFrames));
    assert_eq!(
        (link.neighbour, link.pfc, link.max_frame_size),
        (None, None, None)
    );
    assert_eq!(link.last_seen, Some(1000.0));
    assert_eq!(link.changes, 0);
}

#[test]
fn a_shutdown_lldpdu_forgets_the_neighbour_at_once() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA")], t0);
    t.record(7, &du("leaf-07", 120), t0, 1.0);
    assert_eq!(one(&mut t, t0).0.status, Some(Status::Ok));
    t.record(7, &du("leaf-07", 0), t0 + Duration::from_secs(1), 2.0);
    let (link, _) = one(&mut t, t0 + Duration::from_secs(1));
    assert_eq!(
        (link.status, link.neighbour, link.ttl),
        (Some(Status::NoFrames), None, Some(0))
    );
    // It comes back unchanged: no change counted.
    t.record(7, &du("leaf-07", 120), t0 + Duration::from_secs(2), 3.0);
    assert_eq!(one(&mut t, t0 + Duration::from_secs(2)).0.changes, 0);
}

#[test]
fn a_renamed_neighbour_replaces_the_old_one_and_counts_a_change() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA")], t0);
    t.record(7, &du("leaf-07", 120), t0, 1.0);
    t.record(7, &du("leaf-08", 120), t0, 2.0);
    let (link, _) = one(&mut t, t0);
    assert_eq!(link.neighbour.unwrap().name, "leaf-08");
    assert_eq!(link.changes, 1);
}

#[test]
fn a_malformed_lldpdu_is_one_error_and_keeps_the_last_neighbour() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA")], t0);
    t.record(7, &du("leaf-07", 120), t0, 1.0);
    let mut bad = du("leaf-07", 120);
    bad.truncate(bad.len() - 4);
    t.record(7, &bad, t0, 2.0);
    let (link, errors) = one(&mut t, t0);
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(errors[0], ParseError::PastEnd { .. }),
        "{errors:?}"
    );
    assert_eq!(link.status, Some(Status::Ok));
    assert_eq!(link.last_seen, Some(1.0));
    // Reported once.
    assert!(one(&mut t, t0).1.is_empty());
    // Many malformed frames between two collections: a bounded number of errors.
    for _ in 0..100 {
        t.record(7, &bad, t0, 3.0);
    }
    assert!(one(&mut t, t0).1.len() <= 8);
}

#[test]
fn netdevs_that_go_away_are_forgotten_and_a_new_one_on_the_index_starts_afresh() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA"), (8, "vB")], t0);
    t.record(7, &du("leaf-07", 120), t0, 1.0);
    t.select(&[(7, "vC".to_owned())], t0 + Duration::from_secs(5));
    let v = t.view(t0 + Duration::from_secs(5), T);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].0.netdev, "vC");
    assert_eq!(v[0].0.status, None);
    assert_eq!(v[0].0.neighbour, None);
}

#[test]
fn without_cap_net_raw_every_netdev_says_no_permission() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "vA"), (8, "vB")], t0);
    t.failure = Some(Failure::NoPermission(
        "Operation not permitted (os error 1)".into(),
    ));
    let v = t.view(t0, T);
    assert!(
        v.iter()
            .all(|(l, _)| l.status == Some(Status::NoPermission))
    );
}

// --- The source over a fixture tree ------------------------------------------------------

fn sysfs(tree: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(tree)
        .join("sys")
}

fn roots(sysfs: PathBuf) -> Roots {
    Roots {
        sysfs,
        procfs: PathBuf::from("/nonexistent"),
    }
}

#[test]
fn roce_netdevs_are_labelled_with_their_rdma_port() {
    let src = NeighbourSource::new(
        &roots(sysfs("cx6dx-roce-2port")),
        Arc::new(FaultFs::new()),
        NetdevFilter::default(),
        Some(Receiver::new(Mode::Socket)),
        T,
        None,
        DEFAULT_SMP_INTERVAL,
    );
    let t0 = Instant::now();
    let report = src.read_at(t0);
    assert_eq!(report.errors, vec![]);
    let links = report.data.unwrap().links;
    let names: Vec<_> = links
        .iter()
        .map(|l| (l.device.as_str(), l.port.as_str(), l.netdev.as_str()))
        .collect();
    assert_eq!(
        names,
        [("mlx5_0", "1", "ens1f0np0"), ("mlx5_1", "1", "ens1f1np1")]
    );
    // A frame on ens1f0np0 (ifindex 2 in the tree).
    {
        let mut table = src.lldp().unwrap().table().lock().unwrap();
        table.failure = None; // the real socket may have failed, or not, on this host
        table.record(2, &fixture("cumulus-sn5600-roce.bin"), t0, 5.0);
    }
    let links = src.read_at(t0).data.unwrap().links;
    assert_eq!(links[0].status, Some(Status::Ok));
    assert_eq!(links[0].pfc.map(|p| p.enabled), Some(0x08));
    assert_eq!(links[1].status, None);
}

// --- The SMP seam ------------------------------------------------------------------------

/// A test double of the probe: answers from a list, records what it was asked.
#[derive(Debug, Default)]
struct FakeProbe {
    answers: Mutex<Vec<Result<IbNeighbour, IbProbeError>>>,
    asked: Mutex<Vec<(PathBuf, u32)>>,
}

impl IbProbe for FakeProbe {
    fn query(
        &self,
        umad: &Path,
        port: u32,
        _timeout: Duration,
    ) -> Result<IbNeighbour, IbProbeError> {
        self.asked.lock().unwrap().push((umad.to_path_buf(), port));
        let mut a = self.answers.lock().unwrap();
        if a.is_empty() {
            Err(IbProbeError::Timeout)
        } else {
            a.remove(0)
        }
    }
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// An NDR InfiniBand port with umad0, and a RoCE port (Soft-RoCE style GID netdev).
fn ib_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(
        r,
        "class/infiniband/mlx5_0/ports/1/link_layer",
        "InfiniBand\n",
    );
    write(r, "class/infiniband/mlx5_0/ports/1/state", "2: INIT\n");
    write(r, "class/infiniband_mad/umad0/ibdev", "mlx5_0\n");
    write(r, "class/infiniband_mad/umad0/port", "1\n");
    write(
        r,
        "class/infiniband/mlx5_1/ports/1/link_layer",
        "Ethernet\n",
    );
    write(r, "class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE\n");
    write(
        r,
        "class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/0",
        "ens2f0np0\n",
    );
    write(r, "class/infiniband_mad/umad1/ibdev", "mlx5_1\n");
    write(r, "class/infiniband_mad/umad1/port", "1\n");
    dir
}

fn ndr_switch(name: &str) -> IbNeighbour {
    IbNeighbour {
        node_description: format!("{name}\0\0\0"),
        node_guid: 0xfc6a_1c03_00a1_b2c3,
        node_type: 2,
        local_port: 17,
        width_lanes: width_lanes(2),
        lane_gbps: Some(100.0),
    }
}

#[test]
fn ib_ports_are_asked_through_the_probe_and_roce_ports_never() {
    let tree = ib_tree();
    let probe = Arc::new(FakeProbe::default());
    probe.answers.lock().unwrap().extend([
        Ok(ndr_switch("sw-ib-07 MQM9700")),
        Err(IbProbeError::Refused { status: 0x001c }),
        Ok(ndr_switch("sw-ib-08 MQM9700")),
    ]);
    let src = NeighbourSource::new(
        &roots(tree.path().to_path_buf()),
        Arc::new(FaultFs::new()),
        NetdevFilter::default(),
        None,
        T,
        Some(probe.clone()),
        DEFAULT_SMP_INTERVAL,
    );
    let smp = |src: &NeighbourSource| {
        let links = src.read_at(Instant::now()).data.unwrap().links;
        links
            .into_iter()
            .filter(|l| l.protocol == Some(Protocol::Smp))
            .collect::<Vec<_>>()
    };
    let links = smp(&src);
    assert_eq!(links.len(), 2);
    assert_eq!(
        (links[0].device.as_str(), links[0].status),
        ("mlx5_0", None)
    );
    assert_eq!(
        (
            links[1].device.as_str(),
            links[1].netdev.as_str(),
            links[1].status
        ),
        ("mlx5_1", "ens2f0np0", Some(Status::NotAvailable))
    );
    src.probe_now();
    assert_eq!(
        *probe.asked.lock().unwrap(),
        [(PathBuf::from("/dev/infiniband/umad0"), 1)]
    );
    let links = smp(&src);
    let n = links[0].neighbour.clone().unwrap();
    assert_eq!(links[0].status, Some(Status::Ok));
    assert_eq!(
        (
            n.name.as_str(),
            n.id.as_str(),
            n.port.as_str(),
            n.port_description.as_str()
        ),
        ("sw-ib-07 MQM9700", "0xfc6a1c0300a1b2c3", "17", "")
    );
    assert_eq!(links[0].link_width_lanes, Some(4));
    assert_eq!(links[0].rate_bytes_per_second, Some(400e9 / 8.0));
    // Not due again before the interval.
    src.probe_now();
    assert_eq!(probe.asked.lock().unwrap().len(), 1);
    // The port goes ACTIVE: asked at once.
    write(
        tree.path(),
        "class/infiniband/mlx5_0/ports/1/state",
        "4: ACTIVE\n",
    );
    smp(&src);
    src.probe_now();
    assert_eq!(probe.asked.lock().unwrap().len(), 2);
    let links = smp(&src);
    assert_eq!(
        (links[0].status, links[0].neighbour.is_none()),
        (Some(Status::Refused), true)
    );
    assert!(links[0].last_seen.is_some());
    // Down and up again: a new switch answers, a change.
    write(
        tree.path(),
        "class/infiniband/mlx5_0/ports/1/state",
        "1: DOWN\n",
    );
    smp(&src);
    write(
        tree.path(),
        "class/infiniband/mlx5_0/ports/1/state",
        "4: ACTIVE\n",
    );
    smp(&src);
    src.probe_now();
    let links = smp(&src);
    assert_eq!(links[0].neighbour.clone().unwrap().name, "sw-ib-08 MQM9700");
    assert_eq!(links[0].changes, 1);
}

#[test]
fn probe_errors_are_statuses_and_other_failures_errors() {
    let mut table = IbTable::default();
    let key = ("mlx5_0".to_owned(), 1);
    let tree = ib_tree();
    let src = NeighbourSource::new(
        &roots(tree.path().to_path_buf()),
        Arc::new(FaultFs::new()),
        NetdevFilter::default(),
        None,
        T,
        Some(Arc::new(FakeProbe::default())),
        DEFAULT_SMP_INTERVAL,
    );
    let _ = src.read_at(Instant::now());
    let entry = src.ib.as_ref().unwrap().table.lock().unwrap().ports[&key].clone();
    table.ports.insert(key.clone(), entry);
    for (err, status) in [
        (IbProbeError::Timeout, Some(Status::Timeout)),
        (
            IbProbeError::Permission("EACCES".into()),
            Some(Status::NoPermission),
        ),
        (
            IbProbeError::NotAvailable("VF".into()),
            Some(Status::NotAvailable),
        ),
        (IbProbeError::Failed("EIO".into()), None),
    ] {
        table.ports.get_mut(&key).unwrap().status = None;
        table.record(&key, Err(err), 0.0);
        assert_eq!(table.ports[&key].status, status);
    }
    assert_eq!(table.ports[&key].errors.len(), 1);
}

#[test]
fn without_a_probe_no_ib_series() {
    let tree = ib_tree();
    let src = NeighbourSource::new(
        &roots(tree.path().to_path_buf()),
        Arc::new(FaultFs::new()),
        NetdevFilter::default(),
        None,
        T,
        None,
        DEFAULT_SMP_INTERVAL,
    );
    assert!(src.read_at(Instant::now()).data.unwrap().links.is_empty());
}

// --- lldpd's json0 -----------------------------------------------------------------------

fn text_fixture(name: &str) -> String {
    String::from_utf8(fixture(name)).unwrap()
}

#[test]
fn lldpds_json0_gives_the_same_neighbour_as_the_frames() {
    let listed =
        super::lldp::lldpd::parse_json0(&text_fixture("lldpd-1.0.16-json0-neighbors.json"))
            .unwrap();
    assert_eq!(listed.len(), 1);
    let (iface, du) = &listed[0];
    assert_eq!(iface, "nbx1");
    let id = super::lldp::identity(du);
    assert_eq!(
        (
            id.name.as_str(),
            id.id.as_str(),
            id.port.as_str(),
            id.port_description.as_str()
        ),
        (
            "leaf-07",
            "06:53:81:ee:99:41",
            "06:53:81:ee:99:41",
            "to gpu-node-3"
        )
    );
    assert_eq!((du.ttl, du.max_frame_size), (4, Some(9002)));
    assert_eq!(
        du.pfc,
        Some(Pfc {
            willing: false,
            mbc: false,
            capability: 8,
            enabled: 0x08
        })
    );
    assert!(
        super::lldp::lldpd::parse_json0(&text_fixture("lldpd-1.0.16-json0-none.json"))
            .unwrap()
            .is_empty()
    );
    assert!(super::lldp::lldpd::parse_json0("lldpd is not running").is_err());
    assert!(super::lldp::lldpd::parse_json0("{\"x\": 1}").is_err());
}

#[test]
fn a_neighbour_lldpd_no_longer_lists_has_left() {
    let t0 = Instant::now();
    let mut t = table_with(&[(7, "nbx1"), (8, "other")], t0);
    t.lldpd = true;
    let listed =
        super::lldp::lldpd::parse_json0(&text_fixture("lldpd-1.0.16-json0-neighbors.json"))
            .unwrap();
    t.record_lldpd(listed, t0, 10.0);
    // lldpd ages neighbours out itself: no TTL expiry here, however long since the poll.
    let v = t.view(t0 + Duration::from_secs(60), T);
    assert_eq!(v[0].0.protocol, Some(Protocol::Lldpd));
    assert_eq!(v[0].0.status, Some(Status::Ok));
    assert_eq!(v[1].0.status, None);
    t.record_lldpd(Vec::new(), t0 + Duration::from_secs(70), 80.0);
    let v = t.view(t0 + Duration::from_secs(70), T);
    assert_eq!(
        (v[0].0.status, v[0].0.last_seen),
        (Some(Status::NoFrames), Some(10.0))
    );
    // Nothing ever heard: no status before the timeout.
    assert_eq!(v[1].0.status, None);
}

#[test]
fn ib_ports_of_a_dgx_without_umad_are_not_available_with_their_ipoib_netdev() {
    let src = NeighbourSource::new(
        &roots(sysfs("h100-cx7-ndr-ib")),
        Arc::new(FaultFs::new()),
        NetdevFilter::default(),
        None,
        T,
        Some(Arc::new(FakeProbe::default())),
        DEFAULT_SMP_INTERVAL,
    );
    let report = src.read_at(Instant::now());
    assert_eq!(report.errors, vec![]);
    let links = report.data.unwrap().links;
    let first = links.iter().find(|l| l.device == "mlx5_0").unwrap();
    assert_eq!(
        (first.port.as_str(), first.netdev.as_str(), first.status),
        ("1", "ibp24s0", Some(Status::NotAvailable))
    );
    assert!(links.iter().all(|l| l.status == Some(Status::NotAvailable)));
    assert!(links.len() >= 8);
}
