//! Facts: the samples the checks read, whichever way they came. A local run maps one
//! collection to families exactly as a scrape does; `--from` parses a running agent's
//! exposition. Both end as the same [`Facts`], so one set of checks serves both inputs and
//! no check reads a file.

use std::collections::BTreeMap;

use crate::exposition::Family;

/// One sample: the metric name as exposed (counters with `_total`), its labels, its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: f64,
}

impl Sample {
    /// The label's value, empty when absent (as PromQL sees it).
    pub(crate) fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }
}

/// Every sample of one collection or one scrape.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    samples: Vec<Sample>,
}

/// A line of an exposition that is not a sample, a comment or blank.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: not a sample: {text}")]
pub(crate) struct NotASample {
    /// Its line number, from 1.
    pub(crate) line: usize,
    /// The line, cut at 120 characters.
    pub(crate) text: String,
}

impl Facts {
    /// The samples of `families`, named as the exposition names them.
    pub(crate) fn from_families(families: &[Family]) -> Self {
        let mut samples = Vec::new();
        for family in families {
            let name = family.sample_name();
            for s in &family.samples {
                let value = s.value.as_f64();
                samples.push(Sample {
                    name: name.clone(),
                    labels: s
                        .labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.as_str().to_owned()))
                        .collect(),
                    value,
                });
            }
        }
        Facts { samples }
    }

    /// Parses the Prometheus text format (0.0.4) or OpenMetrics: sample lines only; comments,
    /// `# EOF` and timestamps are ignored. A line that does not parse is an error naming it.
    pub(crate) fn parse_text(text: &str) -> Result<Self, NotASample> {
        let mut samples = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_line(line).ok_or_else(|| NotASample {
                line: n + 1,
                text: truncate(line, 120),
            })?);
        }
        Ok(Facts { samples })
    }

    /// Every sample named `name`.
    pub(crate) fn all<'a, 'b>(&'a self, name: &'b str) -> impl Iterator<Item = &'a Sample> + 'b
    where
        'a: 'b,
    {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The samples named `name` whose labels include every pair of `labels`.
    pub(crate) fn matching<'a, 'b>(
        &'a self,
        name: &'b str,
        labels: &'b [(&'b str, &'b str)],
    ) -> impl Iterator<Item = &'a Sample> + 'b
    where
        'a: 'b,
    {
        self.all(name)
            .filter(move |s| labels.iter().all(|(k, v)| s.label(k) == *v))
    }

    /// The value of the first sample named `name` with `labels`.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels).next().map(|s| s.value)
    }

    /// Whether any sample is named `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.all(name).next().is_some()
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// `name{a="b",c="d"} value [timestamp]`.
fn parse_line(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    if name.is_empty() {
        return None;
    }
    let mut labels = BTreeMap::new();
    let rest = if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let end;
        loop {
            // Skip separators.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || *c == ' ' {
                    chars.next();
                } else {
                    break;
                }
            }
            let (start, c) = *chars.peek()?;
            if c == '}' {
                end = start + 1;
                break;
            }
            let eq = body[start..].find('=')? + start;
            let key = body[start..eq].trim().to_owned();
            while let Some((i, _)) = chars.peek() {
                if *i <= eq {
                    chars.next();
                } else {
                    break;
                }
            }
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        other => {
                            value.push('\\');
                            value.push(other);
                        }
                    },
                    c => value.push(c),
                }
            }
            labels.insert(key, value);
        }
        &body[end..]
    } else {
        rest
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let facts = Facts::parse_text(
            "# HELP x y\n# TYPE x gauge\nx{a=\"1\",b=\"q\\\"uote\\\\ and\\nline\"} 2.5\nup 1 1700000000000\nm{l=\"v\"} +Inf\n# EOF\n",
        )
        .unwrap();
        let x = facts.all("x").next().unwrap();
        assert_eq!(x.label("a"), "1");
        assert_eq!(x.label("b"), "q\"uote\\ and\nline");
        assert_eq!(x.value, 2.5);
        assert_eq!(facts.value("up", &[]), Some(1.0));
        assert_eq!(facts.value("m", &[("l", "v")]), Some(f64::INFINITY));
        assert!(Facts::parse_text("x{a=\"1\" 2\n").is_err());
        assert!(Facts::parse_text("x{a=\"1\"} two\n").is_err());
    }
}
