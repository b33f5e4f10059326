//! RDMA netlink (`NETLINK_RDMA`, client `RDMA_NL_NLDEV`; `include/uapi/rdma/rdma_netlink.h`):
//! all driver counters of a port in one `RDMA_NLDEV_CMD_STAT_GET` query, and the netdev of
//! each port from `RDMA_NLDEV_CMD_PORT_GET`.
//!
//! Why: every read of a `hw_counters/` file goes back to the driver (on mlx5 a firmware
//! command per file, unless the 10 ms `lifespan` cache happens to be warm), while
//! `STAT_GET` fetches the whole set at once, including optional counters enabled with
//! `rdma statistic set`. The messages are plain netlink (no generic-netlink family header):
//! type `RDMA_NL_GET_TYPE(client, op) = client << 10 | op`, then attributes.
//!
//! Encoding and decoding are pure functions over bytes; [`RdmaNetlink`] only moves them over
//! a `netlink_sys` socket with a deadline.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_RDMA};

/// `RDMA_NL_NLDEV`.
pub const RDMA_NL_NLDEV: u16 = 5;
/// `RDMA_NLDEV_CMD_GET` (dump: every device).
pub const CMD_GET: u16 = 1;
/// `RDMA_NLDEV_CMD_PORT_GET` (dump: every port of the device named by `ATTR_DEV_INDEX`, which
/// the kernel requires: without it `nldev_port_get_dumpit()` fails with EINVAL).
pub const CMD_PORT_GET: u16 = 5;
/// `RDMA_NLDEV_CMD_STAT_GET`.
pub const CMD_STAT_GET: u16 = 17;

/// `RDMA_NLDEV_ATTR_DEV_INDEX` (u32).
pub const ATTR_DEV_INDEX: u16 = 1;
/// `RDMA_NLDEV_ATTR_DEV_NAME` (string).
pub const ATTR_DEV_NAME: u16 = 2;
/// `RDMA_NLDEV_ATTR_PORT_INDEX` (u32).
pub const ATTR_PORT_INDEX: u16 = 3;
/// `RDMA_NLDEV_ATTR_NDEV_NAME` (string).
pub const ATTR_NDEV_NAME: u16 = 51;
/// `RDMA_NLDEV_ATTR_STAT_HWCOUNTERS` (nest).
pub const ATTR_STAT_HWCOUNTERS: u16 = 80;
/// `RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY` (nest).
pub const ATTR_STAT_HWCOUNTER_ENTRY: u16 = 81;
/// `RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME` (string).
pub const ATTR_STAT_HWCOUNTER_ENTRY_NAME: u16 = 82;
/// `RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE` (u64).
pub const ATTR_STAT_HWCOUNTER_ENTRY_VALUE: u16 = 83;

const NLMSG_HDRLEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The netlink message type of an nldev command.
pub fn msg_type(cmd: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) | cmd
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// An attribute value for a request.
#[derive(Debug, Clone, Copy)]
pub enum Attr<'a> {
    /// A u32.
    U32(u16, u32),
    /// A NUL-terminated string.
    Str(u16, &'a str),
}

/// Encodes an nldev request: a dump when `dump`, else a single query with an ACK.
pub fn encode_request(cmd: u16, dump: bool, seq: u32, attrs: &[Attr<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for attr in attrs {
        let (ty, payload): (u16, Vec<u8>) = match attr {
            Attr::U32(ty, v) => (*ty, v.to_ne_bytes().to_vec()),
            Attr::Str(ty, s) => {
                let mut p = s.as_bytes().to_vec();
                p.push(0);
                (*ty, p)
            }
        };
        let len = 4 + payload.len();
        body.extend_from_slice(&(len as u16).to_ne_bytes());
        body.extend_from_slice(&ty.to_ne_bytes());
        body.extend_from_slice(&payload);
        body.resize(align4(body.len()), 0);
    }
    let flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&msg_type(cmd).to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&body);
    msg
}

/// One decoded netlink message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// A reply with attributes.
    Data {
        /// The message type.
        ty: u16,
        /// Its flags.
        flags: u16,
        /// Its attribute bytes.
        payload: &'a [u8],
    },
    /// `NLMSG_ERROR`: errno 0 is an acknowledgement.
    Error(i32),
    /// `NLMSG_DONE`: the end of a dump, with the dump's errno (0, or negative when the
    /// kernel's dump function failed; `netlink_dump()` puts it in the DONE message).
    Done(i32),
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed RDMA netlink message: {0}")]
pub struct DecodeError(pub &'static str);

/// Splits a datagram into messages.
pub fn parse_messages(mut buf: &[u8]) -> Result<Vec<Message<'_>>, DecodeError> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(DecodeError("message length out of range"));
        }
        let ty = u16::from_ne_bytes([buf[4], buf[5]]);
        let flags = u16::from_ne_bytes([buf[6], buf[7]]);
        let payload = &buf[NLMSG_HDRLEN..len];
        out.push(match ty {
            NLMSG_ERROR => {
                let errno = payload.get(..4).ok_or(DecodeError("short NLMSG_ERROR"))?;
                Message::Error(i32::from_ne_bytes([errno[0], errno[1], errno[2], errno[3]]))
            }
            NLMSG_DONE => Message::Done(
                payload
                    .get(..4)
                    .map_or(0, |e| i32::from_ne_bytes([e[0], e[1], e[2], e[3]])),
            ),
            _ => Message::Data { ty, flags, payload },
        });
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// Splits attribute bytes into (type, payload) pairs.
pub fn parse_attrs(mut buf: &[u8]) -> Result<Vec<(u16, &[u8])>, DecodeError> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            return Err(DecodeError("attribute length out of range"));
        }
        out.push((ty, &buf[4..len]));
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

fn attr_u32(payload: &[u8]) -> Option<u32> {
    payload
        .get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn attr_u64(payload: &[u8]) -> Option<u64> {
    payload
        .get(..8)
        .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
}

fn attr_str(payload: &[u8]) -> Option<String> {
    let end = payload
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(payload.len());
    std::str::from_utf8(&payload[..end]).ok().map(str::to_owned)
}

/// One RDMA device from `CMD_GET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevEntry {
    /// The kernel's device index.
    pub index: u32,
    /// The device name.
    pub name: String,
}

/// One port from `CMD_PORT_GET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortEntry {
    /// The device name.
    pub device: String,
    /// The port number.
    pub port: u32,
    /// The port's netdev, when it has one.
    pub netdev: Option<String>,
}

/// Decodes a `CMD_GET` reply message.
pub fn decode_dev(payload: &[u8]) -> Result<Option<DevEntry>, DecodeError> {
    let attrs = parse_attrs(payload)?;
    let index = attrs
        .iter()
        .find(|(t, _)| *t == ATTR_DEV_INDEX)
        .and_then(|(_, p)| attr_u32(p));
    let name = attrs
        .iter()
        .find(|(t, _)| *t == ATTR_DEV_NAME)
        .and_then(|(_, p)| attr_str(p));
    Ok(index
        .zip(name)
        .map(|(index, name)| DevEntry { index, name }))
}

/// Decodes a `CMD_PORT_GET` reply message.
pub fn decode_port(payload: &[u8]) -> Result<Option<PortEntry>, DecodeError> {
    let attrs = parse_attrs(payload)?;
    let device = attrs
        .iter()
        .find(|(t, _)| *t == ATTR_DEV_NAME)
        .and_then(|(_, p)| attr_str(p));
    let port = attrs
        .iter()
        .find(|(t, _)| *t == ATTR_PORT_INDEX)
        .and_then(|(_, p)| attr_u32(p));
    let netdev = attrs
        .iter()
        .find(|(t, _)| *t == ATTR_NDEV_NAME)
        .and_then(|(_, p)| attr_str(p));
    Ok(device.zip(port).map(|(device, port)| PortEntry {
        device,
        port,
        netdev,
    }))
}

/// Decodes a `CMD_STAT_GET` reply: the port's counters by name, in the driver's order.
pub fn decode_stats(payload: &[u8]) -> Result<Vec<(String, u64)>, DecodeError> {
    let mut out = Vec::new();
    for (ty, nest) in parse_attrs(payload)? {
        if ty != ATTR_STAT_HWCOUNTERS {
            continue;
        }
        for (ty, entry) in parse_attrs(nest)? {
            if ty != ATTR_STAT_HWCOUNTER_ENTRY {
                continue;
            }
            let attrs = parse_attrs(entry)?;
            let name = attrs
                .iter()
                .find(|(t, _)| *t == ATTR_STAT_HWCOUNTER_ENTRY_NAME)
                .and_then(|(_, p)| attr_str(p));
            let value = attrs
                .iter()
                .find(|(t, _)| *t == ATTR_STAT_HWCOUNTER_ENTRY_VALUE)
                .and_then(|(_, p)| attr_u64(p));
            match name.zip(value) {
                Some(pair) => out.push(pair),
                None => return Err(DecodeError("counter entry without name or value")),
            }
        }
    }
    Ok(out)
}

/// What RDMA netlink knows of the node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetlinkView {
    /// Device index by name.
    pub devices: HashMap<String, u32>,
    /// Netdev by (device, port).
    pub netdevs: HashMap<(String, u32), String>,
}

/// A `NETLINK_RDMA` socket.
#[derive(Debug)]
pub struct RdmaNetlink {
    socket: Socket,
    seq: u32,
    timeout: Duration,
}

impl RdmaNetlink {
    /// Opens the socket; fails with `EPROTONOSUPPORT` on kernels without RDMA netlink.
    pub fn open(timeout: Duration) -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_RDMA)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        socket.set_non_blocking(true)?;
        Ok(RdmaNetlink {
            socket,
            seq: 1,
            timeout,
        })
    }

    fn request(&mut self, cmd: u16, dump: bool, attrs: &[Attr<'_>]) -> io::Result<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1);
        self.socket
            .send(&encode_request(cmd, dump, self.seq, attrs), 0)?;
        let deadline = Instant::now() + self.timeout;
        let mut replies = Vec::new();
        loop {
            let datagram = match self.socket.recv_from_full() {
                Ok((bytes, _)) => bytes,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(err) => return Err(err),
            };
            let messages = parse_messages(&datagram).map_err(io::Error::other)?;
            let mut finished = false;
            for message in messages {
                match message {
                    Message::Data { payload, flags, .. } => {
                        replies.push(payload.to_vec());
                        if !dump && flags & NLM_F_MULTI == 0 {
                            // A single reply; the ACK follows.
                        }
                    }
                    Message::Error(0) => finished = true,
                    Message::Error(errno) => {
                        return Err(io::Error::from_raw_os_error(errno.saturating_neg()));
                    }
                    // A dump that failed reports its errno in NLMSG_DONE.
                    Message::Done(errno) if errno < 0 => {
                        return Err(io::Error::from_raw_os_error(errno.saturating_neg()));
                    }
                    Message::Done(_) => finished = true,
                }
            }
            if finished {
                return Ok(replies);
            }
        }
    }

    /// Every device and the netdev of every port.
    pub fn view(&mut self) -> io::Result<NetlinkView> {
        let mut view = NetlinkView::default();
        for payload in self.request(CMD_GET, true, &[])? {
            if let Some(dev) = decode_dev(&payload).map_err(io::Error::other)? {
                view.devices.insert(dev.name, dev.index);
            }
        }
        let mut indexes: Vec<u32> = view.devices.values().copied().collect();
        indexes.sort_unstable();
        for index in indexes {
            // One port dump per device: the kernel refuses a port dump without a device. A
            // device removed since the device dump answers EINVAL; it simply has no ports.
            let replies =
                match self.request(CMD_PORT_GET, true, &[Attr::U32(ATTR_DEV_INDEX, index)]) {
                    Ok(replies) => replies,
                    Err(err) if err.raw_os_error() == Some(libc::EINVAL) => continue,
                    Err(err) => return Err(err),
                };
            for payload in replies {
                if let Some(port) = decode_port(&payload).map_err(io::Error::other)?
                    && let Some(netdev) = port.netdev
                {
                    view.netdevs.insert((port.device, port.port), netdev);
                }
            }
        }
        Ok(view)
    }

    /// All driver counters of one port.
    pub fn port_stats(&mut self, dev_index: u32, port: u32) -> io::Result<Vec<(String, u64)>> {
        let replies = self.request(
            CMD_STAT_GET,
            false,
            &[
                Attr::U32(ATTR_DEV_INDEX, dev_index),
                Attr::U32(ATTR_PORT_INDEX, port),
            ],
        )?;
        let mut out = Vec::new();
        for payload in replies {
            out.extend(decode_stats(&payload).map_err(io::Error::other)?);
        }
        Ok(out)
    }
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

    fn nest(ty: u16, children: &[Vec<u8>]) -> Vec<u8> {
        attr(ty | 0x8000, &children.concat())
    }

    fn message(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.extend_from_slice(&flags.to_ne_bytes());
        out.extend_from_slice(&7u32.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(body);
        out
    }

    /// A STAT_GET reply as the kernel builds it in `stat_get_doit_default_counter()`:
    /// DEV_INDEX, DEV_NAME, PORT_INDEX, then the HWCOUNTERS nest (NLA_F_NESTED set).
    fn stat_reply() -> Vec<u8> {
        let entry = |name: &str, value: u64| {
            let mut n = name.as_bytes().to_vec();
            n.push(0);
            nest(
                ATTR_STAT_HWCOUNTER_ENTRY,
                &[
                    attr(ATTR_STAT_HWCOUNTER_ENTRY_NAME, &n),
                    attr(ATTR_STAT_HWCOUNTER_ENTRY_VALUE, &value.to_ne_bytes()),
                ],
            )
        };
        let body = [
            attr(ATTR_DEV_INDEX, &3u32.to_ne_bytes()),
            attr(ATTR_DEV_NAME, b"rxe0\0"),
            attr(ATTR_PORT_INDEX, &1u32.to_ne_bytes()),
            nest(
                ATTR_STAT_HWCOUNTERS,
                &[
                    entry("sent_pkts", 144717),
                    entry("rcvd_pkts", 2795),
                    entry("duplicate_request", 783),
                ],
            ),
        ]
        .concat();
        message(msg_type(CMD_STAT_GET), 0, &body)
    }

    #[test]
    fn request_encoding() {
        let req = encode_request(
            CMD_STAT_GET,
            false,
            9,
            &[Attr::U32(ATTR_DEV_INDEX, 3), Attr::U32(ATTR_PORT_INDEX, 1)],
        );
        assert_eq!(req.len(), 16 + 8 + 8);
        assert_eq!(u32::from_ne_bytes(req[0..4].try_into().unwrap()), 32);
        assert_eq!(
            u16::from_ne_bytes(req[4..6].try_into().unwrap()),
            5137,
            "RDMA_NL_GET_TYPE(5, 17)"
        );
        assert_eq!(
            u16::from_ne_bytes(req[6..8].try_into().unwrap()),
            NLM_F_REQUEST | NLM_F_ACK
        );
        assert_eq!(u32::from_ne_bytes(req[8..12].try_into().unwrap()), 9);
        assert_eq!(&req[16..24], &attr(ATTR_DEV_INDEX, &3u32.to_ne_bytes())[..]);
        let dump = encode_request(CMD_GET, true, 1, &[Attr::Str(ATTR_DEV_NAME, "mlx5_0")]);
        assert_eq!(
            u16::from_ne_bytes(dump[6..8].try_into().unwrap()),
            NLM_F_REQUEST | NLM_F_DUMP
        );
        assert_eq!(dump.len(), 16 + 12, "7 bytes of name padded to 8");
    }

    #[test]
    fn stat_reply_decoding() {
        let mut datagram = stat_reply();
        datagram.extend(message(NLMSG_ERROR, 0, &0i32.to_ne_bytes()));
        let messages = parse_messages(&datagram).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1], Message::Error(0));
        let Message::Data { payload, ty, .. } = &messages[0] else {
            panic!()
        };
        assert_eq!(*ty, msg_type(CMD_STAT_GET));
        assert_eq!(
            decode_stats(payload).unwrap(),
            [
                ("sent_pkts".to_owned(), 144717),
                ("rcvd_pkts".to_owned(), 2795),
                ("duplicate_request".to_owned(), 783)
            ]
        );
    }

    #[test]
    fn dev_and_port_replies() {
        let dev = [
            attr(ATTR_DEV_INDEX, &2u32.to_ne_bytes()),
            attr(ATTR_DEV_NAME, b"mlx5_1\0"),
        ]
        .concat();
        assert_eq!(
            decode_dev(&dev).unwrap(),
            Some(DevEntry {
                index: 2,
                name: "mlx5_1".into()
            })
        );
        let port = [
            attr(ATTR_DEV_INDEX, &2u32.to_ne_bytes()),
            attr(ATTR_DEV_NAME, b"mlx5_1\0"),
            attr(ATTR_PORT_INDEX, &1u32.to_ne_bytes()),
            attr(50, &7u32.to_ne_bytes()),
            attr(ATTR_NDEV_NAME, b"ens1f1np1\0"),
        ]
        .concat();
        assert_eq!(
            decode_port(&port).unwrap(),
            Some(PortEntry {
                device: "mlx5_1".into(),
                port: 1,
                netdev: Some("ens1f1np1".into())
            })
        );
    }

    #[test]
    fn errors_and_truncation() {
        let err = message(NLMSG_ERROR, 0, &(-libc::EOPNOTSUPP).to_ne_bytes());
        assert_eq!(
            parse_messages(&err).unwrap(),
            [Message::Error(-libc::EOPNOTSUPP)]
        );
        // A dump whose kernel function fails (a port dump without a device index, as a real
        // 6.1 kernel answers it) ends in NLMSG_DONE carrying the errno, not in NLMSG_ERROR.
        let failed_dump = message(NLMSG_DONE, NLM_F_MULTI, &(-libc::EINVAL).to_ne_bytes());
        assert_eq!(
            parse_messages(&failed_dump).unwrap(),
            [Message::Done(-libc::EINVAL)]
        );
        let done = message(NLMSG_DONE, NLM_F_MULTI, &0i32.to_ne_bytes());
        assert_eq!(parse_messages(&done).unwrap(), [Message::Done(0)]);
        let bare_done = message(NLMSG_DONE, NLM_F_MULTI, &[]);
        assert_eq!(parse_messages(&bare_done).unwrap(), [Message::Done(0)]);
        let reply = stat_reply();
        assert!(
            parse_messages(&reply[..reply.len() - 4]).is_err(),
            "a cut message is an error"
        );
        let mut bad = reply.clone();
        bad[16] = 0xff; // the first attribute claims more bytes than there are
        bad[17] = 0x7f;
        let Message::Data { payload, .. } = &parse_messages(&bad).unwrap()[0] else {
            panic!()
        };
        assert!(decode_stats(payload).is_err());
        // Arbitrary bytes never panic.
        let mut seed = 1u64;
        for _ in 0..2000 {
            let len = (seed % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(i as u64 + 1);
                    (seed >> 33) as u8
                })
                .collect();
            if let Ok(messages) = parse_messages(&bytes) {
                for m in messages {
                    if let Message::Data { payload, .. } = m {
                        let _ = decode_stats(payload);
                        let _ = decode_port(payload);
                    }
                }
            }
        }
    }

    #[test]
    fn opening_without_rdma_netlink_fails_cleanly() {
        // On a kernel without RDMA netlink this is EPROTONOSUPPORT; with it, an empty or real
        // view. Either way no panic and no hang.
        if let Ok(mut nl) = RdmaNetlink::open(Duration::from_secs(2)) {
            let _ = nl.view();
        }
    }
}
