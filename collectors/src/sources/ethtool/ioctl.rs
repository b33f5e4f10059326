//! The `SIOCETHTOOL` ioctl: `ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS` and `ETHTOOL_GSTATS`
//! for the `ETH_SS_STATS` string set, on an `AF_INET`/`SOCK_DGRAM` socket.
//!
//! Kernel interface: `net/ethtool/ioctl.c` (`ethtool_get_sset_info`, `ethtool_get_strings`,
//! `ethtool_get_stats`) and `include/uapi/linux/ethtool.h`. All three are in `dev_ethtool`'s
//! list of commands anyone may run (no `CAP_NET_ADMIN`).
//!
//! Each request carries the count the caller expects (from `ETHTOOL_GSSET_INFO`, or the
//! number of names for `ETHTOOL_GSTATS`). Kernels with upstream commit 7b07be1ff1cb
//! ("ethtool: Avoid overflowing userspace buffer on stats query", v6.19, backported to the
//! stable series) answer a count that no longer matches the driver's with zero entries. Older
//! kernels ignore the count: `ethtool_get_strings` copies however many entries the driver has
//! *now*, so a set that grew since `GSSET_INFO` (mlx5 adds five entries when PFC is enabled on
//! a priority) would be written past a buffer sized from it. Every reply buffer therefore has
//! [`super::reader::SLACK`] entries of room beyond the count and is an anonymous mapping
//! followed by a `PROT_NONE` guard page: a reply that still does not fit makes the kernel's
//! `copy_to_user` fault and the ioctl fail with `EFAULT`, never corrupt the heap. The caller
//! treats a zero count, a different count and `EFAULT` alike: the set changed, read again.
//!
//! This module holds all of the source's `unsafe`; it returns the raw reply bytes, which
//! [`super::reader`] parses.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// `SIOCETHTOOL` (`include/uapi/linux/sockios.h`).
pub const SIOCETHTOOL: u32 = 0x8946;
/// `ETHTOOL_GSTRINGS`: get the names of a string set.
pub const ETHTOOL_GSTRINGS: u32 = 0x1b;
/// `ETHTOOL_GSTATS`: get the values of the statistics.
pub const ETHTOOL_GSTATS: u32 = 0x1d;
/// `ETHTOOL_GSSET_INFO`: get the sizes of string sets.
pub const ETHTOOL_GSSET_INFO: u32 = 0x37;
/// `ETH_SS_STATS`: the string set of `ethtool -S`.
pub const ETH_SS_STATS: u32 = 1;
/// `ETH_GSTRING_LEN`: each name is this many bytes, NUL-padded.
pub const ETH_GSTRING_LEN: usize = 32;
/// Size of `struct ethtool_gstrings` before its data: `cmd`, `string_set`, `len`.
pub const GSTRINGS_HEADER: usize = 12;
/// Size of `struct ethtool_stats` before its data: `cmd`, `n_stats`.
pub const GSTATS_HEADER: usize = 8;
/// Size of `struct ethtool_sset_info` before its data: `cmd`, `reserved`, `sset_mask`.
const SSET_INFO_HEADER: usize = 16;
/// `IFNAMSIZ`.
const IFNAMSIZ: usize = 16;

/// `struct ifreq` as `SIOCETHTOOL` uses it: the name and `ifr_data`. The union is padded to
/// its largest member (`struct ifmap`, 24 bytes on 64-bit), so the kernel's
/// `copy_from_user(sizeof(struct ifreq))` never reads past this struct.
#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// A socket to issue ethtool ioctls on. The netdevs it sees are those of the network
/// namespace the agent runs in.
#[derive(Debug)]
pub struct EthtoolSocket {
    fd: OwnedFd,
}

impl EthtoolSocket {
    /// Opens an `AF_INET`/`SOCK_DGRAM` socket.
    pub fn open() -> io::Result<EthtoolSocket> {
        // SAFETY: socket(2) takes no pointers; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor this function owns and closes nowhere else.
        Ok(EthtoolSocket {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Runs `SIOCETHTOOL` for `netdev` with `buf` as the command buffer.
    fn ethtool(&self, netdev: &str, buf: &mut GuardedBuf) -> io::Result<()> {
        let name = netdev.as_bytes();
        if name.is_empty() || name.len() >= IFNAMSIZ || name.contains(&0) {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        let mut ifr = IfReq {
            name: [0; IFNAMSIZ],
            data: buf.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        ifr.name[..name.len()].copy_from_slice(name);
        // SAFETY: `ifr` is a valid, NUL-terminated `struct ifreq` that outlives the call;
        // `ifr.data` points at `buf`, a writable mapping of `buf.len()` bytes followed by a
        // PROT_NONE guard page, so a reply longer than the buffer faults in the kernel's
        // `copy_to_user` (EFAULT) instead of writing anywhere else.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                SIOCETHTOOL as _,
                &mut ifr as *mut IfReq,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The number of statistics `netdev`'s driver reports (`ETHTOOL_GSSET_INFO` for
    /// `ETH_SS_STATS`); `None` when the driver has no such set.
    pub fn stats_count(&self, netdev: &str) -> io::Result<Option<u32>> {
        let mut buf = GuardedBuf::new(SSET_INFO_HEADER + 4)?;
        buf.put_u32(0, ETHTOOL_GSSET_INFO);
        buf.put_u64(8, 1 << ETH_SS_STATS);
        self.ethtool(netdev, &mut buf)?;
        let bytes = buf.bytes();
        let mask = u64::from_ne_bytes(field(bytes, 8));
        if mask & (1 << ETH_SS_STATS) == 0 {
            return Ok(None);
        }
        Ok(Some(u32::from_ne_bytes(field(bytes, SSET_INFO_HEADER))))
    }

    /// The raw `ETHTOOL_GSTRINGS` reply for `ETH_SS_STATS` (`struct ethtool_gstrings` and
    /// its names), asking for `count` names in a buffer with room for `capacity` (at least
    /// `count`). Fails with `EFAULT` when an older kernel had more than `capacity`.
    pub fn strings(&self, netdev: &str, count: u32, capacity: usize) -> io::Result<Vec<u8>> {
        let capacity = capacity.max(count as usize);
        let mut buf = GuardedBuf::new(GSTRINGS_HEADER + capacity * ETH_GSTRING_LEN)?;
        buf.put_u32(0, ETHTOOL_GSTRINGS);
        buf.put_u32(4, ETH_SS_STATS);
        buf.put_u32(8, count);
        self.ethtool(netdev, &mut buf)?;
        let bytes = buf.bytes();
        let len = u32::from_ne_bytes(field(bytes, 8)) as usize;
        let end = GSTRINGS_HEADER.saturating_add(len.saturating_mul(ETH_GSTRING_LEN));
        Ok(bytes[..end.min(bytes.len())].to_vec())
    }

    /// The raw `ETHTOOL_GSTATS` reply (`struct ethtool_stats` and its values), asking for
    /// `count` values in a buffer with room for `capacity` (at least `count`). Fails with
    /// `EFAULT` when an older kernel had more than `capacity`.
    pub fn stats(&self, netdev: &str, count: u32, capacity: usize) -> io::Result<Vec<u8>> {
        let capacity = capacity.max(count as usize);
        let mut buf = GuardedBuf::new(GSTATS_HEADER + capacity * 8)?;
        buf.put_u32(0, ETHTOOL_GSTATS);
        buf.put_u32(4, count);
        self.ethtool(netdev, &mut buf)?;
        let bytes = buf.bytes();
        let n = u32::from_ne_bytes(field(bytes, 4)) as usize;
        let end = GSTATS_HEADER.saturating_add(n.saturating_mul(8));
        Ok(bytes[..end.min(bytes.len())].to_vec())
    }
}

/// `N` bytes of `bytes` at `offset` (zeros past the end; callers size buffers so it never is).
fn field<const N: usize>(bytes: &[u8], offset: usize) -> [u8; N] {
    let mut out = [0; N];
    if let Some(src) = bytes.get(offset..offset + N) {
        out.copy_from_slice(src);
    }
    out
}

/// A zeroed, writable anonymous mapping of at least `len` bytes (whole pages), followed by
/// one `PROT_NONE` guard page.
struct GuardedBuf {
    ptr: NonNull<u8>,
    /// Writable bytes (a whole number of pages).
    len: usize,
    /// Writable bytes plus the guard page.
    map_len: usize,
}

impl GuardedBuf {
    fn new(min_len: usize) -> io::Result<GuardedBuf> {
        // SAFETY: sysconf takes no pointers.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let len = min_len.max(1).div_ceil(page) * page;
        let map_len = len + page;
        // SAFETY: an anonymous private mapping at an address the kernel chooses; no existing
        // memory is touched. The result is checked before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let Some(ptr) = NonNull::new(addr.cast::<u8>()) else {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        };
        let buf = GuardedBuf { ptr, len, map_len };
        // SAFETY: `ptr + len` is page-aligned and the last page of the mapping just created;
        // making it inaccessible affects only this mapping (unmapped by `Drop`).
        let rc =
            unsafe { libc::mprotect(addr.cast::<u8>().add(len).cast(), page, libc::PROT_NONE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(buf)
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes of the mapping are readable and writable, zeroed by
        // mmap, and live as long as `self`; the kernel has finished writing (the ioctl
        // returned) and nothing else aliases them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    fn put_u32(&mut self, offset: usize, value: u32) {
        self.bytes_mut()[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
    }

    fn put_u64(&mut self, offset: usize, value: u64) {
        self.bytes_mut()[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
    }
}

impl Drop for GuardedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`map_len` are exactly the mapping created in `new`, unmapped once.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.map_len);
        }
    }
}

// SAFETY: the mapping is owned exclusively by the buffer; moving it between threads is fine.
unsafe impl Send for GuardedBuf {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_no_stats_and_that_is_not_an_error() {
        let socket = EthtoolSocket::open().unwrap();
        match socket.stats_count("lo") {
            Ok(None) => {}
            Err(err) => assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP), "{err}"),
            Ok(Some(n)) => panic!("lo has {n} stats"),
        }
    }

    #[test]
    fn a_missing_netdev_is_enodev() {
        let socket = EthtoolSocket::open().unwrap();
        let err = socket.stats_count("rs-none-such0").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
        let err = socket
            .stats_count("a-name-longer-than-ifnamsiz")
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn buffers_are_zeroed_whole_pages() {
        let buf = GuardedBuf::new(10).unwrap();
        assert!(buf.len >= 10);
        assert!(buf.bytes().iter().all(|b| *b == 0));
    }
}
