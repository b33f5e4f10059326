//! The bytes of the devlink generic netlink family (`"devlink"`, version 1;
//! `include/uapi/linux/devlink.h`, `Documentation/netlink/specs/devlink.yaml`): the three
//! requests railscope sends and the parts of their replies it reads.
//!
//! Requests (no attributes; the dumps cover every instance of the socket's network
//! namespace):
//!
//! * `DEVLINK_CMD_GET` dump: one `DEVLINK_CMD_NEW` message per registered instance, with its
//!   handle (`DEVLINK_ATTR_BUS_NAME`, `DEVLINK_ATTR_DEV_NAME`).
//! * `DEVLINK_CMD_HEALTH_REPORTER_GET` dump: one message per reporter. The kernel walks each
//!   instance's own reporters, then the reporters of each of its ports (6.1: two passes in
//!   `devlink_nl_cmd_health_reporter_get_dumpit()`, devices then ports, in
//!   `net/core/devlink.c`; 6.3+: `devlink_nl_health_reporter_get_dump_one()` in
//!   `net/devlink/health.c`, per instance), so one dump with no attributes answers for every
//!   device and port: no per-device request is needed.
//! * `DEVLINK_CMD_INFO_GET` for one instance (its handle as attributes), so that a driver
//!   whose `info_get` fails (a firmware command that errors) costs that instance only: in a
//!   dump the first failing instance ends the dump with its errno.
//!
//! A reporter message (`devlink_nl_health_reporter_fill()`): the handle, `PORT_INDEX` (u32)
//! for a port reporter, then the nest `DEVLINK_ATTR_HEALTH_REPORTER` (opened with
//! `nla_nest_start_noflag`: no `NLA_F_NESTED`) holding `NAME` (string), `STATE` (u8),
//! `ERR_COUNT` and `RECOVER_COUNT` (u64), `GRACEFUL_PERIOD` (u64, ms) and `AUTO_RECOVER`
//! (u8) when the reporter has a `recover` op, `DUMP_TS` (u64, `jiffies_to_msecs`) and
//! `DUMP_TS_NS` (u64, `ktime_get_real_ns`) while a dump is stored, `AUTO_DUMP` (u8) when it
//! has a `dump` op. u64 values are `nla_put_u64_64bit` (8 bytes; on architectures without
//! efficient unaligned access a `DEVLINK_ATTR_PAD` attribute may come before one, ignored
//! like every unknown attribute); a 4-byte value (`NLA_UINT` as newer specs allow) is read
//! too.
//!
//! An info message (`devlink_nl_info_fill()`): the handle, `INFO_DRIVER_NAME`,
//! `INFO_SERIAL_NUMBER`, `INFO_BOARD_SERIAL_NUMBER` (strings, each when known), and one
//! `INFO_VERSION_FIXED` / `_RUNNING` / `_STORED` nest per version holding
//! `INFO_VERSION_NAME` and `INFO_VERSION_VALUE`.
//!
//! The attribute numbers are ABI ("don't change the order or add anything between") and the
//! same in 6.1 and current kernels; `DUMP_TS_NS` (5.7, backported to 5.4 stable),
//! `AUTO_DUMP` (5.8) and `INFO_BOARD_SERIAL_NUMBER` (5.9) are in every kernel railscope
//! supports.

use super::types::{Info, Reporter, ReporterState, Version, VersionKind};
use crate::netlink::genl::{self, Attrs};
use crate::netlink::{DecodeError, Message, NLM_F_DUMP, NLM_F_REQUEST, attributes, c_string};

/// The family's name, as `nlctrl` knows it (`DEVLINK_GENL_NAME`).
pub const FAMILY: &str = "devlink";
/// `DEVLINK_GENL_VERSION`.
pub const VERSION: u8 = 1;

/// `DEVLINK_CMD_GET`.
pub const CMD_GET: u8 = 1;
/// `DEVLINK_CMD_NEW`: the command of `DEVLINK_CMD_GET`'s replies.
pub const CMD_NEW: u8 = 3;
/// `DEVLINK_CMD_INFO_GET`.
pub const CMD_INFO_GET: u8 = 51;
/// `DEVLINK_CMD_HEALTH_REPORTER_GET`.
pub const CMD_HEALTH_REPORTER_GET: u8 = 52;

/// `DEVLINK_ATTR_BUS_NAME` (string).
pub const ATTR_BUS_NAME: u16 = 1;
/// `DEVLINK_ATTR_DEV_NAME` (string).
pub const ATTR_DEV_NAME: u16 = 2;
/// `DEVLINK_ATTR_PORT_INDEX` (u32).
pub const ATTR_PORT_INDEX: u16 = 3;
/// `DEVLINK_ATTR_PAD`.
pub const ATTR_PAD: u16 = 61;
/// `DEVLINK_ATTR_INFO_DRIVER_NAME` (string).
pub const ATTR_INFO_DRIVER_NAME: u16 = 98;
/// `DEVLINK_ATTR_INFO_SERIAL_NUMBER` (string).
pub const ATTR_INFO_SERIAL_NUMBER: u16 = 99;
/// `DEVLINK_ATTR_INFO_VERSION_FIXED` (nest).
pub const ATTR_INFO_VERSION_FIXED: u16 = 100;
/// `DEVLINK_ATTR_INFO_VERSION_RUNNING` (nest).
pub const ATTR_INFO_VERSION_RUNNING: u16 = 101;
/// `DEVLINK_ATTR_INFO_VERSION_STORED` (nest).
pub const ATTR_INFO_VERSION_STORED: u16 = 102;
/// `DEVLINK_ATTR_INFO_VERSION_NAME` (string).
pub const ATTR_INFO_VERSION_NAME: u16 = 103;
/// `DEVLINK_ATTR_INFO_VERSION_VALUE` (string).
pub const ATTR_INFO_VERSION_VALUE: u16 = 104;
/// `DEVLINK_ATTR_HEALTH_REPORTER` (nest).
pub const ATTR_HEALTH_REPORTER: u16 = 114;
/// `DEVLINK_ATTR_HEALTH_REPORTER_NAME` (string).
pub const ATTR_HEALTH_REPORTER_NAME: u16 = 115;
/// `DEVLINK_ATTR_HEALTH_REPORTER_STATE` (u8).
pub const ATTR_HEALTH_REPORTER_STATE: u16 = 116;
/// `DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT` (u64).
pub const ATTR_HEALTH_REPORTER_ERR_COUNT: u16 = 117;
/// `DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT` (u64).
pub const ATTR_HEALTH_REPORTER_RECOVER_COUNT: u16 = 118;
/// `DEVLINK_ATTR_HEALTH_REPORTER_DUMP_TS` (u64, jiffies as ms).
pub const ATTR_HEALTH_REPORTER_DUMP_TS: u16 = 119;
/// `DEVLINK_ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD` (u64, ms).
pub const ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD: u16 = 120;
/// `DEVLINK_ATTR_HEALTH_REPORTER_AUTO_RECOVER` (u8).
pub const ATTR_HEALTH_REPORTER_AUTO_RECOVER: u16 = 121;
/// `DEVLINK_ATTR_HEALTH_REPORTER_DUMP_TS_NS` (u64, ns since the Unix epoch).
pub const ATTR_HEALTH_REPORTER_DUMP_TS_NS: u16 = 137;
/// `DEVLINK_ATTR_HEALTH_REPORTER_AUTO_DUMP` (u8).
pub const ATTR_HEALTH_REPORTER_AUTO_DUMP: u16 = 141;
/// `DEVLINK_ATTR_INFO_BOARD_SERIAL_NUMBER` (string).
pub const ATTR_INFO_BOARD_SERIAL_NUMBER: u16 = 146;

/// A devlink instance's handle: bus and device name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Handle {
    /// `DEVLINK_ATTR_BUS_NAME`.
    pub bus: String,
    /// `DEVLINK_ATTR_DEV_NAME`.
    pub name: String,
}

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.bus, self.name)
    }
}

/// Encodes a dump of `cmd` ([`CMD_GET`], [`CMD_HEALTH_REPORTER_GET`]) to the family `family`.
pub fn encode_dump(family: u16, cmd: u8, seq: u32) -> Vec<u8> {
    genl::encode(family, NLM_F_REQUEST | NLM_F_DUMP, seq, cmd, VERSION, &[])
}

/// Encodes `DEVLINK_CMD_INFO_GET` for the instance `handle`.
pub fn encode_info_get(family: u16, handle: &Handle, seq: u32) -> Vec<u8> {
    let attrs = Attrs::new()
        .str(ATTR_BUS_NAME, &handle.bus)
        .str(ATTR_DEV_NAME, &handle.name)
        .finish();
    genl::encode(family, NLM_F_REQUEST, seq, CMD_INFO_GET, VERSION, &attrs)
}

fn string(payload: &[u8]) -> String {
    String::from_utf8_lossy(c_string(payload)).into_owned()
}

/// An unsigned attribute of 1, 2, 4 or 8 bytes (`NLA_U8` ... `NLA_U64`, `NLA_UINT`).
fn unsigned(ty: u16, payload: &[u8]) -> Result<u64, DecodeError> {
    Ok(match *payload {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_ne_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_ne_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_ne_bytes([a, b, c, d, e, f, g, h]),
        _ => {
            return Err(DecodeError(format!(
                "attribute {ty} has {} bytes, not an unsigned integer",
                payload.len()
            )));
        }
    })
}

fn u8_value(ty: u16, payload: &[u8]) -> Result<u8, DecodeError> {
    match payload {
        [v, ..] => Ok(*v),
        [] => Err(DecodeError(format!("attribute {ty} is empty, not a u8"))),
    }
}

/// The handle of a reply; an error when either half is missing.
fn handle(attrs: &[(u16, &[u8])]) -> Result<Handle, DecodeError> {
    let get = |ty| attrs.iter().find(|(t, _)| *t == ty).map(|(_, p)| string(p));
    match (get(ATTR_BUS_NAME), get(ATTR_DEV_NAME)) {
        (Some(bus), Some(name)) if !bus.is_empty() && !name.is_empty() => Ok(Handle { bus, name }),
        _ => Err(DecodeError(
            "devlink reply without DEVLINK_ATTR_BUS_NAME and DEVLINK_ATTR_DEV_NAME".into(),
        )),
    }
}

/// Decodes a reply of `DEVLINK_CMD_GET`: the instance's handle.
pub fn decode_instance(message: &Message<'_>) -> Result<Handle, DecodeError> {
    let genl = genl::decode(message)?;
    handle(&attributes(genl.attrs)?)
}

/// Decodes one reply of the `DEVLINK_CMD_HEALTH_REPORTER_GET` dump: the instance it belongs
/// to and the reporter. A reporter without a name, or with a value of the wrong size, is an
/// error (it costs that reporter only).
pub fn decode_reporter(message: &Message<'_>) -> Result<(Handle, Reporter), DecodeError> {
    let genl = genl::decode(message)?;
    let attrs = attributes(genl.attrs)?;
    let handle = handle(&attrs)?;
    let mut port = None;
    let mut nest = None;
    for (ty, payload) in &attrs {
        match *ty {
            ATTR_PORT_INDEX => {
                let index = unsigned(*ty, payload)?;
                port = Some(u32::try_from(index).map_err(|_| {
                    DecodeError(format!("port index {index} does not fit 32 bits"))
                })?);
            }
            ATTR_HEALTH_REPORTER => nest = Some(*payload),
            _ => {}
        }
    }
    let nest = nest.ok_or_else(|| {
        DecodeError(format!(
            "reporter of {handle} without DEVLINK_ATTR_HEALTH_REPORTER"
        ))
    })?;
    let mut r = Reporter {
        port,
        name: String::new(),
        state: None,
        errors: None,
        recoveries: None,
        dump_jiffies_ms: None,
        dump_unix_ns: None,
        graceful_period_ms: None,
        auto_recover: None,
        auto_dump: None,
    };
    for (ty, p) in attributes(nest)? {
        match ty {
            ATTR_HEALTH_REPORTER_NAME => r.name = string(p),
            ATTR_HEALTH_REPORTER_STATE => r.state = Some(ReporterState::from_u8(u8_value(ty, p)?)),
            ATTR_HEALTH_REPORTER_ERR_COUNT => r.errors = Some(unsigned(ty, p)?),
            ATTR_HEALTH_REPORTER_RECOVER_COUNT => r.recoveries = Some(unsigned(ty, p)?),
            ATTR_HEALTH_REPORTER_DUMP_TS => r.dump_jiffies_ms = Some(unsigned(ty, p)?),
            ATTR_HEALTH_REPORTER_DUMP_TS_NS => r.dump_unix_ns = Some(unsigned(ty, p)?),
            ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD => r.graceful_period_ms = Some(unsigned(ty, p)?),
            ATTR_HEALTH_REPORTER_AUTO_RECOVER => r.auto_recover = Some(u8_value(ty, p)? != 0),
            ATTR_HEALTH_REPORTER_AUTO_DUMP => r.auto_dump = Some(u8_value(ty, p)? != 0),
            _ => {}
        }
    }
    if r.name.is_empty() {
        return Err(DecodeError(format!("reporter of {handle} without a name")));
    }
    Ok((handle, r))
}

/// Decodes a reply of `DEVLINK_CMD_INFO_GET`: the instance and its info. A version nest
/// without a name is an error (it costs that instance's info).
pub fn decode_info(message: &Message<'_>) -> Result<(Handle, Info), DecodeError> {
    let genl = genl::decode(message)?;
    let attrs = attributes(genl.attrs)?;
    let handle = handle(&attrs)?;
    let mut info = Info::default();
    for (ty, payload) in &attrs {
        let kind = match *ty {
            ATTR_INFO_DRIVER_NAME => {
                info.driver = Some(string(payload));
                continue;
            }
            ATTR_INFO_SERIAL_NUMBER => {
                info.serial_number = Some(string(payload));
                continue;
            }
            ATTR_INFO_BOARD_SERIAL_NUMBER => {
                info.board_serial_number = Some(string(payload));
                continue;
            }
            ATTR_INFO_VERSION_FIXED => VersionKind::Fixed,
            ATTR_INFO_VERSION_RUNNING => VersionKind::Running,
            ATTR_INFO_VERSION_STORED => VersionKind::Stored,
            _ => continue,
        };
        let inner = attributes(payload)?;
        let get = |t| {
            inner
                .iter()
                .find(|(ty, _)| *ty == t)
                .map(|(_, p)| string(p))
        };
        let name = get(ATTR_INFO_VERSION_NAME)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| DecodeError(format!("version of {handle} without a name")))?;
        info.versions.push(Version {
            kind,
            name,
            value: get(ATTR_INFO_VERSION_VALUE).unwrap_or_default(),
        });
    }
    Ok((handle, info))
}
