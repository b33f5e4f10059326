//! The `phy` source's tests: the wire format against kernel-shaped replies
//! (`tests/fixtures/phy/`, recorded from the live kernel where one answers, built to the
//! kernel's fill functions where no hardware runs here), and the source against a veth pair
//! of the running kernel.

use std::path::Path;
use std::process::{Command, Stdio};

use super::wire::*;
use super::*;
use crate::fs::RealFs;
use crate::netlink::messages;
use crate::netlink::testing::{message, nest, nla};

use crate::hexfixture::hex;

macro_rules! fixture {
    ($name:literal) => {
        hex(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/phy/",
            $name
        )))
    };
}

/// The ethtool family's id in every fixture (what the recording kernel gave out).
const FAMILY: u16 = 21;

/// The one message of a fixture.
fn one(bytes: &[u8]) -> Message<'_> {
    let all = messages(bytes).unwrap();
    assert_eq!(all.len(), 1);
    all[0]
}

fn header(index: u32, name: &str, ty: u16) -> Vec<u8> {
    nest(
        ty,
        &[
            nla(1, &index.to_ne_bytes()),
            nla(2, &[name.as_bytes(), &[0]].concat()),
        ],
    )
}

fn reply(cmd: u8, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![cmd, 1, 0, 0];
    body.extend(attrs.concat());
    message(FAMILY, 0, 1, &body)
}

#[cfg(target_endian = "little")]
#[test]
fn mlx5_rs_fec_with_lanes_and_the_histogram() {
    let bytes = fixture!("mlx5-fec-rs-stats-hist.hex");
    let fec = decode_fec(&one(&bytes), FAMILY, 4).unwrap();
    assert_eq!(fec.configured, vec![FecMode::Rs]);
    assert!(!fec.auto);
    assert_eq!(fec.active, Some(FecMode::Rs));
    assert_eq!(
        fec.corrected_blocks,
        Some(LaneCounter {
            total: 1520,
            lanes: vec![380, 412, 301, 427]
        })
    );
    assert_eq!(
        fec.uncorrectable_blocks,
        Some(LaneCounter {
            total: 2,
            lanes: vec![]
        })
    );
    assert_eq!(fec.corrected_bits.map(|c| c.total), Some(1_873_204_118));
    let bins: Vec<(u32, u32, u64)> = fec
        .histogram
        .iter()
        .map(|b| (b.low, b.high, b.value))
        .collect();
    assert_eq!(
        bins,
        vec![
            (0, 0, 81_920_044_371_002),
            (1, 1, 1498),
            (2, 8, 20),
            (9, 15, 2)
        ]
    );
    // The reply names ifindex 4: asked for another netdev, it is an error, not data.
    assert!(decode_fec(&one(&bytes), FAMILY, 5).is_err());
    // Another family's message, or another command, is refused too.
    assert!(decode_fec(&one(&bytes), FAMILY + 1, 4).is_err());
    assert!(decode_linkstate(&one(&bytes), FAMILY, 4).is_err());
}

#[cfg(target_endian = "little")]
#[test]
fn a_driver_without_fec_stats_reports_modes_and_no_counters() {
    let bytes = fixture!("netdevsim-fec-verbose-auto.hex");
    let fec = decode_fec(&one(&bytes), FAMILY, 5).unwrap();
    assert_eq!(fec.configured, vec![]);
    assert!(fec.auto);
    assert_eq!(fec.active, Some(FecMode::Off));
    assert_eq!(fec.corrected_blocks, None);
    assert_eq!(fec.uncorrectable_blocks, None);
    assert_eq!(fec.corrected_bits, None);
    assert!(fec.histogram.is_empty());
}

#[test]
fn verbose_mode_bitsets_and_an_absent_active_mode() {
    // Verbose, list form: bits 50 and 51 named as link_mode_names[] names them.
    let bit = |i: u32, name: &str| {
        nest(
            1,
            &[
                nla(1, &i.to_ne_bytes()),
                nla(2, &[name.as_bytes(), &[0]].concat()),
            ],
        )
    };
    let modes = nest(
        A_FEC_MODES,
        &[
            nla(1, &[]),
            nla(2, &121u32.to_ne_bytes()),
            nest(3, &[bit(51, "BASER"), bit(50, "RS")]),
        ],
    );
    let bytes = reply(
        MSG_FEC_GET_REPLY,
        &[
            header(7, "eth7", A_FEC_HEADER),
            modes,
            nla(A_FEC_AUTO, &[1]),
        ],
    );
    let fec = decode_fec(&one(&bytes), FAMILY, 7).unwrap();
    assert_eq!(fec.configured, vec![FecMode::Rs, FecMode::BaseR]);
    assert!(fec.auto);
    // fec_fill_reply() leaves ETHTOOL_A_FEC_ACTIVE out when no mode is active.
    assert_eq!(fec.active, None);
    // No stats nest (asked without ETHTOOL_FLAG_STATS): no counters.
    assert_eq!(fec.corrected_blocks, None);
}

#[test]
fn malformed_fec_replies_are_errors_not_data() {
    let with_stats = |stats: Vec<Vec<u8>>| {
        reply(
            MSG_FEC_GET_REPLY,
            &[header(3, "eth3", A_FEC_HEADER), nest(A_FEC_STATS, &stats)],
        )
    };
    // An array that is not a whole number of u64.
    let bytes = with_stats(vec![nla(A_FEC_STAT_CORRECTED, &[0; 12])]);
    assert!(decode_fec(&one(&bytes), FAMILY, 3).is_err());
    // More than a total and eight lanes.
    let bytes = with_stats(vec![nla(A_FEC_STAT_UNCORR, &[0; 80])]);
    assert!(decode_fec(&one(&bytes), FAMILY, 3).is_err());
    // A histogram bin whose high end is below its low end, or without a value.
    let bin = |low: u32, high: u32, val: Option<u32>| {
        let mut attrs = vec![
            nla(A_FEC_HIST_BIN_LOW, &low.to_ne_bytes()),
            nla(A_FEC_HIST_BIN_HIGH, &high.to_ne_bytes()),
        ];
        attrs.extend(val.map(|v| nla(A_FEC_HIST_BIN_VAL, &v.to_ne_bytes())));
        nest(A_FEC_STAT_HIST, &attrs)
    };
    assert!(decode_fec(&one(&with_stats(vec![bin(3, 2, Some(1))])), FAMILY, 3).is_err());
    assert!(decode_fec(&one(&with_stats(vec![bin(1, 1, None)])), FAMILY, 3).is_err());
    // An active mode that is not a FEC link mode.
    let bytes = reply(
        MSG_FEC_GET_REPLY,
        &[
            header(3, "eth3", A_FEC_HEADER),
            nla(A_FEC_ACTIVE, &12u32.to_ne_bytes()),
        ],
    );
    assert!(decode_fec(&one(&bytes), FAMILY, 3).is_err());
    // No header nest at all.
    let bytes = reply(MSG_FEC_GET_REPLY, &[nla(A_FEC_AUTO, &[0])]);
    assert!(decode_fec(&one(&bytes), FAMILY, 3).is_err());
    // Per-lane histogram values are kept in lane order.
    let mut attrs = vec![
        nla(A_FEC_HIST_BIN_LOW, &0u32.to_ne_bytes()),
        nla(A_FEC_HIST_BIN_HIGH, &0u32.to_ne_bytes()),
        nla(A_FEC_HIST_BIN_VAL, &30u64.to_ne_bytes()),
    ];
    attrs.push(nla(
        A_FEC_HIST_BIN_VAL_PER_LANE,
        &[10u64.to_ne_bytes(), 20u64.to_ne_bytes()].concat(),
    ));
    let bytes = with_stats(vec![nest(A_FEC_STAT_HIST, &attrs)]);
    let fec = decode_fec(&one(&bytes), FAMILY, 3).unwrap();
    assert_eq!(fec.histogram[0].lanes, vec![10, 20]);
    assert_eq!(fec.histogram[0].value, 30);
}

#[cfg(target_endian = "little")]
#[test]
fn eth_phy_symbol_errors_and_a_group_without_counters() {
    let bytes = fixture!("mlx5-stats-eth-phy.hex");
    let phy = decode_stats(&one(&bytes), FAMILY, 4).unwrap();
    assert_eq!(phy.symbol_errors, Some(37));
    // veth on the live kernel: the group is there, with no counter in it.
    let bytes = fixture!("veth-stats-no-counters.hex");
    let phy = decode_stats(&one(&bytes), FAMILY, 140).unwrap();
    assert_eq!(phy.symbol_errors, None);
}

#[test]
fn other_statistics_groups_are_not_eth_phy() {
    let grp = |id: u32, ss: u32, val: u64| {
        nest(
            A_STATS_GRP,
            &[
                nla(A_STATS_GRP_ID, &id.to_ne_bytes()),
                nla(A_STATS_GRP_SS_ID, &ss.to_ne_bytes()),
                nest(A_STATS_GRP_STAT, &[nla(0, &val.to_ne_bytes())]),
            ],
        )
    };
    // eth-mac (1, string set 18): its attribute 0 is not a symbol error count.
    let bytes = reply(
        MSG_STATS_GET_REPLY,
        &[header(2, "eth2", A_STATS_HEADER), grp(1, 18, 99)],
    );
    assert_eq!(
        decode_stats(&one(&bytes), FAMILY, 2).unwrap().symbol_errors,
        None
    );
    let bytes = reply(
        MSG_STATS_GET_REPLY,
        &[
            header(2, "eth2", A_STATS_HEADER),
            grp(1, 18, 99),
            grp(0, 17, 5),
        ],
    );
    assert_eq!(
        decode_stats(&one(&bytes), FAMILY, 2).unwrap().symbol_errors,
        Some(5)
    );
    // An eth-phy group of another string set is not trusted.
    let bytes = reply(
        MSG_STATS_GET_REPLY,
        &[header(2, "eth2", A_STATS_HEADER), grp(0, 18, 5)],
    );
    assert!(decode_stats(&one(&bytes), FAMILY, 2).is_err());
}

#[cfg(target_endian = "little")]
#[test]
fn link_state_with_the_reason_and_the_down_count() {
    let bytes = fixture!("mlx5-linkstate-down-no-cable.hex");
    let link = decode_linkstate(&one(&bytes), FAMILY, 4).unwrap();
    assert_eq!(link.up, Some(false));
    let ext = link.ext_state.unwrap();
    assert_eq!(
        (ext.state_name().as_str(), ext.substate_name().as_str()),
        ("no_cable", "")
    );
    assert_eq!(link.down_events, Some(7));

    let bytes = fixture!("mlx5-linkstate-down-link-training.hex");
    let link = decode_linkstate(&one(&bytes), FAMILY, 4).unwrap();
    let ext = link.ext_state.unwrap();
    assert_eq!(
        (ext.state_name().as_str(), ext.substate_name().as_str()),
        (
            "link_training_failure",
            "kr_link_partner_did_not_set_receiver_ready"
        )
    );
    assert_eq!(link.down_events, Some(12));

    for (file, up) in [
        (fixture!("veth-linkstate-up.hex"), true),
        (fixture!("veth-linkstate-down.hex"), false),
    ] {
        let link = decode_linkstate(&one(&file), FAMILY, 140).unwrap();
        assert_eq!(
            link,
            LinkState {
                up: Some(up),
                ext_state: None,
                down_events: None
            }
        );
    }
}

#[test]
fn every_extended_state_and_substate_has_its_uapi_name() {
    let name = |state, substate| {
        let e = ExtState { state, substate };
        (e.state_name(), e.substate_name())
    };
    assert_eq!(name(0, 6), ("autoneg".into(), "no_hcd".into()));
    assert_eq!(
        name(2, 5),
        (
            "link_logical_mismatch".into(),
            "rs_fec_is_not_locked".into()
        )
    );
    assert_eq!(
        name(3, 4),
        ("bad_signal_integrity".into(), "serdes_alos".into())
    );
    assert_eq!(
        name(5, 2),
        ("cable_issue".into(), "cable_test_failure".into())
    );
    assert_eq!(name(6, 0), ("eeprom_issue".into(), String::new()));
    assert_eq!(name(7, 0).0, "calibration_failure");
    assert_eq!(name(8, 0).0, "power_budget_exceeded");
    assert_eq!(name(9, 0).0, "overheat");
    assert_eq!(name(10, 1), ("module".into(), "cmis_not_ready".into()));
    // What a later kernel adds is named by its number, never dropped or panicked on.
    assert_eq!(name(11, 0).0, "state_11");
    assert_eq!(name(4, 3).1, "substate_3");
    assert_eq!(name(10, 2).1, "substate_2");
}

#[test]
fn requests_are_laid_out_as_the_kernel_parses_them() {
    use crate::netlink::ethtool::{A_HEADER_DEV_INDEX, A_HEADER_FLAGS, decode_bitset};
    use crate::netlink::{attributes, find, genl, u32_value};
    let flags_of = |bytes: &[u8], cmd: u8, header: u16| {
        let m = one(bytes);
        assert_eq!(m.ty, FAMILY);
        let g = genl::decode(&m).unwrap();
        assert_eq!((g.cmd, g.version), (cmd, 1));
        let attrs = attributes(g.attrs).unwrap();
        let h = attributes(find(&attrs, header).unwrap()).unwrap();
        assert_eq!(find(&h, A_HEADER_DEV_INDEX).and_then(u32_value), Some(9));
        find(&h, A_HEADER_FLAGS).and_then(u32_value).unwrap_or(0)
    };
    assert_eq!(
        flags_of(
            &encode_fec_get(FAMILY, 9, true, 1),
            MSG_FEC_GET,
            A_FEC_HEADER
        ),
        5
    );
    assert_eq!(
        flags_of(
            &encode_linkstate_get(FAMILY, 9, true, 1),
            MSG_LINKSTATE_GET,
            A_LINKSTATE_HEADER
        ),
        4
    );
    assert_eq!(
        flags_of(
            &encode_linkstate_get(FAMILY, 9, false, 1),
            MSG_LINKSTATE_GET,
            A_LINKSTATE_HEADER
        ),
        0
    );
    let stats = encode_stats_get(FAMILY, 9, 1);
    assert_eq!(flags_of(&stats, MSG_STATS_GET, A_STATS_HEADER), 0);
    let m = one(&stats);
    let attrs = attributes(genl::decode(&m).unwrap().attrs).unwrap();
    let groups = decode_bitset(find(&attrs, A_STATS_GROUPS).unwrap()).unwrap();
    assert!(groups.list);
    assert_eq!(groups.set_bits().collect::<Vec<_>>(), vec![STATS_ETH_PHY]);
}

/// A veth pair of the running kernel, deleted when dropped.
struct Veth(String, String);

impl Veth {
    fn new() -> Option<Veth> {
        let id = std::process::id() % 100_000;
        let (a, b) = (format!("rsphy{id}a"), format!("rsphy{id}b"));
        let _ = Command::new("ip")
            .args(["link", "del", &a])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Veth(a, b))
    }

    fn set(&self, name: &str, state: &str) {
        let ok = Command::new("ip")
            .args(["link", "set", name, state])
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

fn source(include: &str) -> PhySource {
    PhySource {
        fs: Arc::new(RealFs),
        sysfs: Path::new(crate::fs::DEFAULT_SYSFS).to_path_buf(),
        filter: NetdevFilter {
            include: Some(regex::Regex::new(include).unwrap()),
            exclude: None,
        },
        departures: Arc::default(),
        socket: Arc::default(),
    }
}

/// The running kernel: veth has link state (its carrier) and nothing else. FEC_GET answers
/// EOPNOTSUPP (no `get_fecparam`): no FEC, no error. STATS_GET answers an eth-phy group
/// with no counter: no PHY statistics.
#[test]
fn a_veth_pair_gives_its_carrier_and_no_fec() {
    let Some(veth) = Veth::new() else {
        eprintln!("skipped: cannot create a veth pair (not root?)");
        return;
    };
    veth.set(&veth.0, "up");
    veth.set(&veth.1, "down");
    let src = source(&format!("^{}$", veth.0));
    let report = src.read();
    assert_eq!(report.errors, vec![]);
    assert_eq!(report.absent, None);
    let snap = report.data.unwrap();
    assert_eq!(snap.netdevs.len(), 1);
    let nd = &snap.netdevs[0];
    assert_eq!(nd.name, veth.0);
    assert_eq!(nd.fec, None);
    assert_eq!(nd.phy, None);
    assert_eq!(
        nd.link,
        Some(LinkState {
            up: Some(false),
            ext_state: None,
            down_events: None
        })
    );

    // The socket, its family resolved, is kept for the next collection.
    assert!(src.socket.lock().unwrap().is_some());
    veth.set(&veth.1, "up");
    let report = src.read();
    assert_eq!(report.errors, vec![]);
    let snap = report.data.unwrap();
    assert_eq!(snap.netdevs[0].link.as_ref().and_then(|l| l.up), Some(true));

    // The raw answers behind that.
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", veth.0))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut socket = open().unwrap();
    let family = socket.family(ethtool::FAMILY).unwrap().id;
    let err = socket
        .request(
            |seq| encode_fec_get(family, ifindex, true, seq),
            RECEIVE_TIMEOUT,
            |_| Ok(Flow::Done),
        )
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP));
    let phy = ask(
        &mut socket,
        |seq| encode_stats_get(family, ifindex, seq),
        |m| decode_stats(m, family, ifindex),
    )
    .unwrap();
    assert_eq!(phy, Some(PhyStats::default()));
}

/// A netdev of the sysfs tree that the agent's namespace does not have (a fixture tree's
/// name with another ifindex) is not asked; when no selected one is there, the source is
/// absent.
#[test]
fn netdevs_of_another_namespace_are_not_asked() {
    let dir = tempfile::tempdir().unwrap();
    let nd = dir.path().join("class/net/lo");
    std::fs::create_dir_all(&nd).unwrap();
    std::fs::write(nd.join("ifindex"), "4242\n").unwrap();
    let mut src = source(".");
    src.sysfs = dir.path().to_path_buf();
    let report = src.read();
    assert_eq!(report.errors, vec![]);
    assert!(report.absent.is_some());
    assert!(matches!(&report.data, Some(s) if s.netdevs.is_empty()));
}
