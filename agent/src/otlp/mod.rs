//! OTLP push: every series of the exposition, pushed to an OpenTelemetry endpoint every
//! `--otlp.interval`, through the OpenTelemetry SDK and its OTLP exporter.
//!
//! * [`config`]: the `--otlp.*` flags.
//! * [`batch`]: families → one batch (`ResourceMetrics`) through observable instruments
//!   and a manual reader.
//! * [`semconv`]: the OpenTelemetry hardware semantic-convention names, with
//!   `--otlp.hardware-semconv`.
//! * [`exporter`]: the OTLP exporter (gRPC or HTTP/protobuf, TLS, headers).
//! * [`queue`]: the bounded queue and the sender.
//!
//! The push shares collections with scrapes: it joins a collection that is running, or
//! takes one that finished less than [`SHARE_AGE`] ago, and runs one itself only when
//! neither is there. Making a batch runs off the async runtime; sending is a task of its
//! own; neither holds anything a scrape waits for.

pub(crate) mod batch;
pub(crate) mod exporter;
pub(crate) mod queue;
pub(crate) mod semconv;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use railscope_collectors::Scheduler;

use crate::cli::expected::Inventory;
use crate::cli::otlp::OtlpConfig;
use crate::exposition::Family;
use queue::Queue;

/// A collection that finished at most this long ago serves a push instead of a new one.
pub(crate) const SHARE_AGE: Duration = Duration::from_secs(5);

/// What the push has done, for the agent's own series.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Batches made.
    pub(crate) batches: AtomicU64,
    /// Batches that could not be made.
    pub(crate) batch_errors: AtomicU64,
    /// Batches the endpoint took.
    pub(crate) exported: AtomicU64,
    /// Export attempts that failed.
    pub(crate) failures: AtomicU64,
    /// Batches dropped from the full queue.
    pub(crate) dropped: AtomicU64,
    /// Batches the endpoint refused for good.
    pub(crate) rejected: AtomicU64,
    /// Batches waiting now (with the one being sent).
    pub(crate) queued: AtomicU64,
    /// The queue's bound.
    pub(crate) capacity: u64,
    /// Data points in the last batch.
    pub(crate) data_points: AtomicU64,
    /// When the endpoint last took a batch (milliseconds since the epoch; 0: never).
    last_export_ms: AtomicU64,
}

impl Stats {
    /// Counters at zero for a queue of `capacity` batches.
    pub(crate) fn new(capacity: usize) -> Self {
        Stats {
            capacity: capacity as u64,
            ..Stats::default()
        }
    }

    fn set_last_export(&self, at: SystemTime) {
        let ms = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.last_export_ms.store(ms, Ordering::Relaxed);
    }
}

/// The push's own series (in the exposition and in the batches).
pub(crate) fn families(stats: &Stats) -> Vec<Family> {
    let counter = |name, help, value: &AtomicU64| {
        let mut family = Family::counter(name, help);
        family.push_unlabelled(value.load(Ordering::Relaxed));
        family
    };
    let mut out = vec![
        counter(
            "railscope_otlp_batches",
            "OTLP batches made, one per --otlp.interval.",
            &stats.batches,
        ),
        counter(
            "railscope_otlp_batch_errors",
            "OTLP batches that could not be made.",
            &stats.batch_errors,
        ),
        counter(
            "railscope_otlp_exported_batches",
            "OTLP batches the endpoint took.",
            &stats.exported,
        ),
        counter(
            "railscope_otlp_export_failures",
            "OTLP export attempts that failed; a batch tried again counts each time.",
            &stats.failures,
        ),
        counter(
            "railscope_otlp_dropped_batches",
            "OTLP batches dropped because --otlp.queue-size batches were already waiting for the endpoint.",
            &stats.dropped,
        ),
        counter(
            "railscope_otlp_rejected_batches",
            "OTLP batches the endpoint refused for good (HTTP 4xx other than 408 and 429, gRPC INVALID_ARGUMENT, UNAUTHENTICATED, ...), dropped.",
            &stats.rejected,
        ),
    ];
    let mut queued = Family::gauge(
        "railscope_otlp_queue_batches",
        "OTLP batches waiting for the endpoint now.",
    );
    queued.push_unlabelled(stats.queued.load(Ordering::Relaxed));
    let mut capacity = Family::gauge(
        "railscope_otlp_queue_capacity_batches",
        "OTLP batches kept at most while the endpoint is unreachable (--otlp.queue-size).",
    );
    capacity.push_unlabelled(stats.capacity);
    let mut points = Family::gauge(
        "railscope_otlp_batch_data_points",
        "Data points in the last OTLP batch.",
    );
    points.push_unlabelled(stats.data_points.load(Ordering::Relaxed));
    let mut last = Family::gauge(
        "railscope_otlp_last_export_timestamp_seconds",
        "When the OTLP endpoint last took a batch (Unix time); absent until it first does.",
    );
    match stats.last_export_ms.load(Ordering::Relaxed) {
        0 => {}
        ms => last.push_unlabelled(ms as f64 / 1000.0),
    }
    out.extend([queued, capacity, points, last]);
    out
}

/// The resource every batch describes: `service.name` `railscope`, `service.version`,
/// `host.name` and `service.instance.id` (the host name), `k8s.node.name` from
/// `NODE_NAME` (the DaemonSet sets it from the downward API), and whatever
/// `OTEL_RESOURCE_ATTRIBUTES` adds.
pub(crate) fn resource() -> Resource {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let mut attributes = vec![
        KeyValue::new("service.version", crate::build_info::VERSION),
        KeyValue::new("host.name", host.clone()),
        KeyValue::new("service.instance.id", host),
    ];
    if let Some(node) = std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()) {
        attributes.push(KeyValue::new("k8s.node.name", node));
    }
    Resource::builder()
        .with_service_name("railscope")
        .with_attributes(attributes)
        .build()
}

/// Data points in a batch.
fn data_points(rm: &ResourceMetrics) -> u64 {
    fn count<T>(data: &MetricData<T>) -> usize {
        match data {
            MetricData::Sum(s) => s.data_points().count(),
            MetricData::Gauge(g) => g.data_points().count(),
            MetricData::Histogram(h) => h.data_points().count(),
            MetricData::ExponentialHistogram(h) => h.data_points().count(),
        }
    }
    rm.scope_metrics()
        .flat_map(|s| s.metrics())
        .map(|m| match m.data() {
            AggregatedMetrics::U64(d) => count(d),
            AggregatedMetrics::I64(d) => count(d),
            AggregatedMetrics::F64(d) => count(d),
        })
        .sum::<usize>() as u64
}

/// The running push.
pub(crate) struct Push {
    queue: Arc<Queue>,
    stats: Arc<Stats>,
    exporter: Arc<opentelemetry_otlp::MetricExporter>,
    batcher: Arc<Mutex<batch::Batcher>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Push {
    /// Starts making and sending batches. Runs inside the Tokio runtime.
    pub(crate) fn start(
        config: &OtlpConfig,
        scheduler: Arc<Scheduler>,
        expected: Arc<Inventory>,
        collection_timeout: Duration,
    ) -> Result<Push, crate::cli::ConfigError> {
        let stats = Arc::new(Stats::new(config.queue_size));
        let exporter = Arc::new(exporter::build(config)?);
        let queue = Arc::new(Queue::new(config.queue_size, Arc::clone(&stats)));
        let batcher = Arc::new(Mutex::new(batch::Batcher::new(
            resource(),
            config.hardware_semconv,
        )));
        let sender = tokio::spawn(Arc::clone(&queue).send(
            SharedExporter(Arc::clone(&exporter)),
            config.interval,
            config.endpoint.clone(),
        ));
        let producer = tokio::spawn(produce(Producer {
            scheduler,
            expected,
            batcher: Arc::clone(&batcher),
            queue: Arc::clone(&queue),
            stats: Arc::clone(&stats),
            interval: config.interval,
            timeout: collection_timeout,
        }));
        Ok(Push {
            queue,
            stats,
            exporter,
            batcher,
            tasks: vec![producer, sender],
        })
    }

    /// The push's counters.
    pub(crate) fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.stats)
    }

    /// Stops making batches and tries to send what waits, for at most `deadline`.
    pub(crate) async fn stop(self, deadline: Duration) {
        for task in &self.tasks {
            task.abort();
        }
        self.queue
            .drain(&SharedExporter(Arc::clone(&self.exporter)), deadline)
            .await;
        batch::lock(&self.batcher).shutdown();
    }
}

/// The exporter, shared by the sender and the final drain.
struct SharedExporter(Arc<opentelemetry_otlp::MetricExporter>);

impl opentelemetry_sdk::metrics::exporter::PushMetricExporter for SharedExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.export(metrics).await
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self) -> opentelemetry_sdk::metrics::Temporality {
        self.0.temporality()
    }
}

struct Producer {
    scheduler: Arc<Scheduler>,
    expected: Arc<Inventory>,
    batcher: Arc<Mutex<batch::Batcher>>,
    queue: Arc<Queue>,
    stats: Arc<Stats>,
    interval: Duration,
    timeout: Duration,
}

/// Makes a batch every interval.
async fn produce(p: Producer) {
    let mut ticker = tokio::time::interval(p.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let share = SHARE_AGE.min(p.interval / 2);
    loop {
        ticker.tick().await;
        let collection = p.scheduler.collect_recent(share, p.timeout).await;
        let totals = p.scheduler.totals();
        let (expected, stats, batcher) = (
            Arc::clone(&p.expected),
            Arc::clone(&p.stats),
            Arc::clone(&p.batcher),
        );
        let made = tokio::task::spawn_blocking(move || {
            let families = crate::mapping::exposed(
                &collection,
                &totals,
                &expected,
                families(&stats),
                &crate::mapping::Selection::All,
            );
            batch::lock(&batcher).batch(families)
        })
        .await;
        match made {
            Ok(Ok(rm)) => {
                p.stats.batches.fetch_add(1, Ordering::Relaxed);
                p.stats
                    .data_points
                    .store(data_points(&rm), Ordering::Relaxed);
                p.queue.push(rm);
            }
            Ok(Err(error)) => {
                p.stats.batch_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "Could not make an OTLP batch.");
            }
            Err(error) => {
                p.stats.batch_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "Making an OTLP batch failed.");
            }
        }
    }
}
