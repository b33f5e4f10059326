//! `railscope doctor`: diagnoses a node once, the way an expert works through it when NCCL's
//! bandwidth is low, and says which NCCL settings fit the node.
//!
//! One set of checks, two inputs: a local run collects once with the agent's own sources and
//! flags; `--from URL` reads a running agent's `/metrics` (TLS and basic auth as its web
//! config asks). Both become [`facts::Facts`], the samples a scrape would show, and
//! [`checks::run`] reads only those. The verdict is the exit code: 0 all well, 1 warnings,
//! 2 critical findings, 3 the diagnosis could not run.

pub(crate) mod checks;
pub(crate) mod facts;
mod remote;
mod render;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clap::{Arg, ArgMatches, Command};

use crate::config::{Config, ConfigError, config_error};
use checks::Severity;
use facts::Facts;

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    Text,
    Json,
}

/// Doctor's own flags.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) output: Output,
    pub(crate) color: bool,
    pub(crate) from: Option<remote::Target>,
}

const ABOUT: &str = "Diagnose this node once, hardware first, the way an expert works through a node whose NCCL bandwidth is low, and print the NCCL settings that fit it.";

const LONG_ABOUT: &str = "\
Diagnose this node once, hardware first, and print the NCCL settings that fit it.

Steps, in order: devices and ports present and up; link rate and width against the ports'
peers; PCIe links of NICs and GPUs; the MTU end to end (a RoCE netdev at 1500 gives an active
MTU of 1024); RoCE v2 GIDs and the index NCCL must use; PFC and ECN; GPUDirect RDMA
(nvidia_peermem or dma-buf, IOMMU passthrough, ACS, memlock); GPU↔NIC distance; NVLink; GPU
health (XIDs, ECC, row remapping, throttling); the kernel log. Each finding has a severity
(ok, warning, critical), its evidence (device, port, value, and the file or call it came
from), what it means, the fix, and the RUNBOOK entry of the alert that watches it: the
checks are the alerts' conditions, read once.

NCCL hints: NCCL_IB_HCA (the ACTIVE ports on the GPUs' rails, in rail order),
NCCL_SOCKET_IFNAME (the front-end NICs' netdevs), NCCL_IB_GID_INDEX (the RoCE v2 GID of the
ports' IPv4 address) and NCCL_NET_GDR_LEVEL (from the GPU↔NIC distances). NCCL_* variables
in doctor's environment that contradict the node are findings.

Input: without --from, doctor runs the agent's sources once, with the same flags as the
agent (--path.sysfs, --collector.*, --config.file); run it as the agent's user or root.
With --from URL it reads a running agent's metrics instead (the same checks, the same
findings; the NCCL environment is not compared, since it is not the node's).

Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.";

const EXAMPLES: &str = "\
Examples:
  railscope doctor
      Diagnose this node with the agent's default sources.
  railscope doctor --config.file /etc/railscope/railscope.yml --output json
      The same with the agent's config (its expected inventory included), for a tool.
  railscope doctor --from https://gpu-17:9477/metrics --from.ca-file ca.pem \\
      --from.username oncall --from.password-file ~/.railscope-password
      Diagnose gpu-17 from its running agent, behind TLS and basic auth.
  railscope doctor >/dev/null; [ $? -lt 2 ] || exit 1
      A job prologue that refuses a node with a critical finding (or that could not
      be diagnosed), and accepts one with warnings.

Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.";

/// The agent's command with doctor's flags added.
pub(crate) fn command(agent: Command) -> Command {
    // The agent's serving flags mean nothing to a single diagnosis: accepted, not shown.
    let mut agent = agent;
    for id in [
        "web.listen-address",
        "web.telemetry-path",
        "web.config.file",
        "web.max-requests",
        "web.read-header-timeout",
        "web.request-timeout",
        "log.format",
        "scrape.timeout-offset",
    ] {
        agent = agent.mut_arg(id, |a| a.hide(true));
    }
    agent
        .name("railscope doctor")
        .bin_name("railscope doctor")
        .about(ABOUT)
        .long_about(LONG_ABOUT)
        .after_help("Exit status: 0 all well, 1 warnings, 2 critical findings, 3 the diagnosis could not run.")
        .after_long_help(EXAMPLES)
        .arg(
            Arg::new("output")
                .long("output")
                .value_name("FORMAT")
                .help("text (grouped by step, colour on a terminal) or json (for tools)")
                .default_value("text"),
        )
        .arg(
            Arg::new("color")
                .long("color")
                .value_name("WHEN")
                .help("auto (on a terminal, unless NO_COLOR is set), always, never")
                .default_value("auto"),
        )
        .arg(
            Arg::new("from")
                .long("from")
                .value_name("URL")
                .help("Diagnose from a running agent's metrics (http:// or https://, path defaults to /metrics) instead of collecting here"),
        )
        .arg(
            Arg::new("from.ca-file")
                .long("from.ca-file")
                .value_name("PATH")
                .help("CA certificates (PEM) that signed the agent's certificate; required for https://"),
        )
        .arg(
            Arg::new("from.cert-file")
                .long("from.cert-file")
                .value_name("PATH")
                .help("Client certificate (PEM) for an agent that asks for one"),
        )
        .arg(
            Arg::new("from.key-file")
                .long("from.key-file")
                .value_name("PATH")
                .help("Private key (PEM) of --from.cert-file"),
        )
        .arg(
            Arg::new("from.username")
                .long("from.username")
                .value_name("NAME")
                .help("Basic-auth user for the agent's web config"),
        )
        .arg(
            Arg::new("from.password-file")
                .long("from.password-file")
                .value_name("PATH")
                .help("File holding the basic-auth password (its first line)"),
        )
        .arg(
            Arg::new("from.timeout")
                .long("from.timeout")
                .value_name("DURATION")
                .help("How long to wait for the agent's answer")
                .default_value("30s"),
        )
}

/// Doctor's flags from the parsed command line; an invalid one is named.
pub(crate) fn options(m: &ArgMatches) -> Result<Options, ConfigError> {
    let text = |id: &str| m.get_one::<String>(id).cloned();
    let output = match text("output").as_deref() {
        Some("text") | None => Output::Text,
        Some("json") => Output::Json,
        Some(other) => {
            return Err(config_error(
                "--output",
                format!("{other:?}: expected text or json"),
            ));
        }
    };
    let color = match text("color").as_deref() {
        Some("always") => true,
        Some("never") => false,
        Some("auto") | None => {
            std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
        Some(other) => {
            return Err(config_error(
                "--color",
                format!("{other:?}: expected auto, always or never"),
            ));
        }
    };
    let timeout = text("from.timeout")
        .and_then(|t| crate::config::parse_duration(&t))
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            config_error("--from.timeout", "expected a positive duration such as 30s")
        })?;
    let from = match text("from") {
        None => {
            for id in [
                "from.ca-file",
                "from.cert-file",
                "from.key-file",
                "from.username",
                "from.password-file",
            ] {
                if m.get_one::<String>(id).is_some() {
                    return Err(config_error(format!("--{id}"), "needs --from"));
                }
            }
            None
        }
        Some(url) => Some(remote::Target::new(
            &url,
            text("from.ca-file"),
            text("from.cert-file"),
            text("from.key-file"),
            text("from.username"),
            text("from.password-file"),
            timeout,
        )?),
    };
    Ok(Options {
        output,
        color,
        from,
    })
}

/// What doctor concluded: the steps, the hints, where the facts came from.
pub(crate) struct Report {
    pub(crate) source: String,
    pub(crate) steps: Vec<checks::Step>,
    pub(crate) hints: checks::NcclHints,
}

impl Report {
    pub(crate) fn worst(&self) -> Severity {
        self.steps
            .iter()
            .flat_map(|s| &s.findings)
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Ok)
    }

    pub(crate) fn exit_code(&self) -> u8 {
        match self.worst() {
            Severity::Critical => 2,
            Severity::Warning => 1,
            _ => 0,
        }
    }
}

/// The NCCL variables of this process's environment.
fn nccl_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "NCCL_IB_HCA"
                    | "NCCL_IB_GID_INDEX"
                    | "NCCL_SOCKET_IFNAME"
                    | "NCCL_NET_GDR_LEVEL"
                    | "NCCL_IB_DISABLE"
            )
        })
        .collect();
    env.sort();
    env
}

/// Diagnoses and prints; returns the exit code.
pub(crate) fn run(config: &Config, options: &Options) -> u8 {
    let result = match &options.from {
        Some(target) => remote::fetch(target).map(|text| (text, target.display())),
        None => local_facts(config).map(|f| (f, local_source(config))),
    };
    let (facts, source) = match result {
        Ok(x) => x,
        Err(e) => {
            eprintln!("railscope doctor: {e}");
            return 3;
        }
    };
    let env = if options.from.is_some() {
        Vec::new()
    } else {
        nccl_env()
    };
    let report = diagnose(&facts, &env, source);
    let text = match options.output {
        Output::Text => render::text(&report, options.color),
        Output::Json => render::json(&report),
    };
    print!("{text}");
    report.exit_code()
}

/// Runs the checks on `facts`.
pub(crate) fn diagnose(facts: &Facts, env: &[(String, String)], source: String) -> Report {
    let (steps, hints) = checks::run(facts, env);
    Report {
        source,
        steps,
        hints,
    }
}

fn local_source(config: &Config) -> String {
    format!(
        "this node (sysfs {}, procfs {})",
        config.roots.sysfs.display(),
        config.roots.procfs.display()
    )
}

/// One collection with the configured sources, as a scrape maps it.
fn local_facts(config: &Config) -> Result<Facts, String> {
    let scheduler = Arc::new(crate::build_scheduler(config).map_err(|e| e.to_string())?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("railscope-doctor")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let timeout = config.scrape_timeout_max.max(Duration::from_secs(1));
    let collection = runtime.block_on(async {
        // Sources that learn something on their first pass (what each device has, which
        // files a driver refuses) have done so for the second.
        scheduler.collect(timeout).await;
        scheduler.collect(timeout).await
    });
    let families =
        crate::mapping::families(&collection, &scheduler.totals(), None, &config.expected);
    Ok(Facts::from_families(&families))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_worst_finding() {
        let facts = Facts::parse_text("railscope_ib_port_info{device=\"mlx5_0\",port=\"1\",link_layer=\"InfiniBand\",state=\"DOWN\",phys_state=\"Polling\"} 1\nrailscope_ib_port_state{device=\"mlx5_0\",port=\"1\"} 1\nrailscope_ib_port_phys_state{device=\"mlx5_0\",port=\"1\"} 2\n").unwrap();
        let report = diagnose(&facts, &[], String::new());
        assert_eq!(report.exit_code(), 2);
        let report = diagnose(&Facts::default(), &[], String::new());
        assert_eq!(report.exit_code(), 0);
    }
}
