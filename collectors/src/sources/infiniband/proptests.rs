//! Property tests of the InfiniBand parsers: sysfs text (`parse.rs`: rate, state, counters,
//! lids, GIDs, active MTU), PMA counter names (`pma.rs`), RDMA nldev messages (`netlink.rs`)
//! and what libibverbs hands over (`verbs.rs`). See [`crate::strategies`] for the two kinds
//! of property.

use proptest::prelude::*;

use super::netlink as nl;
use super::types::{MtuRule, PmaCounter, PmaDir};
use super::{parse, pma, verbs};
use crate::fs::is_pci_address;
use crate::netlink;
use crate::netlink::testing::{cstr, datagram, message, nest, nla};
use crate::strategies::{attr_list, c_name, config, mutated, text};

// parse.rs: rate, state, counters, lids, GIDs, active MTU

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

proptest! {
    #![proptest_config(config(256))]

    /// `"0x%x\n"` with the zero padding some attributes print.
    #[test]
    fn padded_hex_ids_round_trip(v in any::<u32>(), width in 0usize..9) {
        prop_assert_eq!(parse::parse_hex_u32(&format!("0x{v:0width$x}\n")), Ok(v));
    }
}

// pma.rs

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

// netlink.rs: RDMA nldev messages

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

// verbs.rs: what libibverbs hands over

proptest! {
    #![proptest_config(config(512))]

    /// `enum ibv_mtu` to bytes: 1–5 are 256–4096, anything else is no value.
    #[test]
    fn verbs_mtus_round_trip(value in any::<i32>(), log in 8u32..=12) {
        match verbs::mtu_bytes(value) {
            Some(bytes) => prop_assert!((1..=5).contains(&value) && bytes == 128 << value),
            None => prop_assert!(!(1..=5).contains(&value)),
        }
        let bytes = 1u32 << log;
        prop_assert_eq!(verbs::mtu_bytes(log as i32 - 7), Some(bytes));
    }
}
