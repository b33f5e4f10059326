//! Pure encoding and decoding of directed-route SMPs as `/dev/infiniband/umadN` carries them:
//! a `struct ib_user_mad_hdr` (`include/uapi/rdma/ib_user_mad.h`, 64 bytes with the P_Key
//! index) followed by a 256-byte `struct ib_smp` (`include/rdma/ib_smi.h`), and the three
//! attributes railscope asks for: NodeInfo, NodeDescription and PortInfo (IBA vol. 1
//! §14.2.5.3, §14.2.5.2, §14.2.5.6).
//!
//! Everything in the SMP is in network byte order; the umad header's `id`, `status`,
//! `timeout_ms`, `retries`, `length` and `pkey_index` are in host order, its `qpn`, `qkey`,
//! `lid` and `flow_label` in network order. Attribute offsets are those of
//! `struct ib_node_info` / `struct ib_port_info` in `include/rdma/ib_smi.h`; the PortInfo
//! fields past `link_roundtrip_latency` (CapabilityMask2, the extended speeds) are at the
//! bit offsets of rdma-core's `libibmad/fields.c` (`IB_PORT_CAPMASK2_F`,
//! `IB_PORT_LINK_SPEED_EXT_ACTIVE_F`, `IB_PORT_LINK_SPEED_EXT_ACTIVE_2_F`, …).
//!
//! Nothing here does I/O: [`encode_get`] builds the bytes to `write(2)`, [`decode_reply`]
//! checks what `read(2)` returned, and the attribute decoders take the SMP's 64-byte data.

use std::fmt;

/// Size of `struct ib_user_mad_hdr` (the header once the P_Key index is enabled, as
/// `IB_USER_MAD_REGISTER_AGENT2` does).
pub const UMAD_HDR_LEN: usize = 64;
/// Size of a MAD (`IB_MGMT_MAD_SIZE`), and of `struct ib_smp`.
pub const MAD_LEN: usize = 256;
/// Size of the common MAD header (`IB_MGMT_MAD_HDR`): what a timed-out request comes back
/// with after the umad header.
pub const MAD_HDR_LEN: usize = 24;
/// Size of an SMP's attribute data (`IB_SMP_DATA_SIZE`).
pub const SMP_DATA_LEN: usize = 64;
/// A whole request or reply as umad reads and writes it.
pub const PACKET_LEN: usize = UMAD_HDR_LEN + MAD_LEN;

/// `IB_MGMT_BASE_VERSION`.
pub const BASE_VERSION: u8 = 1;
/// `IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE`.
pub const MGMT_CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// The SMP class version (`IB_SMP_CLASS_VERSION`).
pub const SMP_CLASS_VERSION: u8 = 1;
/// `IB_MGMT_METHOD_GET`.
pub const METHOD_GET: u8 = 0x01;
/// `IB_MGMT_METHOD_GET_RESP`.
pub const METHOD_GET_RESP: u8 = 0x81;
/// The permissive LID (`IB_LID_PERMISSIVE`): DrSLID and DrDLID of a path that is directed
/// route from end to end.
pub const PERMISSIVE_LID: u16 = 0xffff;
/// The direction bit of a directed-route SMP's status (`IB_SMP_DIRECTION`): set in replies.
pub const SMP_DIRECTION: u16 = 0x8000;
/// `ETIMEDOUT` as the umad header's `status` carries it when no reply came in `timeout_ms`.
pub const UMAD_STATUS_TIMEOUT: u32 = libc::ETIMEDOUT as u32;

/// Offsets in `struct ib_smp`.
mod smp_off {
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: usize = 4;
    pub const HOP_PTR: usize = 6;
    pub const HOP_CNT: usize = 7;
    pub const TID: usize = 8;
    pub const ATTR_ID: usize = 16;
    pub const ATTR_MOD: usize = 20;
    pub const MKEY: usize = 24;
    pub const DR_SLID: usize = 32;
    pub const DR_DLID: usize = 34;
    pub const DATA: usize = 64;
    pub const INITIAL_PATH: usize = 128;
}

/// Offsets in `struct ib_user_mad_hdr`.
mod hdr_off {
    pub const ID: usize = 0;
    pub const STATUS: usize = 4;
    pub const TIMEOUT_MS: usize = 8;
    pub const RETRIES: usize = 12;
    pub const LENGTH: usize = 16;
    pub const QPN: usize = 20;
    pub const LID: usize = 28;
}

/// The subnet management attributes railscope asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attr {
    /// `IB_SMP_ATTR_NODE_DESC` (0x0010): the node's 64-byte description (a switch's name).
    NodeDescription,
    /// `IB_SMP_ATTR_NODE_INFO` (0x0011): node type, GUIDs, the port the SMP came in on.
    NodeInfo,
    /// `IB_SMP_ATTR_PORT_INFO` (0x0015): one port's state, width and speed.
    PortInfo,
}

impl Attr {
    /// The attribute's id.
    pub fn id(self) -> u16 {
        match self {
            Attr::NodeDescription => 0x0010,
            Attr::NodeInfo => 0x0011,
            Attr::PortInfo => 0x0015,
        }
    }

    /// The attribute's name as the IBA and `smpquery` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Attr::NodeDescription => "NodeDescription",
            Attr::NodeInfo => "NodeInfo",
            Attr::PortInfo => "PortInfo",
        }
    }
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One directed-route SubnGet, one hop out of the local port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The umad agent id `IB_USER_MAD_REGISTER_AGENT2` returned.
    pub agent_id: u32,
    /// The transaction id. The kernel replaces its upper 32 bits with the agent's own
    /// (`ib_umad_write`: `hi_tid`), so only the lower 32 bits identify the reply.
    pub tid: u64,
    /// What to get.
    pub attr: Attr,
    /// The attribute modifier: the port number for PortInfo, 0 otherwise.
    pub attr_mod: u32,
    /// The local port the SMP leaves from (`initial_path[1]`).
    pub local_port: u8,
    /// How long the kernel waits for the reply before it answers `ETIMEDOUT`.
    pub timeout_ms: u32,
}

/// The bytes to `write(2)` to the umad device for `req`: the umad header (no retries, QP0,
/// permissive LID) and the SMP (base version 1, class 0x81 version 1, method Get, hop
/// pointer 0, hop count 1, M_Key 0, DrSLID and DrDLID permissive, `initial_path = {0, port}`).
pub fn encode_get(req: &Request) -> [u8; PACKET_LEN] {
    let mut buf = [0u8; PACKET_LEN];
    let hdr = &mut buf[..UMAD_HDR_LEN];
    put_ne32(hdr, hdr_off::ID, req.agent_id);
    put_ne32(hdr, hdr_off::STATUS, 0);
    put_ne32(hdr, hdr_off::TIMEOUT_MS, req.timeout_ms);
    put_ne32(hdr, hdr_off::RETRIES, 0);
    put_ne32(hdr, hdr_off::LENGTH, PACKET_LEN as u32);
    hdr[hdr_off::QPN..hdr_off::QPN + 4].copy_from_slice(&0u32.to_be_bytes());
    hdr[hdr_off::LID..hdr_off::LID + 2].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
    // qkey 0 (QP0 ignores it), sl 0, no GRH, pkey_index 0 (QP0 uses the default P_Key).

    let smp = &mut buf[UMAD_HDR_LEN..];
    smp[smp_off::BASE_VERSION] = BASE_VERSION;
    smp[smp_off::MGMT_CLASS] = MGMT_CLASS_SUBN_DIRECTED_ROUTE;
    smp[smp_off::CLASS_VERSION] = SMP_CLASS_VERSION;
    smp[smp_off::METHOD] = METHOD_GET;
    smp[smp_off::HOP_PTR] = 0;
    smp[smp_off::HOP_CNT] = 1;
    smp[smp_off::TID..smp_off::TID + 8].copy_from_slice(&req.tid.to_be_bytes());
    smp[smp_off::ATTR_ID..smp_off::ATTR_ID + 2].copy_from_slice(&req.attr.id().to_be_bytes());
    smp[smp_off::ATTR_MOD..smp_off::ATTR_MOD + 4].copy_from_slice(&req.attr_mod.to_be_bytes());
    smp[smp_off::MKEY..smp_off::MKEY + 8].copy_from_slice(&0u64.to_be_bytes());
    smp[smp_off::DR_SLID..smp_off::DR_SLID + 2].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
    smp[smp_off::DR_DLID..smp_off::DR_DLID + 2].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
    smp[smp_off::INITIAL_PATH + 1] = req.local_port;
    buf
}

/// Why a reply could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// Fewer bytes than a umad header and a whole SMP (or, for a timed-out request, its MAD
    /// header).
    Truncated {
        /// How many bytes came.
        len: usize,
        /// How many were needed.
        need: usize,
    },
    /// The kernel gave up waiting (`status = ETIMEDOUT` in the umad header): the switch did
    /// not answer within `timeout_ms` (M_Key protection drops Gets silently, too).
    Timeout,
    /// The umad header's status is neither 0 nor `ETIMEDOUT`.
    UmadStatus(u32),
    /// A reply to another request (its transaction id's lower 32 bits differ).
    OtherTid {
        /// The lower 32 bits expected.
        expected: u32,
        /// The transaction id that came.
        got: u64,
    },
    /// Not a directed-route SMP GetResp for the attribute asked (another version, class,
    /// method or attribute).
    Unexpected(String),
    /// The MAD status has error bits set: the switch refused the Get.
    Status(u16),
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::Truncated { len, need } => {
                write!(f, "truncated reply: {len} bytes, expected {need}")
            }
            ReplyError::Timeout => f.write_str("no reply within the request's timeout (ETIMEDOUT)"),
            ReplyError::UmadStatus(status) => write!(f, "umad status {status}"),
            ReplyError::OtherTid { expected, got } => write!(
                f,
                "reply to another request: transaction id {got:#018x}, expected low word {expected:#010x}"
            ),
            ReplyError::Unexpected(what) => f.write_str(what),
            ReplyError::Status(status) => {
                write!(f, "MAD status {status:#06x} ({})", describe_status(*status))
            }
        }
    }
}

impl std::error::Error for ReplyError {}

/// What the error bits of a MAD status say (IBA vol. 1 table 106; `IB_MGMT_MAD_STATUS_*` in
/// `include/rdma/ib_mad.h`).
pub fn describe_status(status: u16) -> &'static str {
    let status = status & !SMP_DIRECTION;
    if status & 0x0001 != 0 {
        return "busy";
    }
    if status & 0x0002 != 0 {
        return "redirect required";
    }
    match status & 0x001c {
        0x0000 if status == 0 => "success",
        0x0004 => "bad version",
        0x0008 => "method not supported",
        0x000c => "method/attribute combination not supported",
        0x001c => "invalid attribute or attribute modifier value",
        0x0000 => "class-specific error",
        _ => "reserved invalid-field code",
    }
}

/// Checks a reply `read(2)` returned for `req` and gives the SMP's 64 bytes of attribute
/// data.
pub fn decode_reply(buf: &[u8], req: &Request) -> Result<[u8; SMP_DATA_LEN], ReplyError> {
    if buf.len() < UMAD_HDR_LEN + MAD_HDR_LEN {
        return Err(ReplyError::Truncated {
            len: buf.len(),
            need: UMAD_HDR_LEN + MAD_HDR_LEN,
        });
    }
    let smp = &buf[UMAD_HDR_LEN..];
    let tid = be64(smp, smp_off::TID);
    // Truncation to the low word is the point: the kernel owns the high one.
    let expected = req.tid as u32;
    if tid as u32 != expected {
        return Err(ReplyError::OtherTid { expected, got: tid });
    }
    match ne32(buf, hdr_off::STATUS) {
        0 => {}
        UMAD_STATUS_TIMEOUT => return Err(ReplyError::Timeout),
        other => return Err(ReplyError::UmadStatus(other)),
    }
    if buf.len() < PACKET_LEN {
        return Err(ReplyError::Truncated {
            len: buf.len(),
            need: PACKET_LEN,
        });
    }
    let (base, class, version, method) = (
        smp[smp_off::BASE_VERSION],
        smp[smp_off::MGMT_CLASS],
        smp[smp_off::CLASS_VERSION],
        smp[smp_off::METHOD],
    );
    if base != BASE_VERSION
        || class != MGMT_CLASS_SUBN_DIRECTED_ROUTE
        || version != SMP_CLASS_VERSION
    {
        return Err(ReplyError::Unexpected(format!(
            "not a directed-route SMP: base version {base}, class {class:#04x}, class version {version}"
        )));
    }
    if method != METHOD_GET_RESP {
        return Err(ReplyError::Unexpected(format!(
            "method {method:#04x}, expected GetResp (0x81)"
        )));
    }
    let attr_id = be16(smp, smp_off::ATTR_ID);
    if attr_id != req.attr.id() {
        return Err(ReplyError::Unexpected(format!(
            "attribute {attr_id:#06x}, expected {} ({:#06x})",
            req.attr,
            req.attr.id()
        )));
    }
    let status = be16(smp, smp_off::STATUS);
    if status & !SMP_DIRECTION != 0 {
        return Err(ReplyError::Status(status));
    }
    let mut data = [0u8; SMP_DATA_LEN];
    data.copy_from_slice(&smp[smp_off::DATA..smp_off::DATA + SMP_DATA_LEN]);
    Ok(data)
}

/// A node's type (NodeInfo.NodeType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeType {
    /// 1: a channel adapter (a host's HCA, back to back).
    ChannelAdapter,
    /// 2: a switch.
    Switch,
    /// 3: a router.
    Router,
    /// Any other value.
    Other(u8),
}

impl NodeType {
    /// The type of NodeInfo.NodeType `value`.
    pub fn from_u8(value: u8) -> Self {
        match value {
            1 => NodeType::ChannelAdapter,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            other => NodeType::Other(other),
        }
    }

    /// The name `ibnetdiscover` and `smpquery` print.
    pub fn name(self) -> &'static str {
        match self {
            NodeType::ChannelAdapter => "Channel Adapter",
            NodeType::Switch => "Switch",
            NodeType::Router => "Router",
            NodeType::Other(_) => "Unknown",
        }
    }
}

/// NodeInfo (`struct ib_node_info`, 40 bytes of the SMP data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo {
    /// BaseVersion: the highest MAD base version supported.
    pub base_version: u8,
    /// ClassVersion: the highest SMP class version supported.
    pub class_version: u8,
    /// NodeType.
    pub node_type: NodeType,
    /// NumPorts: physical ports (a switch's port 0 not counted).
    pub num_ports: u8,
    /// SystemImageGUID.
    pub system_image_guid: u64,
    /// NodeGUID.
    pub node_guid: u64,
    /// PortGUID of the port the SMP came in on (a switch's port 0 GUID).
    pub port_guid: u64,
    /// PartitionCap.
    pub partition_cap: u16,
    /// DeviceID (Quantum-2 is 0xd2f2).
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// LocalPortNum: the port the SMP came in on, that is the switch port this host's
    /// cable is plugged into.
    pub local_port_num: u8,
    /// VendorID (24 bits; NVIDIA/Mellanox is 0x0002c9).
    pub vendor_id: u32,
}

/// Decodes NodeInfo from an SMP's data.
pub fn decode_node_info(data: &[u8; SMP_DATA_LEN]) -> NodeInfo {
    NodeInfo {
        base_version: data[0],
        class_version: data[1],
        node_type: NodeType::from_u8(data[2]),
        num_ports: data[3],
        system_image_guid: be64(data, 4),
        node_guid: be64(data, 12),
        port_guid: be64(data, 20),
        partition_cap: be16(data, 28),
        device_id: be16(data, 30),
        revision: be32(data, 32),
        local_port_num: data[36],
        vendor_id: u32::from_be_bytes([0, data[37], data[38], data[39]]),
    }
}

/// The longest neighbour name kept, in bytes (the attribute's size).
pub const NODE_DESCRIPTION_LEN: usize = 64;

/// Decodes NodeDescription: the bytes up to the first NUL, every byte that is not printable
/// ASCII replaced by `?`, surrounding white space trimmed. At most 64 bytes.
pub fn decode_node_description(data: &[u8; SMP_DATA_LEN]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let text: String = data[..end]
        .iter()
        .map(|&b| {
            if (0x20..=0x7e).contains(&b) {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    text.trim().to_owned()
}

/// A lane speed, as the kernel's `enum ib_port_speed` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LaneSpeed {
    /// 2.5 Gb/s.
    Sdr,
    /// 5 Gb/s.
    Ddr,
    /// 10 Gb/s.
    Qdr,
    /// 14.0625 Gb/s signalling, 14 Gb/s in the kernel's arithmetic.
    Fdr,
    /// 25.78125 Gb/s signalling, 25 Gb/s.
    Edr,
    /// 53.125 Gb/s signalling, 50 Gb/s.
    Hdr,
    /// 106.25 Gb/s signalling, 100 Gb/s.
    Ndr,
    /// 212.5 Gb/s signalling, 200 Gb/s.
    Xdr,
}

impl LaneSpeed {
    /// The name the kernel's `rate` attribute prints (`NDR`).
    pub fn name(self) -> &'static str {
        match self {
            LaneSpeed::Sdr => "SDR",
            LaneSpeed::Ddr => "DDR",
            LaneSpeed::Qdr => "QDR",
            LaneSpeed::Fdr => "FDR",
            LaneSpeed::Edr => "EDR",
            LaneSpeed::Hdr => "HDR",
            LaneSpeed::Ndr => "NDR",
            LaneSpeed::Xdr => "XDR",
        }
    }

    /// The per-lane data rate in tenths of Gb/s, as `ib_speed_attrs[]` /
    /// `rate_show()` in `drivers/infiniband/core/sysfs.c` count it.
    pub fn deci_gbps(self) -> u64 {
        match self {
            LaneSpeed::Sdr => 25,
            LaneSpeed::Ddr => 50,
            LaneSpeed::Qdr => 100,
            LaneSpeed::Fdr => 140,
            LaneSpeed::Edr => 250,
            LaneSpeed::Hdr => 500,
            LaneSpeed::Ndr => 1000,
            LaneSpeed::Xdr => 2000,
        }
    }
}

/// Lanes of a PortInfo LinkWidth value (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x: the same
/// encoding as the kernel's `enum ib_port_width`); `None` for anything else.
pub fn width_lanes(width: u8) -> Option<u32> {
    match width {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// PortInfo (`struct ib_port_info` and the fields libibmad reads past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    /// LID.
    pub lid: u16,
    /// MasterSMLID.
    pub sm_lid: u16,
    /// CapabilityMask (valid on a CA's ports and a switch's port 0).
    pub capability_mask: u32,
    /// LocalPortNum.
    pub local_port_num: u8,
    /// LinkWidthEnabled (a bit mask of widths).
    pub link_width_enabled: u8,
    /// LinkWidthSupported (a bit mask).
    pub link_width_supported: u8,
    /// LinkWidthActive (one width).
    pub link_width_active: u8,
    /// LinkSpeedSupported (bit mask: 1 SDR, 2 DDR, 4 QDR).
    pub link_speed_supported: u8,
    /// PortState (1 Down, 2 Init, 3 Armed, 4 Active).
    pub port_state: u8,
    /// PortPhysicalState (5 LinkUp, 2 Polling, 3 Disabled, …).
    pub phys_state: u8,
    /// M_KeyProtectBits.
    pub mkey_protect_bits: u8,
    /// LinkSpeedActive (1 SDR, 2 DDR, 4 QDR).
    pub link_speed_active: u8,
    /// LinkSpeedEnabled.
    pub link_speed_enabled: u8,
    /// NeighborMTU (1 = 256 … 5 = 4096).
    pub neighbor_mtu: u8,
    /// MTUCap.
    pub mtu_cap: u8,
    /// CapabilityMask2.
    pub capability_mask2: u16,
    /// LinkSpeedExtActive (0 none, 1 FDR, 2 EDR, 4 HDR, 8 NDR).
    pub link_speed_ext_active: u8,
    /// LinkSpeedExtSupported.
    pub link_speed_ext_supported: u8,
    /// LinkSpeedExtEnabled.
    pub link_speed_ext_enabled: u8,
    /// LinkSpeedExtActive2 (0 none, 1 XDR).
    pub link_speed_ext2_active: u8,
    /// LinkSpeedExtSupported2.
    pub link_speed_ext2_supported: u8,
    /// LinkSpeedExtEnabled2.
    pub link_speed_ext2_enabled: u8,
}

/// Decodes PortInfo from an SMP's data.
pub fn decode_port_info(data: &[u8; SMP_DATA_LEN]) -> PortInfo {
    PortInfo {
        lid: be16(data, 16),
        sm_lid: be16(data, 18),
        capability_mask: be32(data, 20),
        local_port_num: data[28],
        link_width_enabled: data[29],
        link_width_supported: data[30],
        link_width_active: data[31],
        link_speed_supported: data[32] >> 4,
        port_state: data[32] & 0x0f,
        phys_state: data[33] >> 4,
        mkey_protect_bits: data[34] >> 6,
        link_speed_active: data[35] >> 4,
        link_speed_enabled: data[35] & 0x0f,
        neighbor_mtu: data[36] >> 4,
        mtu_cap: data[41] & 0x0f,
        // libibmad BITSOFFS(449, 2), (451, 2), (453, 3): byte 56, below its top bit.
        link_speed_ext2_active: (data[56] >> 5) & 0x03,
        link_speed_ext2_supported: (data[56] >> 3) & 0x03,
        link_speed_ext2_enabled: data[56] & 0x07,
        capability_mask2: be16(data, 60),
        // BITSOFFS(496, 4), (500, 4), (507, 5).
        link_speed_ext_active: data[62] >> 4,
        link_speed_ext_supported: data[62] & 0x0f,
        link_speed_ext_enabled: data[63] & 0x1f,
    }
}

impl PortInfo {
    /// Lanes of LinkWidthActive.
    pub fn width_lanes(&self) -> Option<u32> {
        width_lanes(self.link_width_active)
    }

    /// The active lane speed: LinkSpeedExtActive2 when it names one (XDR), else
    /// LinkSpeedExtActive when it names one (FDR … NDR), else LinkSpeedActive — the order
    /// of libibnetdisc's `ibnd_get_agg_linkspeedext()`. The capability bits that say
    /// whether the extended fields exist are only valid on a switch's port 0, which is not
    /// asked; the fields are reserved, so zero, where they do not exist. FDR10 (a
    /// Mellanox-specific attribute) reads as QDR. `None` for a value no speed has.
    pub fn lane_speed(&self) -> Option<LaneSpeed> {
        match self.link_speed_ext2_active {
            0 => {}
            1 => return Some(LaneSpeed::Xdr),
            _ => return None,
        }
        match self.link_speed_ext_active {
            0 => {}
            1 => return Some(LaneSpeed::Fdr),
            2 => return Some(LaneSpeed::Edr),
            4 => return Some(LaneSpeed::Hdr),
            8 => return Some(LaneSpeed::Ndr),
            _ => return None,
        }
        match self.link_speed_active {
            1 => Some(LaneSpeed::Sdr),
            2 => Some(LaneSpeed::Ddr),
            4 => Some(LaneSpeed::Qdr),
            _ => None,
        }
    }

    /// The link's data rate in bytes per second: active lanes × the lane's rate, the
    /// arithmetic of the kernel's `rate` attribute (NDR 4x: 400 Gb/s = 50·10⁹ B/s), so it
    /// compares with `railscope_ib_port_rate_bytes_per_second` of the host's end.
    pub fn rate_bytes_per_second(&self) -> Option<u64> {
        let lanes = u64::from(self.width_lanes()?);
        let lane = self.lane_speed()?.deci_gbps();
        Some(lanes * lane * 100_000_000 / 8)
    }
}

fn put_ne32(buf: &mut [u8], off: usize, value: u32) {
    buf[off..off + 4].copy_from_slice(&value.to_ne_bytes());
}

fn ne32(buf: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]])
}

fn be16(buf: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([buf[off], buf[off + 1]])
}

fn be32(buf: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]])
}

fn be64(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_be_bytes(b)
}
