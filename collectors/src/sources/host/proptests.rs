//! Property tests of the host source's parsers: the kernel command line's IOMMU parameters
//! and the memlock limits of `/proc/<pid>/limits`. See [`crate::strategies`] for the two
//! kinds of property.

use proptest::prelude::*;

use crate::sources::host;
use crate::strategies::{config, text};

fn limit_value() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        any::<u64>().prop_map(Some),
        (0u64..1 << 30).prop_map(Some)
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn host_parsers_never_panic(text in text()) {
        let params = host::iommu_params(&text);
        for p in params.split_whitespace() {
            prop_assert!(text.split_whitespace().any(|t| t == p));
        }
        let _ = host::iommu_mode(1, &[], &text);
        let _ = host::parse_memlock(&text);
        let _ = host::parse_memlock(&format!("Max locked memory{text}"));
    }

    /// `proc_pid_limits()`: `"%-25s %-20s %-20s %-10s\n"`, `unlimited` or the value.
    #[test]
    fn memlock_round_trips(soft in limit_value(), hard in limit_value(), before in 0usize..8) {
        let show = |v: Option<u64>| v.map_or("unlimited".to_owned(), |v| v.to_string());
        let mut text = String::from("Limit                     Soft Limit           Hard Limit           Units     \n");
        for i in 0..before {
            text.push_str(&format!("{:<25} {:<20} {:<20} {:<10}\n", format!("Max thing {i}"), "unlimited", 5, "bytes"));
        }
        text.push_str(&format!("{:<25} {:<20} {:<20} {:<10}\n", "Max locked memory", show(soft), show(hard), "bytes"));
        text.push_str("Max address space         unlimited            unlimited            bytes     \n");
        prop_assert_eq!(host::parse_memlock(&text), Some(host::Limit { soft, hard }));
    }

    #[test]
    fn iommu_params_are_picked_from_the_command_line(
        tokens in prop::collection::vec(prop_oneof![
            prop::sample::select(vec!["iommu=pt", "iommu=off", "intel_iommu=on", "amd_iommu=off",
                "iommu.passthrough=1", "iommu.strict=0", "quiet", "ro", "root=/dev/sda1",
                "iommu_foo=1", "intel_iommu_x"]).prop_map(str::to_owned),
            "[a-z_.=0-9]{1,12}",
        ], 0..12),
        sep in "[ \t]{1,3}",
    ) {
        let cmdline = tokens.join(&sep) + "\n";
        let want: Vec<&str> = tokens.iter().map(String::as_str).filter(|t| {
            let key = t.split('=').next().unwrap_or_default();
            key == "iommu" || key.starts_with("iommu.") || key == "intel_iommu" || key == "amd_iommu"
        }).collect();
        prop_assert_eq!(host::iommu_params(&cmdline), want.join(" "));
    }
}
