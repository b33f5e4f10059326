//! The plain data the `devlink` source returns.

/// A health reporter's state (`enum devlink_health_reporter_state`,
/// `include/uapi/linux/devlink.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReporterState {
    /// `DEVLINK_HEALTH_REPORTER_STATE_HEALTHY` (0).
    Healthy,
    /// `DEVLINK_HEALTH_REPORTER_STATE_ERROR` (1): an error was reported and not (yet)
    /// recovered.
    Error,
    /// A value this build does not know.
    Other(u8),
}

impl ReporterState {
    /// The state of the `u8` the kernel puts in `DEVLINK_ATTR_HEALTH_REPORTER_STATE`.
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => ReporterState::Healthy,
            1 => ReporterState::Error,
            other => ReporterState::Other(other),
        }
    }
}

/// One health reporter, as `devlink_nl_health_reporter_fill()` (`net/devlink/health.c`)
/// describes it. Every field the kernel puts only sometimes is an `Option`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reporter {
    /// The devlink port index (`DEVLINK_ATTR_PORT_INDEX`) of a port reporter; `None` for a
    /// reporter of the device itself.
    pub port: Option<u32>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_NAME` (`fw`, `fw_fatal`, `tx`, `rx`, `vnic`).
    pub name: String,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_STATE`.
    pub state: Option<ReporterState>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT`: errors reported since the reporter was
    /// created (driver load or reload).
    pub errors: Option<u64>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT`: successful recoveries since then.
    pub recoveries: Option<u64>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_DUMP_TS`: when the stored dump was taken, in
    /// milliseconds of `jiffies` (`jiffies_to_msecs`): time since boot plus the jiffies
    /// counter's initial offset, **not** a wall clock. Kept for completeness; not exported.
    pub dump_jiffies_ms: Option<u64>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_DUMP_TS_NS`: when the stored dump was taken, as
    /// `ktime_get_real_ns()`: nanoseconds since the Unix epoch. Only while a dump is stored.
    pub dump_unix_ns: Option<u64>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD` in milliseconds: the shortest time
    /// between two automatic recoveries. Only for reporters that can recover.
    pub graceful_period_ms: Option<u64>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_AUTO_RECOVER`. Only for reporters that can recover.
    pub auto_recover: Option<bool>,
    /// `DEVLINK_ATTR_HEALTH_REPORTER_AUTO_DUMP`. Only for reporters that can dump.
    pub auto_dump: Option<bool>,
}

/// Which of a device's versions a [`Version`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum VersionKind {
    /// `DEVLINK_ATTR_INFO_VERSION_FIXED`: of the hardware (board id, ASIC revision).
    Fixed,
    /// `DEVLINK_ATTR_INFO_VERSION_RUNNING`: what runs now.
    Running,
    /// `DEVLINK_ATTR_INFO_VERSION_STORED`: what is in flash and runs after a reset.
    Stored,
}

impl VersionKind {
    /// The label value: `fixed`, `running`, `stored`.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionKind::Fixed => "fixed",
            VersionKind::Running => "running",
            VersionKind::Stored => "stored",
        }
    }
}

/// One version of a device (`fw.version` `28.39.1002`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Fixed, running or stored.
    pub kind: VersionKind,
    /// `DEVLINK_ATTR_INFO_VERSION_NAME`.
    pub name: String,
    /// `DEVLINK_ATTR_INFO_VERSION_VALUE`.
    pub value: String,
}

/// What `DEVLINK_CMD_INFO_GET` says of a device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    /// `DEVLINK_ATTR_INFO_DRIVER_NAME` (`mlx5_core`, `netdevsim`).
    pub driver: Option<String>,
    /// `DEVLINK_ATTR_INFO_SERIAL_NUMBER`.
    pub serial_number: Option<String>,
    /// `DEVLINK_ATTR_INFO_BOARD_SERIAL_NUMBER`.
    pub board_serial_number: Option<String>,
    /// Its versions, in the order the driver put them.
    pub versions: Vec<Version>,
}

/// One devlink instance with its health reporters and info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `DEVLINK_ATTR_BUS_NAME` (`pci`, `netdevsim`, `auxiliary`).
    pub bus: String,
    /// `DEVLINK_ATTR_DEV_NAME` (`0000:18:00.0`, `netdevsim1`).
    pub name: String,
    /// The PCI function's address, for an instance on the `pci` bus.
    pub pci_address: Option<String>,
    /// The RDMA devices of that PCI function (`mlx5_0`), in name order.
    pub rdma_devices: Vec<String>,
    /// Its info; `None` when the driver has none (`EOPNOTSUPP`) or it could not be read.
    pub info: Option<Info>,
    /// Its health reporters: the device's own first, then its ports', as the kernel dumps
    /// them.
    pub reporters: Vec<Reporter>,
}

impl Device {
    /// The devlink handle `bus/name` (`pci/0000:18:00.0`), as devlink(8) prints it.
    pub fn handle(&self) -> String {
        format!("{}/{}", self.bus, self.name)
    }
}

/// Everything the `devlink` source read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The devlink instances of the agent's network namespace, in handle order.
    pub devices: Vec<Device>,
}
