//! Command-line flags and the YAML config file, merged into one validated [`Config`].
//!
//! Flags follow the names Prometheus exporters use (`--web.listen-address`,
//! `--path.sysfs`, `--collector.<name>`, `--no-collector.<name>`,
//! `--collector.<name>.<option>`). The collector flags are generated from the source
//! registry. Precedence: built-in defaults, then `--config.file`, then flags given on the
//! command line. Anything invalid stops start-up with a message naming the flag or key.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use railscope_collectors::source::OptionValues;
use railscope_collectors::{Roots, SOURCES, SourceSpec};
use serde::Deserialize;

/// Default listen address.
pub(crate) const DEFAULT_LISTEN_ADDRESS: &str = ":9477";

/// A configuration error: names the flag or key and says what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The flag (`--web.listen-address`) or config key (`collectors.infiniband.foo`).
    pub(crate) field: String,
    /// What is wrong.
    pub(crate) reason: String,
}

pub(crate) fn config_error(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Log verbosity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLevel {
    /// Everything.
    Debug,
    /// Start-up, absent subsystems, first occurrence of each error.
    Info,
    /// Problems only.
    Warn,
    /// Failures only.
    Error,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// `ts=... level=... msg="..." key=value`.
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// One source's settings.
#[derive(Debug, Clone)]
pub(crate) struct CollectorConfig {
    /// The registry entry.
    pub(crate) spec: &'static SourceSpec,
    /// Whether it runs.
    pub(crate) enabled: bool,
    /// Its option values by option name.
    pub(crate) options: OptionValues,
}

/// The agent's validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on (`:9477`, `127.0.0.1:9477`, `[::1]:9477`).
    pub(crate) listen_address: String,
    /// Path of the metrics endpoint.
    pub(crate) telemetry_path: String,
    /// Where sysfs and procfs are mounted.
    pub(crate) roots: Roots,
    /// How long a file that refused reads is left unread at first; zero reads it every time.
    pub(crate) refused_backoff: Duration,
    /// Log verbosity.
    pub(crate) log_level: LogLevel,
    /// Log format.
    pub(crate) log_format: LogFormat,
    /// The most time a collection may take, whatever the scraper allows.
    pub(crate) scrape_timeout_max: Duration,
    /// How much of the scraper's timeout is left for encoding and the network.
    pub(crate) scrape_timeout_offset: Duration,
    /// Every source in registry order.
    pub(crate) collectors: Vec<CollectorConfig>,
    /// The web configuration file (TLS, basic auth, headers), if any.
    pub(crate) web_config_file: Option<PathBuf>,
    /// Concurrent metrics requests served; 0: no limit.
    pub(crate) max_requests: usize,
    /// Time for a TLS handshake and for each request head (also the keep-alive idle limit).
    pub(crate) read_header_timeout: Duration,
    /// Time for a handler to answer, and the longest a response write may stall.
    pub(crate) request_timeout: Duration,
    /// What the node must have (the config file's `expected` section).
    pub(crate) expected: crate::inventory::Inventory,
    /// OTLP push, when an endpoint is set.
    pub(crate) otlp: Option<crate::otlp::config::OtlpConfig>,
}

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Invocation {
    /// Run the agent.
    Run(Box<Config>),
    /// Print this text (help or version) and exit successfully.
    Print(String),
    /// Run `railscope doctor` once and exit with its verdict.
    Doctor(Box<Config>, crate::doctor::Options),
}

/// The config file's schema.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    web: FileWeb,
    #[serde(default)]
    path: FilePath,
    #[serde(default)]
    log: FileLog,
    #[serde(default)]
    scrape: FileScrape,
    #[serde(default)]
    collectors: BTreeMap<String, BTreeMap<String, Scalar>>,
    #[serde(default)]
    expected: Option<crate::inventory::FileExpected>,
    #[serde(default)]
    otlp: crate::otlp::config::FileOtlp,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileWeb {
    listen_address: Option<String>,
    telemetry_path: Option<String>,
    config_file: Option<String>,
    max_requests: Option<u64>,
    read_header_timeout: Option<String>,
    request_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePath {
    sysfs: Option<PathBuf>,
    procfs: Option<PathBuf>,
    #[serde(rename = "refused-backoff")]
    refused_backoff: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLog {
    level: Option<String>,
    format: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileScrape {
    timeout_max: Option<String>,
    timeout_offset: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Str(String),
    Map(BTreeMap<String, Scalar>),
}

impl Scalar {
    /// The option's text: maps become `KEY=VALUE,KEY=VALUE`.
    fn to_option_text(&self) -> Result<String, &'static str> {
        Ok(match self {
            Scalar::Str(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Map(map) => {
                let mut items = Vec::new();
                for (k, v) in map {
                    match v {
                        Scalar::Map(_) => return Err("expected a map of scalars"),
                        v => items.push(format!("{k}={}", v.to_option_text()?)),
                    }
                }
                items.join(",")
            }
        })
    }
}

/// The command-line interface, with one flag set per registered source.
pub(crate) fn command() -> Command {
    let mut cmd = Command::new("railscope")
        .version(crate::build_info::VERSION)
        .long_version(format!("{} (revision {})", crate::build_info::VERSION, crate::build_info::REVISION))
        .about("Node telemetry agent and Prometheus exporter for GPU cluster fabrics: RDMA ports, congestion, PCIe, NVLink and GPUs.")
        .after_help("`railscope doctor --help`: diagnose this node (or a running agent with --from) once, with the NCCL settings to use.")
        .arg(flag_value("web.listen-address", "Address on which to expose metrics and the web interface", DEFAULT_LISTEN_ADDRESS))
        .arg(flag_value("web.telemetry-path", "Path under which to expose metrics", "/metrics"))
        .arg(Arg::new("web.config.file").long("web.config.file").value_name("PATH").help("Web configuration file (exporter-toolkit format): TLS, basic auth, response headers; re-read when it or its certificate files change"))
        .arg(flag_value("web.max-requests", "Maximum number of concurrent metrics requests; more are answered 503 at once. 0 disables the limit", "40"))
        .arg(flag_value("web.read-header-timeout", "Time a client has for the TLS handshake and each request head; also closes idle keep-alive connections", "30s"))
        .arg(flag_value("web.request-timeout", "Time a request may take to be answered (else 503), and the longest a response write may stall (else the connection is closed)", "30s"))
        .arg(flag_value("path.sysfs", "sysfs mount point", railscope_collectors::fs::DEFAULT_SYSFS))
        .arg(flag_value("path.procfs", "procfs mount point", railscope_collectors::fs::DEFAULT_PROCFS))
        .arg(flag_value("path.refused-backoff", "How long a sysfs or procfs file that failed with EINVAL, EOPNOTSUPP or EACCES is left unread (doubling at each refused retry, up to 16 times); 0s reads it at every scrape", "1m"))
        .arg(Arg::new("config.file").long("config.file").value_name("PATH").help("YAML configuration file; flags given on the command line override it"))
        .arg(flag_value("log.level", "Only log messages with the given severity or above: debug, info, warn, error", "info"))
        .arg(flag_value("log.format", "Output format of log messages: logfmt, json", "logfmt"))
        .arg(flag_value("scrape.timeout-max", "Longest a collection may run, whatever X-Prometheus-Scrape-Timeout-Seconds allows", "10s"))
        .arg(flag_value("scrape.timeout-offset", "Time kept back from the scraper's timeout for encoding and transfer", "500ms"))
        .arg(
            Arg::new("collector.disable-defaults")
                .long("collector.disable-defaults")
                .action(ArgAction::SetTrue)
                .help("Disable every collector not enabled explicitly"),
        );
    cmd = crate::otlp::config::args(cmd);
    for spec in SOURCES {
        let on = format!("collector.{}", spec.name);
        let off = format!("no-collector.{}", spec.name);
        let default = if spec.default_enabled {
            "enabled"
        } else {
            "disabled"
        };
        cmd = cmd
            .arg(
                Arg::new(on.clone())
                    .long(on.clone())
                    .action(ArgAction::SetTrue)
                    .help(format!(
                        "Enable the {} collector (default: {default}). {}",
                        spec.name, spec.help
                    ))
                    .overrides_with(off.clone()),
            )
            .arg(
                Arg::new(off.clone())
                    .long(off.clone())
                    .action(ArgAction::SetTrue)
                    .help(format!("Disable the {} collector", spec.name))
                    .overrides_with(on.clone()),
            );
        for option in spec.options {
            let id = format!("collector.{}.{}", spec.name, option.name);
            cmd = cmd.arg(
                Arg::new(id.clone())
                    .long(id)
                    .value_name("VALUE")
                    .help(option.help),
            );
        }
    }
    cmd
}

fn flag_value(name: &'static str, help: &'static str, default: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("VALUE")
        .help(help)
        .default_value(default)
}

/// Parses the command line (and the config file it names). `railscope doctor ...` takes the
/// agent's flags and doctor's own.
pub(crate) fn parse<I, T>(args: I) -> Result<Invocation, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let doctor = args.get(1).is_some_and(|a| a == "doctor");
    let cmd = if doctor {
        args.remove(1);
        if let Some(first) = args.first_mut() {
            *first = "railscope doctor".into();
        }
        crate::doctor::command(command())
    } else {
        command()
    };
    let matches = match cmd.try_get_matches_from(args) {
        Ok(m) => m,
        Err(err) => {
            use clap::error::ErrorKind;
            return match err.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    Ok(Invocation::Print(err.render().to_string()))
                }
                _ => Err(config_error(
                    "command line",
                    err.render()
                        .to_string()
                        .trim()
                        .trim_start_matches("error: ")
                        .to_owned(),
                )),
            };
        }
    };
    let file = match matches.get_one::<String>("config.file") {
        Some(path) => load_file(path)?,
        None => FileConfig::default(),
    };
    let config = from_matches(&matches, file)?;
    if doctor {
        let options = crate::doctor::options(&matches)?;
        return Ok(Invocation::Doctor(Box::new(config), options));
    }
    Ok(Invocation::Run(Box::new(config)))
}

fn load_file(path: &str) -> Result<FileConfig, ConfigError> {
    let field = format!("--config.file {path}");
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(&field, format!("cannot read: {e}")))?;
    if text.trim().is_empty() {
        return Ok(FileConfig::default());
    }
    serde_saphyr::from_str::<FileConfig>(&text).map_err(|e| config_error(&field, e.to_string()))
}

/// The value of a flag: the command line if given there, else the config file, else the default.
pub(crate) fn pick(matches: &ArgMatches, id: &str, file: Option<String>) -> String {
    let from_cli = matches.value_source(id) == Some(ValueSource::CommandLine);
    let cli = matches.get_one::<String>(id).cloned().unwrap_or_default();
    if from_cli { cli } else { file.unwrap_or(cli) }
}

fn from_matches(matches: &ArgMatches, file: FileConfig) -> Result<Config, ConfigError> {
    let listen_address = pick(matches, "web.listen-address", file.web.listen_address);
    validate_listen_address(&listen_address)
        .map_err(|reason| config_error("--web.listen-address (web.listen-address)", reason))?;
    let telemetry_path =
        telemetry_path(pick(matches, "web.telemetry-path", file.web.telemetry_path))?;
    let web_config_file = web_config_file(matches, file.web.config_file);
    let max_requests = pick(
        matches,
        "web.max-requests",
        file.web.max_requests.map(|n| n.to_string()),
    )
    .parse::<usize>()
    .map_err(|_| {
        config_error(
            "--web.max-requests (web.max-requests)",
            "expected a whole number (0: no limit)",
        )
    })?;
    let read_header_timeout = duration(
        matches,
        "web.read-header-timeout",
        file.web.read_header_timeout,
        Zero::Refused,
        "expected a positive duration such as 30s",
    )?;
    let request_timeout = duration(
        matches,
        "web.request-timeout",
        file.web.request_timeout,
        Zero::Refused,
        "expected a positive duration such as 30s",
    )?;
    let roots = Roots {
        sysfs: PathBuf::from(pick(
            matches,
            "path.sysfs",
            file.path.sysfs.map(|p| p.display().to_string()),
        )),
        procfs: PathBuf::from(pick(
            matches,
            "path.procfs",
            file.path.procfs.map(|p| p.display().to_string()),
        )),
    };
    let refused_backoff = duration(
        matches,
        "path.refused-backoff",
        file.path.refused_backoff,
        Zero::Allowed,
        "expected a duration such as 1m, or 0s to read refused files at every scrape",
    )?;
    let log_level = log_level(&pick(matches, "log.level", file.log.level))?;
    let log_format = log_format(&pick(matches, "log.format", file.log.format))?;
    let scrape_timeout_max = duration(
        matches,
        "scrape.timeout-max",
        file.scrape.timeout_max,
        Zero::Refused,
        "expected a positive duration such as 10s or 2500ms",
    )?;
    let scrape_timeout_offset = duration(
        matches,
        "scrape.timeout-offset",
        file.scrape.timeout_offset,
        Zero::Allowed,
        "expected a duration such as 500ms",
    )?;
    let collectors = collector_configs(matches, file.collectors)?;
    let expected = crate::inventory::Inventory::from_file(file.expected)?;
    let otlp = crate::otlp::config::from_matches(matches, file.otlp)?;
    Ok(Config {
        listen_address,
        telemetry_path,
        roots,
        refused_backoff,
        log_level,
        log_format,
        scrape_timeout_max,
        scrape_timeout_offset,
        collectors,
        web_config_file,
        max_requests,
        read_header_timeout,
        request_timeout,
        expected,
        otlp,
    })
}

/// Checks `--web.telemetry-path`: the metrics endpoint may not hide the landing page or
/// the `/-/` endpoints.
fn telemetry_path(path: String) -> Result<String, ConfigError> {
    if !path.starts_with('/') || path == "/" || path.starts_with("/-/") {
        return Err(config_error(
            "--web.telemetry-path (web.telemetry-path)",
            format!("{path:?} must start with '/' and differ from '/' and '/-/...'"),
        ));
    }
    Ok(path)
}

/// `--web.config.file`, else the config file's `web.config-file`; empty is none.
fn web_config_file(matches: &ArgMatches, file: Option<String>) -> Option<PathBuf> {
    match matches.get_one::<String>("web.config.file") {
        Some(path) if matches.value_source("web.config.file") == Some(ValueSource::CommandLine) => {
            Some(path.clone())
        }
        _ => file,
    }
    .filter(|p| !p.is_empty())
    .map(PathBuf::from)
}

/// Whether a duration flag takes 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zero {
    Allowed,
    Refused,
}

/// The duration flag `id` (the config file key has the same name); `expected` is the
/// reason given for a value that does not parse, or for 0 where it is refused.
fn duration(
    matches: &ArgMatches,
    id: &str,
    file: Option<String>,
    zero: Zero,
    expected: &str,
) -> Result<Duration, ConfigError> {
    parse_duration(&pick(matches, id, file))
        .filter(|d| zero == Zero::Allowed || !d.is_zero())
        .ok_or_else(|| config_error(format!("--{id} ({id})"), expected))
}

fn log_level(name: &str) -> Result<LogLevel, ConfigError> {
    match name {
        "debug" => Ok(LogLevel::Debug),
        "info" => Ok(LogLevel::Info),
        "warn" => Ok(LogLevel::Warn),
        "error" => Ok(LogLevel::Error),
        other => Err(config_error(
            "--log.level (log.level)",
            format!("{other:?} is not one of debug, info, warn, error"),
        )),
    }
}

fn log_format(name: &str) -> Result<LogFormat, ConfigError> {
    match name {
        "logfmt" => Ok(LogFormat::Logfmt),
        "json" => Ok(LogFormat::Json),
        other => Err(config_error(
            "--log.format (log.format)",
            format!("{other:?} is not one of logfmt, json"),
        )),
    }
}

/// Every registered source's settings, in registry order, from the config file's
/// `collectors` section and the collector flags. A section for an unknown source is an
/// error.
fn collector_configs(
    matches: &ArgMatches,
    mut file: BTreeMap<String, BTreeMap<String, Scalar>>,
) -> Result<Vec<CollectorConfig>, ConfigError> {
    for name in file.keys() {
        if !SOURCES.iter().any(|s| s.name == name) {
            let known: Vec<_> = SOURCES.iter().map(|s| s.name).collect();
            return Err(config_error(
                format!("collectors.{name}"),
                format!("unknown collector (known: {})", known.join(", ")),
            ));
        }
    }
    let disable_defaults = matches.get_flag("collector.disable-defaults");
    let mut collectors = Vec::new();
    for spec in SOURCES {
        let mut config = CollectorConfig {
            spec,
            enabled: spec.default_enabled && !disable_defaults,
            options: OptionValues::new(),
        };
        if let Some(keys) = file.remove(spec.name) {
            apply_file_keys(&mut config, keys)?;
        }
        if matches.get_flag(&format!("collector.{}", spec.name)) {
            config.enabled = true;
        }
        if matches.get_flag(&format!("no-collector.{}", spec.name)) {
            config.enabled = false;
        }
        for option in spec.options {
            if let Some(value) =
                matches.get_one::<String>(&format!("collector.{}.{}", spec.name, option.name))
            {
                config.options.insert(option.name.to_owned(), value.clone());
            }
        }
        collectors.push(config);
    }
    Ok(collectors)
}

/// Applies one source's `collectors.<name>` keys: `enabled` and its options.
fn apply_file_keys(
    config: &mut CollectorConfig,
    keys: BTreeMap<String, Scalar>,
) -> Result<(), ConfigError> {
    let spec = config.spec;
    for (key, value) in keys {
        let field = format!("collectors.{}.{key}", spec.name);
        if key == "enabled" {
            match value {
                Scalar::Bool(b) => config.enabled = b,
                _ => return Err(config_error(field, "expected true or false")),
            }
        } else if spec.options.iter().any(|o| o.name == key) {
            let text = value
                .to_option_text()
                .map_err(|reason| config_error(&field, reason))?;
            config.options.insert(key, text);
        } else {
            let mut known = vec!["enabled"];
            known.extend(spec.options.iter().map(|o| o.name));
            return Err(config_error(
                field,
                format!("unknown key (known: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Resolves `:9477` (all interfaces), `host:port` and `[v6]:port`.
pub(crate) fn validate_listen_address(address: &str) -> Result<(), String> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{address:?} is not [host]:port"))?;
    port.parse::<u16>()
        .map_err(|_| format!("{address:?} has no valid port"))?;
    if host.starts_with('[') != host.ends_with(']') {
        return Err(format!("{address:?} has an unbalanced IPv6 bracket"));
    }
    Ok(())
}

/// Parses a Prometheus-style duration: `10s`, `500ms`, `1m30s`, `1.5s`.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * factor;
    }
    (total.is_finite() && total < 1.0e9).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, ConfigError> {
        let mut full = vec!["railscope"];
        full.extend_from_slice(args);
        match parse(full)? {
            Invocation::Run(c) => Ok(*c),
            Invocation::Print(text) => panic!("printed {text}"),
            Invocation::Doctor(..) => panic!("doctor"),
        }
    }

    fn write_config(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn defaults() {
        let c = run(&[]).unwrap();
        assert_eq!(c.listen_address, ":9477");
        assert_eq!(c.telemetry_path, "/metrics");
        assert_eq!(c.roots, Roots::default());
        assert_eq!(c.scrape_timeout_max, Duration::from_secs(10));
        assert_eq!(c.refused_backoff, Duration::from_secs(60));
        assert_eq!(
            run(&["--path.refused-backoff", "0s"])
                .unwrap()
                .refused_backoff,
            Duration::ZERO
        );
        assert!(
            c.collectors
                .iter()
                .all(|c| c.enabled == c.spec.default_enabled)
        );
    }

    #[test]
    fn collector_flags() {
        let c = run(&["--no-collector.infiniband"]).unwrap();
        assert!(!c.collectors[0].enabled);
        let c = run(&["--collector.disable-defaults", "--collector.infiniband"]).unwrap();
        assert!(c.collectors[0].enabled);
        let c = run(&["--no-collector.infiniband", "--collector.infiniband"]).unwrap();
        assert!(
            c.collectors[0].enabled,
            "the last of --collector/--no-collector wins"
        );
        let c = run(&["--collector.infiniband.device-exclude", "^mlx5_[89]$"]).unwrap();
        assert_eq!(c.collectors[0].options["device-exclude"], "^mlx5_[89]$");
    }

    #[test]
    fn file_then_flags() {
        let file = write_config(
            "web:\n  listen-address: 127.0.0.1:9999\npath:\n  sysfs: /host/sys\ncollectors:\n  infiniband:\n    enabled: false\n    device-include: mlx5_.*\n",
        );
        let path = file.path().to_str().unwrap();
        let c = run(&["--config.file", path]).unwrap();
        assert_eq!(c.listen_address, "127.0.0.1:9999");
        assert_eq!(c.roots.sysfs, PathBuf::from("/host/sys"));
        assert!(!c.collectors[0].enabled);
        assert_eq!(c.collectors[0].options["device-include"], "mlx5_.*");
        let c = run(&[
            "--config.file",
            path,
            "--web.listen-address",
            ":1234",
            "--collector.infiniband",
        ])
        .unwrap();
        assert_eq!(c.listen_address, ":1234");
        assert!(c.collectors[0].enabled);
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let cases = [
            ("web:\n  listen-adress: :1\n", "listen-adress"),
            ("colectors: {}\n", "colectors"),
            (
                "collectors:\n  infiniband:\n    device-includ: x\n",
                "collectors.infiniband.device-includ",
            ),
            (
                "collectors:\n  gpus:\n    enabled: true\n",
                "collectors.gpus",
            ),
            (
                "collectors:\n  infiniband:\n    enabled: maybe\n",
                "collectors.infiniband.enabled",
            ),
        ];
        for (text, name) in cases {
            let file = write_config(text);
            let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
            assert!(err.to_string().contains(name), "{text:?}: {err}");
        }
    }

    #[test]
    fn bad_values_name_the_flag() {
        let cases: [(&[&str], &str); 7] = [
            (&["--web.listen-address", "9477"], "--web.listen-address"),
            (&["--web.telemetry-path", "metrics"], "--web.telemetry-path"),
            (&["--log.level", "loud"], "--log.level"),
            (&["--log.format", "xml"], "--log.format"),
            (&["--scrape.timeout-max", "soon"], "--scrape.timeout-max"),
            (
                &["--path.refused-backoff", "later"],
                "--path.refused-backoff",
            ),
            (&["--no-such-flag"], "--no-such-flag"),
        ];
        for (args, name) in cases {
            let err = run(args).unwrap_err();
            assert!(err.to_string().contains(name), "{args:?}: {err}");
        }
    }

    #[test]
    fn the_example_config_file_is_valid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/railscope.yml");
        let c = run(&["--config.file", path]).unwrap();
        assert_eq!(c.listen_address, ":9477");
        assert_eq!(c.scrape_timeout_offset, Duration::from_millis(500));
        assert_eq!(
            c.collectors[0].options["device-exclude"],
            "^(mlx5_bond_.*)$"
        );
        let scheduler = crate::build_scheduler(&c).unwrap();
        assert_eq!(
            scheduler.source_names(),
            [
                "infiniband",
                "netdev",
                "ethtool",
                "dcb",
                "gpu",
                "pci",
                "topology",
                "host",
                "kmsg",
                "workload"
            ]
        );
        assert_eq!(c.collectors[6].options["rail-exclude"], "^0000:0c:00\\.0$");
    }

    #[test]
    fn otlp_from_the_file_and_flags() {
        assert!(run(&[]).unwrap().otlp.is_none());
        let file = write_config(
            "otlp:\n  endpoint: http://collector:4318\n  protocol: http/protobuf\n  interval: 30s\n  headers:\n    X-Scope-OrgID: fleet-a\n  queue-size: 3\n  compression: gzip\n  hardware-semconv: true\n",
        );
        let path = file.path().to_str().unwrap();
        let c = run(&["--config.file", path]).unwrap();
        let otlp = c.otlp.unwrap();
        assert_eq!(otlp.endpoint, "http://collector:4318/v1/metrics");
        assert_eq!(otlp.protocol, crate::otlp::config::Protocol::HttpProtobuf);
        assert_eq!(otlp.interval, Duration::from_secs(30));
        assert_eq!(otlp.timeout, Duration::from_secs(10));
        assert_eq!(
            otlp.headers,
            [("x-scope-orgid".to_owned(), "fleet-a".to_owned())]
        );
        assert_eq!(otlp.queue_size, 3);
        assert!(otlp.gzip && otlp.hardware_semconv);
        // Flags win over the file.
        let c = run(&[
            "--config.file",
            path,
            "--otlp.interval=5s",
            "--otlp.headers=a=b",
        ])
        .unwrap();
        let otlp = c.otlp.unwrap();
        assert_eq!(otlp.interval, Duration::from_secs(5));
        assert_eq!(otlp.headers, [("a".to_owned(), "b".to_owned())]);
        for (text, field) in [
            ("otlp:\n  endpont: http://c:4317\n", "endpont"),
            (
                "otlp:\n  endpoint: http://c:4317\n  queue-size: 0\n",
                "otlp.queue-size",
            ),
            (
                "otlp:\n  endpoint: http://c:4317\n  timeout: soon\n",
                "otlp.timeout",
            ),
            (
                "otlp:\n  endpoint: http://c:4317\n  tls:\n    ca-file: /nonexistent\n",
                "otlp.tls.ca-file",
            ),
        ] {
            let file = write_config(text);
            let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
            assert!(err.to_string().contains(field), "{text}: {err}");
        }
    }

    #[test]
    fn expected_inventory_from_the_file() {
        let file = write_config(
            "expected:\n  gpus: 8\n  rdma-ports: 8\n  rdma-port-rate-gbps: 400\n  rdma-port-width: 4\n  nvlinks-per-gpu: 18\n  pcie-generation: 5\n  pcie-width: 16\n",
        );
        let c = run(&["--config.file", file.path().to_str().unwrap()]).unwrap();
        assert_eq!(c.expected.gpus, Some(8));
        assert_eq!(c.expected.rdma_port_rate, Some(50e9));
        assert_eq!(c.expected.pcie_speed, Some(32e9));
        for (text, field) in [
            ("expected:\n  gpus: 0\n", "expected.gpus"),
            (
                "expected:\n  rdma-port-rate-gbps: -1\n",
                "expected.rdma-port-rate-gbps",
            ),
            (
                "expected:\n  pcie-generation: 9\n",
                "expected.pcie-generation",
            ),
            ("expected:\n  gpu: 8\n", "gpu"),
        ] {
            let file = write_config(text);
            let err = run(&["--config.file", file.path().to_str().unwrap()]).unwrap_err();
            assert!(err.to_string().contains(field), "{text}: {err}");
        }
    }

    #[test]
    fn map_options_from_the_file() {
        let file = write_config(
            "collectors:\n  topology:\n    rails:\n      \"0000:18:00.0\": 0\n      mlx5_1: 1\n",
        );
        let c = run(&["--config.file", file.path().to_str().unwrap()]).unwrap();
        assert_eq!(c.collectors[6].options["rails"], "0000:18:00.0=0,mlx5_1=1");
        crate::build_scheduler(&c).unwrap();
        let bad = write_config("collectors:\n  topology:\n    rails:\n      mlx5_1: one\n");
        let c = run(&["--config.file", bad.path().to_str().unwrap()]).unwrap();
        let err = crate::build_scheduler(&c).unwrap_err();
        assert!(
            err.to_string().contains("collectors.topology.rails"),
            "{err}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn help_lists_every_collector_flag() {
        let help = command().render_long_help().to_string();
        for spec in SOURCES {
            assert!(help.contains(&format!("--collector.{}", spec.name)));
            assert!(help.contains(&format!("--no-collector.{}", spec.name)));
            for option in spec.options {
                assert!(help.contains(&format!("--collector.{}.{}", spec.name, option.name)));
            }
        }
    }

    #[test]
    fn web_flags_defaults_file_and_errors() {
        let c = run(&[]).unwrap();
        assert_eq!(c.web_config_file, None);
        assert_eq!(c.max_requests, 40);
        assert_eq!(c.read_header_timeout, Duration::from_secs(30));
        assert_eq!(c.request_timeout, Duration::from_secs(30));
        let file = write_config(
            "web:\n  config-file: /etc/railscope/web.yml\n  max-requests: 0\n  read-header-timeout: 5s\n  request-timeout: 1m\n",
        );
        let path = file.path().to_str().unwrap();
        let c = run(&["--config.file", path]).unwrap();
        assert_eq!(
            c.web_config_file,
            Some(PathBuf::from("/etc/railscope/web.yml"))
        );
        assert_eq!(c.max_requests, 0);
        assert_eq!(c.read_header_timeout, Duration::from_secs(5));
        assert_eq!(c.request_timeout, Duration::from_secs(60));
        let c = run(&[
            "--config.file",
            path,
            "--web.config.file",
            "/tmp/w.yml",
            "--web.max-requests",
            "7",
        ])
        .unwrap();
        assert_eq!(c.web_config_file, Some(PathBuf::from("/tmp/w.yml")));
        assert_eq!(c.max_requests, 7);
        for (args, name) in [
            (["--web.max-requests", "many"], "--web.max-requests"),
            (
                ["--web.read-header-timeout", "0s"],
                "--web.read-header-timeout",
            ),
            (["--web.request-timeout", "soon"], "--web.request-timeout"),
        ] {
            let err = run(&args).unwrap_err();
            assert!(err.to_string().contains(name), "{args:?}: {err}");
        }
        let help = command().render_long_help().to_string();
        for flag in [
            "--web.config.file",
            "--web.max-requests",
            "--web.read-header-timeout",
            "--web.request-timeout",
        ] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }
}
