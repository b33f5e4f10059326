//! SFF-8636 (QSFP, QSFP+, QSFP28; identifiers 0x0C, 0x0D, 0x11), all at I2C 0x50.
//!
//! Lower page (ethtool `qsfp.h`): identifier 0, status 2 (bit 2 flat memory: no page 03h;
//! bit 0 data not ready), flags 3 (RX LOS lanes 1–4 in bits 0–3, TX LOS in bits 4–7), 4
//! (TX fault, bits 0–3), 5 (RX CDR LOL bits 0–3, TX CDR LOL bits 4–7), 6 (temperature)
//! and 7 (Vcc), each bit 7 high alarm, 6 low alarm, 5 high warning, 4 low warning; 9–10
//! RX power, 11–12 TX bias, 13–14 TX power flags, two lanes a byte (the odd lane in bits
//! 7–4, the even one in 3–0, in the same order); monitors: temperature 22 (s16, 1/256 °C),
//! Vcc 26 (100 µV), RX power 34–41, TX bias 42–49, TX power 50–57 (u16 each, lanes 1–4).
//!
//! Upper page 00h: connector 130, extended compliance 192, device technology 147 (bits
//! 7–4: transmitter technology, 0xA and up copper), vendor 148–163, part number 168–183,
//! revision 184–185, options 194 (bit 5 TX LOL, bit 4 RX LOL implemented) and 195 (bit 3
//! TX fault, bit 1 TX LOS implemented; ethtool uses it for RX LOS too, there being no RX
//! LOS bit), serial 196–211, date code 212–219, diagnostic monitoring type 220 (bit 5
//! temperature, bit 4 Vcc monitored, bit 3 RX power average (else OMA), bit 2 TX power
//! monitored). A module that sets neither bit 5 nor 4 (SFF-8436, before those bits were
//! defined) is taken to monitor both, as ethtool shows them.
//!
//! Upper page 03h, read only when the module is not flat: thresholds temperature 128,
//! Vcc 144, RX power 176, TX bias 184, TX power 192 (high alarm, low alarm, high
//! warning, low warning each). As in ethtool, the alarm/warning flags of the monitors are
//! exported only for modules with page 03h.

use super::{
    Diagnostics, Error, I2C_LOW, Identity, Lane, LaneFlag, Levels, ModuleFlag, ModuleInfo,
    Monitoring, PageReader, PageRequest, RxPowerType, Spec, Thresholds, amperes, ascii, be16, bit,
    celsius, check_identifier, connector_name, identifier_name, read, volts, watts,
};

/// Offset of the serial number in upper page 00h.
pub const SERIAL: u8 = 196;

/// Extended compliance codes (SFF-8024 table 4-4) of active optical cables.
const AOC_CODES: [u8; 4] = [0x01, 0x18, 0x19, 0x1A];

/// The media of a QSFP from its transmitter technology and extended compliance code.
fn media(upper: &[u8]) -> String {
    let tech = upper.get(147 - 128).copied().unwrap_or(0) >> 4;
    let extended = upper.get(192 - 128).copied().unwrap_or(0);
    match tech {
        0xA | 0xB => "passive_copper".into(),
        0xC..=0xF => "active_copper".into(),
        _ if AOC_CODES.contains(&extended) => "active_optical".into(),
        _ => "optical".into(),
    }
}

/// Identity, thresholds and advertisement of a QSFP whose lower page is `lower`.
pub fn identify(reader: &mut dyn PageReader, lower: &[u8]) -> Result<ModuleInfo, Error> {
    let identifier = lower.first().copied().unwrap_or(0);
    let flat = bit(lower.get(2).copied().unwrap_or(0), 2);
    let upper = read(reader, PageRequest::upper(0, 0, 128, 128))?;
    let u = |offset: usize| upper.get(offset - 128).copied().unwrap_or(0);
    let at = |offset: usize| upper.get(offset - 128..).unwrap_or_default();
    let identity = Identity {
        spec: Spec::Sff8636,
        identifier,
        kind: identifier_name(identifier),
        vendor: ascii(at(148), 0, 16),
        part_number: ascii(at(168), 0, 16),
        revision: ascii(at(184), 0, 2),
        serial: ascii(at(196), 0, 16),
        serial_raw: at(196).get(..16).unwrap_or_default().to_vec(),
        date_code: ascii(at(212), 0, 8),
        connector: connector_name(u(130)),
        media: media(&upper),
        // 186–187: wavelength in 0.05 nm, or copper attenuation for a copper module
        // (transmitter technology 0xA and up).
        wavelength_pm: (u(147) >> 4 < 0xA)
            .then(|| u32::from(u16::from_be_bytes([u(186), u(187)])) * 50)
            .filter(|pm| *pm != 0),
    };
    if u(0x80) != identifier {
        return Err(Error::Inconsistent(format!(
            "upper page 00h identifier {:#04x} differs from the lower page's {identifier:#04x}",
            u(0x80)
        )));
    }
    let diag = u(220);
    let (mut temperature, mut voltage) = (bit(diag, 5), bit(diag, 4));
    if !temperature && !voltage {
        (temperature, voltage) = (true, true);
    }
    let copper = identity.media == "passive_copper";
    let (option3, option4) = (u(194), u(195));
    let monitoring = Monitoring {
        ddm: true,
        no_ddm_reason: None,
        temperature,
        voltage,
        rx_power: !copper,
        tx_power: !copper && bit(diag, 2),
        tx_bias: !copper,
        rx_power_type: if bit(diag, 3) {
            RxPowerType::Average
        } else {
            RxPowerType::Oma
        },
        lanes: 4,
        banks: 1,
        tx_bias_multiplier: 1,
        flat,
        calibration: None,
        aw_flags: !flat,
        tx_fault: bit(option4, 3),
        rx_los: bit(option4, 1),
        // RX LOL and TX LOL support, kept where CMIS keeps its flag advertisement.
        cmis_flags: (u8::from(bit(option3, 5)), u8::from(bit(option3, 4))),
    };
    let thresholds = if flat {
        Thresholds::default()
    } else {
        let p3 = read(reader, PageRequest::upper(3, 0, 128, 72))?;
        let at = |offset: usize| p3.get(offset - 128..).unwrap_or_default();
        Thresholds {
            temperature: monitoring
                .temperature
                .then(|| Levels::decode_temperature(at(128)))
                .flatten(),
            voltage: monitoring
                .voltage
                .then(|| Levels::decode(at(144), volts))
                .flatten(),
            rx_power: monitoring
                .rx_power
                .then(|| Levels::decode(at(176), watts))
                .flatten(),
            tx_bias: monitoring
                .tx_bias
                .then(|| Levels::decode(at(184), amperes))
                .flatten(),
            tx_power: monitoring
                .tx_power
                .then(|| Levels::decode(at(192), watts))
                .flatten(),
        }
    };
    Ok(ModuleInfo {
        identity,
        thresholds,
        monitoring,
        reads: 0,
    })
}

/// The four alarm/warning flags of lane `lane` (0-based) in flag bytes `first`,
/// `first + 1`.
fn quad(lower: &[u8], first: usize, lane: usize) -> [bool; 4] {
    let byte = lower.get(first + lane / 2).copied().unwrap_or(0);
    let hi = if lane.is_multiple_of(2) { 7 } else { 3 };
    [
        bit(byte, hi),
        bit(byte, hi - 1),
        bit(byte, hi - 2),
        bit(byte, hi - 3),
    ]
}

/// One diagnostics pass: the lower page in one read.
pub fn diagnostics(reader: &mut dyn PageReader, info: &ModuleInfo) -> Result<Diagnostics, Error> {
    let lower = read(reader, PageRequest::lower(I2C_LOW, 0, 128))?;
    check_identifier(&lower, info)?;
    let byte = |at: usize| lower.get(at).copied().unwrap_or(0);
    if bit(byte(2), 0) {
        return Err(Error::Inconsistent(
            "the module reports Data_Not_Ready (lower page byte 2 bit 0)".into(),
        ));
    }
    let m = &info.monitoring;
    let word = |at: usize| be16(&lower, at).unwrap_or(0);
    let mut d = Diagnostics {
        temperature: m.temperature.then(|| celsius(word(22) as i16)),
        voltage: m.voltage.then(|| volts(word(26))),
        ..Diagnostics::default()
    };
    let any_lane_monitor = m.rx_power || m.tx_power || m.tx_bias;
    for i in 0..4usize {
        let lane = (i + 1) as u8;
        if any_lane_monitor {
            d.lanes.push(Lane {
                lane,
                rx_power: m.rx_power.then(|| watts(word(34 + 2 * i))),
                tx_bias: m.tx_bias.then(|| amperes(word(42 + 2 * i))),
                tx_power: m.tx_power.then(|| watts(word(50 + 2 * i))),
            });
        }
        let i8 = i as u8;
        if m.rx_los {
            d.lane_flags.push((lane, LaneFlag::RxLos, bit(byte(3), i8)));
            d.lane_flags
                .push((lane, LaneFlag::TxLos, bit(byte(3), 4 + i8)));
        }
        if m.tx_fault {
            d.lane_flags
                .push((lane, LaneFlag::TxFault, bit(byte(4), i8)));
        }
        let (tx_lol, rx_lol) = m.cmis_flags;
        if rx_lol != 0 {
            d.lane_flags.push((lane, LaneFlag::RxLol, bit(byte(5), i8)));
        }
        if tx_lol != 0 {
            d.lane_flags
                .push((lane, LaneFlag::TxLol, bit(byte(5), 4 + i8)));
        }
        if m.aw_flags {
            let groups = [
                (m.rx_power, 9, LaneFlag::RX_POWER),
                (m.tx_bias, 11, LaneFlag::TX_BIAS),
                (m.tx_power, 13, LaneFlag::TX_POWER),
            ];
            for (monitored, first, flags) in groups {
                if monitored {
                    for (flag, set) in flags.iter().zip(quad(&lower, first, i)) {
                        d.lane_flags.push((lane, *flag, set));
                    }
                }
            }
        }
    }
    if m.aw_flags {
        let module = |b: u8| [bit(b, 7), bit(b, 6), bit(b, 5), bit(b, 4)];
        if m.temperature {
            for (flag, set) in ModuleFlag::TEMPERATURE.iter().zip(module(byte(6))) {
                d.module_flags.push((*flag, set));
            }
        }
        if m.voltage {
            for (flag, set) in ModuleFlag::VOLTAGE.iter().zip(module(byte(7))) {
                d.module_flags.push((*flag, set));
            }
        }
    }
    Ok(d)
}
