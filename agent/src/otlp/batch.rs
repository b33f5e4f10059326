//! Metric families → one OTLP batch, through the OpenTelemetry SDK.
//!
//! Each family is an observable instrument whose callback reads the families of the batch
//! being made. The agent collects through a [`ManualReader`] when it has a collection (not
//! on the SDK's own timer), so a batch holds one collection at the time it was made, and
//! the queue ([`super::queue`]) can keep it until the endpoint takes it.
//!
//! * Counters are monotonic cumulative sums named as the family without `_total`
//!   (Prometheus' OTLP translation adds `_total` back); gauges are gauges.
//! * Info families are gauges valued 1 named `<family>_info` with the identity as
//!   attributes, the same series the exposition has, so joins written for one work on the
//!   other.
//! * Integers stay integers: a family whose samples are all integers is an integer
//!   instrument (`as_int` on the wire), else a double one.
//! * Units follow UCUM from the name's suffix (`By`, `s`, `1`, `Cel`, `W`, `J`, `Hz`,
//!   `By/s`).
//! * Instruments appear the first time a family does and stay registered; a series (or a
//!   whole family) absent from a collection is absent from its batch.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter, MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    InstrumentKind, ManualReader, Pipeline, SdkMeterProvider, Stream, Temporality,
};

use super::semconv::{self, Instrument, Rule};
use crate::exposition::{Family, Label, MetricType, Value};

/// The least number of series an instrument is made for.
const MIN_CARDINALITY: usize = 64;

/// How much an instrument's series may grow before the pipeline is made again.
const CARDINALITY_HEADROOM: usize = 4;

/// The number type of an instrument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Number {
    U64,
    I64,
    F64,
}

/// What a registered instrument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    instrument: Instrument,
    number: Number,
}

/// The families of the batch being made, grouped by instrument name.
#[derive(Default)]
struct Current {
    families: Vec<Family>,
    by_name: HashMap<Cow<'static, str>, Vec<usize>>,
}

type Slot = Arc<Mutex<Option<Arc<Current>>>>;

/// Series each instrument is made for, by name: the SDK sizes an instrument's table for its
/// cardinality limit up front (its default, 2,000, is too few for an ethtool family on a
/// large node, and one limit for all would cost memory for every small family).
type Limits = Arc<Mutex<HashMap<String, usize>>>;

/// Makes batches; owns the SDK pipeline.
pub(crate) struct Batcher {
    resource: Resource,
    provider: SdkMeterProvider,
    reader: Arc<ManualReader>,
    meter: Meter,
    limits: Limits,
    current: Slot,
    registered: HashMap<Cow<'static, str>, Shape>,
    semconv: bool,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("instruments", &self.registered.len())
            .field("semconv", &self.semconv)
            .finish_non_exhaustive()
    }
}

/// Lets the agent keep a handle on the reader the provider owns.
#[derive(Debug)]
struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl Batcher {
    /// A pipeline for `resource`; `semconv` pushes the families of [`semconv::RULES`] under
    /// the conventions' names.
    pub(crate) fn new(resource: Resource, semconv: bool) -> Self {
        let limits = Limits::default();
        let (provider, reader, meter) = pipeline(resource.clone(), Arc::clone(&limits));
        Batcher {
            resource,
            provider,
            reader,
            meter,
            limits,
            current: Arc::new(Mutex::new(None)),
            registered: HashMap::new(),
            semconv,
        }
    }

    /// Makes the pipeline again, with no instruments: when a family outgrew the series its
    /// instrument was made for. Cumulative sums then start a new series start time; their
    /// values are the counters' own and do not change.
    fn rebuild(&mut self) {
        let _ = self.provider.shutdown();
        lock(&self.limits).clear();
        let (provider, reader, meter) = pipeline(self.resource.clone(), Arc::clone(&self.limits));
        self.provider = provider;
        self.reader = reader;
        self.meter = meter;
        self.registered.clear();
    }

    /// The batch of `families`, stamped now.
    pub(crate) fn batch(
        &mut self,
        families: Vec<Family>,
    ) -> Result<ResourceMetrics, opentelemetry_sdk::error::OTelSdkError> {
        let mut current = Current {
            families,
            by_name: HashMap::new(),
        };
        for (index, family) in current.families.iter().enumerate() {
            if family.samples.is_empty() {
                continue;
            }
            let name = self.name_of(family);
            current.by_name.entry(name).or_default().push(index);
        }
        let outgrown = current.by_name.iter().any(|(name, indices)| {
            let series: usize = indices
                .iter()
                .map(|&i| current.families[i].samples.len())
                .sum();
            self.registered.contains_key(name)
                && lock(&self.limits)
                    .get(name.as_ref())
                    .is_some_and(|&limit| series > limit)
        });
        if outgrown {
            tracing::debug!(
                "A metric family outgrew its OTLP instrument; making the pipeline again."
            );
            self.rebuild();
        }
        let pending: Vec<(Cow<'static, str>, Shape, &'static str, Cow<'static, str>)> = current
            .by_name
            .iter()
            .filter(|(name, _)| !self.registered.contains_key(*name))
            .map(|(name, indices)| {
                let group: Vec<&Family> = indices.iter().map(|&i| &current.families[i]).collect();
                let (unit, description) = self.unit_and_description(group[0]);
                let series: usize = group.iter().map(|f| f.samples.len()).sum();
                lock(&self.limits).insert(
                    name.to_string(),
                    (series * CARDINALITY_HEADROOM).max(MIN_CARDINALITY),
                );
                (name.clone(), self.shape_of(&group), description, unit)
            })
            .collect();
        for (name, shape, description, unit) in pending {
            self.register(name, shape, description, unit);
        }
        *lock(&self.current) = Some(Arc::new(current));
        let mut rm = ResourceMetrics::default();
        let result = self.reader.collect(&mut rm);
        *lock(&self.current) = None;
        result.map(|()| rm)
    }

    fn name_of(&self, family: &Family) -> Cow<'static, str> {
        if let Some(rule) = self.rule(family) {
            return Cow::Borrowed(rule.name);
        }
        match family.kind {
            MetricType::Info => Cow::Owned(family.sample_name()),
            MetricType::Gauge | MetricType::Counter => Cow::Borrowed(family.name),
        }
    }

    fn rule(&self, family: &Family) -> Option<&'static Rule> {
        if self.semconv {
            semconv::rule(family.name)
        } else {
            None
        }
    }

    fn unit_and_description(&self, family: &Family) -> (Cow<'static, str>, &'static str) {
        match self.rule(family) {
            Some(rule) => (Cow::Borrowed(rule.unit), rule.description),
            None => (Cow::Borrowed(unit(family.name)), family.help),
        }
    }

    fn shape_of(&self, group: &[&Family]) -> Shape {
        let instrument = match (self.rule(group[0]), group[0].kind) {
            (Some(rule), _) => rule.instrument,
            (None, MetricType::Counter) => Instrument::Counter,
            (None, MetricType::Gauge | MetricType::Info) => Instrument::Gauge,
        };
        let values = group.iter().flat_map(|f| f.samples.iter().map(|s| s.value));
        let mut number = Number::U64;
        for value in values {
            number = match (number, value) {
                (_, Value::F64(_)) | (Number::F64, _) => Number::F64,
                (_, Value::I64(_)) | (Number::I64, _) => Number::I64,
                (Number::U64, Value::U64(_)) => Number::U64,
            };
        }
        // The API has no signed counter; up-down counters have no unsigned one.
        number = match (instrument, number) {
            (Instrument::Counter, Number::I64) => Number::F64,
            (Instrument::UpDownCounter, Number::U64) => Number::I64,
            (_, n) => n,
        };
        Shape { instrument, number }
    }

    fn register(
        &mut self,
        name: Cow<'static, str>,
        shape: Shape,
        description: &'static str,
        unit: Cow<'static, str>,
    ) {
        let meter = &self.meter;
        macro_rules! build {
            ($method:ident, $convert:expr) => {{
                let observe = observer(
                    Arc::clone(&self.current),
                    name.clone(),
                    self.semconv,
                    $convert,
                );
                // The SDK keeps the callback; the handle is not needed.
                let _ = meter
                    .$method(name.clone())
                    .with_description(description)
                    .with_unit(unit)
                    .with_callback(move |o| observe(o))
                    .build();
            }};
        }
        match (shape.instrument, shape.number) {
            (Instrument::Counter, Number::U64) => build!(u64_observable_counter, as_u64),
            (Instrument::Counter, _) => build!(f64_observable_counter, as_f64),
            (Instrument::UpDownCounter, Number::F64) => {
                build!(f64_observable_up_down_counter, as_f64)
            }
            (Instrument::UpDownCounter, _) => build!(i64_observable_up_down_counter, as_i64),
            (Instrument::Gauge, Number::U64) => build!(u64_observable_gauge, as_u64),
            (Instrument::Gauge, Number::I64) => build!(i64_observable_gauge, as_i64),
            (Instrument::Gauge, Number::F64) => build!(f64_observable_gauge, as_f64),
        }
        self.registered.insert(name, shape);
    }

    /// Releases the SDK pipeline.
    pub(crate) fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

/// The SDK pipeline: a manual reader the agent keeps a handle on, and a view that gives
/// each instrument the cardinality limit in `limits`.
fn pipeline(resource: Resource, limits: Limits) -> (SdkMeterProvider, Arc<ManualReader>, Meter) {
    let reader = Arc::new(
        ManualReader::builder()
            .with_temporality(Temporality::Cumulative)
            .build(),
    );
    let provider = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_reader(SharedReader(Arc::clone(&reader)))
        .with_view(move |instrument: &opentelemetry_sdk::metrics::Instrument| {
            let limit = lock(&limits)
                .get(instrument.name())
                .copied()
                .unwrap_or(MIN_CARDINALITY);
            Stream::builder().with_cardinality_limit(limit).build().ok()
        })
        .build();
    let meter = provider.meter("railscope");
    (provider, reader, meter)
}

fn as_u64(v: Value) -> u64 {
    match v {
        Value::U64(v) => v,
        Value::I64(v) => u64::try_from(v).unwrap_or(0),
        // Saturating, as `as` is for floats.
        Value::F64(v) => v as u64,
    }
}

fn as_i64(v: Value) -> i64 {
    match v {
        Value::U64(v) => i64::try_from(v).unwrap_or(i64::MAX),
        Value::I64(v) => v,
        Value::F64(v) => v as i64,
    }
}

fn as_f64(v: Value) -> f64 {
    v.as_f64()
}

/// The callback of instrument `name`: observes every sample of its families in the batch
/// being made.
fn observer<T: 'static>(
    current: Slot,
    name: Cow<'static, str>,
    semconv: bool,
    convert: fn(Value) -> T,
) -> impl Fn(&dyn AsyncInstrument<T>) + Send + Sync + 'static {
    move |instrument| {
        let Some(current) = lock(&current).clone() else {
            return;
        };
        let Some(indices) = current.by_name.get(&name) else {
            return;
        };
        let mut attributes = Vec::with_capacity(8);
        for &index in indices {
            let family = &current.families[index];
            let rule = if semconv {
                semconv::rule(family.name)
            } else {
                None
            };
            for sample in &family.samples {
                attributes.clear();
                match rule {
                    Some(rule) => semconv_attributes(rule, &sample.labels, &mut attributes),
                    None => attributes.extend(
                        sample
                            .labels
                            .iter()
                            .map(|(k, v)| KeyValue::new(*k, string(v))),
                    ),
                }
                instrument.observe(convert(sample.value), &attributes);
            }
        }
    }
}

fn semconv_attributes(rule: &Rule, labels: &[(&'static str, Label)], out: &mut Vec<KeyValue>) {
    out.push(KeyValue::new("hw.type", rule.hw_type));
    for (key, value) in labels {
        if *key == rule.id_label {
            out.push(KeyValue::new("hw.id", string(value)));
        }
        match rule.renames.iter().find(|(from, _)| from == key) {
            Some((_, to)) => out.push(KeyValue::new(*to, semconv::value(to, value).to_owned())),
            None => out.push(KeyValue::new(*key, string(value))),
        }
    }
    out.extend(rule.extra.iter().map(|(k, v)| KeyValue::new(*k, *v)));
}

/// A label value as an attribute value, without a copy where the value is shared.
fn string(label: &Label) -> opentelemetry::Value {
    match label {
        Label::Owned(s) => opentelemetry::Value::from(s.clone()),
        Label::Shared(s) => opentelemetry::Value::String(Arc::clone(s).into()),
        Label::Static(s) => opentelemetry::Value::from(*s),
    }
}

/// The UCUM unit of a family from its name's suffix; empty when it has none.
fn unit(name: &str) -> &'static str {
    const SUFFIXES: &[(&str, &str)] = &[
        ("_bytes_per_second", "By/s"),
        ("_bytes", "By"),
        ("_seconds", "s"),
        ("_ratio", "1"),
        ("_celsius", "Cel"),
        ("_watts", "W"),
        ("_joules", "J"),
        ("_hertz", "Hz"),
    ];
    SUFFIXES
        .iter()
        .find(|(suffix, _)| name.ends_with(suffix))
        .map_or("", |(_, unit)| unit)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};

    fn families() -> Vec<Family> {
        let mut bytes = Family::counter("railscope_netdev_bytes", "Bytes.");
        bytes.push([("netdev", "eth0"), ("direction", "rx")], u64::MAX - 1);
        bytes.push([("netdev", "eth0"), ("direction", "tx")], 7u64);
        let mut ratio = Family::gauge("railscope_gpu_utilization_ratio", "Busy.");
        ratio.push([("gpu", "0")], 0.25f64);
        let mut info = Family::info("railscope_gpu", "Identity.");
        info.push([("gpu", "0"), ("uuid", "GPU-1")], 1u64);
        vec![
            bytes,
            ratio,
            info,
            Family::gauge("railscope_empty", "None."),
        ]
    }

    /// Attributes (`k=v,...`, sorted) and the value as text.
    type Points = Vec<(String, String)>;

    /// (name, unit, points) of every metric in `rm`.
    fn flatten(rm: &ResourceMetrics) -> Vec<(String, String, Points)> {
        let mut out = Vec::new();
        for scope in rm.scope_metrics() {
            for metric in scope.metrics() {
                let mut points = Vec::new();
                macro_rules! points {
                    ($data:expr) => {
                        match $data {
                            MetricData::Sum(sum) => {
                                for p in sum.data_points() {
                                    points
                                        .push((attrs(p.attributes()), format!("{:?}", p.value())));
                                }
                            }
                            MetricData::Gauge(gauge) => {
                                for p in gauge.data_points() {
                                    points
                                        .push((attrs(p.attributes()), format!("{:?}", p.value())));
                                }
                            }
                            _ => panic!("unexpected aggregation"),
                        }
                    };
                }
                match metric.data() {
                    AggregatedMetrics::U64(d) => points!(d),
                    AggregatedMetrics::I64(d) => points!(d),
                    AggregatedMetrics::F64(d) => points!(d),
                }
                points.sort();
                out.push((metric.name().to_owned(), metric.unit().to_owned(), points));
            }
        }
        out.sort();
        out
    }

    fn attrs<'a>(it: impl Iterator<Item = &'a KeyValue>) -> String {
        let mut v: Vec<String> = it.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
        v.sort();
        v.join(",")
    }

    #[test]
    fn railscope_names() {
        let mut batcher = Batcher::new(Resource::builder_empty().build(), false);
        let rm = batcher.batch(families()).unwrap();
        let flat = flatten(&rm);
        let names: Vec<&str> = flat.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "railscope_gpu_info",
                "railscope_gpu_utilization_ratio",
                "railscope_netdev_bytes"
            ]
        );
        assert_eq!(flat[0].2, [("gpu=0,uuid=GPU-1".to_owned(), "1".to_owned())]);
        assert_eq!(flat[1].1, "1");
        assert_eq!(flat[1].2, [("gpu=0".to_owned(), "0.25".to_owned())]);
        assert_eq!(flat[2].1, "By");
        assert_eq!(
            flat[2].2,
            [
                (
                    "direction=rx,netdev=eth0".to_owned(),
                    (u64::MAX - 1).to_string()
                ),
                ("direction=tx,netdev=eth0".to_owned(), "7".to_owned())
            ]
        );
        // A series gone from the next collection is gone from its batch.
        let mut next = families();
        next[0].samples.truncate(1);
        next.remove(1);
        let flat = flatten(&batcher.batch(next).unwrap());
        assert_eq!(flat.len(), 2);
        assert_eq!(flat[1].2.len(), 1);
        batcher.shutdown();
    }

    #[test]
    fn hardware_semconv() {
        let mut batcher = Batcher::new(Resource::builder_empty().build(), true);
        let mut all = families();
        let mut encoder = Family::gauge("railscope_gpu_encoder_utilization_ratio", "Enc.");
        encoder.push([("gpu", "0")], 0.5f64);
        all.push(encoder);
        let flat = flatten(&batcher.batch(all).unwrap());
        let names: Vec<&str> = flat.iter().map(|m| m.0.as_str()).collect();
        assert_eq!(
            names,
            ["hw.gpu.utilization", "hw.network.io", "railscope_gpu_info"]
        );
        assert_eq!(
            flat[0].2,
            [
                (
                    "gpu=0,hw.gpu.task=encoder,hw.id=0,hw.type=gpu".to_owned(),
                    "0.5".to_owned()
                ),
                (
                    "gpu=0,hw.gpu.task=general,hw.id=0,hw.type=gpu".to_owned(),
                    "0.25".to_owned()
                ),
            ]
        );
        assert_eq!(
            flat[1].2[1].0,
            "hw.direction=transmit,hw.id=eth0,hw.type=network,netdev=eth0"
        );
    }

    #[test]
    fn a_family_that_outgrows_its_instrument_keeps_every_series() {
        let mut batcher = Batcher::new(Resource::builder_empty().build(), false);
        let family = |n: u32| {
            let mut f = Family::counter("railscope_rdma_port_hw_stat", "Counters.");
            for i in 0..n {
                f.push([("counter", i.to_string())], u64::from(i));
            }
            vec![f]
        };
        assert_eq!(flatten(&batcher.batch(family(1)).unwrap())[0].2.len(), 1);
        let flat = flatten(&batcher.batch(family(5000)).unwrap());
        assert_eq!(flat.len(), 1);
        assert_eq!(flat[0].2.len(), 5000);
        assert!(flat[0].2.iter().all(|(a, _)| !a.contains("overflow")));
    }

    #[test]
    fn units() {
        assert_eq!(unit("railscope_ib_port_rate_bytes_per_second"), "By/s");
        assert_eq!(unit("railscope_ib_port_data_bytes"), "By");
        assert_eq!(unit("railscope_gpu_clock_event_seconds"), "s");
        assert_eq!(unit("railscope_ib_port_symbol_errors"), "");
    }
}
