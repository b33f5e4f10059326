//! The PMA counters the kernel exposes in `ports/<N>/counters/`, their widths
//! (`PORT_PMA_ATTR` / `PORT_PMA_ATTR_EXT` in `drivers/infiniband/core/sysfs.c`) and their
//! units.
//!
//! PMA counters saturate at their maximum instead of wrapping, so knowing the width is what
//! makes a stuck counter visible. The data counters (PortXmitData, PortRcvData and their
//! extended forms) count 4-byte words (IBA 16.1.3.5), the others events or packets; the table
//! says how many bytes one unit is, and the exporter multiplies by it.

/// How wide a PMA counter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Always this many bits.
    Fixed(u32),
    /// 32 bits in the base PortCounters group, 64 in the extended groups (data and packets).
    BaseOrExtended,
}

/// One known PMA counter file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmaSpec {
    /// The file name in `counters/`.
    pub name: &'static str,
    /// Its width.
    pub width: Width,
    /// Bytes per unit the counter counts: 4 for the data counters, which count 4-byte words;
    /// 1 for the others, whose values are passed on as they are.
    pub bytes_per_unit: u64,
}

const fn fixed(name: &'static str, bits: u32) -> PmaSpec {
    PmaSpec {
        name,
        width: Width::Fixed(bits),
        bytes_per_unit: 1,
    }
}

/// A data or packet counter of the base group, 64-bit in the extended ones.
const fn base_or_extended(name: &'static str, bytes_per_unit: u64) -> PmaSpec {
    PmaSpec {
        name,
        width: Width::BaseOrExtended,
        bytes_per_unit,
    }
}

/// Every PMA counter file of the current kernel.
pub const PMA_COUNTERS: &[PmaSpec] = &[
    fixed("symbol_error", 16),
    fixed("link_error_recovery", 8),
    fixed("link_downed", 8),
    fixed("port_rcv_errors", 16),
    fixed("port_rcv_remote_physical_errors", 16),
    fixed("port_rcv_switch_relay_errors", 16),
    fixed("port_xmit_discards", 16),
    fixed("port_xmit_constraint_errors", 8),
    fixed("port_rcv_constraint_errors", 8),
    fixed("local_link_integrity_errors", 4),
    fixed("excessive_buffer_overrun_errors", 4),
    fixed("VL15_dropped", 16),
    fixed("port_xmit_wait", 32),
    base_or_extended("port_xmit_data", 4),
    base_or_extended("port_rcv_data", 4),
    base_or_extended("port_xmit_packets", 1),
    base_or_extended("port_rcv_packets", 1),
    fixed("unicast_xmit_packets", 64),
    fixed("unicast_rcv_packets", 64),
    fixed("multicast_xmit_packets", 64),
    fixed("multicast_rcv_packets", 64),
];

/// Looks up a counter by its `counters/` file name.
pub fn spec(name: &str) -> Option<&'static PmaSpec> {
    position(name).map(|i| &PMA_COUNTERS[i])
}

/// Where `name` is in [`PMA_COUNTERS`]: one hash look-up, not a comparison with each name
/// (this runs for every counter of every port on every scrape).
fn position(name: &str) -> Option<usize> {
    type Index = std::collections::HashMap<
        &'static str,
        usize,
        std::hash::BuildHasherDefault<crate::fs::PathHasher>,
    >;
    static INDEX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    INDEX
        .get_or_init(|| {
            PMA_COUNTERS
                .iter()
                .enumerate()
                .map(|(i, s)| (s.name, i))
                .collect()
        })
        .get(name)
        .copied()
}

/// How many bytes one unit of counter `name` is: 4 for the data counters (by their
/// `counters/` name or their legacy `counters_ext/` name), 1 for every other counter, known or
/// not.
pub fn bytes_per_unit(name: &str) -> u64 {
    let name = legacy_ext_name(name).unwrap_or(name);
    spec(name).map_or(1, |s| s.bytes_per_unit)
}

/// Where a counter stands in the kernel's order ([`PMA_COUNTERS`]); unknown ones after all.
pub fn rank(name: &str) -> usize {
    position(name).unwrap_or(usize::MAX)
}

/// Maps a legacy `counters_ext/` file (OFED, kernels before 4.5) to the current
/// `counters/` name. All of them are 64-bit.
pub fn legacy_ext_name(file: &str) -> Option<&'static str> {
    Some(match file {
        "port_rcv_data_64" => "port_rcv_data",
        "port_xmit_data_64" => "port_xmit_data",
        "port_rcv_packets_64" => "port_rcv_packets",
        "port_xmit_packets_64" => "port_xmit_packets",
        "port_unicast_rcv_packets" => "unicast_rcv_packets",
        "port_unicast_xmit_packets" => "unicast_xmit_packets",
        "port_multicast_rcv_packets" => "multicast_rcv_packets",
        "port_multicast_xmit_packets" => "multicast_xmit_packets",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_counters_count_words_in_every_form() {
        for (name, bytes) in [
            ("port_xmit_data", 4),
            ("port_rcv_data", 4),
            ("port_xmit_data_64", 4),
            ("port_rcv_data_64", 4),
            ("port_xmit_packets", 1),
            ("port_rcv_packets_64", 1),
            ("symbol_error", 1),
            ("not_a_pma_counter", 1),
        ] {
            assert_eq!(bytes_per_unit(name), bytes, "{name}");
        }
    }
}
