//! The PMA counters the kernel exposes in `ports/<N>/counters/` and their widths
//! (`PORT_PMA_ATTR` / `PORT_PMA_ATTR_EXT` in `drivers/infiniband/core/sysfs.c`).
//!
//! PMA counters saturate at their maximum instead of wrapping, so knowing the width is what
//! makes a stuck counter visible.

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
    /// Whether the value counts 4-byte words (the data counters).
    pub words: bool,
}

const fn fixed(name: &'static str, bits: u32) -> PmaSpec {
    PmaSpec {
        name,
        width: Width::Fixed(bits),
        words: false,
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
    PmaSpec {
        name: "port_xmit_data",
        width: Width::BaseOrExtended,
        words: true,
    },
    PmaSpec {
        name: "port_rcv_data",
        width: Width::BaseOrExtended,
        words: true,
    },
    PmaSpec {
        name: "port_xmit_packets",
        width: Width::BaseOrExtended,
        words: false,
    },
    PmaSpec {
        name: "port_rcv_packets",
        width: Width::BaseOrExtended,
        words: false,
    },
    fixed("unicast_xmit_packets", 64),
    fixed("unicast_rcv_packets", 64),
    fixed("multicast_xmit_packets", 64),
    fixed("multicast_rcv_packets", 64),
];

/// Looks up a counter by its `counters/` file name.
pub fn spec(name: &str) -> Option<&'static PmaSpec> {
    PMA_COUNTERS.iter().find(|s| s.name == name)
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
