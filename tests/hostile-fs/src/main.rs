//! `railscope-hostile-fs SOURCE MOUNTPOINT [RULES]`: mounts a read-only FUSE mirror of the
//! directory SOURCE (a fixture sysfs tree) on MOUNTPOINT, misbehaving on the paths the rule
//! file RULES names (see `rules.rs` and the README).
//!
//! Prints `mounted` once the mount is up. SIGHUP re-reads the rule file, drops every entry the
//! kernel cached, and prints `reloaded` (or `rules refused: WHY`, keeping the old rules) once
//! the new rules are in force. SIGTERM or SIGINT unmount (lazily, so a reader stuck in a blocked
//! read does not hold the mount) and exit.

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
    let inodes = filesystem.inodes();
    let session = fuser::spawn_mount(filesystem, &mountpoint, &config)
        .map_err(|e| format!("mounting on {}: {e}", mountpoint.display()))?;
    let notifier = session.notifier();
    say("mounted");

    loop {
        match signals.wait() {
            Ok(Signal::SIGHUP) => match rules.reload() {
                Ok(()) => {
                    // Outside any request handler: an invalidation takes the directory's lock,
                    // which a handler's own request may hold. Entries the kernel no longer
                    // caches answer ENOENT, which is fine.
                    for (parent, name) in fs::known_entries(&inodes) {
                        let _ = notifier.inval_entry(parent, std::ffi::OsStr::new(&name));
                    }
                    say("reloaded");
                }
                Err(err) => say(&format!("rules refused: {err}")),
            },
            Ok(_) => break,
            Err(err) => return Err(format!("waiting for signals: {err}")),
        }
    }
    // A lazy unmount returns at once even while a reader is stuck in a blocked read; exiting
    // closes /dev/fuse, which aborts the connection and fails whatever is still pending.
    if let Err(err) = nix::mount::umount2(&mountpoint, nix::mount::MntFlags::MNT_DETACH) {
        eprintln!(
            "railscope-hostile-fs: unmounting {}: {err}",
            mountpoint.display()
        );
    }
    std::mem::forget(session);
    Ok(())
}

/// One line on standard output, flushed: the protocol with whoever started the mount.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
