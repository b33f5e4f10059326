//! Call costs (`src/costs/`): with costs on, a call takes the wall time and burns the CPU
//! time it does on a real H200; with costs off (the default) it answers at once.
//!
//! Machines are noisy (and these tests share theirs): slow paths are checked with lower
//! bounds and ratios only; fast paths take the quickest of a few calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Fake, shipped};
use nvidia_ml_fake::costs::thread_cpu_time;
use nvidia_ml_fake::fixture::{CallCost, Costs, Fixture};
use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter};
use nvml_wrapper::structs::device::FieldId;

const MS: Duration = Duration::from_millis(1);

/// Runs `f` and returns its result, wall time and this thread's CPU time.
fn measure<T>(f: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let cpu = thread_cpu_time().expect("thread CPU clock");
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed();
    let cpu = thread_cpu_time().expect("thread CPU clock") - cpu;
    (out, wall, cpu)
}

/// The quickest wall time of five calls.
fn quickest<T>(mut f: impl FnMut() -> T) -> Duration {
    (0..5).map(|_| measure(&mut f).1).min().unwrap()
}

fn pcie_tx(device: &Device<'_>) -> u32 {
    device.pcie_throughput(PcieUtilCounter::Send).unwrap()
}

fn max_sm_clock(device: &Device<'_>) -> u32 {
    device.max_clock_info(Clock::SM).unwrap()
}

/// The H200 fixture with its costs replaced.
fn h200_with(costs: Option<Costs>) -> Fixture {
    let mut fixture = shipped("h200-1gpu.json");
    fixture.costs = costs;
    fixture
}

#[test]
fn h200_fixture_pays_what_a_real_h200_pays() {
    let fixture = shipped("h200-1gpu.json");
    assert_eq!(fixture.costs, Some(Costs::default()), "\"costs\": \"h200\"");
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();

    // Samples a 20 ms window: wall time, little CPU.
    let (tx, wall, cpu) = measure(|| pcie_tx(&device));
    assert_eq!(tx, 956);
    assert!(wall >= 20 * MS, "PCIe throughput took {wall:?}");
    assert!(cpu * 2 < wall, "PCIe throughput burned {cpu:?} of {wall:?}");

    // Static, yet 1.7 ms of CPU per call on driver 580.
    let (mhz, _, cpu) = measure(|| max_sm_clock(&device));
    assert_eq!(mhz, 1980);
    assert!(cpu >= MS, "max clock burned {cpu:?}");

    let (mj, _, cpu) = measure(|| device.total_energy_consumption().unwrap());
    assert_eq!(mj, 2_185_636);
    assert!(cpu >= 3 * MS, "energy burned {cpu:?}");

    let (replays, _, cpu) = measure(|| device.pcie_replay_counter().unwrap());
    assert_eq!(replays, 2);
    assert!(cpu >= MS / 10, "replay counter burned {cpu:?}");

    // Field values pay per id: both energy ids, 4.3 ms each.
    let (values, _, cpu) = measure(|| {
        device
            .field_values_for(&[FieldId(83), FieldId(191)])
            .unwrap()
    });
    assert_eq!(values.len(), 2);
    assert!(values.iter().all(Result::is_ok), "{values:?}");
    assert!(cpu >= 6 * MS, "two energy fields burned {cpu:?}");
}

#[test]
fn costs_are_off_unless_switched_on() {
    for name in [
        "h100-sxm-8gpu.json",
        "h100-sxm-8gpu-faults.json",
        "h100-sxm-8gpu-faults-later.json",
        "a100-pcie-4gpu-bridged.json",
        "v100-pcie-no-nvlink.json",
        "h200-matrix.json",
        "h100-mig.json",
        "gb200-tray.json",
    ] {
        assert_eq!(shipped(name).costs, None, "{name}");
    }
    let fake = Fake::new(&h200_with(None));
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let pcie = quickest(|| pcie_tx(&device));
    assert!(pcie < MS, "PCIe throughput took {pcie:?} without costs");
    let clock = quickest(|| max_sm_clock(&device));
    assert!(clock < MS, "max clock took {clock:?} without costs");
    let (_, _, cpu) = measure(|| max_sm_clock(&device));
    assert!(cpu < MS, "max clock burned {cpu:?} without costs");
}

/// The CPU is burned on the calling thread, where the kernel accounts it: in the
/// `utime`/`stime` of `/proc/thread-self/stat` (and so of `/proc/self/stat`).
#[test]
fn burned_cpu_shows_in_proc_stat() {
    /// utime + stime of this thread, in clock ticks (`USER_HZ`, 100 on Linux).
    fn ticks() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 1..];
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // Fields 14 and 15 of proc(5); the first after the command is field 3.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
    let fake = Fake::shipped("h200-1gpu.json");
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let before = ticks();
    // 30 × 1.7 ms ≈ 51 ms of CPU.
    for _ in 0..30 {
        max_sm_clock(&device);
    }
    let burned = ticks() - before;
    assert!(burned >= 3, "{burned} ticks of CPU for 30 max-clock calls");
}

#[test]
fn scale_and_overrides() {
    let mut faster = Costs {
        scale: 0.0,
        ..Costs::default()
    };
    faster.overrides.insert(
        "nvmlDeviceGetPcieThroughput".into(),
        CallCost {
            wall_us: 5000.0,
            cpu_us: 0.0,
        },
    );
    let fake = Fake::new(&h200_with(Some(faster)));
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let (_, wall, _) = measure(|| pcie_tx(&device));
    assert!(wall >= 5 * MS, "overridden PCIe throughput took {wall:?}");
    // Scale 0: everything else is free.
    let clock = quickest(|| max_sm_clock(&device));
    assert!(clock < MS, "max clock took {clock:?} at scale 0");

    let twice = Costs {
        scale: 2.0,
        fields: BTreeMap::from([(
            83,
            CallCost {
                wall_us: 0.0,
                cpu_us: 0.0,
            },
        )]),
        ..Costs::default()
    };
    let fake = Fake::new(&h200_with(Some(twice)));
    let nvml = fake.nvml();
    let device = nvml.device_by_index(0).unwrap();
    let (_, _, cpu) = measure(|| max_sm_clock(&device));
    assert!(cpu >= 3 * MS, "max clock burned {cpu:?} at scale 2");
    // Field 83 made free: the quickest read of it alone is quick, 191 is not.
    let free = quickest(|| device.field_values_for(&[FieldId(83)]).unwrap());
    assert!(free < MS, "free field 83 took {free:?}");
    let (_, _, cpu) = measure(|| device.field_values_for(&[FieldId(191)]).unwrap());
    assert!(cpu >= 6 * MS, "field 191 burned {cpu:?} at scale 2");
}

/// A hung GPU still hangs, and its cost comes on top; `hang_ms` is not a cost.
#[test]
fn hang_ms_stays_separate() {
    let mut fixture = h200_with(Some(Costs {
        scale: 0.0,
        ..Costs::default()
    }));
    fixture.gpus[0].hang_ms = 30;
    let fake = Fake::new(&fixture);
    let nvml = fake.nvml();
    let (device, wall, cpu) = measure(|| nvml.device_by_index(0).unwrap());
    assert!(wall >= 30 * MS, "handle lookup took {wall:?}");
    assert!(cpu * 2 < wall, "a hang is a sleep, yet it burned {cpu:?}");
    let (_, wall, _) = measure(|| max_sm_clock(&device));
    assert!(wall >= 30 * MS, "max clock took {wall:?}");
}

#[test]
fn cost_table_is_what_generate_py_writes() {
    let script = nvidia_ml_fake::fixtures_dir().join("../costs/generate.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--check")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
