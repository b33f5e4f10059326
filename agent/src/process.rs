//! The agent's own process statistics, read from `/proc/self`.
//!
//! These describe the agent, not the host, so they are always read from the agent's own
//! `/proc/self`, not from `--path.procfs` (inside a container that is the host's procfs,
//! where `self` may not resolve to this process). One read of `/proc/self/stat` and one
//! `getrlimit` per scrape; the start time is computed once.

use std::io;
use std::sync::OnceLock;

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

/// The fields of `/proc/<pid>/stat` the statistics use (proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    num_threads: u64,
    starttime: u64,
    vsize: u64,
    rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may hold
/// spaces and parentheses itself, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    // `rest` starts at field 3 (state): field n is at index n - 3.
    let mut fields = rest.split_ascii_whitespace();
    let mut at = |n: usize, from: &mut usize| -> Option<u64> {
        let value = fields.nth(n - *from)?;
        *from = n + 1;
        value.parse().ok()
    };
    let mut next = 3;
    let utime = at(14, &mut next)?;
    let stime = at(15, &mut next)?;
    let num_threads = at(20, &mut next)?;
    let starttime = at(22, &mut next)?;
    let vsize = at(23, &mut next)?;
    let rss_pages = at(24, &mut next)?;
    Some(Stat {
        utime,
        stime,
        num_threads,
        starttime,
        vsize,
        rss_pages,
    })
}

/// `btime` in `/proc/stat`: the boot time in seconds since the Unix epoch.
fn boot_time() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/stat")?;
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no btime in /proc/stat"))
}

/// Clock ticks per second and the page size.
fn units() -> (f64, u64) {
    static UNITS: OnceLock<(f64, u64)> = OnceLock::new();
    *UNITS.get_or_init(sysconf_units)
}

#[allow(unsafe_code)]
fn sysconf_units() -> (f64, u64) {
    // SAFETY: sysconf takes no pointers.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (
        if ticks > 0 { ticks as f64 } else { 100.0 },
        u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096),
    )
}

/// The soft `RLIMIT_NOFILE`, unless unlimited.
#[allow(unsafe_code)]
fn max_fds() -> io::Result<Option<u64>> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur))
}

/// Reads the agent's statistics. The start time is read once; the rest every time.
pub(crate) fn read() -> io::Result<ProcessStats> {
    static START_TIME: OnceLock<f64> = OnceLock::new();
    let text = std::fs::read_to_string("/proc/self/stat")?;
    let stat = parse_stat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected /proc/self/stat format",
        )
    })?;
    let (ticks, page) = units();
    let start_time_seconds = match START_TIME.get() {
        Some(start) => *start,
        None => {
            let start = boot_time()? as f64 + stat.starttime as f64 / ticks;
            *START_TIME.get_or_init(|| start)
        }
    };
    Ok(ProcessStats {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_memory_bytes: stat.rss_pages.saturating_mul(page),
        virtual_memory_bytes: stat.vsize,
        open_fds: open_fds()?,
        max_fds: max_fds()?,
        start_time_seconds,
        threads: stat.num_threads,
    })
}

/// The open descriptors: since Linux 6.2 the size `stat` gives `/proc/self/fd` is their
/// number (the agent keeps hundreds of attribute files open, and listing them costs more
/// than the rest of these statistics); older kernels say 0, and the directory is listed.
fn open_fds() -> io::Result<u64> {
    if let Ok(meta) = std::fs::metadata("/proc/self/fd")
        && meta.len() > 0
    {
        return Ok(meta.len());
    }
    listed_fds()
}

fn listed_fds() -> io::Result<u64> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count() as u64)
}

/// The allocator's trim and mmap thresholds while collecting: 8 MiB and 4 MiB.
const TRIM_THRESHOLD: i32 = 8 << 20;
const MMAP_THRESHOLD: i32 = 4 << 20;
/// The most glibc arenas: as many as collection lanes may run at once
/// (`railscope_collectors::schedule::collect_width`).
const ARENA_MAX: i32 = 4;

/// Sets glibc's allocator up for a process that does the same work every scrape.
///
/// * **Thresholds.** By default a freed block over 128 KiB (a scrape's sample array, its
///   text) is unmapped, and an arena whose free top passes 128 KiB is trimmed with
///   `madvise`: every scrape then pays the system calls and the page faults of its own
///   buffers again, about 5 % of an infiniband scrape's CPU here. With the thresholds above
///   that memory stays with the arena and is reused. Peak resident memory does not change
///   (it is reached during a scrape either way); between scrapes the agent stays at its peak.
/// * **Arenas.** glibc gives each thread that allocates an arena of its own, up to eight per
///   CPU, and each arena keeps its own free memory. The agent's collection lanes, GPU
///   threads, runtime workers and blocking threads (25 with eight GPUs) then fragment 16
///   arenas on two CPUs and one each on a large node, and resident memory crept up over
///   thousands of scrapes although the heap in use stayed flat. Four arenas, as many as
///   lanes, took that creep from +1.9 to +0.9 MiB over 20,000 back-to-back scrapes with
///   eight GPUs (flat after the first 90 s) and the RSS from 26.4 to 20.4 MiB, for at most
///   5 % more CPU per scrape (none measurable with the default collectors alone).
///
/// Left alone when `GLIBC_TUNABLES` or a `MALLOC_*` variable sets the allocator up.
pub(crate) fn tune_allocator() {
    if !set_by_user(std::env::vars_os().map(|(k, _)| k)) {
        set_up();
    }
}

/// Whether the environment already tunes glibc's allocator: `GLIBC_TUNABLES`, or one of its
/// `MALLOC_*` variables (`MALLOC_ARENA_MAX`, `MALLOC_TRIM_THRESHOLD_`, ...).
fn set_by_user(mut keys: impl Iterator<Item = std::ffi::OsString>) -> bool {
    keys.any(|k| {
        let k = k.to_string_lossy();
        k == "GLIBC_TUNABLES" || k.starts_with("MALLOC_")
    })
}

#[cfg(target_env = "gnu")]
#[allow(unsafe_code)]
fn set_up() {
    // SAFETY: mallopt takes two integers; it is called before any thread is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}

#[cfg(not(target_env = "gnu"))]
fn set_up() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_is_left_alone_when_the_environment_tunes_it() {
        let keys = |ks: &[&str]| ks.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(!set_by_user(
            keys(&["PATH", "HOME", "RAILSCOPE_X"]).into_iter()
        ));
        for set in [
            "GLIBC_TUNABLES",
            "MALLOC_ARENA_MAX",
            "MALLOC_TRIM_THRESHOLD_",
        ] {
            assert!(set_by_user(keys(&["PATH", set]).into_iter()), "{set}");
        }
    }

    #[test]
    fn reads_this_process() {
        let stats = read().unwrap();
        assert!(stats.resident_memory_bytes > 0);
        assert!(stats.virtual_memory_bytes >= stats.resident_memory_bytes);
        assert!(stats.open_fds >= 3);
        // Both ways of counting agree (other test threads may open files in between).
        let listed = listed_fds().unwrap();
        let counted = open_fds().unwrap();
        assert!(
            listed.abs_diff(counted) <= 8,
            "{listed} listed, {counted} counted"
        );
        assert!(stats.threads >= 1);
        assert!(stats.start_time_seconds > 1.0e9);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(stats.start_time_seconds <= now + 1.0);
        assert!(stats.cpu_seconds >= 0.0);
    }

    /// The command name may hold spaces and parentheses: fields count from the last `)`.
    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let line = "4242 (rail (scope) x) S 1 4242 4242 0 -1 4194560 1201 0 0 0 \
                    37 12 0 0 20 0 9 0 123456 45678592 2048 18446744073709551615 1 1 0 0 0 0 \
                    0 4096 1260 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                utime: 37,
                stime: 12,
                num_threads: 9,
                starttime: 123_456,
                vsize: 45_678_592,
                rss_pages: 2048,
            })
        );
        assert_eq!(parse_stat("4242 (cut) S 1 2 3"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
        assert_eq!(parse_stat(""), None);
    }
}
