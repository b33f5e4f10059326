//! Maps the `dcb` source's snapshot to metric families.
//!
//! Names: `railscope_dcb_pfc_*`, with a `priority` label (0–7) for per-priority series.
//! `requests` and `indications` keep the kernel's names (`struct ieee_pfc`) because their
//! direction depends on the driver: mlx5, ice, i40e and hns3 count sent PFC frames in
//! `requests` and received ones in `indications` (as `include/uapi/linux/dcbnl.h` says);
//! ixgbe and kvx swap them. Join `railscope_netdev_info{driver}` on `netdev` to tell which.
//! mlx5 reports cached values that only an `ETHTOOL_GSTATS` (`ethtool -S`) refreshes.

use railscope_collectors::sources::dcb::Snapshot;

use crate::exposition::Family;

/// The `dcb` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut capability = Family::gauge(
        "railscope_dcb_pfc_capability",
        "Traffic classes that may have PFC enabled at once (ieee_pfc.pfc_cap).",
    );
    let mut enabled = Family::gauge(
        "railscope_dcb_pfc_enabled",
        "1 when Priority Flow Control is enabled on the priority (ieee_pfc.pfc_en), 0 when not.",
    );
    let mut requests = Family::counter(
        "railscope_dcb_pfc_requests",
        "PFC frames of the priority as the driver counts ieee_pfc.requests: sent on mlx5, ice, i40e and hns3, received on ixgbe and kvx; mlx5 values are cached until an ETHTOOL_GSTATS refreshes them.",
    );
    let mut indications = Family::counter(
        "railscope_dcb_pfc_indications",
        "PFC frames of the priority as the driver counts ieee_pfc.indications: received on mlx5, ice, i40e and hns3, sent on ixgbe and kvx; mlx5 values are cached until an ETHTOOL_GSTATS refreshes them.",
    );
    for nd in &snapshot.netdevs {
        capability.push([("netdev", nd.name.clone())], u64::from(nd.pfc.pfc_cap));
        for priority in 0..8 {
            let labels = vec![
                ("netdev", nd.name.clone()),
                ("priority", priority.to_string()),
            ];
            enabled.push(labels.clone(), nd.pfc.enabled(priority));
            requests.push(labels.clone(), nd.pfc.requests[priority]);
            indications.push(labels, nd.pfc.indications[priority]);
        }
    }
    vec![capability, enabled, requests, indications]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{Format, encode};
    use railscope_collectors::sources::dcb::{IeeePfc, NetdevPfc};

    #[test]
    fn pfc_on_priority_3() {
        let mut pfc = IeeePfc {
            pfc_cap: 8,
            pfc_en: 0x08,
            ..IeeePfc::default()
        };
        pfc.requests[3] = 1_234_567;
        pfc.indications[3] = 89_012;
        let snapshot = Snapshot {
            netdevs: vec![NetdevPfc {
                name: "ens1f0np0".into(),
                pfc,
            }],
        };
        let text = encode(families(&snapshot), Format::Prometheus);
        for line in [
            "railscope_dcb_pfc_capability{netdev=\"ens1f0np0\"} 8",
            "railscope_dcb_pfc_enabled{netdev=\"ens1f0np0\",priority=\"3\"} 1",
            "railscope_dcb_pfc_enabled{netdev=\"ens1f0np0\",priority=\"4\"} 0",
            "railscope_dcb_pfc_requests_total{netdev=\"ens1f0np0\",priority=\"3\"} 1234567",
            "railscope_dcb_pfc_indications_total{netdev=\"ens1f0np0\",priority=\"3\"} 89012",
            "railscope_dcb_pfc_requests_total{netdev=\"ens1f0np0\",priority=\"0\"} 0",
        ] {
            assert!(
                text.contains(&format!("{line}\n")),
                "missing {line} in\n{text}"
            );
        }
        assert_eq!(text.matches("railscope_dcb_pfc_enabled{").count(), 8);
    }

    #[test]
    fn no_netdevs_no_series() {
        let text = encode(families(&Snapshot::default()), Format::Prometheus);
        assert_eq!(text, "");
    }
}
