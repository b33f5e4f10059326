//! The real kernel RDMA stack in a QEMU VM (Soft-RoCE, Soft-iWARP), and the sysfs capture it made.
//! `lab` boots a VM and takes minutes.
//!
//! * [`lab`]: `tests/lab/lab.sh` under QEMU, scrapes asserted against the guest's own readings.
//! * [`softroce_live`]: the live rxe/siw sysfs capture and what the agent shows of it.
//!
//! Run this binary with `cargo test -p railscope-tests --test lab`, one module of it with
//! `cargo test -p railscope-tests --test lab lab::`, and one test with
//! `cargo test -p railscope-tests --test lab -- --exact lab::<test name>`.

mod lab;
mod softroce_live;
