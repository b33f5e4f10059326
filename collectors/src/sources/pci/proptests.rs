//! Property tests of the PCI source's parsers: AER counter files and the ACS capability in
//! config space. See [`crate::strategies`] for the two kinds of property.

use proptest::prelude::*;

use crate::sources::pci;
use crate::strategies::{config, text};

/// An AER type name as `aer_stats_attrs` prints them: no whitespace.
fn aer_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "RxErr",
            "BadTLP",
            "BadDLLP",
            "Rollover",
            "Timeout",
            "Undefined",
            "DLP",
            "SDES",
            "TLP",
            "FCP",
            "CmpltTO",
            "CmpltAbrt",
            "UnxCmplt",
            "RxOF",
            "MalfTLP",
            "ECRC",
            "UnsupReq",
            "ACSViol"
        ])
        .prop_map(str::to_owned),
        "[!-~]{1,20}".prop_filter("not a total", |n| !n.starts_with("TOTAL_ERR_")),
    ]
}

/// Extended capabilities at random offsets, the last one possibly ACS.
fn config_space() -> impl Strategy<Value = (Vec<u8>, pci::AcsState)> {
    (
        prop::collection::btree_set(0x41usize..0x3ff, 0..6),
        prop::option::of(any::<u16>()),
        1u32..0xffff,
    )
        .prop_map(|(slots, acs, other)| {
            let mut config = vec![0u8; 4096];
            let mut offsets: Vec<usize> = vec![0x100];
            offsets.extend(slots.into_iter().map(|s| s * 4));
            let other = if other == 0x000d { 1 } else { other };
            for (i, &at) in offsets.iter().enumerate() {
                let next = offsets.get(i + 1).copied().unwrap_or(0);
                let last = i + 1 == offsets.len();
                let id = if last && acs.is_some() { 0x000d } else { other };
                let header = id | (1 << 16) | ((next as u32) << 20);
                config[at..at + 4].copy_from_slice(&header.to_le_bytes());
                if last && let Some(ctrl) = acs {
                    config[at + 6..at + 8].copy_from_slice(&ctrl.to_le_bytes());
                }
            }
            let expect = match acs {
                Some(ctrl) if ctrl & (0x0004 | 0x0008 | 0x0020) != 0 => pci::AcsState::Redirect,
                Some(_) => pci::AcsState::NoRedirect,
                None => pci::AcsState::NoCapability,
            };
            (config, expect)
        })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn pci_parsers_never_panic(text in text(), bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = pci::parse_aer(&text, "correctable");
        let _ = pci::acs_state(&bytes);
    }

    /// Config space is read as root (4096 bytes) or not (64); either way, any content.
    #[test]
    fn acs_walk_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0x104..0x140),
        full in prop::collection::vec(any::<u32>(), 1024),
    ) {
        let _ = pci::acs_state(&bytes);
        let full: Vec<u8> = full.iter().flat_map(|w| w.to_le_bytes()).collect();
        let _ = pci::acs_state(&full);
    }

    #[test]
    fn acs_capability_is_found((config, expect) in config_space()) {
        prop_assert_eq!(pci::acs_state(&config), expect);
    }

    /// `aer_stats_dev_attr()`: `"%s %llu\n"` per type, then `"TOTAL_ERR_* %llu\n"`.
    #[test]
    fn aer_files_round_trip(
        types in prop::collection::vec((aer_name(), any::<u64>()), 0..20),
        total in prop::option::of(any::<u64>()),
    ) {
        let mut text: String = types.iter().map(|(n, c)| format!("{n} {c}\n")).collect();
        if let Some(t) = total {
            text.push_str(&format!("TOTAL_ERR_COR {t}\n"));
        }
        match pci::parse_aer(&text, "correctable") {
            Some(aer) => {
                prop_assert_eq!(aer.total, total);
                prop_assert_eq!(aer.by_type, types);
            }
            None => prop_assert!(types.is_empty() && total.is_none()),
        }
    }
}
