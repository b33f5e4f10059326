//! What a GPU counts between scrapes, beyond utilization and power: energy, the time its
//! clocks were held down per reason, the time in violation per performance policy, HBM
//! temperature, NVLink-C2C (Grace-Blackwell) and the NVLink5 error counters and FEC
//! history.
//!
//! Cost (one H200, driver 580.159.04, `shared/reference/h200-nvml/`): the field ids read
//! here cost ~26 µs each and are read in one `nvmlDeviceGetFieldValues` call per scrape;
//! the energy counter costs 4.3 ms of CPU and is read every [`super::ENERGY_EVERY`]; the
//! violation counters 0.8 ms per policy and are read every [`super::VIOLATIONS_EVERY`].
//! A field or call that answers `NOT_SUPPORTED` is not asked again until the static values
//! are read again ([`Kept::unsupported_fields`]).

use std::time::Instant;

use nvml_wrapper::enum_wrappers::device::PerformancePolicy;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, FieldIdScheme, Nvml};

use super::Calls;
use super::kept::{Kept, Plan};
use super::raw::{self, FieldCounter};
use super::types::{C2c, Gpu, NvLink};

/// `NVML_FI_DEV_MEMORY_TEMP`.
const FI_MEMORY_TEMP: u32 = 82;
/// `NVML_FI_DEV_C2C_LINK_COUNT`, `…_GET_STATUS` and `…_GET_MAX_BW` (link in `scopeId`).
const FI_C2C_LINK_COUNT: u32 = 170;
const FI_C2C_LINK_STATUS: u32 = 171;
const FI_C2C_LINK_MAX_BW: u32 = 172;
/// `NVML_FI_DEV_C2C_LINK_POWER_STATE` (`NVML_C2C_POWER_STATE_LOW_POWER` = 1).
const FI_C2C_POWER_STATE: u32 = 234;
/// C2C error counters and their `type` label.
const C2C_ERRORS: [(u32, &str); 3] = [(231, "intr"), (232, "replay"), (233, "replay_b2b")];

/// The clock event reason counters (ns) and their `reason` label: the ids that moved
/// between the two numberings (`FieldIdScheme`) are given as (before 580.82, after).
const CLOCK_EVENTS: [((u32, u32), &str); 5] = [
    ((74, 74), "sw_power_cap"),
    ((76, 76), "sync_boost"),
    ((251, 269), "sw_thermal_slowdown"),
    ((252, 270), "hw_thermal_slowdown"),
    ((253, 271), "hw_power_brake_slowdown"),
];

/// The performance policies of `nvmlDeviceGetViolationStatus`, their `policy` label, and
/// the name under which a policy the GPU does not support is remembered.
const POLICIES: [(PerformancePolicy, &str, &str); 8] = [
    (
        PerformancePolicy::Power,
        "power",
        "nvmlDeviceGetViolationStatus(POWER)",
    ),
    (
        PerformancePolicy::Thermal,
        "thermal",
        "nvmlDeviceGetViolationStatus(THERMAL)",
    ),
    (
        PerformancePolicy::SyncBoost,
        "sync_boost",
        "nvmlDeviceGetViolationStatus(SYNC_BOOST)",
    ),
    (
        PerformancePolicy::BoardLimit,
        "board_limit",
        "nvmlDeviceGetViolationStatus(BOARD_LIMIT)",
    ),
    (
        PerformancePolicy::LowUtilization,
        "low_utilization",
        "nvmlDeviceGetViolationStatus(LOW_UTILIZATION)",
    ),
    (
        PerformancePolicy::Reliability,
        "reliability",
        "nvmlDeviceGetViolationStatus(RELIABILITY)",
    ),
    (
        PerformancePolicy::TotalAppClocks,
        "total_app_clocks",
        "nvmlDeviceGetViolationStatus(TOTAL_APP_CLOCKS)",
    ),
    (
        PerformancePolicy::TotalBaseClocks,
        "total_base_clocks",
        "nvmlDeviceGetViolationStatus(TOTAL_BASE_CLOCKS)",
    ),
];

/// NVLink5 error counters (link in `scopeId`) and their `type` label.
const NVLINK5_ERRORS: [(u32, &str); 9] = [
    (206, "malformed_packet"),
    (207, "buffer_overrun"),
    (208, "rcv"),
    (209, "rcv_remote"),
    (210, "rcv_general"),
    (211, "local_link_integrity"),
    (212, "xmit_discards"),
    (219, "effective"),
    (221, "symbol"),
];
/// NVLink5 link recoveries and their `result` label.
const NVLINK5_RECOVERIES: [(u32, &str); 2] = [(213, "successful"), (214, "failed")];
/// NVLink5 bit error rates: effective, symbol.
const FI_NVLINK_EFFECTIVE_BER: u32 = 220;
const FI_NVLINK_SYMBOL_BER: u32 = 222;

/// The name under which an unsupported NVLink5 counter set is remembered.
const NVLINK5: &str = "nvlink5-fields";

/// `NOT_SUPPORTED`, and `INVALID_ARGUMENT`, which a driver older than a field id answers.
fn unsupported(code: u32) -> bool {
    matches!(code, 2 | 3)
}

/// Reads the energy (when due), the per-scrape field batch (clock events, HBM temperature,
/// C2C) and the violation counters (when due) into `gpu`.
pub(super) fn read(
    nvml: &Nvml,
    device: &Device<'_>,
    plan: Plan,
    now: Instant,
    kept: &mut Kept,
    calls: &mut Calls,
    gpu: &mut Gpu,
) {
    if plan.energy {
        let failures_before = calls.failures.len();
        let energy = unless_unsupported(kept, calls, "nvmlDeviceGetTotalEnergyConsumption", || {
            device.total_energy_consumption()
        });
        let clean = calls.failures.len() == failures_before && !calls.lost;
        kept.energy.set(energy, now, clean);
    }
    gpu.energy_mj = kept.energy.value;
    read_fields(nvml, device, kept, calls, gpu);
    if plan.violations {
        let failures_before = calls.failures.len();
        let mut violations = Vec::with_capacity(POLICIES.len());
        for (policy, name, call) in POLICIES {
            if calls.lost {
                break;
            }
            if let Some(v) =
                unless_unsupported(kept, calls, call, || device.violation_status(policy))
            {
                violations.push((name, v.violation_time));
            }
        }
        let clean = calls.failures.len() == failures_before && !calls.lost;
        kept.violations.set(violations, now, clean);
    }
    gpu.violations_ns = kept.violations.value.clone();
}

/// One `nvmlDeviceGetFieldValues` call for what is read every scrape, then one for the C2C
/// links when the GPU has any.
fn read_fields(
    nvml: &Nvml,
    device: &Device<'_>,
    kept: &mut Kept,
    calls: &mut Calls,
    gpu: &mut Gpu,
) {
    let v13 = nvml.field_id_scheme() == FieldIdScheme::V13Update1;
    let clock_ids =
        CLOCK_EVENTS.map(|((v12_id, v13_id), reason)| (if v13 { v13_id } else { v12_id }, reason));
    let mut ids: Vec<u32> = vec![FI_MEMORY_TEMP, FI_C2C_LINK_COUNT, FI_C2C_POWER_STATE];
    ids.extend(clock_ids.iter().map(|(id, _)| *id));
    ids.extend(C2C_ERRORS.iter().map(|(id, _)| *id));
    ids.retain(|id| !kept.unsupported_fields.contains(id));
    if ids.is_empty() {
        return;
    }
    let requests: Vec<(u32, u32)> = ids.iter().map(|id| (*id, 0)).collect();
    let Some(values) = calls.code(
        "nvmlDeviceGetFieldValues",
        raw::field_counters(nvml, device, &requests),
    ) else {
        return;
    };
    let mut read = Vec::with_capacity(ids.len());
    for (id, value) in ids.iter().zip(values) {
        match value {
            Ok(v) => read.push((*id, v)),
            Err(code) if unsupported(code) => kept.unsupported_fields.push(*id),
            Err(15) => calls.lost = true,
            Err(code) => calls.failures.push((
                "nvmlDeviceGetFieldValues",
                format!("field {id}: NVML error {code}"),
            )),
        }
    }
    let get = |id: u32| read.iter().find(|(i, _)| *i == id).map(|(_, v)| v.value);
    gpu.memory_temperature_c = get(FI_MEMORY_TEMP).and_then(|v| u32::try_from(v).ok());
    gpu.clock_events_ns = clock_ids
        .iter()
        .filter_map(|(id, reason)| get(*id).map(|v| (*reason, v)))
        .collect();
    if let Some(links) = get(FI_C2C_LINK_COUNT).filter(|n| *n > 0) {
        let links = u32::try_from(links).unwrap_or(0).min(64);
        let mut c2c = C2c {
            links,
            errors: C2C_ERRORS
                .iter()
                .filter_map(|(id, name)| get(*id).map(|v| (*name, v)))
                .collect(),
            low_power: get(FI_C2C_POWER_STATE).map(|s| s == 1),
            ..C2c::default()
        };
        c2c.link_state = read_c2c_links(nvml, device, links, calls);
        gpu.c2c = Some(c2c);
    }
}

/// Status and maximum bandwidth of each C2C link.
fn read_c2c_links(
    nvml: &Nvml,
    device: &Device<'_>,
    links: u32,
    calls: &mut Calls,
) -> Vec<(u32, Option<bool>, Option<u32>)> {
    let requests: Vec<(u32, u32)> = (0..links)
        .flat_map(|l| [(FI_C2C_LINK_STATUS, l), (FI_C2C_LINK_MAX_BW, l)])
        .collect();
    let Some(values) = calls.code(
        "nvmlDeviceGetFieldValues",
        raw::field_counters(nvml, device, &requests),
    ) else {
        return Vec::new();
    };
    let value = |r: &Result<FieldCounter, u32>| r.as_ref().ok().map(|v| v.value);
    values
        .chunks(2)
        .zip(0..links)
        .map(|(pair, link)| {
            let status = pair.first().and_then(value).map(|s| s == 1);
            let max_bw = pair
                .get(1)
                .and_then(value)
                .and_then(|v| u32::try_from(v).ok());
            (link, status, max_bw)
        })
        .collect()
}

/// NVLink5 FEC history, bins 0–15 (`NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0` … `_15`; the
/// same ids in both field numberings). Read for active links only.
const FI_NVLINK_FEC_HISTORY_0: u32 = 235;
const FEC_BINS: u32 = 16;

/// The name under which an unsupported FEC history is remembered.
const NVLINK5_FEC: &str = "nvlink5-fec-history";

/// The NVLink5 counters of every link in `nvlinks`, and the FEC history of the active
/// ones, in one call; a GPU that answers none of the counters (every GPU before Blackwell)
/// is not asked again until the statics are read, nor is one that answers none of the
/// FEC history bins.
pub(super) fn read_nvlink5(
    nvml: &Nvml,
    device: &Device<'_>,
    nvlinks: &mut [NvLink],
    kept: &mut Kept,
    calls: &mut Calls,
    (read_fec, now): (bool, Instant),
) {
    if nvlinks.is_empty() || kept.is_unsupported(NVLINK5) {
        return;
    }
    let ids: Vec<u32> = NVLINK5_ERRORS
        .iter()
        .chain(NVLINK5_RECOVERIES.iter())
        .map(|(id, _)| *id)
        .chain([FI_NVLINK_EFFECTIVE_BER, FI_NVLINK_SYMBOL_BER])
        .collect();
    let fec = read_fec && !kept.is_unsupported(NVLINK5_FEC);
    let fec_ids = FI_NVLINK_FEC_HISTORY_0..FI_NVLINK_FEC_HISTORY_0 + FEC_BINS;
    // Per link: the counters, then the 16 bins when the link is active.
    let with_fec = |l: &NvLink| fec && l.active == Some(true);
    let mut requests: Vec<(u32, u32)> = Vec::new();
    for l in nvlinks.iter() {
        requests.extend(ids.iter().map(|id| (*id, l.link)));
        if with_fec(l) {
            requests.extend(fec_ids.clone().map(|id| (id, l.link)));
        }
    }
    let Some(values) = calls.code(
        "nvmlDeviceGetFieldValues",
        raw::field_counters(nvml, device, &requests),
    ) else {
        return;
    };
    let is_unsupported = |v: &Result<FieldCounter, u32>| matches!(v, Err(c) if unsupported(*c));
    let fec_answers = requests
        .iter()
        .zip(&values)
        .filter(|((id, _), _)| fec_ids.contains(id));
    // Whether any bin was asked, any answered other than NOT_SUPPORTED, and every one read.
    let mut fec_asked = false;
    let mut fec_supported = false;
    let mut fec_clean = true;
    for (_, v) in fec_answers {
        fec_asked = true;
        fec_supported |= !is_unsupported(v);
        fec_clean &= v.is_ok();
    }
    if fec_asked && !fec_supported {
        kept.set_unsupported(NVLINK5_FEC);
    }
    if requests
        .iter()
        .zip(&values)
        .filter(|((id, _), _)| !fec_ids.contains(id))
        .all(|(_, v)| is_unsupported(v))
    {
        kept.set_unsupported(NVLINK5);
        return;
    }
    let mut offset = 0;
    for link in nvlinks.iter_mut() {
        let count = ids.len() + if with_fec(link) { FEC_BINS as usize } else { 0 };
        let answers = values.get(offset..offset + count).unwrap_or_default();
        offset += count;
        let get = |id: u32| {
            ids.iter()
                .position(|i| *i == id)
                .and_then(|p| answers.get(p))
                .and_then(|r| r.as_ref().ok())
                .map(|v| v.value)
        };
        for (id, name) in NVLINK5_ERRORS {
            if let Some(v) = get(id) {
                link.errors.push((name, v));
            }
        }
        for (id, result) in NVLINK5_RECOVERIES {
            if let Some(v) = get(id) {
                link.recoveries.push((result, v));
            }
        }
        link.effective_ber = get(FI_NVLINK_EFFECTIVE_BER).map(raw::decode_ber);
        link.symbol_ber = get(FI_NVLINK_SYMBOL_BER).map(raw::decode_ber);
        if fec_supported {
            link.fec_history = answers
                .iter()
                .skip(ids.len())
                .zip(0u8..)
                .filter_map(|(r, bin)| r.as_ref().ok().map(|v| (bin, v.value)))
                .collect();
        } else if !fec && link.active == Some(true) {
            link.fec_history = kept
                .fec_history
                .value
                .iter()
                .find(|(l, _)| *l == link.link)
                .map(|(_, bins)| bins.clone())
                .unwrap_or_default();
        }
    }
    if fec_asked {
        let bins = nvlinks
            .iter()
            .filter(|l| !l.fec_history.is_empty())
            .map(|l| (l.link, l.fec_history.clone()))
            .collect();
        kept.fec_history.set(bins, now, fec_clean);
    }
}

/// Encoder and decoder utilization; a GPU without the engines (or a driver without the
/// call) is not asked again until the statics are read.
pub(super) fn read_codecs(
    device: &Device<'_>,
    kept: &mut Kept,
    calls: &mut Calls,
) -> (Option<u32>, Option<u32>) {
    let enc = unless_unsupported(kept, calls, "nvmlDeviceGetEncoderUtilization", || {
        device.encoder_utilization().map(|u| u.utilization)
    });
    let dec = unless_unsupported(kept, calls, "nvmlDeviceGetDecoderUtilization", || {
        device.decoder_utilization().map(|u| u.utilization)
    });
    (enc, dec)
}

/// Calls `f` unless `name` answered `NOT_SUPPORTED` before; remembers when it does.
pub(super) fn unless_unsupported<T>(
    kept: &mut Kept,
    calls: &mut Calls,
    name: &'static str,
    f: impl FnOnce() -> Result<T, NvmlError>,
) -> Option<T> {
    if kept.is_unsupported(name) {
        return None;
    }
    match f() {
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => {
            kept.set_unsupported(name);
            None
        }
        other => calls.ok(name, other),
    }
}
