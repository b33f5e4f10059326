//! NVML calls nvml-wrapper 0.13 does not wrap, or wraps wrongly, made through its raw
//! library handle: per-link field values (the safe `field_values_for` never sets
//! `scopeId`) and counter fields as integers, the NVLink remote device type (the safe method returns its own untouched
//! value), remapped rows, GPU fabric info, GPM samples and metrics, and the GPU and compute
//! instance ids of MIG devices (not wrapped).
//!
//! This is one of the few modules allowed `unsafe`: each call passes a device handle from a
//! live `Device` and pointers to locals, as the NVML header documents.

#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::{
    nvmlC2cModeInfo_v1_t, nvmlFieldValue_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t,
    nvmlGpuFabricInfo_t, nvmlGpuFabricInfoV_t, nvmlIntNvLinkDeviceType_t, nvmlPlatformInfo_v1_t,
    nvmlPlatformInfo_v2_t, nvmlReturn_t,
};

use super::types::{FabricV3, Platform};

/// `NVML_SUCCESS`.
const NVML_SUCCESS: u32 = 0;
/// `NVML_VALUE_TYPE_DOUBLE` .. `NVML_VALUE_TYPE_SIGNED_INT`.
const VALUE_DOUBLE: u32 = 0;
const VALUE_UINT: u32 = 1;
const VALUE_ULONG: u32 = 2;
const VALUE_ULONGLONG: u32 = 3;
const VALUE_SLONGLONG: u32 = 4;
const VALUE_SINT: u32 = 5;

/// Reads `(field, scope)` pairs with `nvmlDeviceGetFieldValues`; each result is the value or
/// the NVML return code of that field.
pub fn field_values(
    nvml: &Nvml,
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Vec<Result<f64, u32>>, u32> {
    Ok(read_fields(nvml, device, requests)?
        .iter()
        .map(|v| {
            if v.nvmlReturn != NVML_SUCCESS {
                return Err(v.nvmlReturn);
            }
            // SAFETY: valueType says which union member NVML wrote.
            let value = unsafe {
                match v.valueType {
                    VALUE_DOUBLE => v.value.dVal,
                    VALUE_UINT => f64::from(v.value.uiVal),
                    VALUE_ULONG => v.value.ulVal as f64,
                    VALUE_ULONGLONG => v.value.ullVal as f64,
                    VALUE_SLONGLONG => v.value.sllVal as f64,
                    VALUE_SINT => f64::from(v.value.siVal),
                    _ => return Err(2),
                }
            };
            Ok(value)
        })
        .collect())
}

/// An unsigned counter read from a field value, with the width NVML gave it: a 32-bit
/// counter wraps at 2^32 (the PCIe byte counters of driver 580 do), a 64-bit one never
/// in practice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldCounter {
    /// The value as read.
    pub value: u64,
    /// 32 or 64.
    pub bits: u32,
}

/// Reads `(field, scope)` pairs holding unsigned counters, without the rounding of an
/// `f64`; a signed, floating or unknown value type answers `NVML_ERROR_UNKNOWN` (999).
pub fn field_counters(
    nvml: &Nvml,
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Vec<Result<FieldCounter, u32>>, u32> {
    Ok(read_fields(nvml, device, requests)?
        .iter()
        .map(|v| {
            if v.nvmlReturn != NVML_SUCCESS {
                return Err(v.nvmlReturn);
            }
            // SAFETY: valueType says which union member NVML wrote.
            unsafe {
                match v.valueType {
                    VALUE_UINT => Ok(FieldCounter {
                        value: u64::from(v.value.uiVal),
                        bits: 32,
                    }),
                    // `c_ulong` is 64 bits on the 64-bit Linux NVML ships for.
                    VALUE_ULONG => Ok(FieldCounter {
                        value: v.value.ulVal,
                        bits: 64,
                    }),
                    VALUE_ULONGLONG => Ok(FieldCounter {
                        value: v.value.ullVal,
                        bits: 64,
                    }),
                    _ => Err(999),
                }
            }
        })
        .collect())
}

/// One `nvmlDeviceGetFieldValues` call for `requests`; the entries as NVML filled them.
fn read_fields(
    nvml: &Nvml,
    device: &Device<'_>,
    requests: &[(u32, u32)],
) -> Result<Vec<nvmlFieldValue_t>, u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetFieldValues.as_ref() else {
        return Err(13);
    }; // FUNCTION_NOT_FOUND
    // SAFETY: nvmlFieldValue_t is plain data; all-zero is a valid value.
    let mut values: Vec<nvmlFieldValue_t> = requests
        .iter()
        .map(|&(field, scope)| {
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = field;
            v.scopeId = scope;
            v
        })
        .collect();
    let count = i32::try_from(values.len()).map_err(|_| 2u32)?;
    // SAFETY: the handle comes from a live Device of this Nvml; `values` holds `count`
    // initialised entries that NVML fills in place.
    let rc = unsafe { sym(device.handle(), count, values.as_mut_ptr()) };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    Ok(values)
}

/// What is at the far end of an NVLink (`nvmlIntNvLinkDeviceType_t`: 0 GPU, 1 IBMNPU,
/// 2 switch, 255 unknown).
pub fn remote_device_type(nvml: &Nvml, device: &Device<'_>, link: u32) -> Result<u32, u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType.as_ref() else {
        return Err(13);
    };
    let mut ty: nvmlIntNvLinkDeviceType_t = 255;
    // SAFETY: live handle, pointer to a local.
    let rc = unsafe { sym(device.handle(), link, &mut ty) };
    if rc == NVML_SUCCESS { Ok(ty) } else { Err(rc) }
}

/// Remapped rows: (correctable, uncorrectable, pending, failure occurred).
pub fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<(u32, u32, bool, bool), u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetRemappedRows.as_ref() else {
        return Err(13);
    };
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: live handle, pointers to locals.
    let rc = unsafe {
        sym(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failure,
        )
    };
    if rc == NVML_SUCCESS {
        Ok((corr, unc, pending != 0, failure != 0))
    } else {
        Err(rc)
    }
}

/// `NVML_ERROR_FUNCTION_NOT_FOUND`: the library lacks the function (an older driver).
const FUNCTION_NOT_FOUND: u32 = 13;
/// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`: the driver does not know the struct version.
const VERSION_MISMATCH: u32 = 25;

/// Fabric registration with clique, cluster and health (`nvmlDeviceGetGpuFabricInfoV`
/// with the v3 struct): (state, status, details). A driver without the versioned call or
/// the v3 struct answers through the plain call, without health.
pub fn fabric_info_v3(nvml: &Nvml, device: &Device<'_>) -> Result<(u32, u32, FabricV3), u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref() else {
        return fabric_info_v1(nvml, device);
    };
    // SAFETY: plain data; all-zero is valid.
    let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
    // NVML_STRUCT_VERSION(GpuFabricInfo, 3): the size with the version in the top byte.
    info.version = (std::mem::size_of::<nvmlGpuFabricInfoV_t>() as u32) | (3 << 24);
    // SAFETY: live handle, pointer to a local of the struct whose version it carries.
    let rc = unsafe { sym(device.handle(), &mut info) };
    match rc {
        NVML_SUCCESS => Ok((
            u32::from(info.state),
            info.status,
            FabricV3 {
                clique_id: info.cliqueId,
                cluster_uuid: uuid_string(&info.clusterUuid),
                health_mask: info.healthMask,
                health_summary: info.healthSummary,
            },
        )),
        FUNCTION_NOT_FOUND | VERSION_MISMATCH => fabric_info_v1(nvml, device),
        rc => Err(rc),
    }
}

fn fabric_info_v1(nvml: &Nvml, device: &Device<'_>) -> Result<(u32, u32, FabricV3), u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    // SAFETY: plain data; all-zero is valid.
    let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: live handle, pointer to a local of the documented struct.
    let rc = unsafe { sym(device.handle(), &mut info) };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    Ok((
        u32::from(info.state),
        info.status,
        FabricV3 {
            clique_id: info.cliqueId,
            cluster_uuid: uuid_string(&info.clusterUuid),
            ..FabricV3::default()
        },
    ))
}

/// How a platform answer came back: decoded, or the reason it is malformed.
pub type PlatformAnswer = Result<Platform, String>;

/// Where the GPU sits in its rack (`nvmlDeviceGetPlatformInfo`): asked with
/// `nvmlPlatformInfo_v2`, then with `_v1` when the driver answers
/// `ARGUMENT_VERSION_MISMATCH`. The outer error is NVML's return code (`NOT_SUPPORTED`
/// before Blackwell, `FUNCTION_NOT_FOUND` for a driver without the call, or
/// `ARGUMENT_VERSION_MISMATCH` when the driver takes neither version).
pub fn platform_info(nvml: &Nvml, device: &Device<'_>) -> Result<PlatformAnswer, u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetPlatformInfo.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    // SAFETY: plain data; all-zero is valid.
    let mut v2: nvmlPlatformInfo_v2_t = unsafe { std::mem::zeroed() };
    // NVML_STRUCT_VERSION(PlatformInfo, 2).
    v2.version = (std::mem::size_of::<nvmlPlatformInfo_v2_t>() as u32) | (2 << 24);
    // SAFETY: live handle, pointer to a local of the struct whose version it carries.
    let rc = unsafe { sym(device.handle(), &mut v2) };
    match rc {
        NVML_SUCCESS => {
            return Ok(Platform::decode(
                2,
                &v2.ibGuid,
                &v2.chassisSerialNumber,
                [
                    v2.slotNumber,
                    v2.trayIndex,
                    v2.hostId,
                    v2.peerType,
                    v2.moduleId,
                ],
            ));
        }
        VERSION_MISMATCH => {}
        rc => return Err(rc),
    }
    // SAFETY: plain data; all-zero is valid.
    let mut v1: nvmlPlatformInfo_v1_t = unsafe { std::mem::zeroed() };
    // NVML_STRUCT_VERSION(PlatformInfo, 1).
    v1.version = (std::mem::size_of::<nvmlPlatformInfo_v1_t>() as u32) | (1 << 24);
    // SAFETY: live handle; the v1 struct is what its version says, and the function reads
    // the version before it writes anything (the header types the parameter as the
    // current version only).
    let rc = unsafe {
        sym(
            device.handle(),
            (&raw mut v1).cast::<nvmlPlatformInfo_v2_t>(),
        )
    };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    Ok(Platform::decode(
        1,
        &v1.ibGuid,
        &v1.rackGuid,
        [
            v1.chassisPhysicalSlotNumber,
            v1.computeSlotIndex,
            v1.nodeIndex,
            v1.peerType,
            v1.moduleId,
        ],
    ))
}

/// `nvmlDeviceGetModuleId` (not wrapped): the GPU module on its baseboard.
pub fn module_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetModuleId.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    let mut id = 0u32;
    // SAFETY: live handle, pointer to a local.
    let rc = unsafe { sym(device.handle(), &mut id) };
    if rc == NVML_SUCCESS { Ok(id) } else { Err(rc) }
}

/// `nvmlDeviceGetC2cModeInfoV` (not wrapped): whether C2C mode is on. The header's
/// `nvmlC2cModeInfo_v1_t` has no version member, so nothing is set before the call.
pub fn c2c_mode(nvml: &Nvml, device: &Device<'_>) -> Result<bool, u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetC2cModeInfoV.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    let mut info = nvmlC2cModeInfo_v1_t { isC2cEnabled: 0 };
    // SAFETY: live handle, pointer to a local of the documented struct.
    let rc = unsafe { sym(device.handle(), &mut info) };
    if rc == NVML_SUCCESS {
        Ok(info.isC2cEnabled != 0)
    } else {
        Err(rc)
    }
}

/// 16 bytes in the usual UUID spelling.
fn uuid_string(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The GPU instance and compute instance of a MIG device handle.
pub fn instance_ids(nvml: &Nvml, mig: &Device<'_>) -> Result<(u32, u32), u32> {
    let lib = nvml.lib();
    let (Ok(gi_sym), Ok(ci_sym)) = (
        lib.nvmlDeviceGetGpuInstanceId.as_ref(),
        lib.nvmlDeviceGetComputeInstanceId.as_ref(),
    ) else {
        return Err(FUNCTION_NOT_FOUND);
    };
    let (mut gi, mut ci) = (0u32, 0u32);
    // SAFETY: live handle, pointers to locals.
    let rc = unsafe { gi_sym(mig.handle(), &mut gi) };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    // SAFETY: as above.
    let rc = unsafe { ci_sym(mig.handle(), &mut ci) };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    Ok((gi, ci))
}

/// An NVLink5 bit error rate field (220, 222): `(mantissa << 8) | exponent`, the rate
/// being mantissa × 10^-exponent (`NVML_NVLINK_BER_*`).
pub fn decode_ber(raw: u64) -> f64 {
    let mantissa = (raw >> 8) & 0xf;
    let exponent = raw & 0xff;
    mantissa as f64 * 10f64.powi(-(exponent as i32))
}

/// Whether GPM (Hopper and later) can be read on `device`.
pub fn gpm_supported(nvml: &Nvml, device: &Device<'_>) -> Result<bool, u32> {
    let Ok(sym) = nvml.lib().nvmlGpmQueryDeviceSupport.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    let mut support = nvmlGpmSupport_t {
        version: 1, // NVML_GPM_SUPPORT_VERSION
        isSupportedDevice: 0,
    };
    // SAFETY: live handle, pointer to a local of the versioned struct.
    let rc = unsafe { sym(device.handle(), &mut support) };
    if rc == NVML_SUCCESS {
        Ok(support.isSupportedDevice != 0)
    } else {
        Err(rc)
    }
}

/// A GPM sample buffer owned by NVML, freed when dropped.
pub struct GpmSample {
    sample: nvmlGpmSample_t,
    free: unsafe extern "C" fn(nvmlGpmSample_t) -> nvmlReturn_t,
}

// SAFETY: a sample is an opaque buffer that NVML reads and writes only inside the calls it
// is passed to; NVML is thread-safe, and the owner uses it from one thread at a time.
unsafe impl Send for GpmSample {}

impl std::fmt::Debug for GpmSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GpmSample")
    }
}

impl Drop for GpmSample {
    fn drop(&mut self) {
        // SAFETY: allocated by nvmlGpmSampleAlloc and freed only here.
        unsafe {
            (self.free)(self.sample);
        }
    }
}

impl GpmSample {
    /// A new sample buffer.
    pub fn alloc(nvml: &Nvml) -> Result<Self, u32> {
        let lib = nvml.lib();
        let (Ok(alloc), Ok(free)) = (
            lib.nvmlGpmSampleAlloc.as_ref(),
            lib.nvmlGpmSampleFree.as_ref(),
        ) else {
            return Err(FUNCTION_NOT_FOUND);
        };
        let mut sample: nvmlGpmSample_t = std::ptr::null_mut();
        // SAFETY: pointer to a local that NVML sets.
        let rc = unsafe { alloc(&mut sample) };
        if rc != NVML_SUCCESS {
            return Err(rc);
        }
        if sample.is_null() {
            return Err(999);
        }
        Ok(GpmSample {
            sample,
            free: *free,
        })
    }

    /// Takes a sample of `device`, or of its GPU instance `gpu_instance` (MIG).
    pub fn take(
        &mut self,
        nvml: &Nvml,
        device: &Device<'_>,
        gpu_instance: Option<u32>,
    ) -> Result<(), u32> {
        let lib = nvml.lib();
        // SAFETY (both calls): live handle and a sample allocated by this library.
        let rc = match gpu_instance {
            None => {
                let Ok(get) = lib.nvmlGpmSampleGet.as_ref() else {
                    return Err(FUNCTION_NOT_FOUND);
                };
                unsafe { get(device.handle(), self.sample) }
            }
            Some(gi) => {
                let Ok(get) = lib.nvmlGpmMigSampleGet.as_ref() else {
                    return Err(FUNCTION_NOT_FOUND);
                };
                unsafe { get(device.handle(), gi, self.sample) }
            }
        };
        if rc == NVML_SUCCESS { Ok(()) } else { Err(rc) }
    }
}

/// The metrics `ids` over the window between samples `earlier` and `later`; each result is
/// the value or that metric's NVML return code.
pub fn gpm_metrics(
    nvml: &Nvml,
    earlier: &GpmSample,
    later: &GpmSample,
    ids: &[u32],
) -> Result<Vec<Result<f64, u32>>, u32> {
    let Ok(sym) = nvml.lib().nvmlGpmMetricsGet.as_ref() else {
        return Err(FUNCTION_NOT_FOUND);
    };
    // The header of NVML 12 has room for 98 metrics; ask for no more.
    if ids.len() > 98 {
        return Err(2);
    }
    // SAFETY: plain data (pointers may be null); all-zero is valid.
    let mut get: Box<nvmlGpmMetricsGet_t> = Box::new(unsafe { std::mem::zeroed() });
    get.version = 1; // NVML_GPM_METRICS_GET_VERSION
    get.numMetrics = ids.len() as u32;
    get.sample1 = earlier.sample;
    get.sample2 = later.sample;
    for (slot, id) in get.metrics.iter_mut().zip(ids) {
        slot.metricId = *id;
    }
    // SAFETY: a versioned struct with numMetrics entries set and two live samples.
    let rc = unsafe { sym(&mut *get) };
    if rc != NVML_SUCCESS {
        return Err(rc);
    }
    Ok(get
        .metrics
        .iter()
        .take(ids.len())
        .map(|m| {
            if m.nvmlReturn == NVML_SUCCESS {
                Ok(m.value)
            } else {
                Err(m.nvmlReturn)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_bit_error_rates_decode_as_mantissa_times_a_power_of_ten() {
        // 3 × 10^-12: mantissa 3 in bits 8–11, exponent 12 in bits 0–7.
        assert!((decode_ber((3 << 8) | 12) - 3e-12).abs() < 1e-24);
        assert_eq!(decode_ber(0), 0.0);
        // Bits above the mantissa are not part of it.
        assert!((decode_ber((0xf1 << 8) | 15) - 1e-15).abs() < 1e-27);
    }

    #[test]
    fn cluster_uuids_are_spelled_as_uuids() {
        let bytes = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(uuid_string(&bytes), "12345678-9abc-def0-0123-456789abcdef");
    }
}
