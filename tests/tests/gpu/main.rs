//! The `gpu` and `workload` sources against the fake NVML library, and a kubelet's PodResources
//! service.
//!
//! * [`gpu`]: health, hangs, lost GPUs, XIDs, PCIe sampling, `scripts/gpu-check`.
//! * [`gpu_activity`]: GPM activity, MIG, energy and clock counters.
//! * [`rack`]: GB200 NVL72 trays: platform info (chassis, slot, tray, module), C2C mode,
//!   NVLink5 FEC history.
//! * [`workload`]: pods, Slurm jobs and units holding GPUs and RDMA devices.
//!
//! Run this binary with `cargo test -p railscope-tests --test gpu`, one module of it with
//! `cargo test -p railscope-tests --test gpu gpu::`, and one test with
//! `cargo test -p railscope-tests --test gpu -- --exact gpu::<test name>`.

mod gpu;
mod gpu_activity;
mod rack;
mod workload;
