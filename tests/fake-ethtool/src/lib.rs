//! An `LD_PRELOAD` shim that answers the `SIOCETHTOOL` statistics ioctls
//! (`ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS`, `ETHTOOL_GSTATS`) for one netdev from a file, so
//! a test can make a real veth report mlx5 PFC counters that climb. Everything else goes to
//! the real `ioctl`.
//!
//! * `RAILSCOPE_FAKE_ETHTOOL_NETDEV`: the netdev to answer for.
//! * `RAILSCOPE_FAKE_ETHTOOL`: a file of `<stat name> <value>` lines, re-read on every call.
//!
//! Like a kernel with upstream commit 7b07be1ff1cb, a request whose count differs from the
//! file's answers with zero entries.
//!
//! The whole crate is an FFI boundary, so it is allowed `unsafe`.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_int, c_ulong, c_void};
use std::sync::OnceLock;

const SIOCETHTOOL: c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
const IFNAMSIZ: usize = 16;

type Ioctl = unsafe extern "C" fn(c_int, c_ulong, *mut c_void) -> c_int;

fn real_ioctl() -> Option<Ioctl> {
    static REAL: OnceLock<usize> = OnceLock::new();
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; the result is the libc ioctl.
    let ptr =
        *REAL.get_or_init(|| unsafe { libc::dlsym(libc::RTLD_NEXT, c"ioctl".as_ptr()) } as usize);
    // SAFETY: a non-null result of dlsym("ioctl") has the ioctl signature.
    (ptr != 0).then(|| unsafe { std::mem::transmute::<usize, Ioctl>(ptr) })
}

fn stats() -> Vec<(String, u64)> {
    let Some(path) = std::env::var_os("RAILSCOPE_FAKE_ETHTOOL") else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(name, value)| Some((name.trim().to_owned(), value.trim().parse().ok()?)))
        .collect()
}

unsafe fn put_u32(base: *mut u8, offset: usize, value: u32) {
    // SAFETY: the caller passes a buffer that holds `offset + 4` bytes.
    unsafe { base.add(offset).cast::<u32>().write_unaligned(value) }
}

unsafe fn get_u32(base: *const u8, offset: usize) -> u32 {
    // SAFETY: the caller passes a buffer that holds `offset + 4` bytes.
    unsafe { base.add(offset).cast::<u32>().read_unaligned() }
}

/// Answers one ethtool command for the faked netdev.
unsafe fn answer(data: *mut u8) -> c_int {
    let stats = stats();
    let count = stats.len() as u32;
    // SAFETY (all below): `data` is the caller's command buffer, sized for the command it
    // holds, as the kernel ABI requires (`struct ethtool_sset_info` and friends).
    unsafe {
        match get_u32(data, 0) {
            ETHTOOL_GSSET_INFO => {
                let mask = data.add(8).cast::<u64>().read_unaligned();
                if mask & (1 << ETH_SS_STATS) == 0 {
                    data.add(8).cast::<u64>().write_unaligned(0);
                } else {
                    data.add(8).cast::<u64>().write_unaligned(1 << ETH_SS_STATS);
                    put_u32(data, 16, count);
                }
                0
            }
            ETHTOOL_GSTRINGS => {
                if get_u32(data, 4) != ETH_SS_STATS {
                    *libc::__errno_location() = libc::EOPNOTSUPP;
                    return -1;
                }
                if get_u32(data, 8) != count {
                    put_u32(data, 8, 0);
                    return 0;
                }
                for (i, (name, _)) in stats.iter().enumerate() {
                    let slot = data.add(12 + i * ETH_GSTRING_LEN);
                    std::ptr::write_bytes(slot, 0, ETH_GSTRING_LEN);
                    let bytes = &name.as_bytes()[..name.len().min(ETH_GSTRING_LEN - 1)];
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot, bytes.len());
                }
                0
            }
            ETHTOOL_GSTATS => {
                if get_u32(data, 4) != count {
                    put_u32(data, 4, 0);
                    return 0;
                }
                for (i, (_, value)) in stats.iter().enumerate() {
                    data.add(8 + i * 8).cast::<u64>().write_unaligned(*value);
                }
                0
            }
            _ => {
                *libc::__errno_location() = libc::EOPNOTSUPP;
                -1
            }
        }
    }
}

/// The interposed `ioctl`. On x86-64 and aarch64 a variadic call passes its third argument
/// like a fixed one, so this signature receives what callers pass.
///
/// # Safety
/// Called by C code with the arguments of `ioctl(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: *mut c_void) -> c_int {
    if request == SIOCETHTOOL
        && !arg.is_null()
        && let Some(netdev) = std::env::var_os("RAILSCOPE_FAKE_ETHTOOL_NETDEV")
    {
        // SAFETY: for SIOCETHTOOL `arg` is a `struct ifreq`: a NUL-padded name of IFNAMSIZ
        // bytes followed by the `ifr_data` pointer.
        let (name, data) = unsafe {
            let name_bytes = std::slice::from_raw_parts(arg.cast::<u8>(), IFNAMSIZ);
            let name = CStr::from_bytes_until_nul(name_bytes)
                .map(|c| c.to_bytes().to_vec())
                .unwrap_or_default();
            (
                name,
                arg.cast::<u8>()
                    .add(IFNAMSIZ)
                    .cast::<*mut u8>()
                    .read_unaligned(),
            )
        };
        if name == netdev.as_encoded_bytes() && !data.is_null() {
            // SAFETY: `data` is the ethtool command buffer the caller passed.
            return unsafe { answer(data) };
        }
    }
    match real_ioctl() {
        // SAFETY: forwarding the caller's arguments unchanged.
        Some(real) => unsafe { real(fd, request, arg) },
        None => {
            // SAFETY: errno is thread-local and always writable.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
    }
}
