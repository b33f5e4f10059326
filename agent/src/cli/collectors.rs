//! What the collection reads and how long it may take: `--path.*`, `--sysfs.refused-backoff`,
//! `--scrape.*`, and one flag set per registered source (`--collector.<name>`,
//! `--no-collector.<name>`, `--collector.<name>.<option>`), generated from the registry, with
//! the config file's `path`, `sysfs`, `scrape` and `collectors` sections.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use railscope_collectors::{
    OptionKind, OptionSpec, OptionValue, OptionValues, Roots, SOURCES, SourceSpec,
};
use serde_json::Value as Json;

use super::error::ConfigError;
use super::value::{File, Setting, Switch, positive};

const SYSFS: Setting<PathBuf> = Setting::new(
    "path.sysfs",
    "path.sysfs",
    "sysfs mount point",
    "expected a path",
)
.default(railscope_collectors::fs::DEFAULT_SYSFS);
const PROCFS: Setting<PathBuf> = Setting::new(
    "path.procfs",
    "path.procfs",
    "procfs mount point",
    "expected a path",
)
.default(railscope_collectors::fs::DEFAULT_PROCFS);
const REFUSED_BACKOFF_HELP: &str = "How long a sysfs or procfs file that failed with EINVAL, EOPNOTSUPP or EACCES is left unread (doubling at each refused retry, up to 16 times); 0s reads it at every scrape";
const REFUSED_BACKOFF_EXPECTED: &str =
    "expected a duration such as 1m, or 0s to read refused files at every scrape";
const REFUSED_BACKOFF: Setting<Duration> = Setting::new(
    "sysfs.refused-backoff",
    "sysfs.refused-backoff",
    REFUSED_BACKOFF_HELP,
    REFUSED_BACKOFF_EXPECTED,
)
.default("1m");
/// The flag's former spelling, accepted and logged as deprecated.
const REFUSED_BACKOFF_OLD: Setting<Duration> = Setting::new(
    "path.refused-backoff",
    "path.refused-backoff",
    REFUSED_BACKOFF_HELP,
    REFUSED_BACKOFF_EXPECTED,
)
.hidden();
const TIMEOUT_MAX: Setting<Duration> = Setting::new(
    "scrape.timeout-max",
    "scrape.timeout-max",
    "Longest a collection may run, whatever X-Prometheus-Scrape-Timeout-Seconds allows",
    "expected a positive duration such as 10s or 2500ms",
)
.default("10s")
.check(positive);
const TIMEOUT_OFFSET: Setting<Duration> = Setting::new(
    "scrape.timeout-offset",
    "scrape.timeout-offset",
    "Time kept back from the scraper's timeout for encoding and transfer",
    "expected a duration such as 500ms",
)
.default("500ms");
const DISABLE_DEFAULTS: Switch = Switch {
    flag: "collector.disable-defaults",
    key: "",
    help: "Disable every collector not enabled explicitly",
};

/// The flag that only serving uses (hidden under `railscope doctor`).
pub(crate) const SERVING_FLAGS: [&str; 1] = [TIMEOUT_OFFSET.flag];

/// One source's settings.
#[derive(Debug, Clone)]
pub(crate) struct CollectorConfig {
    /// The registry entry.
    pub(crate) spec: &'static SourceSpec,
    /// Whether it runs.
    pub(crate) enabled: bool,
    /// Its option values by option name, as the source parses them.
    pub(crate) options: OptionValues,
}

/// The collection's validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Collection {
    /// Where sysfs and procfs are mounted.
    pub(crate) roots: Roots,
    /// How long a file that refused reads is left unread at first; zero reads it every time.
    pub(crate) refused_backoff: Duration,
    /// The most time a collection may take, whatever the scraper allows.
    pub(crate) timeout_max: Duration,
    /// How much of the scraper's timeout is left for encoding and the network.
    pub(crate) timeout_offset: Duration,
    /// Every source in registry order.
    pub(crate) collectors: Vec<CollectorConfig>,
}

/// Adds the path, scrape and collector flags.
pub(crate) fn args(cmd: Command) -> Command {
    cmd.arg(SYSFS.arg())
        .arg(PROCFS.arg())
        .arg(REFUSED_BACKOFF.arg())
        .arg(REFUSED_BACKOFF_OLD.arg())
        .arg(TIMEOUT_MAX.arg())
        .arg(TIMEOUT_OFFSET.arg())
        .arg(DISABLE_DEFAULTS.arg())
}

/// Adds one flag set per registered source.
pub(crate) fn collector_args(mut cmd: Command) -> Command {
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

/// The collection's settings; `deprecated` gets the former spellings that were used.
pub(crate) fn from_matches(
    matches: &ArgMatches,
    file: &mut File,
    deprecated: &mut Vec<(&'static str, &'static str)>,
) -> Result<Collection, ConfigError> {
    let roots = Roots {
        sysfs: SYSFS.get(matches, file)?,
        procfs: PROCFS.get(matches, file)?,
    };
    let new_in_file = file.has(REFUSED_BACKOFF.key);
    let old = REFUSED_BACKOFF_OLD.get_opt(matches, file)?;
    let new = REFUSED_BACKOFF.get(matches, file)?;
    let refused_backoff = match old {
        Some(old) => {
            deprecated.push((REFUSED_BACKOFF_OLD.flag, REFUSED_BACKOFF.flag));
            let old_wins = !REFUSED_BACKOFF.on_command_line(matches)
                && (REFUSED_BACKOFF_OLD.on_command_line(matches) || !new_in_file);
            if old_wins { old } else { new }
        }
        None => new,
    };
    let timeout_max = TIMEOUT_MAX.get(matches, file)?;
    let timeout_offset = TIMEOUT_OFFSET.get(matches, file)?;
    let disable_defaults = DISABLE_DEFAULTS.get(matches, file)?;
    let sections = file.take_map("collectors")?;
    let collectors = collector_configs(matches, disable_defaults, sections)?;
    Ok(Collection {
        roots,
        refused_backoff,
        timeout_max,
        timeout_offset,
        collectors,
    })
}

/// Every registered source's settings, in registry order, from the config file's
/// `collectors` section and the collector flags. A section for an unknown source is an
/// error.
fn collector_configs(
    matches: &ArgMatches,
    disable_defaults: bool,
    mut file: serde_json::Map<String, Json>,
) -> Result<Vec<CollectorConfig>, ConfigError> {
    for name in file.keys() {
        if !SOURCES.iter().any(|s| s.name == name) {
            let known: Vec<_> = SOURCES.iter().map(|s| s.name).collect();
            return Err(ConfigError::new(
                format!("collectors.{name}"),
                format!("unknown collector (known: {})", known.join(", ")),
            ));
        }
    }
    let mut collectors = Vec::new();
    for spec in SOURCES {
        let mut config = CollectorConfig {
            spec,
            enabled: spec.default_enabled && !disable_defaults,
            options: OptionValues::new(),
        };
        match file.remove(spec.name) {
            None | Some(Json::Null) => {}
            Some(Json::Object(keys)) => apply_file_keys(&mut config, keys)?,
            Some(_) => {
                return Err(ConfigError::new(
                    format!("collectors.{}", spec.name),
                    "expected a map",
                ));
            }
        }
        if matches.get_flag(&format!("collector.{}", spec.name)) {
            config.enabled = true;
        }
        if matches.get_flag(&format!("no-collector.{}", spec.name)) {
            config.enabled = false;
        }
        for option in spec.options {
            let flag = format!("collector.{}.{}", spec.name, option.name);
            if let Some(text) = matches.get_one::<String>(&flag) {
                let value = option_from_text(option, text)
                    .map_err(|reason| ConfigError::new(option_field(spec, option), reason))?;
                config.options.insert(option.name, value);
            }
        }
        collectors.push(config);
    }
    Ok(collectors)
}

/// Applies one source's `collectors.<name>` keys: `enabled` and its options. A source parses
/// its own options, so the file's value is handed over as the flag would spell it: a
/// scalar as written, a map of scalars as `KEY=VALUE,KEY=VALUE`.
fn apply_file_keys(
    config: &mut CollectorConfig,
    keys: serde_json::Map<String, Json>,
) -> Result<(), ConfigError> {
    let spec = config.spec;
    for (key, value) in keys {
        let field = format!("collectors.{}.{key}", spec.name);
        if key == "enabled" {
            match value {
                Json::Bool(b) => config.enabled = b,
                _ => return Err(ConfigError::new(field, "expected true or false")),
            }
        } else if let Some(option) = spec.options.iter().find(|o| o.name == key) {
            let value = option_from_file(option, value)
                .map_err(|reason| ConfigError::new(option_field(spec, option), reason))?;
            config.options.insert(key, value);
        } else {
            let mut known = vec!["enabled"];
            known.extend(spec.options.iter().map(|o| o.name));
            return Err(ConfigError::new(
                field,
                format!("unknown key (known: {})", known.join(", ")),
            ));
        }
    }
    Ok(())
}

/// How errors name an option: its flag and its key.
fn option_field(spec: &SourceSpec, option: &OptionSpec) -> String {
    format!(
        "--collector.{0}.{1} (collectors.{0}.{1})",
        spec.name, option.name
    )
}

/// An option's value from its flag's text, typed by its kind: a map's `KEY=VALUE,...` parsed
/// into pairs, a choice checked against its words.
fn option_from_text(option: &OptionSpec, text: &str) -> Result<OptionValue, String> {
    match option.kind {
        OptionKind::Map => railscope_collectors::source::parse_map_text(text).map(OptionValue::Map),
        OptionKind::Choice(words) if !words.contains(&text) => {
            Err(format!("{text:?} is not one of {}", words.join(", ")))
        }
        OptionKind::Choice(_) | OptionKind::Regex | OptionKind::Path => {
            Ok(OptionValue::Text(text.to_owned()))
        }
    }
}

/// An option's value from the config file, typed by its kind: a map option takes a YAML map
/// of scalars (or a flag's `KEY=VALUE,...` string), every other kind a scalar.
fn option_from_file(option: &OptionSpec, value: Json) -> Result<OptionValue, String> {
    fn scalar(value: &Json) -> Option<String> {
        match value {
            Json::String(s) => Some(s.clone()),
            Json::Number(n) => Some(n.to_string()),
            Json::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
    match (option.kind, value) {
        (OptionKind::Map, Json::Object(map)) => map
            .into_iter()
            .map(|(k, v)| {
                scalar(&v)
                    .map(|v| (k, v))
                    .ok_or("expected a map of scalars")
            })
            .collect::<Result<Vec<_>, _>>()
            .map(OptionValue::Map)
            .map_err(str::to_owned),
        (OptionKind::Map, Json::String(text)) => option_from_text(option, &text),
        (OptionKind::Map, _) => Err("expected a map".to_owned()),
        (_, value) => match scalar(&value) {
            Some(text) => option_from_text(option, &text),
            None => Err("expected a scalar".to_owned()),
        },
    }
}
