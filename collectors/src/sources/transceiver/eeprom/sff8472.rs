//! SFF-8472 (SFP, SFP+, SFP28): identity at A0h (I2C 0x50), diagnostics at A2h (0x51).
//!
//! A0h (ethtool `sfpid.c`): identifier 0, connector 2, transceiver codes 3–10 (byte 8 bits
//! 2/3: passive/active cable), vendor name 20–35, part number 40–55, revision 56–59,
//! options 65 (bit 1 RX_LOS, bit 3 TX_FAULT implemented), serial 68–83, date code 84–91,
//! diagnostic monitoring type 92 (bit 6 DDM implemented, bit 5 internally and bit 4
//! externally calibrated, bit 3 RX power average (else OMA), bit 2 address change
//! required), enhanced options 93 (bit 7 alarm/warning flags implemented).
//!
//! A2h (ethtool `sfpdiag.c`): thresholds 0–39 (temperature, Vcc, TX bias, TX power, RX
//! power; each high alarm, low alarm, high warning, low warning), external calibration
//! constants 56–91 (RX power polynomial as big-endian IEEE-754 floats, then slope (u16,
//! 1/256) and offset (s16) for TX bias, TX power, temperature, Vcc), monitors 96–105
//! (temperature, Vcc, TX bias, TX power, RX power), status 110 (bit 2 TX fault, bit 1 RX
//! LOS), alarm flags 112–113 and warning flags 116–117.
//!
//! A module that needs an address change sequence to reach A2h (byte 92 bit 2) is not
//! written to: railscope only reads, so its diagnostics are refused with that reason, as
//! the kernel's `sfp` driver does for its hwmon. Externally calibrated values are
//! converted with the module's constants, RX power with the full polynomial of SFF-8472
//! 9.3 (ethtool multiplies the raw reading once per term instead).

use super::{
    Diagnostics, Error, I2C_HIGH, Identity, Lane, LaneFlag, Levels, ModuleFlag, ModuleInfo,
    Monitoring, PageReader, PageRequest, RxPowerType, Spec, Thresholds, amperes, ascii, be16, bit,
    celsius, connector_name, identifier_name, is_optical_connector, read, volts, watts,
};

/// Offset of the serial number in A0h.
pub const SERIAL: u8 = 68;
/// The first A2h byte a diagnostics pass reads (temperature) and how many.
const MONITORS: (u8, u8) = (96, 22);

/// External calibration constants (A2h 56–91).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// RX power coefficients of raw^0 .. raw^4.
    pub rx_power: [f64; 5],
    /// TX bias slope and offset (raw units).
    pub tx_bias: (f64, f64),
    /// TX power slope and offset.
    pub tx_power: (f64, f64),
    /// Temperature slope and offset.
    pub temperature: (f64, f64),
    /// Vcc slope and offset.
    pub voltage: (f64, f64),
}

impl Calibration {
    /// Decodes the constants from A2h bytes 0.. (at least 92 bytes).
    pub fn decode(a2: &[u8]) -> Result<Calibration, String> {
        let float = |at: usize| -> Result<f64, String> {
            let b = a2
                .get(at..at + 4)
                .ok_or_else(|| format!("A2h ends before byte {at}"))?;
            let v = f64::from(f32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if v.is_finite() {
                Ok(v)
            } else {
                Err(format!(
                    "calibration constant at A2h {at} is not a finite number"
                ))
            }
        };
        let pair = |at: usize| -> Result<(f64, f64), String> {
            let slope = be16(a2, at).ok_or_else(|| format!("A2h ends before byte {at}"))?;
            let offset = be16(a2, at + 2).ok_or_else(|| format!("A2h ends before byte {at}"))?;
            Ok((f64::from(slope) / 256.0, f64::from(offset as i16)))
        };
        Ok(Calibration {
            // Rx_PWR(4) at 56 down to Rx_PWR(0) at 72.
            rx_power: [float(72)?, float(68)?, float(64)?, float(60)?, float(56)?],
            tx_bias: pair(76)?,
            tx_power: pair(80)?,
            temperature: pair(84)?,
            voltage: pair(88)?,
        })
    }

    fn linear((slope, offset): (f64, f64), raw: f64) -> f64 {
        slope * raw + offset
    }

    fn rx(&self, raw: u16) -> f64 {
        let x = f64::from(raw);
        self.rx_power
            .iter()
            .rev()
            .fold(0.0, |acc, coefficient| acc * x + coefficient)
    }
}

/// Converts raw A2h values (internal or external calibration).
#[derive(Debug, Clone, Copy)]
struct Units<'a>(Option<&'a Calibration>);

impl Units<'_> {
    fn temperature(&self, raw: u16) -> f64 {
        match self.0 {
            Some(c) => Calibration::linear(c.temperature, f64::from(raw as i16)) / 256.0,
            None => celsius(raw as i16),
        }
    }
    fn voltage(&self, raw: u16) -> f64 {
        match self.0 {
            Some(c) => Calibration::linear(c.voltage, f64::from(raw)) * 100e-6,
            None => volts(raw),
        }
    }
    fn tx_bias(&self, raw: u16) -> f64 {
        match self.0 {
            Some(c) => Calibration::linear(c.tx_bias, f64::from(raw)) * 2e-6,
            None => amperes(raw),
        }
    }
    fn tx_power(&self, raw: u16) -> f64 {
        match self.0 {
            Some(c) => Calibration::linear(c.tx_power, f64::from(raw)) * 1e-7,
            None => watts(raw),
        }
    }
    fn rx_power(&self, raw: u16) -> f64 {
        match self.0 {
            Some(c) => c.rx(raw) * 1e-7,
            None => watts(raw),
        }
    }
}

/// The media of an SFP from its cable technology bits and connector.
fn media(a0: &[u8]) -> String {
    let cable = a0.get(8).copied().unwrap_or(0);
    let connector = a0.get(2).copied().unwrap_or(0);
    if bit(cable, 2) {
        "passive_copper".into()
    } else if bit(cable, 3) {
        "active_copper".into()
    } else if is_optical_connector(connector) {
        "optical".into()
    } else {
        String::new()
    }
}

/// Identity, thresholds and advertisement of an SFP whose A0h lower half is `a0`.
pub fn identify(reader: &mut dyn PageReader, a0: &[u8]) -> Result<ModuleInfo, Error> {
    if a0.len() < 96 {
        return Err(Error::Inconsistent(format!(
            "A0h holds {} bytes, fewer than the 96 of its base and extended ID fields",
            a0.len()
        )));
    }
    let identifier = a0[0];
    let identity = Identity {
        spec: Spec::Sff8472,
        identifier,
        kind: identifier_name(identifier),
        vendor: ascii(a0, 20, 16),
        part_number: ascii(a0, 40, 16),
        revision: ascii(a0, 56, 4),
        serial: ascii(a0, usize::from(SERIAL), 16),
        serial_raw: a0[68..84].to_vec(),
        date_code: ascii(a0, 84, 8),
        connector: connector_name(a0[2]),
        media: media(a0),
        // Bytes 60–61 are the cable's compliance for a passive or active cable (byte 8
        // bits 2 and 3), the laser wavelength in nm otherwise (as ethtool's `sfpid.c`
        // reads them).
        wavelength_pm: (!bit(a0[8], 2) && !bit(a0[8], 3))
            .then(|| u32::from(u16::from_be_bytes([a0[60], a0[61]])) * 1000)
            .filter(|pm| *pm != 0),
    };
    let (diag, enhanced, options) = (a0[92], a0[93], a0[65]);
    let refuse = |reason: &str| ModuleInfo {
        identity: identity.clone(),
        thresholds: Thresholds::default(),
        monitoring: Monitoring::none(1, reason),
        reads: 0,
    };
    if !bit(diag, 6) {
        return Ok(refuse(
            "the module implements no diagnostics (A0h byte 92 bit 6)",
        ));
    }
    if bit(diag, 2) {
        return Ok(refuse(
            "the module needs an address change sequence to expose A2h (A0h byte 92 bit 2), which a read-only agent does not send",
        ));
    }
    let a2 = read(reader, PageRequest::lower(I2C_HIGH, 0, 128))?;
    let calibration = if bit(diag, 4) {
        match Calibration::decode(&a2) {
            Ok(c) => Some(c),
            Err(why) => return Ok(refuse(&format!("externally calibrated, but {why}"))),
        }
    } else {
        None
    };
    let units = Units(calibration.as_ref());
    let levels =
        |at: usize, f: &dyn Fn(u16) -> f64| Levels::decode(a2.get(at..).unwrap_or_default(), f);
    let thresholds = Thresholds {
        temperature: levels(0, &|r| units.temperature(r)),
        voltage: levels(8, &|r| units.voltage(r)),
        tx_bias: levels(16, &|r| units.tx_bias(r)),
        tx_power: levels(24, &|r| units.tx_power(r)),
        rx_power: levels(32, &|r| units.rx_power(r)),
    };
    let monitoring = Monitoring {
        ddm: true,
        no_ddm_reason: None,
        temperature: true,
        voltage: true,
        rx_power: true,
        tx_power: true,
        tx_bias: true,
        rx_power_type: if bit(diag, 3) {
            RxPowerType::Average
        } else {
            RxPowerType::Oma
        },
        lanes: 1,
        banks: 1,
        tx_bias_multiplier: 1,
        flat: true,
        calibration,
        aw_flags: bit(enhanced, 7),
        tx_fault: bit(options, 3),
        rx_los: bit(options, 1),
        cmis_flags: (0, 0),
    };
    Ok(ModuleInfo {
        identity,
        thresholds,
        monitoring,
        reads: 0,
    })
}

/// One diagnostics pass: A2h 96–117 in one read.
pub fn diagnostics(reader: &mut dyn PageReader, info: &ModuleInfo) -> Result<Diagnostics, Error> {
    let m = &info.monitoring;
    if !m.ddm {
        return Ok(Diagnostics::default());
    }
    let (start, len) = MONITORS;
    let b = read(reader, PageRequest::lower(I2C_HIGH, start, len))?;
    let at = |offset: usize| be16(&b, offset - usize::from(start)).unwrap_or(0);
    let byte = |offset: usize| b.get(offset - usize::from(start)).copied().unwrap_or(0);
    let units = Units(m.calibration.as_ref());
    let mut d = Diagnostics {
        temperature: Some(units.temperature(at(96))),
        voltage: Some(units.voltage(at(98))),
        lanes: vec![Lane {
            lane: 1,
            tx_bias: Some(units.tx_bias(at(100))),
            tx_power: Some(units.tx_power(at(102))),
            rx_power: Some(units.rx_power(at(104))),
        }],
        ..Diagnostics::default()
    };
    let status = byte(110);
    if m.tx_fault {
        d.lane_flags.push((1, LaneFlag::TxFault, bit(status, 2)));
    }
    if m.rx_los {
        d.lane_flags.push((1, LaneFlag::RxLos, bit(status, 1)));
    }
    if m.aw_flags {
        let (alarm, alarm2, warn, warn2) = (byte(112), byte(113), byte(116), byte(117));
        // [high alarm, low alarm] in the alarm byte, [high warning, low warning] in the
        // warning byte, at the same bits.
        let quad = |a: u8, w: u8, hi: u8| [bit(a, hi), bit(a, hi - 1), bit(w, hi), bit(w, hi - 1)];
        for (flag, set) in ModuleFlag::TEMPERATURE.iter().zip(quad(alarm, warn, 7)) {
            d.module_flags.push((*flag, set));
        }
        for (flag, set) in ModuleFlag::VOLTAGE.iter().zip(quad(alarm, warn, 5)) {
            d.module_flags.push((*flag, set));
        }
        for (flag, set) in LaneFlag::TX_BIAS.iter().zip(quad(alarm, warn, 3)) {
            d.lane_flags.push((1, *flag, set));
        }
        for (flag, set) in LaneFlag::TX_POWER.iter().zip(quad(alarm, warn, 1)) {
            d.lane_flags.push((1, *flag, set));
        }
        for (flag, set) in LaneFlag::RX_POWER.iter().zip(quad(alarm2, warn2, 7)) {
            d.lane_flags.push((1, *flag, set));
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rx_power_polynomial_is_evaluated_in_full() {
        let c = Calibration {
            rx_power: [1.0, 2.0, 0.5, 0.0, 0.0],
            tx_bias: (1.0, 0.0),
            tx_power: (1.0, 0.0),
            temperature: (1.0, 0.0),
            voltage: (1.0, 0.0),
        };
        // 1 + 2*10 + 0.5*100
        assert_eq!(c.rx(10), 71.0);
    }

    #[test]
    fn constants_that_are_not_numbers_are_refused() {
        let mut a2 = vec![0u8; 128];
        a2[56..60].copy_from_slice(&f32::NAN.to_be_bytes());
        assert!(Calibration::decode(&a2).is_err());
        a2[56..60].copy_from_slice(&0f32.to_be_bytes());
        a2[76..78].copy_from_slice(&0x0200u16.to_be_bytes()); // slope 2.0
        a2[78..80].copy_from_slice(&(-10i16).to_be_bytes());
        let c = Calibration::decode(&a2).unwrap();
        assert_eq!(c.tx_bias, (2.0, -10.0));
        assert!((Units(Some(&c)).tx_bias(1000) - 1990.0 * 2e-6).abs() < 1e-12);
    }
}
