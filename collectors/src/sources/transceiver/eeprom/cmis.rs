//! CMIS 4.0/5.x (QSFP-DD 0x18, OSFP 0x19, QSFP+ with CMIS 0x1E), all at I2C 0x50.
//!
//! Lower page 00h (ethtool `cmis.h`): identifier 0, memory model 2 (bit 7 flat: page 00h
//! only), module state 3 (bits 3–1: 1 low power, 2 power up, 3 ready, 4 power down, 5
//! fault), module flags 9 (temperature high alarm, low alarm, high warning, low warning in
//! bits 0–3, Vcc in bits 4–7; latched, cleared by the read), temperature 14 (s16, 1/256
//! °C), Vcc 16 (100 µV), module type 85 (1 MMF, 2 SMF, 3 passive copper, 4 active cable,
//! 5 BASE-T).
//!
//! Upper page 00h: vendor 129–144, part number 148–163, revision 164–165, serial 166–181,
//! date code 182–189, connector 203, media interface technology 212 (0x0A and up copper).
//!
//! Page 01h (paged modules only): banks supported 142 bits 1–0 (0: bank 0, 1: banks 0–1,
//! 2: banks 0–3; 8 lanes a bank), RX power type 151 bit 4 (1 average, else OMA), supported
//! flags 157 (TX: bit 0 fault, 1 LOS, 2 CDR LOL) and 158 (RX: bit 1 LOS, 2 CDR LOL),
//! supported monitors 159 (bit 0 temperature, 1 Vcc) and 160 (bit 0 TX bias, 1 TX power,
//! 2 RX power, bits 4–3 the TX bias multiplier 1/2/4). Page 02h: thresholds temperature
//! 128, Vcc 136, TX power 176, TX bias 184, RX power 192.
//!
//! Page 11h, per bank: lane flags (one bit a lane): TX fault 135, TX LOS 136, TX CDR LOL
//! 137, TX power high alarm .. low warning 139–142, TX bias 143–146, RX LOS 147, RX CDR
//! LOL 148, RX power 149–152; monitors TX power 154, TX bias 170, RX power 186 (8 × u16).
//!
//! Lanes: page 11h has 8 lanes a bank, but its monitors (TX power, TX bias, RX power)
//! and the flags of the media side (TX fault, TX power and bias alarms/warnings, RX LOS,
//! RX CDR LOL, RX power alarms/warnings) are of *media* lanes (CMIS 5.2 table 8-82 "Media
//! Lane-Specific Monitors"), and a module can have fewer media lanes than host lanes (a
//! 400GBASE-LR4 QSFP-DD: 8 host lanes, 4 media lanes; its lanes 5–8 read 0). The media lanes
//! a single-bank module has are those its applications can occupy: for each Application
//! Descriptor (lower page 86–117 for AppSel 1–8, page 01h 223–250 for 9–15, host interface
//! ID 0xFF ending the list; its third byte holds the media lane count in bits 3–0, 1–8), a
//! data path may begin on each media lane whose bit is set in the application's Media Lane
//! Assignment Options (page 01h 176–190) and spans the media lane count; the module's lanes
//! are 1 up to the highest lane so reached. Without a usable advertisement (no descriptor,
//! counts out of range) and for banked modules, all 8 lanes a bank are taken. The host-side
//! flags TX LOS and TX CDR LOL are of host lanes, and stay exported for all 8 a bank.
//!
//! Wavelength: page 01h 138–139, × 0.05 nm (ethtool `CMIS_NOM_WAVELENGTH_MSB`), for
//! modules that are not copper (media interface technology 212 below 0x0A).
//!
//! TX bias is `raw × 2 µA × multiplier` (CMIS 5.2 table 8-43; ethtool divides by the
//! multiplier instead). The module fault flag is the state being ModuleFault. Flat
//! modules (passive copper) advertise no monitors: only their state is read. The VDM pages
//! 20h–2Fh (pre-FEC BER, SNR) are not decoded.

use super::{
    Diagnostics, Error, I2C_LOW, Identity, Lane, LaneFlag, Levels, ModuleFlag, ModuleInfo,
    ModuleState, Monitoring, PageReader, PageRequest, RxPowerType, Spec, Thresholds, ascii, be16,
    bit, celsius, check_identifier, connector_name, identifier_name, read, volts, watts,
};

/// Offset of the serial number in upper page 00h.
pub const SERIAL: u8 = 166;
/// The lower-page bytes a diagnostics pass reads: identifier .. Vcc.
const LOWER: u8 = 18;
/// The page 11h bytes a diagnostics pass reads: TX fault flags (135) .. RX power of lane 8
/// (201).
const PAGE_11H: (u8, u8) = (135, 67);

fn media(module_type: u8, media_tech: u8) -> String {
    match module_type {
        0x01 | 0x02 => "optical".into(),
        0x03 => "passive_copper".into(),
        0x04 if media_tech >= 0x0A => "active_copper".into(),
        0x04 => "active_optical".into(),
        _ => String::new(),
    }
}

/// The state of lower page byte 3.
pub fn state(byte: u8) -> Option<ModuleState> {
    match (byte >> 1) & 0x07 {
        1 => Some(ModuleState::LowPower),
        2 => Some(ModuleState::PowerUp),
        3 => Some(ModuleState::Ready),
        4 => Some(ModuleState::PowerDown),
        5 => Some(ModuleState::Fault),
        _ => None,
    }
}

/// The media lanes a single-bank module's applications can occupy (see the module docs);
/// `None` without a usable advertisement. `lower` is the lower page, `p1` page 01h's upper
/// half (offset 128 at index 0).
pub fn media_lanes(lower: &[u8], p1: &[u8]) -> Option<u8> {
    let descriptor = |app: usize| -> Option<&[u8]> {
        if app <= 8 {
            lower.get(86 + 4 * (app - 1)..86 + 4 * app)
        } else {
            p1.get(223 - 128 + 4 * (app - 9)..223 - 128 + 4 * (app - 8))
        }
    };
    let mut highest = None;
    for app in 1..=15 {
        let Some(&[host_id, _media_id, counts, _host_options]) = descriptor(app) else {
            break;
        };
        if host_id == 0xFF {
            break; // the end of the list
        }
        let count = counts & 0x0F;
        if host_id == 0x00 || !(1..=8).contains(&count) {
            continue; // undefined, or a reserved count
        }
        let options = p1.get(176 - 128 + app - 1).copied().unwrap_or(0);
        for start in (0..8u8).filter(|i| bit(options, *i)) {
            let end = (start + count).min(8);
            highest = Some(highest.map_or(end, |h: u8| h.max(end)));
        }
    }
    highest
}

/// Identity, thresholds and advertisement of a CMIS module whose lower page is `lower`.
pub fn identify(reader: &mut dyn PageReader, lower: &[u8]) -> Result<ModuleInfo, Error> {
    let identifier = lower.first().copied().unwrap_or(0);
    let flat = bit(lower.get(2).copied().unwrap_or(0), 7);
    let upper = read(reader, PageRequest::upper(0, 0, 128, 128))?;
    let u = |offset: usize| upper.get(offset - 128).copied().unwrap_or(0);
    let at = |offset: usize| upper.get(offset - 128..).unwrap_or_default();
    let mut identity = Identity {
        spec: Spec::Cmis,
        identifier,
        kind: identifier_name(identifier),
        vendor: ascii(at(129), 0, 16),
        part_number: ascii(at(148), 0, 16),
        revision: ascii(at(164), 0, 2),
        serial: ascii(at(166), 0, 16),
        serial_raw: at(166).get(..16).unwrap_or_default().to_vec(),
        date_code: ascii(at(182), 0, 8),
        connector: connector_name(u(203)),
        media: media(lower.get(85).copied().unwrap_or(0), u(212)),
        wavelength_pm: None,
    };
    if u(128) != identifier {
        return Err(Error::Inconsistent(format!(
            "upper page 00h identifier {:#04x} differs from the lower page's {identifier:#04x}",
            u(128)
        )));
    }
    if flat {
        let mut monitoring = Monitoring::none(
            0,
            "flat memory (lower page byte 2 bit 7): the module advertises no monitors",
        );
        monitoring.ddm = false;
        return Ok(ModuleInfo {
            identity,
            thresholds: Thresholds::default(),
            monitoring,
            reads: 0,
        });
    }
    let p1 = read(reader, PageRequest::upper(1, 0, 128, 128))?;
    let p1b = |offset: usize| p1.get(offset - 128).copied().unwrap_or(0);
    if u(212) < 0x0A {
        identity.wavelength_pm =
            Some(u32::from(u16::from_be_bytes([p1b(138), p1b(139)])) * 50).filter(|pm| *pm != 0);
    }
    let banks = match p1b(142) & 0x03 {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => {
            return Err(Error::Inconsistent(
                "page 01h byte 142 advertises a reserved bank count (3)".into(),
            ));
        }
    };
    let (module_mon, lane_mon) = (p1b(159), p1b(160));
    let multiplier = match (lane_mon >> 3) & 0x03 {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => {
            return Err(Error::Inconsistent(
                "page 01h byte 160 advertises a reserved TX bias multiplier".into(),
            ));
        }
    };
    let monitoring = Monitoring {
        ddm: true,
        no_ddm_reason: None,
        temperature: bit(module_mon, 0),
        voltage: bit(module_mon, 1),
        tx_bias: bit(lane_mon, 0),
        tx_power: bit(lane_mon, 1),
        rx_power: bit(lane_mon, 2),
        rx_power_type: if bit(p1b(151), 4) {
            RxPowerType::Average
        } else {
            RxPowerType::Oma
        },
        lanes: match media_lanes(lower, &p1) {
            Some(lanes) if banks == 1 => lanes,
            _ => 8 * banks,
        },
        banks,
        tx_bias_multiplier: multiplier,
        flat: false,
        calibration: None,
        aw_flags: true,
        tx_fault: bit(p1b(157), 0),
        rx_los: bit(p1b(158), 1),
        cmis_flags: (p1b(157), p1b(158)),
    };
    let p2 = read(reader, PageRequest::upper(2, 0, 128, 72))?;
    let at2 = |offset: usize| p2.get(offset - 128..).unwrap_or_default();
    let bias = 2.0 * f64::from(multiplier);
    let thresholds = Thresholds {
        temperature: monitoring
            .temperature
            .then(|| Levels::decode_temperature(at2(128)))
            .flatten(),
        voltage: monitoring
            .voltage
            .then(|| Levels::decode(at2(136), volts))
            .flatten(),
        tx_power: monitoring
            .tx_power
            .then(|| Levels::decode(at2(176), watts))
            .flatten(),
        tx_bias: monitoring
            .tx_bias
            .then(|| Levels::decode(at2(184), |r| f64::from(r) * bias / 1e6))
            .flatten(),
        rx_power: monitoring
            .rx_power
            .then(|| Levels::decode(at2(192), watts))
            .flatten(),
    };
    Ok(ModuleInfo {
        identity,
        thresholds,
        monitoring,
        reads: 0,
    })
}

/// One diagnostics pass: lower page bytes 0–17, and page 11h bytes 135–201 of each bank.
pub fn diagnostics(reader: &mut dyn PageReader, info: &ModuleInfo) -> Result<Diagnostics, Error> {
    let lower = read(reader, PageRequest::lower(I2C_LOW, 0, LOWER))?;
    check_identifier(&lower, info)?;
    let m = &info.monitoring;
    let byte = |at: usize| lower.get(at).copied().unwrap_or(0);
    let word = |at: usize| be16(&lower, at).unwrap_or(0);
    let state = state(byte(3));
    let mut d = Diagnostics {
        temperature: m.temperature.then(|| celsius(word(14) as i16)),
        voltage: m.voltage.then(|| volts(word(16))),
        state,
        ..Diagnostics::default()
    };
    let flags = byte(9);
    if m.temperature {
        for (i, flag) in ModuleFlag::TEMPERATURE.iter().enumerate() {
            d.module_flags.push((*flag, bit(flags, i as u8)));
        }
    }
    if m.voltage {
        for (i, flag) in ModuleFlag::VOLTAGE.iter().enumerate() {
            d.module_flags.push((*flag, bit(flags, 4 + i as u8)));
        }
    }
    if state.is_some() {
        d.module_flags
            .push((ModuleFlag::ModuleFault, state == Some(ModuleState::Fault)));
    }
    if !m.ddm {
        return Ok(d);
    }
    let (tx_adv, rx_adv) = m.cmis_flags;
    let bias = 2.0 * f64::from(m.tx_bias_multiplier);
    let (start, len) = PAGE_11H;
    for bank in 0..m.banks {
        let p = read(reader, PageRequest::upper(0x11, bank, start, len))?;
        let b = |offset: usize| p.get(offset - usize::from(start)).copied().unwrap_or(0);
        let w = |offset: usize| be16(&p, offset - usize::from(start)).unwrap_or(0);
        for i in 0..8u8 {
            let lane = bank * 8 + i + 1;
            let n = usize::from(i);
            // Media-lane values and flags only for the media lanes the module has; the
            // host-side TX LOS and TX CDR LOL for every host lane.
            let media = lane <= m.lanes;
            if media {
                d.lanes.push(Lane {
                    lane,
                    tx_power: m.tx_power.then(|| watts(w(154 + 2 * n))),
                    tx_bias: m.tx_bias.then(|| f64::from(w(170 + 2 * n)) * bias / 1e6),
                    rx_power: m.rx_power.then(|| watts(w(186 + 2 * n))),
                });
            }
            let signals = [
                (bit(tx_adv, 0) && media, 135, LaneFlag::TxFault),
                (bit(tx_adv, 1), 136, LaneFlag::TxLos),
                (bit(tx_adv, 2), 137, LaneFlag::TxLol),
                (bit(rx_adv, 1) && media, 147, LaneFlag::RxLos),
                (bit(rx_adv, 2) && media, 148, LaneFlag::RxLol),
            ];
            for (advertised, offset, flag) in signals {
                if advertised {
                    d.lane_flags.push((lane, flag, bit(b(offset), i)));
                }
            }
            let groups = [
                (m.tx_power, 139, LaneFlag::TX_POWER),
                (m.tx_bias, 143, LaneFlag::TX_BIAS),
                (m.rx_power, 149, LaneFlag::RX_POWER),
            ];
            for (monitored, first, flags) in groups {
                if monitored && media {
                    for (k, flag) in flags.iter().enumerate() {
                        d.lane_flags.push((lane, *flag, bit(b(first + k), i)));
                    }
                }
            }
        }
    }
    d.lanes
        .retain(|l| l.rx_power.is_some() || l.tx_power.is_some() || l.tx_bias.is_some());
    Ok(d)
}
