//! Typed settings. One [`Setting`] declares a flag, its config-file key, its default, its
//! help and its type; [`Value`] reads that type from the flag's text and from the config
//! file's value, which serde has already typed (a number is a number, a map is a map).
//! [`File`] is the parsed config file: each setting takes its key out of it, and what is left
//! at the end is an unknown key, named with the known keys of its section.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches};
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use super::error::ConfigError;

/// Why a value is not valid: a reason of its own, or (the default) the setting's
/// `expected` text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rejected(Option<String>);

/// Rejected for this reason.
pub(crate) fn reject(reason: impl Into<String>) -> Rejected {
    Rejected(Some(reason.into()))
}

/// A type a setting can have: read from a flag's text, or from the config file's value.
pub(crate) trait Value: Sized {
    /// From the flag's text (or the default's).
    fn from_text(text: &str) -> Result<Self, Rejected>;
    /// From the config file's value.
    fn from_file(value: Json) -> Result<Self, Rejected>;
}

/// One flag and its config-file key.
pub(crate) struct Setting<T> {
    /// The flag without its dashes (`web.listen-address`).
    pub(crate) flag: &'static str,
    /// The config file's dotted key (`web.listen-address`); empty: no key.
    pub(crate) key: &'static str,
    /// The default, as the flag would spell it; `None`: unset unless given.
    pub(crate) default: Option<&'static str>,
    /// The flag's help.
    pub(crate) help: &'static str,
    /// What a valid value looks like: the reason given for one that is not.
    pub(crate) expected: &'static str,
    /// A check beyond the type's (a duration that must not be zero); `None`: none.
    pub(crate) check: Option<fn(&T) -> bool>,
    /// Hidden from `--help`.
    pub(crate) hidden: bool,
    /// Given more than once, each value counts (and the file's key takes a list).
    pub(crate) repeated: bool,
    pub(crate) kind: PhantomData<fn() -> T>,
}

impl<T: Value> Setting<T> {
    /// A setting with no default, no check, shown in `--help`.
    pub(crate) const fn new(
        flag: &'static str,
        key: &'static str,
        help: &'static str,
        expected: &'static str,
    ) -> Setting<T> {
        Setting {
            flag,
            key,
            default: None,
            help,
            expected,
            check: None,
            hidden: false,
            repeated: false,
            kind: PhantomData,
        }
    }

    /// The same with a default.
    pub(crate) const fn default(mut self, default: &'static str) -> Setting<T> {
        self.default = Some(default);
        self
    }

    /// The same with a check beyond the type's.
    pub(crate) const fn check(mut self, check: fn(&T) -> bool) -> Setting<T> {
        self.check = Some(check);
        self
    }

    /// The same, hidden from `--help`.
    pub(crate) const fn hidden(mut self) -> Setting<T> {
        self.hidden = true;
        self
    }

    /// The same, repeatable: read it with [`Setting::get_all`].
    pub(crate) const fn repeated(mut self) -> Setting<T> {
        self.repeated = true;
        self
    }

    /// Its flag for clap.
    pub(crate) fn arg(&self) -> Arg {
        let arg = Arg::new(self.flag)
            .long(self.flag)
            .value_name("VALUE")
            .help(self.help)
            .hide(self.hidden);
        let arg = if self.repeated {
            arg.action(ArgAction::Append)
        } else {
            arg
        };
        match self.default {
            Some(default) => arg.default_value(default),
            None => arg,
        }
    }

    /// How errors name it: `--flag (key)`, or the one it has.
    pub(crate) fn field(&self) -> String {
        match (self.flag.is_empty(), self.key.is_empty()) {
            (false, false) => format!("--{} ({})", self.flag, self.key),
            (false, true) => format!("--{}", self.flag),
            _ => self.key.to_owned(),
        }
    }

    /// The error for a value of this setting that was rejected.
    pub(crate) fn rejected(&self, rejected: Rejected) -> ConfigError {
        self.error(rejected)
    }

    fn error(&self, rejected: Rejected) -> ConfigError {
        let reason = rejected.0.unwrap_or_else(|| self.expected.to_owned());
        ConfigError::new(self.field(), reason)
    }

    /// Whether the command line gave it.
    pub(crate) fn on_command_line(&self, matches: &ArgMatches) -> bool {
        !self.flag.is_empty() && matches.value_source(self.flag) == Some(ValueSource::CommandLine)
    }

    /// The value: the command line's if given there, else the file's, else the default;
    /// `None` when none of them has one.
    pub(crate) fn get_opt(
        &self,
        matches: &ArgMatches,
        file: &mut File,
    ) -> Result<Option<T>, ConfigError> {
        let from_file = if self.key.is_empty() {
            None
        } else {
            file.take(self.key)
        };
        let value = if self.on_command_line(matches) {
            let text = matches
                .get_one::<String>(self.flag)
                .map_or("", String::as_str);
            T::from_text(text).map_err(|r| self.error(r))?
        } else if let Some(value) = from_file {
            T::from_file(value).map_err(|r| self.error(r))?
        } else if let Some(default) = self.default {
            T::from_text(default).map_err(|r| self.error(r))?
        } else {
            return Ok(None);
        };
        match self.check {
            Some(check) if !check(&value) => Err(self.error(Rejected::default())),
            _ => Ok(Some(value)),
        }
    }

    /// Every value of a repeated setting: the command line's if given there (each
    /// occurrence one value), else the file's (one value or a list), else the default.
    pub(crate) fn get_all(
        &self,
        matches: &ArgMatches,
        file: &mut File,
    ) -> Result<Vec<T>, ConfigError> {
        let from_file = if self.key.is_empty() {
            None
        } else {
            file.take(self.key)
        };
        let values = if self.on_command_line(matches) {
            matches
                .get_many::<String>(self.flag)
                .into_iter()
                .flatten()
                .map(|text| T::from_text(text).map_err(|r| self.error(r)))
                .collect::<Result<Vec<T>, _>>()?
        } else if let Some(value) = from_file {
            let items = match value {
                Json::Array(items) => items,
                one => vec![one],
            };
            if items.is_empty() {
                return Err(self.error(reject("expected at least one value")));
            }
            items
                .into_iter()
                .map(|item| T::from_file(item).map_err(|r| self.error(r)))
                .collect::<Result<Vec<T>, _>>()?
        } else if let Some(default) = self.default {
            vec![T::from_text(default).map_err(|r| self.error(r))?]
        } else {
            Vec::new()
        };
        match self.check {
            Some(check) if !values.iter().all(check) => Err(self.error(Rejected::default())),
            _ => Ok(values),
        }
    }

    /// The value of a setting that has a default.
    pub(crate) fn get(&self, matches: &ArgMatches, file: &mut File) -> Result<T, ConfigError> {
        self.get_opt(matches, file)?
            .ok_or_else(|| self.error(Rejected::default()))
    }
}

/// A switch: `--flag` sets it; the file's key is a boolean.
pub(crate) struct Switch {
    /// The flag without its dashes.
    pub(crate) flag: &'static str,
    /// The config file's dotted key; empty: no key.
    pub(crate) key: &'static str,
    /// The flag's help.
    pub(crate) help: &'static str,
}

impl Switch {
    /// Its flag for clap.
    pub(crate) fn arg(&self) -> Arg {
        Arg::new(self.flag)
            .long(self.flag)
            .action(ArgAction::SetTrue)
            .help(self.help)
    }

    /// On when the command line sets it or the file says `true`.
    pub(crate) fn get(&self, matches: &ArgMatches, file: &mut File) -> Result<bool, ConfigError> {
        let from_file = match (!self.key.is_empty())
            .then(|| file.take(self.key))
            .flatten()
        {
            Some(value) => bool::from_file(value).map_err(|_| {
                ConfigError::new(
                    format!("--{} ({})", self.flag, self.key),
                    "expected true or false",
                )
            })?,
            None => false,
        };
        Ok(matches.get_flag(self.flag) || from_file)
    }
}

/// The config file, parsed but not yet taken apart.
#[derive(Debug, Default)]
pub(crate) struct File {
    root: Map<String, Json>,
    /// Every key a setting asked for, for the error about one that is unknown.
    asked: BTreeSet<String>,
}

impl File {
    /// The file's top-level map (empty for an empty file).
    pub(crate) fn new(root: Map<String, Json>) -> File {
        File {
            root,
            asked: BTreeSet::new(),
        }
    }

    /// Takes the value at the dotted `key` out; null counts as absent.
    pub(crate) fn take(&mut self, key: &str) -> Option<Json> {
        self.asked.insert(key.to_owned());
        let mut parts: Vec<&str> = key.split('.').collect();
        let last = parts.pop()?;
        let mut map = &mut self.root;
        for part in parts {
            map = map.get_mut(part)?.as_object_mut()?;
        }
        map.remove(last).filter(|v| !v.is_null())
    }

    /// Whether the file has a value at the dotted `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        let mut parts: Vec<&str> = key.split('.').collect();
        let Some(last) = parts.pop() else {
            return false;
        };
        let mut map = &self.root;
        for part in parts {
            match map.get(part).and_then(Json::as_object) {
                Some(inner) => map = inner,
                None => return false,
            }
        }
        map.get(last).is_some_and(|v| !v.is_null())
    }

    /// Takes a whole section (a map) out; a section that is not a map is an error.
    pub(crate) fn take_map(&mut self, key: &str) -> Result<Map<String, Json>, ConfigError> {
        match self.take(key) {
            None => Ok(Map::new()),
            Some(Json::Object(map)) => Ok(map),
            Some(_) => Err(ConfigError::new(key, "expected a map")),
        }
    }

    /// Fails on the first key no setting took, naming it and the known keys beside it.
    pub(crate) fn finish(self) -> Result<(), ConfigError> {
        match left(&self.root, "", &self.asked) {
            None => Ok(()),
            Some((key, reason)) => Err(ConfigError::new(key, reason)),
        }
    }
}

/// The first key of `map` (under `prefix`) that no setting asked for, and why it is wrong.
fn left(
    map: &Map<String, Json>,
    prefix: &str,
    asked: &BTreeSet<String>,
) -> Option<(String, String)> {
    for (name, value) in map {
        let key = format!("{prefix}{name}");
        let inner = format!("{key}.");
        let section = asked.iter().any(|a| a.starts_with(&inner));
        match value {
            Json::Null => {}
            Json::Object(map) if section => {
                if let Some(found) = left(map, &inner, asked) {
                    return Some(found);
                }
            }
            _ if section => return Some((key, "expected a map".to_owned())),
            _ => {
                let known: BTreeSet<&str> = asked
                    .iter()
                    .filter_map(|a| a.strip_prefix(prefix))
                    .filter_map(|rest| rest.split('.').next())
                    .collect();
                let known: Vec<&str> = known.into_iter().collect();
                return Some((key, format!("unknown key (known: {})", known.join(", "))));
            }
        }
    }
    None
}

impl Value for String {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        Ok(text.to_owned())
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        String::deserialize(value).map_err(|_| Rejected::default())
    }
}

impl Value for PathBuf {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        Ok(PathBuf::from(text))
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        String::deserialize(value)
            .map(PathBuf::from)
            .map_err(|_| Rejected::default())
    }
}

impl Value for u64 {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        text.trim().parse().map_err(|_| Rejected::default())
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        u64::deserialize(value).map_err(|_| Rejected::default())
    }
}

impl Value for usize {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        text.trim().parse().map_err(|_| Rejected::default())
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        usize::deserialize(value).map_err(|_| Rejected::default())
    }
}

impl Value for f64 {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        text.trim().parse().map_err(|_| Rejected::default())
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        f64::deserialize(value).map_err(|_| Rejected::default())
    }
}

impl Value for bool {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        text.trim().parse().map_err(|_| Rejected::default())
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        bool::deserialize(value).map_err(|_| Rejected::default())
    }
}

/// Durations are written as Prometheus writes them, in flags and in the file alike.
impl Value for Duration {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        parse_duration(text).ok_or_else(Rejected::default)
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        let text = String::deserialize(value).map_err(|_| Rejected::default())?;
        Self::from_text(&text)
    }
}

/// A check: the duration is above zero.
pub(crate) fn positive(d: &Duration) -> bool {
    !d.is_zero()
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

/// One of a few names, in flags and in the file alike.
pub(crate) fn choice<T: Copy>(text: &str, choices: &[(&str, T)]) -> Result<T, Rejected> {
    choices
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            reject(format!("{text:?} is not one of {}", names.join(", ")))
        })
}

/// A choice's value in the file: a string, read as the flag's text.
pub(crate) fn text_from_file<T: Value>(value: Json) -> Result<T, Rejected> {
    let text = String::deserialize(value).map_err(|_| Rejected::default())?;
    T::from_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_file_is_taken_apart_and_what_is_left_is_named() {
        let root: Map<String, Json> = serde_json::from_str(
            r#"{"web": {"a": 1, "b": null}, "otlp": {"tls": {"ca-file": "x", "ca-fil": "y"}}}"#,
        )
        .unwrap();
        let mut file = File::new(root);
        assert_eq!(file.take("web.a"), Some(Json::from(1)));
        assert_eq!(file.take("web.b"), None, "null is absent");
        assert_eq!(file.take("web.c"), None);
        assert_eq!(file.take("otlp.tls.ca-file"), Some(Json::from("x")));
        let err = file.finish().unwrap_err();
        assert_eq!(err.field, "otlp.tls.ca-fil");
        assert_eq!(err.reason, "unknown key (known: ca-file)");
    }

    #[test]
    fn an_unknown_section_names_the_known_ones() {
        let root: Map<String, Json> =
            serde_json::from_str(r#"{"colectors": {}, "webb": 1}"#).unwrap();
        let mut file = File::new(root);
        file.take("web.a");
        file.take("log.level");
        let err = file.finish().unwrap_err();
        assert_eq!(err.field, "colectors");
        assert_eq!(err.reason, "unknown key (known: log, web)");
    }
}
