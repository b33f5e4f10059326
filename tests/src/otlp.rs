//! OTLP receivers for the push tests: a gRPC one (the collector's `MetricsService`, a tonic
//! server generated from `opentelemetry-proto`) and an HTTP/protobuf one (`POST
//! /v1/metrics` on hyper), both keeping every request they get. Either can be stopped and
//! started again on the same port, as a collector that restarts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};

/// Headers (or gRPC metadata) of a request, by lower-case name.
pub type Headers = BTreeMap<String, String>;

/// What a receiver got: each request, with the headers (metadata) it came with.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<Vec<(Headers, ExportMetricsServiceRequest)>>>);

impl Received {
    /// The requests so far.
    pub fn requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The headers of the requests so far.
    pub fn headers(&self) -> Vec<BTreeMap<String, String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// How many requests so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Whether none came.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until at least `n` requests came.
    pub fn wait_for(&self, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.len() < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} OTLP requests came in {timeout:?}",
                self.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn push(&self, headers: BTreeMap<String, String>, request: ExportMetricsServiceRequest) {
        self.0.lock().unwrap().push((headers, request));
    }
}

/// The transport a receiver speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with protobuf bodies.
    Http,
}

/// TLS for a receiver: its certificate and key, and the CA that client certificates must
/// chain to (required when given).
pub struct ReceiverTls {
    /// PEM server certificate.
    pub cert: Vec<u8>,
    /// PEM server key.
    pub key: Vec<u8>,
    /// PEM CA for client certificates.
    pub client_ca: Option<Vec<u8>>,
}

/// A receiver running on its own runtime.
pub struct Receiver {
    /// What it got.
    pub received: Received,
    /// Where it listens.
    pub addr: SocketAddr,
    transport: Transport,
    runtime: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

struct Service(Received);

#[tonic::async_trait]
impl MetricsService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let headers = request
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned()))
                }
                tonic::metadata::KeyAndValueRef::Binary(..) => None,
            })
            .collect();
        self.0.push(headers, request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub fn start(transport: Transport) -> Receiver {
        Receiver::start_with(transport, None)
    }

    /// Starts a receiver, with TLS when `tls` is given.
    pub fn start_with(transport: Transport, tls: Option<ReceiverTls>) -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let mut receiver = Receiver {
            received: Received::default(),
            addr,
            transport,
            runtime,
            stop: None,
            task: None,
        };
        receiver.serve(listener, tls);
        receiver
    }

    /// `http://` (or `https://`) and the address.
    pub fn endpoint(&self, https: bool) -> String {
        let scheme = if https { "https" } else { "http" };
        match self.transport {
            Transport::Grpc => format!("{scheme}://127.0.0.1:{}", self.addr.port()),
            Transport::Http => format!("{scheme}://127.0.0.1:{}/v1/metrics", self.addr.port()),
        }
    }

    /// Stops listening (connections are closed): the endpoint is down.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = self.runtime.block_on(task);
        }
    }

    /// Listens again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        let listener = self
            .runtime
            .block_on(tokio::net::TcpListener::bind(self.addr))
            .unwrap();
        self.serve(listener, None);
    }

    fn serve(&mut self, listener: tokio::net::TcpListener, tls: Option<ReceiverTls>) {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let received = self.received.clone();
        let task = match self.transport {
            Transport::Grpc => {
                let mut server = tonic::transport::Server::builder();
                if let Some(tls) = tls {
                    let mut config = tonic::transport::ServerTlsConfig::new()
                        .identity(tonic::transport::Identity::from_pem(tls.cert, tls.key));
                    if let Some(ca) = tls.client_ca {
                        config = config
                            .client_ca_root(tonic::transport::Certificate::from_pem(ca))
                            .client_auth_optional(false);
                    }
                    server = server.tls_config(config).unwrap();
                }
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                let router = server.add_service(MetricsServiceServer::new(Service(received)));
                self.runtime.spawn(async move {
                    let _ = router
                        .serve_with_incoming_shutdown(incoming, async {
                            let _ = stop_rx.await;
                        })
                        .await;
                })
            }
            Transport::Http => {
                let acceptor = tls.map(http_tls);
                self.runtime
                    .spawn(serve_http(listener, acceptor, received, stop_rx))
            }
        };
        self.stop = Some(stop_tx);
        self.task = Some(task);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A rustls acceptor for the HTTP receiver, requiring a client certificate when a client CA
/// is given.
fn http_tls(tls: ReceiverTls) -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&tls.cert)
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&tls.key).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match tls.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&ca) {
                roots.add(cert.unwrap()).unwrap();
            }
            builder.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap(),
            )
        }
        None => builder.with_no_client_auth(),
    };
    tokio_rustls::TlsAcceptor::from(Arc::new(builder.with_single_cert(chain, key).unwrap()))
}

async fn serve_http(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    received: Received,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = &mut stop => break,
        };
        let received = received.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let received = received.clone();
                async move { Ok::<_, std::convert::Infallible>(handle_http(request, &received).await) }
            });
            let http = hyper::server::conn::http1::Builder::new();
            match tls {
                Some(tls) => {
                    if let Ok(stream) = tls.accept(stream).await {
                        let _ = http
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    }
                }
                None => {
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                }
            }
        });
    }
    connections.abort_all();
}

async fn handle_http(
    request: hyper::Request<hyper::body::Incoming>,
    received: &Received,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    use prost::Message;
    let respond = |status: u16, body: Vec<u8>| {
        hyper::Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap()
    };
    if request.method() != hyper::Method::POST || request.uri().path() != "/v1/metrics" {
        return respond(404, Vec::new());
    }
    let headers: BTreeMap<String, String> = request
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let Ok(body) = request.into_body().collect().await else {
        return respond(400, Vec::new());
    };
    let mut body = body.to_bytes().to_vec();
    if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain)
            .unwrap();
        body = plain;
    }
    match ExportMetricsServiceRequest::decode(&body[..]) {
        Ok(decoded) => {
            received.push(headers, decoded);
            respond(200, ExportMetricsServiceResponse::default().encode_to_vec())
        }
        Err(_) => respond(400, Vec::new()),
    }
}

/// One data point, flattened: metric name, attributes, value, and what carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The metric's name.
    pub name: String,
    /// Its attributes (string values).
    pub attributes: BTreeMap<String, String>,
    /// The value.
    pub value: PointValue,
    /// `sum` (with monotonic and cumulative), or `gauge`.
    pub kind: &'static str,
    /// The metric's unit.
    pub unit: String,
    /// The point's time (nanoseconds since the epoch).
    pub time_unix_nano: u64,
}

/// A data point's value as it was on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointValue {
    /// `as_int`.
    Int(i64),
    /// `as_double`.
    Double(f64),
}

/// The string value of an attribute.
pub fn attribute_string(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), attribute_string(&kv.value)))
        .collect()
}

/// The resource attributes of a request.
pub fn resource(request: &ExportMetricsServiceRequest) -> BTreeMap<String, String> {
    request
        .resource_metrics
        .iter()
        .filter_map(|rm| rm.resource.as_ref())
        .flat_map(|r| attributes(&r.attributes))
        .collect()
}

/// Every data point of a request.
pub fn points(request: &ExportMetricsServiceRequest) -> Vec<Point> {
    let mut out = Vec::new();
    for rm in &request.resource_metrics {
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                let (kind, points) = match &m.data {
                    Some(metric::Data::Sum(sum)) => {
                        let kind = match (sum.is_monotonic, sum.aggregation_temporality) {
                            (true, 2) => "monotonic cumulative sum",
                            (false, 2) => "cumulative sum",
                            _ => "other sum",
                        };
                        (kind, &sum.data_points)
                    }
                    Some(metric::Data::Gauge(gauge)) => ("gauge", &gauge.data_points),
                    other => panic!("{}: unexpected data {other:?}", m.name),
                };
                for p in points {
                    let value = match p.value {
                        Some(number_data_point::Value::AsInt(i)) => PointValue::Int(i),
                        Some(number_data_point::Value::AsDouble(d)) => PointValue::Double(d),
                        None => panic!("{}: a point without a value", m.name),
                    };
                    out.push(Point {
                        name: m.name.clone(),
                        attributes: attributes(&p.attributes),
                        value,
                        kind,
                        unit: m.unit.clone(),
                        time_unix_nano: p.time_unix_nano,
                    });
                }
            }
        }
    }
    out
}
