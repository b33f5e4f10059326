//! `syslog(2)` (glibc's `klogctl`), the kernel log's ring buffer without a device node: the
//! two actions that read it without consuming it.
//!
//! Permissions (kernel/printk/printk.c, `check_syslog_permissions` and
//! `syslog_action_restricted`): with `kernel.dmesg_restrict` = 1 every action needs
//! `CAP_SYSLOG` in the initial user namespace (`capable()`, so a capability held only in a
//! container's own user namespace does not count), else `EPERM`; with 0, `READ_ALL` and
//! `SIZE_BUFFER` are allowed to everyone. The LSM hook `security_syslog` and a seccomp
//! profile may refuse it as well (`EPERM`/`EACCES`).

#![allow(unsafe_code)]

use std::io;

/// `SYSLOG_ACTION_READ_ALL`: copy the newest records that fit, leaving them in the buffer.
const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
/// `SYSLOG_ACTION_SIZE_BUFFER`: the ring buffer's size (`log_buf_len`).
const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;

/// The size of the kernel's log buffer in bytes.
pub fn size_buffer() -> io::Result<usize> {
    loop {
        // SAFETY: SIZE_BUFFER reads neither the buffer nor the length argument; a null
        // pointer and 0 are what the kernel's own callers pass.
        let n = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Copies the newest records that fit into `buf` (whole records, oldest first, each line
/// ending in a newline) and returns how many bytes it wrote.
pub fn read_all(buf: &mut [u8]) -> io::Result<usize> {
    let len = libc::c_int::try_from(buf.len()).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: the kernel writes at most `len` bytes, and `buf` is at least `len` bytes
        // long and borrowed mutably for the whole call.
        let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), len) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n.min(buf.len())),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}
