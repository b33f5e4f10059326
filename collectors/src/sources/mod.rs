//! The sources, one folder each, every folder with the same shape: `mod.rs` holds the
//! source (its options, how it is built and how one collection runs), `types.rs` the plain
//! data it returns, and the reading and the pure parsing in modules of their own.
//!
//! A source imports the shared ground (`fs`, `sysfs`, `netlink`, `pcie`, `netdevs`,
//! `error`, `source`, `run`) and never another source; the list of sources is
//! [`crate::registry`].

pub mod dcb;
pub mod devlink;
pub mod ethtool;
pub mod gpu;
pub mod host;
pub mod hwmon;
pub mod infiniband;
pub mod kmsg;
pub mod neighbour;
pub mod netdev;
pub mod pci;
pub mod phy;
pub mod topology;
pub mod transceiver;
pub mod workload;
