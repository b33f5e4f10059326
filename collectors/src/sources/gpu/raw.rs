//! NVML calls nvml-wrapper 0.13 does not wrap, or wraps wrongly, made through its raw
//! library handle: per-link field values (the safe `field_values_for` never sets
//! `scopeId`) and counter fields as integers, the NVLink remote device type (the safe method returns its own untouched
//! value), remapped rows and GPU fabric info (not wrapped).
//!
//! This is one of the few modules allowed `unsafe`: each call passes a device handle from a
//! live `Device` and pointers to locals, as the NVML header documents.

#![allow(unsafe_code)]

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlGpuFabricInfo_t, nvmlIntNvLinkDeviceType_t,
};

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

/// GPU fabric registration on NVSwitch systems: (state, status). State 0 not supported,
/// 1 not started, 2 in progress, 3 completed; status is an NVML return code, valid when
/// completed.
pub fn fabric_info(nvml: &Nvml, device: &Device<'_>) -> Result<(u32, u32), u32> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref() else {
        return Err(13);
    };
    // SAFETY: plain data; all-zero is valid.
    let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: live handle, pointer to a local of the documented struct.
    let rc = unsafe { sym(device.handle(), &mut info) };
    if rc == NVML_SUCCESS {
        Ok((u32::from(info.state), info.status))
    } else {
        Err(rc)
    }
}
