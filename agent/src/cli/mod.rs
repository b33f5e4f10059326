//! The agent's settings: every flag and config-file key, typed, one home per feature. This is
//! the ground floor: it imports no feature module, and every feature reads its settings from
//! here.
//!
//! * [`value`]: [`value::Setting`] declares a flag, its config-file key, default, help and
//!   type once; [`value::File`] is the config file, taken apart key by key, so a key no
//!   setting takes is an error that names it;
//! * one module per feature: [`web`] (`--web.*`), [`log`] (`--log.*`), [`collectors`]
//!   (`--path.*`, `--sysfs.*`, `--scrape.*`, `--collector.*` from the source registry),
//!   [`otlp`] (`--otlp.*`), [`expected`] (the file's `expected` section) and [`doctor`]
//!   (the `railscope doctor` subcommand's own flags);
//! * [`error::ConfigError`], the one error, naming the flag and key at fault.
//!
//! Flags follow the names Prometheus exporters use (`--web.listen-address`, `--path.sysfs`,
//! `--collector.<name>`, `--no-collector.<name>`, `--collector.<name>.<option>`).
//! Precedence: built-in defaults, then `--config.file`, then flags given on the command line.
//! Anything invalid stops start-up with a message naming the flag or key.

pub(crate) mod collectors;
pub(crate) mod doctor;
pub(crate) mod error;
pub(crate) mod expected;
pub(crate) mod log;
pub(crate) mod otlp;
pub(crate) mod value;
pub(crate) mod web;

use std::ffi::OsString;

use clap::{Arg, ArgMatches, Command};

pub use error::ConfigError;
use value::File;

/// The agent's validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The HTTP server.
    pub(crate) web: web::Web,
    /// The log.
    pub(crate) log: log::Log,
    /// What the collection reads and how long it may take.
    pub(crate) collection: collectors::Collection,
    /// What the node must have (the config file's `expected` section).
    pub(crate) expected: expected::Inventory,
    /// OTLP push, when an endpoint is set.
    pub(crate) otlp: Option<otlp::OtlpConfig>,
    /// Former spellings that were used: (old, new), logged once the log is up.
    pub(crate) deprecated: Vec<(&'static str, &'static str)>,
}

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Invocation {
    /// Run the agent.
    Run(Box<Config>),
    /// Print this text (help or version) and exit successfully.
    Print(String),
    /// Run `railscope doctor` once and exit with its verdict.
    Doctor(Box<Config>, doctor::Options),
}

/// Which command the arguments are for, so that a failure can answer as that command does
/// (doctor's exit code for "could not run" is 3, the agent's 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The agent.
    Agent,
    /// `railscope doctor`.
    Doctor,
}

/// Invalid arguments, and the command they were for.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Invalid {
    /// What is wrong.
    pub error: ConfigError,
    /// The command.
    pub mode: Mode,
}

const CONFIG_FILE: &str = "config.file";

/// The flags the agent and doctor share (doctor hides `serving`).
fn agent_args(cmd: Command) -> Command {
    let cmd = web::args(cmd);
    let cmd = collectors::args(cmd);
    let cmd = cmd.arg(
        Arg::new(CONFIG_FILE)
            .long(CONFIG_FILE)
            .value_name("PATH")
            .help("YAML configuration file; flags given on the command line override it"),
    );
    let cmd = log::args(cmd);
    let cmd = otlp::args(cmd);
    collectors::collector_args(cmd)
}

/// The flags only serving uses: accepted by doctor, not shown there.
fn serving_flags() -> Vec<&'static str> {
    let mut ids = web::SERVING_FLAGS.to_vec();
    ids.extend(log::SERVING_FLAGS);
    ids.extend(collectors::SERVING_FLAGS);
    ids
}

/// The command-line interface: the agent's flags, one flag set per registered source, and
/// the `doctor` subcommand.
pub(crate) fn command() -> Command {
    let root = Command::new("railscope")
        .version(crate::build_info::VERSION)
        .long_version(format!("{} (revision {})", crate::build_info::VERSION, crate::build_info::REVISION))
        .about("Node telemetry agent and Prometheus exporter for GPU cluster fabrics: RDMA ports, congestion, PCIe, NVLink and GPUs.")
        .after_help("`railscope doctor --help`: diagnose this node (or a running agent with --from) once, with the NCCL settings to use.")
        // `railscope --flag doctor` is not doctor with the agent's flag: doctor takes them after its name.
        .args_conflicts_with_subcommands(true)
        .disable_help_subcommand(true);
    // Doctor's flags are built only when `doctor` is asked for: the agent's start-up does
    // not pay for a second copy of every flag.
    agent_args(root).subcommand(Command::new(doctor::NAME).defer(doctor_command))
}

/// The `doctor` subcommand, whole.
fn doctor_command(cmd: Command) -> Command {
    doctor::command(agent_args(cmd), &serving_flags()).version(crate::build_info::VERSION)
}

/// Parses the command line (and the config file it names). `railscope doctor ...` takes the
/// agent's flags and doctor's own.
pub(crate) fn parse<I, T>(args: I) -> Result<Invocation, Invalid>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut cmd = command();
    let matches = match cmd.try_get_matches_from_mut(&args) {
        Ok(m) => m,
        Err(err) => {
            use clap::error::ErrorKind;
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                return Ok(Invocation::Print(err.render().to_string()));
            }
            // Which command it was for: clap's reading of the same arguments, errors aside.
            let mode = match cmd.ignore_errors(true).try_get_matches_from(&args) {
                Ok(m) if m.subcommand_name() == Some(doctor::NAME) => Mode::Doctor,
                _ => Mode::Agent,
            };
            let reason = err.render().to_string();
            let reason = reason.trim().trim_start_matches("error: ").to_owned();
            return Err(Invalid {
                error: ConfigError::new("command line", reason),
                mode,
            });
        }
    };
    match matches.subcommand() {
        Some((doctor::NAME, sub)) => {
            let invalid = |error| Invalid {
                error,
                mode: Mode::Doctor,
            };
            let config = config(sub).map_err(invalid)?;
            let options = doctor::options(sub).map_err(invalid)?;
            Ok(Invocation::Doctor(Box::new(config), options))
        }
        _ => {
            let config = config(&matches).map_err(|error| Invalid {
                error,
                mode: Mode::Agent,
            })?;
            Ok(Invocation::Run(Box::new(config)))
        }
    }
}

/// The configuration from the flags and the file they name.
fn config(matches: &ArgMatches) -> Result<Config, ConfigError> {
    let mut file = match matches.get_one::<String>(CONFIG_FILE) {
        Some(path) => load_file(path)?,
        None => File::default(),
    };
    let mut deprecated = Vec::new();
    let web = web::from_matches(matches, &mut file)?;
    let collection = collectors::from_matches(matches, &mut file, &mut deprecated)?;
    let log = log::from_matches(matches, &mut file)?;
    let expected = expected::from_matches(matches, &mut file)?;
    let otlp = otlp::from_matches(matches, &mut file)?;
    file.finish()?;
    Ok(Config {
        web,
        log,
        collection,
        expected,
        otlp,
        deprecated,
    })
}

/// Reads the YAML config file into a tree serde has typed.
fn load_file(path: &str) -> Result<File, ConfigError> {
    let field = format!("--config.file {path}");
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(&field, format!("cannot read: {e}")))?;
    if text.trim().is_empty() {
        return Ok(File::default());
    }
    match serde_saphyr::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(root)) => Ok(File::new(root)),
        Ok(serde_json::Value::Null) => Ok(File::default()),
        Ok(_) => Err(ConfigError::new(field, "expected a map of sections")),
        Err(e) => Err(ConfigError::new(field, e.to_string())),
    }
}

#[cfg(test)]
mod tests;
