//! Property tests of the rail map parser (`--collector.topology.rails`). See
//! [`crate::strategies`] for the two kinds of property.

use proptest::prelude::*;

use crate::sources::topology;
use crate::strategies::{config, text};

/// A rail map key: a device, `device/port` or PCI address; no `,` or `=`, trimmed.
fn rail_key() -> impl Strategy<Value = String> {
    "[^,=\\s]([^,=]{0,20}[^,=\\s])?"
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn rail_map_parser_never_panics(text in text()) {
        let _ = topology::parse_rail_map(&text);
    }

    #[test]
    fn rail_maps_round_trip(
        map in prop::collection::btree_map(rail_key(), any::<u32>(), 0..10),
        pad in "[ ]{0,2}",
    ) {
        let text = map.iter().map(|(k, v)| format!("{pad}{k}{pad}={pad}{v}{pad}")).collect::<Vec<_>>().join(",");
        prop_assert_eq!(topology::parse_rail_map(&text), Ok(map.clone()));
        if let Some((k, v)) = map.iter().next() {
            let twice = format!("{text},{k}={v}");
            prop_assert!(topology::parse_rail_map(&twice).is_err());
        }
    }
}
