//! The kernel's user MAD interface: finding `/dev/infiniband/umadN` for an RDMA port,
//! registering an agent on QP0, and the `write(2)` / `poll(2)` / `read(2)` of one SMP.
//!
//! Kernel interface: `include/uapi/rdma/ib_user_mad.h` and `drivers/infiniband/core/user_mad.c`
//! (`ib_umad_reg_agent2`, `ib_umad_write`, `ib_umad_read`, `ib_umad_poll`), the agent
//! checks of `ib_register_mad_agent()` in `drivers/infiniband/core/mad.c`, and
//! `Documentation/infiniband/user_mad.rst`. Each umad device is one port:
//! `/sys/class/infiniband_mad/umadN/{ibdev,port}` says which.
//!
//! `IB_USER_MAD_REGISTER_AGENT2` with `qpn = 0` asks for the port's SMI QP. A port without
//! one — RoCE (rxe, mlx5 in Ethernet mode) has a umad device for QP1 only — fails with
//! `EPROTONOSUPPORT` ("QP 0 not supported"); iWARP ports (siw, irdma in iWARP mode) have no
//! umad device at all. Both are [`UmadError::NotAvailable`]. The first registration of a
//! file also turns on the 64-byte header with the P_Key index (`use_pkey_index`), which is
//! the layout [`super::mad`] writes; `IB_USER_MAD_ENABLE_PKEY` is sent first all the same,
//! so the layout does not depend on that side effect.
//!
//! This module holds all of the reader's `unsafe`: two ioctls and `poll(2)`.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::CollectError;
use crate::fs::{Fs, attr};

use super::mad::{MGMT_CLASS_SUBN_DIRECTED_ROUTE, SMP_CLASS_VERSION};

/// `IB_IOCTL_MAGIC`.
const IB_IOCTL_MAGIC: u32 = 0x1b;
/// `_IOC(dir, IB_IOCTL_MAGIC, nr, size)` of `include/uapi/asm-generic/ioctl.h`.
const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (IB_IOCTL_MAGIC << 8) | nr
}
/// `_IOC_WRITE`.
const IOC_WRITE: u32 = 1;
/// `_IOC_READ`.
const IOC_READ: u32 = 2;
/// `IB_USER_MAD_UNREGISTER_AGENT`: `_IOW(IB_IOCTL_MAGIC, 2, __u32)`.
pub const IB_USER_MAD_UNREGISTER_AGENT: u32 = ioc(IOC_WRITE, 2, 4);
/// `IB_USER_MAD_ENABLE_PKEY`: `_IO(IB_IOCTL_MAGIC, 3)`.
pub const IB_USER_MAD_ENABLE_PKEY: u32 = ioc(0, 3, 0);
/// `IB_USER_MAD_REGISTER_AGENT2`: `_IOWR(IB_IOCTL_MAGIC, 4, struct ib_user_mad_reg_req2)`.
pub const IB_USER_MAD_REGISTER_AGENT2: u32 =
    ioc(IOC_READ | IOC_WRITE, 4, std::mem::size_of::<RegReq2>());

/// `struct ib_user_mad_reg_req2` (40 bytes).
#[repr(C)]
#[derive(Debug, Default)]
struct RegReq2 {
    id: u32,
    qpn: u32,
    mgmt_class: u8,
    mgmt_class_version: u8,
    res: u16,
    flags: u32,
    method_mask: [u64; 2],
    oui: u32,
    rmpp_version: u8,
    reserved: [u8; 3],
}

const _: () = assert!(std::mem::size_of::<RegReq2>() == 40);

/// A umad device: one port of one RDMA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmadDevice {
    /// Its name (`umad0`).
    pub name: String,
    /// Its character device (`/dev/infiniband/umad0`).
    pub dev_path: PathBuf,
}

/// Finds the umad device of `ibdev` port `port` under `sysfs`
/// (`class/infiniband_mad/umad*/{ibdev,port}`); its node is `dev/infiniband/<name>` under
/// `dev_root`. `Ok(None)` when there is none: no `ib_umad` module, no RDMA device, or a
/// port without MADs (iWARP).
pub fn find_umad(
    fs: &dyn Fs,
    sysfs: &Path,
    dev_root: &Path,
    ibdev: &str,
    port: u32,
) -> Result<Option<UmadDevice>, CollectError> {
    let class = sysfs.join("class/infiniband_mad");
    let Some(entries) = attr::list(fs, Some(ibdev), &class)? else {
        return Ok(None);
    };
    for entry in entries {
        // `abi_version` lives here too; every device is `umadN` (`issmN` are the SM's).
        if !entry.name.starts_with("umad") {
            continue;
        }
        let dir = class.join(&entry.name);
        let Some(dev) = attr::peek(fs, &dir.join("ibdev")) else {
            continue;
        };
        if dev != ibdev {
            continue;
        }
        let this_port = attr::peek(fs, &dir.join("port")).and_then(|p| p.trim().parse().ok());
        if this_port == Some(port) {
            return Ok(Some(UmadDevice {
                dev_path: dev_root.join("infiniband").join(&entry.name),
                name: entry.name,
            }));
        }
    }
    Ok(None)
}

/// Why the device could not be used.
#[derive(Debug)]
pub enum UmadError {
    /// The port has no SMI (QP0): `EPROTONOSUPPORT` from the registration (RoCE), or the
    /// device node is missing, gone or not a umad device (`ENOENT`, `ENXIO`, `ENODEV`,
    /// `EPIPE`, `ENOTTY`).
    NotAvailable(io::Error),
    /// Opening the device or registering the agent was not allowed (`EACCES`, `EPERM`).
    Permission(io::Error),
    /// Any other failure of `open`, an ioctl, `write`, `poll` or `read`.
    Io {
        /// The call (`open`, `IB_USER_MAD_REGISTER_AGENT2`, `write`, …).
        call: &'static str,
        /// What it returned.
        err: io::Error,
    },
}

impl UmadError {
    /// Classifies `err` of `call`.
    fn of(call: &'static str, err: io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => UmadError::Permission(err),
            Some(
                libc::EPROTONOSUPPORT
                | libc::EOPNOTSUPP
                | libc::ENOENT
                | libc::ENXIO
                | libc::ENODEV
                | libc::ENOTTY
                | libc::EPIPE,
            ) => UmadError::NotAvailable(err),
            _ => UmadError::Io { call, err },
        }
    }
}

/// What a query writes requests to and reads replies from; [`UmadPort`] on a device, a
/// replay of recorded replies in tests.
pub trait Transport {
    /// Sends one request (umad header and SMP).
    fn send(&mut self, packet: &[u8]) -> Result<(), UmadError>;
    /// Waits until `deadline` for one packet and copies it into `buf`: its length, or
    /// `None` when none came in time.
    fn recv(&mut self, buf: &mut [u8], deadline: Instant) -> Result<Option<usize>, UmadError>;
    /// The agent id requests must carry.
    fn agent_id(&self) -> u32;
}

/// An open umad device with an agent registered for directed-route SMPs on QP0. Dropping
/// it unregisters the agent and closes the device (which would unregister it, too).
#[derive(Debug)]
pub struct UmadPort {
    file: File,
    agent_id: u32,
}

impl UmadPort {
    /// Opens `dev_path` read-write and registers the agent (class 0x81, version 1, QP0, no
    /// unsolicited methods: replies to its own requests reach it by transaction id).
    pub fn open(dev_path: &Path) -> Result<Self, UmadError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(dev_path)
            .map_err(|err| UmadError::of("open", err))?;
        let fd = file.as_raw_fd();
        // SAFETY: IB_USER_MAD_ENABLE_PKEY takes no argument; `fd` is an open file this
        // function owns.
        let rc = unsafe { libc::ioctl(fd, IB_USER_MAD_ENABLE_PKEY as _) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            // A kernel that already enabled it for this file (it cannot have: just opened)
            // answers EINVAL; anything else is a real failure.
            if err.raw_os_error() != Some(libc::EINVAL) {
                return Err(UmadError::of("IB_USER_MAD_ENABLE_PKEY", err));
            }
        }
        let mut req = RegReq2 {
            qpn: 0,
            mgmt_class: MGMT_CLASS_SUBN_DIRECTED_ROUTE,
            mgmt_class_version: SMP_CLASS_VERSION,
            ..RegReq2::default()
        };
        // SAFETY: `req` is a valid, writable `struct ib_user_mad_reg_req2` (the layout is
        // checked above), alive for the call; the kernel copies it in and writes `id`.
        let rc = unsafe {
            libc::ioctl(
                fd,
                IB_USER_MAD_REGISTER_AGENT2 as _,
                &mut req as *mut RegReq2,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            // ib_register_mad_agent()'s catch-all is EINVAL; a kernel without the ioctl
            // (before 3.17) answers ENOTTY. Neither port can be asked.
            if let Some(libc::EINVAL | libc::ENOTTY | libc::ENOSYS) = err.raw_os_error() {
                return Err(UmadError::NotAvailable(err));
            }
            return Err(UmadError::of("IB_USER_MAD_REGISTER_AGENT2", err));
        }
        Ok(UmadPort {
            file,
            agent_id: req.id,
        })
    }
}

impl Transport for UmadPort {
    fn send(&mut self, packet: &[u8]) -> Result<(), UmadError> {
        match self.file.write(packet) {
            Ok(n) if n == packet.len() => Ok(()),
            Ok(n) => Err(UmadError::Io {
                call: "write",
                err: io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("wrote {n} of {} bytes", packet.len()),
                ),
            }),
            Err(err) => Err(UmadError::of("write", err)),
        }
    }

    fn recv(&mut self, buf: &mut [u8], deadline: Instant) -> Result<Option<usize>, UmadError> {
        loop {
            match self.file.read(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(UmadError::of("read", err)),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if !poll_in(&self.file, left).map_err(|err| UmadError::of("poll", err))? {
                return Ok(None);
            }
        }
    }

    fn agent_id(&self) -> u32 {
        self.agent_id
    }
}

impl Drop for UmadPort {
    fn drop(&mut self) {
        let mut id = self.agent_id;
        // SAFETY: the argument is a valid `__u32` alive for the call; a failure (the
        // device went away) leaves nothing to undo, and close() unregisters in any case.
        unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                IB_USER_MAD_UNREGISTER_AGENT as _,
                &mut id as *mut u32,
            )
        };
    }
}

/// Waits up to `timeout` for `file` to be readable.
fn poll_in(file: &File, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Round up, so a wait of less than a millisecond still waits.
    let ms = timeout.as_micros().div_ceil(1000);
    let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: `pfd` is one valid pollfd, alive for the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        return Ok(rc > 0);
    }
}
