//! `ETHTOOL_MSG_MODULE_EEPROM_GET` on the wire, and the kernel as a [`PageReader`].
//!
//! Kernel interface: `include/uapi/linux/ethtool_netlink.h` (6.14+:
//! `ethtool_netlink_generated.h`): request `ETHTOOL_MSG_MODULE_EEPROM_GET` (31) with
//! `ETHTOOL_A_MODULE_EEPROM_HEADER` (nest), `_OFFSET` (u32), `_LENGTH` (u32), `_PAGE` (u8),
//! `_BANK` (u8), `_I2C_ADDRESS` (u8); reply `ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY` (32) with
//! the header and `_DATA` (binary). `eeprom_parse_request()` (`net/ethtool/eeprom.c`)
//! requires offset, length, page and I2C address (bank defaults to 0), and refuses with
//! `EINVAL` a read of page > 0 below offset 128, one across offset 128, and one past 256;
//! the policy bounds the length to 1..=128 and the offset to 0..=255 ([`PageRequest::new`]
//! checks the same before asking). The reply's length is what the driver returned, which
//! can be fewer bytes than asked: [`NetlinkPages`] treats that as a failed read (mlx5 before
//! d1c94bc5b90c answered a failed MCIA read with success and 0 bytes).
//!
//! **Privilege:** unlike most ethtool GET commands, `ETHTOOL_MSG_MODULE_EEPROM_GET` carries
//! `GENL_UNS_ADMIN_PERM` in `ethtool_genl_ops` (`net/ethtool/netlink.c`, since the command
//! was added in 5.13): it needs `CAP_NET_ADMIN` in the user namespace owning the netdev's
//! network namespace, and answers `EPERM` without it.

use std::io;
use std::time::Duration;

use super::eeprom::{PageReader, PageRequest, ReadError};
use crate::netlink::ethtool::{A_HEADER_DEV_NAME, FAMILY, VERSION, header};
use crate::netlink::genl::{self, Attrs, GenlSocket};
use crate::netlink::{DecodeError, Flow, Message, NLM_F_REQUEST, attributes, find};

/// `ETHTOOL_MSG_MODULE_EEPROM_GET`.
pub const MSG_MODULE_EEPROM_GET: u8 = 31;
/// `ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY`.
pub const MSG_MODULE_EEPROM_GET_REPLY: u8 = 32;
/// `ETHTOOL_A_MODULE_EEPROM_HEADER` (nest).
pub const A_HEADER: u16 = 1;
/// `ETHTOOL_A_MODULE_EEPROM_OFFSET` (u32).
pub const A_OFFSET: u16 = 2;
/// `ETHTOOL_A_MODULE_EEPROM_LENGTH` (u32).
pub const A_LENGTH: u16 = 3;
/// `ETHTOOL_A_MODULE_EEPROM_PAGE` (u8).
pub const A_PAGE: u16 = 4;
/// `ETHTOOL_A_MODULE_EEPROM_BANK` (u8).
pub const A_BANK: u16 = 5;
/// `ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS` (u8).
pub const A_I2C_ADDRESS: u16 = 6;
/// `ETHTOOL_A_MODULE_EEPROM_DATA` (binary).
pub const A_DATA: u16 = 7;

/// How long one receive may wait: a page goes through NIC firmware (mlx5: an MCIA register
/// access, milliseconds), and a wedged one must not hold the unit past its deadline's share.
pub const RECEIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The request header of the netdev: its index and name when the index is known (the
/// kernel checks they agree), else its name.
pub fn device_header(netdev: &str, ifindex: Option<u32>) -> Attrs {
    match ifindex {
        Some(index) => header(index, 0).str(A_HEADER_DEV_NAME, netdev),
        None => Attrs::new().str(A_HEADER_DEV_NAME, netdev),
    }
}

/// Encodes `ETHTOOL_MSG_MODULE_EEPROM_GET` for `request` to the family `family`.
pub fn encode_get(family: u16, seq: u32, device: Attrs, request: PageRequest) -> Vec<u8> {
    let attrs = Attrs::new()
        .nest(A_HEADER, device)
        .u32(A_OFFSET, u32::from(request.offset))
        .u32(A_LENGTH, u32::from(request.length))
        .u8(A_PAGE, request.page)
        .u8(A_BANK, request.bank)
        .u8(A_I2C_ADDRESS, request.i2c_address)
        .finish();
    genl::encode(
        family,
        NLM_F_REQUEST,
        seq,
        MSG_MODULE_EEPROM_GET,
        VERSION,
        &attrs,
    )
}

/// Decodes a reply: the bytes of `ETHTOOL_A_MODULE_EEPROM_DATA`.
pub fn decode_reply(message: &Message<'_>) -> Result<Vec<u8>, DecodeError> {
    let genl = genl::decode(message)?;
    if genl.cmd != MSG_MODULE_EEPROM_GET_REPLY {
        return Err(DecodeError(format!(
            "module EEPROM reply of command {}",
            genl.cmd
        )));
    }
    let attrs = attributes(genl.attrs)?;
    find(&attrs, A_DATA).map(<[u8]>::to_vec).ok_or_else(|| {
        DecodeError("module EEPROM reply without ETHTOOL_A_MODULE_EEPROM_DATA".into())
    })
}

/// One netdev's module memory through the kernel: a generic netlink socket of its own.
#[derive(Debug)]
pub struct NetlinkPages {
    socket: GenlSocket,
    family: u16,
    netdev: String,
    ifindex: Option<u32>,
}

impl NetlinkPages {
    /// Opens a socket and resolves the `ethtool` family (`ENOENT` when the kernel has
    /// none, a kernel before 5.6 or without `CONFIG_ETHTOOL_NETLINK`).
    pub fn open(netdev: &str, ifindex: Option<u32>) -> io::Result<Self> {
        let mut socket = GenlSocket::open(RECEIVE_TIMEOUT)?;
        let family = socket.family(FAMILY)?.id;
        Ok(NetlinkPages {
            socket,
            family,
            netdev: netdev.to_owned(),
            ifindex,
        })
    }
}

impl PageReader for NetlinkPages {
    fn read(&mut self, request: PageRequest) -> Result<Vec<u8>, ReadError> {
        let (family, device) = (self.family, device_header(&self.netdev, self.ifindex));
        let mut data = None;
        let budget = self.socket.timeout();
        self.socket
            .request(
                |seq| encode_get(family, seq, device, request),
                budget,
                |reply| {
                    data = Some(decode_reply(reply)?);
                    Ok(Flow::Done)
                },
            )
            .map_err(|err| match err.raw_os_error() {
                Some(errno) => ReadError::Errno {
                    request,
                    errno,
                    detail: err.to_string(),
                },
                None => ReadError::Other(format!("{request}: {err}")),
            })?;
        let data = data.ok_or_else(|| ReadError::Other(format!("{request}: no reply")))?;
        if data.len() != usize::from(request.length) {
            return Err(ReadError::Length {
                request,
                got: data.len(),
            });
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::ethtool::A_HEADER_DEV_INDEX;
    use crate::netlink::testing::{cstr, message, nest, nla};
    use crate::netlink::{c_string, messages, u32_value};

    /// The reply `ethnl_default_doit()` writes: the genl header (`cmd`, version 1), the
    /// reply header nest (`ethnl_fill_reply_header()`: index and name) and the data.
    fn reply(cmd: u8, data: Option<&[u8]>) -> Vec<u8> {
        let mut body = vec![cmd, 1, 0, 0];
        body.extend(nest(
            A_HEADER,
            &[
                nla(A_HEADER_DEV_INDEX, &7u32.to_ne_bytes()),
                nla(A_HEADER_DEV_NAME, &cstr("enp1s0f0np0")),
            ],
        ));
        if let Some(data) = data {
            body.extend(nla(A_DATA, data));
        }
        message(0x15, 0, 3, &body)
    }

    #[test]
    fn the_request_carries_every_attribute_the_kernel_requires() {
        let request = PageRequest::upper(0x11, 1, 135, 67).unwrap();
        let bytes = encode_get(0x15, 3, device_header("enp1s0f0np0", Some(7)), request);
        let m = messages(&bytes).unwrap()[0];
        assert_eq!((m.ty, m.flags, m.seq), (0x15, NLM_F_REQUEST, 3));
        let g = genl::decode(&m).unwrap();
        assert_eq!((g.cmd, g.version), (MSG_MODULE_EEPROM_GET, 1));
        let attrs = attributes(g.attrs).unwrap();
        let h = attributes(find(&attrs, A_HEADER).unwrap()).unwrap();
        assert_eq!(find(&h, A_HEADER_DEV_INDEX).and_then(u32_value), Some(7));
        assert_eq!(
            find(&h, A_HEADER_DEV_NAME).map(c_string),
            Some(&b"enp1s0f0np0"[..])
        );
        assert_eq!(find(&attrs, A_OFFSET).and_then(u32_value), Some(135));
        assert_eq!(find(&attrs, A_LENGTH).and_then(u32_value), Some(67));
        assert_eq!(find(&attrs, A_PAGE), Some(&[0x11u8][..]));
        assert_eq!(find(&attrs, A_BANK), Some(&[1u8][..]));
        assert_eq!(find(&attrs, A_I2C_ADDRESS), Some(&[0x50u8][..]));
        // Without an index, the name alone.
        let by_name = encode_get(0x15, 4, device_header("eth0", None), request);
        let g = genl::decode(&messages(&by_name).unwrap()[0]).unwrap();
        let attrs = attributes(g.attrs).unwrap();
        let h = attributes(find(&attrs, A_HEADER).unwrap()).unwrap();
        assert_eq!(find(&h, A_HEADER_DEV_INDEX), None);
    }

    #[test]
    fn the_reply_gives_its_data_and_nothing_else_passes() {
        let data: Vec<u8> = (0..128).collect();
        let bytes = reply(MSG_MODULE_EEPROM_GET_REPLY, Some(&data));
        assert_eq!(decode_reply(&messages(&bytes).unwrap()[0]).unwrap(), data);
        let other = reply(MSG_MODULE_EEPROM_GET, Some(&data));
        assert!(decode_reply(&messages(&other).unwrap()[0]).is_err());
        let bare = reply(MSG_MODULE_EEPROM_GET_REPLY, None);
        assert!(decode_reply(&messages(&bare).unwrap()[0]).is_err());
        // A zero-length DATA (mlx5's "success" on a failed read) decodes as empty: the reader
        // refuses it by length.
        let empty = reply(MSG_MODULE_EEPROM_GET_REPLY, Some(&[]));
        assert_eq!(
            decode_reply(&messages(&empty).unwrap()[0]).unwrap(),
            Vec::<u8>::new()
        );
    }

    /// The live kernel: a veth has no module EEPROM ops, and MODULE_EEPROM_GET says
    /// `EOPNOTSUPP` (the legacy fallback has no `get_module_info` either).
    #[test]
    fn a_veth_answers_eopnotsupp() {
        let (a, b) = (
            format!("rstx{}a", std::process::id() % 10000),
            format!("rstx{}b", std::process::id() % 10000),
        );
        let made = std::process::Command::new("ip")
            .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            eprintln!("skipped: cannot create a veth pair here");
            return;
        }
        let result = NetlinkPages::open(&a, None)
            .map_err(|e| e.raw_os_error())
            .and_then(|mut pages| {
                pages
                    .read(PageRequest::lower(0x50, 0, 1).unwrap())
                    .map_err(|e| e.errno())
            });
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &a])
            .status();
        assert_eq!(result, Err(Some(libc::EOPNOTSUPP)));
    }
}
