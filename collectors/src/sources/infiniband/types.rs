//! Plain data read from `/sys/class/infiniband`. Every value the kernel may omit, or that may
//! fail to read, is an `Option`.

use std::sync::Arc;

/// Everything the `infiniband` source read in one collection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// RDMA devices, in natural name order.
    pub devices: Vec<Device>,
}

/// A numeric kernel enumeration printed as `"<n>: <NAME>"` (`state`, `phys_state`, `node_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enumerated {
    /// The number before the colon.
    pub value: u32,
    /// The name after it, as the kernel spells it.
    pub name: String,
}

/// One RDMA device (`/sys/class/infiniband/<name>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    /// The kernel's device name (`mlx5_0`, `rxe0`, `irdma0`).
    pub name: String,
    /// `node_type` (`1: CA`, `4: RNIC`).
    pub node_type: Option<Enumerated>,
    /// `node_guid` as printed (`0a7f:bc12:45ef:d23b`).
    pub node_guid: Option<String>,
    /// `sys_image_guid` as printed.
    pub sys_image_guid: Option<String>,
    /// `fw_ver`; `None` when absent or empty (software devices).
    pub fw_ver: Option<String>,
    /// `hca_type` (mlx4/mlx5 only).
    pub hca_type: Option<String>,
    /// `board_id` (mlx4/mlx5/hfi1 only).
    pub board_id: Option<String>,
    /// The PCI address of the function behind the device (`0000:18:00.0`), from the `device`
    /// link. Software devices have none.
    pub pci_address: Option<String>,
    /// The PCI function's `numa_node` (`-1` when the platform has no NUMA information).
    pub numa_node: Option<i64>,
    /// The kernel driver: the PCI driver's name (`mlx5_core`), or `rdma_rxe` for Soft-RoCE
    /// devices, which have a `parent` netdev instead of a PCI function.
    pub driver: Option<String>,
    /// For Soft-RoCE: the netdev it is bound to (`parent`).
    pub parent_netdev: Option<String>,
    /// Device-level driver counters (`<dev>/hw_counters/`, mlx5 in switchdev mode, hfi1).
    pub hw_counters: Vec<HwCounter>,
    /// `hw_counters/lifespan` at device level, in milliseconds.
    pub hw_counters_lifespan_ms: Option<u64>,
    /// The device's ports, by number.
    pub ports: Vec<Port>,
    /// How many read errors this device had in this collection.
    pub errors: u64,
}

/// A port's link rate, from `ports/<N>/rate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate {
    /// Total data rate in bits per second (`400 Gb/sec` → 400·10⁹).
    pub bits_per_second: u64,
    /// The active link width in lanes (`4X` → 4).
    pub width: u32,
    /// The lane speed name (`NDR`); older kernels print none for SDR.
    pub speed: Option<String>,
}

/// Which directory a PMA counter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmaDir {
    /// `ports/<N>/counters/`.
    Counters,
    /// `ports/<N>/counters_ext/` (legacy OFED, kernels before 4.5).
    CountersExt,
}

/// One PMA (Performance Management Agent) counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmaCounter {
    /// The canonical counter name: the current kernel's file name in `counters/`
    /// (`counters_ext/port_rcv_data_64` is reported as `port_rcv_data`).
    pub name: Arc<str>,
    /// The raw value as the file holds it (data counters still in 4-byte words).
    pub value: u64,
    /// The counter's width in bits when known; a value of `2^bits - 1` is saturated.
    pub bits: Option<u32>,
    /// Where it was read.
    pub dir: PmaDir,
}

impl PmaCounter {
    /// Whether the counter sits at its maximum and can no longer count (PMA counters
    /// saturate instead of wrapping).
    pub fn saturated(&self) -> bool {
        match self.bits {
            Some(bits) if bits < 64 => self.value >= (1u64 << bits) - 1,
            Some(_) => self.value == u64::MAX,
            None => false,
        }
    }
}

/// One driver counter from a `hw_counters/` directory, named exactly as the driver names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwCounter {
    /// The file name (`out_of_buffer`, `rcvd_pkts`, `RxECNMrkd`).
    pub name: Arc<str>,
    /// Its value.
    pub value: u64,
}

/// One non-empty GID table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gid {
    /// The table index.
    pub index: u32,
    /// The GID as the kernel prints it (eight groups of four hex digits).
    pub gid: String,
    /// `gid_attrs/types/<index>`: `IB/RoCE v1` or `RoCE v2`.
    pub gid_type: Option<String>,
    /// `gid_attrs/ndevs/<index>`: the netdev of a RoCE GID.
    pub netdev: Option<String>,
}

/// How a RoCE or iWARP driver derives the active RDMA MTU from its netdev's MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MtuRule {
    /// `iboe_get_mtu()`: subtract 96 bytes of RoCE headers (mlx4, mlx5, bnxt_re and most
    /// RoCE drivers).
    Iboe,
    /// Soft-RoCE: subtract `RXE_MAX_HDR_LENGTH` (80 bytes).
    Rxe,
    /// `iw_query_port()` and irdma: no subtraction.
    NoHeaders,
}

impl MtuRule {
    /// A short name for the rule.
    pub fn as_str(self) -> &'static str {
        match self {
            MtuRule::Iboe => "iboe",
            MtuRule::Rxe => "rxe",
            MtuRule::NoHeaders => "no_headers",
        }
    }
}

/// One port (`ports/<N>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Port {
    /// The port number.
    pub number: u32,
    /// `state` (`4: ACTIVE`).
    pub state: Option<Enumerated>,
    /// `phys_state` (`5: LinkUp`).
    pub phys_state: Option<Enumerated>,
    /// `link_layer`: `InfiniBand` or `Ethernet`.
    pub link_layer: Option<String>,
    /// `rate`, parsed.
    pub rate: Option<Rate>,
    /// `lid` (InfiniBand ports only).
    pub lid: Option<u32>,
    /// `sm_lid` (InfiniBand ports only).
    pub sm_lid: Option<u32>,
    /// PMA counters from `counters/` and `counters_ext/`.
    pub pma: Vec<PmaCounter>,
    /// Port-level driver counters.
    pub hw_counters: Vec<HwCounter>,
    /// Port-level `hw_counters/lifespan` in milliseconds.
    pub hw_counters_lifespan_ms: Option<u64>,
    /// Non-empty GID entries; `None` when the port has no `gids/` directory.
    pub gids: Option<Vec<Gid>>,
    /// The netdev behind a RoCE/iWARP port.
    pub netdev: Option<String>,
    /// That netdev's MTU in bytes.
    pub netdev_mtu: Option<u32>,
    /// The active RDMA MTU derived from the netdev MTU (RoCE/iWARP ports).
    pub active_mtu: Option<u32>,
    /// The rule used to derive `active_mtu`.
    pub mtu_rule: Option<MtuRule>,
    /// The largest MTU the port supports, from verbs.
    pub max_mtu: Option<u32>,
    /// Where `active_mtu` came from: `verbs` or `netdev` (derived).
    pub mtu_source: Option<&'static str>,
    /// Where the port-level driver counters came from: `netlink` or `sysfs`.
    pub hw_counters_source: Option<&'static str>,
}
