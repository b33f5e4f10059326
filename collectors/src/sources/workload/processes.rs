//! Workloads from processes: every process with a GPU (`/dev/nvidiaN`) or an RDMA device
//! (`/dev/infiniband/uverbsN`) open, found through `/proc/<pid>/fd`, and the workload its
//! cgroup (v2, `/proc/<pid>/cgroup`) puts it in: a Slurm job, a Kubernetes pod (whatever
//! gave it the device, the device plugin or not), a systemd unit, a login session.
//!
//! This covers batch clusters without a kubelet. A scan reads one link per open file of
//! every process, so it runs every [`SCAN_EVERY`] and the last result is exported in
//! between. A process that exits mid-scan is skipped without losing the others; one whose
//! open files the agent may not read (another user's, without `CAP_SYS_PTRACE`) is kept
//! with its workload, so that NVML's running processes can place it on its GPUs.

use std::path::Path;
use std::time::Duration;

/// How often the processes are scanned.
pub const SCAN_EVERY: Duration = Duration::from_secs(30);

/// What a process's cgroup says it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A Slurm job: `job_<id>` under slurmstepd's scope (cgroup v2) or `/slurm/`'s tree
    /// (cgroup v1), or the job's SLUID under the scope (cgroup v2 from Slurm 26.05 on, where
    /// it is the default); see [`classify`].
    Slurm,
    /// A Kubernetes pod (`kubepods…pod<uid>`).
    Kubernetes,
    /// A systemd unit (`*.service`, `init.scope`).
    Systemd,
    /// A login session (`user.slice/…/session-N.scope`).
    Session,
    /// Anything else.
    Other,
}

impl Kind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Slurm => "slurm",
            Kind::Kubernetes => "kubernetes",
            Kind::Systemd => "systemd",
            Kind::Session => "session",
            Kind::Other => "other",
        }
    }
}

/// A process holding devices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// What its cgroup says it belongs to.
    pub kind: Kind,
    /// The Slurm job id, pod UID (dashed), unit or session scope; empty for [`Kind::Other`].
    pub workload: String,
    /// Minor numbers of the `/dev/nvidiaN` it has open.
    pub nvidia: Vec<u32>,
    /// Numbers of the `/dev/infiniband/uverbsN` it has open.
    pub uverbs: Vec<u32>,
    /// Whether its open files could be read; when not (another user's process, to an agent
    /// without the capabilities), NVML's running processes still place it on its GPUs.
    pub fds_read: bool,
}

/// Classifies a cgroup v2 path (`/kubepods.slice/…`).
///
/// Slurm's jobs live in one of these trees (Slurm's `src/plugins/cgroup/v1` and `v2`,
/// `cgroup_p_step_create`):
///
/// * cgroup v1: `/slurm/uid_<uid>/job_<id>/step_<step>/task_<n>`, `/slurm_<node>/…` in a
///   multiple-slurmd build;
/// * cgroup v2: `/<CgroupSlice>/[<node>_]slurmstepd.scope/<job>/step_<step>/{slurm,user/task_<n>}`,
///   where `<job>` is `job_<id>` before Slurm 26.05 (and from 26.05 on with
///   `CgroupJobIdPaths=yes`), and otherwise the job's SLUID: `s` and 13 characters of
///   Crockford's base32 (`sEKNKTV3WPV500`, `print_sluid` in `src/common/sluid.c`). A SLUID
///   holds no job id (it is the cluster id, a timestamp and a sequence number), so the
///   workload is named by the SLUID itself, as `sacct` and `squeue` print it. The scope's
///   `system` directory is slurmstepd's waiting area, not a job.
pub fn classify(path: &str) -> (Kind, String) {
    // In a container's cgroup namespace the host's path shows relative to the agent's own
    // cgroup (`/../../kubepods.slice/…`): the `..` lead nothing.
    let segments: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty() && *s != "..")
        .collect();
    let scope = segments
        .iter()
        .position(|s| s.ends_with("slurmstepd.scope"));
    let slurm = scope.is_some() || segments.iter().any(|s| s.starts_with("slurm"));
    if slurm
        && let Some(job) = segments.iter().find_map(|s| {
            s.strip_prefix("job_")
                .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        })
    {
        return (Kind::Slurm, job.to_owned());
    }
    if let Some(job) = scope
        .and_then(|i| segments.get(i + 1))
        .filter(|s| is_sluid(s))
    {
        return (Kind::Slurm, (*job).to_owned());
    }
    if segments.first().is_some_and(|s| s.starts_with("kubepods")) {
        // systemd driver: `kubepods-burstable-pod<uid with _>.slice`; cgroupfs: `pod<uid>`.
        for s in &segments {
            let name = s.strip_suffix(".slice").unwrap_or(s);
            if let Some(i) = name.rfind("pod") {
                let uid = &name[i + 3..];
                if uid.len() == 36
                    && uid
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
                {
                    return (Kind::Kubernetes, uid.replace('_', "-"));
                }
            }
        }
    }
    match segments.last() {
        Some(last) if segments.first() == Some(&"user.slice") && last.starts_with("session-") => {
            (Kind::Session, (*last).to_owned())
        }
        Some(last) if last.ends_with(".service") || *last == "init.scope" => {
            (Kind::Systemd, (*last).to_owned())
        }
        _ => (Kind::Other, String::new()),
    }
}

/// Whether `name` is a SLUID as Slurm prints one: `s` and 13 characters of Crockford's
/// base32 alphabet (digits and capitals without I, L, O and U). The 65 bits of 13
/// characters hold a 64-bit value, so the first of them is at most `F`. Slurm reads either
/// case back (`str2sluid`); it writes capitals.
fn is_sluid(name: &str) -> bool {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let bytes = name.as_bytes();
    bytes.len() == 14
        && matches!(bytes[0], b's' | b'S')
        && bytes[1].to_ascii_uppercase() <= b'F'
        && bytes[1..]
            .iter()
            .all(|b| ALPHABET.contains(&b.to_ascii_uppercase()))
}

/// The cgroup v2 path of a `/proc/<pid>/cgroup` (`0::/path`).
fn cgroup_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Every process under `procfs` holding a GPU or RDMA device, sorted by pid, and how many
/// processes were looked at.
pub fn scan(procfs: &Path) -> (Vec<Process>, usize) {
    let Ok(entries) = std::fs::read_dir(procfs) else {
        return (Vec::new(), 0);
    };
    let mut out = Vec::new();
    let mut scanned = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        scanned += 1;
        let dir = entry.path();
        let fds = std::fs::read_dir(dir.join("fd"));
        let fds_read = fds.is_ok();
        let (mut nvidia, mut uverbs) = (Vec::new(), Vec::new());
        for fd in fds.into_iter().flatten().flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(target) = target.to_str() else {
                continue;
            };
            if let Some(n) = target
                .strip_prefix("/dev/nvidia")
                .and_then(|n| n.parse::<u32>().ok())
            {
                nvidia.push(n);
            } else if let Some(n) = target
                .strip_prefix("/dev/infiniband/uverbs")
                .and_then(|n| n.parse::<u32>().ok())
            {
                uverbs.push(n);
            }
        }
        if fds_read && nvidia.is_empty() && uverbs.is_empty() {
            continue;
        }
        let Some((kind, workload)) = std::fs::read_to_string(dir.join("cgroup"))
            .ok()
            .as_deref()
            .and_then(cgroup_path)
            .map(classify)
        else {
            continue; // exited mid-scan: its devices belong to no workload
        };
        nvidia.sort_unstable();
        nvidia.dedup();
        uverbs.sort_unstable();
        uverbs.dedup();
        out.push(Process {
            pid,
            kind,
            workload,
            nvidia,
            uverbs,
            fds_read,
        });
    }
    out.sort();
    (out, scanned)
}

/// The RDMA device behind `uverbsN` (`class/infiniband_verbs/uverbsN/ibdev` under `sysfs`).
pub fn ibdev(sysfs: &Path, uverbs: u32) -> Option<String> {
    let path = sysfs.join(format!("class/infiniband_verbs/uverbs{uverbs}/ibdev"));
    let name = std::fs::read_to_string(path).ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_name_their_workloads() {
        let cases = [
            (
                "/system.slice/slurmstepd.scope/job_73512/step_0/user/task_0",
                Kind::Slurm,
                "73512",
            ),
            (
                "/slurm/uid_1000/job_73512/step_batch/task_0",
                Kind::Slurm,
                "73512",
            ),
            // Slurm 26.05's default: the job directory is the SLUID (cgroup.conf(5),
            // CgroupJobIdPaths).
            (
                "/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0",
                Kind::Slurm,
                "sEKNKTV3WPV500",
            ),
            (
                "/system.slice/slurmstepd.scope/sBR1JB8J1YM400/step_batch/slurm",
                Kind::Slurm,
                "sBR1JB8J1YM400",
            ),
            (
                "/system.slice/slurmstepd.scope/job_123/step_extern/user/task_special",
                Kind::Slurm,
                "123",
            ),
            // A multiple-slurmd build names the scope after the node; CgroupSlice moves it.
            (
                "/system.slice/node07_slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0",
                Kind::Slurm,
                "sEKNKTV3WPV500",
            ),
            (
                "/slurm.slice/slurmstepd.scope/job_73512/step_0/user/task_0",
                Kind::Slurm,
                "73512",
            ),
            (
                "/slurm_node07/uid_1000/job_73512/step_0/task_0",
                Kind::Slurm,
                "73512",
            ),
            // slurmstepd's waiting area and slurmd itself are no job.
            ("/system.slice/slurmstepd.scope/system", Kind::Other, ""),
            (
                "/system.slice/gamba1_slurmstepd.scope/slurmd",
                Kind::Other,
                "",
            ),
            // Not a SLUID: too short, a letter outside the alphabet, or too large a value.
            (
                "/system.slice/slurmstepd.scope/sEKNKTV3WPV50/step_0",
                Kind::Other,
                "",
            ),
            (
                "/system.slice/slurmstepd.scope/sEKNKTV3WPVU00/step_0",
                Kind::Other,
                "",
            ),
            (
                "/system.slice/slurmstepd.scope/sZKNKTV3WPV500/step_0",
                Kind::Other,
                "",
            ),
            // A SLUID-like name outside slurmstepd's scope is not a job.
            ("/system.slice/sEKNKTV3WPV500/step_0", Kind::Other, ""),
            (
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e3d4c_5b6a_4789_8abc_def012345678.slice/cri-containerd-0123.scope",
                Kind::Kubernetes,
                "1f2e3d4c-5b6a-4789-8abc-def012345678",
            ),
            (
                "/kubepods.slice/kubepods-pod1f2e3d4c_5b6a_4789_8abc_def012345678.slice/cri-containerd-0123.scope",
                Kind::Kubernetes,
                "1f2e3d4c-5b6a-4789-8abc-def012345678",
            ),
            (
                "/kubepods/besteffort/pod6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d/1ee2f5",
                Kind::Kubernetes,
                "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d",
            ),
            (
                "/system.slice/nvidia-persistenced.service",
                Kind::Systemd,
                "nvidia-persistenced.service",
            ),
            ("/init.scope", Kind::Systemd, "init.scope"),
            (
                "/user.slice/user-1000.slice/session-3.scope",
                Kind::Session,
                "session-3.scope",
            ),
            ("/", Kind::Other, ""),
            // A job_ segment outside Slurm's trees is not a Slurm job.
            ("/system.slice/job_42.scope", Kind::Other, ""),
            // Seen from inside the agent's own cgroup namespace.
            (
                "/../../kubepods.slice/kubepods-pod1f2e3d4c_5b6a_4789_8abc_def012345678.slice/cri-containerd-0123.scope",
                Kind::Kubernetes,
                "1f2e3d4c-5b6a-4789-8abc-def012345678",
            ),
        ];
        for (path, kind, workload) in cases {
            assert_eq!(classify(path), (kind, workload.to_owned()), "{path}");
        }
        assert_eq!(cgroup_path("0::/init.scope\n"), Some("/init.scope"));
        assert_eq!(cgroup_path("12:cpu:/x\n0::/y\n"), Some("/y"));
        assert_eq!(cgroup_path("12:cpu:/x\n"), None);
    }
}
