//! Records the source revision for `railscope_build_info` and `--version`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=RAILSCOPE_REVISION");
    let revision = std::env::var("RAILSCOPE_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        });
    // Rebuild when HEAD moves, so the revision stays true.
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
        && out.status.success()
    {
        let git_dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/refs/heads");
    }
    println!(
        "cargo:rustc-env=RAILSCOPE_REVISION={}",
        revision.unwrap_or_else(|| "unknown".to_owned())
    );
}
