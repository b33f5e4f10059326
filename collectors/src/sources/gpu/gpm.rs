//! GPU activity through NVML's GPM API (Hopper and later): SM active, SM occupancy, tensor,
//! DRAM and pipe activity, PCIe, NVLink and C2C bandwidth, for the whole GPU and for each
//! MIG GPU instance, without DCGM.
//!
//! A GPM metric is the difference of two samples. Nothing sleeps in a scrape: each GPU (and
//! each GPU instance) keeps the sample its previous collection took, and a collection takes
//! a new one and reports the window between them. The first collection after start (or
//! after the GPU came back) has no window yet and reports none. A collection that comes
//! less than [`MIN_WINDOW`] after the last window reports that window again rather than a
//! noisy sliver. A sample costs 0.3–0.6 ms on an H200, computing the metrics ~1 µs
//! (`shared/reference/h200-nvml/gpm-h200.json`).

use std::time::{Duration, Instant};

use nvml_wrapper::{Device, Nvml};

use super::raw::{self, GpmSample};
use super::types::Activity;

/// The shortest window reported.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);

/// The metrics read for a whole GPU (`NVML_GPM_METRIC_*`): graphics, SM, SM occupancy,
/// integer, any tensor, DFMA, HMMA, DMMA, IMMA, DRAM, FP64, FP32, FP16; PCIe TX, RX;
/// NVLink RX, TX; C2C TX, RX.
pub const GPU_METRICS: [u32; 19] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 21, 60, 61, 100, 101,
];

/// The metrics read per MIG GPU instance: graphics, SM, SM occupancy, any tensor, DRAM.
pub const MIG_METRICS: [u32; 5] = [1, 2, 3, 5, 10];

/// One window's end: the sample it ends with, when, and what it reported.
#[derive(Debug)]
struct Window {
    sample: GpmSample,
    at: Instant,
    /// The buffer the next sample is taken into.
    spare: Option<GpmSample>,
    last: Option<Activity>,
}

/// What a GPU keeps between collections for GPM.
#[derive(Debug, Default)]
pub struct GpmState {
    /// Whether GPM is supported; `None` until asked (again after the statics are read).
    pub supported: Option<bool>,
    device: Option<Window>,
    instances: Vec<(u32, Window)>,
}

impl GpmState {
    /// Forgets the samples and whether GPM is supported: the GPU was lost, timed out or is
    /// read afresh.
    pub fn reset(&mut self) {
        *self = GpmState::default();
    }

    /// The whole GPU's activity since the previous collection.
    pub fn device(
        &mut self,
        nvml: &Nvml,
        device: &Device<'_>,
        now: Instant,
    ) -> Result<Option<Activity>, u32> {
        let result = step(nvml, device, None, &mut self.device, now, &GPU_METRICS);
        if result.is_err() {
            self.device = None;
        }
        result
    }

    /// Each GPU instance's activity since the previous collection; instances no longer in
    /// `instances` are forgotten. Errors are per instance.
    pub fn instances(
        &mut self,
        nvml: &Nvml,
        device: &Device<'_>,
        instances: &[u32],
        now: Instant,
    ) -> Vec<(u32, Result<Option<Activity>, u32>)> {
        self.instances.retain(|(gi, _)| instances.contains(gi));
        let mut out = Vec::with_capacity(instances.len());
        for gi in instances {
            let pos = self.instances.iter().position(|(g, _)| g == gi);
            let mut window = pos.map(|p| self.instances.swap_remove(p).1);
            let result = step(nvml, device, Some(*gi), &mut window, now, &MIG_METRICS);
            if let (Ok(_), Some(w)) = (&result, window) {
                self.instances.push((*gi, w));
            }
            out.push((*gi, result));
        }
        out
    }
}

/// Takes a sample and reports the window since the one `window` holds, which it replaces.
fn step(
    nvml: &Nvml,
    device: &Device<'_>,
    gpu_instance: Option<u32>,
    window: &mut Option<Window>,
    now: Instant,
    ids: &[u32],
) -> Result<Option<Activity>, u32> {
    if let Some(w) = window.as_ref()
        && now.saturating_duration_since(w.at) < MIN_WINDOW
    {
        return Ok(w.last.clone());
    }
    let mut sample = match window.as_mut().and_then(|w| w.spare.take()) {
        Some(s) => s,
        None => GpmSample::alloc(nvml)?,
    };
    sample.take(nvml, device, gpu_instance)?;
    let Some(w) = window.as_mut() else {
        *window = Some(Window {
            sample,
            at: now,
            spare: None,
            last: None,
        });
        return Ok(None);
    };
    let values = raw::gpm_metrics(nvml, &w.sample, &sample, ids)?;
    let activity = Activity {
        window_seconds: now.saturating_duration_since(w.at).as_secs_f64(),
        metrics: ids
            .iter()
            .zip(values)
            .filter_map(|(id, v)| v.ok().filter(|v| v.is_finite()).map(|v| (*id, v)))
            .collect(),
    };
    let previous = std::mem::replace(&mut w.sample, sample);
    w.spare = Some(previous);
    w.at = now;
    w.last = Some(activity.clone());
    Ok(Some(activity))
}
