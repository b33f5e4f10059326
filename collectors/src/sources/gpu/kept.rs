//! What the `gpu` source keeps of each GPU between collections, and when each kept value is
//! read again: the cadence logic, pure and apart from NVML so that it is tested alone.
//!
//! Two kinds of value are not read every scrape, because the driver makes them expensive
//! (`shared/reference/h200-nvml/nvml-profile.json`, one H200, driver 580.159.04):
//!
//! * [`Statics`]: identity (with the module id and the platform info: chassis, slot,
//!   tray), max clocks, max PCIe generation and width, NVLink count, C2C mode. They
//!   do not change while the driver is loaded, and `nvmlDeviceGetMaxClockInfo` alone burns
//!   1.7 ms of CPU per call (two per scrape before). Read once, again every
//!   [`STATIC_REFRESH`], and again as soon as a GPU that was lost, timed out or failed
//!   answers (a reset GPU may come back changed).
//! * What each active NVLink connects to ([`LinkIdentity`]: version, remote PCI address,
//!   remote device type): three calls per link, 54 per scrape on an 18-link GPU, for values
//!   that change only when the link trains again. Kept while the link stays up; read again
//!   when it goes down, with the statics, and after the GPU comes back.
//! * The PCIe replay counter (`nvmlDeviceGetPcieReplayCounter`, 0.22 ms): read every
//!   [`REPLAYS_EVERY`], the last value exported in between. A counter read on a cadence
//!   stays exact; it only lags.
//!
//! * The NVLink5 FEC history (16 field ids per active link, 288 on an 18-link GPU, about
//!   3 ms of CPU a GPU at 10 µs a field id): read every [`FEC_HISTORY_EVERY`], the last
//!   bins exported in between. Its alert takes rates over 15 minutes, which a minute's lag
//!   does not change; at the usual 30 s scrape interval half the scrapes read it.
//! * The energy counter (`nvmlDeviceGetTotalEnergyConsumption`, 4.3 ms of CPU): read every
//!   [`ENERGY_EVERY`]; the violation counters (`nvmlDeviceGetViolationStatus`, 0.8 ms per
//!   policy, eight policies) every [`VIOLATIONS_EVERY`].
//! * What the GPU does not support ([`Kept::unsupported`], [`Kept::unsupported_fields`]):
//!   a call or field id that answered `NOT_SUPPORTED` is not asked again until the static
//!   values are read again.
//!
//! A read that failed (other than `NOT_SUPPORTED`) is not kept as fresh: it is read again
//! at the next scrape and counted again, as every failing call is.

use std::time::{Duration, Instant};

use super::types::Identity;

/// How often static values are read again even when nothing happened to the GPU.
pub const STATIC_REFRESH: Duration = Duration::from_secs(600);

/// How often the PCIe replay counter is read.
pub const REPLAYS_EVERY: Duration = Duration::from_secs(30);

/// How often the NVLink5 FEC history is read unless `--collector.gpu.fec-history-interval`
/// says otherwise.
pub const FEC_HISTORY_EVERY: Duration = Duration::from_secs(60);

/// How often the energy counter is read.
pub const ENERGY_EVERY: Duration = Duration::from_secs(60);

/// How often the violation counters are read.
pub const VIOLATIONS_EVERY: Duration = Duration::from_secs(300);

/// What does not change while the driver is loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Statics {
    /// UUID, name, serial, PCI address, NUMA node.
    pub identity: Identity,
    /// Max clocks in MHz, `sm` then `memory` (`nvmlDeviceGetMaxClockInfo`).
    pub max_clocks: [(&'static str, Option<u32>); 2],
    /// Max PCIe generation and width.
    pub max_pcie: (Option<u32>, Option<u32>),
    /// NVLinks NVML knows (field 91), 0 when it does not say.
    pub nvlink_count: u32,
    /// C2C mode (`nvmlDeviceGetC2cModeInfoV`), `None` where not supported.
    pub c2c_enabled: Option<bool>,
}

/// One link's FEC history: `(bin, codewords)`.
pub type FecBins = Vec<(u8, u64)>;

/// A value and when it was read; `at: None` means "read again at the next chance", while
/// the value is still shown (a lost GPU keeps its identity).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timed<T> {
    /// The last value read.
    pub value: T,
    /// When it was read, `None` when it is to be read again.
    pub at: Option<Instant>,
}

impl<T> Timed<T> {
    /// Whether it is to be read at `now`, given that it is read every `every`.
    pub fn due(&self, now: Instant, every: Duration) -> bool {
        self.at
            .is_none_or(|at| now.saturating_duration_since(at) >= every)
    }

    /// Keeps `value`, read at `now`; `clean` false (a call failed) reads it again next time.
    pub fn set(&mut self, value: T, now: Instant, clean: bool) {
        self.value = value;
        self.at = clean.then_some(now);
    }
}

/// What an active NVLink connects to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkIdentity {
    /// `nvmlDeviceGetNvLinkVersion`, raw.
    pub version: Option<u32>,
    /// The remote end's PCI address (sysfs form).
    pub remote_pci_address: Option<String>,
    /// `gpu`, `switch`, `ibmnpu` or `unknown`.
    pub remote_type: Option<&'static str>,
}

/// Everything kept of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// Static values; `None` until first read.
    pub statics: Timed<Option<Statics>>,
    /// What each active link (by index) connects to, read without a failure.
    pub links: Vec<(u32, LinkIdentity)>,
    /// The PCIe replay counter.
    pub replays: Timed<Option<u32>>,
    /// The NVLink5 FEC history bins, by active link.
    pub fec_history: Timed<Vec<(u32, FecBins)>>,
    /// The energy counter, mJ.
    pub energy: Timed<Option<u64>>,
    /// Violation time per policy, ns.
    pub violations: Timed<Vec<(&'static str, u64)>>,
    /// Calls (by name) that answered `NOT_SUPPORTED` since the statics were last read.
    pub unsupported: Vec<&'static str>,
    /// Field ids that answered `NOT_SUPPORTED` since the statics were last read.
    pub unsupported_fields: Vec<u32>,
}

/// Which kept values a reading of a GPU at some instant reads again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Identity, max clocks, max PCIe link, NVLink count.
    pub statics: bool,
    /// The PCIe replay counter.
    pub replays: bool,
    /// The energy counter.
    pub energy: bool,
    /// The violation counters.
    pub violations: bool,
}

impl Kept {
    /// What a reading at `now` reads again.
    pub fn plan(&self, now: Instant) -> Plan {
        Plan {
            statics: self.statics.value.is_none() || self.statics.due(now, STATIC_REFRESH),
            replays: self.replays.due(now, REPLAYS_EVERY),
            energy: self.energy.due(now, ENERGY_EVERY),
            violations: self.violations.due(now, VIOLATIONS_EVERY),
        }
    }

    /// Whether a reading at `now` reads the FEC history, read every `every` (zero: never).
    pub fn fec_history_due(&self, now: Instant, every: Duration) -> bool {
        !every.is_zero() && self.fec_history.due(now, every)
    }

    /// Forgets what was unsupported, so that it is asked again (with the statics).
    pub fn forget_unsupported(&mut self) {
        self.unsupported.clear();
        self.unsupported_fields.clear();
    }

    /// Whether `call` answered `NOT_SUPPORTED` since the statics were read.
    pub fn is_unsupported(&self, call: &str) -> bool {
        self.unsupported.contains(&call)
    }

    /// Remembers that `call` answered `NOT_SUPPORTED`.
    pub fn set_unsupported(&mut self, call: &'static str) {
        if !self.is_unsupported(call) {
            self.unsupported.push(call);
        }
    }

    /// The GPU was lost, timed out or failed: everything is read again when it answers,
    /// while the identity it had is still shown.
    pub fn invalidate(&mut self) {
        self.statics.at = None;
        self.replays.at = None;
        self.fec_history.at = None;
        self.energy.at = None;
        self.violations.at = None;
        self.links.clear();
        self.forget_unsupported();
    }

    /// What active link `link` connects to, if kept.
    pub fn link(&self, link: u32) -> Option<&LinkIdentity> {
        self.links
            .iter()
            .find(|(l, _)| *l == link)
            .map(|(_, id)| id)
    }

    /// Keeps (`Some`) or forgets (`None`) what link `link` connects to.
    pub fn set_link(&mut self, link: u32, identity: Option<LinkIdentity>) {
        self.links.retain(|(l, _)| *l != link);
        if let Some(identity) = identity {
            self.links.push((link, identity));
        }
    }

    /// The identity last read, or an empty one.
    pub fn identity(&self) -> Identity {
        self.statics
            .value
            .as_ref()
            .map(|s| s.identity.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statics(uuid: &str) -> Statics {
        Statics {
            identity: Identity {
                uuid: Some(uuid.to_owned()),
                ..Identity::default()
            },
            max_clocks: [("sm", Some(1980)), ("memory", Some(2619))],
            max_pcie: (Some(5), Some(16)),
            nvlink_count: 18,
            c2c_enabled: Some(false),
        }
    }

    #[test]
    fn everything_is_read_at_first() {
        let kept = Kept::default();
        assert_eq!(
            kept.plan(Instant::now()),
            Plan {
                statics: true,
                replays: true,
                energy: true,
                violations: true,
            }
        );
    }

    #[test]
    fn static_values_are_not_read_again_within_the_refresh_interval() {
        let t0 = Instant::now();
        let mut kept = Kept::default();
        kept.statics.set(Some(statics("GPU-a")), t0, true);
        kept.replays.set(Some(3), t0, true);
        for after in [1, 29, 300, 599] {
            let plan = kept.plan(t0 + Duration::from_secs(after));
            assert!(!plan.statics, "re-read {after} s after");
            assert_eq!(plan.replays, after >= 30, "replays {after} s after");
        }
        assert!(kept.plan(t0 + STATIC_REFRESH).statics);
        assert!(
            kept.plan(t0 + STATIC_REFRESH + Duration::from_secs(1))
                .statics
        );
    }

    #[test]
    fn everything_is_read_again_when_the_gpu_comes_back() {
        let t0 = Instant::now();
        let mut kept = Kept::default();
        kept.statics.set(Some(statics("GPU-a")), t0, true);
        kept.replays.set(Some(3), t0, true);
        // Lost (or timed out, or failed) one second later.
        kept.invalidate();
        assert_eq!(
            kept.identity().uuid.as_deref(),
            Some("GPU-a"),
            "still shown"
        );
        assert_eq!(
            kept.plan(t0 + Duration::from_secs(2)),
            Plan {
                statics: true,
                replays: true,
                energy: true,
                violations: true,
            },
            "read again as soon as it answers"
        );
        // Once read again, the clock starts over.
        let t1 = t0 + Duration::from_secs(2);
        kept.statics.set(Some(statics("GPU-b")), t1, true);
        kept.replays.set(Some(4), t1, true);
        assert!(!kept.plan(t1 + Duration::from_secs(10)).statics);
        assert_eq!(kept.identity().uuid.as_deref(), Some("GPU-b"));
    }

    #[test]
    fn the_fec_history_is_read_on_its_interval_and_again_after_a_loss() {
        let t0 = Instant::now();
        let mut kept = Kept::default();
        kept.fec_history
            .set(vec![(0, vec![(0, 9), (1, 2)])], t0, true);
        for after in [1, 59, 60, 61] {
            let due = kept.fec_history_due(t0 + Duration::from_secs(after), FEC_HISTORY_EVERY);
            assert_eq!(due, after >= 60, "fec history {after} s after");
        }
        assert!(
            !kept.fec_history_due(t0 + Duration::from_secs(120), Duration::ZERO),
            "off"
        );
        kept.invalidate();
        assert!(kept.fec_history_due(t0 + Duration::from_secs(1), FEC_HISTORY_EVERY));
        assert_eq!(
            kept.fec_history.value,
            vec![(0, vec![(0, 9), (1, 2)])],
            "still shown"
        );
    }

    #[test]
    fn energy_and_violations_are_read_on_their_own_cadences() {
        let t0 = Instant::now();
        let mut kept = Kept::default();
        kept.energy.set(Some(5_114_060), t0, true);
        kept.violations.set(vec![("power", 3)], t0, true);
        for after in [1, 15, 59, 60, 61, 299, 300] {
            let plan = kept.plan(t0 + Duration::from_secs(after));
            assert_eq!(plan.energy, after >= 60, "energy {after} s after");
            assert_eq!(plan.violations, after >= 300, "violations {after} s after");
        }
    }

    #[test]
    fn what_is_unsupported_is_asked_again_only_with_the_statics_or_after_a_loss() {
        let mut kept = Kept::default();
        kept.set_unsupported("nvmlDeviceGetMigMode");
        kept.set_unsupported("nvmlDeviceGetMigMode");
        kept.unsupported_fields.push(170);
        assert!(kept.is_unsupported("nvmlDeviceGetMigMode"));
        assert_eq!(kept.unsupported, vec!["nvmlDeviceGetMigMode"]);
        assert!(!kept.is_unsupported("nvmlDeviceGetEncoderUtilization"));
        kept.invalidate();
        assert!(!kept.is_unsupported("nvmlDeviceGetMigMode"));
        assert!(kept.unsupported_fields.is_empty());
        kept.set_unsupported("nvmlDeviceGetMigMode");
        kept.forget_unsupported();
        assert!(kept.unsupported.is_empty());
    }

    #[test]
    fn a_failed_read_is_read_again_at_the_next_scrape() {
        let t0 = Instant::now();
        let mut kept = Kept::default();
        kept.statics.set(Some(statics("GPU-a")), t0, false);
        kept.replays.set(None, t0, false);
        let plan = kept.plan(t0 + Duration::from_millis(1));
        assert!(plan.statics && plan.replays);
    }

    #[test]
    fn a_clock_that_goes_back_does_not_stall_the_cadence() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut kept = Kept::default();
        kept.statics.set(Some(statics("GPU-a")), t0, true);
        // `now` before the read (a reading that started earlier): not due, no panic.
        assert!(!kept.plan(t0 - Duration::from_secs(1)).statics);
    }

    #[test]
    fn what_a_link_connects_to_is_kept_until_the_gpu_or_the_link_changes() {
        let mut kept = Kept::default();
        let switch = LinkIdentity {
            version: Some(4),
            remote_pci_address: Some("0000:05:00.0".to_owned()),
            remote_type: Some("switch"),
        };
        kept.set_link(3, Some(switch.clone()));
        assert_eq!(kept.link(3), Some(&switch));
        assert_eq!(kept.link(4), None);
        // The link went down: forgotten.
        kept.set_link(3, None);
        assert_eq!(kept.link(3), None);
        kept.set_link(3, Some(switch));
        kept.invalidate();
        assert_eq!(kept.link(3), None, "read again when the GPU comes back");
    }
}
