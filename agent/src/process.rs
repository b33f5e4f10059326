//! The agent's own process statistics, read from `/proc/self` through the `procfs` crate.
//!
//! These describe the agent, not the host, so they are always read from the agent's own
//! `/proc/self`, not from `--path.procfs` (inside a container that is the host's procfs,
//! where `self` may not resolve to this process).

use std::sync::OnceLock;

use procfs::WithCurrentSystemInfo;

/// A snapshot of the agent's own resource use.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessStats {
    /// User plus system CPU time in seconds.
    pub(crate) cpu_seconds: f64,
    /// Resident set size in bytes.
    pub(crate) resident_memory_bytes: u64,
    /// Virtual memory size in bytes.
    pub(crate) virtual_memory_bytes: u64,
    /// Open file descriptors.
    pub(crate) open_fds: u64,
    /// The soft limit on open file descriptors, unless unlimited.
    pub(crate) max_fds: Option<u64>,
    /// Start time since the Unix epoch in seconds.
    pub(crate) start_time_seconds: f64,
    /// OS threads.
    pub(crate) threads: u64,
}

/// Reads the agent's statistics. The start time is read once; the rest every time.
pub(crate) fn read() -> Result<ProcessStats, procfs::ProcError> {
    static START_TIME: OnceLock<f64> = OnceLock::new();
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let start_time_seconds = match START_TIME.get() {
        Some(start) => *start,
        None => {
            let start = procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks;
            *START_TIME.get_or_init(|| start)
        }
    };
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(v) => Some(v),
        procfs::process::LimitValue::Unlimited => None,
    };
    Ok(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_memory_bytes: stat.rss_bytes().get(),
        virtual_memory_bytes: stat.vsize,
        open_fds: open_fds(&me)?,
        max_fds,
        start_time_seconds,
        threads: u64::try_from(stat.num_threads).unwrap_or(0),
    })
}

/// The open descriptors: since Linux 6.2 the size `stat` gives `/proc/self/fd` is their
/// number (the agent keeps hundreds of attribute files open, and listing them costs more
/// than the rest of these statistics); older kernels say 0, and the directory is listed.
fn open_fds(me: &procfs::process::Process) -> Result<u64, procfs::ProcError> {
    if let Ok(meta) = std::fs::metadata("/proc/self/fd")
        && meta.len() > 0
    {
        return Ok(meta.len());
    }
    Ok(me.fd_count()? as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let stats = super::read().unwrap();
        assert!(stats.resident_memory_bytes > 0);
        assert!(stats.open_fds >= 3);
        let me = procfs::process::Process::myself().unwrap();
        // Both ways of counting agree (other test threads may open files in between).
        let listed = me.fd_count().unwrap() as u64;
        let counted = super::open_fds(&me).unwrap();
        assert!(
            listed.abs_diff(counted) <= 8,
            "{listed} listed, {counted} counted"
        );
        assert!(stats.threads >= 1);
        assert!(stats.start_time_seconds > 1.0e9);
    }
}
