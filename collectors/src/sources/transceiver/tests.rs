//! The decoders on the fixtures of `tests/fixtures/transceiver/` (values as ethtool prints
//! them, within its rounding), bad pages, and the source's cadence, swap, removal and
//! failure semantics over a fake kernel and a fake clock; and a live veth.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::eeprom::{self, Error, LaneFlag, ModuleFlag, ModuleState, RxPowerType, Spec};
use super::hexdump::Capture;
use super::*;
use crate::fs::{RealFs, Roots};
use crate::netdevs::NetdevFilter;

const SFP: &str = include_str!(
    "../../../../tests/fixtures/transceiver/sff8472-finisar-ftlx8571d3bcl/ethtool-m-hex.txt"
);
const QSFP28: &str =
    include_str!("../../../../tests/fixtures/transceiver/sff8636-qsfp28-sr4/ethtool-m-hex.txt");
const CMIS: &str =
    include_str!("../../../../tests/fixtures/transceiver/cmis-qsfpdd-400g-dr4/ethtool-m-hex.txt");

/// `a` within `tolerance` of `b`.
fn near(a: Option<f64>, b: f64, tolerance: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= tolerance)
}

fn flag(d: &eeprom::Diagnostics, lane: u8, flag: LaneFlag) -> Option<bool> {
    d.lane_flags
        .iter()
        .find(|(l, f, _)| *l == lane && *f == flag)
        .map(|(_, _, set)| *set)
}

fn module_flag(d: &eeprom::Diagnostics, flag: ModuleFlag) -> Option<bool> {
    d.module_flags
        .iter()
        .find(|(f, _)| *f == flag)
        .map(|(_, set)| *set)
}

#[test]
fn an_sfp_decodes_as_ethtool_prints_it() {
    let mut capture = Capture::parse(SFP).unwrap();
    let info = eeprom::identify(&mut capture).unwrap();
    let id = &info.identity;
    assert_eq!(id.spec, Spec::Sff8472);
    assert_eq!(id.kind, "SFP");
    assert_eq!(id.vendor, "FINISAR CORP.");
    assert_eq!(id.part_number, "FTLX8571D3BCL-HD");
    assert_eq!(id.revision, "A");
    assert_eq!(id.serial, "AQ70P4U");
    assert_eq!(id.date_code, "130823");
    assert_eq!(
        (id.connector.as_str(), id.media.as_str()),
        ("lc", "optical")
    );
    assert_eq!(info.monitoring.rx_power_type, RxPowerType::Average);
    assert_eq!(info.reads, 2, "A0h and A2h, one read each");
    let d = eeprom::diagnostics(&mut capture, &info).unwrap();
    assert_eq!(d.reads, 1);
    // Module temperature : 30.14 degrees C; Module voltage : 3.3440 V
    assert!(near(d.temperature, 30.14, 0.005), "{:?}", d.temperature);
    assert!(near(d.voltage, 3.3440, 0.00005));
    let lane = d.lanes[0];
    // Laser bias current : 7.934 mA; output power 0.5734 mW; RX 0.0004 mW
    assert!(near(lane.tx_bias, 7.934e-3, 0.0005e-3));
    assert!(near(lane.tx_power, 0.5734e-3, 0.00005e-3));
    assert!(near(lane.rx_power, 0.0004e-3, 0.00005e-3));
    let bias = info.thresholds.tx_bias.unwrap();
    // 11.800 / 4.000 / 10.800 / 5.000 mA
    assert!(near(Some(bias.high_alarm), 11.8e-3, 1e-9));
    assert!(near(Some(bias.low_alarm), 4.0e-3, 1e-9));
    assert!(near(Some(bias.high_warning), 10.8e-3, 1e-9));
    assert!(near(Some(bias.low_warning), 5.0e-3, 1e-9));
    let temp = info.thresholds.temperature.unwrap();
    assert_eq!((temp.high_alarm, temp.low_alarm), (75.0, -5.0));
    // Laser rx power low alarm : On; low warning : On; high alarm : Off
    assert_eq!(flag(&d, 1, LaneFlag::RxPowerLowAlarm), Some(true));
    assert_eq!(flag(&d, 1, LaneFlag::RxPowerLowWarning), Some(true));
    assert_eq!(flag(&d, 1, LaneFlag::RxPowerHighAlarm), Some(false));
    assert_eq!(flag(&d, 1, LaneFlag::RxLos), Some(true));
    assert_eq!(flag(&d, 1, LaneFlag::TxFault), Some(false));
    assert_eq!(
        module_flag(&d, ModuleFlag::TemperatureHighAlarm),
        Some(false)
    );
    assert_eq!(d.state, None);
}

#[test]
fn a_qsfp28_decodes_its_four_lanes_and_page_3() {
    let mut capture = Capture::parse(QSFP28).unwrap();
    let info = eeprom::identify(&mut capture).unwrap();
    assert_eq!(info.identity.kind, "QSFP28");
    assert_eq!(info.identity.vendor, "TERASPEK");
    assert_eq!(info.identity.part_number, "TSQ885S101T1");
    assert_eq!(info.identity.serial, "22070073");
    assert_eq!(info.identity.connector, "mpo_1x12");
    assert_eq!(info.identity.media, "optical");
    assert_eq!(info.reads, 3, "lower page, upper page 00h, page 03h");
    let d = eeprom::diagnostics(&mut capture, &info).unwrap();
    assert_eq!(d.reads, 1);
    assert!(near(d.temperature, 32.957, 0.004));
    assert!(near(d.voltage, 3.2961, 0.00005));
    assert_eq!(d.lanes.len(), 4);
    let rx: Vec<f64> = d.lanes.iter().map(|l| l.rx_power.unwrap()).collect();
    for (got, want) in rx.iter().zip([1.2140e-3, 0.0, 1.4593e-3, 1.3017e-3]) {
        assert!((got - want).abs() < 0.00005e-3, "{got} vs {want}");
    }
    assert!(near(d.lanes[3].tx_bias, 6.510e-3, 0.0005e-3));
    assert!(near(d.lanes[0].tx_power, 0.7943e-3, 0.00005e-3));
    let rx_th = info.thresholds.rx_power.unwrap();
    assert!(near(Some(rx_th.high_alarm), 2.7542e-3, 1e-9));
    assert!(near(
        Some(info.thresholds.tx_bias.unwrap().high_warning),
        8.5e-3,
        1e-9
    ));
    assert_eq!(flag(&d, 2, LaneFlag::RxLos), Some(true));
    assert_eq!(flag(&d, 1, LaneFlag::RxLos), Some(false));
    assert_eq!(flag(&d, 2, LaneFlag::RxPowerLowAlarm), Some(true));
    assert_eq!(flag(&d, 2, LaneFlag::RxPowerLowWarning), Some(true));
    assert_eq!(flag(&d, 2, LaneFlag::RxPowerHighWarning), Some(false));
    assert_eq!(flag(&d, 1, LaneFlag::RxPowerLowAlarm), Some(false));
    assert_eq!(flag(&d, 3, LaneFlag::TxLol), Some(false));
    assert_eq!(module_flag(&d, ModuleFlag::VoltageLowAlarm), Some(false));
    assert_eq!(
        module_flag(&d, ModuleFlag::ModuleFault),
        None,
        "SFF-8636 has none"
    );
}

#[test]
fn a_cmis_module_decodes_page_11h_with_the_bias_multiplier() {
    let mut capture = Capture::parse(CMIS).unwrap();
    let info = eeprom::identify(&mut capture).unwrap();
    assert_eq!(info.identity.spec, Spec::Cmis);
    assert_eq!(info.identity.kind, "QSFP-DD");
    assert_eq!(info.identity.vendor, "ACME OPTICS");
    assert_eq!(info.identity.part_number, "QDD-400G-DR4-S");
    assert_eq!(info.identity.revision, "B1");
    assert_eq!(info.identity.serial, "ACX2140001234");
    assert_eq!(info.identity.media, "optical");
    assert_eq!(info.monitoring.lanes, 8);
    assert_eq!(info.monitoring.tx_bias_multiplier, 2);
    assert_eq!(info.reads, 4, "lower page, pages 00h, 01h, 02h");
    let d = eeprom::diagnostics(&mut capture, &info).unwrap();
    assert_eq!(d.reads, 2, "lower page, page 11h bank 0");
    assert_eq!(d.state, Some(ModuleState::Ready));
    assert!(near(d.temperature, 41.5, 0.004));
    assert!(near(d.voltage, 3.3012, 0.00005));
    assert_eq!(d.lanes.len(), 8);
    // 4100 × 2 µA × 2 = 16.4 mA
    assert!(near(d.lanes[0].tx_bias, 16.4e-3, 1e-9));
    assert!(near(d.lanes[1].rx_power, 1.1482e-3, 1e-9));
    assert!(near(
        Some(info.thresholds.tx_bias.unwrap().high_alarm),
        30e-3,
        1e-9
    ));
    assert_eq!(flag(&d, 5, LaneFlag::RxLos), Some(true));
    assert_eq!(flag(&d, 4, LaneFlag::RxLos), Some(false));
    assert_eq!(flag(&d, 8, LaneFlag::RxPowerLowAlarm), Some(true));
    assert_eq!(flag(&d, 1, LaneFlag::TxFault), Some(false));
    assert_eq!(
        module_flag(&d, ModuleFlag::TemperatureHighWarning),
        Some(true)
    );
    assert_eq!(
        module_flag(&d, ModuleFlag::TemperatureHighAlarm),
        Some(false)
    );
    assert_eq!(module_flag(&d, ModuleFlag::ModuleFault), Some(false));
}

/// The flat bytes of the SFP fixture.
fn sfp_bytes() -> Vec<u8> {
    let capture = Capture::parse(SFP).unwrap();
    let mut reader = capture;
    let mut out = reader
        .read(PageRequest::lower(0x50, 0, 128).unwrap())
        .unwrap();
    out.extend(
        reader
            .read(PageRequest::upper(0, 0, 128, 128).unwrap())
            .unwrap(),
    );
    out.extend(
        reader
            .read(PageRequest::lower(0x51, 0, 128).unwrap())
            .unwrap(),
    );
    out.extend(
        reader
            .read(PageRequest::new(0x51, 0, 0, 128, 128).unwrap())
            .unwrap(),
    );
    out
}

#[test]
fn a_module_without_ddm_reports_identity_and_reads_no_diagnostics() {
    let mut bytes = sfp_bytes();
    bytes[92] = 0x00;
    let mut capture = Capture::from_raw(&bytes);
    let info = eeprom::identify(&mut capture).unwrap();
    assert!(!info.monitoring.ddm);
    assert!(
        info.monitoring
            .no_ddm_reason
            .as_deref()
            .unwrap()
            .contains("byte 92")
    );
    assert_eq!(info.thresholds, eeprom::Thresholds::default());
    assert_eq!(info.reads, 1, "A2h is not read");
    let d = eeprom::diagnostics(&mut capture, &info).unwrap();
    assert_eq!((d.reads, d.lanes.len(), d.temperature), (0, 0, None));
    // An address change is not done: refused with the reason.
    bytes[92] = 0x44;
    let info = eeprom::identify(&mut Capture::from_raw(&bytes)).unwrap();
    assert!(
        info.monitoring
            .no_ddm_reason
            .unwrap()
            .contains("address change")
    );
}

#[test]
fn truncated_and_garbage_pages_are_errors_that_name_the_read() {
    // QSFP28 without page 03h in the capture (the module says it is paged).
    let cut: String = QSFP28
        .lines()
        .filter(|l| !l.starts_with("0x02"))
        .collect::<Vec<_>>()
        .join("\n");
    let err = eeprom::identify(&mut Capture::parse(&cut).unwrap()).unwrap_err();
    assert!(err.to_string().contains("page 0x03"), "{err}");
    // An identifier railscope does not decode.
    let mut bytes = sfp_bytes();
    bytes[0] = 0x7f;
    assert_eq!(
        eeprom::identify(&mut Capture::from_raw(&bytes)).unwrap_err(),
        Error::UnknownIdentifier(0x7f)
    );
    // A reader that answers fewer bytes than asked.
    struct Short;
    impl PageReader for Short {
        fn read(&mut self, _: PageRequest) -> Result<Vec<u8>, ReadError> {
            Ok(vec![0x11; 4])
        }
    }
    let err = eeprom::identify(&mut Short).unwrap_err();
    assert!(
        matches!(err, Error::Read(ReadError::Length { got: 4, .. })),
        "{err}"
    );
    // Upper page 00h's identifier disagreeing with the lower page's.
    let mut capture = Capture::parse(&QSFP28.replace("0x0080:\t\t11", "0x0080:\t\t0d")).unwrap();
    assert!(matches!(
        eeprom::identify(&mut capture),
        Err(Error::Inconsistent(_))
    ));
}

// ---- the source ----

#[derive(Debug, Clone)]
enum Behaviour {
    /// Flat module bytes.
    Bytes(Vec<u8>),
    /// Every read fails with this errno.
    Errno(i32),
    /// Every read "succeeds" with zeros (mlx5 before d1c94bc5b90c).
    Zeros,
}

#[derive(Debug, Default)]
struct Fake {
    modules: Mutex<HashMap<String, Behaviour>>,
    reads: AtomicUsize,
}

impl Fake {
    fn set(&self, netdev: &str, b: Behaviour) {
        self.modules.lock().unwrap().insert(netdev.to_owned(), b);
    }
    fn reads(&self) -> usize {
        self.reads.swap(0, Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
struct FakeAccess(Arc<Fake>);

struct FakeReader(Arc<Fake>, String);

impl PageReader for FakeReader {
    fn read(&mut self, request: PageRequest) -> Result<Vec<u8>, ReadError> {
        self.0.reads.fetch_add(1, Ordering::SeqCst);
        let b = self.0.modules.lock().unwrap().get(&self.1).cloned();
        match b {
            Some(Behaviour::Bytes(bytes)) => Capture::from_raw(&bytes).read(request),
            Some(Behaviour::Errno(errno)) => Err(ReadError::Errno {
                request,
                errno,
                detail: std::io::Error::from_raw_os_error(errno).to_string(),
            }),
            None => Err(ReadError::Errno {
                request,
                errno: libc::EOPNOTSUPP,
                detail: "Operation not supported".into(),
            }),
            Some(Behaviour::Zeros) => Ok(vec![0; usize::from(request.length)]),
        }
    }
}

impl ModuleAccess for FakeAccess {
    fn open(&self, netdev: &str, _: Option<u32>) -> Result<Box<dyn PageReader>, ReadError> {
        Ok(Box::new(FakeReader(Arc::clone(&self.0), netdev.to_owned())))
    }
}

#[derive(Debug)]
struct FakeClock(Mutex<Instant>);

impl FakeClock {
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
    fn unix(&self) -> f64 {
        1_700_000_000.0
    }
}

struct Bench {
    _dir: tempfile::TempDir,
    fake: Arc<Fake>,
    clock: Arc<FakeClock>,
    source: Arc<TransceiverSource>,
}

fn bench(netdevs: &[&str], interval: Duration) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    for n in netdevs {
        std::fs::create_dir_all(dir.path().join("class/net").join(n)).unwrap();
    }
    let roots = Roots {
        sysfs: dir.path().to_path_buf(),
        procfs: Path::new("/proc").to_path_buf(),
    };
    let fake = Arc::new(Fake::default());
    let clock = Arc::new(FakeClock(Mutex::new(Instant::now())));
    let filter = NetdevFilter {
        include: Some(regex::Regex::new(".").unwrap()),
        exclude: None,
    };
    let source = Arc::new(TransceiverSource::new(
        &roots,
        Arc::new(RealFs),
        filter,
        interval,
        Arc::new(FakeAccess(Arc::clone(&fake))),
        Arc::clone(&clock) as Arc<dyn Clock>,
    ));
    Bench {
        _dir: dir,
        fake,
        clock,
        source,
    }
}

#[test]
fn diagnostics_are_read_at_most_every_interval() {
    let b = bench(&["eth0"], Duration::from_secs(60));
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    let r = b.source.read();
    assert_eq!(r.errors, vec![]);
    let m = &r.data.as_ref().unwrap().modules[0];
    assert!(m.up);
    assert_eq!(m.last_read, Some(1_700_000_000.0));
    assert_eq!(b.fake.reads(), 3, "identity (A0h, A2h) and diagnostics");
    // Within the interval: nothing read, the same values.
    b.clock.advance(Duration::from_secs(30));
    let again = b.source.read();
    assert_eq!(b.fake.reads(), 0);
    assert_eq!(again.data, r.data);
    // After it: the serial and the diagnostics, not the identity.
    b.clock.advance(Duration::from_secs(31));
    b.source.read();
    assert_eq!(b.fake.reads(), 2);
}

#[test]
fn an_interval_of_zero_reads_every_collection() {
    let b = bench(&["eth0"], Duration::ZERO);
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    b.source.read();
    b.fake.reads();
    b.source.read();
    b.source.read();
    assert_eq!(b.fake.reads(), 4);
    assert_eq!(parse_interval("0").unwrap(), Duration::ZERO);
    assert_eq!(parse_interval("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_interval("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_interval("90").unwrap(), Duration::from_secs(90));
    assert!(parse_interval("soon").is_err());
    assert!(parse_interval("5d").is_err());
}

#[test]
fn a_swapped_module_is_identified_again() {
    let b = bench(&["eth0"], Duration::ZERO);
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    b.source.read();
    b.fake.reads();
    let mut other = sfp_bytes();
    other[68..76].copy_from_slice(b"NEWSER01");
    other[20..33].copy_from_slice(b"OTHER VENDOR ");
    b.fake.set("eth0", Behaviour::Bytes(other));
    let r = b.source.read();
    let info = r.data.unwrap().modules[0].info.clone().unwrap();
    assert_eq!(info.identity.serial, "NEWSER01");
    assert_eq!(info.identity.vendor, "OTHER VENDOR");
    assert_eq!(b.fake.reads(), 4, "serial, then A0h, A2h and diagnostics");
}

#[test]
fn a_removed_module_is_down_without_identity_and_counts_an_error() {
    let b = bench(&["eth0", "eth1"], Duration::ZERO);
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    b.fake.set("eth1", Behaviour::Bytes(sfp_bytes()));
    b.source.read();
    b.fake.set("eth0", Behaviour::Errno(libc::EIO));
    let r = b.source.read();
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].device.as_deref(), Some("eth0"));
    assert_eq!(r.errors[0].errno, Some(libc::EIO));
    let modules = r.data.unwrap().modules;
    let (eth0, eth1) = (&modules[0], &modules[1]);
    assert!(!eth0.up);
    assert_eq!(
        (eth0.info.is_none(), eth0.diagnostics.is_none()),
        (true, true)
    );
    assert_eq!(eth0.read_errors, 1);
    assert_eq!(
        eth0.last_read,
        Some(1_700_000_000.0),
        "the last good read stays"
    );
    assert!(eth1.up, "the other netdev is untouched");
    // Plugged back in: identified afresh.
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    let back = b.source.read().data.unwrap().modules[0].clone();
    assert!(back.up && back.info.is_some());
    assert_eq!(back.read_errors, 1);
}

#[test]
fn stale_zero_data_reported_as_success_is_a_failed_read() {
    let b = bench(&["eth0"], Duration::ZERO);
    b.fake.set("eth0", Behaviour::Bytes(sfp_bytes()));
    b.source.read();
    b.fake.set("eth0", Behaviour::Zeros);
    let r = b.source.read();
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(!r.data.unwrap().modules[0].up);
    // A QSFP whose lower page turns to zeros fails the identifier check.
    let mut capture = Capture::parse(QSFP28).unwrap();
    let info = eeprom::identify(&mut capture).unwrap();
    struct Zeros;
    impl PageReader for Zeros {
        fn read(&mut self, r: PageRequest) -> Result<Vec<u8>, ReadError> {
            Ok(vec![0; usize::from(r.length)])
        }
    }
    assert!(matches!(
        eeprom::diagnostics(&mut Zeros, &info),
        Err(Error::Inconsistent(_))
    ));
}

#[test]
fn a_netdev_without_module_eeprom_support_is_no_series_and_no_error() {
    let b = bench(&["veth0"], Duration::from_secs(60));
    let r = b.source.read();
    assert_eq!(r.errors, vec![]);
    assert_eq!(r.data.unwrap().modules, vec![]);
    assert!(r.absent.is_some());
    // Remembered for the interval: not asked again at once.
    b.fake.reads();
    b.source.read();
    assert_eq!(b.fake.reads(), 0);
}

#[test]
fn without_cap_net_admin_the_source_is_absent_saying_why_and_no_module_is_down() {
    let b = bench(&["eth0"], Duration::from_secs(60));
    b.fake.set("eth0", Behaviour::Errno(libc::EPERM));
    let r = b.source.read();
    assert_eq!(r.errors, vec![]);
    assert_eq!(r.data.unwrap().modules, vec![]);
    let why = r.absent.expect("absent");
    assert!(why.contains("CAP_NET_ADMIN"), "{why}");
    // The same reason within the interval (the agent logs a reason once, until it changes),
    // and the module is not asked again.
    b.fake.reads();
    b.clock.advance(Duration::from_secs(10));
    assert_eq!(b.source.read().absent, Some(why));
    assert_eq!(b.fake.reads(), 0);
}

#[test]
fn a_bad_interval_stops_the_build_naming_the_option() {
    let roots = Roots::default();
    let mut options = crate::source::OptionValues::new();
    options.insert("interval", "often");
    let err = TransceiverSource::build(&crate::source::Build {
        roots: &roots,
        fs: Arc::new(RealFs),
        options: &options,
    })
    .unwrap_err();
    assert_eq!(err.option, "interval");
    let names: Vec<&str> = SPEC.options.iter().map(|o| o.name).collect();
    assert_eq!(names, ["device-include", "device-exclude", "interval"]);
}

/// The live kernel: a veth pair answers MODULE_EEPROM_GET with `EOPNOTSUPP`; the source
/// reports no module and no error.
#[test]
fn a_live_veth_has_no_module_and_no_error() {
    let id = std::process::id() % 100_000;
    let (a, peer) = (format!("rsxv{id}a"), format!("rsxv{id}b"));
    let made = std::process::Command::new("ip")
        .args(["link", "add", &a, "type", "veth", "peer", "name", &peer])
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        eprintln!("skipped: cannot create a veth pair here");
        return;
    }
    let roots = Roots {
        sysfs: "/sys".into(),
        procfs: "/proc".into(),
    };
    let filter = NetdevFilter {
        include: Some(regex::Regex::new(&format!("^{a}$")).unwrap()),
        exclude: None,
    };
    let source = Arc::new(
        TransceiverSource::new(
            &roots,
            Arc::new(RealFs),
            filter,
            DEFAULT_INTERVAL,
            Arc::new(NetlinkAccess),
            Arc::new(SystemClock),
        )
        .live_namespace_only(),
    );
    let report = source.read();
    let _ = std::process::Command::new("ip")
        .args(["link", "del", &a])
        .status();
    assert_eq!(report.errors, vec![]);
    assert_eq!(report.data.unwrap().modules, vec![]);
    assert!(report.absent.unwrap().contains("1 answered EOPNOTSUPP"));
}

mod never_panic {
    use proptest::prelude::*;

    use super::super::eeprom;
    use super::super::hexdump::Capture;

    proptest! {
        /// Any bytes, under any of the identifiers decoded: an answer or an error, never a
        /// panic (offsets computed from module bytes stay in range).
        #[test]
        fn decoders_survive_any_module_bytes(
            id in prop::sample::select(vec![0x03u8, 0x0C, 0x0D, 0x11, 0x18, 0x19, 0x1E]),
            mut bytes in prop::collection::vec(any::<u8>(), 0..700),
        ) {
            if let Some(first) = bytes.first_mut() {
                *first = id;
            }
            let mut capture = Capture::from_raw(&bytes);
            if let Ok(info) = eeprom::identify(&mut capture) {
                let _ = eeprom::diagnostics(&mut capture, &info);
                let _ = eeprom::serial(&mut capture, info.identity.spec);
            }
        }

        /// Any text: parsed or refused with its line.
        #[test]
        fn the_capture_parser_survives_any_text(text in "(0x[0-9a-f]{0,5}:?[ \t0-9a-fz]{0,60}\n|# page [0-9x]{0,4}\n|\\$ ethtool -m e page [0-9]{1,3} bank [0-9]{1,3}\n){0,20}") {
            let _ = Capture::parse(&text);
        }
    }
}
