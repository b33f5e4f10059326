//! The ethtool generic netlink family (`"ethtool"`, version 1), shared by the sources that
//! ask it: `phy` (FEC, standard statistics, link state) and `transceiver` (module EEPROM).
//!
//! Kernel interface: `include/uapi/linux/ethtool_netlink.h` (6.14+:
//! `ethtool_netlink_generated.h`, generated from `Documentation/netlink/specs/ethtool.yaml`),
//! `Documentation/networking/ethtool-netlink.rst`. Every request carries a header nest
//! naming the device by index or name and the request's flags; every reply carries the same
//! header naming the device it answers for.

use super::genl::Attrs;

/// The family's name, as `nlctrl` knows it.
pub const FAMILY: &str = "ethtool";
/// `ETHTOOL_GENL_VERSION`.
pub const VERSION: u8 = 1;

/// `ETHTOOL_A_HEADER_DEV_INDEX` (u32).
pub const A_HEADER_DEV_INDEX: u16 = 1;
/// `ETHTOOL_A_HEADER_DEV_NAME` (string).
pub const A_HEADER_DEV_NAME: u16 = 2;
/// `ETHTOOL_A_HEADER_FLAGS` (u32).
pub const A_HEADER_FLAGS: u16 = 3;

/// `ETHTOOL_FLAG_COMPACT_BITSETS`: bitsets as value/mask arrays rather than named bits.
pub const FLAG_COMPACT_BITSETS: u32 = 1 << 0;
/// `ETHTOOL_FLAG_OMIT_REPLY`.
pub const FLAG_OMIT_REPLY: u32 = 1 << 1;
/// `ETHTOOL_FLAG_STATS`: include statistics in the reply (FEC, pause, ...).
pub const FLAG_STATS: u32 = 1 << 2;

/// The request header nest for the netdev `ifindex` with `flags` (no flags attribute when
/// `flags` is 0, as ethtool(8) sends it).
pub fn header(ifindex: u32, flags: u32) -> Attrs {
    let h = Attrs::new().u32(A_HEADER_DEV_INDEX, ifindex);
    if flags == 0 {
        h
    } else {
        h.u32(A_HEADER_FLAGS, flags)
    }
}
