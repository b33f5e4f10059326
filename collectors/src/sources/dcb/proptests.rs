//! Property tests of the DCB decoders (`wire.rs`: `DCB_CMD_IEEE_GET`). See
//! [`crate::strategies`] for the two kinds of property.

use proptest::prelude::*;

use super::IeeePfc;
use super::wire;
use crate::netlink;
use crate::netlink::testing::{cstr, datagram, message, nest, nla};
use crate::strategies::{attr_list, config, errno_field, ifname, mutated};

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
