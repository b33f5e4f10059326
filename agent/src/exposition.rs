//! Metric families and their text encodings: Prometheus text format 0.0.4 and OpenMetrics 1.0.
//!
//! Mapping builds a `Vec<Family>` from an already-collected snapshot; encoding only walks it.
//! The text is written by the `prometheus-client` crate: [`encode`] hands the families to it
//! as one [`Collector`] and encodes a [`Registry`] holding only that collector with the
//! crate's OpenMetrics (`encoding::text`) or 0.0.4 (`encoding::prometheus_text`) encoder.
//! Values go through the library's integer paths (`u64`, `i64`) where they are integers, so
//! they are printed exactly. A small wrapper here mends what the library leaves to its
//! callers or gets wrong: OpenMetrics help text is escaped before it is handed over, a name's
//! unit suffix is handed over as a [`Unit`], and OpenMetrics infinities are spelled `+Inf` and
//! `-Inf` (see [`spell_infinities`]).
//!
//! Each family is written exactly once, with all its samples together, so driver-provided
//! names (which only ever appear as label *values* here) can never produce a duplicate or an
//! invalid family.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric as _, LabelSetEncoder,
    prometheus_text, text,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

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

    /// The name samples carry, as the library writes it: `_total` after a counter's name,
    /// `_info` after an info family's.
    pub(crate) fn sample_name(&self) -> String {
        let suffix = match self.kind {
            MetricType::Gauge => "",
            MetricType::Counter => "_total",
            MetricType::Info => "_info",
        };
        [self.name, suffix].concat()
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

/// Encodes `families` in `format` through prometheus-client's [`Collector`] API (its
/// `text` encoder for OpenMetrics, `prometheus_text` for 0.0.4). Families without samples are
/// left out.
///
/// A registered collector must be `'static`, so the families are taken as an `Arc<[Family]>`
/// (a `Vec<Family>` converts without copying its samples).
pub(crate) fn encode(families: impl Into<Arc<[Family]>>, format: Format) -> String {
    let exposition = Arc::new(Exposition {
        families: families.into(),
        format,
        infinities: AtomicBool::new(false),
    });
    let mut out = String::with_capacity(
        exposition
            .families
            .iter()
            .map(|f| f.samples.len() * 96 + 128)
            .sum(),
    );
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Arc::clone(&exposition)));
    let encoded = match format {
        Format::Prometheus => prometheus_text::encode(&mut out, &registry),
        Format::OpenMetrics => text::encode(&mut out, &registry),
    };
    // Writing into a `String` cannot fail, and neither can `Exposition::encode`: every value
    // has an encoder.
    debug_assert!(encoded.is_ok(), "encoding failed");
    if exposition.infinities.load(Ordering::Relaxed) {
        out = spell_infinities(&out);
    }
    out
}

/// The families of one scrape as a prometheus-client [`Collector`].
#[derive(Debug)]
struct Exposition {
    families: Arc<[Family]>,
    format: Format,
    /// Whether an infinite value was written in OpenMetrics (see [`spell_infinities`]).
    infinities: AtomicBool,
}

/// The units the library knows by name; a family's name is handed over without its
/// `_<unit>` suffix, which the library appends again (in both formats), and OpenMetrics gets
/// its `# UNIT` line.
static BYTES: Unit = Unit::Bytes;
static SECONDS: Unit = Unit::Seconds;

impl Family {
    /// The name and unit to describe the family with: the name without the unit suffix (the
    /// library appends `_<unit>`), so the names written stay the family's own.
    fn descriptor(&self) -> (&'static str, Option<&'static Unit>) {
        let unit = match self.unit {
            Some("bytes") => &BYTES,
            Some("seconds") => &SECONDS,
            _ => return (self.name, None),
        };
        match self
            .name
            .strip_suffix(unit.as_str())
            .and_then(|stem| stem.strip_suffix('_'))
        {
            Some(stem) => (stem, Some(unit)),
            None => (self.name, None),
        }
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let openmetrics = self.format == Format::OpenMetrics;
        for family in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let (name, unit) = family.descriptor();
            // The library's OpenMetrics encoder writes help text as it is given; its 0.0.4
            // encoder escapes `\` and newline itself.
            let help = if openmetrics {
                escape_openmetrics_help(family.help)
            } else {
                std::borrow::Cow::Borrowed(family.help)
            };
            let kind = match family.kind {
                MetricType::Gauge => prometheus_client::metrics::MetricType::Gauge,
                MetricType::Counter => prometheus_client::metrics::MetricType::Counter,
                MetricType::Info => prometheus_client::metrics::MetricType::Info,
            };
            let mut metric = encoder.encode_descriptor(name, &help, unit, kind)?;
            for sample in &family.samples {
                let labels = LabelsRef(&sample.labels);
                if openmetrics && matches!(sample.value, Value::F64(v) if v.is_infinite()) {
                    self.infinities.store(true, Ordering::Relaxed);
                }
                match family.kind {
                    MetricType::Info => {
                        // The library writes an info sample's value, `1`, itself.
                        debug_assert!(
                            sample.value.as_f64() == 1.0,
                            "{}: info sample of value {:?}",
                            family.name,
                            sample.value
                        );
                        metric.encode_info(&labels)?;
                    }
                    MetricType::Counter => {
                        let metric = metric.encode_family(&labels)?;
                        match sample.value {
                            Value::U64(v) => ConstCounter::new(v).encode(metric)?,
                            Value::F64(v) => ConstCounter::new(v).encode(metric)?,
                            // The library has no signed counter value: a count is never
                            // negative, and a negative one would be invalid anyway.
                            Value::I64(v) => match u64::try_from(v) {
                                Ok(v) => ConstCounter::new(v).encode(metric)?,
                                Err(_) => ConstCounter::new(v as f64).encode(metric)?,
                            },
                        }
                    }
                    MetricType::Gauge => {
                        let metric = metric.encode_family(&labels)?;
                        match sample.value {
                            Value::U64(v) => ConstGauge::new(v).encode(metric)?,
                            Value::I64(v) => ConstGauge::new(v).encode(metric)?,
                            Value::F64(v) => ConstGauge::new(v).encode(metric)?,
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// A sample's labels as the library's label set, borrowed: no allocation per sample.
struct LabelsRef<'a>(&'a Labels);

impl EncodeLabelSet for LabelsRef<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> std::fmt::Result {
        for (name, value) in self.0 {
            // The library escapes `\`, `"` and newline in label values (both formats).
            EncodeLabel::encode(&(*name, value.as_str()), encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The library's OpenMetrics encoder formats floats with `dtoa`, which spells the
/// infinities `inf` and `-inf`. OpenMetrics reads those (its numbers are case-insensitive),
/// but its canonical spellings, what 0.0.4 and Prometheus's own clients write and what this
/// agent always wrote, are `+Inf` and `-Inf`: this puts them back, and runs only when an
/// infinite value was written. A sample line is `name{labels} value` with the value last,
/// and label values cannot hold a raw newline (the library escapes it), so a line not
/// starting with `#` that ends in ` inf` has an infinite value.
fn spell_infinities(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        if !line.starts_with('#') {
            if let Some(head) = line.strip_suffix(" inf\n") {
                out.push_str(head);
                out.push_str(" +Inf\n");
                continue;
            }
            if let Some(head) = line.strip_suffix(" -inf\n") {
                out.push_str(head);
                out.push_str(" -Inf\n");
                continue;
            }
        }
        out.push_str(line);
    }
    out
}

/// Escapes OpenMetrics help text, an escaped string like a label value: `\`, newline and
/// `"`. The library writes OpenMetrics help as it is given (its 0.0.4 encoder escapes `\`
/// and newline itself, and 0.0.4 keeps a `"` raw), so [`encode`] escapes it here first.
fn escape_openmetrics_help(help: &str) -> std::borrow::Cow<'_, str> {
    if !help.contains(['\\', '\n', '"']) {
        return std::borrow::Cow::Borrowed(help);
    }
    let mut out = String::with_capacity(help.len() + 8);
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
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
        let text = encode(families(), Format::Prometheus);
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
        let text = encode(families(), Format::OpenMetrics);
        assert_eq!(
            text,
            "# HELP railscope_ib_port_data_bytes Data bytes.\n\
             # TYPE railscope_ib_port_data_bytes counter\n\
             # UNIT railscope_ib_port_data_bytes bytes\n\
             railscope_ib_port_data_bytes_total{device=\"mlx5_0\",port=\"1\",direction=\"rx\"} 400\n\
             # HELP railscope_ib_device Device identity.\n\
             # TYPE railscope_ib_device info\n\
             railscope_ib_device_info{device=\"mlx5_0\",board_id=\"a \\\"b\\\" \\\\c\\nd\"} 1\n\
             # HELP railscope_up Up.\n\
             # TYPE railscope_up gauge\n\
             railscope_up 0.25\n\
             # EOF\n"
        );
    }

    #[test]
    fn nothing_to_encode() {
        let empty = vec![Family::gauge("railscope_empty", "Never written.")];
        assert_eq!(encode(empty.clone(), Format::Prometheus), "");
        assert_eq!(encode(empty, Format::OpenMetrics), "# EOF\n");
    }

    #[test]
    fn units_keep_the_names() {
        let mut wait = Family::gauge("railscope_scrape_wait_seconds", "Wait.");
        wait.push_unlabelled(2u64);
        let mut not_a_unit =
            Family::gauge("railscope_speed_bytes_per_second", "Not a unit suffix.");
        not_a_unit.push_unlabelled(3u64);
        let families = vec![wait, not_a_unit];
        assert_eq!(
            encode(families.clone(), Format::OpenMetrics),
            "# HELP railscope_scrape_wait_seconds Wait.\n\
             # TYPE railscope_scrape_wait_seconds gauge\n\
             # UNIT railscope_scrape_wait_seconds seconds\n\
             railscope_scrape_wait_seconds 2\n\
             # HELP railscope_speed_bytes_per_second Not a unit suffix.\n\
             # TYPE railscope_speed_bytes_per_second gauge\n\
             railscope_speed_bytes_per_second 3\n\
             # EOF\n"
        );
        assert_eq!(
            encode(families, Format::Prometheus),
            "# HELP railscope_scrape_wait_seconds Wait.\n\
             # TYPE railscope_scrape_wait_seconds gauge\n\
             railscope_scrape_wait_seconds 2\n\
             # HELP railscope_speed_bytes_per_second Not a unit suffix.\n\
             # TYPE railscope_speed_bytes_per_second gauge\n\
             railscope_speed_bytes_per_second 3\n"
        );
    }

    /// Help text is escaped by each format's rules: the library does 0.0.4, the wrapper
    /// OpenMetrics.
    #[test]
    fn help_escaping() {
        let mut family = Family::gauge("railscope_h", "a \\ \"b\"\nc");
        family.push_unlabelled(1u64);
        assert!(
            encode(vec![family.clone()], Format::Prometheus)
                .starts_with("# HELP railscope_h a \\\\ \"b\"\\nc\n# TYPE railscope_h gauge\n")
        );
        assert!(
            encode(vec![family], Format::OpenMetrics)
                .starts_with("# HELP railscope_h a \\\\ \\\"b\\\"\\nc\n# TYPE railscope_h gauge\n")
        );
    }

    /// The values of one gauge family, as written in `format`.
    fn written(values: &[Value], format: Format) -> Vec<String> {
        let mut family = Family::gauge("railscope_v", "V.");
        for v in values {
            family.push_unlabelled(*v);
        }
        encode(vec![family], format)
            .lines()
            .filter_map(|l| l.strip_prefix("railscope_v "))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn values() {
        let values = [
            Value::U64(u64::MAX),
            Value::U64(0),
            Value::U64(10),
            Value::I64(-1),
            Value::I64(i64::MIN),
            Value::F64(1e6),
            Value::F64(f64::NAN),
            Value::F64(f64::INFINITY),
            Value::F64(f64::NEG_INFINITY),
            Value::F64(0.0015),
            Value::F64(1e-12),
            Value::F64(-2.5),
        ];
        let want = [
            "18446744073709551615",
            "0",
            "10",
            "-1",
            "-9223372036854775808",
            "1000000.0",
            "NaN",
            "+Inf",
            "-Inf",
            "0.0015",
            "1e-12",
            "-2.5",
        ];
        for format in [Format::Prometheus, Format::OpenMetrics] {
            assert_eq!(written(&values, format), want, "{format:?}");
        }
    }

    #[test]
    fn counter_values() {
        let mut family = Family::counter("railscope_c", "C.");
        family.push_unlabelled(u64::MAX);
        family.push_unlabelled(7i64);
        family.push_unlabelled(-3i64);
        family.push_unlabelled(f64::INFINITY);
        family.push_unlabelled(1.5f64);
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let text = encode(vec![family.clone()], format);
            let got: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("railscope_c_total "))
                .collect();
            assert_eq!(
                got,
                ["18446744073709551615", "7", "-3.0", "+Inf", "1.5"],
                "{format:?}"
            );
        }
    }

    /// Only sample lines' values are respelled, not help text or label values that end like
    /// one.
    #[test]
    fn infinities_only_in_values() {
        let mut family = Family::gauge("railscope_i", "ends in inf");
        family.push([("a", "x inf")], f64::INFINITY);
        family.push([("a", "y\n -inf")], f64::NEG_INFINITY);
        family.push([("a", "z")], 1u64);
        assert_eq!(
            encode(vec![family], Format::OpenMetrics),
            "# HELP railscope_i ends in inf\n\
             # TYPE railscope_i gauge\n\
             railscope_i{a=\"x inf\"} +Inf\n\
             railscope_i{a=\"y\\n -inf\"} -Inf\n\
             railscope_i{a=\"z\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn numbers() {
        for n in [0u32, 7, 10, 127, 128, 4_000_000_000] {
            assert_eq!(Label::number(n).as_str(), n.to_string());
        }
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
