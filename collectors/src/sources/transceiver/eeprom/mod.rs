//! Pure decoders of transceiver module memory: SFF-8472 (SFP, [`sff8472`]), SFF-8636
//! (QSFP+/QSFP28, [`sff8636`]) and CMIS 4.0/5.x (QSFP-DD, OSFP, QSFP with CMIS, [`cmis`]).
//!
//! A decoder drives a [`PageReader`]: it asks for the bytes it needs as `MODULE_EEPROM_GET`
//! takes them ([`PageRequest`]: I2C address, page, bank, offset and length within the
//! 256-byte address space, never crossing the 128-byte half-page boundary, and for pages
//! other than 0 only the upper half), and nothing the module does not advertise. The
//! readers are the kernel (`super::wire`), a capture of `ethtool -m ... hex on`
//! (`super::hexdump`) and test fixtures.
//!
//! Decoding is two steps, so a source can cache the first: [`identify`] reads what does not
//! change while the module stays plugged in (identity, thresholds and what the module
//! advertises: [`ModuleInfo`]); [`diagnostics`] reads what does (temperature, voltage,
//! per-lane powers and bias, flags, module state) given that [`ModuleInfo`]. [`serial`]
//! reads the serial number alone (16 bytes), to tell a swapped module.
//!
//! Values are converted to base units: watts (the specs' 0.1 µW units), amperes (2 µA
//! units), volts (100 µV units), degrees Celsius (1/256 °C, signed). Offsets and masks are
//! the specs' and were checked against ethtool's `sfpdiag.c`, `qsfp.h`/`qsfp.c`,
//! `cmis.h`/`cmis.c` and `sff-common.c`.

pub mod cmis;
pub mod sff8472;
pub mod sff8636;

use std::fmt;

/// The length of one half page, and the lower/upper boundary of a page's address space.
pub const HALF_PAGE: u32 = 128;

/// `0x50` (A0h): SFF-8472 identity; SFF-8636 and CMIS everything.
pub const I2C_LOW: u8 = 0x50;
/// `0x51` (A2h): SFF-8472 diagnostics.
pub const I2C_HIGH: u8 = 0x51;

/// One read as `ETHTOOL_MSG_MODULE_EEPROM_GET` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageRequest {
    /// The I2C address (0x50, 0x51).
    pub i2c_address: u8,
    /// The page (0 for the lower half).
    pub page: u8,
    /// The bank (CMIS pages 10h–FFh).
    pub bank: u8,
    /// The offset within the page's 256-byte address space.
    pub offset: u8,
    /// How many bytes, 1..=128.
    pub length: u8,
}

impl PageRequest {
    /// A request, checked against the kernel's rules (`eeprom_parse_request()` and the
    /// attribute policy in `net/ethtool/eeprom.c`): length 1..=128, no read across the
    /// half-page boundary at 128 or past 256, and only the upper half of pages other than 0.
    pub fn new(
        i2c_address: u8,
        page: u8,
        bank: u8,
        offset: u8,
        length: u8,
    ) -> Result<Self, String> {
        let (start, len) = (u32::from(offset), u32::from(length));
        if len == 0 || len > HALF_PAGE {
            return Err(format!("length {len} is not 1..=128"));
        }
        if page != 0 && start < HALF_PAGE {
            return Err(format!(
                "page {page:#04x}: offset {start} is in the lower half, which is page 0's"
            ));
        }
        if start < HALF_PAGE && start + len > HALF_PAGE {
            return Err(format!(
                "offset {start} + length {len} crosses the half-page boundary"
            ));
        }
        if start + len > 2 * HALF_PAGE {
            return Err(format!(
                "offset {start} + length {len} crosses the page boundary"
            ));
        }
        Ok(PageRequest {
            i2c_address,
            page,
            bank,
            offset,
            length,
        })
    }

    /// The lower half of page 0 (bytes `offset..offset+length` < 128) at `i2c_address`.
    pub fn lower(i2c_address: u8, offset: u8, length: u8) -> Result<Self, String> {
        Self::new(i2c_address, 0, 0, offset, length)
    }

    /// Bytes of the upper half of `page` in `bank` at 0x50.
    pub fn upper(page: u8, bank: u8, offset: u8, length: u8) -> Result<Self, String> {
        Self::new(I2C_LOW, page, bank, offset, length)
    }
}

impl fmt::Display for PageRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "i2c {:#04x} page {:#04x} bank {} offset {} length {}",
            self.i2c_address, self.page, self.bank, self.offset, self.length
        )
    }
}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The kernel (or a capture) refused the read with an errno.
    #[error("{request}: {detail}")]
    Errno {
        /// What was asked.
        request: PageRequest,
        /// The errno (`EOPNOTSUPP`: no module EEPROM ops; `EIO`, `ENODEV`, ...).
        errno: i32,
        /// The error as text.
        detail: String,
    },
    /// The reply held a different number of bytes than asked.
    #[error("{request}: {got} bytes in the reply, {} asked", request.length)]
    Length {
        /// What was asked.
        request: PageRequest,
        /// How many bytes came.
        got: usize,
    },
    /// The reader could not be opened (no netlink socket, no `ethtool` family).
    #[error("{detail}")]
    Open {
        /// The errno, when there is one.
        errno: Option<i32>,
        /// The error as text.
        detail: String,
    },
    /// The bytes are not in the capture, or the reply could not be decoded.
    #[error("{0}")]
    Other(String),
}

impl ReadError {
    /// The errno, when the kernel gave one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ReadError::Errno { errno, .. } => Some(*errno),
            ReadError::Open { errno, .. } => *errno,
            _ => None,
        }
    }
}

/// Reads module memory, one [`PageRequest`] at a time.
pub trait PageReader {
    /// Reads the bytes `request` names: exactly `request.length` of them.
    fn read(&mut self, request: PageRequest) -> Result<Vec<u8>, ReadError>;
}

/// Why a module could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A read failed.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// The identifier byte names no memory map railscope decodes.
    #[error("identifier {0:#04x} is not an SFF-8472, SFF-8636 or CMIS module")]
    UnknownIdentifier(u8),
    /// The bytes contradict what was read before or what the spec allows.
    #[error("{0}")]
    Inconsistent(String),
}

impl Error {
    /// The errno of a failed read, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Read(err) => err.errno(),
            _ => None,
        }
    }
}

/// Which management interface specification the module follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Spec {
    /// SFF-8472 (SFP, SFP+, SFP28).
    Sff8472,
    /// SFF-8636 (QSFP, QSFP+, QSFP28).
    Sff8636,
    /// CMIS (QSFP-DD, OSFP, QSFP+ with CMIS).
    Cmis,
}

impl Spec {
    /// The `spec` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Spec::Sff8472 => "sff8472",
            Spec::Sff8636 => "sff8636",
            Spec::Cmis => "cmis",
        }
    }

    /// The spec of the identifier byte (SFF-8024 table 4-1), when railscope decodes it.
    pub fn of_identifier(id: u8) -> Option<Spec> {
        match id {
            0x03 => Some(Spec::Sff8472),
            0x0C | 0x0D | 0x11 => Some(Spec::Sff8636),
            0x18 | 0x19 | 0x1E => Some(Spec::Cmis),
            _ => None,
        }
    }
}

/// The identifier's name as ethtool prints it, shortened to the form factor.
pub fn identifier_name(id: u8) -> String {
    match id {
        0x03 => "SFP".into(),
        0x0C => "QSFP".into(),
        0x0D => "QSFP+".into(),
        0x11 => "QSFP28".into(),
        0x18 => "QSFP-DD".into(),
        0x19 => "OSFP".into(),
        0x1E => "QSFP-CMIS".into(),
        other => format!("{other:#04x}"),
    }
}

/// The connector's name (SFF-8024 table 4-3), snake_case; unknown codes as `0xNN`.
pub fn connector_name(code: u8) -> String {
    let name = match code {
        0x00 => "unknown",
        0x01 => "sc",
        0x02 => "fc_style_1_copper",
        0x03 => "fc_style_2_copper",
        0x04 => "bnc_tnc",
        0x05 => "fc_coax",
        0x06 => "fiber_jack",
        0x07 => "lc",
        0x08 => "mt_rj",
        0x09 => "mu",
        0x0A => "sg",
        0x0B => "optical_pigtail",
        0x0C => "mpo_1x12",
        0x0D => "mpo_2x16",
        0x20 => "hssdc_ii",
        0x21 => "copper_pigtail",
        0x22 => "rj45",
        0x23 => "no_separable_connector",
        0x24 => "mxc_2x16",
        0x25 => "cs_optical",
        0x26 => "sn_optical",
        0x27 => "mpo_2x12",
        0x28 => "mpo_1x16",
        other => return format!("{other:#04x}"),
    };
    name.to_owned()
}

/// Whether a connector code is an optical connector (for modules whose media the
/// compliance codes leave open).
pub fn is_optical_connector(code: u8) -> bool {
    matches!(code, 0x01 | 0x06..=0x0D | 0x24..=0x28)
}

/// The four threshold levels of one monitor, in base units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Levels {
    /// High alarm.
    pub high_alarm: f64,
    /// Low alarm.
    pub low_alarm: f64,
    /// High warning.
    pub high_warning: f64,
    /// Low warning.
    pub low_warning: f64,
}

impl Levels {
    /// The levels with their `level` label values, in the contract's order.
    pub fn labelled(&self) -> [(&'static str, f64); 4] {
        [
            ("high_alarm", self.high_alarm),
            ("high_warning", self.high_warning),
            ("low_warning", self.low_warning),
            ("low_alarm", self.low_alarm),
        ]
    }

    /// Decodes four u16 (big-endian) values laid out high alarm, low alarm, high warning,
    /// low warning — the order of SFF-8472 A2h 0–39, SFF-8636 page 03h and CMIS page 02h —
    /// each converted by `unit`.
    pub fn decode(bytes: &[u8], unit: impl Fn(u16) -> f64) -> Option<Levels> {
        let v = |i: usize| be16(bytes, 2 * i).map(&unit);
        Some(Levels {
            high_alarm: v(0)?,
            low_alarm: v(1)?,
            high_warning: v(2)?,
            low_warning: v(3)?,
        })
    }

    /// Decodes four s16 (big-endian) temperatures.
    pub fn decode_temperature(bytes: &[u8]) -> Option<Levels> {
        Levels::decode(bytes, |raw| celsius(raw as i16))
    }
}

/// Thresholds the module reports, by monitor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds {
    /// Module temperature, °C.
    pub temperature: Option<Levels>,
    /// Supply voltage, V.
    pub voltage: Option<Levels>,
    /// RX power per lane, W.
    pub rx_power: Option<Levels>,
    /// TX power per lane, W.
    pub tx_power: Option<Levels>,
    /// TX bias per lane, A.
    pub tx_bias: Option<Levels>,
}

/// How the module's RX power monitor measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxPowerType {
    /// Optical modulation amplitude.
    Oma,
    /// Average optical power.
    Average,
}

/// The module's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The spec of its memory map.
    pub spec: Spec,
    /// The identifier byte (SFF-8024).
    pub identifier: u8,
    /// Its name ([`identifier_name`]).
    pub kind: String,
    /// Vendor name, trimmed.
    pub vendor: String,
    /// Vendor part number, trimmed.
    pub part_number: String,
    /// Vendor revision, trimmed.
    pub revision: String,
    /// Vendor serial number, trimmed.
    pub serial: String,
    /// The serial number's raw 16 bytes (what a swap check compares).
    pub serial_raw: Vec<u8>,
    /// Date code as the module gives it (`YYMMDD` and an optional lot), trimmed.
    pub date_code: String,
    /// The connector ([`connector_name`]).
    pub connector: String,
    /// `optical`, `passive_copper`, `active_copper`, `active_optical`, or "".
    pub media: String,
    /// Nominal laser wavelength in picometres (SFF-8472 A0h 60–61 in nm; SFF-8636 upper
    /// page 00h 186–187 and CMIS page 01h 138–139 in 0.05 nm); `None` for copper, for a
    /// flat CMIS module, and where the module gives 0.
    pub wavelength_pm: Option<u32>,
}

/// What the module advertises it monitors, and how to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Monitoring {
    /// Whether diagnostics (DDM) are implemented and readable at all.
    pub ddm: bool,
    /// Why not, when they are not.
    pub no_ddm_reason: Option<String>,
    /// Module temperature monitored.
    pub temperature: bool,
    /// Supply voltage monitored.
    pub voltage: bool,
    /// Per-lane RX power monitored.
    pub rx_power: bool,
    /// Per-lane TX power monitored.
    pub tx_power: bool,
    /// Per-lane TX bias monitored.
    pub tx_bias: bool,
    /// What the RX power monitor measures.
    pub rx_power_type: RxPowerType,
    /// Lanes monitored (1 for SFP, 4 for SFF-8636; CMIS: the media lanes the application
    /// advertisement gives a single-bank module, else 8 per bank).
    pub lanes: u8,
    /// CMIS: banks of page 11h read (1, 2 or 4).
    pub banks: u8,
    /// CMIS: TX bias multiplier (1, 2 or 4).
    pub tx_bias_multiplier: u8,
    /// Flat memory (no pages beyond 00h).
    pub flat: bool,
    /// SFF-8472: the external calibration constants, for an externally calibrated module.
    pub calibration: Option<sff8472::Calibration>,
    /// SFF-8472: alarm/warning flags implemented (A0h 93 bit 7).
    pub aw_flags: bool,
    /// SFF-8472: TX fault and RX LOS signals implemented (A0h 65 bits 3 and 1).
    pub tx_fault: bool,
    /// SFF-8472: RX LOS implemented.
    pub rx_los: bool,
    /// CMIS: page 01h's supported-flags advertisement (0x9D TX, 0x9E RX).
    pub cmis_flags: (u8, u8),
}

impl Monitoring {
    /// Nothing monitored, for `reason`.
    pub fn none(lanes: u8, reason: impl Into<String>) -> Self {
        Monitoring {
            ddm: false,
            no_ddm_reason: Some(reason.into()),
            temperature: false,
            voltage: false,
            rx_power: false,
            tx_power: false,
            tx_bias: false,
            rx_power_type: RxPowerType::Average,
            lanes,
            banks: 1,
            tx_bias_multiplier: 1,
            flat: true,
            calibration: None,
            aw_flags: false,
            tx_fault: false,
            rx_los: false,
            cmis_flags: (0, 0),
        }
    }
}

/// What does not change while a module stays plugged in.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleInfo {
    /// Who made it and what it is.
    pub identity: Identity,
    /// Its alarm and warning thresholds.
    pub thresholds: Thresholds,
    /// What it monitors.
    pub monitoring: Monitoring,
    /// How many reads [`identify`] made.
    pub reads: usize,
}

/// A per-lane flag (the contract's `flag` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(missing_docs)]
pub enum LaneFlag {
    RxLos,
    TxLos,
    RxLol,
    TxLol,
    TxFault,
    RxPowerHighAlarm,
    RxPowerLowAlarm,
    RxPowerHighWarning,
    RxPowerLowWarning,
    TxPowerHighAlarm,
    TxPowerLowAlarm,
    TxPowerHighWarning,
    TxPowerLowWarning,
    TxBiasHighAlarm,
    TxBiasLowAlarm,
    TxBiasHighWarning,
    TxBiasLowWarning,
}

impl LaneFlag {
    /// The `flag` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            LaneFlag::RxLos => "rx_los",
            LaneFlag::TxLos => "tx_los",
            LaneFlag::RxLol => "rx_lol",
            LaneFlag::TxLol => "tx_lol",
            LaneFlag::TxFault => "tx_fault",
            LaneFlag::RxPowerHighAlarm => "rx_power_high_alarm",
            LaneFlag::RxPowerLowAlarm => "rx_power_low_alarm",
            LaneFlag::RxPowerHighWarning => "rx_power_high_warning",
            LaneFlag::RxPowerLowWarning => "rx_power_low_warning",
            LaneFlag::TxPowerHighAlarm => "tx_power_high_alarm",
            LaneFlag::TxPowerLowAlarm => "tx_power_low_alarm",
            LaneFlag::TxPowerHighWarning => "tx_power_high_warning",
            LaneFlag::TxPowerLowWarning => "tx_power_low_warning",
            LaneFlag::TxBiasHighAlarm => "tx_bias_high_alarm",
            LaneFlag::TxBiasLowAlarm => "tx_bias_low_alarm",
            LaneFlag::TxBiasHighWarning => "tx_bias_high_warning",
            LaneFlag::TxBiasLowWarning => "tx_bias_low_warning",
        }
    }

    /// The four RX power alarm/warning flags, in high alarm, low alarm, high warning, low
    /// warning order (the bit order of the specs' flag bytes, most significant first).
    pub const RX_POWER: [LaneFlag; 4] = [
        LaneFlag::RxPowerHighAlarm,
        LaneFlag::RxPowerLowAlarm,
        LaneFlag::RxPowerHighWarning,
        LaneFlag::RxPowerLowWarning,
    ];
    /// The TX power flags, same order.
    pub const TX_POWER: [LaneFlag; 4] = [
        LaneFlag::TxPowerHighAlarm,
        LaneFlag::TxPowerLowAlarm,
        LaneFlag::TxPowerHighWarning,
        LaneFlag::TxPowerLowWarning,
    ];
    /// The TX bias flags, same order.
    pub const TX_BIAS: [LaneFlag; 4] = [
        LaneFlag::TxBiasHighAlarm,
        LaneFlag::TxBiasLowAlarm,
        LaneFlag::TxBiasHighWarning,
        LaneFlag::TxBiasLowWarning,
    ];
}

/// A module-level flag (the contract's `flag` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(missing_docs)]
pub enum ModuleFlag {
    TemperatureHighAlarm,
    TemperatureLowAlarm,
    TemperatureHighWarning,
    TemperatureLowWarning,
    VoltageHighAlarm,
    VoltageLowAlarm,
    VoltageHighWarning,
    VoltageLowWarning,
    ModuleFault,
}

impl ModuleFlag {
    /// The `flag` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleFlag::TemperatureHighAlarm => "temperature_high_alarm",
            ModuleFlag::TemperatureLowAlarm => "temperature_low_alarm",
            ModuleFlag::TemperatureHighWarning => "temperature_high_warning",
            ModuleFlag::TemperatureLowWarning => "temperature_low_warning",
            ModuleFlag::VoltageHighAlarm => "voltage_high_alarm",
            ModuleFlag::VoltageLowAlarm => "voltage_low_alarm",
            ModuleFlag::VoltageHighWarning => "voltage_high_warning",
            ModuleFlag::VoltageLowWarning => "voltage_low_warning",
            ModuleFlag::ModuleFault => "module_fault",
        }
    }

    /// Temperature flags, high alarm, low alarm, high warning, low warning.
    pub const TEMPERATURE: [ModuleFlag; 4] = [
        ModuleFlag::TemperatureHighAlarm,
        ModuleFlag::TemperatureLowAlarm,
        ModuleFlag::TemperatureHighWarning,
        ModuleFlag::TemperatureLowWarning,
    ];
    /// Voltage flags, same order.
    pub const VOLTAGE: [ModuleFlag; 4] = [
        ModuleFlag::VoltageHighAlarm,
        ModuleFlag::VoltageLowAlarm,
        ModuleFlag::VoltageHighWarning,
        ModuleFlag::VoltageLowWarning,
    ];
}

/// CMIS module state (lower page byte 3 bits 3..1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ModuleState {
    LowPower,
    PowerUp,
    Ready,
    PowerDown,
    Fault,
}

impl ModuleState {
    /// Every state, in the order the series are exported.
    pub const ALL: [ModuleState; 5] = [
        ModuleState::LowPower,
        ModuleState::PowerUp,
        ModuleState::Ready,
        ModuleState::PowerDown,
        ModuleState::Fault,
    ];

    /// The `state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleState::LowPower => "low_power",
            ModuleState::PowerUp => "power_up",
            ModuleState::Ready => "ready",
            ModuleState::PowerDown => "power_down",
            ModuleState::Fault => "fault",
        }
    }
}

/// One lane's monitors, in base units; `None` where the module does not monitor it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Lane {
    /// Lane number, 1-based.
    pub lane: u8,
    /// RX power, W (OMA or average: [`Monitoring::rx_power_type`]).
    pub rx_power: Option<f64>,
    /// TX power, W.
    pub tx_power: Option<f64>,
    /// TX bias, A.
    pub tx_bias: Option<f64>,
}

/// What one diagnostics read gave.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Diagnostics {
    /// Module temperature, °C.
    pub temperature: Option<f64>,
    /// Supply voltage, V.
    pub voltage: Option<f64>,
    /// Per-lane monitors, lane order.
    pub lanes: Vec<Lane>,
    /// Per-lane flags the module has: (lane 1-based, flag, set).
    pub lane_flags: Vec<(u8, LaneFlag, bool)>,
    /// Module-level flags the module has.
    pub module_flags: Vec<(ModuleFlag, bool)>,
    /// CMIS module state.
    pub state: Option<ModuleState>,
    /// How many reads it made.
    pub reads: usize,
}

/// Counts the reads made through a reader.
pub struct Counting<'a> {
    inner: &'a mut dyn PageReader,
    /// Reads so far.
    pub reads: usize,
}

impl<'a> Counting<'a> {
    /// Counts reads through `inner`.
    pub fn new(inner: &'a mut dyn PageReader) -> Self {
        Counting { inner, reads: 0 }
    }
}

impl PageReader for Counting<'_> {
    fn read(&mut self, request: PageRequest) -> Result<Vec<u8>, ReadError> {
        self.reads += 1;
        let data = self.inner.read(request)?;
        if data.len() != usize::from(request.length) {
            return Err(ReadError::Length {
                request,
                got: data.len(),
            });
        }
        Ok(data)
    }
}

/// Reads `request`, built from its parts (a request the decoders build is always valid;
/// an invalid one is an [`Error::Inconsistent`], never a panic).
pub(crate) fn read(
    reader: &mut dyn PageReader,
    request: Result<PageRequest, String>,
) -> Result<Vec<u8>, Error> {
    let request = request.map_err(Error::Inconsistent)?;
    Ok(reader.read(request)?)
}

/// Reads the module's identifier (byte 0 of the lower page at 0x50).
pub fn identifier(reader: &mut dyn PageReader) -> Result<u8, Error> {
    let b = read(reader, PageRequest::lower(I2C_LOW, 0, 1))?;
    b.first()
        .copied()
        .ok_or_else(|| Error::Inconsistent("empty identifier read".into()))
}

/// Reads identity, thresholds and advertisement of the module behind `reader`.
pub fn identify(reader: &mut dyn PageReader) -> Result<ModuleInfo, Error> {
    let mut counting = Counting::new(reader);
    let lower = read(&mut counting, PageRequest::lower(I2C_LOW, 0, 128))?;
    let id = lower.first().copied().unwrap_or(0);
    let mut info = match Spec::of_identifier(id) {
        Some(Spec::Sff8472) => sff8472::identify(&mut counting, &lower)?,
        Some(Spec::Sff8636) => sff8636::identify(&mut counting, &lower)?,
        Some(Spec::Cmis) => cmis::identify(&mut counting, &lower)?,
        None => return Err(Error::UnknownIdentifier(id)),
    };
    info.reads = counting.reads;
    Ok(info)
}

/// Reads the serial number's 16 raw bytes of a module of `spec`.
pub fn serial(reader: &mut dyn PageReader, spec: Spec) -> Result<Vec<u8>, Error> {
    let request = match spec {
        Spec::Sff8472 => PageRequest::lower(I2C_LOW, sff8472::SERIAL, 16),
        Spec::Sff8636 => PageRequest::upper(0, 0, sff8636::SERIAL, 16),
        Spec::Cmis => PageRequest::upper(0, 0, cmis::SERIAL, 16),
    };
    read(&mut Counting::new(reader), request)
}

/// Reads the diagnostics of the module `info` describes.
pub fn diagnostics(reader: &mut dyn PageReader, info: &ModuleInfo) -> Result<Diagnostics, Error> {
    let mut counting = Counting::new(reader);
    let mut d = match info.identity.spec {
        Spec::Sff8472 => sff8472::diagnostics(&mut counting, info)?,
        Spec::Sff8636 => sff8636::diagnostics(&mut counting, info)?,
        Spec::Cmis => cmis::diagnostics(&mut counting, info)?,
    };
    d.reads = counting.reads;
    Ok(d)
}

/// Checks that a lower page 0 read during diagnostics still carries the identifier the
/// module was identified with: a reply of stale or zeroed data (mlx5 before commit
/// d1c94bc5b90c returned success on a failed MCIA read) or another module fails here.
pub(crate) fn check_identifier(lower: &[u8], info: &ModuleInfo) -> Result<(), Error> {
    match lower.first() {
        Some(&id) if id == info.identity.identifier => Ok(()),
        Some(&id) => Err(Error::Inconsistent(format!(
            "identifier byte reads {id:#04x}, the module was identified as {:#04x}: stale data or another module",
            info.identity.identifier
        ))),
        None => Err(Error::Inconsistent("empty lower page".into())),
    }
}

/// A big-endian u16 at `at`.
pub fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// A trimmed ASCII string of `bytes[range]` (non-printable bytes dropped).
pub fn ascii(bytes: &[u8], start: usize, len: usize) -> String {
    let raw = bytes.get(start..start + len).unwrap_or_default();
    raw.iter()
        .filter(|b| b.is_ascii_graphic() || **b == b' ')
        .map(|b| char::from(*b))
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Degrees Celsius of a signed 1/256 °C value.
pub fn celsius(raw: i16) -> f64 {
    f64::from(raw) / 256.0
}

/// Volts of a 100 µV value.
pub fn volts(raw: u16) -> f64 {
    f64::from(raw) / 1e4
}

/// Watts of a 0.1 µW value.
pub fn watts(raw: u16) -> f64 {
    f64::from(raw) / 1e7
}

/// Amperes of a 2 µA value.
pub fn amperes(raw: u16) -> f64 {
    f64::from(raw) * 2.0 / 1e6
}

/// `bit` of `byte` as a flag.
pub(crate) fn bit(byte: u8, bit: u8) -> bool {
    byte & (1 << bit) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_follow_the_kernels_rules() {
        assert!(PageRequest::lower(I2C_LOW, 0, 128).is_ok());
        assert!(PageRequest::upper(3, 0, 128, 128).is_ok());
        assert!(PageRequest::upper(0, 0, 196, 16).is_ok());
        // Crossing 128, past 256, page > 0 below 128, empty, too long.
        assert!(PageRequest::lower(I2C_LOW, 120, 16).is_err());
        assert!(PageRequest::upper(0, 0, 250, 16).is_err());
        assert!(PageRequest::new(I2C_LOW, 3, 0, 0, 16).is_err());
        assert!(PageRequest::lower(I2C_LOW, 0, 0).is_err());
        assert!(PageRequest::lower(I2C_LOW, 0, 129).is_err());
    }

    #[test]
    fn units_are_the_specs() {
        assert_eq!(celsius(0x1A80u16 as i16), 26.5);
        assert_eq!(celsius(0xFF00u16 as i16), -1.0);
        assert!((volts(33000) - 3.3).abs() < 1e-12);
        assert!((watts(10000) - 1e-3).abs() < 1e-15);
        assert!((amperes(3000) - 6e-3).abs() < 1e-15);
        assert_eq!(ascii(b"  FINISAR CORP.  \0\xff", 0, 19), "FINISAR CORP.");
    }
}
