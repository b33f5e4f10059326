//! The `neighbour` source: the switch and switch port at the far end of each cable.
//!
//! Its InfiniBand reader, [`smp`], asks with directed-route SMPs over umad.

pub mod smp;
