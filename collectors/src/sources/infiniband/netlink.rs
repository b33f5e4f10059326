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
//! The framing (headers, attributes, the request loop) is [`crate::netlink`]'s; this module
//! has the nldev commands and attributes and their decoding, pure functions over bytes, and
//! [`RdmaNetlink`], which asks them over a [`crate::netlink::Socket`].

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use netlink_sys::protocols::NETLINK_RDMA;

use crate::error::{CollectError, Origin};
use crate::netlink::{
    self, Attr, DecodeError, Flow, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, Socket, attributes, find,
};

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

/// The netlink message type of an nldev command.
pub fn msg_type(cmd: u16) -> u16 {
    (RDMA_NL_NLDEV << 10) | cmd
}

/// The error of a failed `STAT_GET` of `device`'s `port`.
pub fn stat_get_error(device: &str, port: u32, err: &io::Error) -> CollectError {
    let command = format!("RDMA_NLDEV_CMD_STAT_GET {device} port {port}");
    CollectError::netlink(Some(device), Origin::RDMA, command, err)
}

/// Encodes an nldev request: a dump when `dump`, else a single query with an ACK.
pub fn encode_request(cmd: u16, dump: bool, seq: u32, attrs: &[Attr<'_>]) -> Vec<u8> {
    let flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { NLM_F_ACK };
    netlink::encode(msg_type(cmd), flags, seq, &[], attrs)
}

fn attr_str(payload: &[u8]) -> Option<String> {
    std::str::from_utf8(netlink::c_string(payload))
        .ok()
        .map(str::to_owned)
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
    let attrs = attributes(payload)?;
    let index = find(&attrs, ATTR_DEV_INDEX).and_then(netlink::u32_value);
    let name = find(&attrs, ATTR_DEV_NAME).and_then(attr_str);
    Ok(index
        .zip(name)
        .map(|(index, name)| DevEntry { index, name }))
}

/// Decodes a `CMD_PORT_GET` reply message.
pub fn decode_port(payload: &[u8]) -> Result<Option<PortEntry>, DecodeError> {
    let attrs = attributes(payload)?;
    let device = find(&attrs, ATTR_DEV_NAME).and_then(attr_str);
    let port = find(&attrs, ATTR_PORT_INDEX).and_then(netlink::u32_value);
    let netdev = find(&attrs, ATTR_NDEV_NAME).and_then(attr_str);
    Ok(device.zip(port).map(|(device, port)| PortEntry {
        device,
        port,
        netdev,
    }))
}

/// Decodes a `CMD_STAT_GET` reply: the port's counters by name, in the driver's order.
pub fn decode_stats(payload: &[u8]) -> Result<Vec<(String, u64)>, DecodeError> {
    let mut out = Vec::new();
    for (ty, nest) in attributes(payload)? {
        if ty != ATTR_STAT_HWCOUNTERS {
            continue;
        }
        for (ty, entry) in attributes(nest)? {
            if ty != ATTR_STAT_HWCOUNTER_ENTRY {
                continue;
            }
            let attrs = attributes(entry)?;
            let name = find(&attrs, ATTR_STAT_HWCOUNTER_ENTRY_NAME).and_then(attr_str);
            let value = find(&attrs, ATTR_STAT_HWCOUNTER_ENTRY_VALUE).and_then(netlink::u64_value);
            match name.zip(value) {
                Some(pair) => out.push(pair),
                None => {
                    return Err(DecodeError("counter entry without name or value".into()));
                }
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
    /// Counter names seen, shared by every reply that repeats them (a driver has a fixed set
    /// of a few hundred; the set is emptied should it ever pass [`MAX_NAMES`]).
    names: HashSet<Arc<str>>,
}

/// The most counter names [`RdmaNetlink`] keeps.
const MAX_NAMES: usize = 4096;

impl RdmaNetlink {
    /// Opens the socket; fails with `EPROTONOSUPPORT` on kernels without RDMA netlink. Each
    /// request, and each receive, waits at most `timeout`.
    pub fn open(timeout: Duration) -> io::Result<Self> {
        Ok(RdmaNetlink {
            socket: Socket::open(NETLINK_RDMA, timeout)?,
            names: HashSet::new(),
        })
    }

    /// The payloads of the reply to one request.
    fn request(&mut self, cmd: u16, dump: bool, attrs: &[Attr<'_>]) -> io::Result<Vec<Vec<u8>>> {
        let mut replies = Vec::new();
        let budget = self.socket.timeout();
        self.socket.request(
            |seq| encode_request(cmd, dump, seq, attrs),
            budget,
            |message| {
                replies.push(message.payload.to_vec());
                Ok(Flow::More)
            },
        )?;
        Ok(replies)
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
    pub fn port_stats(&mut self, dev_index: u32, port: u32) -> io::Result<Vec<(Arc<str>, u64)>> {
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
            for (name, value) in decode_stats(&payload).map_err(io::Error::other)? {
                out.push((self.intern(name), value));
            }
        }
        Ok(out)
    }

    fn intern(&mut self, name: String) -> Arc<str> {
        if let Some(known) = self.names.get(name.as_str()) {
            return Arc::clone(known);
        }
        if self.names.len() >= MAX_NAMES {
            self.names.clear();
        }
        let name: Arc<str> = Arc::from(name);
        self.names.insert(Arc::clone(&name));
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::testing::{nest, nla as attr};
    use crate::netlink::{Message, NLMSG_ERROR, messages};

    fn message(ty: u16, flags: u16, body: &[u8]) -> Vec<u8> {
        crate::netlink::testing::message(ty, flags, 7, body)
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
        let messages = messages(&datagram).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1].errno(), Some(0));
        let Message { payload, ty, .. } = &messages[0];
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

    /// Errors, acknowledgements and the errno of a failed dump are the framing's
    /// (`crate::netlink` tests them); a cut or mangled reply is an error here.
    #[test]
    fn truncation() {
        let reply = stat_reply();
        assert!(
            messages(&reply[..reply.len() - 4]).is_err(),
            "a cut message is an error"
        );
        let mut bad = reply.clone();
        bad[16] = 0xff; // the first attribute claims more bytes than there are
        bad[17] = 0x7f;
        let payload = messages(&bad).unwrap()[0].payload;
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
            if let Ok(messages) = messages(&bytes) {
                for m in messages {
                    let _ = decode_stats(m.payload);
                    let _ = decode_port(m.payload);
                }
            }
        }
    }

    /// A kernel without RDMA netlink (no `ib_core`) refuses the socket with
    /// `EPROTONOSUPPORT`, the errno the source reads as "absent"; a kernel with it answers a
    /// view whose ports all belong to devices it lists.
    #[test]
    fn opening_without_rdma_netlink_fails_cleanly() {
        match RdmaNetlink::open(Duration::from_secs(2)) {
            Err(err) => assert_eq!(
                err.raw_os_error(),
                Some(libc::EPROTONOSUPPORT),
                "opening NETLINK_RDMA failed with {err}, not EPROTONOSUPPORT"
            ),
            Ok(mut nl) => {
                let view = nl
                    .view()
                    .expect("a kernel with RDMA netlink answers a view");
                let mut indexes: Vec<u32> = view.devices.values().copied().collect();
                indexes.sort_unstable();
                indexes.dedup();
                assert_eq!(indexes.len(), view.devices.len(), "device indexes repeat");
                for ((device, port), netdev) in &view.netdevs {
                    assert!(
                        view.devices.contains_key(device),
                        "port {device}/{port} of a device the dump did not list"
                    );
                    assert!(*port >= 1, "{device} has port {port}");
                    assert!(
                        !netdev.is_empty(),
                        "{device}/{port} has an empty netdev name"
                    );
                }
            }
        }
    }
}
