//! MIG: a GPU's mode and its MIG devices (one per compute instance) with their UUIDs —
//! what a device plugin hands to pods — profiles and memory. Read every scrape, because
//! instances are created and destroyed while the driver stays loaded; the calls cost a
//! few µs each. A GPU that does not support MIG is not asked again until its static values
//! are read again.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::Calls;
use super::counters::unless_unsupported;
use super::kept::Kept;
use super::raw;
use super::types::{Mig, MigDevice};

/// The most MIG devices asked for on one GPU (seven GPU instances on an H100, each with up
/// to seven compute instances).
const MAX_DEVICES: u32 = 64;

/// The GPU's MIG mode and devices; `None` where MIG is not supported.
pub(super) fn read(
    nvml: &Nvml,
    device: &Device<'_>,
    kept: &mut Kept,
    calls: &mut Calls,
) -> Option<Mig> {
    let mode = unless_unsupported(kept, calls, "nvmlDeviceGetMigMode", || device.mig_mode())?;
    let mut mig = Mig {
        enabled: mode.current == 1,
        pending: mode.pending == 1,
        ..Mig::default()
    };
    if !mig.enabled {
        return Some(mig);
    }
    let max = calls
        .ok("nvmlDeviceGetMaxMigDeviceCount", device.mig_device_count())
        .unwrap_or(0);
    for index in 0..max.min(MAX_DEVICES) {
        let handle = match device.mig_device_by_index(index) {
            Ok(h) => h,
            // No MIG device at this index.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) => {
                calls.ok::<()>("nvmlDeviceGetMigDeviceHandleByIndex", Err(e));
                continue;
            }
        };
        let Some((gpu_instance, compute_instance)) = calls.code(
            "nvmlDeviceGetGpuInstanceId",
            raw::instance_ids(nvml, &handle),
        ) else {
            continue;
        };
        mig.devices.push(MigDevice {
            gpu_instance,
            compute_instance,
            uuid: calls.ok("nvmlDeviceGetUUID", handle.uuid()),
            name: calls.ok("nvmlDeviceGetName", handle.name()),
            memory: calls
                .ok("nvmlDeviceGetMemoryInfo_v2", handle.memory_info())
                .map(|m| (m.used, m.total, m.reserved)),
        });
        if calls.lost {
            break;
        }
    }
    mig.devices
        .sort_by_key(|d| (d.gpu_instance, d.compute_instance));
    Some(mig)
}
