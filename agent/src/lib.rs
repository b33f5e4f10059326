//! `railscope`: the node telemetry agent.
//!
//! The binary is a thin `main` over [`run`]. Principal pieces:
//! * [`cli`]: the ground floor, every flag and config-file key, typed, one home per
//!   feature, validated into a [`cli::Config`]; it imports no feature module;
//! * `railscope_collectors::Scheduler` (built by [`build_scheduler`]): hands each collection
//!   of the enabled sources its deadline (the earliest among the scrapes waiting), takes each
//!   source's outcome up as it comes, and lets concurrent scrapes share one collection;
//! * `doctor`: `railscope doctor`, one collection (or a running agent's `/metrics`) read as
//!   facts and diagnosed step by step, with the NCCL settings to use;
//! * `mapping`: snapshot → metric families; `exposition`: families → Prometheus text
//!   0.0.4 or OpenMetrics, through `prometheus-client`;
//! * `otlp`: the same families pushed over OTLP (gRPC or HTTP) through the OpenTelemetry
//!   SDK, from collections shared with scrapes, with a bounded queue;
//! * `http`: `http::server`, the HTTP endpoints and the accept loop with its limits;
//!   `http::web_config`, the `--web.config.file` (TLS, basic auth, headers) and its
//!   reloads; `http::basic_auth`, bcrypt verification with a verdict cache.
//!
//! Only what `main` and [`build_scheduler`]'s signature need is public; the modules named
//! without links are crate-private (`cargo doc --document-private-items` shows them).

#[doc(hidden)]
pub mod bench;
pub(crate) mod build_info;
pub mod cli;
pub(crate) mod doctor;
pub(crate) mod exposition;
pub(crate) mod http;
pub(crate) mod inventory;
pub(crate) mod logging;
pub(crate) mod mapping;
pub(crate) mod otlp;
pub(crate) mod pem;
pub(crate) mod process;
#[cfg(test)]
mod proptests;

use std::ffi::OsString;
use std::sync::Arc;

use railscope_collectors::{Collectors, Scheduler};

use crate::cli::{Config, ConfigError, Invalid, Invocation, Mode};
use crate::http::web_config::{WebConfig, WebState};
use crate::http::{server, web_config};

/// Why the agent stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Invalid flags or configuration, and the command they were for. The message is the
    /// whole story: no `#[source]`, so that `{:#}` does not print it twice.
    #[error("invalid configuration: {}", .0.error)]
    Config(Invalid),
    /// A listen address could not be bound.
    #[error("failed to listen on {address}: {source}")]
    Listen {
        /// The address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// `--web.systemd-socket`, and the sockets systemd passed cannot be served.
    #[error("--web.systemd-socket: {0}")]
    Activation(String),
    /// The async runtime or server failed.
    #[error("server failed: {0}")]
    Server(#[from] std::io::Error),
}

impl From<ConfigError> for RunError {
    fn from(error: ConfigError) -> Self {
        RunError::Config(Invalid {
            error,
            mode: Mode::Agent,
        })
    }
}

impl From<Invalid> for RunError {
    fn from(invalid: Invalid) -> Self {
        RunError::Config(invalid)
    }
}

impl RunError {
    /// The process's exit status for this failure: doctor's "could not run" is 3 (its 1 and
    /// 2 are verdicts); the agent's is 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(Invalid {
                mode: Mode::Doctor, ..
            }) => 3,
            _ => 1,
        }
    }
}

/// What `run` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Printed help or version.
    Printed,
    /// Served until a shutdown signal.
    Stopped,
    /// `railscope doctor` ran: exit with this code (0 all well, 1 warnings, 2 critical
    /// findings, 3 the diagnosis could not run).
    Exit(u8),
}

/// Parses `args`, then serves until SIGTERM/SIGINT.
pub fn run<I, T>(args: I) -> Result<Outcome, RunError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let config = match cli::parse(args)? {
        Invocation::Print(text) => {
            print!("{text}");
            return Ok(Outcome::Printed);
        }
        Invocation::Run(config) => *config,
        Invocation::Doctor(config, options) => {
            return Ok(Outcome::Exit(doctor::run(&config, &options)));
        }
    };
    // Before any thread starts: the passed sockets' variables are removed from the
    // environment.
    let activated = if config.web.systemd_socket {
        Some(http::activation::take().map_err(|e| RunError::Activation(e.to_string()))?)
    } else {
        None
    };
    process::tune_allocator();
    let scheduler = Arc::new(build_scheduler(&config)?);
    let web = Arc::new(load_web_config(&config)?);
    logging::init(config.log.level, config.log.format);
    for (old, new) in &config.deprecated {
        tracing::warn!(
            old = format!("--{old}"),
            new = format!("--{new}"),
            "A deprecated flag or config key is set; use its new name."
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("railscope")
        .enable_all()
        .build()?;
    runtime.block_on(serve(config, scheduler, web, activated))?;
    Ok(Outcome::Stopped)
}

/// Builds every enabled source; an invalid option names its flag.
pub fn build_scheduler(config: &Config) -> Result<Scheduler, ConfigError> {
    let enabled = config
        .collection
        .collectors
        .iter()
        .filter(|c| c.enabled)
        .map(|c| (c.spec, &c.options));
    let collectors =
        Collectors::build(&config.collection.roots, enabled).map_err(|e| ConfigError {
            field: format!(
                "--collector.{}.{} (collectors.{}.{})",
                e.source_name, e.error.option, e.source_name, e.error.option
            ),
            reason: e.error.reason,
        })?;
    collectors.set_refused_backoff(config.collection.refused_backoff);
    Ok(Scheduler::new(collectors))
}

/// Loads `--web.config.file`; an invalid file names the file and the key.
pub(crate) fn load_web_config(config: &Config) -> Result<WebState, ConfigError> {
    let Some(path) = &config.web.config_file else {
        return Ok(WebState::new(None, WebConfig::plain()));
    };
    let web = web_config::load(path).map_err(|e| ConfigError {
        field: if e.field.is_empty() {
            format!("web config {}", path.display())
        } else {
            format!("web config {}: {}", path.display(), e.field)
        },
        reason: e.reason,
    })?;
    Ok(WebState::new(Some(path.clone()), web))
}

/// The listeners: the sockets systemd passed, or one per listen address, bound in order; the
/// first address that cannot be bound stops start-up, named.
async fn listeners(
    config: &Config,
    activated: Option<Vec<http::activation::Activated>>,
) -> Result<Vec<tokio::net::TcpListener>, RunError> {
    let Some(activated) = activated else {
        let mut listeners = Vec::new();
        for address in &config.web.listen_addresses {
            let listener = server::bind(address)
                .await
                .map_err(|source| RunError::Listen {
                    address: address.clone(),
                    source,
                })?;
            listeners.push(listener);
        }
        return Ok(listeners);
    };
    let names: Vec<&str> = activated.iter().map(|a| a.name.as_str()).collect();
    tracing::info!(
        sockets = names.join(",").as_str(),
        "Listening on systemd activated listeners instead of port listeners."
    );
    let mut listeners = Vec::new();
    for socket in activated {
        let listen = |source| RunError::Listen {
            address: format!("socket-activated {}", socket.name),
            source,
        };
        socket.listener.set_nonblocking(true).map_err(listen)?;
        listeners.push(tokio::net::TcpListener::from_std(socket.listener).map_err(listen)?);
    }
    Ok(listeners)
}

async fn serve(
    config: Config,
    scheduler: Arc<Scheduler>,
    web: Arc<WebState>,
    activated: Option<Vec<http::activation::Activated>>,
) -> Result<(), RunError> {
    let listeners = listeners(&config, activated).await?;
    let local = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<Vec<_>, _>>()?
        .join(",");
    let enabled = scheduler.source_names().join(",");
    tracing::info!(
        version = build_info::VERSION,
        revision = build_info::REVISION,
        address = local.as_str(),
        telemetry_path = config.web.telemetry_path.as_str(),
        sysfs = %config.collection.roots.sysfs.display(),
        procfs = %config.collection.roots.procfs.display(),
        collectors = enabled.as_str(),
        tls = web.current().tls.is_some(),
        basic_auth = !web.current().users.is_empty(),
        max_requests = config.web.max_requests,
        "Starting railscope."
    );
    if config.web.request_timeout <= config.collection.timeout_max {
        tracing::warn!(
            request_timeout = ?config.web.request_timeout,
            scrape_timeout_max = ?config.collection.timeout_max,
            "--web.request-timeout is not above --scrape.timeout-max: slow collections will be answered 503."
        );
    }
    let limits = server::Limits {
        max_requests: config.web.max_requests,
        read_header_timeout: config.web.read_header_timeout,
        request_timeout: config.web.request_timeout,
    };
    let mut state = server::AppState::new(
        Arc::clone(&scheduler),
        config.web.telemetry_path.clone(),
        config.collection.timeout_max,
        config.collection.timeout_offset,
        Arc::clone(&web),
        limits,
    )
    .with_expected(config.expected.clone());
    let push = match &config.otlp {
        Some(otlp) => {
            let push = otlp::Push::start(
                otlp,
                Arc::clone(&scheduler),
                Arc::clone(&state.expected),
                config.collection.timeout_max,
            )
            .map_err(RunError::from)?;
            tracing::info!(
                endpoint = otlp.endpoint.as_str(),
                protocol = ?otlp.protocol,
                interval = ?otlp.interval,
                queue_size = otlp.queue_size,
                hardware_semconv = otlp.hardware_semconv,
                "Pushing over OTLP."
            );
            state = state.with_otlp(push.stats());
            Some(push)
        }
        None => None,
    };
    let state = Arc::new(state);
    // A first collection at start reports absent subsystems once and makes /-/ready true.
    let warm = Arc::clone(&state);
    tokio::spawn(async move {
        warm.scheduler.collect(warm.timeout_max).await;
        warm.ready.store(true, std::sync::atomic::Ordering::Release);
    });
    server::serve(
        listeners,
        server::router(state),
        web,
        limits,
        server::shutdown_signal(),
    )
    .await?;
    if let Some(push) = push {
        push.stop(std::time::Duration::from_secs(2)).await;
    }
    tracing::info!("Stopped.");
    Ok(())
}
