//! The bounded queue of batches waiting for the endpoint, and the task that sends them.
//!
//! * A batch is made every `--otlp.interval` and appended; when `--otlp.queue-size`
//!   batches are already waiting, the oldest is dropped and counted. Memory is bounded by
//!   the queue, whatever the endpoint does.
//! * The sender exports the oldest batch first. A batch the endpoint could not take for a
//!   reason that may pass (no connection, a timeout, a connection broken mid-request, gRPC
//!   `UNAVAILABLE` and the other codes that are not refusals, HTTP 408, 429 and 5xx) goes back to the head and is tried
//!   again after a backoff (from 1 s, doubling, up to the interval and at most 30 s). One it
//!   refused for good (HTTP 4xx other than 408/429, gRPC `INVALID_ARGUMENT`,
//!   `UNAUTHENTICATED`, ...) is dropped and counted as rejected, so it cannot hold the
//!   queue up.
//! * Batches keep the time they were made: after an outage the endpoint receives them in
//!   order with their own timestamps.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;

use super::Stats;

/// Batches waiting for the endpoint.
pub(crate) struct Queue {
    batches: std::sync::Mutex<VecDeque<ResourceMetrics>>,
    capacity: usize,
    ready: tokio::sync::Notify,
    stats: Arc<Stats>,
}

impl Queue {
    /// An empty queue of at most `capacity` batches.
    pub(crate) fn new(capacity: usize, stats: Arc<Stats>) -> Self {
        Queue {
            batches: std::sync::Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            ready: tokio::sync::Notify::new(),
            stats,
        }
    }

    /// Appends a new batch, dropping the oldest when full.
    pub(crate) fn push(&self, batch: ResourceMetrics) {
        let mut batches = self.lock();
        while batches.len() >= self.capacity {
            batches.pop_front();
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
        batches.push_back(batch);
        self.stats
            .queued
            .store(batches.len() as u64, Ordering::Relaxed);
        drop(batches);
        self.ready.notify_one();
    }

    /// Puts a batch that failed back at the head, unless newer batches fill the queue (it
    /// is then the oldest, and dropped).
    fn requeue(&self, batch: ResourceMetrics) {
        let mut batches = self.lock();
        if batches.len() >= self.capacity {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        } else {
            batches.push_front(batch);
        }
        self.stats
            .queued
            .store(batches.len() as u64, Ordering::Relaxed);
    }

    fn pop(&self) -> Option<ResourceMetrics> {
        let mut batches = self.lock();
        let batch = batches.pop_front();
        // The batch in flight still counts as queued until it is sent or dropped.
        self.stats.queued.store(
            (batches.len() + usize::from(batch.is_some())) as u64,
            Ordering::Relaxed,
        );
        batch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ResourceMetrics>> {
        self.batches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends batches as they come, until the task is dropped.
    pub(crate) async fn send(
        self: Arc<Self>,
        exporter: impl PushMetricExporter,
        interval: Duration,
        endpoint: String,
    ) {
        let first = interval.min(Duration::from_secs(1));
        let most = interval.clamp(first, Duration::from_secs(30));
        let mut backoff = first;
        let mut failing = false;
        loop {
            let Some(batch) = self.pop() else {
                self.ready.notified().await;
                continue;
            };
            match exporter.export(&batch).await {
                Ok(()) => {
                    self.stats.exported.fetch_add(1, Ordering::Relaxed);
                    self.stats.set_last_export(SystemTime::now());
                    self.stats
                        .queued
                        .store(self.lock().len() as u64, Ordering::Relaxed);
                    if failing {
                        tracing::info!(
                            endpoint = endpoint.as_str(),
                            waiting = self.lock().len(),
                            "OTLP endpoint takes batches again."
                        );
                    }
                    failing = false;
                    backoff = first;
                }
                Err(error) => {
                    let error = error.to_string();
                    self.stats.failures.fetch_add(1, Ordering::Relaxed);
                    if permanent(&error) {
                        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .queued
                            .store(self.lock().len() as u64, Ordering::Relaxed);
                        tracing::warn!(
                            endpoint = endpoint.as_str(),
                            error = error.as_str(),
                            "OTLP endpoint refused a batch; it is dropped."
                        );
                        continue;
                    }
                    if !failing {
                        tracing::warn!(
                            endpoint = endpoint.as_str(),
                            error = error.as_str(),
                            queue_size = self.capacity,
                            "OTLP export failed; keeping batches and retrying."
                        );
                    } else {
                        tracing::debug!(
                            endpoint = endpoint.as_str(),
                            error = error.as_str(),
                            "OTLP export failed again."
                        );
                    }
                    failing = true;
                    self.requeue(batch);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(most);
                }
            }
        }
    }

    /// Tries to send what is queued until `deadline` (at shutdown).
    pub(crate) async fn drain(&self, exporter: &impl PushMetricExporter, deadline: Duration) {
        let attempt = async {
            while let Some(batch) = self.pop() {
                if exporter.export(&batch).await.is_err() {
                    break;
                }
                self.stats.exported.fetch_add(1, Ordering::Relaxed);
            }
        };
        let _ = tokio::time::timeout(deadline, attempt).await;
    }
}

/// Whether an export error says the endpoint understood the batch and will never take it.
/// The OTLP exporter's messages end in the gRPC code or the HTTP status. Only refusals are
/// permanent: gRPC `INVALID_ARGUMENT`, `NOT_FOUND`, `ALREADY_EXISTS`, `PERMISSION_DENIED`,
/// `UNAUTHENTICATED`, `FAILED_PRECONDITION`, `UNIMPLEMENTED`, and HTTP 4xx other than 408
/// and 429. Everything else may pass and is tried again: no connection, a timeout, the
/// codes the OTLP specification calls retryable, and what a connection broken mid-request
/// reports (tonic says `UNKNOWN` or `INTERNAL` then, as when a collector restarts).
fn permanent(error: &str) -> bool {
    if let Some((_, code)) = error.split_once("gRPC code: ") {
        let code = code.split(|c: char| !c.is_ascii_alphanumeric()).next();
        return matches!(
            code,
            Some(
                "InvalidArgument"
                    | "NotFound"
                    | "AlreadyExists"
                    | "PermissionDenied"
                    | "Unauthenticated"
                    | "FailedPrecondition"
                    | "Unimplemented"
            )
        );
    }
    if let Some((_, status)) = error.split_once("status code: ") {
        let status: String = status.chars().take_while(char::is_ascii_digit).collect();
        return status.len() == 3
            && status.starts_with('4')
            && !matches!(status.as_str(), "408" | "429");
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permanent_errors() {
        assert!(permanent(
            "TonicMetricsClient.Export export failed with gRPC code: InvalidArgument"
        ));
        assert!(!permanent(
            "TonicMetricsClient.Export export failed with gRPC code: Unavailable: transport error"
        ));
        assert!(!permanent(
            "TonicMetricsClient.Export export failed with gRPC code: Unknown: transport error"
        ));
        assert!(!permanent(
            "TonicMetricsClient.Export export failed with gRPC code: Internal: h2 protocol error"
        ));
        assert!(permanent(
            "TonicMetricsClient.Export export failed with gRPC code: Unauthenticated"
        ));
        assert!(permanent("HTTP export failed with status code: 400"));
        assert!(permanent("HTTP export failed with status code: 413"));
        assert!(!permanent("HTTP export failed with status code: 429"));
        assert!(!permanent("HTTP export failed with status code: 500"));
        assert!(!permanent("HTTP export failed with status code: 503"));
        assert!(!permanent("client error (Connect): tcp connect error"));
    }

    #[test]
    fn bounded() {
        let stats = Arc::new(Stats::new(3));
        let queue = Queue::new(3, Arc::clone(&stats));
        for _ in 0..5 {
            queue.push(ResourceMetrics::default());
        }
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 2);
        assert_eq!(stats.queued.load(Ordering::Relaxed), 3);
        let head = queue.pop().unwrap();
        queue.push(ResourceMetrics::default());
        // The queue is full again: the batch in flight is the oldest and goes.
        queue.requeue(head);
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(queue.lock().len(), 3);
    }
}
