//! LLDPDU parsing: an Ethernet frame (or the LLDPDU inside it) to [`Lldpdu`].
//!
//! Formats: IEEE 802.1AB-2016 clause 8 (the TLVs and their order), IEEE 802.3 clause 79
//! (organizationally specific TLVs of OUI 00-12-0F), IEEE 802.1Q-2018 annex D / 802.1Qaz (DCBX
//! TLVs of OUI 00-80-C2), checked against lldpd (`src/lldp-const.h`,
//! `src/daemon/protocols/lldp.c` `lldp_decode`), whose acceptance rules this parser follows:
//!
//! * A TLV header is 16 bits, type in the high 7, length in the low 9; a length past the end
//!   of the frame is an error (the whole LLDPDU is dropped, as lldpd drops it).
//! * Chassis ID, Port ID and TTL are mandatory and come first, second and third; Chassis ID
//!   and Port ID have a subtype of 1 to 7 and 1 to 255 bytes of id. Each at most once.
//! * The End TLV has length 0; what follows it (Ethernet padding) is ignored. An LLDPDU that
//!   ends without one is accepted, as lldpd accepts it.
//! * TTL 0 is not an error: it is a shutdown LLDPDU (the neighbour is going away, 802.1AB
//!   9.2.7.7.4) and the receiver forgets the neighbour at once.
//! * Organizationally specific TLVs that are too short for what they carry are ignored
//!   (lldpd drops the whole LLDPDU for some of them; losing the neighbour's identity over a
//!   bad optional TLV would hide more than it shows); unknown ones are skipped.
//!
//! Nothing here panics on any input: every read is bounds-checked.

use std::fmt::Write as _;

use crate::sources::neighbour::types::Pfc;

/// EtherType of LLDP.
pub const ETH_P_LLDP: u16 = 0x88cc;
/// The nearest-bridge group address LLDP is sent to (and the one switches send to).
pub const NEAREST_BRIDGE: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];

/// TLV types (802.1AB table 8-1).
const TLV_END: u8 = 0;
const TLV_CHASSIS_ID: u8 = 1;
const TLV_PORT_ID: u8 = 2;
const TLV_TTL: u8 = 3;
const TLV_PORT_DESCRIPTION: u8 = 4;
const TLV_SYSTEM_NAME: u8 = 5;
const TLV_SYSTEM_DESCRIPTION: u8 = 6;
const TLV_MANAGEMENT_ADDRESS: u8 = 8;
const TLV_ORG: u8 = 127;

/// IEEE 802.1 OUI and its subtypes (802.1Q-2018 D.2; lldpd `LLDP_TLV_ORG_DOT1`).
const OUI_DOT1: [u8; 3] = [0x00, 0x80, 0xc2];
const DOT1_ETS_CONFIGURATION: u8 = 0x09;
const DOT1_PFC_CONFIGURATION: u8 = 0x0b;
const DOT1_APPLICATION_PRIORITY: u8 = 0x0c;
/// IEEE 802.3 OUI and its subtypes (802.3 79.3; lldpd `LLDP_TLV_DOT3_MAC`, `_MFS`).
const OUI_DOT3: [u8; 3] = [0x00, 0x12, 0x0f];
const DOT3_MAC_PHY: u8 = 1;
const DOT3_MAX_FRAME_SIZE: u8 = 4;

/// Chassis ID subtype MAC address (802.1AB table 8-2; lldpd `LLDP_CHASSISID_SUBTYPE_LLADDR`).
pub const CHASSIS_MAC: u8 = 4;
/// Chassis ID subtype network address.
pub const CHASSIS_NETWORK_ADDRESS: u8 = 5;
/// Port ID subtype MAC address (802.1AB table 8-3; lldpd `LLDP_PORTID_SUBTYPE_LLADDR`).
pub const PORT_MAC: u8 = 3;
/// Port ID subtype network address.
pub const PORT_NETWORK_ADDRESS: u8 = 4;

/// Application Priority selector "UDP or DCCP port" (802.1Q-2018 D.2.11.3).
const SELECTOR_UDP: u8 = 3;
/// The UDP port of RoCE v2.
pub const ROCE_V2_UDP_PORT: u16 = 4791;

/// A Chassis ID or Port ID: its subtype and raw id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id {
    /// The subtype (1–7).
    pub subtype: u8,
    /// The id bytes (1–255).
    pub value: Vec<u8>,
}

impl Id {
    /// The id as text: a MAC address as `aa:bb:cc:dd:ee:ff`, a network address as the
    /// address, anything else as its bytes where they are printable text, else as hex bytes
    /// joined with `:`. `mac`/`network` are the subtypes meaning a MAC or network address for
    /// this kind of id.
    fn text(&self, mac: u8, network: u8) -> String {
        if self.subtype == mac && self.value.len() == 6 {
            return hex(&self.value);
        }
        if self.subtype == network {
            match (self.value.first(), self.value.len()) {
                (Some(1), 5) => {
                    let b = &self.value[1..5];
                    return format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
                }
                (Some(2), 17) => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&self.value[1..17]);
                    return std::net::Ipv6Addr::from(b).to_string();
                }
                _ => return hex(&self.value),
            }
        }
        match std::str::from_utf8(&self.value) {
            Ok(s) if s.chars().all(|c| !c.is_control()) => s.to_owned(),
            _ => hex(&self.value),
        }
    }

    /// A Chassis ID as text.
    pub fn chassis_text(&self) -> String {
        self.text(CHASSIS_MAC, CHASSIS_NETWORK_ADDRESS)
    }

    /// A Port ID as text.
    pub fn port_text(&self) -> String {
        self.text(PORT_MAC, PORT_NETWORK_ADDRESS)
    }
}

/// `bytes` as lower-case hex pairs joined with `:`.
fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// IEEE 802.3 MAC/PHY Configuration/Status TLV (subtype 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacPhy {
    /// Auto-negotiation support (bit 0) and status (bit 1).
    pub autoneg: u8,
    /// PMD auto-negotiation advertised capability.
    pub advertised: u16,
    /// Operational MAU type (RFC 4836 dot3MauType).
    pub mau_type: u16,
}

/// IEEE 802.1Qaz ETS Configuration TLV (802.1 subtype 0x09).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ets {
    /// Willing.
    pub willing: bool,
    /// Credit-based shaper support.
    pub cbs: bool,
    /// Max TCs (0 means 8).
    pub max_tcs: u8,
    /// The traffic class of each priority 0–7.
    pub priority_tc: [u8; 8],
    /// Bandwidth of each traffic class, in percent.
    pub tc_bandwidth: [u8; 8],
    /// Transmission selection algorithm of each traffic class.
    pub tsa: [u8; 8],
}

/// One entry of an Application Priority TLV (802.1 subtype 0x0C).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppPriority {
    /// The priority (0–7).
    pub priority: u8,
    /// The selector: 1 EtherType, 2 TCP/SCTP port, 3 UDP/DCCP port, 4 TCP/SCTP/UDP/DCCP
    /// port, 5 DSCP.
    pub selector: u8,
    /// The protocol: the EtherType, port or DSCP value.
    pub protocol: u16,
}

/// A management address (TLV type 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementAddress {
    /// The address family (IANA: 1 IPv4, 2 IPv6, 6 802 MAC).
    pub family: u8,
    /// The address bytes.
    pub address: Vec<u8>,
}

/// One LLDPDU, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lldpdu {
    /// Chassis ID.
    pub chassis_id: Id,
    /// Port ID.
    pub port_id: Id,
    /// Time to live, in seconds; 0: shutdown.
    pub ttl: u16,
    /// Port Description.
    pub port_description: Option<String>,
    /// System Name.
    pub system_name: Option<String>,
    /// System Description (free text: never a label).
    pub system_description: Option<String>,
    /// Management addresses.
    pub management_addresses: Vec<ManagementAddress>,
    /// IEEE 802.3 Maximum Frame Size, in bytes.
    pub max_frame_size: Option<u16>,
    /// IEEE 802.3 MAC/PHY Configuration/Status.
    pub mac_phy: Option<MacPhy>,
    /// IEEE 802.1Qaz PFC Configuration.
    pub pfc: Option<Pfc>,
    /// IEEE 802.1Qaz ETS Configuration.
    pub ets: Option<Ets>,
    /// IEEE 802.1Qaz Application Priority entries.
    pub app_priorities: Vec<AppPriority>,
}

impl Lldpdu {
    /// The priority RoCE v2 (UDP port 4791) is mapped to, when the Application Priority TLV
    /// names it.
    pub fn roce_priority(&self) -> Option<u8> {
        self.app_priorities
            .iter()
            .find(|a| a.selector == SELECTOR_UDP && a.protocol == ROCE_V2_UDP_PORT)
            .map(|a| a.priority)
    }

    /// Whether this is a shutdown LLDPDU (TTL 0).
    pub fn is_shutdown(&self) -> bool {
        self.ttl == 0
    }
}

/// Why an LLDPDU was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Shorter than an Ethernet header.
    #[error("frame of {len} bytes is shorter than an Ethernet header")]
    TooShort {
        /// The frame's length.
        len: usize,
    },
    /// Not EtherType 0x88CC (after any 802.1Q tags).
    #[error("EtherType {ethertype:#06x} is not LLDP (0x88cc)")]
    NotLldp {
        /// The EtherType found.
        ethertype: u16,
    },
    /// A TLV header or value runs past the end of the LLDPDU.
    #[error("TLV type {tlv_type} at offset {offset} has length {length}, {left} bytes left")]
    PastEnd {
        /// Its type.
        tlv_type: u8,
        /// Its offset in the LLDPDU.
        offset: usize,
        /// Its length.
        length: usize,
        /// Bytes left after its header.
        left: usize,
    },
    /// A mandatory TLV is missing or out of its place.
    #[error("{tlv} TLV {what}")]
    Mandatory {
        /// The TLV.
        tlv: &'static str,
        /// `missing`, `not first`, `received twice`, ...
        what: &'static str,
    },
    /// A TLV whose length or subtype is not allowed.
    #[error("{tlv} TLV: {what}")]
    Invalid {
        /// The TLV.
        tlv: &'static str,
        /// What is wrong.
        what: String,
    },
}

/// Parses an Ethernet frame (destination, source, optional 802.1Q tags, EtherType 0x88CC)
/// carrying an LLDPDU. The destination is not checked: the socket receives what was sent to
/// its EtherType, and a neighbour sending to another LLDP group address is still a neighbour.
pub fn parse_frame(frame: &[u8]) -> Result<Lldpdu, ParseError> {
    if frame.len() < 14 {
        return Err(ParseError::TooShort { len: frame.len() });
    }
    let mut at = 12;
    loop {
        let Some(ethertype) = be16(frame, at) else {
            return Err(ParseError::TooShort { len: frame.len() });
        };
        match ethertype {
            0x8100 | 0x88a8 => at += 4,
            ETH_P_LLDP => return parse_lldpdu(&frame[at + 2..]),
            other => return Err(ParseError::NotLldp { ethertype: other }),
        }
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Text of a string TLV: UTF-8 (lossy), trailing NULs dropped.
fn string(value: &[u8]) -> String {
    let value = match value.iter().rposition(|&b| b != 0) {
        Some(end) => &value[..=end],
        None => &[],
    };
    String::from_utf8_lossy(value).into_owned()
}

/// Parses an LLDPDU (the payload after the EtherType).
pub fn parse_lldpdu(du: &[u8]) -> Result<Lldpdu, ParseError> {
    let mut chassis_id = None;
    let mut port_id = None;
    let mut ttl = None;
    let mut out = Lldpdu {
        chassis_id: Id {
            subtype: 0,
            value: Vec::new(),
        },
        port_id: Id {
            subtype: 0,
            value: Vec::new(),
        },
        ttl: 0,
        port_description: None,
        system_name: None,
        system_description: None,
        management_addresses: Vec::new(),
        max_frame_size: None,
        mac_phy: None,
        pfc: None,
        ets: None,
        app_priorities: Vec::new(),
    };
    let mut at = 0;
    let mut count = 0;
    while at < du.len() {
        let Some(header) = be16(du, at) else {
            return Err(ParseError::PastEnd {
                tlv_type: du[at] >> 1,
                offset: at,
                length: 0,
                left: du.len() - at - 1,
            });
        };
        let tlv_type = (header >> 9) as u8;
        let length = usize::from(header & 0x1ff);
        let left = du.len() - at - 2;
        if length > left {
            return Err(ParseError::PastEnd {
                tlv_type,
                offset: at,
                length,
                left,
            });
        }
        let value = &du[at + 2..at + 2 + length];
        at += 2 + length;
        count += 1;
        let place = |tlv, wanted| {
            if count == wanted {
                Ok(())
            } else {
                Err(ParseError::Mandatory {
                    tlv,
                    what: match wanted {
                        1 => "is not the first TLV",
                        2 => "is not the second TLV",
                        _ => "is not the third TLV",
                    },
                })
            }
        };
        match tlv_type {
            TLV_END => {
                if length != 0 {
                    return Err(ParseError::Invalid {
                        tlv: "End",
                        what: format!("length {length}, not 0"),
                    });
                }
                break;
            }
            TLV_CHASSIS_ID | TLV_PORT_ID => {
                let name = if tlv_type == TLV_CHASSIS_ID {
                    "Chassis ID"
                } else {
                    "Port ID"
                };
                place(name, if tlv_type == TLV_CHASSIS_ID { 1 } else { 2 })?;
                if !(2..=256).contains(&length) {
                    return Err(ParseError::Invalid {
                        tlv: name,
                        what: format!("length {length}, not 2 to 256"),
                    });
                }
                let subtype = value[0];
                if !(1..=7).contains(&subtype) {
                    return Err(ParseError::Invalid {
                        tlv: name,
                        what: format!("subtype {subtype}, not 1 to 7"),
                    });
                }
                let id = Id {
                    subtype,
                    value: value[1..].to_vec(),
                };
                if tlv_type == TLV_CHASSIS_ID {
                    chassis_id = Some(id);
                } else {
                    port_id = Some(id);
                }
            }
            TLV_TTL => {
                place("TTL", 3)?;
                if length < 2 {
                    return Err(ParseError::Invalid {
                        tlv: "TTL",
                        what: format!("length {length}, under 2"),
                    });
                }
                ttl = Some(u16::from_be_bytes([value[0], value[1]]));
            }
            TLV_PORT_DESCRIPTION if length > 0 => out.port_description = Some(string(value)),
            TLV_SYSTEM_NAME if length > 0 => out.system_name = Some(string(value)),
            TLV_SYSTEM_DESCRIPTION if length > 0 => out.system_description = Some(string(value)),
            TLV_MANAGEMENT_ADDRESS => {
                // Address string length (family byte + address), family, address, ...
                if let Some(&len) = value.first() {
                    let len = usize::from(len);
                    if (2..=32).contains(&len) && value.len() > len {
                        out.management_addresses.push(ManagementAddress {
                            family: value[1],
                            address: value[2..=len].to_vec(),
                        });
                    }
                }
            }
            TLV_ORG => org(value, &mut out),
            _ => {}
        }
        if count == 3 && (chassis_id.is_none() || port_id.is_none() || ttl.is_none()) {
            // The first three TLVs were not the mandatory ones (each checked its own place).
            return Err(ParseError::Mandatory {
                tlv: match (&chassis_id, &port_id) {
                    (None, _) => "Chassis ID",
                    (_, None) => "Port ID",
                    _ => "TTL",
                },
                what: "is missing from the first three TLVs",
            });
        }
    }
    match (chassis_id, port_id, ttl) {
        (Some(c), Some(p), Some(t)) => {
            out.chassis_id = c;
            out.port_id = p;
            out.ttl = t;
            Ok(out)
        }
        (None, _, _) => Err(ParseError::Mandatory {
            tlv: "Chassis ID",
            what: "is missing",
        }),
        (_, None, _) => Err(ParseError::Mandatory {
            tlv: "Port ID",
            what: "is missing",
        }),
        _ => Err(ParseError::Mandatory {
            tlv: "TTL",
            what: "is missing",
        }),
    }
}

/// An organizationally specific TLV: OUI, subtype, information. Too short ones are ignored.
fn org(value: &[u8], out: &mut Lldpdu) {
    if value.len() < 4 {
        return;
    }
    let (oui, subtype, info) = ([value[0], value[1], value[2]], value[3], &value[4..]);
    match (oui, subtype) {
        (OUI_DOT3, DOT3_MAX_FRAME_SIZE) if info.len() >= 2 => {
            out.max_frame_size = Some(u16::from_be_bytes([info[0], info[1]]));
        }
        (OUI_DOT3, DOT3_MAC_PHY) if info.len() >= 5 => {
            out.mac_phy = Some(MacPhy {
                autoneg: info[0],
                advertised: u16::from_be_bytes([info[1], info[2]]),
                mau_type: u16::from_be_bytes([info[3], info[4]]),
            });
        }
        (OUI_DOT1, DOT1_PFC_CONFIGURATION) if info.len() >= 2 => {
            out.pfc = Some(Pfc {
                willing: info[0] & 0x80 != 0,
                mbc: info[0] & 0x40 != 0,
                capability: info[0] & 0x0f,
                enabled: info[1],
            });
        }
        (OUI_DOT1, DOT1_ETS_CONFIGURATION) if info.len() >= 21 => {
            let mut priority_tc = [0u8; 8];
            for (p, tc) in priority_tc.iter_mut().enumerate() {
                let byte = info[1 + p / 2];
                *tc = if p % 2 == 0 { byte >> 4 } else { byte & 0x0f };
            }
            let mut tc_bandwidth = [0u8; 8];
            tc_bandwidth.copy_from_slice(&info[5..13]);
            let mut tsa = [0u8; 8];
            tsa.copy_from_slice(&info[13..21]);
            out.ets = Some(Ets {
                willing: info[0] & 0x80 != 0,
                cbs: info[0] & 0x40 != 0,
                max_tcs: info[0] & 0x07,
                priority_tc,
                tc_bandwidth,
                tsa,
            });
        }
        (OUI_DOT1, DOT1_APPLICATION_PRIORITY) if !info.is_empty() => {
            // One reserved byte, then 3-byte entries: priority (3 bits), reserved (2),
            // selector (3); protocol ID (16 bits).
            for entry in info[1..].chunks_exact(3) {
                out.app_priorities.push(AppPriority {
                    priority: entry[0] >> 5,
                    selector: entry[0] & 0x07,
                    protocol: u16::from_be_bytes([entry[1], entry[2]]),
                });
            }
        }
        _ => {}
    }
}

/// Encodes `tlvs` (type, value) as an LLDPDU, for tests and fixtures: each header type << 9 |
/// length, values truncated to 511 bytes.
#[cfg(test)]
pub(crate) fn encode(tlvs: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (t, v) in tlvs {
        let v = &v[..v.len().min(511)];
        let header = (u16::from(*t) << 9) | v.len() as u16;
        out.extend_from_slice(&header.to_be_bytes());
        out.extend_from_slice(v);
    }
    out
}
