//! The plain data the `neighbour` source returns: who is at the far end of each link, how it
//! was learned, and the far end's settings that the host side can be compared with.

/// How a neighbour was learned: the `protocol` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// Directed-route SMPs over umad (InfiniBand ports).
    Smp,
    /// LLDPDUs received by the agent's own `AF_PACKET` socket (Ethernet and RoCE netdevs).
    Lldp,
    /// What a running lldpd learned.
    Lldpd,
}

impl Protocol {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Smp => "smp",
            Protocol::Lldp => "lldp",
            Protocol::Lldpd => "lldpd",
        }
    }
}

/// What the source knows of a link's far end: the `status` state-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// A neighbour is known.
    Ok,
    /// LLDP: listening, and nothing received within the LLDP timeout (or the neighbour
    /// left: its TTL ran out or it sent a shutdown LLDPDU).
    NoFrames,
    /// InfiniBand: SMPs are not possible on this port (RoCE, iWARP, no umad device, a VF).
    NotAvailable,
    /// The SMP was answered with an error status (M_Key protection, for one).
    Refused,
    /// The agent lacks the privilege: `CAP_NET_RAW` for LLDP, access to
    /// `/dev/infiniband/umadN` for SMPs.
    NoPermission,
    /// The SMP was not answered in time.
    Timeout,
}

impl Status {
    /// Every status, in the order the state-set lists them.
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::NoFrames,
        Status::NotAvailable,
        Status::Refused,
        Status::NoPermission,
        Status::Timeout,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NoFrames => "no_frames",
            Status::NotAvailable => "not_available",
            Status::Refused => "refused",
            Status::NoPermission => "no_permission",
            Status::Timeout => "timeout",
        }
    }
}

/// Who the neighbour is, as label values (each sanitised to printable ASCII, at most
/// [`crate::sources::neighbour::MAX_LABEL_BYTES`] bytes). A change of any of them is a change
/// of neighbour.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Identity {
    /// LLDP System Name, or the IB NodeDescription: the switch's name.
    pub name: String,
    /// LLDP Chassis ID as text (a MAC as `aa:bb:cc:dd:ee:ff`), or the IB NodeGUID as
    /// `0x%016x`.
    pub id: String,
    /// LLDP Port ID as text, or the IB LocalPortNum (the switch's port number) in decimal.
    pub port: String,
    /// LLDP Port Description (empty for IB and where the neighbour sends none).
    pub port_description: String,
}

/// IEEE 802.1Qaz PFC Configuration TLV (802.1 OUI 00-80-C2 subtype 0x0B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pfc {
    /// Willing: the sender accepts its peer's PFC configuration.
    pub willing: bool,
    /// MACsec Bypass Capability.
    pub mbc: bool,
    /// PFC capability: how many traffic classes may be PFC-enabled at once (0–15).
    pub capability: u8,
    /// PFC enable bitmap: bit n set = priority n is PFC-enabled.
    pub enabled: u8,
}

impl Pfc {
    /// Whether priority `p` (0–7) is PFC-enabled.
    pub fn is_enabled(&self, p: u8) -> bool {
        p < 8 && self.enabled & (1 << p) != 0
    }
}

/// One link's far end: a netdev's (LLDP) or an InfiniBand port's (SMP).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Link {
    /// The RDMA device the link belongs to (`mlx5_0`); empty when the netdev has none.
    pub device: String,
    /// The RDMA port number; empty when the netdev has none.
    pub port: String,
    /// The netdev; empty for an InfiniBand port without one.
    pub netdev: String,
    /// How it was learned.
    pub protocol: Option<Protocol>,
    /// What is known now; `None` while LLDP has listened for less than its timeout and heard
    /// nothing yet, or before the first SMP was answered.
    pub status: Option<Status>,
    /// The neighbour, while one is known (status `ok`).
    pub neighbour: Option<Identity>,
    /// Times the neighbour's identity changed since the agent started (a neighbour that
    /// leaves and comes back unchanged is no change).
    pub changes: u64,
    /// When the neighbour was last heard from or answered, in seconds since the Unix epoch.
    pub last_seen: Option<f64>,
    /// The LLDP TTL of the last LLDPDU received, in seconds (0: a shutdown LLDPDU).
    pub ttl: Option<u16>,
    /// IEEE 802.3 Maximum Frame Size of the switch port, in bytes, while the neighbour is
    /// known and sends the TLV.
    pub max_frame_size: Option<u16>,
    /// The switch port's PFC configuration, while the neighbour is known and sends the TLV.
    pub pfc: Option<Pfc>,
    /// The priority the neighbour's Application Priority TLV maps RoCE v2 (UDP port 4791)
    /// to, when it sends one.
    pub roce_priority: Option<u8>,
    /// IB far end: LinkWidthActive of the switch port, in lanes (1, 2, 4, 8, 12).
    pub link_width_lanes: Option<u32>,
    /// IB far end: active width × active per-lane speed, in bytes per second.
    pub rate_bytes_per_second: Option<f64>,
}

/// Everything the `neighbour` source knows, in (device, port, netdev, protocol) order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// One entry per link and protocol.
    pub links: Vec<Link>,
}
