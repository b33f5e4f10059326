//! The source trait, its report and its options. Nothing here knows any particular source:
//! the list of sources is [`crate::registry`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::CollectError;
use crate::fs::{Fs, Roots};
use crate::run::Run;

/// The outcome of one collection by one source: what it read, and every failure met.
#[derive(Debug, Clone)]
pub struct Report<T> {
    /// What was read; `None` when the source could not run at all.
    pub data: Option<T>,
    /// Every failure met; each cost only its own series.
    pub errors: Vec<CollectError>,
    /// Set when the subsystem the source reads does not exist on this node (no
    /// `/sys/class/infiniband`): not an error, just nothing to report.
    pub absent: Option<String>,
}

impl<T> Report<T> {
    /// A report of `data` with `errors`.
    pub fn new(data: T, errors: Vec<CollectError>) -> Self {
        Report {
            data: Some(data),
            errors,
            absent: None,
        }
    }

    /// A report saying the subsystem is absent: `data` (empty) and why.
    pub fn absent(data: T, reason: impl Into<String>) -> Self {
        Report {
            data: Some(data),
            errors: Vec::new(),
            absent: Some(reason.into()),
        }
    }

    /// A report of a source that could not run at all.
    pub fn failed(errors: Vec<CollectError>) -> Self {
        Report {
            data: None,
            errors,
            absent: None,
        }
    }

    /// The same report with its data converted.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Report<U> {
        Report {
            data: self.data.map(f),
            errors: self.errors,
            absent: self.absent,
        }
    }
}

/// What the registry needs to know of a source before building it.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The source's name (`infiniband`): `--collector.<name>`, `collectors.<name>` in the
    /// config file, the `collector` label.
    pub name: &'static str,
    /// One line saying what it reads.
    pub help: &'static str,
    /// Whether it runs unless `--no-collector.<name>` is given.
    pub default_enabled: bool,
    /// Its options.
    pub options: &'static [OptionSpec],
}

/// What a source is built from.
#[derive(Debug, Clone)]
pub struct Build<'a> {
    /// Where sysfs and procfs are mounted.
    pub roots: &'a Roots,
    /// The file system every read goes through (guarded against reads that block).
    pub fs: Arc<dyn Fs>,
    /// The values given for its options, by option name.
    pub options: &'a OptionValues,
}

/// A source: reads one kernel or library interface and returns plain data. `collect` blocks;
/// the agent runs it on a blocking thread, and the source runs its per-device work through
/// [`Run::each`] under the collection's deadline.
pub trait Source: Send + Sync + std::fmt::Debug + Sized + 'static {
    /// The plain data of one collection.
    type Data: Send + 'static;
    /// Its registry entry.
    const SPEC: Spec;
    /// Builds the source from its option values; an invalid one names the option.
    fn build(from: &Build<'_>) -> Result<Self, SourceBuildError>;
    /// Reads the node once.
    fn collect(self: &Arc<Self>, run: &Run<'_>) -> Report<Self::Data>;
}

/// The kind of value an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A regular expression (validated at start-up).
    Regex,
    /// A file path.
    Path,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A map of keys to values: `KEY=VALUE,KEY=VALUE` on the command line, a YAML map in the
    /// config file.
    Map,
}

/// One `--collector.<source>.<name>` option.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// The option name, as it appears in the flag and the config file.
    pub name: &'static str,
    /// Help text.
    pub help: &'static str,
    /// The value kind.
    pub kind: OptionKind,
}

/// One option's value, typed by its kind: a map option holds its pairs (from a YAML map, or
/// parsed once from a flag's `KEY=VALUE,KEY=VALUE`), every other kind its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionValue {
    /// The text of a regular expression, a path or a choice.
    Text(String),
    /// The pairs of a map option, in the order given.
    Map(Vec<(String, String)>),
}

impl From<String> for OptionValue {
    fn from(text: String) -> Self {
        OptionValue::Text(text)
    }
}

impl From<&str> for OptionValue {
    fn from(text: &str) -> Self {
        OptionValue::Text(text.to_owned())
    }
}

/// The option values given for one source, by option name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionValues(BTreeMap<String, OptionValue>);

impl OptionValues {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an option's value.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<OptionValue>) {
        self.0.insert(name.into(), value.into());
    }

    /// The text of an option that is not a map.
    pub fn get(&self, name: &str) -> Option<&String> {
        match self.0.get(name) {
            Some(OptionValue::Text(text)) => Some(text),
            _ => None,
        }
    }

    /// The pairs of a map option.
    pub fn map(&self, name: &str) -> Option<&[(String, String)]> {
        match self.0.get(name) {
            Some(OptionValue::Map(pairs)) => Some(pairs),
            _ => None,
        }
    }

    /// An option's value, whatever its kind.
    pub fn value(&self, name: &str) -> Option<&OptionValue> {
        self.0.get(name)
    }
}

impl<K: Into<String>, V: Into<OptionValue>> FromIterator<(K, V)> for OptionValues {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        OptionValues(
            items
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// Parses a map option's `KEY=VALUE,KEY=VALUE` (a flag's spelling of it): keys and values
/// trimmed, empty items skipped, a key given twice refused.
pub fn parse_map_text(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not KEY=VALUE"))?;
        let (key, value) = (key.trim(), value.trim());
        if pairs.iter().any(|(k, _)| k == key) {
            return Err(format!("{key:?} is given twice"));
        }
        pairs.push((key.to_owned(), value.to_owned()));
    }
    Ok(pairs)
}

/// Why a source could not be built from its options.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("option {option}: {reason}")]
pub struct SourceBuildError {
    /// The option's name (without the `--collector.<source>.` prefix).
    pub option: String,
    /// What is wrong with its value.
    pub reason: String,
}

/// Compiles an optional regular-expression option. Like node_exporter's `device-include` /
/// `device-exclude`, the pattern is not anchored: write `^mlx5_1$` to match one device only.
pub fn regex_option(
    values: &OptionValues,
    name: &str,
) -> Result<Option<regex::Regex>, SourceBuildError> {
    match values.get(name) {
        None => Ok(None),
        Some(pattern) if pattern.is_empty() => Ok(None),
        Some(pattern) => regex::Regex::new(pattern)
            .map(Some)
            .map_err(|err| SourceBuildError {
                option: name.to_owned(),
                reason: format!("invalid regular expression {pattern:?}: {err}"),
            }),
    }
}
