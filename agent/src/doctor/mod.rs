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

use std::sync::Arc;
use std::time::Duration;

use crate::cli::Config;
use crate::cli::doctor::{Options, Output};
use checks::Severity;
use facts::Facts;

/// Why a diagnosis could not run (doctor then exits 3).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// A setting is wrong (a `--from` URL, a TLS file).
    #[error("{0}")]
    Config(#[from] crate::cli::ConfigError),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The running agent could not be read.
    #[error("{url}: {reason}")]
    Remote {
        /// The agent's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
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
        Some(from) => remote::Target::new(from)
            .map_err(Error::from)
            .and_then(|target| remote::fetch(&target).map(|facts| (facts, target.display()))),
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
        config.collection.roots.sysfs.display(),
        config.collection.roots.procfs.display()
    )
}

/// One collection with the configured sources, as a scrape maps it.
fn local_facts(config: &Config) -> Result<Facts, Error> {
    let scheduler = Arc::new(crate::build_scheduler(config)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("railscope-doctor")
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let timeout = config.collection.timeout_max.max(Duration::from_secs(1));
    let collection = runtime.block_on(async {
        // Sources that learn something on their first pass (what each device has, which
        // files a driver refuses) have done so for the second.
        scheduler.collect(timeout).await;
        scheduler.collect(timeout).await
    });
    let families = crate::mapping::families(
        &collection,
        &scheduler.totals(),
        None,
        &config.expected,
        &crate::mapping::Selection::All,
    );
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
