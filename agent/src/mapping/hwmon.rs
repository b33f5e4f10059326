//! Maps the `hwmon` source's snapshot to metric families.
//!
//! Names: `railscope_nic_temperature_*_celsius`, one series per NIC PCI function and
//! temperature channel, labelled `device` (the function's RDMA devices, comma-joined; empty
//! for an Ethernet NIC without one), `pci_address`, `sensor` (the channel's label as a label
//! value: `asic`, `module0`) and `channel` (its index). The netdevs, the hwmon device and the
//! driver's chip name are on `railscope_nic_hwmon_info`.

use railscope_collectors::sources::hwmon::Snapshot;

use crate::exposition::Family;

/// The `hwmon` source's families, in a fixed order.
pub(crate) fn families(snapshot: &Snapshot) -> Vec<Family> {
    let mut info = Family::info(
        "railscope_nic_hwmon",
        "A NIC PCI function's hwmon device: its RDMA devices, netdevs, hwmon directory and the driver's chip name (mlx5).",
    );
    let mut temperature = Family::gauge(
        "railscope_nic_temperature_celsius",
        "NIC sensor temperature (hwmon temp<N>_input): the ASIC, and the transceiver module of the port's cage (the only module temperature an InfiniBand-mode port has).",
    );
    let mut highest = Family::gauge(
        "railscope_nic_temperature_highest_celsius",
        "Highest temperature of the NIC sensor since its history was last reset (hwmon temp<N>_highest; mlx5 resets it at driver load).",
    );
    let mut critical = Family::gauge(
        "railscope_nic_temperature_critical_celsius",
        "Critical threshold of the NIC sensor (hwmon temp<N>_crit; mlx5: the MTMP high threshold from firmware or the module).",
    );
    for nic in &snapshot.nics {
        let device = nic.rdma_devices.join(",");
        info.push(
            [
                ("pci_address", nic.pci_address.clone()),
                ("device", device.clone()),
                ("netdev", nic.netdevs.join(",")),
                ("hwmon", nic.hwmon.clone()),
                ("chip", nic.chip.clone().unwrap_or_default()),
            ],
            1u64,
        );
        for s in &nic.sensors {
            let labels = || {
                vec![
                    ("device", device.clone()),
                    ("pci_address", nic.pci_address.clone()),
                    ("sensor", s.sensor.clone()),
                    ("channel", s.channel.to_string()),
                ]
            };
            if let Some(v) = s.temperature {
                temperature.push(labels(), v);
            }
            if let Some(v) = s.highest {
                highest.push(labels(), v);
            }
            if let Some(v) = s.critical {
                critical.push(labels(), v);
            }
        }
    }
    vec![info, temperature, highest, critical]
}
