//! Broken and hostile systems: fault scenarios on fixture trees, a FUSE sysfs that misbehaves on
//! chosen paths, and the agent run unprivileged.
//!
//! * [`faults`]: broken files and devices cost only their own series.
//! * [`hostile_sysfs`]: a FUSE mirror that fails, blocks and lies (needs /dev/fuse).
//! * [`privileges`]: the agent as uid 65534 without capabilities.
//!
//! Run this binary with `cargo test -p railscope-tests --test faults`, one module of it with
//! `cargo test -p railscope-tests --test faults faults::`, and one test with
//! `cargo test -p railscope-tests --test faults -- --exact faults::<test name>`.

mod faults;
mod hostile_sysfs;
mod privileges;
