//! rtnetlink (`NETLINK_ROUTE`), shared by the `netdev`, `dcb` and `ethtool` sources: the
//! socket, and the `RTM_GETLINK` dump (`include/uapi/linux/rtnetlink.h`,
//! `include/uapi/linux/if_link.h`) decoded with `netlink-packet-route`. The framing is
//! [`super`]'s; DCB's messages are in `sources/dcb/wire.rs`.
//!
//! Encoding and decoding are pure functions over bytes; [`RtnlSocket`] only moves bytes.
//! `netlink-packet-route` types stay inside this module: callers get a plain [`Link`].

use std::io;
use std::time::Duration;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlaBuffer,
    NlasIterator, ParseableParametrized,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkHeader, LinkMessage, State};
use netlink_sys::protocols::NETLINK_ROUTE;

use super::{DecodeError, Flow, Message, Socket};
use crate::error::{CollectError, Origin};

/// `RTM_NEWLINK`, the type of every message of a link dump.
pub const RTM_NEWLINK: u16 = 16;
/// `sizeof(struct ifinfomsg)`: the link header before a link's attributes.
pub const IFINFOMSG_LEN: usize = 16;
/// How long one rtnetlink receive may wait.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(3);
/// The command of the link dump, as errors name it.
pub const GETLINK: &str = "RTM_GETLINK";

/// The error of a link dump that failed (`rtnetlink RTM_GETLINK`).
pub fn getlink_error(err: &io::Error) -> CollectError {
    CollectError::netlink(None, Origin::RTNETLINK, GETLINK, err)
}

/// A `NETLINK_ROUTE` socket.
#[derive(Debug)]
pub struct RtnlSocket {
    socket: Socket,
}

impl RtnlSocket {
    /// Opens and connects the socket to the kernel; each receive waits at most `timeout`.
    pub fn open(timeout: Duration) -> io::Result<Self> {
        Ok(RtnlSocket {
            socket: Socket::open(NETLINK_ROUTE, timeout)?,
        })
    }

    /// Sends a request and reads its reply ([`Socket::request`]).
    pub fn request(
        &mut self,
        encode: impl FnOnce(u32) -> Vec<u8>,
        budget: Duration,
        on_reply: impl FnMut(&Message<'_>) -> Result<Flow, DecodeError>,
    ) -> io::Result<()> {
        self.socket.request(encode, budget, on_reply)
    }

    /// How long one receive may wait.
    pub fn timeout(&self) -> Duration {
        self.socket.timeout()
    }

    /// Dumps every link of the socket's network namespace (`RTM_GETLINK`, `NLM_F_DUMP`).
    /// Every receive is bounded by the timeout; the whole dump by a few of them.
    pub fn dump_links(&mut self) -> io::Result<Vec<Link>> {
        let mut links = Vec::new();
        let budget = self.timeout() * 4;
        self.request(encode_getlink_dump, budget, |message| {
            if message.ty == RTM_NEWLINK {
                links.push(decode_link(message.payload)?);
            }
            Ok(Flow::More)
        })?;
        Ok(links)
    }
}

/// Encodes the `RTM_GETLINK` dump request.
pub fn encode_getlink_dump(seq: u32) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let mut message = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetLink(LinkMessage::default())),
    );
    message.finalize();
    let mut buf = vec![0; message.buffer_len()];
    message.serialize(&mut buf);
    buf
}

/// What a link dump says about one netdev.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// `ifi_index`.
    pub index: u32,
    /// `IFLA_IFNAME`.
    pub name: Option<String>,
    /// `IFLA_ADDRESS`, as sysfs prints it (`0c:42:a1:78:91:f4`).
    pub address: Option<String>,
    /// `IFLA_MTU`.
    pub mtu: Option<u32>,
    /// `IFLA_OPERSTATE`, named as sysfs `operstate` names it (`up`, `lowerlayerdown`).
    pub operstate: Option<&'static str>,
    /// `IFLA_CARRIER`.
    pub carrier: Option<bool>,
    /// `IFLA_CARRIER_CHANGES`.
    pub carrier_changes: Option<u32>,
    /// `IFLA_CARRIER_UP_COUNT`.
    pub carrier_up_count: Option<u32>,
    /// `IFLA_CARRIER_DOWN_COUNT`.
    pub carrier_down_count: Option<u32>,
    /// `IFLA_STATS64`.
    pub stats: Option<LinkStats>,
}

/// The `struct rtnl_link_stats64` fields railscope exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// `rx_bytes`.
    pub rx_bytes: u64,
    /// `tx_bytes`.
    pub tx_bytes: u64,
    /// `rx_packets`.
    pub rx_packets: u64,
    /// `tx_packets`.
    pub tx_packets: u64,
    /// `rx_errors`.
    pub rx_errors: u64,
    /// `tx_errors`.
    pub tx_errors: u64,
    /// `rx_dropped`.
    pub rx_dropped: u64,
    /// `tx_dropped`.
    pub tx_dropped: u64,
}

/// The sysfs `operstate` name of an `IF_OPER_*` value (`net/core/net-sysfs.c` `operstates[]`).
pub fn operstate_name(state: State) -> &'static str {
    match state {
        State::Unknown => "unknown",
        State::NotPresent => "notpresent",
        State::Down => "down",
        State::LowerLayerDown => "lowerlayerdown",
        State::Testing => "testing",
        State::Dormant => "dormant",
        State::Up => "up",
        _ => "unknown",
    }
}

/// Formats a hardware address as sysfs `address` does: lower-case hex, colon-separated.
pub fn format_address(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Decodes the payload of one `RTM_NEWLINK` message (`struct ifinfomsg` and attributes).
/// An attribute `netlink-packet-route` cannot parse is skipped, not fatal: one odd attribute
/// of a new kernel must not hide the link's counters.
pub fn decode_link(payload: &[u8]) -> Result<Link, DecodeError> {
    let header = LinkHeader::parse(payload).map_err(|e| DecodeError(e.to_string()))?;
    let mut link = Link {
        index: header.index,
        ..Link::default()
    };
    let attrs = payload.get(IFINFOMSG_LEN..).unwrap_or_default();
    for nla in NlasIterator::new(attrs) {
        let nla: NlaBuffer<&[u8]> = nla.map_err(|e| DecodeError(e.to_string()))?;
        let Ok(attr) = LinkAttribute::parse_with_param(&nla, header.interface_family) else {
            continue;
        };
        match attr {
            LinkAttribute::IfName(name) => link.name = Some(name),
            LinkAttribute::Address(bytes) => link.address = Some(format_address(&bytes)),
            LinkAttribute::Mtu(mtu) => link.mtu = Some(mtu),
            LinkAttribute::OperState(state) => link.operstate = Some(operstate_name(state)),
            LinkAttribute::Carrier(carrier) => link.carrier = Some(carrier != 0),
            LinkAttribute::CarrierChanges(n) => link.carrier_changes = Some(n),
            LinkAttribute::CarrierUpCount(n) => link.carrier_up_count = Some(n),
            LinkAttribute::CarrierDownCount(n) => link.carrier_down_count = Some(n),
            LinkAttribute::Stats64(s) => {
                link.stats = Some(LinkStats {
                    rx_bytes: s.rx_bytes,
                    tx_bytes: s.tx_bytes,
                    rx_packets: s.rx_packets,
                    tx_packets: s.tx_packets,
                    rx_errors: s.rx_errors,
                    tx_errors: s.tx_errors,
                    rx_dropped: s.rx_dropped,
                    tx_dropped: s.tx_dropped,
                })
            }
            _ => {}
        }
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::nla as attr;
    use crate::netlink::{NLMSG_HDRLEN, messages};

    /// An `RTM_NEWLINK` payload as the kernel writes it for a veth: ifinfomsg, IFNAME, MTU,
    /// OPERSTATE, CARRIER, CARRIER_CHANGES, ADDRESS, and a 25-field IFLA_STATS64.
    fn veth_payload() -> Vec<u8> {
        let mut p = Vec::new();
        p.push(0); // ifi_family AF_UNSPEC
        p.push(0); // pad
        p.extend_from_slice(&1u16.to_ne_bytes()); // ARPHRD_ETHER
        p.extend_from_slice(&7i32.to_ne_bytes()); // ifi_index
        p.extend_from_slice(&0x11043u32.to_ne_bytes()); // flags UP|BROADCAST|RUNNING|MULTICAST|LOWER_UP
        p.extend_from_slice(&0u32.to_ne_bytes()); // change
        p.extend(attr(3, b"vethrs0a\0"));
        p.extend(attr(4, &4200u32.to_ne_bytes()));
        p.extend(attr(16, &[6])); // IF_OPER_UP
        p.extend(attr(33, &[1]));
        p.extend(attr(35, &2u32.to_ne_bytes()));
        p.extend(attr(1, &[0x0e, 0x42, 0xa1, 0x78, 0x91, 0xf4]));
        p.extend(attr(0x7fff, b"unknown attribute of a future kernel"));
        let mut stats = Vec::new();
        for v in [10u64, 20, 1000, 2000, 1, 2, 3, 4] {
            stats.extend_from_slice(&v.to_ne_bytes());
        }
        stats.resize(25 * 8, 0);
        p.extend(attr(23, &stats));
        p
    }

    #[test]
    fn link_decoding() {
        let link = decode_link(&veth_payload()).unwrap();
        assert_eq!(
            link,
            Link {
                index: 7,
                name: Some("vethrs0a".into()),
                address: Some("0e:42:a1:78:91:f4".into()),
                mtu: Some(4200),
                operstate: Some("up"),
                carrier: Some(true),
                carrier_changes: Some(2),
                carrier_up_count: None,
                carrier_down_count: None,
                stats: Some(LinkStats {
                    rx_packets: 10,
                    tx_packets: 20,
                    rx_bytes: 1000,
                    tx_bytes: 2000,
                    rx_errors: 1,
                    tx_errors: 2,
                    rx_dropped: 3,
                    tx_dropped: 4,
                }),
            }
        );
    }

    #[test]
    fn old_kernel_stats64_with_23_fields() {
        // Before 4.6 (rx_nohandler) the structure was shorter; it still decodes.
        let mut p = veth_payload();
        let stats_at = p.len() - (4 + 25 * 8);
        p.truncate(stats_at);
        let mut stats = Vec::new();
        for v in [1u64, 2, 3, 4] {
            stats.extend_from_slice(&v.to_ne_bytes());
        }
        stats.resize(23 * 8, 0);
        p.extend(attr(23, &stats));
        let link = decode_link(&p).unwrap();
        assert_eq!(link.stats.unwrap().tx_bytes, 4);
    }

    #[test]
    fn short_payload_is_an_error() {
        assert!(decode_link(&[0; 8]).is_err());
    }

    #[test]
    fn dump_request_encoding() {
        let req = encode_getlink_dump(9);
        assert_eq!(req.len(), NLMSG_HDRLEN + IFINFOMSG_LEN);
        let m = messages(&req).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].ty, 18); // RTM_GETLINK
        assert_eq!(m[0].flags, NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(m[0].seq, 9);
    }

    #[test]
    fn the_live_dump_has_loopback() {
        // Every network namespace has `lo`; dumping links needs no privilege.
        let mut socket = RtnlSocket::open(Duration::from_secs(5)).unwrap();
        let links = socket.dump_links().unwrap();
        let lo = links
            .iter()
            .find(|l| l.name.as_deref() == Some("lo"))
            .unwrap();
        assert_eq!(lo.index, 1);
        assert!(lo.stats.is_some());
        assert!(lo.mtu.is_some());
    }
}
