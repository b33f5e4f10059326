//! The log's settings: `--log.level`, `--log.format`, the config file's `log` section.

use clap::{ArgMatches, Command};
use serde_json::Value as Json;

use super::error::ConfigError;
use super::value::{File, Rejected, Setting, Value, choice, text_from_file};

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

impl Value for LogLevel {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(
            text,
            &[
                ("debug", LogLevel::Debug),
                ("info", LogLevel::Info),
                ("warn", LogLevel::Warn),
                ("error", LogLevel::Error),
            ],
        )
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

impl Value for LogFormat {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(
            text,
            &[("logfmt", LogFormat::Logfmt), ("json", LogFormat::Json)],
        )
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

const LEVEL: Setting<LogLevel> = Setting::new(
    "log.level",
    "log.level",
    "Only log messages with the given severity or above: debug, info, warn, error",
    "expected one of debug, info, warn, error",
)
.default("info");
const FORMAT: Setting<LogFormat> = Setting::new(
    "log.format",
    "log.format",
    "Output format of log messages: logfmt, json",
    "expected one of logfmt, json",
)
.default("logfmt");

/// The flag that only serving uses (hidden under `railscope doctor`).
pub(crate) const SERVING_FLAGS: [&str; 1] = [FORMAT.flag];

/// The log's validated settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Log {
    /// Verbosity.
    pub(crate) level: LogLevel,
    /// Line format.
    pub(crate) format: LogFormat,
}

/// Adds the `--log.*` flags.
pub(crate) fn args(cmd: Command) -> Command {
    cmd.arg(LEVEL.arg()).arg(FORMAT.arg())
}

/// The log settings from the command line and the file.
pub(crate) fn from_matches(matches: &ArgMatches, file: &mut File) -> Result<Log, ConfigError> {
    Ok(Log {
        level: LEVEL.get(matches, file)?,
        format: FORMAT.get(matches, file)?,
    })
}
