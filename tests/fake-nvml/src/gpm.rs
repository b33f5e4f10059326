//! GPM (GPU Performance Monitoring) samples and the integrators behind them.
//!
//! A real GPU keeps counters that only grow; `nvmlGpmMetricsGet` divides what they grew
//! by between two samples by the time between them. The fake does the same with the
//! fixture's values as rates: per GPU and scope (the whole device, or one MIG GPU
//! instance) an integrator keeps `accum[id]`, and every `nvmlGpmSampleGet` (or
//! `nvmlGpmMigSampleGet`) first adds `value[id] × dt` for each id the fixture lists now
//! (`dt`: the monotonic time since that GPU and scope's previous sample-get, 0 for the
//! first), then copies the listed ids' `accum`, the time and the GPU and scope into the
//! sample. `nvmlGpmMetricsGet` reports `(a2 − a1) / (t2 − t1)` for each id both samples
//! carry. So a window reports the time-weighted mean of what the fixture said, and a
//! fixture replaced between two samples shows whole in the first window that ends after
//! the change (the interval up to a sample-get is priced at the values in force at it).
//!
//! Samples are opaque heap objects of the library: `nvmlGpmSampleAlloc` returns the
//! address of one, `nvmlGpmSampleFree` releases it, and every call looks an address up
//! before using it, so a freed, foreign or never-filled sample is `INVALID_ARGUMENT`,
//! never undefined behaviour. The registry has its own lock, held only for the look-up
//! and the arithmetic (never while a call sleeps or pays its cost).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use nvml_wrapper_sys::bindings::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT;

use crate::state::Ret;

/// What a sample covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Scope {
    /// The whole GPU (`nvmlGpmSampleGet`).
    Device,
    /// One MIG GPU instance (`nvmlGpmMigSampleGet`).
    Instance(u32),
}

/// A filled sample: the integrals of the ids listed when it was taken.
#[derive(Debug, Clone)]
struct Sample {
    gpu: usize,
    scope: Scope,
    at: Instant,
    accum: BTreeMap<u32, f64>,
}

/// The running integral of one GPU and scope.
#[derive(Debug)]
struct Integrator {
    last: Instant,
    accum: BTreeMap<u32, f64>,
}

struct Registry {
    /// Samples by address; the `Box` gives each a unique, stable address. `None`: allocated,
    /// never filled.
    samples: BTreeMap<usize, (Box<u64>, Option<Sample>)>,
    integrators: BTreeMap<(usize, Scope), Integrator>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    samples: BTreeMap::new(),
    integrators: BTreeMap::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // Every update is complete before anything can panic; poisoning is ignored.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Allocates an empty sample and returns its address.
pub(crate) fn alloc() -> usize {
    let anchor = Box::new(0u64);
    let address = std::ptr::from_ref::<u64>(&anchor) as usize;
    registry().samples.insert(address, (anchor, None));
    address
}

/// Frees the sample at `address`; `INVALID_ARGUMENT` for one not allocated (or freed).
pub(crate) fn free(address: usize) -> Result<(), Ret> {
    registry()
        .samples
        .remove(&address)
        .map(drop)
        .ok_or(INVALID_ARGUMENT)
}

/// Fills the sample at `address` from GPU `gpu`'s `scope`, whose fixture lists `metrics`
/// now (see the module docs).
pub(crate) fn fill(
    address: usize,
    gpu: usize,
    scope: Scope,
    metrics: &BTreeMap<u32, f64>,
) -> Result<(), Ret> {
    fill_at(
        &mut registry(),
        address,
        gpu,
        scope,
        metrics,
        Instant::now(),
    )
}

fn fill_at(
    r: &mut Registry,
    address: usize,
    gpu: usize,
    scope: Scope,
    metrics: &BTreeMap<u32, f64>,
    now: Instant,
) -> Result<(), Ret> {
    if !r.samples.contains_key(&address) {
        return Err(INVALID_ARGUMENT);
    }
    let integrator = r
        .integrators
        .entry((gpu, scope))
        .or_insert_with(|| Integrator {
            last: now,
            accum: BTreeMap::new(),
        });
    let dt = now.saturating_duration_since(integrator.last).as_secs_f64();
    for (&id, &value) in metrics {
        *integrator.accum.entry(id).or_insert(0.0) += value * dt;
    }
    integrator.last = now;
    let accum = metrics
        .keys()
        .map(|id| (*id, integrator.accum.get(id).copied().unwrap_or(0.0)))
        .collect();
    let sample = Sample {
        gpu,
        scope,
        at: now,
        accum,
    };
    if let Some((_, slot)) = r.samples.get_mut(&address) {
        *slot = Some(sample);
    }
    Ok(())
}

/// The rates of a window between two samples: per id both carry, the mean over the window.
/// `INVALID_ARGUMENT` unless both are filled samples of the same GPU and scope and the
/// second was taken after the first.
pub(crate) fn window(first: usize, second: usize) -> Result<BTreeMap<u32, f64>, Ret> {
    window_of(&registry(), first, second)
}

fn window_of(r: &Registry, first: usize, second: usize) -> Result<BTreeMap<u32, f64>, Ret> {
    let filled = |address: usize| {
        r.samples
            .get(&address)
            .and_then(|(_, s)| s.as_ref())
            .ok_or(INVALID_ARGUMENT)
    };
    let (s1, s2) = (filled(first)?, filled(second)?);
    if (s1.gpu, s1.scope) != (s2.gpu, s2.scope) || s2.at <= s1.at {
        return Err(INVALID_ARGUMENT);
    }
    let seconds = s2.at.duration_since(s1.at).as_secs_f64();
    Ok(s2
        .accum
        .iter()
        .filter_map(|(id, a2)| {
            let a1 = s1.accum.get(id)?;
            Some((*id, (a2 - a1) / seconds))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn empty() -> Registry {
        Registry {
            samples: BTreeMap::new(),
            integrators: BTreeMap::new(),
        }
    }

    fn with_sample(r: &mut Registry, address: usize) {
        r.samples.insert(address, (Box::new(0), None));
    }

    #[test]
    fn a_window_reports_the_time_weighted_mean() {
        let mut r = empty();
        for a in 1..=4 {
            with_sample(&mut r, a);
        }
        let t0 = Instant::now();
        let s = |s: Duration| t0 + s;
        let one: BTreeMap<u32, f64> = [(1, 50.0), (2, 10.0)].into();
        let two: BTreeMap<u32, f64> = [(1, 80.0), (3, 7.0)].into();
        fill_at(&mut r, 1, 0, Scope::Device, &one, s(Duration::ZERO)).unwrap();
        fill_at(&mut r, 2, 0, Scope::Device, &one, s(Duration::from_secs(2))).unwrap();
        assert_eq!(window_of(&r, 1, 2).unwrap(), [(1, 50.0), (2, 10.0)].into());
        // The fixture changed before the next sample: the whole window has the new values;
        // id 2 left (not in the second sample), id 3 arrived (not in the first).
        fill_at(&mut r, 3, 0, Scope::Device, &two, s(Duration::from_secs(3))).unwrap();
        assert_eq!(window_of(&r, 2, 3).unwrap(), [(1, 80.0)].into());
        // Over both windows: (50 × 2 + 80 × 1) / 3.
        assert_eq!(window_of(&r, 1, 3).unwrap(), [(1, 60.0)].into());
        // Backwards, the same sample twice, another scope: invalid.
        assert_eq!(window_of(&r, 3, 2), Err(INVALID_ARGUMENT));
        assert_eq!(window_of(&r, 2, 2), Err(INVALID_ARGUMENT));
        fill_at(
            &mut r,
            4,
            0,
            Scope::Instance(1),
            &one,
            s(Duration::from_secs(4)),
        )
        .unwrap();
        assert_eq!(window_of(&r, 3, 4), Err(INVALID_ARGUMENT));
        // Never filled or unknown.
        with_sample(&mut r, 5);
        assert_eq!(window_of(&r, 1, 5), Err(INVALID_ARGUMENT));
        assert_eq!(window_of(&r, 1, 99), Err(INVALID_ARGUMENT));
        assert_eq!(
            fill_at(&mut r, 99, 0, Scope::Device, &one, s(Duration::ZERO)),
            Err(INVALID_ARGUMENT)
        );
    }

    #[test]
    fn samples_are_freed_once() {
        let a = alloc();
        assert!(registry().samples.contains_key(&a));
        assert_eq!(free(a), Ok(()));
        assert!(!registry().samples.contains_key(&a));
        assert_eq!(free(a), Err(INVALID_ARGUMENT));
        assert_eq!(free(0), Err(INVALID_ARGUMENT));
    }
}
