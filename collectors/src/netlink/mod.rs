//! Netlink framing shared by every netlink protocol railscope speaks: rtnetlink
//! (`NETLINK_ROUTE`: the link dump in [`rtnl`], DCB in `sources/dcb/wire.rs`), generic netlink
//! ([`genl`]: the `ethtool` family in [`ethtool`], `devlink`) and RDMA netlink
//! (`NETLINK_RDMA`: `sources/infiniband/netlink.rs`).
//!
//! Kernel interface: `include/uapi/linux/netlink.h` (`struct nlmsghdr`, `struct nlattr`,
//! `NLMSG_ALIGN`/`NLA_ALIGN`), `Documentation/userspace-api/netlink/intro.rst`. A datagram
//! holds messages, each a 16-byte header and a payload, padded to 4 bytes; a payload holds a
//! protocol header and attributes, each a 4-byte header and a value, padded to 4 bytes. A
//! request is answered by its replies and ends in `NLMSG_DONE` (a dump) or `NLMSG_ERROR`
//! (an error, or with errno 0 an acknowledgement).
//!
//! Encoding and decoding are pure functions over bytes, tested with bytes as the kernel writes
//! them; [`Socket`] only moves them, each receive bounded by a timeout and each request by a
//! budget. The protocols keep their message types, attributes and payload structs.

pub(crate) mod ethtool;
pub(crate) mod genl;
pub(crate) mod rtnl;

use std::io;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_ERROR`: an error, or with errno 0 an acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_MULTI`: a part of a multipart reply (the kernel's; for test replies).
#[cfg(test)]
pub const NLM_F_MULTI: u16 = 0x2;
/// `NLM_F_ACK`: ask for an acknowledgement.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `NLA_TYPE_MASK`: an attribute's type without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`.
pub const NLA_TYPE_MASK: u16 = 0x3fff;

/// The largest datagram accepted. The kernel sizes dump datagrams to the reader's buffer up
/// to 32 KiB; a larger one is refused as truncated rather than misparsed.
const RECV_BUFFER: usize = 64 * 1024;

/// Rounds up to the netlink alignment (4 bytes: `NLMSG_ALIGN`, `NLA_ALIGN`).
pub fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed netlink message: {0}")]
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

    /// The errno of an `NLMSG_DONE` message, made positive: 0 for a dump that succeeded (or a
    /// bare `NLMSG_DONE`), else the errno of the kernel's dump function, which
    /// `netlink_dump()` puts there. `None` when the message is not an `NLMSG_DONE`.
    pub fn done_errno(&self) -> Option<i32> {
        if self.ty != NLMSG_DONE {
            return None;
        }
        Some(self.payload.get(..4).map_or(0, |e| {
            i32::from_ne_bytes([e[0], e[1], e[2], e[3]]).saturating_neg()
        }))
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

/// Splits attribute bytes into `(type, payload)` pairs; the type without its
/// `NLA_F_NESTED`/`NLA_F_NET_BYTEORDER` flags.
pub fn attributes(mut buf: &[u8]) -> Result<Vec<(u16, &[u8])>, DecodeError> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            return Err(DecodeError(format!(
                "attribute {ty} has length {len} with {} bytes left",
                buf.len()
            )));
        }
        out.push((ty, &buf[4..len]));
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// The payload of the first attribute of type `ty`.
pub fn find<'a>(attrs: &[(u16, &'a [u8])], ty: u16) -> Option<&'a [u8]> {
    attrs.iter().find(|(t, _)| *t == ty).map(|(_, p)| *p)
}

/// A `u32` attribute value (host byte order).
pub fn u32_value(payload: &[u8]) -> Option<u32> {
    payload
        .get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// A `u64` attribute value (host byte order).
pub fn u64_value(payload: &[u8]) -> Option<u64> {
    payload
        .get(..8)
        .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
}

/// A string attribute's bytes, up to its NUL (`NLA_NUL_STRING`, `NLA_STRING`).
pub fn c_string(payload: &[u8]) -> &[u8] {
    let end = payload
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(payload.len());
    &payload[..end]
}

/// An attribute of a request.
#[derive(Debug, Clone, Copy)]
pub enum Attr<'a> {
    /// A `u32`.
    U32(u16, u32),
    /// A NUL-terminated string.
    Str(u16, &'a str),
}

/// Appends one attribute to `buf`, padded to 4 bytes.
pub fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(align4(buf.len()), 0);
}

/// One message: the netlink header (`ty`, `flags`, `seq`, port id 0: the kernel) and `body`.
pub fn message(ty: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    msg.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&ty.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(body);
    msg
}

/// Encodes a request: a [`message`] of the protocol's own header `header`, then `attrs`.
pub fn encode(ty: u16, flags: u16, seq: u32, header: &[u8], attrs: &[Attr<'_>]) -> Vec<u8> {
    let mut body = header.to_vec();
    body.resize(align4(body.len()), 0);
    for attr in attrs {
        match attr {
            Attr::U32(ty, v) => push_attr(&mut body, *ty, &v.to_ne_bytes()),
            Attr::Str(ty, s) => push_attr(&mut body, *ty, &[s.as_bytes(), &[0]].concat()),
        }
    }
    message(ty, flags, seq, &body)
}

/// Whether a request wants more of its reply after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading (a dump, or a reply the acknowledgement follows).
    More,
    /// The reply is complete.
    Done,
}

/// A blocking netlink socket connected to the kernel, whose receives give up after a
/// timeout.
#[derive(Debug)]
pub struct Socket {
    socket: netlink_sys::Socket,
    seq: u32,
    timeout: Duration,
    buf: Vec<u8>,
}

impl Socket {
    /// Opens a socket of `protocol` (`NETLINK_ROUTE`, `NETLINK_RDMA`); each receive waits at
    /// most `timeout`. Fails with `EPROTONOSUPPORT` when the kernel lacks the protocol.
    pub fn open(protocol: isize, timeout: Duration) -> io::Result<Self> {
        let mut socket = netlink_sys::Socket::new(protocol)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        set_receive_timeout(&socket, timeout)?;
        Ok(Socket {
            socket,
            seq: 0,
            timeout,
            buf: Vec::with_capacity(RECV_BUFFER),
        })
    }

    /// Sends the request `encode` builds for a fresh sequence number and hands each reply
    /// message of that request to `on_reply` until the reply is complete: `NLMSG_DONE`, an
    /// acknowledgement, or `on_reply` saying [`Flow::Done`]. An `NLMSG_ERROR` (or a dump that
    /// failed) is an error with its errno; nothing within `budget` is `ETIMEDOUT`. Replies to
    /// earlier requests are skipped.
    pub fn request(
        &mut self,
        encode: impl FnOnce(u32) -> Vec<u8>,
        budget: Duration,
        mut on_reply: impl FnMut(&Message<'_>) -> Result<Flow, DecodeError>,
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.send(&encode(seq))?;
        let deadline = Instant::now() + budget;
        loop {
            let datagram = self.recv()?;
            for message in messages(datagram).map_err(io::Error::other)? {
                if message.seq != seq {
                    continue; // a late reply to an earlier request
                }
                if let Some(errno) = message.done_errno() {
                    return errno_result(errno);
                }
                if message.ty == NLMSG_ERROR {
                    return match message.errno() {
                        Some(errno) => errno_result(errno),
                        None => Err(io::Error::other(DecodeError("short NLMSG_ERROR".into()))),
                    };
                }
                if on_reply(&message).map_err(io::Error::other)? == Flow::Done {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
            }
        }
    }

    fn send(&self, request: &[u8]) -> io::Result<()> {
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
    fn recv(&mut self) -> io::Result<&[u8]> {
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
                return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
            }
            Err(err) => return Err(err),
        };
        if len > self.buf.len() {
            return Err(io::Error::other(format!(
                "netlink datagram of {len} bytes truncated to {}",
                self.buf.len()
            )));
        }
        Ok(&self.buf)
    }

    /// How long one receive may wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// `Ok` for errno 0 (success, an acknowledgement), else the errno as an error.
fn errno_result(errno: i32) -> io::Result<()> {
    match errno {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Sets `SO_RCVTIMEO` on the netlink socket without `unsafe`: the option is a `SOL_SOCKET`
/// option that applies to sockets of every family, and std sets it on a [`UnixDatagram`].
/// A duplicate of the descriptor refers to the same socket, so setting the option through a
/// `UnixDatagram` that owns the duplicate sets it on the netlink socket; dropping the
/// duplicate closes only the duplicate.
///
/// [`UnixDatagram`]: std::os::unix::net::UnixDatagram
fn set_receive_timeout(socket: &netlink_sys::Socket, timeout: Duration) -> io::Result<()> {
    let duplicate = socket.as_fd().try_clone_to_owned()?;
    let view = std::os::unix::net::UnixDatagram::from(duplicate);
    view.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
}

/// Kernel-shaped netlink bytes for tests: attributes, nests and datagrams as the kernel
/// lays them out.
#[cfg(test)]
mod proptests;

#[cfg(test)]
pub(crate) mod testing {
    pub use super::message;
    use super::{align4, push_attr};

    /// One attribute, padded to 4 bytes.
    pub fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(align4(4 + payload.len()));
        push_attr(&mut out, ty, payload);
        out
    }

    /// A nested attribute (`NLA_F_NESTED` set, as the kernel's `nla_nest_start()` does).
    pub fn nest(ty: u16, children: &[Vec<u8>]) -> Vec<u8> {
        nla(ty | 0x8000, &children.concat())
    }

    /// A C string's bytes, NUL included.
    pub fn cstr(s: &str) -> Vec<u8> {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        v
    }

    /// Messages concatenated into one datagram, each starting 4-byte aligned.
    pub fn datagram(messages: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in messages {
            out.resize(align4(out.len()), 0);
            out.extend_from_slice(m);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{datagram, message, nla};
    use super::*;

    #[test]
    fn datagram_splitting() {
        let mut dgram = datagram(&[
            message(16, NLM_F_MULTI, 5, &[1, 2, 3, 4, 5, 6]),
            message(NLMSG_DONE, NLM_F_MULTI, 5, &[0; 4]),
        ]);
        let m = messages(&dgram).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].ty, m[0].seq, m[0].payload),
            (16, 5, &[1, 2, 3, 4, 5, 6][..])
        );
        assert_eq!(m[1].done_errno(), Some(0));
        assert_eq!(m[0].done_errno(), None);
        // A length past the end is refused.
        dgram[0] = 0xff;
        dgram[1] = 0xff;
        assert!(messages(&dgram).is_err());
        // Below one header there is nothing.
        assert_eq!(messages(&dgram[..15]).unwrap(), []);
    }

    #[test]
    fn errors_acknowledgements_and_failed_dumps() {
        let err = message(NLMSG_ERROR, 0, 1, &(-libc::EOPNOTSUPP).to_ne_bytes());
        assert_eq!(messages(&err).unwrap()[0].errno(), Some(libc::EOPNOTSUPP));
        let ack = message(NLMSG_ERROR, 0, 1, &0i32.to_ne_bytes());
        assert_eq!(messages(&ack).unwrap()[0].errno(), Some(0));
        // A dump whose kernel function fails (a port dump without a device index, as a real
        // 6.1 kernel answers it) ends in NLMSG_DONE carrying the errno, not in NLMSG_ERROR.
        let failed_dump = message(NLMSG_DONE, NLM_F_MULTI, 1, &(-libc::EINVAL).to_ne_bytes());
        assert_eq!(
            messages(&failed_dump).unwrap()[0].done_errno(),
            Some(libc::EINVAL)
        );
        let bare_done = message(NLMSG_DONE, NLM_F_MULTI, 1, &[]);
        assert_eq!(messages(&bare_done).unwrap()[0].done_errno(), Some(0));
        assert_eq!(messages(&bare_done).unwrap()[0].errno(), None);
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
    fn attributes_and_their_values() {
        let bytes = encode(
            20,
            NLM_F_REQUEST,
            1,
            &[0, 21],
            &[Attr::U32(1, 7), Attr::Str(2, "mlx5_0"), Attr::Str(3, "")],
        );
        assert_eq!(bytes.len() % 4, 0);
        let m = messages(&bytes).unwrap()[0];
        assert_eq!((m.ty, m.flags, m.seq), (20, NLM_F_REQUEST, 1));
        assert_eq!(
            &m.payload[..4],
            &[0, 21, 0, 0],
            "the protocol header, padded"
        );
        let attrs = attributes(&m.payload[4..]).unwrap();
        assert_eq!(attrs.len(), 3);
        assert_eq!(find(&attrs, 1).and_then(u32_value), Some(7));
        assert_eq!(find(&attrs, 2).map(c_string), Some(&b"mlx5_0"[..]));
        assert_eq!(find(&attrs, 3).map(c_string), Some(&b""[..]));
        assert_eq!(find(&attrs, 4), None);
        assert_eq!(u64_value(&7u64.to_ne_bytes()), Some(7));
        assert_eq!(u64_value(&[1, 2, 3]), None);
        // Flags are not part of the type; a length past the end is an error.
        let nested = nla(5 | 0x8000, &[1, 2, 3, 4]);
        assert_eq!(attributes(&nested).unwrap(), [(5, &[1, 2, 3, 4][..])]);
        assert!(attributes(&[200, 0, 1, 0, 0, 0, 0, 0]).is_err());
    }
}
