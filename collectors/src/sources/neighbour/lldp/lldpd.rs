//! Reading a running lldpd instead of the frames: `lldpcli -f json0 -u <socket> show neighbors
//! details`, run on the receiver's thread every [`POLL_EVERY`] under a [`RUN_TIMEOUT`], never on
//! the scrape path.
//!
//! The `json0` format (lldpd `src/client/json_writer.c`, `display.c`; checked against the
//! output of lldpd 1.0.16, Debian bookworm, in `tests/fixtures/lldp/`) writes every element as
//! an array, so its shape does not depend on how many there are: `{"lldp": [{"interface":
//! [{"name", "via", "chassis": [{"id": [{"type", "value"}], "name": [{"value"}], ...}],
//! "port": [{"id": [...], "descr": [...], "ttl": [...], "mfs": [...]}], "unknown-tlvs":
//! [{"unknown-tlv": [{"oui": "00,80,C2", "subtype": "11", "value": "08,08"}]}]}]}]}`; with no
//! neighbour, `{"lldp": [{}]}`. lldpd does not decode DCBX TLVs: the PFC Configuration TLV is
//! among the unknown TLVs (lldpd built with custom TLV support, as Debian's is).
//!
//! lldpd ages neighbours out itself, so a neighbour it lists is known and one it no longer
//! lists has left; `last_seen` is the time of the last poll that listed it.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::parse::{self, Id, Lldpdu};
use crate::sources::neighbour::types::Pfc;

/// How often lldpd is asked.
pub const POLL_EVERY: Duration = Duration::from_secs(10);
/// How long one `lldpcli` may run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(5);
/// lldpd's default control socket.
pub const DEFAULT_SOCKET: &str = "/run/lldpd.socket";

/// Why lldpd could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `lldpcli` could not be run.
    #[error("cannot run lldpcli: {0}")]
    Spawn(String),
    /// It failed (no lldpd, no access to its socket); `denied` when it said so.
    #[error("lldpcli failed: {message}")]
    Failed {
        /// Its message.
        message: String,
        /// Whether the control socket refused access.
        denied: bool,
    },
    /// It did not finish in time.
    #[error("lldpcli did not finish within {0:?}")]
    Timeout(Duration),
    /// Its output is not lldpd's json0.
    #[error("lldpcli output: {0}")]
    Format(String),
}

/// Runs `lldpcli -f json0 -u <socket> show neighbors details` and returns its output.
pub fn run(socket: &Path) -> Result<String, Error> {
    let mut child = Command::new("lldpcli")
        .args(["-f", "json0", "-u"])
        .arg(socket)
        .args(["show", "neighbors", "details"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Spawn(e.to_string()))?;
    let started = Instant::now();
    // The output is a few KiB per neighbour: read it to the end (the pipe would fill and
    // block lldpcli otherwise), then reap.
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_string(&mut out);
        }
        out
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < RUN_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout(RUN_TIMEOUT));
            }
            Err(e) => return Err(Error::Spawn(e.to_string())),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        let message = err.trim().lines().last().unwrap_or("").to_owned();
        let denied = message.contains("Permission denied");
        return Err(Error::Failed { message, denied });
    }
    Ok(out)
}

/// The first `value` of `v[key]` (`"key": [{"value": "..."}]`).
fn first_value<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_array()?.first()?.get("value")?.as_str()
}

/// An id (`[{"type": "mac", "value": "aa:bb:..."}]`) as a Chassis ID or Port ID.
fn id(v: &Value, chassis: bool) -> Option<Id> {
    let entry = v.get("id")?.as_array()?.first()?;
    let kind = entry.get("type")?.as_str()?;
    let value = entry.get("value")?.as_str()?;
    let mac: Option<Vec<u8>> = value
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2))
        .collect();
    let (subtype, bytes) = match (kind, mac) {
        ("mac", Some(m)) if m.len() == 6 => (
            if chassis {
                parse::CHASSIS_MAC
            } else {
                parse::PORT_MAC
            },
            m,
        ),
        ("ip", _) => match value.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => (
                if chassis {
                    parse::CHASSIS_NETWORK_ADDRESS
                } else {
                    parse::PORT_NETWORK_ADDRESS
                },
                [&[1u8][..], &a.octets()].concat(),
            ),
            Ok(std::net::IpAddr::V6(a)) => (
                if chassis {
                    parse::CHASSIS_NETWORK_ADDRESS
                } else {
                    parse::PORT_NETWORK_ADDRESS
                },
                [&[2u8][..], &a.octets()].concat(),
            ),
            Err(_) => (7, value.as_bytes().to_vec()),
        },
        ("ifname", _) => (if chassis { 6 } else { 5 }, value.as_bytes().to_vec()),
        ("ifalias", _) => (if chassis { 2 } else { 1 }, value.as_bytes().to_vec()),
        _ => (7, value.as_bytes().to_vec()),
    };
    Some(Id {
        subtype,
        value: bytes,
    })
}

/// `"08,08"` (lldpd's hex bytes joined with `,`) as bytes.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    text.split(',')
        .map(|b| u8::from_str_radix(b.trim(), 16).ok())
        .collect()
}

/// The PFC Configuration TLV among the unknown TLVs.
fn pfc(iface: &Value) -> Option<Pfc> {
    for group in iface.get("unknown-tlvs")?.as_array()? {
        for tlv in group.get("unknown-tlv")?.as_array()? {
            let oui = tlv.get("oui")?.as_str()?;
            let subtype = tlv.get("subtype")?.as_str()?;
            if hex_bytes(oui) == Some(vec![0x00, 0x80, 0xc2]) && subtype.trim() == "11" {
                let b = hex_bytes(tlv.get("value")?.as_str()?)?;
                if b.len() >= 2 {
                    return Some(Pfc {
                        willing: b[0] & 0x80 != 0,
                        mbc: b[0] & 0x40 != 0,
                        capability: b[0] & 0x0f,
                        enabled: b[1],
                    });
                }
            }
        }
    }
    None
}

/// Parses `lldpcli -f json0 show neighbors details`: (interface name, what its neighbour
/// sent) for every LLDP neighbour (neighbours lldpd learned over CDP, EDP, FDP or SONMP are
/// skipped). A neighbour without a chassis or port id is skipped; output that is not json0
/// is an error.
pub fn parse_json0(text: &str) -> Result<Vec<(String, Lldpdu)>, Error> {
    let root: Value = serde_json::from_str(text).map_err(|e| Error::Format(e.to_string()))?;
    let lldp = root
        .get("lldp")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::Format("no \"lldp\" array".to_owned()))?;
    let mut out = Vec::new();
    for block in lldp {
        let Some(ifaces) = block.get("interface").and_then(Value::as_array) else {
            continue;
        };
        for iface in ifaces {
            let (Some(name), via) = (
                iface.get("name").and_then(Value::as_str),
                iface.get("via").and_then(Value::as_str),
            ) else {
                continue;
            };
            if via.is_some_and(|v| v != "LLDP") {
                continue;
            }
            let chassis = iface
                .get("chassis")
                .and_then(Value::as_array)
                .and_then(|a| a.first());
            let port = iface
                .get("port")
                .and_then(Value::as_array)
                .and_then(|a| a.first());
            let (Some(chassis), Some(port)) = (chassis, port) else {
                continue;
            };
            let (Some(chassis_id), Some(port_id)) = (id(chassis, true), id(port, false)) else {
                continue;
            };
            let ttl = first_value(port, "ttl")
                .or_else(|| first_value(chassis, "ttl"))
                .and_then(|t| t.parse().ok())
                .unwrap_or(120);
            out.push((
                name.to_owned(),
                Lldpdu {
                    chassis_id,
                    port_id,
                    ttl,
                    port_description: first_value(port, "descr").map(str::to_owned),
                    system_name: first_value(chassis, "name").map(str::to_owned),
                    system_description: first_value(chassis, "descr").map(str::to_owned),
                    management_addresses: Vec::new(),
                    max_frame_size: first_value(port, "mfs").and_then(|m| m.parse().ok()),
                    mac_phy: None,
                    pfc: pfc(iface),
                    ets: None,
                    app_priorities: Vec::new(),
                },
            ));
        }
    }
    Ok(out)
}
