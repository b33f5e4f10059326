//! The bytes of `RTM_GETDCB` / `DCB_CMD_IEEE_GET` (`include/uapi/linux/dcbnl.h`,
//! `net/dcb/dcbnl.c`): the request, and the parts of the reply railscope reads.
//!
//! `netlink-packet-route` does not implement DCB messages, so they are built and parsed here,
//! as pure functions over bytes tested against byte-level fixtures
//! (`tests/fixtures/dcb/*.hex`).
//!
//! Request: `nlmsghdr { type RTM_GETDCB, flags NLM_F_REQUEST }`, `struct dcbmsg
//! { dcb_family AF_UNSPEC, cmd DCB_CMD_IEEE_GET, dcb_pad }`, attribute `DCB_ATTR_IFNAME`
//! (NUL-terminated). Reply (`dcbnl_ieee_fill()`): the same header and `dcbmsg`, then
//! `DCB_ATTR_IFNAME`, the nest `DCB_ATTR_IEEE` holding `DCB_ATTR_IEEE_ETS`,
//! `DCB_ATTR_IEEE_MAXRATE`, `DCB_ATTR_IEEE_PFC`, `DCB_ATTR_DCB_BUFFER`, the
//! `DCB_ATTR_IEEE_APP_TABLE` nest and peer attributes, each only when the driver has the op
//! and it succeeded, then `DCB_ATTR_DCBX`. A netdev without DCB ops (or a kernel without
//! `CONFIG_DCB`) answers `NLMSG_ERROR` with `-EOPNOTSUPP`.
//!
//! `struct ieee_pfc` in its natural C layout (136 bytes on every Linux ABI: `__u64`
//! fields at offsets that are multiples of 8 either way):
//!
//! | offset | field |
//! |---|---|
//! | 0 | `__u8 pfc_cap` |
//! | 1 | `__u8 pfc_en` (bit *p* = priority *p*) |
//! | 2 | `__u8 mbc` |
//! | 3 | padding |
//! | 4 | `__u16 delay` |
//! | 6 | padding (2 bytes) |
//! | 8 | `__u64 requests[8]` |
//! | 72 | `__u64 indications[8]` |
//!
//! Values are in host byte order. The netlink framing is [`crate::netlink`]'s.

use super::IeeePfc;
use crate::netlink::{self, Attr, DecodeError, Message, NLM_F_REQUEST, NLMSG_ERROR, attributes};

/// `RTM_GETDCB`.
pub const RTM_GETDCB: u16 = 78;
/// `DCB_CMD_IEEE_GET`.
pub const DCB_CMD_IEEE_GET: u8 = 21;
/// `DCB_ATTR_IFNAME` (NUL-terminated string).
pub const DCB_ATTR_IFNAME: u16 = 1;
/// `DCB_ATTR_IEEE` (nest).
pub const DCB_ATTR_IEEE: u16 = 13;
/// `DCB_ATTR_IEEE_PFC` (`struct ieee_pfc`), inside `DCB_ATTR_IEEE`.
pub const DCB_ATTR_IEEE_PFC: u16 = 2;
/// `IEEE_8021QAZ_MAX_TCS`: priorities (and traffic classes) per netdev.
pub const IEEE_8021QAZ_MAX_TCS: usize = 8;
/// `sizeof(struct ieee_pfc)`.
pub const IEEE_PFC_LEN: usize = 136;
/// `sizeof(struct dcbmsg)`.
pub const DCBMSG_LEN: usize = 4;

const REQUESTS_AT: usize = 8;
const INDICATIONS_AT: usize = REQUESTS_AT + 8 * IEEE_8021QAZ_MAX_TCS;

/// What the kernel answered to `DCB_CMD_IEEE_GET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The IEEE configuration; `pfc` is `None` when the reply has no `DCB_ATTR_IEEE_PFC`
    /// (the driver has no `ieee_getpfc` op, or it failed).
    Ieee {
        /// `DCB_ATTR_IFNAME` of the reply.
        ifname: Option<String>,
        /// `DCB_ATTR_IEEE_PFC`.
        pfc: Option<IeeePfc>,
    },
    /// `NLMSG_ERROR` with this (positive) errno; 0 is a bare acknowledgement.
    Error(i32),
}

/// Encodes the `DCB_CMD_IEEE_GET` request for `ifname`. No `NLM_F_ACK`: a success is
/// answered by the reply alone, a failure by `NLMSG_ERROR`.
pub fn encode_ieee_get(ifname: &str, seq: u32) -> Vec<u8> {
    // struct dcbmsg: AF_UNSPEC, cmd, pad.
    let dcbmsg = [0, DCB_CMD_IEEE_GET, 0, 0];
    let attrs = [Attr::Str(DCB_ATTR_IFNAME, ifname)];
    netlink::encode(RTM_GETDCB, NLM_F_REQUEST, seq, &dcbmsg, &attrs)
}

/// Decodes `struct ieee_pfc`. A longer payload (a future kernel's larger struct) is accepted;
/// a shorter one is an error.
pub fn parse_ieee_pfc(bytes: &[u8]) -> Result<IeeePfc, DecodeError> {
    if bytes.len() < IEEE_PFC_LEN {
        return Err(DecodeError(format!(
            "DCB_ATTR_IEEE_PFC has {} bytes, struct ieee_pfc needs {IEEE_PFC_LEN}",
            bytes.len()
        )));
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_ne_bytes(b)
    };
    Ok(IeeePfc {
        pfc_cap: bytes[0],
        pfc_en: bytes[1],
        mbc: bytes[2],
        delay: u16::from_ne_bytes([bytes[4], bytes[5]]),
        requests: std::array::from_fn(|i| u64_at(REQUESTS_AT + 8 * i)),
        indications: std::array::from_fn(|i| u64_at(INDICATIONS_AT + 8 * i)),
    })
}

/// Decodes one reply message.
pub fn decode_reply(message: &Message<'_>) -> Result<Reply, DecodeError> {
    if message.ty == NLMSG_ERROR {
        return message
            .errno()
            .map(Reply::Error)
            .ok_or_else(|| DecodeError("short NLMSG_ERROR".into()));
    }
    if message.ty != RTM_GETDCB {
        return Err(DecodeError(format!(
            "unexpected message type {}",
            message.ty
        )));
    }
    let dcbmsg = message
        .payload
        .get(..DCBMSG_LEN)
        .ok_or_else(|| DecodeError("no struct dcbmsg".into()))?;
    if dcbmsg[1] != DCB_CMD_IEEE_GET {
        return Err(DecodeError(format!(
            "reply to DCB command {}, expected DCB_CMD_IEEE_GET",
            dcbmsg[1]
        )));
    }
    let mut ifname = None;
    let mut pfc = None;
    for (ty, payload) in attributes(&message.payload[DCBMSG_LEN..])? {
        match ty {
            DCB_ATTR_IFNAME => {
                let name = netlink::c_string(payload);
                ifname = Some(String::from_utf8_lossy(name).into_owned());
            }
            DCB_ATTR_IEEE => {
                for (ty, payload) in attributes(payload)? {
                    if ty == DCB_ATTR_IEEE_PFC {
                        pfc = Some(parse_ieee_pfc(payload)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Reply::Ieee { ifname, pfc })
}

/// Decodes the reply to request `seq` from a datagram; `None` when the datagram holds no
/// message of that request (a late answer to an earlier one). The source's requests go
/// through [`crate::netlink::Socket::request`]; this is for byte captures.
#[cfg(test)]
pub fn decode_datagram(datagram: &[u8], seq: u32) -> Result<Option<Reply>, DecodeError> {
    for message in netlink::messages(datagram)? {
        if message.seq == seq {
            return decode_reply(&message).map(Some);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::hexfixture::hex;

    macro_rules! fixture {
        ($name:literal) => {
            hex(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/dcb/",
                $name
            )))
        };
    }

    /// Sequence number of every fixture reply.
    const SEQ: u32 = 2;

    // The fixtures hold little-endian captures (x86_64, aarch64).
    #[cfg(target_endian = "little")]
    #[test]
    fn mlx5_pfc_on_priority_3() {
        let reply = decode_datagram(&fixture!("mlx5-pfc-prio3.hex"), SEQ)
            .unwrap()
            .unwrap();
        let Reply::Ieee { ifname, pfc } = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(ifname.as_deref(), Some("ens1f0np0"));
        let pfc = pfc.unwrap();
        assert_eq!(pfc.pfc_cap, 8);
        assert_eq!(pfc.pfc_en, 0x08);
        assert_eq!(pfc.mbc, 0);
        assert_eq!(pfc.delay, 7);
        assert_eq!((0..8).filter(|&p| pfc.enabled(p)).collect::<Vec<_>>(), [3]);
        assert_eq!(pfc.requests, [0, 0, 0, 1_234_567, 0, 0, 0, 0]);
        assert_eq!(pfc.indications, [0, 0, 0, 89_012, 0, 0, 0, 0]);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn ice_pfc_on_priorities_3_and_4() {
        let reply = decode_datagram(&fixture!("ice-pfc-prio3-4.hex"), SEQ)
            .unwrap()
            .unwrap();
        let Reply::Ieee { ifname, pfc } = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(ifname.as_deref(), Some("ens801f0"));
        let pfc = pfc.unwrap();
        assert_eq!(pfc.pfc_en, 0x18);
        assert_eq!(
            (0..8).filter(|&p| pfc.enabled(p)).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!(pfc.requests, [0, 0, 0, 4_096, 17, 0, 0, 0]);
        assert_eq!(pfc.indications, [0, 0, 0, 1_048_576, 2, 0, 0, 0]);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn reply_without_pfc_attribute() {
        let reply = decode_datagram(&fixture!("no-pfc-attr.hex"), SEQ)
            .unwrap()
            .unwrap();
        assert_eq!(
            reply,
            Reply::Ieee {
                ifname: Some("ens2f0np0".into()),
                pfc: None
            }
        );
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn eopnotsupp_error_reply() {
        let bytes = fixture!("veth-eopnotsupp.hex");
        assert_eq!(
            decode_datagram(&bytes, SEQ).unwrap(),
            Some(Reply::Error(libc::EOPNOTSUPP))
        );
        // A reply to another request is not ours.
        assert_eq!(decode_datagram(&bytes, SEQ + 1).unwrap(), None);
        // The error echoes our request, byte for byte.
        assert_eq!(&bytes[20..], &encode_ieee_get("veth0", SEQ)[..]);
    }

    #[test]
    fn request_encoding() {
        let req = encode_ieee_get("ens1f0np0", 2);
        assert_eq!(
            req,
            [
                &36u32.to_ne_bytes()[..],
                &78u16.to_ne_bytes(),
                &1u16.to_ne_bytes(),
                &2u32.to_ne_bytes(),
                &0u32.to_ne_bytes(),
                &[0, 21, 0, 0],
                &14u16.to_ne_bytes(),
                &1u16.to_ne_bytes(),
                b"ens1f0np0\0",
                &[0, 0],
            ]
            .concat()
        );
    }

    #[test]
    fn truncated_pfc_and_attributes_are_errors() {
        assert!(parse_ieee_pfc(&[0; IEEE_PFC_LEN - 1]).is_err());
        assert!(parse_ieee_pfc(&[0; IEEE_PFC_LEN + 8]).is_ok());
        let msg = Message {
            ty: RTM_GETDCB,
            flags: 0,
            seq: 1,
            payload: &[0, 21],
        };
        assert!(decode_reply(&msg).is_err());
        let msg = Message {
            ty: RTM_GETDCB,
            flags: 0,
            seq: 1,
            payload: &[0, 17, 0, 0],
        };
        assert!(decode_reply(&msg).is_err(), "not a reply to IEEE_GET");
    }

    #[test]
    fn pfc_layout_offsets() {
        let mut bytes = vec![0u8; IEEE_PFC_LEN];
        bytes[0] = 4;
        bytes[1] = 0b1000_0001;
        bytes[2] = 1;
        bytes[3] = 0xee; // padding: ignored
        bytes[4..6].copy_from_slice(&300u16.to_ne_bytes());
        bytes[8..16].copy_from_slice(&11u64.to_ne_bytes());
        bytes[64..72].copy_from_slice(&u64::MAX.to_ne_bytes());
        bytes[72..80].copy_from_slice(&22u64.to_ne_bytes());
        bytes[128..136].copy_from_slice(&33u64.to_ne_bytes());
        let pfc = parse_ieee_pfc(&bytes).unwrap();
        assert_eq!(
            (pfc.pfc_cap, pfc.pfc_en, pfc.mbc, pfc.delay),
            (4, 0x81, 1, 300)
        );
        assert_eq!(pfc.requests[0], 11);
        assert_eq!(pfc.requests[7], u64::MAX);
        assert_eq!(pfc.indications[0], 22);
        assert_eq!(pfc.indications[7], 33);
        assert!(pfc.enabled(0) && pfc.enabled(7) && !pfc.enabled(3));
    }
}
