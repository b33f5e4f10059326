//! Property tests of the netlink framing ([`crate::netlink`]) and the rtnetlink decoders
//! ([`super::rtnl`]): datagrams and `RTM_NEWLINK`. See [`crate::strategies`] for the two
//! kinds of property.

use proptest::prelude::*;

use super::testing::{cstr, datagram, message, nest, nla};
use crate::netlink::{self, rtnl};
use crate::strategies::{config, errno_field, ifname, mutated};

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
