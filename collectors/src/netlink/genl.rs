//! Generic netlink (`NETLINK_GENERIC`), shared by the sources that speak a generic netlink
//! family: `ethtool` (the `phy` and `transceiver` sources, [`super::ethtool`]) and `devlink`.
//!
//! Kernel interface: `include/uapi/linux/genetlink.h` (`struct genlmsghdr`, the `nlctrl`
//! family's `CTRL_CMD_*`/`CTRL_ATTR_*`), `Documentation/userspace-api/netlink/intro.rst`
//! ("Generic Netlink"). A generic netlink message is a netlink message whose type is the
//! family's id, whose payload starts with a 4-byte `genlmsghdr {cmd, version, reserved}`,
//! then attributes. Family ids are given out at run time: the id of a family is asked of
//! the `nlctrl` family (fixed id [`GENL_ID_CTRL`]) by name, and an unknown name (a kernel
//! without the family, a module not loaded) is `ENOENT`.
//!
//! Encoding and decoding are pure functions over bytes; [`GenlSocket`] only moves them and
//! remembers the ids it resolved.

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use netlink_sys::protocols::NETLINK_GENERIC;

use super::{
    DecodeError, Flow, Message, NLM_F_REQUEST, Socket, align4, attributes, c_string, find, message,
    push_attr,
};

/// `GENL_ID_CTRL`: the fixed id of the `nlctrl` family.
pub const GENL_ID_CTRL: u16 = 0x10;
/// `GENL_HDRLEN`: `sizeof(struct genlmsghdr)`.
pub const GENL_HDRLEN: usize = 4;
/// `CTRL_CMD_NEWFAMILY`: the reply to [`CTRL_CMD_GETFAMILY`].
pub const CTRL_CMD_NEWFAMILY: u8 = 1;
/// `CTRL_CMD_GETFAMILY`.
pub const CTRL_CMD_GETFAMILY: u8 = 3;
/// `CTRL_ATTR_FAMILY_ID` (u16).
pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
/// `CTRL_ATTR_FAMILY_NAME` (string).
pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// `CTRL_ATTR_VERSION` (u32).
pub const CTRL_ATTR_VERSION: u16 = 3;

/// One generic netlink message of a reply: its command and its attribute bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenlMessage<'a> {
    /// `genlmsghdr.cmd`.
    pub cmd: u8,
    /// `genlmsghdr.version`.
    pub version: u8,
    /// The attributes after the generic netlink header.
    pub attrs: &'a [u8],
}

/// Splits a netlink message's payload into its generic netlink header and attributes.
pub fn decode<'a>(message: &Message<'a>) -> Result<GenlMessage<'a>, DecodeError> {
    let payload = message.payload;
    if payload.len() < GENL_HDRLEN {
        return Err(DecodeError(format!(
            "generic netlink message of {} bytes, shorter than its header",
            payload.len()
        )));
    }
    Ok(GenlMessage {
        cmd: payload[0],
        version: payload[1],
        attrs: &payload[GENL_HDRLEN..],
    })
}

/// Encodes a request to `family`: the netlink header, `genlmsghdr {cmd, version}` and the
/// attribute bytes `attrs` (built with [`Attrs`]).
pub fn encode(family: u16, flags: u16, seq: u32, cmd: u8, version: u8, attrs: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(GENL_HDRLEN + attrs.len());
    body.extend_from_slice(&[cmd, version, 0, 0]);
    body.extend_from_slice(attrs);
    message(family, flags, seq, &body)
}

/// Attribute bytes of a request, nests included, laid out as the kernel's `nla_put*` does.
#[derive(Debug, Clone, Default)]
pub struct Attrs(Vec<u8>);

impl Attrs {
    /// No attributes.
    pub fn new() -> Self {
        Attrs(Vec::new())
    }

    /// Adds an attribute of raw bytes.
    pub fn bytes(mut self, ty: u16, payload: &[u8]) -> Self {
        push_attr(&mut self.0, ty, payload);
        self
    }

    /// Adds a `u8`.
    #[allow(
        dead_code,
        reason = "for the transceiver source's page, bank and I2C address"
    )]
    pub fn u8(self, ty: u16, v: u8) -> Self {
        self.bytes(ty, &[v])
    }

    /// Adds a `u32` (host byte order).
    pub fn u32(self, ty: u16, v: u32) -> Self {
        self.bytes(ty, &v.to_ne_bytes())
    }

    /// Adds a NUL-terminated string.
    pub fn str(self, ty: u16, s: &str) -> Self {
        self.bytes(ty, &[s.as_bytes(), &[0]].concat())
    }

    /// Adds a nest (`NLA_F_NESTED` set) holding `inner`.
    pub fn nest(self, ty: u16, inner: Attrs) -> Self {
        self.bytes(ty | NLA_F_NESTED, &inner.0)
    }

    /// The bytes.
    pub fn finish(self) -> Vec<u8> {
        debug_assert_eq!(self.0.len(), align4(self.0.len()));
        self.0
    }
}

/// `NLA_F_NESTED`.
pub const NLA_F_NESTED: u16 = 0x8000;

/// Encodes `CTRL_CMD_GETFAMILY` for the family named `name`.
pub fn encode_get_family(name: &str, seq: u32) -> Vec<u8> {
    let attrs = Attrs::new().str(CTRL_ATTR_FAMILY_NAME, name).finish();
    encode(
        GENL_ID_CTRL,
        NLM_F_REQUEST,
        seq,
        CTRL_CMD_GETFAMILY,
        1,
        &attrs,
    )
}

/// A family as `nlctrl` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The name asked for.
    pub name: String,
    /// Its id: the netlink message type of its requests.
    pub id: u16,
    /// `CTRL_ATTR_VERSION`, 0 when absent.
    pub version: u32,
}

/// Decodes a `CTRL_CMD_NEWFAMILY` reply.
pub fn decode_family(message: &Message<'_>) -> Result<Family, DecodeError> {
    if message.ty != GENL_ID_CTRL {
        return Err(DecodeError(format!(
            "nlctrl reply of message type {}",
            message.ty
        )));
    }
    let genl = decode(message)?;
    if genl.cmd != CTRL_CMD_NEWFAMILY {
        return Err(DecodeError(format!("nlctrl reply of command {}", genl.cmd)));
    }
    let attrs = attributes(genl.attrs)?;
    let id = find(&attrs, CTRL_ATTR_FAMILY_ID)
        .and_then(|p| p.get(..2))
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or_else(|| DecodeError("nlctrl reply without CTRL_ATTR_FAMILY_ID".into()))?;
    let name = find(&attrs, CTRL_ATTR_FAMILY_NAME)
        .map(|p| String::from_utf8_lossy(c_string(p)).into_owned())
        .unwrap_or_default();
    let version = find(&attrs, CTRL_ATTR_VERSION)
        .and_then(super::u32_value)
        .unwrap_or(0);
    Ok(Family { name, id, version })
}

/// A `NETLINK_GENERIC` socket that resolves family ids by name and remembers them.
#[derive(Debug)]
pub struct GenlSocket {
    socket: Socket,
    families: HashMap<String, Family>,
}

impl GenlSocket {
    /// Opens and connects the socket; each receive waits at most `timeout`.
    pub fn open(timeout: Duration) -> io::Result<Self> {
        Ok(GenlSocket {
            socket: Socket::open(NETLINK_GENERIC, timeout)?,
            families: HashMap::new(),
        })
    }

    /// The family named `name` (`"ethtool"`, `"devlink"`); `ENOENT` when the kernel has no
    /// such family. Asked once per socket.
    pub fn family(&mut self, name: &str) -> io::Result<Family> {
        if let Some(f) = self.families.get(name) {
            return Ok(f.clone());
        }
        let mut found = None;
        let budget = self.socket.timeout();
        self.socket.request(
            |seq| encode_get_family(name, seq),
            budget,
            |reply| {
                found = Some(decode_family(reply)?);
                Ok(Flow::Done)
            },
        )?;
        let family = found.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        self.families.insert(name.to_owned(), family.clone());
        Ok(family)
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
}

#[cfg(test)]
mod tests {
    use super::super::testing::{cstr, nla};
    use super::super::{NLM_F_DUMP, messages, u32_value};
    use super::*;

    /// The reply `ctrl_fill_info()` (net/netlink/genetlink.c) writes for a family: id,
    /// name, version, header size, max attribute, then the ops and groups nests (left out).
    fn newfamily(id: u16, name: &str, version: u32) -> Vec<u8> {
        let mut body = vec![CTRL_CMD_NEWFAMILY, 2, 0, 0];
        body.extend(nla(CTRL_ATTR_FAMILY_NAME, &cstr(name)));
        body.extend(nla(CTRL_ATTR_FAMILY_ID, &id.to_ne_bytes()));
        body.extend(nla(CTRL_ATTR_VERSION, &version.to_ne_bytes()));
        body.extend(nla(4, &0u32.to_ne_bytes()));
        body.extend(nla(5, &10u32.to_ne_bytes()));
        message(GENL_ID_CTRL, 0, 7, &body)
    }

    #[test]
    fn get_family_is_laid_out_as_the_kernel_reads_it() {
        let bytes = encode_get_family("ethtool", 9);
        let m = messages(&bytes).unwrap()[0];
        assert_eq!((m.ty, m.flags, m.seq), (GENL_ID_CTRL, NLM_F_REQUEST, 9));
        let genl = decode(&m).unwrap();
        assert_eq!((genl.cmd, genl.version), (CTRL_CMD_GETFAMILY, 1));
        let attrs = attributes(genl.attrs).unwrap();
        assert_eq!(
            find(&attrs, CTRL_ATTR_FAMILY_NAME).map(c_string),
            Some(&b"ethtool"[..])
        );
        assert_eq!(bytes.len() % 4, 0);
    }

    #[test]
    fn a_family_reply_gives_its_id_and_version() {
        let bytes = newfamily(0x1b, "devlink", 1);
        let m = messages(&bytes).unwrap()[0];
        assert_eq!(
            decode_family(&m).unwrap(),
            Family {
                name: "devlink".into(),
                id: 0x1b,
                version: 1
            }
        );
        // Another message type, another command, a missing id: errors, never a wrong id.
        let mut other = bytes.clone();
        other[4] = 0x11;
        assert!(decode_family(&messages(&other).unwrap()[0]).is_err());
        let mut cmd = bytes.clone();
        cmd[16] = 2;
        assert!(decode_family(&messages(&cmd).unwrap()[0]).is_err());
        let bare = message(GENL_ID_CTRL, 0, 1, &[CTRL_CMD_NEWFAMILY, 2, 0, 0]);
        assert!(decode_family(&messages(&bare).unwrap()[0]).is_err());
        let short = message(GENL_ID_CTRL, 0, 1, &[CTRL_CMD_NEWFAMILY]);
        assert!(decode(&messages(&short).unwrap()[0]).is_err());
    }

    #[test]
    fn nests_carry_the_nested_flag_and_pad_every_attribute() {
        let attrs = Attrs::new()
            .nest(1, Attrs::new().str(2, "eth0").u32(3, 4))
            .u8(4, 2)
            .finish();
        let top = attributes(&attrs).unwrap();
        assert_eq!(top.len(), 2);
        // The type as written has NLA_F_NESTED; `attributes` strips it.
        assert_eq!(u16::from_ne_bytes([attrs[2], attrs[3]]), 1 | NLA_F_NESTED);
        let inner = attributes(find(&top, 1).unwrap()).unwrap();
        assert_eq!(find(&inner, 2).map(c_string), Some(&b"eth0"[..]));
        assert_eq!(find(&inner, 3).and_then(u32_value), Some(4));
        assert_eq!(find(&top, 4), Some(&[2u8][..]));
        let req = encode(0x14, NLM_F_REQUEST | NLM_F_DUMP, 3, 5, 1, &attrs);
        let m = messages(&req).unwrap()[0];
        assert_eq!(decode(&m).unwrap().attrs, &attrs[..]);
    }

    /// The live kernel: `nlctrl` knows itself, and an unknown family is `ENOENT` (a name
    /// longer than `GENL_NAMSIZ - 1`, 15 bytes, would be `EINVAL`: the policy refuses it).
    #[test]
    fn the_running_kernel_resolves_nlctrl_and_refuses_an_unknown_family() {
        let mut socket = GenlSocket::open(Duration::from_secs(2)).unwrap();
        assert_eq!(socket.family("nlctrl").unwrap().id, GENL_ID_CTRL);
        let err = socket.family("rs-no-family").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        // Asked once: the second answer comes from the socket's table.
        assert_eq!(socket.family("nlctrl").unwrap().id, GENL_ID_CTRL);
    }
}
