//! Property tests of every parser of kernel text and bytes in this crate.
//!
//! Two kinds of property, per parser:
//! * **never panics**: arbitrary strings and bytes, and inputs generated close to the real
//!   format (valid text with random numbers, netlink messages with random lengths, truncation
//!   and nesting), only ever give a value or an error;
//! * **round trip**: a value rendered the way the kernel (or driver, or library) renders it
//!   parses back to the same value: counters, rates, GIDs, enumerated states, netlink
//!   attributes built by the small encoder below, ethtool string sets and statistic names.
//!
//! Case counts are kept moderate so the whole suite runs in a few seconds in a debug build.
//! A failure prints the minimized input; each one found is kept as a named unit test at the
//! end of this file.

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::fs::is_pci_address;
use crate::netlink::testing::{cstr, datagram, message, nest, nla};
use crate::netlink::{self, rtnl};
use crate::pcie::{self, PciPath};
use crate::sources::dcb::IeeePfc;
use crate::sources::dcb::wire;
use crate::sources::ethtool::names::{self, Direction, DiscardReason, Stat, StormLevel};
use crate::sources::ethtool::reader;
use crate::sources::gpu::pci_to_sysfs;
use crate::sources::host;
use crate::sources::infiniband::netlink as nl;
use crate::sources::infiniband::parse;
use crate::sources::infiniband::pma;
use crate::sources::infiniband::types::{MtuRule, PmaCounter, PmaDir};
use crate::sources::pci;
use crate::sources::topology;

/// `cases` cases, no regression files written into the source tree (a failure prints its
/// minimized input, which is then kept as a unit test here).
fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Strings that look like kernel text: digits, hex, the separators and words the formats
/// use, whitespace, and a few non-ASCII characters.
fn kernelish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "0",
        "1",
        "4",
        "9",
        "00",
        "400",
        "2.5",
        ".5",
        ".",
        ":",
        " ",
        "  ",
        "\n",
        "\t",
        "x",
        "0x",
        "X",
        "Gb/sec",
        " (",
        ")",
        "(",
        "NDR",
        "4X",
        "ACTIVE",
        "N/A",
        "-",
        "+",
        "ff",
        "fe80",
        "0000",
        "GT/s",
        "PCIe",
        "é",
        "\u{0}",
        "18446744073709551615",
        "18446744073709551616",
        "4294967296",
        "e",
        "E",
        "inf",
        "NaN",
    ]);
    prop::collection::vec(pieces, 0..12).prop_map(|v| v.concat())
}

/// Any string: half arbitrary Unicode, half near the kernel formats.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        kernelish(),
        "[ ]?(0x)?[-+]?[0-9a-fA-F]{0,9}( GT/s)?\n?",
    ]
}

// ---------------------------------------------------------------------------------------
// infiniband/parse.rs: rate, state, counters, lids, GIDs, PCI addresses, active MTU
// ---------------------------------------------------------------------------------------

/// Speed words of `ib_speed_attrs[]`, and random alphanumeric ones.
fn speed_word() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        prop::sample::select(vec![
            "SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"
        ])
        .prop_map(|s| Some(s.to_owned())),
        "[A-Za-z0-9]{1,8}".prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn ib_parsers_never_panic(text in text()) {
        if let Ok(rate) = parse::parse_rate(&text) {
            prop_assert!(rate.width > 0);
            prop_assert!(rate.speed.iter().all(|s| !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric())));
        }
        if let Ok(e) = parse::parse_enumerated(&text) {
            prop_assert_eq!(e.name.trim(), e.name.as_str());
        }
        if let Ok(v) = parse::parse_counter(&text) {
            // Only plain decimal digits are a counter.
            prop_assert!(text.trim().bytes().all(|c| c.is_ascii_digit()));
            prop_assert_eq!(text.trim().parse::<u128>().ok(), Some(u128::from(v)));
        }
        if parse::parse_hex_u32(&text).is_ok() {
            let digits = text.trim().strip_prefix("0x").unwrap_or_default();
            prop_assert!(!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_hexdigit()),
                "{:?} is not 0x and hex digits", text);
        }
        if let Ok(Some(gid)) = parse::parse_gid(&text) {
            prop_assert_eq!(parse::parse_gid(&gid), Ok(Some(gid.clone())), "idempotent");
        }
        let _ = parse::parse_int::<i64>(&text);
        let _ = parse::parse_int::<u32>(&text);
        let _ = is_pci_address(&text);
    }

    /// `sysfs_emit(buf, "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "", width,
    /// speed)` with the rate in deci-Gb/s, as `rate_show()` prints it.
    #[test]
    fn kernel_rates_round_trip(
        deci in 0u64..10_000_000,
        width in 1u32..=64,
        speed in speed_word(),
    ) {
        let text = format!(
            "{}{} Gb/sec ({}X{})\n",
            deci / 10,
            if deci % 10 != 0 { ".5" } else { "" },
            width,
            speed.as_deref().map(|s| format!(" {s}")).unwrap_or_default(),
        );
        let rate = parse::parse_rate(&text).unwrap();
        let bps = (deci / 10) * 1_000_000_000 + if deci % 10 != 0 { 500_000_000 } else { 0 };
        prop_assert_eq!(rate.bits_per_second, bps);
        prop_assert_eq!(rate.width, width);
        prop_assert_eq!(rate.speed, speed);
    }

    /// Any decimal Gb/s with up to nine fractional digits is exact to the bit.
    #[test]
    fn fractional_rates_are_exact(whole in 0u64..18_000_000_000, frac in "[0-9]{0,9}") {
        let number = if frac.is_empty() { whole.to_string() } else { format!("{whole}.{frac}") };
        let rate = parse::parse_rate(&format!("{number} Gb/sec (4X HDR)")).unwrap();
        let frac_bits = format!("{frac:0<9}").parse::<u64>().unwrap();
        prop_assert_eq!(rate.bits_per_second, whole * 1_000_000_000 + frac_bits);
    }

    #[test]
    fn huge_rates_are_errors_not_overflow(whole in 18_446_744_074u64..) {
        let text = format!("{whole} Gb/sec (4X NDR)");
        prop_assert!(parse::parse_rate(&text).is_err());
    }

    /// `"%d: %s\n"` of `state_show()`, `phys_state_show()` and `node_type_show()`.
    #[test]
    fn enumerated_round_trip(value in any::<u32>(), name in "[!-~]([ -~]{0,30}[!-~])?") {
        let e = parse::parse_enumerated(&format!("{value}: {name}\n")).unwrap();
        prop_assert_eq!(e.value, value);
        prop_assert_eq!(e.name, name);
    }

    /// `%llu` / `%u` counters, with the kernel's newline and stray whitespace.
    #[test]
    fn counters_round_trip(value in any::<u64>(), pad in "[ \t]{0,2}") {
        prop_assert_eq!(parse::parse_counter(&format!("{pad}{value}\n")), Ok(value));
        prop_assert_eq!(parse::parse_counter(&format!("{value}")), Ok(value));
    }

    #[test]
    fn counters_beyond_64_bits_are_errors(value in (u128::from(u64::MAX) + 1)..) {
        prop_assert!(parse::parse_counter(&value.to_string()).is_err());
    }

    /// `"0x%x\n"` of `lid_show()` / `sm_lid_show()`.
    #[test]
    fn lids_round_trip(value in any::<u32>()) {
        prop_assert_eq!(parse::parse_hex_u32(&format!("0x{value:x}\n")), Ok(value));
    }

    #[test]
    fn decimal_integers_round_trip(value in any::<i64>()) {
        prop_assert_eq!(parse::parse_int::<i64>(&format!("{value}\n")), Ok(value));
    }

    /// `%pI6` of `show_port_gid()`: render eight groups, parse, get them back; the all-zero
    /// GID is an empty slot.
    #[test]
    fn gids_round_trip(groups in any::<[u16; 8]>(), upper in any::<bool>()) {
        let text = groups.iter().map(|g| format!("{g:04x}")).collect::<Vec<_>>().join(":");
        let input = if upper { text.to_ascii_uppercase() } else { text.clone() };
        let parsed = parse::parse_gid(&format!("{input}\n")).unwrap();
        if groups == [0; 8] {
            prop_assert_eq!(parsed, None);
        } else {
            let gid = parsed.unwrap();
            prop_assert_eq!(&gid, &text);
            let back: Vec<u16> = gid.split(':').map(|g| u16::from_str_radix(g, 16).unwrap()).collect();
            prop_assert_eq!(back, groups.to_vec());
        }
    }

    #[test]
    fn pci_addresses_are_recognized(
        domain in 0u32..0x20000,
        bus in any::<u8>(),
        dev in 0u8..32,
        func in 0u8..8,
    ) {
        let address = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}");
        prop_assert!(is_pci_address(&address), "{}", address);
        let longer = format!("{address}0");
        let bad_function = format!("{domain:04x}:{bus:02x}:{dev:02x}.8");
        prop_assert!(!is_pci_address(&longer));
        prop_assert!(!is_pci_address(&bad_function));
    }

    /// The active MTU is an IB MTU (or the rule's floor), never larger than what fits, and
    /// grows with the netdev MTU.
    #[test]
    fn active_mtu_is_monotonic(a in any::<u32>(), b in any::<u32>()) {
        let (lo, hi) = (a.min(b), a.max(b));
        for rule in [MtuRule::Iboe, MtuRule::Rxe, MtuRule::NoHeaders] {
            let (x, y) = (parse::roce_active_mtu(rule, lo), parse::roce_active_mtu(rule, hi));
            prop_assert!(x <= y, "{:?}: {} -> {}, {} -> {}", rule, lo, x, hi, y);
            prop_assert!([0, 256, 512, 1024, 2048, 4096].contains(&y));
        }
    }
}

// ---------------------------------------------------------------------------------------
// infiniband/pma.rs
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn pma_lookups_never_panic_and_agree(
        name in prop_oneof![
            any::<String>(),
            prop::sample::select(pma::PMA_COUNTERS.iter().map(|s| s.name.to_owned()).collect::<Vec<_>>()),
            "(port_)?(unicast_|multicast_)?(rcv|xmit)_(data|packets)(_64)?",
        ],
    ) {
        if let Some(spec) = pma::spec(&name) {
            prop_assert_eq!(spec.name, name.as_str());
        }
        if let Some(current) = pma::legacy_ext_name(&name) {
            prop_assert!(pma::spec(current).is_some(), "{} maps to unknown {}", name, current);
        }
    }

    /// A counter is saturated exactly at its width's maximum, whatever the width says.
    #[test]
    fn saturation_matches_the_width(value in any::<u64>(), bits in prop::option::of(0u32..200)) {
        let counter = PmaCounter { name: "x".into(), value, bits, dir: PmaDir::Counters };
        let expect = match bits {
            Some(b) if b < 64 => u128::from(value) >= (1u128 << b) - 1,
            Some(_) => value == u64::MAX,
            None => false,
        };
        prop_assert_eq!(counter.saturated(), expect);
    }
}

// ---------------------------------------------------------------------------------------
// Netlink: the RDMA, rtnetlink and DCB properties build bytes with `netlink::testing`
// ---------------------------------------------------------------------------------------

/// A name without NUL (a C string's content).
fn c_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,40}",
        "[^\u{0}]{0,40}",
        "[a-z0-9_ ,=\"\\\\{}]{1,30}",
    ]
}

/// A valid byte string mutated: truncated, a byte changed, or a length field rewritten.
fn mutated(bytes: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = bytes.len().max(1);
    (0..len, any::<u8>(), 0u8..4, any::<u16>()).prop_map(move |(at, byte, how, word)| {
        let mut b = bytes.clone();
        match how {
            0 => b.truncate(at),
            1 => {
                if let Some(x) = b.get_mut(at) {
                    *x = byte;
                }
            }
            2 => {
                // Rewrite a 16-bit word at a 4-byte boundary: an attribute length or type.
                let at = at & !3;
                if at + 2 <= b.len() {
                    b[at..at + 2].copy_from_slice(&word.to_ne_bytes());
                }
            }
            _ => b.extend_from_slice(&word.to_ne_bytes()),
        }
        b
    })
}

/// Attributes with random types (flags included) and payload lengths, and the
/// `(type without flags, payload)` pairs a decoder must see.
fn attr_list() -> impl Strategy<Value = (Vec<u8>, Vec<(u16, Vec<u8>)>)> {
    prop::collection::vec(
        (any::<u16>(), prop::collection::vec(any::<u8>(), 0..40)),
        0..10,
    )
    .prop_map(|attrs| {
        let bytes = attrs.iter().flat_map(|(ty, p)| nla(*ty, p)).collect();
        let expect = attrs.into_iter().map(|(ty, p)| (ty & 0x3fff, p)).collect();
        (bytes, expect)
    })
}

// ---------------------------------------------------------------------------------------
// infiniband/netlink.rs: RDMA nldev messages
// ---------------------------------------------------------------------------------------

/// A `STAT_GET` reply as `stat_get_doit_default_counter()` builds it, with unknown
/// attributes and entries sprinkled in where `extra` says.
fn stat_reply(counters: &[(String, u64)], extra: bool) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = counters
        .iter()
        .map(|(name, value)| {
            let mut children = vec![
                nla(nl::ATTR_STAT_HWCOUNTER_ENTRY_NAME, &cstr(name)),
                nla(nl::ATTR_STAT_HWCOUNTER_ENTRY_VALUE, &value.to_ne_bytes()),
            ];
            if extra {
                children.insert(1, nla(999, b"future"));
            }
            nest(nl::ATTR_STAT_HWCOUNTER_ENTRY, &children)
        })
        .collect();
    let mut body = vec![
        nla(nl::ATTR_DEV_INDEX, &3u32.to_ne_bytes()),
        nla(nl::ATTR_DEV_NAME, b"mlx5_0\0"),
        nla(nl::ATTR_PORT_INDEX, &1u32.to_ne_bytes()),
    ];
    if extra {
        body.push(nla(nl::ATTR_STAT_HWCOUNTERS + 100, &[1, 2, 3]));
    }
    body.push(nest(nl::ATTR_STAT_HWCOUNTERS, &entries));
    message(nl::msg_type(nl::CMD_STAT_GET), 0, 9, &body.concat())
}

fn counters() -> impl Strategy<Value = Vec<(String, u64)>> {
    prop::collection::vec((c_name(), any::<u64>()), 0..12)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn rdma_netlink_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(messages) = netlink::messages(&bytes) {
            for m in messages {
                let _ = nl::decode_stats(m.payload);
                let _ = nl::decode_dev(m.payload);
                let _ = nl::decode_port(m.payload);
            }
        }
        let _ = netlink::attributes(&bytes);
        let _ = nl::decode_stats(&bytes);
        let _ = nl::decode_dev(&bytes);
        let _ = nl::decode_port(&bytes);
    }

    #[test]
    fn rdma_attributes_round_trip((bytes, expect) in attr_list()) {
        let attrs = netlink::attributes(&bytes).unwrap();
        let got: Vec<(u16, Vec<u8>)> = attrs.into_iter().map(|(t, p)| (t, p.to_vec())).collect();
        prop_assert_eq!(got, expect);
    }

    #[test]
    fn stat_replies_round_trip(counters in counters(), extra in any::<bool>()) {
        let bytes = stat_reply(&counters, extra);
        let messages = netlink::messages(&bytes).unwrap();
        prop_assert_eq!(messages.len(), 1);
        let netlink::Message { payload, ty, .. } = messages[0];
        prop_assert_eq!(ty, nl::msg_type(nl::CMD_STAT_GET));
        prop_assert_eq!(nl::decode_stats(payload).unwrap(), counters);
    }

    #[test]
    fn mangled_stat_replies_never_panic(
        bytes in counters().prop_flat_map(|c| mutated(stat_reply(&c, true))),
    ) {
        if let Ok(messages) = netlink::messages(&bytes) {
            for m in messages {
                let _ = nl::decode_stats(m.payload);
            }
        }
    }

    /// A dump split over datagrams: every message of a datagram comes back, in order, with
    /// DONE and errors (the errno as the kernel sends it, negative).
    #[test]
    fn rdma_datagrams_round_trip(
        parts in prop::collection::vec(
            prop_oneof![
                (c_name(), any::<u32>(), prop::option::of(c_name())).prop_map(|(d, p, n)| (0u8, d, p, n, 0i32)),
                any::<i32>().prop_map(|e| (1u8, String::new(), 0, None, e)),
                Just((2u8, String::new(), 0, None, 0)),
            ],
            0..6,
        ),
    ) {
        let mut messages = Vec::new();
        for (kind, device, port, netdev, errno) in &parts {
            messages.push(match kind {
                0 => {
                    let mut body = vec![
                        nla(nl::ATTR_DEV_INDEX, &7u32.to_ne_bytes()),
                        nla(nl::ATTR_DEV_NAME, &cstr(device)),
                        nla(nl::ATTR_PORT_INDEX, &port.to_ne_bytes()),
                    ];
                    if let Some(n) = netdev {
                        body.push(nla(nl::ATTR_NDEV_NAME, &cstr(n)));
                    }
                    message(nl::msg_type(nl::CMD_PORT_GET), 2, 1, &body.concat())
                }
                1 => {
                    let mut body = errno.to_ne_bytes().to_vec();
                    body.extend_from_slice(&[0; 16]);
                    message(2, 0, 1, &body)
                }
                _ => message(3, 2, 1, &errno.to_ne_bytes()),
            });
        }
        let bytes = datagram(&messages);
        let decoded = netlink::messages(&bytes).unwrap();
        prop_assert_eq!(decoded.len(), parts.len());
        for (m, (kind, device, port, netdev, errno)) in decoded.iter().zip(&parts) {
            // Errnos come back as the kernel means them: positive.
            match (m.errno(), m.done_errno(), kind) {
                (None, None, 0) => {
                    let entry = nl::decode_port(m.payload).unwrap().unwrap();
                    prop_assert_eq!(&entry.device, device);
                    prop_assert_eq!(entry.port, *port);
                    prop_assert_eq!(&entry.netdev, netdev);
                    let dev = nl::decode_dev(m.payload).unwrap().unwrap();
                    prop_assert_eq!((dev.index, dev.name), (7, device.clone()));
                }
                (Some(e), None, 1) => prop_assert_eq!(e, errno.saturating_neg()),
                (None, Some(e), 2) => prop_assert_eq!(e, errno.saturating_neg()),
                (_, _, k) => return Err(TestCaseError::fail(format!("kind {k} decoded as {m:?}"))),
            }
        }
    }

    /// Cut anywhere, a datagram is an error (or, below one header, nothing) — never a
    /// shorter message.
    #[test]
    fn truncated_rdma_datagrams_are_errors(counters in counters(), cut in any::<prop::sample::Index>()) {
        let bytes = stat_reply(&counters, false);
        let cut = cut.index(bytes.len());
        match netlink::messages(&bytes[..cut]) {
            Ok(messages) => prop_assert!(cut < 16 && messages.is_empty()),
            Err(_) => prop_assert!(cut >= 16),
        }
    }

    /// Requests decode back to their attributes.
    #[test]
    fn rdma_requests_round_trip(
        cmd in 0u16..64,
        dump in any::<bool>(),
        seq in any::<u32>(),
        index in any::<u32>(),
        name in c_name(),
    ) {
        let attrs = [netlink::Attr::U32(nl::ATTR_DEV_INDEX, index), netlink::Attr::Str(nl::ATTR_DEV_NAME, &name)];
        let bytes = nl::encode_request(cmd, dump, seq, &attrs);
        prop_assert_eq!(bytes.len() % 4, 0);
        let messages = netlink::messages(&bytes).unwrap();
        let netlink::Message { ty, payload, .. } = messages[0];
        prop_assert_eq!(ty, nl::msg_type(cmd));
        prop_assert_eq!(nl::decode_dev(payload).unwrap(), Some(nl::DevEntry { index, name }));
    }
}

// ---------------------------------------------------------------------------------------
// netdev/rtnl.rs: datagrams and RTM_NEWLINK
// ---------------------------------------------------------------------------------------

/// A netdev name `dev_valid_name()` accepts: 1–15 bytes, not `.`/`..`, no `/`, `:` or
/// whitespace.
fn ifname() -> impl Strategy<Value = String> {
    "[!-9;-~&&[^/]]{1,15}".prop_filter("dev_valid_name", |n| n != "." && n != "..")
}

#[derive(Debug, Clone)]
struct LinkSpec {
    index: u32,
    name: Option<String>,
    address: Option<Vec<u8>>,
    mtu: Option<u32>,
    operstate: Option<u8>,
    carrier: Option<u8>,
    changes: Option<u32>,
    up: Option<u32>,
    down: Option<u32>,
    stats: Option<(Vec<u64>, usize)>,
    unknown: Vec<(u16, Vec<u8>)>,
}

fn link_spec() -> impl Strategy<Value = LinkSpec> {
    (
        (
            any::<u32>(),
            prop::option::of(ifname()),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u8>()),
            prop::option::of(any::<u8>()),
        ),
        (
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
            prop::option::of(any::<u32>()),
            prop::option::of((prop::collection::vec(any::<u64>(), 8), 23usize..=25)),
            prop::collection::vec(
                (1000u16..0x3fff, prop::collection::vec(any::<u8>(), 0..12)),
                0..3,
            ),
        ),
    )
        .prop_map(
            |(
                (index, name, address, mtu, operstate, carrier),
                (changes, up, down, stats, unknown),
            )| {
                LinkSpec {
                    index,
                    name,
                    address,
                    mtu,
                    operstate,
                    carrier,
                    changes,
                    up,
                    down,
                    stats,
                    unknown,
                }
            },
        )
}

/// `rtnl_fill_ifinfo()`'s layout: `struct ifinfomsg`, then the attributes.
fn link_payload(spec: &LinkSpec) -> Vec<u8> {
    let mut p = vec![0, 0];
    p.extend_from_slice(&1u16.to_ne_bytes());
    p.extend_from_slice(&spec.index.to_ne_bytes());
    p.extend_from_slice(&0x1043u32.to_ne_bytes());
    p.extend_from_slice(&0u32.to_ne_bytes());
    if let Some(name) = &spec.name {
        p.extend(nla(3, &cstr(name)));
    }
    if let Some(mtu) = spec.mtu {
        p.extend(nla(4, &mtu.to_ne_bytes()));
    }
    for (ty, payload) in &spec.unknown {
        p.extend(nla(*ty, payload));
    }
    if let Some(state) = spec.operstate {
        p.extend(nla(16, &[state]));
    }
    if let Some(carrier) = spec.carrier {
        p.extend(nla(33, &[carrier]));
    }
    for (ty, v) in [(35, spec.changes), (47, spec.up), (48, spec.down)] {
        if let Some(v) = v {
            p.extend(nla(ty, &v.to_ne_bytes()));
        }
    }
    if let Some(address) = &spec.address {
        p.extend(nla(1, address));
    }
    if let Some((values, fields)) = &spec.stats {
        let mut stats: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        stats.resize(fields * 8, 0);
        p.extend(nla(23, &stats));
    }
    p
}

/// An errno as `NLMSG_ERROR` carries it, edge values included.
fn errno_field() -> impl Strategy<Value = i32> {
    prop_oneof![
        any::<i32>(),
        Just(i32::MIN),
        Just(i32::MAX),
        Just(0),
        -4095i32..=0
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn rtnl_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(messages) = netlink::messages(&bytes) {
            for m in messages {
                let _ = m.errno();
                let _ = rtnl::decode_link(m.payload);
            }
        }
        let _ = rtnl::decode_link(&bytes);
    }

    #[test]
    fn links_round_trip(spec in link_spec()) {
        let link = rtnl::decode_link(&link_payload(&spec)).unwrap();
        prop_assert_eq!(link.index, spec.index);
        prop_assert_eq!(link.name, spec.name.clone());
        prop_assert_eq!(link.mtu, spec.mtu);
        prop_assert_eq!(link.address, spec.address.as_deref().map(rtnl::format_address));
        let names = ["unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"];
        prop_assert_eq!(
            link.operstate,
            spec.operstate.map(|s| names.get(usize::from(s)).copied().unwrap_or("unknown"))
        );
        prop_assert_eq!(link.carrier, spec.carrier.map(|c| c != 0));
        prop_assert_eq!(link.carrier_changes, spec.changes);
        prop_assert_eq!(link.carrier_up_count, spec.up);
        prop_assert_eq!(link.carrier_down_count, spec.down);
        match (&link.stats, &spec.stats) {
            (Some(s), Some((v, _))) => prop_assert_eq!(
                [s.rx_packets, s.tx_packets, s.rx_bytes, s.tx_bytes,
                 s.rx_errors, s.tx_errors, s.rx_dropped, s.tx_dropped],
                [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]]
            ),
            (None, None) => {}
            (got, want) => return Err(TestCaseError::fail(format!("{got:?} vs {want:?}"))),
        }
    }

    /// Every attribute type a kernel may send (`IFLA_*` up to 70, nested ones included:
    /// `IFLA_LINKINFO`, `IFLA_AF_SPEC`, `IFLA_PROP_LIST`, ...) with an arbitrary payload, some
    /// of them nested again: `netlink-packet-route` parses each, and a bad one is skipped,
    /// never a panic.
    #[test]
    fn arbitrary_link_attributes_never_panic(
        family in prop_oneof![Just(0u8), Just(7u8), Just(10u8), any::<u8>()],
        attrs in prop::collection::vec(
            (0u16..72, any::<bool>(), prop::collection::vec(any::<u8>(), 0..48), prop::collection::vec((0u16..40, prop::collection::vec(any::<u8>(), 0..16)), 0..3)),
            0..8,
        ),
    ) {
        let mut p = vec![family, 0];
        p.extend_from_slice(&1u16.to_ne_bytes());
        p.extend_from_slice(&[1, 0, 0, 0, 0x43, 0x10, 0, 0, 0, 0, 0, 0]);
        for (ty, nested, payload, children) in &attrs {
            if *nested {
                let children: Vec<Vec<u8>> = children.iter().map(|(t, c)| nla(*t, c)).collect();
                p.extend(nest(*ty, &children));
            } else {
                p.extend(nla(*ty, payload));
            }
        }
        let _ = rtnl::decode_link(&p);
    }

    #[test]
    fn mangled_links_never_panic(bytes in link_spec().prop_flat_map(|s| mutated(link_payload(&s)))) {
        let _ = rtnl::decode_link(&bytes);
    }

    #[test]
    fn address_format_round_trips(bytes in prop::collection::vec(any::<u8>(), 0..32)) {
        let text = rtnl::format_address(&bytes);
        let back: Vec<u8> = if text.is_empty() {
            Vec::new()
        } else {
            text.split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
        };
        prop_assert_eq!(back, bytes);
    }

    #[test]
    fn rtnl_datagrams_round_trip(
        parts in prop::collection::vec(
            (any::<u16>(), any::<u16>(), any::<u32>(), prop::collection::vec(any::<u8>(), 0..40)),
            0..6,
        ),
    ) {
        let bytes = datagram(&parts.iter().map(|(t, f, s, b)| message(*t, *f, *s, b)).collect::<Vec<_>>());
        let got = netlink::messages(&bytes).unwrap();
        prop_assert_eq!(got.len(), parts.len());
        for (m, (t, f, s, b)) in got.iter().zip(&parts) {
            prop_assert_eq!((m.ty, m.flags, m.seq, m.payload), (*t, *f, *s, b.as_slice()));
        }
    }

    /// `NLMSG_ERROR` carries `-errno`; `errno()` gives it back positive.
    #[test]
    fn error_messages_give_the_errno(errno in errno_field()) {
        let mut body = errno.to_ne_bytes().to_vec();
        body.extend_from_slice(&[0; 16]);
        let bytes = message(netlink::NLMSG_ERROR, 0, 1, &body);
        let m = netlink::messages(&bytes).unwrap()[0];
        let got = m.errno().unwrap();
        prop_assert!(got >= 0 || errno > 0, "{} -> {}", errno, got);
        if errno != i32::MIN {
            prop_assert_eq!(got, -errno);
        }
    }
}

// ---------------------------------------------------------------------------------------
// dcb/wire.rs: DCB_CMD_IEEE_GET
// ---------------------------------------------------------------------------------------

fn ieee_pfc() -> impl Strategy<Value = IeeePfc> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<[u64; 8]>(),
        any::<[u64; 8]>(),
    )
        .prop_map(
            |(pfc_cap, pfc_en, mbc, delay, requests, indications)| IeeePfc {
                pfc_cap,
                pfc_en,
                mbc,
                delay,
                requests,
                indications,
            },
        )
}

/// `struct ieee_pfc` in its C layout, with `tail` bytes of a future, larger struct.
fn ieee_pfc_bytes(pfc: &IeeePfc, tail: usize) -> Vec<u8> {
    let mut b = vec![pfc.pfc_cap, pfc.pfc_en, pfc.mbc, 0];
    b.extend_from_slice(&pfc.delay.to_ne_bytes());
    b.extend_from_slice(&[0, 0]);
    for v in pfc.requests.iter().chain(&pfc.indications) {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.resize(wire::IEEE_PFC_LEN + tail, 0xa5);
    b
}

/// A reply as `dcbnl_ieee_fill()` builds it: IFNAME, the IEEE nest (ETS, MAXRATE, PFC, ...),
/// DCBX.
fn dcb_reply(ifname: &str, pfc: Option<&IeeePfc>, tail: usize, seq: u32) -> Vec<u8> {
    let mut ieee = vec![nla(1, &[0x11; 59]), nla(3, &[0; 64])];
    if let Some(pfc) = pfc {
        ieee.push(nla(wire::DCB_ATTR_IEEE_PFC, &ieee_pfc_bytes(pfc, tail)));
    }
    ieee.push(nest(6, &[nla(0, &[1, 2, 3, 4, 5, 6])]));
    let mut body = vec![0, wire::DCB_CMD_IEEE_GET, 0, 0];
    body.extend(nla(wire::DCB_ATTR_IFNAME, &cstr(ifname)));
    body.extend(nest(wire::DCB_ATTR_IEEE, &ieee));
    body.extend(nla(14, &[0x0c]));
    message(wire::RTM_GETDCB, 0, seq, &body)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn dcb_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..320), seq in 0u32..4) {
        let _ = wire::decode_datagram(&bytes, seq);
        let _ = netlink::attributes(&bytes);
        let _ = wire::parse_ieee_pfc(&bytes);
        if let Ok(messages) = netlink::messages(&bytes) {
            for m in messages {
                let _ = wire::decode_reply(&m);
            }
        }
    }

    #[test]
    fn dcb_attributes_round_trip((bytes, expect) in attr_list()) {
        let got: Vec<(u16, Vec<u8>)> =
            netlink::attributes(&bytes).unwrap().into_iter().map(|(t, p)| (t, p.to_vec())).collect();
        prop_assert_eq!(got, expect);
    }

    #[test]
    fn ieee_pfc_round_trips(
        pfc in ieee_pfc(),
        has_pfc in any::<bool>(),
        tail in 0usize..16,
        name in ifname(),
        seq in any::<u32>(),
        late in any::<bool>(),
    ) {
        let reply = dcb_reply(&name, has_pfc.then_some(&pfc), tail, seq);
        // A late answer to an earlier request may share the datagram; it is skipped.
        let bytes = if late {
            datagram(&[dcb_reply("old", None, 0, seq.wrapping_sub(1)), reply])
        } else {
            reply
        };
        let got = wire::decode_datagram(&bytes, seq).unwrap();
        prop_assert_eq!(got, Some(wire::Reply::Ieee { ifname: Some(name), pfc: has_pfc.then_some(pfc) }));
        prop_assert_eq!(wire::decode_datagram(&bytes, seq.wrapping_add(7)).unwrap(), None);
    }

    #[test]
    fn short_ieee_pfc_is_an_error(pfc in ieee_pfc(), cut in 0usize..wire::IEEE_PFC_LEN) {
        let bytes = ieee_pfc_bytes(&pfc, 0);
        prop_assert!(wire::parse_ieee_pfc(&bytes[..cut]).is_err());
    }

    #[test]
    fn mangled_dcb_replies_never_panic(
        bytes in (ieee_pfc(), ifname()).prop_flat_map(|(p, n)| mutated(dcb_reply(&n, Some(&p), 0, 5))),
    ) {
        let _ = wire::decode_datagram(&bytes, 5);
    }

    #[test]
    fn dcb_errors_round_trip(errno in errno_field(), seq in any::<u32>()) {
        let mut body = errno.to_ne_bytes().to_vec();
        body.extend_from_slice(&[0; 16]);
        let got = wire::decode_datagram(&message(netlink::NLMSG_ERROR, 0, seq, &body), seq).unwrap();
        let Some(wire::Reply::Error(got)) = got else {
            return Err(TestCaseError::fail(format!("{got:?}")));
        };
        prop_assert!(got >= 0 || errno > 0);
        if errno != i32::MIN {
            prop_assert_eq!(got, -errno);
        }
    }

    #[test]
    fn dcb_requests_carry_the_name(name in ifname(), seq in any::<u32>()) {
        let bytes = wire::encode_ieee_get(&name, seq);
        let m = netlink::messages(&bytes).unwrap()[0];
        prop_assert_eq!((m.ty, m.seq), (wire::RTM_GETDCB, seq));
        prop_assert_eq!(m.payload[1], wire::DCB_CMD_IEEE_GET);
        let attrs = netlink::attributes(&m.payload[wire::DCBMSG_LEN..]).unwrap();
        let want = cstr(&name);
        prop_assert_eq!(attrs, vec![(wire::DCB_ATTR_IFNAME, want.as_slice())]);
    }
}

// ---------------------------------------------------------------------------------------
// ethtool/names.rs and ethtool/reader.rs
// ---------------------------------------------------------------------------------------

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Rx), Just(Direction::Tx)]
}

fn stat() -> impl Strategy<Value = Stat> {
    use Stat::*;
    let p = 0u8..8;
    prop_oneof![
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseFrames {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseDurationMicros {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PfcPauseTransitions {
            priority,
            direction
        }),
        direction().prop_map(|direction| GlobalPauseFrames { direction }),
        direction().prop_map(|direction| GlobalPauseDurationMicros { direction }),
        direction().prop_map(|direction| GlobalPauseTransitions { direction }),
        prop_oneof![Just(StormLevel::Warning), Just(StormLevel::Error)]
            .prop_map(|level| PauseStormEvents { level }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PriorityBytes {
            priority,
            direction
        }),
        (p.clone(), direction()).prop_map(|(priority, direction)| PriorityPackets {
            priority,
            direction
        }),
        (
            p.clone(),
            prop_oneof![
                Just(DiscardReason::Discard),
                Just(DiscardReason::Buffer),
                Just(DiscardReason::Congestion)
            ]
        )
            .prop_map(|(priority, reason)| PriorityDiscards { priority, reason }),
        p.clone()
            .prop_map(|priority| PriorityEcnMarked { priority }),
        Just(OutOfBuffer),
        direction().prop_map(|direction| PhyDiscards { direction }),
        direction().prop_map(|direction| PhyPauseControlFrames { direction }),
        Just(PhyCorrectedBits),
        Just(PhySymbolErrors),
        Just(PhyLinkDownEvents),
        (direction(), any::<bool>()).prop_map(|(direction, u)| RdmaPackets {
            direction,
            cast: if u {
                names::Cast::Unicast
            } else {
                names::Cast::Multicast
            },
        }),
        (direction(), any::<bool>()).prop_map(|(direction, u)| RdmaBytes {
            direction,
            cast: if u {
                names::Cast::Unicast
            } else {
                names::Cast::Multicast
            },
        }),
        Just(EcnMarked),
    ]
}

/// Every name mlx5 (current and old schemes) gives `stat`.
fn driver_names(stat: Stat) -> Vec<String> {
    use Stat::*;
    let both = |p: u8, d: Direction, what: &str| {
        let d = d.as_str();
        vec![format!("{d}_prio{p}_{what}"), format!("prio{p}_{d}_{what}")]
    };
    let cast = |c: names::Cast| match c {
        names::Cast::Unicast => "unicast",
        names::Cast::Multicast => "multicast",
    };
    match stat {
        PfcPauseFrames {
            priority,
            direction,
        } => both(priority, direction, "pause"),
        PfcPauseDurationMicros {
            priority,
            direction,
        } => both(priority, direction, "pause_duration"),
        PfcPauseTransitions {
            priority,
            direction,
        } => both(priority, direction, "pause_transition"),
        GlobalPauseFrames { direction } => vec![format!("{}_global_pause", direction.as_str())],
        GlobalPauseDurationMicros { direction } => {
            vec![format!("{}_global_pause_duration", direction.as_str())]
        }
        GlobalPauseTransitions { direction } => {
            vec![format!("{}_global_pause_transition", direction.as_str())]
        }
        PauseStormEvents { level } => vec![format!("tx_pause_storm_{}_events", level.as_str())],
        PriorityBytes {
            priority,
            direction,
        } => {
            let mut v = both(priority, direction, "bytes");
            v.push(format!("prio{priority}_{}_octets", direction.as_str()));
            v
        }
        PriorityPackets {
            priority,
            direction,
        } => {
            let mut v = both(priority, direction, "packets");
            v.push(format!("prio{priority}_{}_frames", direction.as_str()));
            v
        }
        PriorityDiscards { priority, reason } => vec![format!(
            "rx_prio{priority}_{}",
            match reason {
                DiscardReason::Discard => "discards",
                DiscardReason::Buffer => "buf_discard",
                DiscardReason::Congestion => "cong_discard",
            }
        )],
        PriorityEcnMarked { priority } => vec![format!("rx_prio{priority}_marked")],
        OutOfBuffer => vec!["rx_out_of_buffer".into()],
        PhyDiscards { direction } => vec![format!("{}_discards_phy", direction.as_str())],
        PhyPauseControlFrames { direction } => {
            vec![format!("{}_pause_ctrl_phy", direction.as_str())]
        }
        PhyCorrectedBits => vec!["rx_corrected_bits_phy".into()],
        PhySymbolErrors => vec!["rx_pcs_symbol_err_phy".into()],
        PhyLinkDownEvents => vec!["link_down_events_phy".into()],
        RdmaPackets { direction, cast: c } => {
            vec![format!(
                "{}_vport_rdma_{}_packets",
                direction.as_str(),
                cast(c)
            )]
        }
        RdmaBytes { direction, cast: c } => {
            vec![format!(
                "{}_vport_rdma_{}_bytes",
                direction.as_str(),
                cast(c)
            )]
        }
        EcnMarked => vec!["rx_ecn_mark".into()],
    }
}

/// Names built from the words the real ones are made of.
fn statish() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "rx",
        "tx",
        "prio0",
        "prio3",
        "prio7",
        "prio8",
        "prio",
        "prio03",
        "global",
        "pause",
        "duration",
        "transition",
        "bytes",
        "packets",
        "octets",
        "frames",
        "discards",
        "buf",
        "cong",
        "discard",
        "marked",
        "vport",
        "rdma",
        "unicast",
        "multicast",
        "phy",
        "storm",
        "warning",
        "error",
        "events",
        "out",
        "of",
        "buffer",
        "ecn",
        "mark",
        "",
        " ",
        "é",
    ]);
    (prop::collection::vec(words, 1..7), "[ \t]{0,2}").prop_map(|(w, pad)| w.join("_") + &pad)
}

/// A string set as `ETHTOOL_GSTRINGS` returns it.
fn gstrings(names: &[String], extra_len: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x1bu32.to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes());
    b.extend_from_slice(&(names.len() as u32 + extra_len).to_ne_bytes());
    for n in names {
        let mut raw = n.as_bytes().to_vec();
        raw.resize(32, 0);
        b.extend_from_slice(&raw);
    }
    b
}

/// A name of at most 32 bytes without NUL or surrounding whitespace, as drivers write them.
fn gstring() -> impl Strategy<Value = String> {
    "[^\u{0}\\s]([^\u{0}]{0,20}[^\u{0}\\s])?".prop_filter("32 bytes", |s| s.len() <= 32)
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn stat_names_never_panic(name in prop_oneof![any::<String>(), statish()]) {
        if let Some(stat) = names::parse(&name) {
            // Only the driver's names mean something, with surrounding whitespace trimmed.
            prop_assert!(driver_names(stat).contains(&name.trim().to_owned()),
                "{:?} parsed as {:?}", name, stat);
        }
    }

    #[test]
    fn stat_names_round_trip(stat in stat(), trailing_space in any::<bool>()) {
        for name in driver_names(stat) {
            let name = if trailing_space { name + " " } else { name };
            prop_assert_eq!(names::parse(&name), Some(stat), "{:?}", name);
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn ethtool_replies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(strings) = reader::parse_strings(&bytes) {
            prop_assert!(strings.iter().all(|s| s.len() <= 32 * 3));
        }
        if let Ok(stats) = reader::parse_stats(&bytes) {
            prop_assert!(stats.len() * 8 <= bytes.len());
        }
    }

    #[test]
    fn string_sets_round_trip(names in prop::collection::vec(gstring(), 0..20), trailing in 0usize..64) {
        let mut bytes = gstrings(&names, 0);
        bytes.extend(std::iter::repeat_n(0xee, trailing));
        prop_assert_eq!(reader::parse_strings(&bytes).unwrap(), names);
    }

    #[test]
    fn string_sets_longer_than_the_reply_are_errors(names in prop::collection::vec(gstring(), 0..8), more in 1u32..) {
        prop_assert!(reader::parse_strings(&gstrings(&names, more)).is_err());
    }

    #[test]
    fn stat_values_round_trip(values in prop::collection::vec(any::<u64>(), 0..40), lie in 0u32..3) {
        let mut b = 0x1du32.to_ne_bytes().to_vec();
        b.extend_from_slice(&(values.len() as u32 + lie).to_ne_bytes());
        for v in &values {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        match reader::parse_stats(&b) {
            Ok(got) => prop_assert!(lie == 0 && got == values),
            Err(_) => prop_assert!(lie > 0),
        }
    }
}

// ---------------------------------------------------------------------------------------
// pci.rs and pcie.rs: AER, ACS, link speed, ids, canonical paths
// ---------------------------------------------------------------------------------------

/// An AER type name as `aer_stats_attrs` prints them: no whitespace.
fn aer_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "RxErr",
            "BadTLP",
            "BadDLLP",
            "Rollover",
            "Timeout",
            "Undefined",
            "DLP",
            "SDES",
            "TLP",
            "FCP",
            "CmpltTO",
            "CmpltAbrt",
            "UnxCmplt",
            "RxOF",
            "MalfTLP",
            "ECRC",
            "UnsupReq",
            "ACSViol"
        ])
        .prop_map(str::to_owned),
        "[!-~]{1,20}".prop_filter("not a total", |n| !n.starts_with("TOTAL_ERR_")),
    ]
}

/// Extended capabilities at random offsets, the last one possibly ACS.
fn config_space() -> impl Strategy<Value = (Vec<u8>, pci::AcsState)> {
    (
        prop::collection::btree_set(0x41usize..0x3ff, 0..6),
        prop::option::of(any::<u16>()),
        1u32..0xffff,
    )
        .prop_map(|(slots, acs, other)| {
            let mut config = vec![0u8; 4096];
            let mut offsets: Vec<usize> = vec![0x100];
            offsets.extend(slots.into_iter().map(|s| s * 4));
            let other = if other == 0x000d { 1 } else { other };
            for (i, &at) in offsets.iter().enumerate() {
                let next = offsets.get(i + 1).copied().unwrap_or(0);
                let last = i + 1 == offsets.len();
                let id = if last && acs.is_some() { 0x000d } else { other };
                let header = id | (1 << 16) | ((next as u32) << 20);
                config[at..at + 4].copy_from_slice(&header.to_le_bytes());
                if last && let Some(ctrl) = acs {
                    config[at + 6..at + 8].copy_from_slice(&ctrl.to_le_bytes());
                }
            }
            let expect = match acs {
                Some(ctrl) if ctrl & (0x0004 | 0x0008 | 0x0020) != 0 => pci::AcsState::Redirect,
                Some(_) => pci::AcsState::NoRedirect,
                None => pci::AcsState::NoCapability,
            };
            (config, expect)
        })
}

/// A canonical sysfs path of a PCI function under a host bridge.
fn pci_chain() -> impl Strategy<Value = (String, Vec<String>)> {
    (
        (0u32..0x10010, any::<u8>()),
        prop::collection::vec((0u32..0x10010, any::<u8>(), 0u8..32, 0u8..8), 1..6),
    )
        .prop_map(|((d, b), chain)| {
            (
                format!("pci{d:04x}:{b:02x}"),
                chain
                    .into_iter()
                    .map(|(d, b, dev, f)| format!("{d:04x}:{b:02x}:{dev:02x}.{f}"))
                    .collect(),
            )
        })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn pci_parsers_never_panic(text in text(), bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = pci::parse_aer(&text, "correctable");
        if let Some(speed) = pcie::parse_link_speed(&text) {
            prop_assert!(speed.is_finite() && speed > 0.0, "{:?} -> {}", text, speed);
        }
        if pcie::parse_hex_id(&text).is_some() {
            let digits = text.trim().strip_prefix("0x").unwrap_or_default();
            prop_assert!(!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_hexdigit()),
                "{:?} is not 0x and hex digits", text);
        }
        let _ = pci::acs_state(&bytes);
        let _ = PciPath::from_canonical(&PathBuf::from(&text));
    }

    /// Config space is read as root (4096 bytes) or not (64); either way, any content.
    #[test]
    fn acs_walk_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0x104..0x140),
        full in prop::collection::vec(any::<u32>(), 1024),
    ) {
        let _ = pci::acs_state(&bytes);
        let full: Vec<u8> = full.iter().flat_map(|w| w.to_le_bytes()).collect();
        let _ = pci::acs_state(&full);
    }

    #[test]
    fn acs_capability_is_found((config, expect) in config_space()) {
        prop_assert_eq!(pci::acs_state(&config), expect);
    }

    /// `aer_stats_dev_attr()`: `"%s %llu\n"` per type, then `"TOTAL_ERR_* %llu\n"`.
    #[test]
    fn aer_files_round_trip(
        types in prop::collection::vec((aer_name(), any::<u64>()), 0..20),
        total in prop::option::of(any::<u64>()),
    ) {
        let mut text: String = types.iter().map(|(n, c)| format!("{n} {c}\n")).collect();
        if let Some(t) = total {
            text.push_str(&format!("TOTAL_ERR_COR {t}\n"));
        }
        match pci::parse_aer(&text, "correctable") {
            Some(aer) => {
                prop_assert_eq!(aer.total, total);
                prop_assert_eq!(aer.by_type, types);
            }
            None => prop_assert!(types.is_empty() && total.is_none()),
        }
    }

    /// `current_link_speed`: `"%s PCIe\n"` of the speed string (`"2.5 GT/s"` … `"64.0 GT/s"`),
    /// and any positive decimal.
    #[test]
    fn link_speeds_round_trip(
        v in prop_oneof![
            prop::sample::select(vec![2.5f64, 5.0, 8.0, 16.0, 32.0, 64.0]),
            (1e-3f64..1e3),
            any::<f64>().prop_filter("positive", |v| v.is_finite() && *v > 0.0),
        ],
        pcie_suffix in any::<bool>(),
    ) {
        let text = format!("{v:?} GT/s{}\n", if pcie_suffix { " PCIe" } else { "" });
        let got = pcie::parse_link_speed(&text);
        let expect = Some(v * 1e9).filter(|s| s.is_finite());
        prop_assert_eq!(got, expect, "{:?}", text);
    }

    #[test]
    fn hex_ids_round_trip(v in any::<u32>(), width in 0usize..9) {
        prop_assert_eq!(pcie::parse_hex_id(&format!("0x{v:0width$x}\n")), Some(v));
        prop_assert_eq!(parse::parse_hex_u32(&format!("0x{v:0width$x}\n")), Ok(v));
    }

    #[test]
    fn canonical_paths_round_trip((host, chain) in pci_chain(), prefix in "(/sys/devices|/host/sys/devices)") {
        let path = PathBuf::from(format!("{prefix}/{host}/{}", chain.join("/")));
        let parsed = PciPath::from_canonical(&path).unwrap();
        prop_assert_eq!(&parsed.host_bridge, &host);
        prop_assert_eq!(&parsed.chain, &chain);
        prop_assert_eq!(parsed.address(), chain.last().unwrap().as_str());
        prop_assert_eq!(parsed.bridges().len() + 1, chain.len());
        prop_assert!(parsed.switches().len() <= chain.len() / 2);
    }

    #[test]
    fn distance_is_symmetric(
        (ha, a) in pci_chain(),
        (hb, b) in pci_chain(),
        shared in 0usize..4,
        na in prop::option::of(-1i64..3),
        nb in prop::option::of(-1i64..3),
    ) {
        // Give the two paths a common prefix, as functions under one switch have.
        let mut b = b;
        let k = shared.min(a.len() - 1).min(b.len() - 1);
        b[..k].clone_from_slice(&a[..k]);
        let hb = if k > 0 { ha.clone() } else { hb };
        let pa = PciPath { host_bridge: ha, chain: a };
        let pb = PciPath { host_bridge: hb, chain: b };
        prop_assert_eq!(pcie::distance(&pa, na, &pb, nb), pcie::distance(&pb, nb, &pa, na));
    }
}

// ---------------------------------------------------------------------------------------
// host.rs, topology.rs, gpu: command line, limits, rail maps, NVML bus ids
// ---------------------------------------------------------------------------------------

fn limit_value() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        any::<u64>().prop_map(Some),
        (0u64..1 << 30).prop_map(Some)
    ]
}

/// A rail map key: a device, `device/port` or PCI address; no `,` or `=`, trimmed.
fn rail_key() -> impl Strategy<Value = String> {
    "[^,=\\s]([^,=]{0,20}[^,=\\s])?"
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn host_parsers_never_panic(text in text()) {
        let params = host::iommu_params(&text);
        for p in params.split_whitespace() {
            prop_assert!(text.split_whitespace().any(|t| t == p));
        }
        let _ = host::iommu_mode(1, &[], &text);
        let _ = host::parse_memlock(&text);
        let _ = host::parse_memlock(&format!("Max locked memory{text}"));
        let _ = topology::parse_rail_map(&text);
        let _ = pci_to_sysfs(&text);
    }

    /// `proc_pid_limits()`: `"%-25s %-20s %-20s %-10s\n"`, `unlimited` or the value.
    #[test]
    fn memlock_round_trips(soft in limit_value(), hard in limit_value(), before in 0usize..8) {
        let show = |v: Option<u64>| v.map_or("unlimited".to_owned(), |v| v.to_string());
        let mut text = String::from("Limit                     Soft Limit           Hard Limit           Units     \n");
        for i in 0..before {
            text.push_str(&format!("{:<25} {:<20} {:<20} {:<10}\n", format!("Max thing {i}"), "unlimited", 5, "bytes"));
        }
        text.push_str(&format!("{:<25} {:<20} {:<20} {:<10}\n", "Max locked memory", show(soft), show(hard), "bytes"));
        text.push_str("Max address space         unlimited            unlimited            bytes     \n");
        prop_assert_eq!(host::parse_memlock(&text), Some(host::Limit { soft, hard }));
    }

    #[test]
    fn iommu_params_are_picked_from_the_command_line(
        tokens in prop::collection::vec(prop_oneof![
            prop::sample::select(vec!["iommu=pt", "iommu=off", "intel_iommu=on", "amd_iommu=off",
                "iommu.passthrough=1", "iommu.strict=0", "quiet", "ro", "root=/dev/sda1",
                "iommu_foo=1", "intel_iommu_x"]).prop_map(str::to_owned),
            "[a-z_.=0-9]{1,12}",
        ], 0..12),
        sep in "[ \t]{1,3}",
    ) {
        let cmdline = tokens.join(&sep) + "\n";
        let want: Vec<&str> = tokens.iter().map(String::as_str).filter(|t| {
            let key = t.split('=').next().unwrap_or_default();
            key == "iommu" || key.starts_with("iommu.") || key == "intel_iommu" || key == "amd_iommu"
        }).collect();
        prop_assert_eq!(host::iommu_params(&cmdline), want.join(" "));
    }

    #[test]
    fn rail_maps_round_trip(
        map in prop::collection::btree_map(rail_key(), any::<u32>(), 0..10),
        pad in "[ ]{0,2}",
    ) {
        let text = map.iter().map(|(k, v)| format!("{pad}{k}{pad}={pad}{v}{pad}")).collect::<Vec<_>>().join(",");
        prop_assert_eq!(topology::parse_rail_map(&text), Ok(map.clone()));
        if let Some((k, v)) = map.iter().next() {
            let twice = format!("{text},{k}={v}");
            prop_assert!(topology::parse_rail_map(&twice).is_err());
        }
    }

    /// NVML prints `%08X:%02X:%02X.%X` (upper case, eight-digit domain); sysfs
    /// `%04x:%02x:%02x.%d`.
    #[test]
    fn nvml_bus_ids_become_sysfs_addresses(
        domain in prop_oneof![Just(0u32), 0u32..0x20000],
        bus in any::<u8>(),
        dev in 0u8..32,
        func in 0u8..8,
    ) {
        let sysfs = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}");
        let nvml = format!("{domain:08X}:{bus:02X}:{dev:02X}.{func:X}");
        prop_assert_eq!(pci_to_sysfs(&nvml), sysfs.clone());
        prop_assert_eq!(pci_to_sysfs(&sysfs), sysfs.clone());
        prop_assert!(is_pci_address(&pci_to_sysfs(&nvml)));
    }
}

// ---------------------------------------------------------------------------------------
// infiniband/verbs.rs and ethtool/mod.rs: what libibverbs and the string set hand over
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(512))]

    /// `enum ibv_mtu` to bytes: 1–5 are 256–4096, anything else is no value.
    #[test]
    fn verbs_mtus_round_trip(value in any::<i32>(), log in 8u32..=12) {
        match crate::sources::infiniband::verbs::mtu_bytes(value) {
            Some(bytes) => prop_assert!((1..=5).contains(&value) && bytes == 128 << value),
            None => prop_assert!(!(1..=5).contains(&value)),
        }
        let bytes = 1u32 << log;
        prop_assert_eq!(crate::sources::infiniband::verbs::mtu_bytes(log as i32 - 7), Some(bytes));
    }

    /// A driver's string set, duplicates and odd names included, is sorted into known
    /// statistics (each once, first value wins) and, when asked for, others (each once).
    #[test]
    fn string_sets_sort_into_known_and_other(
        raw in prop::collection::vec(
            (prop_oneof![statish(), stat().prop_map(|s| driver_names(s)[0].clone()), any::<String>()], any::<u64>()),
            0..24,
        ),
        include in prop::option::of(0usize..5),
    ) {
        // Compiled once: a regex build per case would dominate the run time.
        static PATTERNS: std::sync::OnceLock<Vec<regex::Regex>> = std::sync::OnceLock::new();
        let patterns = PATTERNS.get_or_init(|| {
            ["", "^rx", "phy", "[,\" ]", "^$"].iter().map(|p| regex::Regex::new(p).unwrap()).collect()
        });
        let re = include.map(|i| &patterns[i]);
        let stats = crate::sources::ethtool::NetdevStats::from_raw("e\"0", raw.clone(), re);
        prop_assert_eq!(stats.reported, raw.len());
        let mut want_known: Vec<(Stat, u64)> = Vec::new();
        let mut want_other: Vec<(String, u64)> = Vec::new();
        for (name, value) in &raw {
            match names::parse(name) {
                Some(stat) if !want_known.iter().any(|(s, _)| *s == stat) => want_known.push((stat, *value)),
                Some(_) => {}
                None if re.is_some_and(|re| re.is_match(name))
                    && !want_other.iter().any(|(n, _)| n == name) => want_other.push((name.clone(), *value)),
                None => {}
            }
        }
        prop_assert_eq!(stats.known, want_known);
        prop_assert_eq!(stats.other, want_other);
    }
}
