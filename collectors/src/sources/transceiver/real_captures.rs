//! The decoders on captures of real modules (`tests/fixtures/transceiver/*/capture.txt`,
//! converted by `import-capture.py` into `ethtool-m-hex.txt`). No decoded output came with
//! them: every expected value is computed by hand from the bytes by the specs, and each
//! fixture's README shows the arithmetic.

use super::eeprom::{
    self, Diagnostics, LaneFlag, Levels, ModuleFlag, ModuleInfo, ModuleState, RxPowerType, Spec,
};
use super::hexdump::Capture;

const ARISTA: &str = include_str!(
    "../../../../tests/fixtures/transceiver/sff8472-arista-sfp-10glr-31/ethtool-m-hex.txt"
);
const QSFPTEK: &str = include_str!(
    "../../../../tests/fixtures/transceiver/sff8636-qsfptek-qt-qsfp28-er4/ethtool-m-hex.txt"
);
const CIG: &str = include_str!(
    "../../../../tests/fixtures/transceiver/cmis-cig-trd5h20enf-lf000/ethtool-m-hex.txt"
);

/// Milliwatts and milliamperes as printed, in the base units the decoders give.
const MILLI: f64 = 1e-3;

fn decode(text: &str) -> (ModuleInfo, Diagnostics) {
    let mut capture = Capture::parse(text).unwrap();
    let info = eeprom::identify(&mut capture).unwrap();
    let d = eeprom::diagnostics(&mut capture, &info).unwrap();
    (info, d)
}

/// `got` within `tolerance` of `want`, with the name of the value on failure.
#[track_caller]
fn near(what: &str, got: Option<f64>, want: f64, tolerance: f64) {
    let got = got.unwrap_or_else(|| panic!("{what}: no value, want {want}"));
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got} is not {want} ± {tolerance}"
    );
}

/// High alarm, low alarm, high warning, low warning, each `scale` × the printed value.
#[track_caller]
fn levels(what: &str, got: Option<Levels>, want: [f64; 4], scale: f64, tolerance: f64) {
    let l = got.unwrap_or_else(|| panic!("{what}: no thresholds"));
    let got = [l.high_alarm, l.low_alarm, l.high_warning, l.low_warning];
    for ((g, w), level) in
        got.iter()
            .zip(want)
            .zip(["high alarm", "low alarm", "high warning", "low warning"])
    {
        near(
            &format!("{what} {level}"),
            Some(*g),
            w * scale,
            tolerance * scale,
        );
    }
}

fn lane_flag(d: &Diagnostics, lane: u8, flag: LaneFlag) -> Option<bool> {
    d.lane_flags
        .iter()
        .find(|(l, f, _)| *l == lane && *f == flag)
        .map(|(_, _, set)| *set)
}

#[test]
#[allow(clippy::approx_constant)] // 3.14 V is the Vcc low warning, not π
fn arista_sfp_10glr_31_sff8472() {
    let (info, d) = decode(ARISTA);
    let id = &info.identity;
    assert_eq!(
        (id.spec, id.identifier, id.kind.as_str()),
        (Spec::Sff8472, 0x03, "SFP")
    );
    assert_eq!(id.vendor, "Arista Networks");
    assert_eq!(id.part_number, "SFP-10GLR-31");
    assert_eq!(id.revision, "0002");
    assert_eq!(id.serial, "F2032002143");
    assert_eq!(id.date_code, "200811");
    assert_eq!(
        (id.connector.as_str(), id.media.as_str()),
        ("lc", "optical")
    );
    // A0h 60–61 = 0x051e = 1310 nm.
    assert_eq!(id.wavelength_pm, Some(1_310_000));
    // A0h 92 = 0x68: DDM (bit 6), internally calibrated (bit 5), average RX power (bit 3).
    let m = &info.monitoring;
    assert!(m.ddm && m.aw_flags);
    assert_eq!(m.calibration, None);
    assert_eq!(m.rx_power_type, RxPowerType::Average);
    // A2h 96–105.
    near("temperature", d.temperature, 39.37, 0.005); // 0x275e / 256
    near("Vcc", d.voltage, 3.2756, 0.00005); // 0x7ff4 × 100 µV
    assert_eq!(d.lanes.len(), 1);
    let lane = d.lanes[0];
    near("TX bias", lane.tx_bias, 32.750 * MILLI, 0.0005 * MILLI); // 0x3ff7 × 2 µA
    near("TX power", lane.tx_power, 0.4427 * MILLI, 0.00005 * MILLI); // 0x114b × 0.1 µW
    near("RX power", lane.rx_power, 0.3397 * MILLI, 0.00005 * MILLI); // 0x0d45 × 0.1 µW
    // A2h 0–39.
    let t = &info.thresholds;
    levels(
        "temperature",
        t.temperature,
        [80.0, -10.0, 70.0, 0.0],
        1.0,
        0.005,
    );
    levels("Vcc", t.voltage, [3.63, 2.97, 3.47, 3.14], 1.0, 0.00005);
    levels(
        "TX bias",
        t.tx_bias,
        [110.0, 5.0, 100.0, 15.0],
        MILLI,
        0.0005,
    );
    let power = 0.00005;
    levels(
        "TX power",
        t.tx_power,
        [1.7783, 0.0955, 1.1220, 0.1513],
        MILLI,
        power,
    );
    levels(
        "RX power",
        t.rx_power,
        [1.7783, 0.0229, 1.1220, 0.0363],
        MILLI,
        power,
    );
    // A2h 110 and 112–117 are 0: no flag set, and every flag the module has is there.
    assert!(!d.lane_flags.is_empty() && !d.module_flags.is_empty());
    assert!(
        d.lane_flags.iter().all(|(_, _, set)| !set),
        "{:?}",
        d.lane_flags
    );
    assert!(
        d.module_flags.iter().all(|(_, set)| !set),
        "{:?}",
        d.module_flags
    );
    for flag in [
        LaneFlag::RxLos,
        LaneFlag::TxFault,
        LaneFlag::RxPowerLowAlarm,
    ] {
        assert_eq!(lane_flag(&d, 1, flag), Some(false), "{flag:?}");
    }
    assert_eq!(d.state, None);
}

#[test]
fn qsfptek_qt_qsfp28_er4_sff8636_with_four_dark_rx_lanes() {
    let (info, d) = decode(QSFPTEK);
    let id = &info.identity;
    assert_eq!(
        (id.spec, id.identifier, id.kind.as_str()),
        (Spec::Sff8636, 0x11, "QSFP28")
    );
    assert_eq!(id.vendor, "QSFPTEK");
    assert_eq!(id.part_number, "QT-QSFP28-ER4");
    assert_eq!(id.revision, "1A");
    assert_eq!(id.serial, "QT14241028003");
    assert_eq!(id.date_code, "241028");
    assert_eq!(
        (id.connector.as_str(), id.media.as_str()),
        ("lc", "optical")
    );
    // Upper page 00h 186–187 = 0x6658 = 26200 × 0.05 nm = 1310 nm.
    assert_eq!(id.wavelength_pm, Some(1_310_000));
    assert_eq!(info.monitoring.rx_power_type, RxPowerType::Average); // 220 bit 3
    assert_eq!(info.reads, 3, "lower page, upper page 00h, page 03h");
    // Lower page 22–57.
    near("temperature", d.temperature, 33.24, 0.005); // 0x213d / 256
    near("Vcc", d.voltage, 3.3167, 0.00005); // 0x818f
    assert_eq!(d.lanes.len(), 4);
    let bias = [57.502, 55.486, 57.502, 62.482]; // 0x704f 0x6c5f 0x704f 0x7a09 × 2 µA
    let tx = [1.4228, 1.8148, 1.5724, 1.3166]; // 0x3794 0x46e4 0x3d6c 0x336e × 0.1 µW
    for (i, lane) in d.lanes.iter().enumerate() {
        assert_eq!(usize::from(lane.lane), i + 1);
        near("RX power", lane.rx_power, 0.0001 * MILLI, 1e-12); // 0x0001 × 0.1 µW
        near("TX bias", lane.tx_bias, bias[i] * MILLI, 0.0005 * MILLI);
        near("TX power", lane.tx_power, tx[i] * MILLI, 0.00005 * MILLI);
    }
    // Byte 3 = 0x0f: RX LOS lanes 1–4 (bits 0–3), no TX LOS (bits 4–7). Byte 5 = 0x0f: RX
    // CDR LOL lanes 1–4 (bits 0–3), no TX CDR LOL (bits 4–7). Bytes 9–10 = 0x55: each
    // lane's low alarm (bit 6 / 2) and low warning (bit 4 / 0). Bytes 4, 11–14 are 0.
    for lane in 1..=4 {
        let set = [
            LaneFlag::RxLos,
            LaneFlag::RxLol,
            LaneFlag::RxPowerLowAlarm,
            LaneFlag::RxPowerLowWarning,
        ];
        let clear = [
            LaneFlag::TxLos,
            LaneFlag::TxLol,
            LaneFlag::RxPowerHighAlarm,
            LaneFlag::RxPowerHighWarning,
            LaneFlag::TxBiasHighAlarm,
            LaneFlag::TxBiasLowWarning,
            LaneFlag::TxPowerHighAlarm,
            LaneFlag::TxPowerLowAlarm,
        ];
        for flag in set {
            assert_eq!(
                lane_flag(&d, lane, flag),
                Some(true),
                "lane {lane} {flag:?}"
            );
        }
        for flag in clear {
            assert_eq!(
                lane_flag(&d, lane, flag),
                Some(false),
                "lane {lane} {flag:?}"
            );
        }
        // Upper page 00h 195 = 0xd6: bit 3 (TX fault implemented) clear.
        assert_eq!(lane_flag(&d, lane, LaneFlag::TxFault), None);
    }
    assert_eq!(
        d.lane_flags.iter().filter(|(_, _, set)| *set).count(),
        16,
        "four flags on each of four lanes, no more"
    );
    assert!(
        d.module_flags.iter().all(|(_, set)| !set),
        "{:?}",
        d.module_flags
    );
    assert_eq!(
        d.module_flags
            .iter()
            .find(|(f, _)| *f == ModuleFlag::TemperatureHighAlarm),
        Some(&(ModuleFlag::TemperatureHighAlarm, false))
    );
    // Page 03h 128–199.
    let t = &info.thresholds;
    levels(
        "temperature",
        t.temperature,
        [75.0, -5.0, 70.0, 0.0],
        1.0,
        0.005,
    );
    levels("Vcc", t.voltage, [3.63, 2.97, 3.465, 3.135], 1.0, 0.00005);
    let power = 0.00005;
    levels(
        "RX power",
        t.rx_power,
        [0.5623, 0.0071, 0.4467, 0.0089],
        MILLI,
        power,
    );
    levels(
        "TX bias",
        t.tx_bias,
        [110.0, 20.0, 100.0, 30.0],
        MILLI,
        0.0005,
    );
    levels(
        "TX power",
        t.tx_power,
        [5.6234, 0.3548, 4.4668, 0.4466],
        MILLI,
        power,
    );
}

#[test]
fn cig_trd5h20enf_lf000_cmis_4_with_four_media_lanes() {
    let (info, d) = decode(CIG);
    let id = &info.identity;
    assert_eq!(
        (id.spec, id.identifier, id.kind.as_str()),
        (Spec::Cmis, 0x18, "QSFP-DD")
    );
    assert_eq!(id.vendor, "CIG");
    assert_eq!(id.part_number, "TRD5H20ENF-LF000");
    assert_eq!(id.revision, "01");
    assert_eq!(id.serial, "S22JB05RR");
    assert_eq!(id.date_code, "220926");
    assert_eq!(
        (id.connector.as_str(), id.media.as_str()),
        ("lc", "optical")
    );
    // Page 01h 138–139 = 0x65a4 = 26020 × 0.05 nm = 1301 nm.
    assert_eq!(id.wavelength_pm, Some(1_301_000));
    let m = &info.monitoring;
    // Page 01h 142 = 0x24: bank 0 only; 160 = 0x07: bias, TX and RX power, bits 4–3 = 00 (× 1).
    assert_eq!((m.banks, m.tx_bias_multiplier), (1, 1));
    assert!(m.tx_bias && m.tx_power && m.rx_power && m.temperature && m.voltage);
    assert_eq!(m.rx_power_type, RxPowerType::Average); // 151 = 0x1a, bit 4
    // AppSel 1 and 2 (lower page 86–93): 8 host lanes, 4 media lanes (0x84), media lane
    // assignment (page 01h 176–177) 0x01: from media lane 1. Lanes 5–8 do not exist.
    assert_eq!(m.lanes, 4);
    assert_eq!(info.reads, 4, "lower page, pages 00h, 01h, 02h");
    assert_eq!(d.reads, 2, "lower page, page 11h bank 0");
    // Lower page 3 = 0x07: bits 3–1 = 3.
    assert_eq!(d.state, Some(ModuleState::Ready));
    near("temperature", d.temperature, 47.72, 0.005); // 0x2fb8 / 256
    near("Vcc", d.voltage, 3.3055, 0.00005); // 0x811f
    // Page 11h 154 (TX power), 170 (TX bias), 186 (RX power).
    let tx = [2.1842, 2.2092, 2.1659, 2.2043];
    let rx = [1.8458, 1.9391, 1.7189, 1.8049];
    let bias = [59.438, 53.480, 50.000, 50.000];
    assert_eq!(d.lanes.len(), 4, "{:?}", d.lanes);
    for (i, lane) in d.lanes.iter().enumerate() {
        assert_eq!(usize::from(lane.lane), i + 1);
        near("TX power", lane.tx_power, tx[i] * MILLI, 0.00005 * MILLI);
        near("RX power", lane.rx_power, rx[i] * MILLI, 0.00005 * MILLI);
        near("TX bias", lane.tx_bias, bias[i] * MILLI, 0.0005 * MILLI);
    }
    // Page 11h 135–152 are 0: no lane flag set. The media-side flags exist for lanes 1–4;
    // the host-side TX LOS and TX CDR LOL (page 01h 157 = 0x07) for host lanes 1–8.
    assert!(
        d.lane_flags.iter().all(|(_, _, set)| !set),
        "{:?}",
        d.lane_flags
    );
    assert_eq!(d.lane_flags.len(), 4 * 15 + 8 * 2);
    for flag in [
        LaneFlag::TxFault,
        LaneFlag::RxLos,
        LaneFlag::RxLol,
        LaneFlag::RxPowerLowAlarm,
    ] {
        assert_eq!(lane_flag(&d, 4, flag), Some(false), "{flag:?}");
        assert_eq!(lane_flag(&d, 5, flag), None, "{flag:?}");
    }
    for lane in 1..=8 {
        assert_eq!(lane_flag(&d, lane, LaneFlag::TxLos), Some(false));
        assert_eq!(lane_flag(&d, lane, LaneFlag::TxLol), Some(false));
    }
    assert!(
        d.module_flags.iter().all(|(_, set)| !set),
        "{:?}",
        d.module_flags
    );
    // Page 02h.
    let t = &info.thresholds;
    levels(
        "temperature",
        t.temperature,
        [75.0, -5.0, 70.0, 0.0],
        1.0,
        0.005,
    );
    levels("Vcc", t.voltage, [3.63, 2.97, 3.465, 3.135], 1.0, 0.00005);
    let power = 0.00005;
    levels(
        "TX power",
        t.tx_power,
        [4.0738, 0.2692, 3.2359, 0.5370],
        MILLI,
        power,
    );
    levels(
        "TX bias",
        t.tx_bias,
        [100.0, 25.0, 90.0, 35.0],
        MILLI,
        0.0005,
    );
    levels(
        "RX power",
        t.rx_power,
        [4.0738, 0.0631, 3.2359, 0.1259],
        MILLI,
        power,
    );
}

#[test]
fn the_media_lanes_come_from_the_application_advertisement() {
    use super::eeprom::cmis::media_lanes;
    let mut lower = [0u8; 128];
    let mut p1 = [0u8; 128];
    // No descriptor: undecided.
    assert_eq!(media_lanes(&lower, &p1), None);
    // 400GBASE-DR4 (8 host, 4 media lanes) from lane 1.
    lower[86..91].copy_from_slice(&[0x11, 0x1c, 0x84, 0x01, 0xff]);
    p1[176 - 128] = 0x01;
    assert_eq!(media_lanes(&lower, &p1), Some(4));
    // And 2 × 200G (4 host, 2 media lanes) from media lanes 1 or 3: still 4.
    lower[90..95].copy_from_slice(&[0x0f, 0x1c, 0x42, 0x11, 0xff]);
    p1[177 - 128] = 0x05;
    assert_eq!(media_lanes(&lower, &p1), Some(4));
    // 400GBASE-SR8: 8 media lanes.
    lower[94..99].copy_from_slice(&[0x11, 0x10, 0x88, 0x01, 0xff]);
    p1[178 - 128] = 0x01;
    assert_eq!(media_lanes(&lower, &p1), Some(8));
    // A descriptor after the 0xFF end marker is not read; a reserved count is skipped.
    lower[94] = 0xff;
    assert_eq!(media_lanes(&lower, &p1), Some(4));
    lower[88] = 0x80;
    lower[92] = 0x40;
    assert_eq!(media_lanes(&lower, &p1), None);
}
