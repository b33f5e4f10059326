//! The LLDP receiver's socket: one `AF_PACKET`/`SOCK_RAW` socket bound to EtherType 0x88CC on
//! every interface of the agent's network namespace (`packet(7)`, `net/packet/af_packet.c`).
//!
//! One socket for all netdevs, not one per netdev: netdevs come and go all day on a
//! Kubernetes node, and a socket bound to interface 0 sees every netdev of the namespace,
//! those created later included, with no socket to open or close; the `sll_ifindex` of each
//! frame's source address says which netdev it came in on. The receiver keeps what it reads
//! of the selected netdevs only. The cost of frames of other netdevs is nil: LLDP is one frame
//! per link every 30 s.
//!
//! `PACKET_ADD_MEMBERSHIP` with `PACKET_MR_MULTICAST` for 01:80:c2:00:00:0e, per selected
//! netdev, adds the group to the netdev's multicast filter so that a NIC that filters in
//! hardware passes LLDPDUs to the host (`packet_mc_add` → `dev_mc_add`). Memberships are
//! dropped with the socket, and by the kernel when a netdev is unregistered
//! (`packet_dev_mclist_delete`). Frames the host sends itself (`PACKET_OUTGOING`: an lldpd on
//! the same host) are skipped.
//!
//! Opening the socket needs `CAP_NET_RAW` in the namespace's user namespace; without it
//! `socket(2)` fails with `EPERM`.
//!
//! This module holds all of the source's `unsafe`.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use super::parse::{ETH_P_LLDP, NEAREST_BRIDGE};

/// `SOL_PACKET` (`include/linux/socket.h`).
const SOL_PACKET: libc::c_int = 263;
/// `PACKET_ADD_MEMBERSHIP` / `PACKET_DROP_MEMBERSHIP` (`include/uapi/linux/if_packet.h`).
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_DROP_MEMBERSHIP: libc::c_int = 2;
/// `PACKET_MR_MULTICAST`.
const PACKET_MR_MULTICAST: libc::c_ushort = 0;
/// `PACKET_OUTGOING`: a frame this host sent.
const PACKET_OUTGOING: u8 = 4;

/// `struct sockaddr_ll` (`include/uapi/linux/if_packet.h`).
#[repr(C)]
#[derive(Clone, Copy)]
struct SockaddrLl {
    family: libc::c_ushort,
    protocol: u16,
    ifindex: libc::c_int,
    hatype: libc::c_ushort,
    pkttype: libc::c_uchar,
    halen: libc::c_uchar,
    addr: [libc::c_uchar; 8],
}

/// `struct packet_mreq`.
#[repr(C)]
struct PacketMreq {
    ifindex: libc::c_int,
    kind: libc::c_ushort,
    alen: libc::c_ushort,
    address: [libc::c_uchar; 8],
}

/// One frame received: the interface it came in on and its bytes.
#[derive(Debug)]
pub struct Frame {
    /// The ifindex of the netdev it arrived on.
    pub ifindex: u32,
    /// Its length (the buffer may hold less: frames longer than it are truncated).
    pub len: usize,
}

/// The receiving socket.
#[derive(Debug)]
pub struct LldpSocket {
    fd: OwnedFd,
}

impl LldpSocket {
    /// Opens the socket, bound to LLDP on every interface, with reads that wait at most
    /// `wait`. Fails with `EPERM` without `CAP_NET_RAW`.
    pub fn open(wait: Duration) -> io::Result<Self> {
        let protocol = ETH_P_LLDP.to_be();
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::c_int::from(protocol),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let addr = SockaddrLl {
            family: libc::AF_PACKET as libc::c_ushort,
            protocol,
            ifindex: 0,
            hatype: 0,
            pkttype: 0,
            halen: 0,
            addr: [0; 8],
        };
        // SAFETY: `addr` is a valid `sockaddr_ll` of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                std::ptr::from_ref(&addr).cast(),
                std::mem::size_of::<SockaddrLl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = libc::timeval {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(wait.subsec_micros()),
        };
        // SAFETY: `tv` is a valid `timeval` of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                std::ptr::from_ref(&tv).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(LldpSocket { fd })
    }

    fn membership(&self, ifindex: u32, option: libc::c_int) -> io::Result<()> {
        let mut address = [0u8; 8];
        address[..6].copy_from_slice(&NEAREST_BRIDGE);
        let mreq = PacketMreq {
            ifindex: libc::c_int::try_from(ifindex)
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            kind: PACKET_MR_MULTICAST,
            alen: 6,
            address,
        };
        // SAFETY: `mreq` is a valid `packet_mreq` of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                option,
                std::ptr::from_ref(&mreq).cast(),
                std::mem::size_of::<PacketMreq>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Adds 01:80:c2:00:00:0e to the multicast filter of netdev `ifindex`.
    pub fn join(&self, ifindex: u32) -> io::Result<()> {
        self.membership(ifindex, PACKET_ADD_MEMBERSHIP)
    }

    /// Removes the membership [`LldpSocket::join`] added.
    pub fn leave(&self, ifindex: u32) -> io::Result<()> {
        self.membership(ifindex, PACKET_DROP_MEMBERSHIP)
    }

    /// Receives one frame into `buf`, skipping frames the host sent. `Ok(None)` when nothing
    /// came within the wait.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Frame>> {
        loop {
            let mut from = SockaddrLl {
                family: 0,
                protocol: 0,
                ifindex: 0,
                hatype: 0,
                pkttype: 0,
                halen: 0,
                addr: [0; 8],
            };
            let mut from_len = std::mem::size_of::<SockaddrLl>() as libc::socklen_t;
            // SAFETY: `buf` is writable for its length; `from` and `from_len` are valid and
            // sized; MSG_TRUNC makes the result the frame's real length.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_TRUNC,
                    std::ptr::from_mut(&mut from).cast(),
                    &mut from_len,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                return match err.raw_os_error() {
                    Some(libc::EAGAIN | libc::EINTR) => Ok(None),
                    _ => Err(err),
                };
            }
            if from.pkttype == PACKET_OUTGOING {
                continue;
            }
            let Ok(ifindex) = u32::try_from(from.ifindex) else {
                continue;
            };
            return Ok(Some(Frame {
                ifindex,
                len: n as usize,
            }));
        }
    }
}
