//! rtnetlink (`NETLINK_ROUTE`) plumbing shared by the `netdev` and `dcb` sources: a blocking
//! socket with a receive timeout, the split of a datagram into netlink messages, and the
//! `RTM_GETLINK` dump (`include/uapi/linux/rtnetlink.h`, `include/uapi/linux/if_link.h`)
//! decoded with `netlink-packet-route`.
//!
//! Encoding and decoding are pure functions over bytes; [`RtnlSocket`] only moves bytes.
//! `netlink-packet-route` types stay inside this module: callers get a plain [`Link`].

use std::io;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlaBuffer,
    NlasIterator, ParseableParametrized,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkHeader, LinkMessage, State};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_ERROR`.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
pub const NLMSG_DONE: u16 = 3;
/// `RTM_NEWLINK`, the type of every message of a link dump.
pub const RTM_NEWLINK: u16 = 16;
/// `sizeof(struct ifinfomsg)`: the link header before a link's attributes.
pub const IFINFOMSG_LEN: usize = 16;

/// The largest datagram accepted. The kernel sizes dump datagrams to the reader's buffer up
/// to 32 KiB; a larger one is refused as truncated rather than misparsed.
const RECV_BUFFER: usize = 64 * 1024;

/// Rounds up to the netlink alignment (4 bytes).
pub fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed rtnetlink message: {0}")]
pub struct DecodeError(pub String);

/// One netlink message of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// The bytes after the netlink header.
    pub payload: &'a [u8],
}

impl Message<'_> {
    /// The errno of an `NLMSG_ERROR` message, made positive; `Some(0)` is an acknowledgement,
    /// `None` means the message is not an `NLMSG_ERROR` (or is too short to be one). The
    /// negation saturates: a malformed `i32::MIN` must not overflow.
    pub fn errno(&self) -> Option<i32> {
        if self.ty != NLMSG_ERROR {
            return None;
        }
        let code = self.payload.get(..4)?;
        Some(i32::from_ne_bytes([code[0], code[1], code[2], code[3]]).saturating_neg())
    }
}

/// Splits a datagram into its netlink messages.
pub fn messages(mut buf: &[u8]) -> Result<Vec<Message<'_>>, DecodeError> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(DecodeError(format!(
                "message length {len} out of range (datagram has {} bytes left)",
                buf.len()
            )));
        }
        out.push(Message {
            ty: u16::from_ne_bytes([buf[4], buf[5]]),
            flags: u16::from_ne_bytes([buf[6], buf[7]]),
            seq: u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]),
            payload: &buf[NLMSG_HDRLEN..len],
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// A blocking `NETLINK_ROUTE` socket whose receives give up after a timeout.
#[derive(Debug)]
pub struct RtnlSocket {
    socket: Socket,
    seq: u32,
    timeout: Duration,
    buf: Vec<u8>,
}

impl RtnlSocket {
    /// Opens and connects the socket to the kernel; each receive waits at most `timeout`.
    pub fn open(timeout: Duration) -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        set_receive_timeout(&socket, timeout)?;
        Ok(RtnlSocket {
            socket,
            seq: 0,
            timeout,
            buf: Vec::with_capacity(RECV_BUFFER),
        })
    }

    /// A fresh sequence number for the next request.
    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Sends one request.
    pub fn send(&self, request: &[u8]) -> io::Result<()> {
        let sent = self.socket.send(request, 0)?;
        if sent != request.len() {
            return Err(io::Error::other(format!(
                "short netlink send: {sent} of {} bytes",
                request.len()
            )));
        }
        Ok(())
    }

    /// Receives one datagram; `ETIMEDOUT` when nothing arrives within the timeout.
    pub fn recv(&mut self) -> io::Result<&[u8]> {
        self.buf.clear();
        // MSG_TRUNC makes the kernel return the datagram's real length, so a datagram larger
        // than the buffer is detected instead of parsed cut short.
        let len = match self.socket.recv(&mut self.buf, libc::MSG_TRUNC) {
            Ok(len) => len,
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no rtnetlink reply within {:?}", self.timeout),
                ));
            }
            Err(err) => return Err(err),
        };
        if len > self.buf.len() {
            return Err(io::Error::other(format!(
                "rtnetlink datagram of {len} bytes truncated to {}",
                self.buf.len()
            )));
        }
        Ok(&self.buf)
    }

    /// Dumps every link of the socket's network namespace (`RTM_GETLINK`, `NLM_F_DUMP`).
    pub fn dump_links(&mut self) -> io::Result<Vec<Link>> {
        let seq = self.next_seq();
        self.send(&encode_getlink_dump(seq))?;
        // Every receive is bounded by the timeout; the whole dump by a few of them.
        let deadline = Instant::now() + self.timeout * 4;
        let mut links = Vec::new();
        loop {
            let datagram = self.recv()?;
            let mut done = false;
            for message in messages(datagram).map_err(io::Error::other)? {
                if message.seq != seq {
                    continue; // a late reply to an earlier request
                }
                match message.ty {
                    NLMSG_DONE => done = true,
                    NLMSG_ERROR => match message.errno() {
                        Some(0) => done = true,
                        Some(errno) => return Err(io::Error::from_raw_os_error(errno)),
                        None => return Err(io::Error::other("short NLMSG_ERROR")),
                    },
                    RTM_NEWLINK => {
                        links.push(decode_link(message.payload).map_err(io::Error::other)?)
                    }
                    _ => {}
                }
            }
            if done {
                return Ok(links);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "rtnetlink link dump did not finish in time",
                ));
            }
        }
    }
}

/// Sets `SO_RCVTIMEO` on the netlink socket without `unsafe`: the option is a `SOL_SOCKET`
/// option that applies to sockets of every family, and std sets it on a [`UnixDatagram`].
/// A duplicate of the descriptor refers to the same socket, so setting the option through a
/// `UnixDatagram` that owns the duplicate sets it on the netlink socket; dropping the
/// duplicate closes only the duplicate.
///
/// [`UnixDatagram`]: std::os::unix::net::UnixDatagram
fn set_receive_timeout(socket: &Socket, timeout: Duration) -> io::Result<()> {
    let duplicate = socket.as_fd().try_clone_to_owned()?;
    let view = std::os::unix::net::UnixDatagram::from(duplicate);
    view.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
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

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(align4(out.len()), 0);
        out
    }

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
    fn datagram_splitting() {
        let mut dgram = Vec::new();
        for (ty, payload) in [(RTM_NEWLINK, veth_payload()), (NLMSG_DONE, vec![0; 4])] {
            dgram.extend_from_slice(&((NLMSG_HDRLEN + payload.len()) as u32).to_ne_bytes());
            dgram.extend_from_slice(&ty.to_ne_bytes());
            dgram.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
            dgram.extend_from_slice(&5u32.to_ne_bytes());
            dgram.extend_from_slice(&0u32.to_ne_bytes());
            dgram.extend_from_slice(&payload);
        }
        let m = messages(&dgram).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].ty, NLMSG_DONE);
        assert_eq!(m[0].seq, 5);
        // A length past the end is refused.
        dgram[0] = 0xff;
        dgram[1] = 0xff;
        assert!(messages(&dgram).is_err());
    }

    /// Found by the property tests: negating `i32::MIN` overflowed (a panic in debug builds).
    #[test]
    fn an_error_code_of_i32_min_does_not_overflow() {
        let mut datagram = 36u32.to_ne_bytes().to_vec();
        datagram.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        datagram.extend_from_slice(&[0; 10]);
        datagram.extend_from_slice(&i32::MIN.to_ne_bytes());
        datagram.extend_from_slice(&[0; 16]);
        let message = messages(&datagram).unwrap()[0];
        assert_eq!(message.errno(), Some(i32::MAX));
    }

    #[test]
    fn error_message_errno() {
        let code = (-libc::EOPNOTSUPP).to_ne_bytes();
        let m = Message {
            ty: NLMSG_ERROR,
            flags: 0,
            seq: 1,
            payload: &code,
        };
        assert_eq!(m.errno(), Some(libc::EOPNOTSUPP));
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
