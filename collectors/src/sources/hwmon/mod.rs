//! The `hwmon` source: NIC ASIC and transceiver-module temperatures from the hwmon devices
//! of the node's NIC PCI functions (`Documentation/hwmon/sysfs-interface.rst`).
//!
//! The NIC functions are those of the RDMA devices (`/sys/class/infiniband/<dev>/device`)
//! and of the netdevs (`/sys/class/net/<if>/device`) that are PCI functions. A function's
//! hwmon device is the first entry of `/sys/bus/pci/devices/<bdf>/hwmon/`, of any driver
//! (its `name` says which). The mlx5 driver (`drivers/net/ethernet/mellanox/mlx5/core/hwmon.c`,
//! 6.5+) registers one named `mlx5` with a channel per ASIC sensor (firmware names it
//! `asic`) and one for the transceiver module (`Module0`): on an InfiniBand port it is the
//! only module temperature there is (IPoIB has no module EEPROM ops).
//!
//! Per channel `N`: `temp<N>_input` and `temp<N>_highest` every scrape; `temp<N>_crit`,
//! `temp<N>_label`, `name` and the listing of the directory every [`KNOWN_FOR`] and after any
//! failed read of the function. Each mlx5 attribute read is one MTMP register query through
//! the NIC's firmware, so what does not change is not asked again. The values are read
//! through `/sys/class/hwmon/hwmonN/`: the hwmon device is a device of its own to the
//! guard, and a firmware command that blocks costs the temperatures only, never the PCI
//! function's link and AER series.
//!
//! A missing attribute is no series; a malformed one costs its own series and counts an
//! error; `ENODATA` (the hwmon ABI's "no reading now") is no series and no error.

mod parse;
mod types;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

pub use parse::{MAX_SENSOR_NAME, millidegrees, sensor_name, temp_attribute};
pub use types::{NicHwmon, Sensor, Snapshot};

use crate::error::CollectError;
use crate::fs::attr::{self, Attrs};
use crate::fs::{Fs, Roots, is_pci_address};
use crate::pcie;
use crate::run::{Run, gather};
use crate::source::{Build, Report, Source, SourceBuildError, Spec};

pub use crate::fs::attr::KNOWN_FOR;

/// The registry entry of this source.
pub const SPEC: Spec = Spec {
    name: "hwmon",
    help: "NIC ASIC and transceiver-module temperatures (current, highest, critical) from the hwmon devices of RDMA and netdev PCI functions.",
    default_enabled: true,
    options: &[],
};

/// The errnos that mean "no reading now" rather than a failure: `ENODATA`
/// (sysfs-interface.rst: a sensor that cannot give a value).
const NO_READING: &[i32] = &[libc::ENODATA];

/// The NIC functions: RDMA devices and netdevs by PCI address.
type Functions = BTreeMap<String, (Vec<String>, Vec<String>)>;

/// What does not change about one channel.
#[derive(Debug, Clone, PartialEq)]
struct Channel {
    channel: u32,
    sensor: String,
    critical: Option<f64>,
    has_input: bool,
    has_highest: bool,
}

/// What does not change about a function's hwmon device; `None` when it has none.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    device: Option<Device>,
    read_at: Instant,
}

#[derive(Debug, Clone, PartialEq)]
struct Device {
    hwmon: String,
    chip: Option<String>,
    channels: Vec<Channel>,
}

/// Reads the hwmon devices of NIC PCI functions.
#[derive(Debug)]
pub struct HwmonSource {
    fs: Arc<dyn Fs>,
    sysfs: PathBuf,
    layouts: Mutex<HashMap<String, Layout>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HwmonSource {
    /// A source over `roots`.
    pub fn new(roots: &Roots, fs: Arc<dyn Fs>) -> Self {
        HwmonSource {
            fs,
            sysfs: roots.sysfs.clone(),
            layouts: Mutex::new(HashMap::new()),
        }
    }

    /// The NIC PCI functions, with their RDMA devices and netdevs.
    fn functions(&self, errors: &mut Vec<CollectError>) -> Functions {
        let fs = self.fs.as_ref();
        let mut out = Functions::new();
        for f in pcie::rdma_functions(fs, &self.sysfs, errors) {
            out.entry(f.address).or_default().0.push(f.device);
        }
        let class = self.sysfs.join("class/net");
        for netdev in fs.read_dir(&class).unwrap_or_default() {
            // Virtual netdevs have no `device` link; one that cannot be read is no NIC here.
            if let Some(address) = attr::peek_link(fs, &class.join(&netdev.name).join("device"))
                .filter(|a| is_pci_address(a))
            {
                out.entry(address).or_default().1.push(netdev.name);
            }
        }
        out
    }

    /// Reads what does not change about the hwmon device of the function at `address`.
    fn layout(&self, address: &str, errors: &mut Vec<CollectError>) -> Option<Device> {
        let fs = self.fs.as_ref();
        let dir = self
            .sysfs
            .join("bus/pci/devices")
            .join(address)
            .join("hwmon");
        let entries = Attrs::new(fs, None, errors).list(&dir)?;
        let hwmon = entries
            .into_iter()
            .find(|e| e.name.starts_with("hwmon"))?
            .name;
        let dev = self.sysfs.join("class/hwmon").join(&hwmon);
        let mut attrs = Attrs::new(fs, None, errors).unknown_on(NO_READING);
        let chip = attrs.string(&dev.join("name"));
        let files = attrs.list(&dev)?;
        let mut found: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for file in &files {
            if let Some((channel, what)) = temp_attribute(&file.name) {
                found.entry(channel).or_default().push(what.to_owned());
            }
        }
        let channels = found
            .into_iter()
            .map(|(channel, what)| {
                let has = |a: &str| what.iter().any(|w| w == a);
                let label = has("label")
                    .then(|| attrs.string(&dev.join(format!("temp{channel}_label"))))
                    .flatten();
                let critical = has("crit")
                    .then(|| attrs.parsed(&dev.join(format!("temp{channel}_crit")), millidegrees))
                    .flatten();
                Channel {
                    channel,
                    sensor: sensor_name(label.as_deref(), channel),
                    critical,
                    has_input: has("input"),
                    has_highest: has("highest"),
                }
            })
            .collect();
        Some(Device {
            hwmon,
            chip,
            channels,
        })
    }

    /// Reads the function at `address`: its layout (kept, or read now) and its temperatures.
    fn read(
        &self,
        address: &str,
        rdma_devices: &[String],
        netdevs: &[String],
    ) -> (Option<NicHwmon>, Vec<CollectError>) {
        let mut errors = Vec::new();
        let kept = lock(&self.layouts)
            .get(address)
            .filter(|l| l.read_at.elapsed() < KNOWN_FOR)
            .cloned();
        let layout = match kept {
            Some(layout) => layout,
            None => Layout {
                device: self.layout(address, &mut errors),
                read_at: Instant::now(),
            },
        };
        let Some(device) = layout.device.clone() else {
            self.keep(address, layout, &errors);
            return (None, errors);
        };
        let dev = self.sysfs.join("class/hwmon").join(&device.hwmon);
        let fs = self.fs.as_ref();
        let mut attrs = Attrs::new(fs, None, &mut errors).unknown_on(NO_READING);
        let mut value =
            |wanted: bool, path: &Path| wanted.then(|| attrs.parsed(path, millidegrees)).flatten();
        let sensors = device
            .channels
            .iter()
            .map(|c| Sensor {
                channel: c.channel,
                sensor: c.sensor.clone(),
                temperature: value(c.has_input, &dev.join(format!("temp{}_input", c.channel))),
                highest: value(
                    c.has_highest,
                    &dev.join(format!("temp{}_highest", c.channel)),
                ),
                critical: c.critical,
            })
            .collect();
        self.keep(address, layout, &errors);
        let nic = NicHwmon {
            pci_address: address.to_owned(),
            rdma_devices: rdma_devices.to_vec(),
            netdevs: netdevs.to_vec(),
            hwmon: device.hwmon,
            chip: device.chip,
            sensors,
        };
        (Some(nic), errors)
    }

    /// Keeps `layout` for the next scrapes when the function's reads had no errors; forgets
    /// it otherwise, so the next scrape reads it again.
    fn keep(&self, address: &str, layout: Layout, errors: &[CollectError]) {
        let mut kept = lock(&self.layouts);
        if errors.is_empty() {
            kept.insert(address.to_owned(), layout);
        } else {
            kept.remove(address);
        }
    }
}

impl Source for HwmonSource {
    type Data = Snapshot;
    const SPEC: Spec = SPEC;

    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError> {
        Ok(HwmonSource::new(from.roots, Arc::clone(&from.fs)))
    }

    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Snapshot> {
        let mut errors = Vec::new();
        let functions = Arc::new(self.functions(&mut errors));
        // Forget what was kept of functions that left.
        lock(&self.layouts).retain(|address, _| functions.contains_key(address));
        // One unit per function: a firmware command that hangs costs that NIC only.
        let src = Arc::clone(self);
        let keys: Vec<String> = functions.keys().cloned().collect();
        let of = Arc::clone(&functions);
        let units = run.each(keys, 1, move |address| match of.get(address) {
            Some((rdma, netdevs)) => src.read(address, rdma, netdevs),
            None => (None, Vec::new()),
        });
        let nics = gather(units, &mut errors);
        if nics.is_empty() && errors.is_empty() {
            return Report::absent(
                Snapshot::default(),
                "no NIC PCI function has a hwmon device",
            );
        }
        Report::new(Snapshot { nics }, errors)
    }
}

#[cfg(test)]
mod tests;
