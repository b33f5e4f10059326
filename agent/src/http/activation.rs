//! systemd socket activation (`--web.systemd-socket`), as exporter-toolkit reads it through
//! go-systemd's `activation.Listeners`: the sockets systemd passes from descriptor 3 on,
//! `LISTEN_FDS` of them, when `LISTEN_PID` is this process; `LISTEN_FDNAMES` names them
//! (`sd_listen_fds(3)`). The three variables are removed whatever they hold, so that no child
//! inherits them, and each descriptor is marked close-on-exec.
//!
//! `unsafe` here: taking ownership of the passed descriptors, `fcntl` and `getsockopt` on them,
//! and removing the variables from the environment.

#![allow(unsafe_code)]

use std::net::TcpListener;
use std::os::fd::{FromRawFd, RawFd};

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// A socket systemd passed.
#[derive(Debug)]
pub(crate) struct Activated {
    /// The listening socket.
    pub(crate) listener: TcpListener,
    /// Its name (`FileDescriptorName=`, `--fdname`), or `LISTEN_FD_<fd>`.
    pub(crate) name: String,
}

/// Why the passed sockets cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActivationError {
    /// None were passed to this process.
    #[error(
        "no socket activation file descriptors found (LISTEN_FDS and LISTEN_PID of this process unset): start it from a systemd socket unit or systemd-socket-activate"
    )]
    NoSockets,
    /// A descriptor is not a listening TCP socket.
    #[error(
        "socket-activated file descriptor {fd} ({name}) is not a listening TCP socket: {reason}"
    )]
    NotTcp {
        /// The descriptor.
        fd: RawFd,
        /// Its name.
        name: String,
        /// What it is instead.
        reason: String,
    },
}

/// Takes the sockets systemd passed to this process and removes the variables that describe
/// them. Call it at start-up, before the agent starts any thread.
pub(crate) fn take() -> Result<Vec<Activated>, ActivationError> {
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        // SAFETY: called from `run` at start-up, before the runtime, the collectors or any
        // other thread of the agent exist, so nothing reads the environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    let ours = pid
        .and_then(|p| p.trim().parse::<u32>().ok())
        .is_some_and(|p| p == std::process::id());
    let count = fds
        .and_then(|n| n.trim().parse::<RawFd>().ok())
        .unwrap_or(0);
    if !ours || count <= 0 {
        return Err(ActivationError::NoSockets);
    }
    let names: Vec<&str> = names
        .as_deref()
        .map_or(Vec::new(), |n| n.split(':').collect());
    let mut out = Vec::new();
    for (index, fd) in (LISTEN_FDS_START..LISTEN_FDS_START + count).enumerate() {
        let name = names
            .get(index)
            .filter(|n| !n.is_empty())
            .map_or_else(|| format!("LISTEN_FD_{fd}"), |n| (*n).to_owned());
        // SAFETY: `fcntl` on a descriptor number; on one that is not open it fails with EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            return Err(not_tcp(
                fd,
                name,
                std::io::Error::last_os_error().to_string(),
            ));
        }
        // SAFETY: as above; the descriptor is open.
        unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        let domain =
            socket_option(fd, libc::SO_DOMAIN).map_err(|e| not_tcp(fd, name.clone(), e))?;
        let kind = socket_option(fd, libc::SO_TYPE).map_err(|e| not_tcp(fd, name.clone(), e))?;
        let listening =
            socket_option(fd, libc::SO_ACCEPTCONN).map_err(|e| not_tcp(fd, name.clone(), e))?;
        if !matches!(domain, libc::AF_INET | libc::AF_INET6) || kind != libc::SOCK_STREAM {
            return Err(not_tcp(
                fd,
                name,
                format!("socket domain {domain}, type {kind}"),
            ));
        }
        if listening == 0 {
            return Err(not_tcp(fd, name, "not listening".to_owned()));
        }
        // SAFETY: systemd passed this open, listening TCP socket to this process (LISTEN_PID)
        // and nothing else in the agent owns it: ownership moves into the listener.
        let listener = unsafe { TcpListener::from_raw_fd(fd) };
        out.push(Activated { listener, name });
    }
    Ok(out)
}

fn not_tcp(fd: RawFd, name: String, reason: String) -> ActivationError {
    ActivationError::NotTcp { fd, name, reason }
}

/// An integer socket option of `fd` (`SOL_SOCKET`).
fn socket_option(fd: RawFd, option: libc::c_int) -> Result<libc::c_int, String> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of an int and its length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}
