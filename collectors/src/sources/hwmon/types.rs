//! The plain data the `hwmon` source returns.

/// One temperature channel of a NIC's hwmon device (`temp<N>_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sensor {
    /// The channel index `N`.
    pub channel: u32,
    /// The sensor's name as a label value ([`crate::sources::hwmon::sensor_name`]): from
    /// `temp<N>_label` (`asic`, `Module0` → `asic`, `module0`), else `temp<N>`.
    pub sensor: String,
    /// `temp<N>_input` in degrees Celsius.
    pub temperature: Option<f64>,
    /// `temp<N>_highest`, the highest temperature since the history was last reset, in
    /// degrees Celsius.
    pub highest: Option<f64>,
    /// `temp<N>_crit`, the critical threshold, in degrees Celsius.
    pub critical: Option<f64>,
}

/// The hwmon device of one NIC PCI function.
#[derive(Debug, Clone, PartialEq)]
pub struct NicHwmon {
    /// The PCI function's address (`0000:18:00.0`).
    pub pci_address: String,
    /// The RDMA devices on the function (`mlx5_0`), in name order.
    pub rdma_devices: Vec<String>,
    /// The netdevs whose `device` is the function, in name order.
    pub netdevs: Vec<String>,
    /// The hwmon device's directory name (`hwmon3`); the number follows probe order.
    pub hwmon: String,
    /// Its `name` (the driver's chip name: `mlx5`), when readable.
    pub chip: Option<String>,
    /// Its temperature channels, in channel order.
    pub sensors: Vec<Sensor>,
}

/// Everything the `hwmon` source read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// NIC functions with a hwmon device, in address order.
    pub nics: Vec<NicHwmon>,
}
