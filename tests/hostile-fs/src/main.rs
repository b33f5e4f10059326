//! `railscope-hostile-fs SOURCE MOUNTPOINT [RULES]`: mounts a read-only FUSE mirror of the
//! directory SOURCE (a fixture sysfs tree) on MOUNTPOINT, misbehaving on the paths the rule
//! file RULES names (see `rules.rs` and the README). The rule file is re-read whenever it
//! changes, and on SIGHUP. Prints `mounted` once the mount is up; SIGTERM or SIGINT unmount
//! (lazily, so a reader stuck in a blocked read does not hold the mount) and exit.

mod fs;
mod rules;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};

/// Threads serving FUSE requests.
const SESSION_THREADS: usize = 4;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (source, mountpoint, rules) = match args.as_slice() {
        [s, m] => (PathBuf::from(s), PathBuf::from(m), None),
        [s, m, r] => (PathBuf::from(s), PathBuf::from(m), Some(PathBuf::from(r))),
        _ => {
            eprintln!("usage: railscope-hostile-fs SOURCE MOUNTPOINT [RULES]");
            return ExitCode::from(2);
        }
    };
    match run(source, mountpoint, rules) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("railscope-hostile-fs: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(source: PathBuf, mountpoint: PathBuf, rules: Option<PathBuf>) -> Result<(), String> {
    if !source.is_dir() {
        return Err(format!("{} is not a directory", source.display()));
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is missing: load the fuse module (modprobe fuse)".into());
    }
    let rules = Arc::new(fs::RuleSource::new(rules)?);
    // Block the signals before the session threads start, so they inherit the mask and only
    // the sigwait below sees them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGTERM);
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGHUP);
    signals
        .thread_block()
        .map_err(|e| format!("blocking signals: {e}"))?;

    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::RO,
        fuser::MountOption::FSName("railscope-hostile-fs".into()),
    ];
    config.n_threads = Some(SESSION_THREADS);
    let filesystem = fs::HostileFs::new(source, rules.clone());
    let session = fuser::spawn_mount(filesystem, &mountpoint, &config)
        .map_err(|e| format!("mounting on {}: {e}", mountpoint.display()))?;
    println!("mounted");
    let _ = std::io::stdout().flush();

    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => rules.reload(),
            Ok(_) => break,
            Err(err) => return Err(format!("waiting for signals: {err}")),
        }
    }
    // A lazy unmount returns at once even while a reader is stuck in a blocked read; exiting
    // closes /dev/fuse, which aborts the connection and fails whatever is still pending.
    if let Err(err) = nix::mount::umount2(&mountpoint, nix::mount::MntFlags::MNT_DETACH) {
        eprintln!("railscope-hostile-fs: unmounting {}: {err}", mountpoint.display());
    }
    std::mem::forget(session);
    Ok(())
}
