//! Metric families and their text encodings: Prometheus text format 0.0.4 and OpenMetrics 1.0.
//!
//! Mapping builds a `Vec<Family>` from an already-collected snapshot; encoding only walks it.
//! Each family is written exactly once, with all its samples together, so driver-provided
//! names (which only ever appear as label *values* here) can never produce a duplicate or an
//! invalid family.

use std::fmt::Write as _;
use std::sync::Arc;

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricType {
    /// A value that goes up and down.
    Gauge,
    /// A monotonically increasing count; samples are named `<family>_total`.
    Counter,
    /// A constant `1` whose labels describe a thing; samples are named `<family>_info`.
    Info,
}

/// A sample value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// An integer, printed exactly.
    U64(u64),
    /// A signed integer, printed exactly.
    I64(i64),
    /// A float.
    F64(f64),
}

impl Value {
    /// The value as a float (what a scraper reads).
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Value::U64(v) => v as f64,
            Value::I64(v) => v as f64,
            Value::F64(v) => v,
        }
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::U64(u64::from(v))
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::U64(u64::from(v))
    }
}

/// A label value: owned, or shared between the samples of one thing (a port's `device` and
/// `port` labels are on every one of its samples, and sharing them saves two allocations per
/// sample).
#[derive(Clone)]
pub(crate) enum Label {
    /// A value of its own.
    Owned(String),
    /// A value shared with other samples.
    Shared(Arc<str>),
    /// A value known when the agent was built.
    Static(&'static str),
}

impl Label {
    /// A value to share between samples.
    pub(crate) fn shared(value: &str) -> Self {
        Label::Shared(Arc::from(value))
    }

    /// The value.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Label::Owned(s) => s,
            Label::Shared(s) => s,
            Label::Static(s) => s,
        }
    }
}

/// The decimal spelling of 0 to 127, for numbers that label series (GPU indexes, links,
/// ports) without an allocation each.
const SMALL_NUMBERS: [&str; 128] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32",
    "33", "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46", "47", "48",
    "49", "50", "51", "52", "53", "54", "55", "56", "57", "58", "59", "60", "61", "62", "63", "64",
    "65", "66", "67", "68", "69", "70", "71", "72", "73", "74", "75", "76", "77", "78", "79", "80",
    "81", "82", "83", "84", "85", "86", "87", "88", "89", "90", "91", "92", "93", "94", "95", "96",
    "97", "98", "99", "100", "101", "102", "103", "104", "105", "106", "107", "108", "109", "110",
    "111", "112", "113", "114", "115", "116", "117", "118", "119", "120", "121", "122", "123",
    "124", "125", "126", "127",
];

impl Label {
    /// `n` in decimal.
    pub(crate) fn number(n: u32) -> Self {
        match SMALL_NUMBERS.get(n as usize) {
            Some(s) => Label::Static(s),
            None => Label::Owned(n.to_string()),
        }
    }
}

impl std::ops::Deref for Label {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<str> for Label {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Label {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Label {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<String> for Label {
    fn from(value: String) -> Self {
        Label::Owned(value)
    }
}

impl From<&str> for Label {
    fn from(value: &str) -> Self {
        Label::Owned(value.to_owned())
    }
}

/// A series' label names and values, in output order. Most series have four labels or fewer,
/// which are held in place: a sample costs no allocation of its own.
pub(crate) type Labels = smallvec::SmallVec<[(&'static str, Label); 4]>;

/// One series: label pairs and a value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    /// Label names and values, in output order.
    pub(crate) labels: Labels,
    /// The value.
    pub(crate) value: Value,
}

/// A metric family: one name, help text and type, and its samples.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Family {
    /// The family name; without `_total` for counters and without `_info` for info metrics.
    pub(crate) name: &'static str,
    /// One sentence of help.
    pub(crate) help: &'static str,
    /// The family's type.
    pub(crate) kind: MetricType,
    /// The unit the name ends with (`bytes`, `seconds`), declared in OpenMetrics.
    pub(crate) unit: Option<&'static str>,
    /// The samples.
    pub(crate) samples: Vec<Sample>,
}

impl Family {
    /// An empty gauge family.
    pub(crate) fn gauge(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            kind: MetricType::Gauge,
            unit: unit_of(name),
            samples: Vec::new(),
        }
    }

    /// An empty counter family (`name` without `_total`).
    pub(crate) fn counter(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            kind: MetricType::Counter,
            unit: unit_of(name),
            samples: Vec::new(),
        }
    }

    /// An empty info family (`name` without `_info`).
    pub(crate) fn info(name: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            kind: MetricType::Info,
            unit: None,
            samples: Vec::new(),
        }
    }

    /// Adds a sample.
    pub(crate) fn push<L: Into<Label>>(
        &mut self,
        labels: impl IntoIterator<Item = (&'static str, L)>,
        value: impl Into<Value>,
    ) {
        self.samples.push(Sample {
            labels: labels.into_iter().map(|(k, v)| (k, v.into())).collect(),
            value: value.into(),
        });
    }

    /// Makes room for `n` more samples (a family whose size is known grows once, not by
    /// doubling: its samples hold their labels in place).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.samples.reserve(n);
    }

    /// Adds a sample without labels.
    pub(crate) fn push_unlabelled(&mut self, value: impl Into<Value>) {
        self.samples.push(Sample {
            labels: Labels::new(),
            value: value.into(),
        });
    }

    /// The name samples carry.
    pub(crate) fn sample_name(&self) -> String {
        let mut name = String::new();
        self.write_sample_name(&mut name);
        name
    }

    /// Writes the name samples carry.
    fn write_sample_name(&self, out: &mut String) {
        out.push_str(self.name);
        out.push_str(match self.kind {
            MetricType::Gauge => "",
            MetricType::Counter => "_total",
            MetricType::Info => "_info",
        });
    }
}

fn unit_of(name: &str) -> Option<&'static str> {
    ["bytes", "seconds"].into_iter().find(|unit| {
        name.strip_suffix(unit)
            .is_some_and(|rest| rest.ends_with('_'))
    })
}

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// The HTTP `Content-Type` of the format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// Chooses the format from an `Accept` header: OpenMetrics when the scraper accepts it
    /// with a non-zero quality, the classic text format otherwise.
    pub(crate) fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            if !media.eq_ignore_ascii_case("application/openmetrics-text") {
                continue;
            }
            let mut quality = 1.0f64;
            let mut version_ok = true;
            for param in parts {
                if let Some((key, value)) = param.split_once('=') {
                    match key.trim() {
                        "q" => quality = value.trim().parse().unwrap_or(0.0),
                        "version" => version_ok = matches!(value.trim(), "1.0.0" | "0.0.1"),
                        _ => {}
                    }
                }
            }
            if quality > 0.0 && version_ok {
                return Format::OpenMetrics;
            }
        }
        Format::Prometheus
    }
}

/// Encodes `families` in `format`. Families without samples are left out.
pub(crate) fn encode(families: &[Family], format: Format) -> String {
    let mut out = String::with_capacity(families.iter().map(|f| f.samples.len() * 96 + 128).sum());
    let mut sample_name = String::with_capacity(96);
    for family in families.iter().filter(|f| !f.samples.is_empty()) {
        sample_name.clear();
        family.write_sample_name(&mut sample_name);
        let (header_name, kind) = match (format, family.kind) {
            (Format::Prometheus, MetricType::Gauge) => (sample_name.as_str(), "gauge"),
            (Format::Prometheus, MetricType::Counter) => (sample_name.as_str(), "counter"),
            (Format::Prometheus, MetricType::Info) => (sample_name.as_str(), "gauge"),
            (Format::OpenMetrics, MetricType::Gauge) => (family.name, "gauge"),
            (Format::OpenMetrics, MetricType::Counter) => (family.name, "counter"),
            (Format::OpenMetrics, MetricType::Info) => (family.name, "info"),
        };
        let _ = writeln!(
            out,
            "# HELP {header_name} {}",
            escape_help(family.help, format)
        );
        let _ = writeln!(out, "# TYPE {header_name} {kind}");
        if let (Format::OpenMetrics, Some(unit)) = (format, family.unit) {
            let _ = writeln!(out, "# UNIT {header_name} {unit}");
        }
        for sample in &family.samples {
            out.push_str(&sample_name);
            if !sample.labels.is_empty() {
                out.push('{');
                for (i, (name, value)) in sample.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(name);
                    out.push_str("=\"");
                    escape_label_value(&mut out, value);
                    out.push('"');
                }
                out.push('}');
            }
            out.push(' ');
            write_value(&mut out, sample.value);
            out.push('\n');
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// Escapes help text: `\` and newline in both formats; OpenMetrics writes help as an
/// escaped string like a label value, so `"` is escaped there too (text 0.0.4 would keep a
/// `\"` literally).
pub(crate) fn escape_help(help: &str, format: Format) -> std::borrow::Cow<'_, str> {
    let special: &[char] = match format {
        Format::Prometheus => &['\\', '\n'],
        Format::OpenMetrics => &['\\', '\n', '"'],
    };
    if !help.contains(special) {
        return std::borrow::Cow::Borrowed(help);
    }
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    std::borrow::Cow::Owned(match format {
        Format::Prometheus => help,
        Format::OpenMetrics => help.replace('"', "\\\""),
    })
}

/// Escapes a label value as both formats require: `\`, `"` and newline.
fn escape_label_value(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Writes `v` in decimal, without the formatting machinery (most samples are counters).
fn write_u64(out: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

fn write_value(out: &mut String, value: Value) {
    let _ = match value {
        Value::U64(v) => {
            write_u64(out, v);
            Ok(())
        }
        Value::I64(v) => write!(out, "{v}"),
        Value::F64(v) if v.is_nan() => write!(out, "NaN"),
        Value::F64(v) if v == f64::INFINITY => write!(out, "+Inf"),
        Value::F64(v) if v == f64::NEG_INFINITY => write!(out, "-Inf"),
        Value::F64(v) => write!(out, "{v}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut data = Family::counter("railscope_ib_port_data_bytes", "Data bytes.");
        data.push(
            vec![
                ("device", "mlx5_0".to_owned()),
                ("port", "1".to_owned()),
                ("direction", "rx".to_owned()),
            ],
            400u64,
        );
        let mut info = Family::info("railscope_ib_device", "Device identity.");
        info.push(
            vec![
                ("device", "mlx5_0".to_owned()),
                ("board_id", "a \"b\" \\c\nd".to_owned()),
            ],
            1u64,
        );
        let mut up = Family::gauge("railscope_up", "Up.");
        up.push_unlabelled(0.25f64);
        let empty = Family::gauge("railscope_empty", "Never written.");
        vec![data, info, up, empty]
    }

    #[test]
    fn prometheus_text() {
        let text = encode(&families(), Format::Prometheus);
        assert_eq!(
            text,
            "# HELP railscope_ib_port_data_bytes_total Data bytes.\n\
             # TYPE railscope_ib_port_data_bytes_total counter\n\
             railscope_ib_port_data_bytes_total{device=\"mlx5_0\",port=\"1\",direction=\"rx\"} 400\n\
             # HELP railscope_ib_device_info Device identity.\n\
             # TYPE railscope_ib_device_info gauge\n\
             railscope_ib_device_info{device=\"mlx5_0\",board_id=\"a \\\"b\\\" \\\\c\\nd\"} 1\n\
             # HELP railscope_up Up.\n\
             # TYPE railscope_up gauge\n\
             railscope_up 0.25\n"
        );
    }

    #[test]
    fn openmetrics_text() {
        let text = encode(&families(), Format::OpenMetrics);
        assert!(text.starts_with(
            "# HELP railscope_ib_port_data_bytes Data bytes.\n\
             # TYPE railscope_ib_port_data_bytes counter\n\
             # UNIT railscope_ib_port_data_bytes bytes\n\
             railscope_ib_port_data_bytes_total{"
        ));
        assert!(text.contains("# TYPE railscope_ib_device info\nrailscope_ib_device_info{"));
        assert!(text.ends_with("railscope_up 0.25\n# EOF\n"));
    }

    #[test]
    fn numbers() {
        for n in [0u32, 7, 10, 127, 128, 4_000_000_000] {
            assert_eq!(Label::number(n).as_str(), n.to_string());
        }
    }

    #[test]
    fn values() {
        let mut out = String::new();
        for v in [
            Value::U64(u64::MAX),
            Value::U64(0),
            Value::U64(10),
            Value::I64(-1),
            Value::F64(1e6),
            Value::F64(f64::NAN),
            Value::F64(f64::INFINITY),
            Value::F64(0.0015),
        ] {
            write_value(&mut out, v);
            out.push(' ');
        }
        assert_eq!(out, "18446744073709551615 0 10 -1 1000000 NaN +Inf 0.0015 ");
    }

    #[test]
    fn negotiation() {
        let prometheus_2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus_2)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Prometheus
        );
        assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text; q=0")),
            Format::Prometheus
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;version=2.0.0")),
            Format::Prometheus
        );
        assert_eq!(Format::negotiate(None), Format::Prometheus);
    }
}
