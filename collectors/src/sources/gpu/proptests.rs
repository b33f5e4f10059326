//! Property tests of the NVML bus id conversion. See [`crate::strategies`] for the two kinds
//! of property.

use proptest::prelude::*;

use super::pci_to_sysfs;
use crate::fs::is_pci_address;
use crate::strategies::{config, text};

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn nvml_bus_id_conversion_never_panics(text in text()) {
        let _ = pci_to_sysfs(&text);
    }

    /// NVML prints `%08X:%02X:%02X.%X` (upper case, eight-digit domain); sysfs
    /// `%04x:%02x:%02x.%d`.
    #[test]
    fn nvml_bus_ids_become_sysfs_addresses(
        domain in prop_oneof![Just(0u32), 0u32..0x20000],
        bus in any::<u8>(),
        dev in 0u8..32,
        func in 0u8..8,
    ) {
        let sysfs = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func}");
        let nvml = format!("{domain:08X}:{bus:02X}:{dev:02X}.{func:X}");
        prop_assert_eq!(pci_to_sysfs(&nvml), sysfs.clone());
        prop_assert_eq!(pci_to_sysfs(&sysfs), sysfs.clone());
        prop_assert!(is_pci_address(&pci_to_sysfs(&nvml)));
    }
}
