//! Reads every value of the shipped fixtures back through nvml-wrapper 0.13, the crate the
//! `gpu` source uses, plus the raw calls it needs where the wrapper falls short (field
//! values with a per-link `scopeId`, fabric info, remapped rows, the remote device type).
//! Faults: a lost GPU, a hung GPU, `NotSupported`, a fixture replaced mid-run, XID events.

#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use std::ffi::{c_char, c_uint};
use std::time::{Duration, Instant};

use common::{Fake, shipped};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enum_wrappers::nv_link::IntDeviceType;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::event::EventData;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_v3_t, nvmlMemory_v2_t};

/// GPU addresses of the DGX H100 layout in `tests/fixtures/h100-cx7-ndr-ib/README.md`.
const H100_BUS_IDS: [&str; 8] = [
    "00000000:1B:00.0",
    "00000000:43:00.0",
    "00000000:52:00.0",
    "00000000:61:00.0",
    "00000000:9D:00.0",
    "00000000:C3:00.0",
    "00000000:D1:00.0",
    "00000000:DF:00.0",
];
const NVSWITCH_BUS_IDS: [&str; 4] = [
    "00000000:05:00.0",
    "00000000:06:00.0",
    "00000000:07:00.0",
    "00000000:08:00.0",
];

const FI_NVLINK_LINK_COUNT: u32 = 91;
const FI_THROUGHPUT_DATA_TX: u32 = 138;
const FI_THROUGHPUT_DATA_RX: u32 = 139;
const FI_THROUGHPUT_RAW_TX: u32 = 140;
const FI_REMAPPED_COR: u32 = 142;
const FI_REMAPPED_UNC: u32 = 143;
const FI_REMAPPED_PENDING: u32 = 144;
const FI_REMOTE_NVLINK_ID: u32 = 146;
const FI_NVSWITCH_CONNECTED_LINK_COUNT: u32 = 147;
const FI_DL_REPLAY: u32 = 161;
const FI_DL_RECOVERY: u32 = 162;
const FI_DL_CRC: u32 = 163;
const FI_GET_SPEED: u32 = 164;
const FI_GET_STATE: u32 = 165;
const FI_CRC_FLIT_TOTAL: u32 = 38;
const FI_REPLAY_L3: u32 = 49;

const SUCCESS: u32 = 0;
const INVALID_ARGUMENT: u32 = 2;
const NOT_SUPPORTED: u32 = 3;
const GPU_IS_LOST: u32 = 15;
const VERSION_MISMATCH: u32 = 25;

/// One raw field answer: (nvmlReturn, value as u64 when it is an integer).
type Raw = (u32, u64);

/// [`common::raw_fields`] without the value types.
fn raw_fields(nvml: &Nvml, device: &Device, request: &[(u32, u32)]) -> (u32, Vec<Raw>) {
    let (rc, out) = common::raw_fields(nvml, device, request);
    (rc, out.into_iter().map(|(r, _, v)| (r, v)).collect())
}

fn field(nvml: &Nvml, device: &Device, id: u32, scope: u32) -> Raw {
    raw_fields(nvml, device, &[(id, scope)]).1[0]
}

fn fabric_v3(nvml: &Nvml, device: &Device) -> (u32, nvmlGpuFabricInfo_v3_t) {
    // SAFETY: plain old data.
    let mut info: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
    info.version = (size_of::<nvmlGpuFabricInfo_v3_t>() as u32) | (3 << 24);
    // SAFETY: a versioned v3 struct, handle from this Nvml.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetGpuFabricInfoV(device.handle(), &mut info)
    };
    (rc, info)
}

fn remote_type_raw(nvml: &Nvml, device: &Device, link: u32) -> (u32, u32) {
    let mut kind = 99;
    // SAFETY: one writable out value, handle from this Nvml.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetNvLinkRemoteDeviceType(device.handle(), link, &mut kind)
    };
    (rc, kind)
}

#[test]
fn h100_node_reads_back_through_the_safe_api() {
    let fake = Fake::shipped("h100-sxm-8gpu.json");
    let fixture = shipped("h100-sxm-8gpu.json");
    let nvml = fake.nvml();

    assert_eq!(nvml.sys_driver_version().unwrap(), "550.127.05");
    assert_eq!(nvml.sys_nvml_version().unwrap(), "12.550.127.05");
    assert_eq!(nvml.sys_cuda_driver_version().unwrap(), 12040);
    assert_eq!(nvml.device_count().unwrap(), 8);

    for (i, want) in fixture.gpus.iter().enumerate() {
        let d = nvml.device_by_index(i as u32).unwrap();
        assert_eq!(d.index().unwrap(), i as u32);
        assert_eq!(d.name().unwrap(), "NVIDIA H100 80GB HBM3");
        assert_eq!(d.uuid().unwrap(), want.uuid);
        assert_eq!(d.serial().unwrap(), want.serial.clone().unwrap());
        assert_eq!(d.minor_number().unwrap(), i as u32);

        let pci = d.pci_info().unwrap();
        assert_eq!(pci.bus_id, H100_BUS_IDS[i]);
        assert_eq!(pci.domain, 0);
        assert_eq!(
            pci.bus,
            u32::from_str_radix(&H100_BUS_IDS[i][9..11], 16).unwrap()
        );
        assert_eq!(pci.device, 0);
        assert_eq!(pci.pci_device_id, 0x2330_10de);
        assert_eq!(pci.pci_sub_system_id, Some(0x16c1_10de));

        let node = if i < 4 { 0 } else { 1 };
        assert_eq!(d.numa_node_id().unwrap(), node);
        let mask = d.cpu_affinity(4).unwrap();
        if node == 0 {
            // 0-55,112-167
            assert_eq!(mask[0], u64::MAX >> 8);
            assert_eq!(mask[1], 0xffff_u64 << 48);
            assert_eq!(mask[2], (1 << 40) - 1);
            assert_eq!(mask[3], 0);
        } else {
            assert_eq!(mask[0], 0xff_u64 << 56);
        }
        assert!(d.is_in_persistent_mode().unwrap());

        let u = d.utilization_rates().unwrap();
        let wu = want.utilization.as_ref().unwrap();
        assert_eq!((u.gpu, u.memory), (wu.gpu, wu.memory));
        let m = d.memory_info().unwrap();
        let wm = want.memory.as_ref().unwrap();
        assert_eq!(m.total, 85_520_809_984);
        assert_eq!(m.reserved, wm.reserved);
        assert_eq!(m.used, wm.used);
        assert_eq!(m.free, m.total - m.reserved - m.used);

        assert_eq!(
            d.temperature(TemperatureSensor::Gpu).unwrap(),
            want.temperature_c.unwrap()
        );
        assert_eq!(d.power_usage().unwrap(), want.power_usage_mw.unwrap());
        assert_eq!(d.enforced_power_limit().unwrap(), 700_000);
        assert_eq!(d.power_management_limit().unwrap(), 700_000);
        assert_eq!(
            d.total_energy_consumption().unwrap(),
            want.energy_mj.unwrap()
        );

        assert_eq!(d.clock_info(Clock::SM).unwrap(), 1980);
        assert_eq!(d.clock_info(Clock::Memory).unwrap(), 2619);
        assert_eq!(d.clock_info(Clock::Graphics).unwrap(), 1980);
        assert_eq!(d.max_clock_info(Clock::SM).unwrap(), 1980);
        assert_eq!(d.max_clock_info(Clock::Memory).unwrap(), 2619);
        let reasons = d.current_throttle_reasons().unwrap();
        if i == 5 {
            assert_eq!(reasons, ThrottleReasons::SW_POWER_CAP);
        } else {
            assert!(reasons.is_empty());
        }
        assert_eq!(d.supported_throttle_reasons().unwrap().bits(), 0x1ff);

        let ecc = d.is_ecc_enabled().unwrap();
        assert!(ecc.currently_enabled && ecc.pending_enabled);
        let we = want.ecc.as_ref().unwrap();
        for (error, counter, v) in [
            (
                MemoryError::Corrected,
                EccCounter::Volatile,
                we.volatile.corrected,
            ),
            (
                MemoryError::Uncorrected,
                EccCounter::Volatile,
                we.volatile.uncorrected,
            ),
            (
                MemoryError::Corrected,
                EccCounter::Aggregate,
                we.aggregate.corrected,
            ),
            (
                MemoryError::Uncorrected,
                EccCounter::Aggregate,
                we.aggregate.uncorrected,
            ),
        ] {
            assert_eq!(d.total_ecc_errors(error, counter).unwrap(), v);
        }
        // Hopper remaps rows instead of retiring pages.
        assert!(matches!(
            d.retired_pages(RetirementCause::DoubleBitEccError),
            Err(NvmlError::NotSupported)
        ));

        assert_eq!(d.current_pcie_link_gen().unwrap(), 5);
        assert_eq!(d.current_pcie_link_width().unwrap(), 16);
        assert_eq!(d.max_pcie_link_gen().unwrap(), 5);
        assert_eq!(d.max_pcie_link_width().unwrap(), 16);
        assert_eq!(d.pcie_link_speed().unwrap(), 32_000);
        assert_eq!(d.pcie_replay_counter().unwrap(), 0);
        let wp = want.pcie.as_ref().unwrap();
        assert_eq!(
            d.pcie_throughput(PcieUtilCounter::Send).unwrap(),
            wp.tx_kbps
        );
        assert_eq!(
            d.pcie_throughput(PcieUtilCounter::Receive).unwrap(),
            wp.rx_kbps
        );
    }

    // Handle lookups by UUID and by PCI bus id (either domain width, any case).
    let by_uuid = nvml.device_by_uuid(fixture.gpus[3].uuid.as_str()).unwrap();
    assert_eq!(by_uuid.index().unwrap(), 3);
    let by_bus = nvml.device_by_pci_bus_id("0000:c3:00.0").unwrap();
    assert_eq!(by_bus.index().unwrap(), 5);
    assert!(matches!(
        nvml.device_by_pci_bus_id("0000:aa:00.0"),
        Err(NvmlError::NotFound)
    ));
}

#[test]
fn h100_nvlinks_reach_the_nvswitches() {
    let fake = Fake::shipped("h100-sxm-8gpu.json");
    let fixture = shipped("h100-sxm-8gpu.json");
    let nvml = fake.nvml();

    for (i, want) in fixture.gpus.iter().enumerate() {
        let d = nvml.device_by_index(i as u32).unwrap();
        assert_eq!(field(&nvml, &d, FI_NVLINK_LINK_COUNT, 0), (SUCCESS, 18));
        assert_eq!(
            field(&nvml, &d, FI_NVSWITCH_CONNECTED_LINK_COUNT, 0),
            (SUCCESS, 18)
        );
        let mut per_switch = [0; 4];
        let mut tx_sum = 0;
        for l in 0..18u32 {
            let link = d.link_wrapper_for(l);
            let w = &want.nvlinks[l as usize];
            assert!(link.is_active().unwrap());
            assert_eq!(link.version().unwrap(), 4);
            let remote = link.remote_pci_info().unwrap();
            let sw = NVSWITCH_BUS_IDS
                .iter()
                .position(|b| *b == remote.bus_id)
                .expect("every link ends at an NVSwitch");
            per_switch[sw] += 1;
            assert_eq!(remote.pci_device_id, 0x22a3_10de);
            assert_eq!(remote_type_raw(&nvml, &d, l), (SUCCESS, 2));
            for c in [
                ErrorCounter::DlReplay,
                ErrorCounter::DlRecovery,
                ErrorCounter::DlCrcFlit,
                ErrorCounter::DlCrcData,
            ] {
                assert_eq!(link.error_counter(c).unwrap(), 0);
            }
            assert_eq!(
                field(&nvml, &d, FI_THROUGHPUT_DATA_TX, l),
                (SUCCESS, w.tx_kib)
            );
            assert_eq!(
                field(&nvml, &d, FI_THROUGHPUT_DATA_RX, l),
                (SUCCESS, w.rx_kib)
            );
            assert_eq!(
                field(&nvml, &d, FI_THROUGHPUT_RAW_TX, l),
                (SUCCESS, w.tx_kib)
            );
            assert_eq!(field(&nvml, &d, FI_GET_STATE, l), (SUCCESS, 1));
            assert_eq!(field(&nvml, &d, FI_GET_SPEED, l), (SUCCESS, 26_562));
            let remote_link = w.remote.as_ref().unwrap().link.unwrap();
            assert_eq!(
                field(&nvml, &d, FI_REMOTE_NVLINK_ID, l),
                (SUCCESS, u64::from(remote_link))
            );
            tx_sum += w.tx_kib;
        }
        // 5 + 4 + 4 + 5 links to the four NVSwitch 3 chips.
        assert_eq!(per_switch, [5, 4, 4, 5]);
        // scopeId UINT_MAX is the sum over links; a link past the last is an error.
        assert_eq!(
            field(&nvml, &d, FI_THROUGHPUT_DATA_TX, u32::MAX),
            (SUCCESS, tx_sum)
        );
        assert_eq!(
            field(&nvml, &d, FI_THROUGHPUT_DATA_TX, 18).0,
            INVALID_ARGUMENT
        );
        assert_eq!(field(&nvml, &d, 9999, 0).0, NOT_SUPPORTED);
        // Row remapping through fields 142-145.
        let remapped = want.remapped_rows.as_ref().unwrap();
        assert_eq!(
            field(&nvml, &d, FI_REMAPPED_COR, 0),
            (SUCCESS, u64::from(remapped.correctable))
        );
        assert_eq!(field(&nvml, &d, FI_REMAPPED_UNC, 0), (SUCCESS, 0));
        assert_eq!(field(&nvml, &d, FI_REMAPPED_PENDING, 0), (SUCCESS, 0));

        let (rc, fabric) = fabric_v3(&nvml, &d);
        assert_eq!(rc, SUCCESS);
        assert_eq!(fabric.state, 3);
        assert_eq!(fabric.status, 0);
        assert_eq!(fabric.healthMask, 0xaa);
        assert_eq!(fabric.healthSummary, 1);
    }

    // The safe field API sends scope 0 only: link 0's counter, not the sum.
    let d = nvml.device_by_index(0).unwrap();
    let samples = d
        .field_values_for(&[FieldId(FI_THROUGHPUT_DATA_TX)])
        .unwrap();
    let link0 = fixture.gpus[0].nvlinks[0].tx_kib;
    assert!(matches!(samples[0].as_ref().unwrap().value, Ok(SampleValue::U64(v)) if v == link0));
}

#[test]
fn remote_device_type_is_unknown_through_the_wrapper() {
    // nvml-wrapper 0.13 passes a temporary to the C call and returns its own untouched
    // value: whatever the library says, `remote_device_type` reads Unknown. Use the raw
    // symbol (as `remote_type_raw` does). If this starts failing, the wrapper was fixed.
    let fake = Fake::shipped("h100-sxm-8gpu.json");
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(remote_type_raw(&nvml, &d, 0), (SUCCESS, 2));
    assert!(matches!(
        d.link_wrapper_for(0).remote_device_type(0),
        Ok(IntDeviceType::Unknown)
    ));
}

#[test]
fn fabric_info_versions() {
    let fake = Fake::shipped("h100-sxm-8gpu.json");
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();

    // v2 (no health summary) writes only its own 36 bytes.
    #[repr(C)]
    struct Guarded {
        info: nvmlGpuFabricInfo_v2_t,
        canary: u32,
    }
    // SAFETY: plain old data.
    let mut g: Guarded = unsafe { std::mem::zeroed() };
    g.info.version = (size_of::<nvmlGpuFabricInfo_v2_t>() as u32) | (2 << 24);
    g.canary = 0xdead_beef;
    // SAFETY: the v2 struct is at the start of `g`; the library reads `version` to learn
    // its size. The cast matches how a C caller passes a v2 struct.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetGpuFabricInfoV(d.handle(), std::ptr::from_mut(&mut g.info).cast())
    };
    assert_eq!(rc, SUCCESS);
    assert_eq!(g.info.state, 3);
    assert_eq!(g.info.healthMask, 0xaa);
    assert_eq!(g.canary, 0xdead_beef);

    // An unknown version is refused.
    // SAFETY: plain old data.
    let mut bad: nvmlGpuFabricInfo_v3_t = unsafe { std::mem::zeroed() };
    bad.version = 7;
    // SAFETY: as above.
    let rc = unsafe { nvml.lib().nvmlDeviceGetGpuFabricInfoV(d.handle(), &mut bad) };
    assert_eq!(rc, VERSION_MISMATCH);

    // So is nvmlMemory_v2_t without its version.
    // SAFETY: plain old data.
    let mut mem: nvmlMemory_v2_t = unsafe { std::mem::zeroed() };
    // SAFETY: one writable struct.
    let rc = unsafe { nvml.lib().nvmlDeviceGetMemoryInfo_v2(d.handle(), &mut mem) };
    assert_eq!(rc, VERSION_MISMATCH);
}

#[test]
fn a100_bridged_pairs_point_at_each_other() {
    let fake = Fake::shipped("a100-pcie-4gpu-bridged.json");
    let nvml = fake.nvml();
    assert_eq!(nvml.sys_driver_version().unwrap(), "535.183.01");
    assert_eq!(nvml.device_count().unwrap(), 4);
    let bus: Vec<String> = (0..4)
        .map(|i| nvml.device_by_index(i).unwrap().pci_info().unwrap().bus_id)
        .collect();
    for i in 0..4u32 {
        let d = nvml.device_by_index(i).unwrap();
        assert_eq!(d.name().unwrap(), "NVIDIA A100 80GB PCIe");
        assert_eq!(d.current_pcie_link_gen().unwrap(), 4);
        assert_eq!(field(&nvml, &d, FI_NVLINK_LINK_COUNT, 0), (SUCCESS, 12));
        assert_eq!(
            field(&nvml, &d, FI_NVSWITCH_CONNECTED_LINK_COUNT, 0),
            (SUCCESS, 0)
        );
        let peer = (i ^ 1) as usize;
        for l in 0..12 {
            let link = d.link_wrapper_for(l);
            assert!(link.is_active().unwrap());
            assert_eq!(link.version().unwrap(), 3);
            assert_eq!(link.remote_pci_info().unwrap().bus_id, bus[peer]);
            assert_eq!(remote_type_raw(&nvml, &d, l), (SUCCESS, 0));
        }
        // Link 12 does not exist on A100.
        assert!(matches!(
            d.link_wrapper_for(12).is_active(),
            Err(NvmlError::InvalidArg)
        ));
        // No NVSwitch: no fabric.
        assert_eq!(fabric_v3(&nvml, &d).0, NOT_SUPPORTED);
    }
}

#[test]
fn v100_without_nvlink_answers_not_supported() {
    let fake = Fake::shipped("v100-pcie-no-nvlink.json");
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert_eq!(d.name().unwrap(), "Tesla V100-PCIE-32GB");
    assert!(!d.is_in_persistent_mode().unwrap());
    assert!(matches!(
        d.link_wrapper_for(0).is_active(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        d.link_wrapper_for(0).error_counter(ErrorCounter::DlReplay),
        Err(NvmlError::NotSupported)
    ));
    assert_eq!(field(&nvml, &d, FI_NVLINK_LINK_COUNT, 0).0, NOT_SUPPORTED);
    assert_eq!(field(&nvml, &d, FI_THROUGHPUT_DATA_TX, 0).0, NOT_SUPPORTED);
    assert_eq!(field(&nvml, &d, FI_REMAPPED_COR, 0).0, NOT_SUPPORTED);
    assert_eq!(fabric_v3(&nvml, &d).0, NOT_SUPPORTED);
    let mut rows = [0 as c_uint; 4];
    let [a, b, c, e] = rows.each_mut();
    // SAFETY: four writable unsigned ints.
    let rc = unsafe { nvml.lib().nvmlDeviceGetRemappedRows(d.handle(), a, b, c, e) };
    assert_eq!(rc, NOT_SUPPORTED);

    // Volta retires pages.
    let single = d
        .retired_pages(RetirementCause::MultipleSingleBitEccErrors)
        .unwrap();
    assert_eq!(single.len(), 2);
    assert_eq!(single[0].address, 0x7f3a_2000);
    assert_eq!(single[0].timestamp, 1_733_133_761_000_000);
    let double = d.retired_pages(RetirementCause::DoubleBitEccError).unwrap();
    assert_eq!(double.len(), 1);
    assert_eq!(double[0].address, 0x1_c004_4000);
    assert!(!d.are_pages_pending_retired().unwrap());
    assert_eq!(
        d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)
            .unwrap(),
        1
    );
    assert_eq!(d.current_pcie_link_gen().unwrap(), 3);
    assert_eq!(
        d.current_throttle_reasons().unwrap(),
        ThrottleReasons::GPU_IDLE
    );
}

#[test]
fn not_supported_and_errors_override_values() {
    use nvidia_ml_fake::fixture::Feature;
    let mut fixture = shipped("h100-sxm-8gpu.json");
    fixture.gpus[0].not_supported = vec![Feature::PcieThroughput, Feature::Nvlink];
    fixture.gpus[0].errors.insert(Feature::PowerUsage, 4);
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    assert!(matches!(
        d.pcie_throughput(PcieUtilCounter::Send),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(
        d.link_wrapper_for(0).version(),
        Err(NvmlError::NotSupported)
    ));
    assert!(matches!(d.power_usage(), Err(NvmlError::NoPermission)));
    // Everything else still answers.
    assert_eq!(d.current_pcie_link_gen().unwrap(), 5);
    assert!(nvml.device_by_index(1).unwrap().power_usage().is_ok());
}

#[test]
fn lost_gpu_answers_gpu_is_lost_and_hides_no_other() {
    let mut fixture = shipped("h100-sxm-8gpu-faults.json");
    fixture.gpus[6].hang_ms = 0;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    assert_eq!(nvml.device_count().unwrap(), 8);
    assert!(matches!(nvml.device_by_index(5), Err(NvmlError::GpuLost)));
    assert!(matches!(
        nvml.device_by_uuid(fixture.gpus[5].uuid.as_str()),
        Err(NvmlError::GpuLost)
    ));
    for i in [0, 1, 2, 3, 4, 6, 7] {
        let d = nvml.device_by_index(i).unwrap();
        assert!(d.temperature(TemperatureSensor::Gpu).is_ok());
    }
}

#[test]
fn faults_fixture_values() {
    let mut fixture = shipped("h100-sxm-8gpu-faults.json");
    fixture.gpus[6].hang_ms = 0;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();

    // GPU1 link 7 inactive.
    let d1 = nvml.device_by_index(1).unwrap();
    assert!(!d1.link_wrapper_for(7).is_active().unwrap());
    assert!(d1.link_wrapper_for(6).is_active().unwrap());
    assert_eq!(field(&nvml, &d1, FI_GET_STATE, 7), (SUCCESS, 0));
    assert_eq!(
        fabric_v3(&nvml, &d1).1.healthMask & 0x3,
        1,
        "DEGRADED_BW true"
    );

    // GPU2 link 3 errors, per link and as totals.
    let d2 = nvml.device_by_index(2).unwrap();
    let l3 = d2.link_wrapper_for(3);
    assert_eq!(l3.error_counter(ErrorCounter::DlCrcFlit).unwrap(), 1520);
    assert_eq!(l3.error_counter(ErrorCounter::DlCrcData).unwrap(), 37);
    assert_eq!(l3.error_counter(ErrorCounter::DlReplay).unwrap(), 412);
    assert_eq!(l3.error_counter(ErrorCounter::DlRecovery).unwrap(), 2);
    let (rc, v) = raw_fields(
        &nvml,
        &d2,
        &[
            (FI_DL_REPLAY, 3),
            (FI_DL_RECOVERY, 3),
            (FI_DL_CRC, 3),
            (FI_CRC_FLIT_TOTAL, 0),
            (FI_REPLAY_L3, 0),
        ],
    );
    assert_eq!(rc, SUCCESS);
    assert_eq!(
        v,
        vec![(0, 412), (0, 2), (0, 1520), (0, 1520 + 12), (0, 412)]
    );

    // GPU3 Gen4 x8 in a Gen5 x16 slot.
    let d3 = nvml.device_by_index(3).unwrap();
    assert_eq!(d3.current_pcie_link_gen().unwrap(), 4);
    assert_eq!(d3.current_pcie_link_width().unwrap(), 8);
    assert_eq!(d3.max_pcie_link_gen().unwrap(), 5);
    assert_eq!(d3.max_pcie_link_width().unwrap(), 16);
    assert_eq!(d3.pcie_replay_counter().unwrap(), 118);

    // GPU4 DBE: ECC and remapped rows.
    let d4 = nvml.device_by_index(4).unwrap();
    assert_eq!(
        d4.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .unwrap(),
        1
    );
    let mut rows = [0 as c_uint; 4];
    let [a, b, c, e] = rows.each_mut();
    // SAFETY: four writable unsigned ints.
    let rc = unsafe {
        nvml.lib()
            .nvmlDeviceGetRemappedRows(d4.handle(), a, b, c, e)
    };
    assert_eq!(rc, SUCCESS);
    assert_eq!(rows, [0, 1, 1, 0]);
}

#[test]
fn hung_gpu_blocks_only_its_own_calls() {
    let mut fixture = shipped("h100-sxm-8gpu-faults.json");
    assert_eq!(
        fixture.gpus[6].hang_ms, 15_000,
        "the shipped fixture outlasts a scrape"
    );
    fixture.gpus[6].hang_ms = 300;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let healthy = nvml.device_by_index(0).unwrap();

    std::thread::scope(|s| {
        let hung = s.spawn(|| {
            let start = Instant::now();
            let d = nvml.device_by_index(6).unwrap();
            let lookup = start.elapsed();
            let start = Instant::now();
            let name = d.name().unwrap();
            (lookup, start.elapsed(), name)
        });
        std::thread::sleep(Duration::from_millis(30));
        // While GPU6's call sleeps, GPU0 answers at once.
        let start = Instant::now();
        assert_eq!(healthy.name().unwrap(), "NVIDIA H100 80GB HBM3");
        assert!(healthy.power_usage().is_ok());
        assert!(
            start.elapsed() < Duration::from_millis(150),
            "{:?}",
            start.elapsed()
        );
        let (lookup, call, name) = hung.join().unwrap();
        assert!(lookup >= Duration::from_millis(250), "{lookup:?}");
        assert!(call >= Duration::from_millis(250), "{call:?}");
        assert_eq!(name, "NVIDIA H100 80GB HBM3");
    });
}

#[test]
fn fixture_is_reread_when_it_changes() {
    let mut faults = shipped("h100-sxm-8gpu-faults.json");
    faults.gpus[6].hang_ms = 0;
    let mut later = shipped("h100-sxm-8gpu-faults-later.json");
    later.gpus[6].hang_ms = 0;
    let fake = Fake::new(&faults);
    let nvml = fake.nvml();
    let d2 = nvml.device_by_index(2).unwrap();
    let d3 = nvml.device_by_index(3).unwrap();
    let d0 = nvml.device_by_index(0).unwrap();
    let link = d2.link_wrapper_for(3);
    assert_eq!(link.error_counter(ErrorCounter::DlCrcFlit).unwrap(), 1520);
    assert_eq!(link.error_counter(ErrorCounter::DlReplay).unwrap(), 412);
    assert_eq!(d3.pcie_replay_counter().unwrap(), 118);

    // Errors climb.
    fake.replace(&later);
    assert_eq!(link.error_counter(ErrorCounter::DlCrcFlit).unwrap(), 9874);
    assert_eq!(link.error_counter(ErrorCounter::DlReplay).unwrap(), 2930);
    assert_eq!(d3.pcie_replay_counter().unwrap(), 240);

    // A GPU falls off the bus mid-run: the handle taken before now answers GpuLost.
    later.gpus[0].lost = true;
    fake.replace(&later);
    assert!(matches!(d0.name(), Err(NvmlError::GpuLost)));
    assert!(d3.name().is_ok());

    // A half-written file is ignored: the last good fixture stays in force.
    std::fs::write(&fake.fixture_path, "{\"driver_version\": ").unwrap();
    assert!(matches!(d0.name(), Err(NvmlError::GpuLost)));
    assert_eq!(d3.pcie_replay_counter().unwrap(), 240);

    // And it recovers when the file is good again.
    fake.replace(&faults);
    assert!(d0.name().is_ok());
}

fn xid(event: &EventData<'_>) -> u64 {
    match event.event_data {
        Some(nvml_wrapper::enums::event::XidError::Value(v)) => v,
        ref other => panic!("not an XID: {other:?}"),
    }
}

#[test]
fn xid_events_are_delivered_once_each() {
    let healthy = shipped("h100-sxm-8gpu.json");
    let mut faults = shipped("h100-sxm-8gpu-faults.json");
    faults.gpus[6].hang_ms = 0;
    let fake = Fake::new(&healthy);
    let nvml = fake.nvml();
    let devices: Vec<Device<'_>> = (0..8).map(|i| nvml.device_by_index(i).unwrap()).collect();
    let supported = devices[0].supported_event_types().unwrap();
    assert!(supported.contains(EventTypes::CRITICAL_XID_ERROR));

    let mut set = nvml.create_event_set().unwrap();
    for d in &devices {
        set = d
            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
            .unwrap();
    }
    assert!(matches!(set.wait(0), Err(NvmlError::Timeout)));

    // XID 48 on GPU4 and XID 79 on GPU5 arrive, each once.
    fake.replace(&faults);
    let first = set.wait(1000).unwrap();
    assert!(first.event_type.contains(EventTypes::CRITICAL_XID_ERROR));
    assert_eq!(xid(&first), 48);
    // SAFETY: comparing raw handles only.
    unsafe { assert_eq!(first.device.handle(), devices[4].handle()) };
    assert_eq!(first.device.index().unwrap(), 4);
    let second = set.wait(1000).unwrap();
    assert_eq!(xid(&second), 79);
    // SAFETY: comparing raw handles only.
    unsafe { assert_eq!(second.device.handle(), devices[5].handle()) };
    // The event's device is the lost GPU.
    assert!(matches!(second.device.index(), Err(NvmlError::GpuLost)));

    let start = Instant::now();
    assert!(matches!(set.wait(100), Err(NvmlError::Timeout)));
    assert!(start.elapsed() >= Duration::from_millis(90));

    // A re-read with the same events delivers nothing new; an appended one arrives.
    faults.gpus[4].xid_events.push(94);
    fake.replace(&faults);
    assert_eq!(xid(&set.wait(1000).unwrap()), 94);
    assert!(matches!(set.wait(20), Err(NvmlError::Timeout)));

    // A second set sees every event of the fixture again.
    let mut other = nvml.create_event_set().unwrap();
    other = devices[4]
        .register_events(EventTypes::CRITICAL_XID_ERROR, other)
        .unwrap();
    assert_eq!(xid(&other.wait(100).unwrap()), 48);
    assert_eq!(xid(&other.wait(100).unwrap()), 94);
    other.release_events().unwrap();
}

#[test]
fn registering_a_lost_gpu_frees_the_whole_event_set() {
    // nvml-wrapper's `register_events` takes the set by value and, on any error,
    // releases it: one lost GPU costs the events of every GPU registered before it.
    // The gpu source should use one event set per GPU.
    let fixture = shipped("h100-sxm-8gpu.json");
    let mut lost = fixture.clone();
    lost.gpus[1].lost = true;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let d0 = nvml.device_by_index(0).unwrap();
    let d1 = nvml.device_by_index(1).unwrap();
    let set = nvml.create_event_set().unwrap();
    let set = d0
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .unwrap();
    fake.replace(&lost);
    let Err(err) = d1.register_events(EventTypes::CRITICAL_XID_ERROR, set) else {
        panic!("a lost GPU refuses registration");
    };
    assert!(matches!(err.error, NvmlError::GpuLost));
    // Unsupported event types are refused too.
    let set = nvml.create_event_set().unwrap();
    let Err(err) = d0.register_events(EventTypes::MIG_CONFIG_CHANGE, set) else {
        panic!("MIG events are not offered");
    };
    assert!(matches!(err.error, NvmlError::NotSupported));
}

#[test]
fn null_pointers_and_foreign_handles_are_invalid_arguments() {
    let fake = Fake::shipped("h100-sxm-8gpu.json");
    let nvml = fake.nvml();
    let d = nvml.device_by_index(0).unwrap();
    let lib = nvml.lib();
    // SAFETY: the library must reject, not dereference, every one of these pointers.
    unsafe {
        let null_u = std::ptr::null_mut::<c_uint>();
        assert_eq!(
            lib.nvmlDeviceGetPowerUsage(d.handle(), null_u),
            INVALID_ARGUMENT
        );
        assert_eq!(lib.nvmlDeviceGetCount_v2(null_u), INVALID_ARGUMENT);
        assert_eq!(
            lib.nvmlDeviceGetName(d.handle(), std::ptr::null_mut::<c_char>(), 96),
            INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetHandleByUUID(std::ptr::null(), std::ptr::null_mut()),
            INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlDeviceGetFieldValues(d.handle(), 3, std::ptr::null_mut()),
            INVALID_ARGUMENT
        );
        assert_eq!(
            lib.nvmlEventSetWait_v2(std::ptr::null_mut(), std::ptr::null_mut(), 0),
            INVALID_ARGUMENT
        );
        let mut power = 0;
        assert_eq!(
            lib.nvmlDeviceGetPowerUsage(std::ptr::null_mut(), &mut power),
            INVALID_ARGUMENT
        );
        // A pointer that is no handle of this library.
        let mut x = 0u64;
        let foreign = std::ptr::from_mut(&mut x).cast();
        assert_eq!(
            lib.nvmlDeviceGetPowerUsage(foreign, &mut power),
            INVALID_ARGUMENT
        );
        assert_eq!(lib.nvmlEventSetFree(foreign.cast()), INVALID_ARGUMENT);
        // Too small a buffer.
        let mut name = [0 as c_char; 8];
        assert_eq!(lib.nvmlDeviceGetName(d.handle(), name.as_mut_ptr(), 8), 7);
        // nvmlErrorString is defined for every code.
        let msg = std::ffi::CStr::from_ptr(lib.nvmlErrorString(GPU_IS_LOST));
        assert_eq!(msg.to_str().unwrap(), "GPU is lost");
    }
}

#[test]
fn init_error_and_calls_before_init() {
    let mut fixture = shipped("v100-pcie-no-nvlink.json");
    fixture.init_error = Some(9);
    let fake = Fake::new(&fixture);
    let Err(err) = Nvml::builder().lib_path(fake.lib_path.as_os_str()).init() else {
        panic!("init fails");
    };
    assert!(matches!(err, NvmlError::DriverNotLoaded), "{err:?}");

    // The same copy, loaded but never initialised, answers Uninitialized.
    // SAFETY: our own test library.
    let lib = unsafe { nvml_wrapper_sys::bindings::NvmlLib::new(&fake.lib_path) }.unwrap();
    let mut count = 0;
    // SAFETY: one writable unsigned int.
    assert_eq!(unsafe { lib.nvmlDeviceGetCount_v2(&mut count) }, 1);
    // SAFETY: no arguments.
    assert_eq!(unsafe { lib.nvmlShutdown() }, 1);
}

#[test]
fn every_listed_symbol_is_exported() {
    let path = nvidia_ml_fake::library_path().unwrap();
    // SAFETY: our own test library.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    for name in nvidia_ml_fake::EXPORTED_SYMBOLS {
        let symbol = format!("{name}\0");
        // SAFETY: only resolving, not calling.
        let found = unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_bytes()) };
        assert!(found.is_ok(), "{name} is not exported");
    }
}
