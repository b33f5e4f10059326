//! Plain data the `gpu` source reads from NVML. Every value a GPU may not support is an
//! `Option`.

/// Everything the `gpu` source read in one collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion` as `major.minor`.
    pub cuda_version: Option<String>,
    /// GPUs by NVML index.
    pub gpus: Vec<Gpu>,
}

/// How reading a GPU went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuState {
    /// Read.
    #[default]
    Ok,
    /// NVML says the GPU fell off the bus (`NVML_ERROR_GPU_IS_LOST`).
    Lost,
    /// Its worker did not answer before the deadline (a call hangs inside the driver).
    Timeout,
    /// The device handle could not be obtained.
    Error,
}

impl GpuState {
    /// Every state, for state-set export.
    pub const ALL: [GpuState; 4] = [
        GpuState::Ok,
        GpuState::Lost,
        GpuState::Timeout,
        GpuState::Error,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuState::Ok => "ok",
            GpuState::Lost => "lost",
            GpuState::Timeout => "timeout",
            GpuState::Error => "error",
        }
    }
}

/// What does not change while the driver is loaded (read once per GPU, again every
/// [`super::STATIC_REFRESH`] and when a GPU that was lost, timed out or failed answers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// `GPU-...`.
    pub uuid: Option<String>,
    /// `NVIDIA H100 80GB HBM3`.
    pub name: Option<String>,
    /// Board serial.
    pub serial: Option<String>,
    /// PCI address in sysfs form (`0000:18:00.0`).
    pub pci_address: Option<String>,
    /// NUMA node.
    pub numa_node: Option<u32>,
    /// The minor number of its device node (`/dev/nvidiaN`).
    pub minor_number: Option<u32>,
    /// `nvmlDeviceGetModuleId`: the GPU module on its baseboard or in its node (1 on a
    /// real H200; 0 on products without a baseboard).
    pub module_id: Option<u32>,
    /// Where the GPU sits in its rack (`nvmlDeviceGetPlatformInfo`, Blackwell and later).
    pub platform: Option<Platform>,
}

/// Where a GPU sits in its rack, from `nvmlDeviceGetPlatformInfo` (`nvmlPlatformInfo_v2_t`,
/// or `_v1_t` on a driver that offers only that; the two are the same bytes under different
/// names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Platform {
    /// The struct version the driver answered: 2 or 1.
    pub version: u32,
    /// `chassisSerialNumber` (v1 `rackGuid`): the serial number of the chassis (the rack of
    /// an NVL72) that holds the GPU, ASCII up to its NUL padding.
    pub chassis_serial: String,
    /// `slotNumber` (v1 `chassisPhysicalSlotNumber`): the slot in the chassis, switch trays
    /// counted.
    pub slot: u8,
    /// `trayIndex` (v1 `computeSlotIndex`): the index among the chassis's compute trays.
    pub tray: u8,
    /// `hostId` (v1 `nodeIndex`): the node within the slot.
    pub host_id: u8,
    /// `peerType`: the platform's NVLink peer type (whether a switch is present), raw.
    pub peer_type: u8,
    /// `moduleId`: the GPU within the node.
    pub module_id: u8,
    /// `ibGuid`: the GPU's fabric GUID as NVML tools print it (`0x` and hex), empty when
    /// the driver gives none (all zero).
    pub ib_guid: String,
}

impl Platform {
    /// Decodes the bytes of an answer; a chassis serial that is not printable ASCII padded
    /// with NULs is malformed, and the whole answer with it.
    pub fn decode(
        version: u32,
        ib_guid: &[u8; 16],
        chassis_serial: &[u8; 16],
        [slot, tray, host_id, peer_type, module_id]: [u8; 5],
    ) -> Result<Platform, String> {
        Ok(Platform {
            version,
            chassis_serial: ascii_nul_padded(chassis_serial)
                .map_err(|e| format!("chassis serial number {e}"))?,
            slot,
            tray,
            host_id,
            peer_type,
            module_id,
            ib_guid: guid_hex(ib_guid),
        })
    }
}

/// Bytes that hold printable ASCII (space included) followed by NULs only, as that text.
pub fn ascii_nul_padded(bytes: &[u8]) -> Result<String, String> {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let (text, padding) = bytes.split_at(end);
    let hex = || bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    if !text.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return Err(format!("is not printable ASCII (bytes {})", hex()));
    }
    if padding.iter().any(|b| *b != 0) {
        return Err(format!("has bytes after its NUL padding (bytes {})", hex()));
    }
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// A GUID of up to 16 bytes as `0x` and lower-case hex in byte order, without the zero
/// bytes that pad it at the end (a Blackwell GUID is 8 bytes of 16); empty when all zero.
pub fn guid_hex(bytes: &[u8]) -> String {
    let len = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    if len == 0 {
        return String::new();
    }
    // Whole 8-byte words: an 8-byte GUID that ends in a zero byte keeps it.
    let len = len.div_ceil(8) * 8;
    let hex: String = bytes[..len.min(bytes.len())]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("0x{hex}")
}

/// One NVLink.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NvLink {
    /// Link index.
    pub link: u32,
    /// `nvmlDeviceGetNvLinkState`.
    pub active: Option<bool>,
    /// `nvmlDeviceGetNvLinkVersion`, raw.
    pub version: Option<u32>,
    /// The remote end's PCI address (sysfs form).
    pub remote_pci_address: Option<String>,
    /// `gpu`, `switch`, `ibmnpu` or `unknown`.
    pub remote_type: Option<&'static str>,
    /// Error counters: `replay`, `recovery`, `crc_flit`, `crc_data`, and NVLink5's
    /// `malformed_packet`, `buffer_overrun`, `rcv`, `rcv_remote`, `rcv_general`,
    /// `local_link_integrity`, `xmit_discards`, `effective`, `symbol`.
    pub errors: Vec<(&'static str, u64)>,
    /// Data bytes sent (NVML field 138 with this link as scope; KiB in NVML, converted).
    pub tx_bytes: Option<u64>,
    /// Data bytes received (field 139).
    pub rx_bytes: Option<u64>,
    /// NVLink5 link recoveries by result (`successful`, `failed`: fields 213, 214).
    pub recoveries: Vec<(&'static str, u64)>,
    /// NVLink5 effective bit error rate (field 220, decoded).
    pub effective_ber: Option<f64>,
    /// NVLink5 symbol bit error rate (field 222, decoded).
    pub symbol_ber: Option<f64>,
    /// NVLink5 FEC history (fields 235–250): per bin *n*, the codewords in which the FEC
    /// decoder corrected *n* symbol errors, bins 0–15; empty where not read (an inactive
    /// link, a GPU before Blackwell).
    pub fec_history: Vec<(u8, u64)>,
}

/// GPU activity over the window between two GPM samples (`nvmlGpmMetricsGet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    /// How long the window was, in seconds.
    pub window_seconds: f64,
    /// `NVML_GPM_METRIC_*` id and value, as NVML reports it (percent, or MiB/s), for the
    /// metrics the GPU answered.
    pub metrics: Vec<(u32, f64)>,
}

/// A GPU's MIG configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mig {
    /// MIG mode now.
    pub enabled: bool,
    /// MIG mode after the next GPU reset.
    pub pending: bool,
    /// The MIG devices (one per compute instance).
    pub devices: Vec<MigDevice>,
    /// GPM activity per GPU instance: (GPU instance id, activity).
    pub activity: Vec<(u32, Activity)>,
}

/// One MIG device: a compute instance of a GPU instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MigDevice {
    /// GPU instance id.
    pub gpu_instance: u32,
    /// Compute instance id.
    pub compute_instance: u32,
    /// `MIG-...`, what a device plugin hands to a pod.
    pub uuid: Option<String>,
    /// `NVIDIA H100 80GB HBM3 MIG 1g.10gb`.
    pub name: Option<String>,
    /// Memory of its GPU instance: (used, total, reserved) bytes.
    pub memory: Option<(u64, u64, u64)>,
}

impl MigDevice {
    /// The profile, from the name the driver gives the device (`1g.10gb`, `3g.40gb+me`).
    pub fn profile(&self) -> Option<&str> {
        let name = self.name.as_deref()?;
        let (_, profile) = name.rsplit_once(" MIG ")?;
        Some(profile.trim())
    }
}

/// GPU fabric registration as `nvmlDeviceGetGpuFabricInfoV` (v3) reports it on NVSwitch
/// and NVL72 systems.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricV3 {
    /// NVLink clique.
    pub clique_id: u32,
    /// The cluster UUID (`xxxxxxxx-xxxx-…`).
    pub cluster_uuid: String,
    /// `NVML_GPU_FABRIC_HEALTH_MASK_*` bit fields; 0 where the driver does not report them.
    pub health_mask: u32,
    /// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`: 0 not supported, 1 healthy, 2 unhealthy, 3
    /// limited capacity.
    pub health_summary: u8,
}

/// Grace-Blackwell NVLink-C2C (fields 170–172, 231–234).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C2c {
    /// How many C2C links the GPU has.
    pub links: u32,
    /// Per link: (link, up, max bandwidth in MB/s).
    pub link_state: Vec<(u32, Option<bool>, Option<u32>)>,
    /// Error counters: `intr`, `replay`, `replay_b2b`.
    pub errors: Vec<(&'static str, u64)>,
    /// Whether the links are in low-power state.
    pub low_power: Option<bool>,
}

/// One GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gpu {
    /// NVML index.
    pub index: u32,
    /// How reading it went.
    pub state: GpuState,
    /// Static identity (kept from the last successful read when the GPU is lost).
    pub identity: Identity,
    /// Persistence mode.
    pub persistence_mode: Option<bool>,
    /// GPU and memory utilization in percent.
    pub utilization: Option<(u32, u32)>,
    /// Memory used and total in bytes.
    pub memory: Option<(u64, u64)>,
    /// Memory the driver reserves, in bytes (`nvmlDeviceGetMemoryInfo_v2`).
    pub memory_reserved: Option<u64>,
    /// HBM temperature in °C (field 82).
    pub memory_temperature_c: Option<u32>,
    /// Encoder and decoder utilization in percent.
    pub codec_utilization: (Option<u32>, Option<u32>),
    /// Energy since the driver loaded, in mJ (read every [`super::ENERGY_EVERY`], the last
    /// value in between).
    pub energy_mj: Option<u64>,
    /// Time the clocks were held down, per reason, in ns (fields 74, 76 and the thermal and
    /// power-brake fields).
    pub clock_events_ns: Vec<(&'static str, u64)>,
    /// Time in violation per performance policy, in ns (`nvmlDeviceGetViolationStatus`,
    /// read every [`super::VIOLATIONS_EVERY`]).
    pub violations_ns: Vec<(&'static str, u64)>,
    /// Whether GPM can be read on this GPU (`None`: not asked, e.g. the GPU is lost).
    pub gpm_supported: Option<bool>,
    /// Activity since the previous collection (GPM).
    pub activity: Option<Activity>,
    /// MIG mode and devices; `None` where MIG is not supported.
    pub mig: Option<Mig>,
    /// Core temperature in °C.
    pub temperature_c: Option<u32>,
    /// Power draw in mW.
    pub power_mw: Option<u32>,
    /// Enforced power limit in mW.
    pub power_limit_mw: Option<u32>,
    /// (`sm`/`memory`, current MHz, max MHz); max is a static value (see [`super::kept`]).
    pub clocks: Vec<(&'static str, Option<u32>, Option<u32>)>,
    /// Every throttle (clock event) reason and whether it is active.
    pub throttle: Vec<(&'static str, bool)>,
    /// ECC errors: (`corrected`/`uncorrected`, `volatile`/`aggregate`, count).
    pub ecc: Vec<(&'static str, &'static str, u64)>,
    /// Remapped rows: correctable, uncorrectable, pending, failure.
    pub remapped_rows: Option<(u32, u32, bool, bool)>,
    /// What the driver says must be done to recover the GPU after an error
    /// (`NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`, `nvmlDeviceGpuRecoveryAction_t`: 0 none,
    /// 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset); `None` where the driver
    /// does not say (before r550).
    pub recovery_action: Option<u32>,
    /// Retired pages by cause (`single_bit_ecc`, `double_bit_ecc`).
    pub retired_pages: Vec<(&'static str, u64)>,
    /// PCIe generation and width: (current gen, max gen, current width, max width); the
    /// max ones are static values.
    pub pcie_link: Option<(u32, u32, u32, u32)>,
    /// PCIe replays (read every [`super::REPLAYS_EVERY`], the last value in between).
    pub pcie_replays: Option<u32>,
    /// PCIe throughput in KB/s: (tx, rx), NVML's 20 ms sample as the PCIe sampler last
    /// took it; only on GPUs without PCIe byte counters.
    pub pcie_throughput_kbps: Option<(u32, u32)>,
    /// PCIe bytes: (tx, rx), NVML's byte counters (fields 197/198) as the PCIe sampler last
    /// read them, carried over their 32-bit wraps.
    pub pcie_bytes: Option<(u64, u64)>,
    /// GPU fabric (state, status) on NVSwitch systems.
    pub fabric: Option<(u32, u32)>,
    /// Clique, cluster and health of the fabric, once registration completed.
    pub fabric_v3: Option<FabricV3>,
    /// NVLink-C2C; `None` where the GPU has none.
    pub c2c: Option<C2c>,
    /// Whether C2C mode is on (`nvmlDeviceGetC2cModeInfoV`, read with the statics); `None`
    /// where the driver does not say (`NOT_SUPPORTED`).
    pub c2c_enabled: Option<bool>,
    /// NVLinks.
    pub nvlinks: Vec<NvLink>,
    /// Processes running compute work on it: (pid, GPU instance in MIG mode).
    pub processes: Vec<(u32, Option<u32>)>,
    /// XID errors seen since the agent started, by code.
    pub xid_errors: Vec<(u64, u64)>,
    /// Whether the XID event set of this GPU is registered: without it, no XID is seen.
    pub xid_events_registered: bool,
    /// Calls that failed other than with NotSupported: (what, NVML error).
    pub failures: Vec<(&'static str, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes16(prefix: &[u8]) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..prefix.len()].copy_from_slice(prefix);
        b
    }

    #[test]
    fn a_chassis_serial_is_the_ascii_before_its_nul_padding() {
        // A Blackwell serial: 13 bytes, bytes 13–15 zero.
        assert_eq!(
            ascii_nul_padded(&bytes16(b"1823825185529")).as_deref(),
            Ok("1823825185529")
        );
        // All 16 bytes used, no NUL.
        assert_eq!(
            ascii_nul_padded(b"ABCDEFGHIJKLMNOP").as_deref(),
            Ok("ABCDEFGHIJKLMNOP")
        );
        assert_eq!(ascii_nul_padded(&[0u8; 16]).as_deref(), Ok(""));
        assert_eq!(ascii_nul_padded(&bytes16(b"R 1-A")).as_deref(), Ok("R 1-A"));
    }

    #[test]
    fn a_chassis_serial_with_other_bytes_is_malformed() {
        let control = ascii_nul_padded(&bytes16(b"18238\x0125")).unwrap_err();
        assert!(control.contains("not printable ASCII"), "{control}");
        assert!(control.contains("3138323338"), "names the bytes: {control}");
        assert!(ascii_nul_padded(&bytes16(&[0x31, 0xff, 0x32])).is_err());
        let after = ascii_nul_padded(&bytes16(&[0x31, 0x00, 0x32])).unwrap_err();
        assert!(after.contains("after its NUL padding"), "{after}");
    }

    #[test]
    fn guids_print_as_hex_without_their_zero_padding() {
        // Blackwell: 8 bytes of 16.
        assert_eq!(
            guid_hex(&bytes16(&[0x21, 0xac, 0x5b, 0x6a, 0x52, 0x8f, 0x7c, 0xf5])),
            "0x21ac5b6a528f7cf5"
        );
        // An 8-byte GUID whose last byte is zero keeps it.
        assert_eq!(
            guid_hex(&bytes16(&[0x21, 0xac, 0x5b, 0x6a, 0x52, 0x8f, 0x7c, 0x00])),
            "0x21ac5b6a528f7c00"
        );
        // All 16 bytes.
        assert_eq!(guid_hex(&[0xab; 16]), "0xabababababababababababababababab");
        assert_eq!(guid_hex(&[0u8; 16]), "");
    }

    #[test]
    fn a_platform_answer_decodes_or_fails_as_a_whole() {
        let guid = bytes16(&[0x21, 0xac, 0x5b, 0x6a, 0x52, 0x8f, 0x7c, 0xf5]);
        let p = Platform::decode(2, &guid, &bytes16(b"1823825185529"), [5, 4, 1, 2, 2]).unwrap();
        assert_eq!(
            p,
            Platform {
                version: 2,
                chassis_serial: "1823825185529".to_owned(),
                slot: 5,
                tray: 4,
                host_id: 1,
                peer_type: 2,
                module_id: 2,
                ib_guid: "0x21ac5b6a528f7cf5".to_owned(),
            }
        );
        let bad = Platform::decode(2, &guid, &bytes16(&[0x80]), [5, 4, 1, 2, 2]).unwrap_err();
        assert!(bad.starts_with("chassis serial number"), "{bad}");
    }

    #[test]
    fn a_mig_profile_is_read_from_the_device_name() {
        let d = |name: &str| MigDevice {
            name: Some(name.to_owned()),
            ..MigDevice::default()
        };
        assert_eq!(
            d("NVIDIA H100 80GB HBM3 MIG 1g.10gb").profile(),
            Some("1g.10gb")
        );
        assert_eq!(
            d("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me").profile(),
            Some("1g.10gb+me")
        );
        assert_eq!(d("NVIDIA H100 80GB HBM3").profile(), None);
        assert_eq!(MigDevice::default().profile(), None);
    }
}
