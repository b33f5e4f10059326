//! Real network interfaces in network namespaces (root and iproute2): veths that come and go, the
//! ethtool ioctl, rtnetlink counters and DCB.
//!
//! * [`churn`]: veths created and deleted hundreds of times leave nothing behind.
//! * [`ethtool`]: the veth driver's statistics over SIOCETHTOOL.
//! * [`netdev_dcb`]: rtnetlink counters, MTU and operstate; DCB on a veth.
//! * [`lldp`]: the neighbour source's LLDP receiver against the real lldpd on a veth.
//!
//! Run this binary with `cargo test -p railscope-tests --test net`, one module of it with
//! `cargo test -p railscope-tests --test net churn::`, and one test with
//! `cargo test -p railscope-tests --test net -- --exact churn::<test name>`.

mod churn;
mod ethtool;
mod lldp;
mod netdev_dcb;
