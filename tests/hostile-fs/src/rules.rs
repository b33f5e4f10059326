//! The rule file: which paths misbehave, and how.
//!
//! One rule a line, `PATTERN ACTION [ARGUMENT]`; blank lines and `#` comments are ignored.
//! `PATTERN` is a path relative to the mirrored tree with symlinks resolved (the path the
//! kernel walks to reach the file), where `*` and `?` match within one component and `**`
//! matches any number of components. A rule covers the paths its pattern matches and
//! everything under them. The first rule that covers a file decides what its open and read do;
//! `vanish` rules are checked separately and apply to any entry.

use std::time::Duration;

/// What a covered path does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `open-errno ERRNO`: opening a covered file fails with ERRNO; with ENODEV, reads of a
    /// file opened before fail too (kernfs deactivates the node: both fail).
    OpenErrno(i32),
    /// `read-errno ERRNO`: opening succeeds, reading fails with ERRNO (sysfs' EINVAL from a
    /// PMA counter, EIO from a dead firmware, ENODEV from a removed device).
    ReadErrno(i32),
    /// `block SECONDS`: the first read of each open sleeps this long, then returns the real
    /// content (a read stuck in a wedged driver). Other requests are served meanwhile.
    Block(Duration),
    /// `garbage`: reads return bytes that are neither UTF-8 nor a number.
    Garbage,
    /// `big BYTES`: reads return BYTES of text (the real content, repeated).
    Big(usize),
    /// `vanish`: the entry is still listed by its directory, but looking it up fails with
    /// ENOENT and reading an open file fails with ENODEV (a device removed between listing and
    /// reading). Directories, symlinks and files alike.
    Vanish,
}

/// One parsed rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The pattern's components.
    pattern: Vec<String>,
    /// What covered paths do.
    pub action: Action,
}

impl Rule {
    /// Whether the rule covers `path` (relative, `/`-separated): its pattern matches the path or
    /// one of its ancestors.
    pub fn covers(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        (1..=parts.len()).any(|n| glob_match(&self.pattern, &parts[..n]))
    }
}

/// A parsed rule file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// Parses a rule file; the error names the line and what is wrong with it.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let mut rules = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let fail = |why: &str| format!("line {}: {why}: {line}", n + 1);
            let (pattern, action, arg) = match words.as_slice() {
                [p, a] => (*p, *a, None),
                [p, a, x] => (*p, *a, Some(*x)),
                _ => return Err(fail("expected PATTERN ACTION [ARGUMENT]")),
            };
            let need = |what: &str| arg.ok_or_else(|| fail(&format!("{action} needs {what}")));
            let action = match action {
                "open-errno" => Action::OpenErrno(
                    parse_errno(need("an errno")?).ok_or_else(|| fail("unknown errno"))?,
                ),
                "read-errno" => Action::ReadErrno(
                    parse_errno(need("an errno")?).ok_or_else(|| fail("unknown errno"))?,
                ),
                "block" => Action::Block(Duration::from_secs_f64(
                    need("seconds")?
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .ok_or_else(|| fail("bad seconds"))?,
                )),
                "garbage" => Action::Garbage,
                "big" => Action::Big(
                    need("a size in bytes")?
                        .parse()
                        .map_err(|_| fail("bad size"))?,
                ),
                "vanish" => Action::Vanish,
                _ => return Err(fail("unknown action")),
            };
            if matches!(action, Action::Garbage | Action::Vanish) && arg.is_some() {
                return Err(fail("this action takes no argument"));
            }
            let pattern: Vec<String> = pattern
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect();
            if pattern.is_empty() {
                return Err(fail("empty pattern"));
            }
            rules.push(Rule { pattern, action });
        }
        Ok(Rules { rules })
    }

    /// Whether a `vanish` rule covers `path`.
    pub fn vanished(&self, path: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.action == Action::Vanish && r.covers(path))
    }

    /// The action of the first rule other than `vanish` that covers `path`.
    pub fn action(&self, path: &str) -> Option<&Action> {
        self.rules
            .iter()
            .find(|r| r.action != Action::Vanish && r.covers(path))
            .map(|r| &r.action)
    }
}

/// The errno a name (`EIO`) or number (`5`) stands for.
pub fn parse_errno(text: &str) -> Option<i32> {
    if let Ok(n) = text.parse::<i32>() {
        return (n > 0).then_some(n);
    }
    Some(match text {
        "EPERM" => 1,
        "ENOENT" => 2,
        "EINTR" => 4,
        "EIO" => 5,
        "ENXIO" => 6,
        "EAGAIN" => 11,
        "ENOMEM" => 12,
        "EACCES" => 13,
        "EBUSY" => 16,
        "ENODEV" => 19,
        "EINVAL" => 22,
        "EOPNOTSUPP" => 95,
        "ETIMEDOUT" => 110,
        _ => return None,
    })
}

/// Matches path components against pattern components: `**` spans any number of components,
/// `*` and `?` match within one.
fn glob_match(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| glob_match(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((name, path_rest)) => {
                component_match(first.as_bytes(), name.as_bytes()) && glob_match(rest, path_rest)
            }
            None => false,
        },
    }
}

fn component_match(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| component_match(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && component_match(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && component_match(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn patterns_cover_paths_and_everything_under_them() {
        let rules = Rules::parse(
            "# comment\n\
             **/infiniband/mlx5_4 open-errno EIO\n\
             devices/*/0000:?a:00.0/current_link_speed read-errno ENODEV  # trailing comment\n\
             class/infiniband/mlx5_3 vanish\n\
             **/mlx5_0/ports/1/state block 2.5\n",
        )
        .unwrap();
        let cx = "devices/pci0000:00/0000:00:01.0/0000:1a:00.0/infiniband/mlx5_4/ports/1/rate";
        assert_eq!(rules.action(cx), Some(&Action::OpenErrno(5)));
        assert_eq!(
            rules.action("devices/pci0000:00/0000:1a:00.0/current_link_speed"),
            Some(&Action::ReadErrno(19))
        );
        assert_eq!(
            rules.action("devices/pci0000:00/0000:1b:00.0/current_link_speed"),
            None
        );
        assert_eq!(
            rules.action("devices/x/infiniband/mlx5_40/ports/1/rate"),
            None
        );
        assert!(rules.vanished("class/infiniband/mlx5_3"));
        assert!(rules.vanished("class/infiniband/mlx5_3/ports/1/state"));
        assert!(!rules.vanished("class/infiniband/mlx5_30"));
        assert!(!rules.vanished("class/infiniband"));
        assert_eq!(
            rules.action("devices/p/infiniband/mlx5_0/ports/1/state"),
            Some(&Action::Block(Duration::from_millis(2500)))
        );
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, why) in [
            ("a/b frobnicate", "line 1: unknown action"),
            ("\na/b open-errno", "line 2: open-errno needs an errno"),
            ("a/b read-errno EWHAT", "unknown errno"),
            ("a/b block -1", "bad seconds"),
            ("a/b big lots", "bad size"),
            ("a/b garbage 3", "takes no argument"),
            ("a/b big 1 2", "expected PATTERN"),
        ] {
            let err = Rules::parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
        assert_eq!(Rules::parse("").unwrap(), Rules::default());
        assert_eq!(
            Rules::parse("x big 1048576").unwrap().action("x/y"),
            Some(&Action::Big(1 << 20))
        );
    }
}
