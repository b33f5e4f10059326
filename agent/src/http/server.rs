//! The HTTP server: `/metrics` (or `--web.telemetry-path`), a landing page at `/`,
//! `/-/healthy` and `/-/ready`, and a clean shutdown on SIGTERM/SIGINT.
//!
//! The metrics path takes node_exporter's filters ([`selection`]): `collect[]=<name>` (repeated)
//! exposes only those collectors, `exclude[]=<name>` every enabled collector but those; a
//! collector in `collect[]` that is unknown or disabled, or both filters in one request, is a
//! 400 naming it. The agent's own series stay (`crate::mapping::Selection`).
//!
//! [`serve`] is the accept loop: HTTP/1.1 over plain TCP or TLS (rustls, from the web
//! config), with the limits of [`Limits`]: the TLS handshake and each request head must
//! arrive within `read_header_timeout` (which also closes idle keep-alive connections),
//! heads are capped at [`MAX_HEAD_BYTES`] and [`MAX_HEADERS`] (431 past them), a response
//! write that makes no progress for `request_timeout` closes the connection. [`router`]
//! adds the per-request layers: configured response headers, the request timeout (503),
//! basic auth (401) and the cap on concurrent scrapes (503).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use railscope_collectors::schedule::{Scheduler, scrape_timeout};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower_http::compression::CompressionLayer;

use crate::cli::expected::Inventory;
use crate::exposition::{self, Format};
use crate::http::basic_auth::BasicAuth;
use crate::http::web_config::WebState;
use crate::mapping::{self, Selection};

/// The largest request head (request line and headers) read; past it the answer is 431.
pub(crate) const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most request headers; past it the answer is 431.
pub(crate) const MAX_HEADERS: usize = 64;
/// How long a shutdown waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Limits on what one client can hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Concurrent requests to the metrics path; more get 503 at once. 0: no limit.
    pub(crate) max_requests: usize,
    /// Time for the TLS handshake, and for each request head from when the connection is
    /// ready for it (so also the idle limit of a keep-alive connection).
    pub(crate) read_header_timeout: Duration,
    /// Time for a handler to answer (else 503), and the longest a response write may make
    /// no progress (else the connection is closed).
    pub(crate) request_timeout: Duration,
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct AppState {
    /// Runs collections.
    pub(crate) scheduler: Arc<Scheduler>,
    /// The metrics path.
    pub(crate) telemetry_path: String,
    /// Cap on a collection's duration.
    pub(crate) timeout_max: Duration,
    /// Time kept back from the scraper's timeout.
    pub(crate) timeout_offset: Duration,
    /// Set once the first collection has finished.
    pub(crate) ready: AtomicBool,
    /// The web configuration in force (users, headers; TLS is used by [`serve`]).
    pub(crate) web: Arc<WebState>,
    /// Basic auth verdicts.
    pub(crate) auth: BasicAuth,
    /// Limits.
    pub(crate) limits: Limits,
    /// Permits for concurrent metrics requests (`None`: unlimited).
    pub(crate) in_flight: Option<Arc<Semaphore>>,
    /// The expected inventory, exported with each scrape.
    pub(crate) expected: Arc<Inventory>,
    /// OTLP push counters, exported with each scrape when the push runs.
    pub(crate) otlp: Option<Arc<crate::otlp::Stats>>,
}

impl AppState {
    /// State for a scheduler, with the given web config and limits.
    pub(crate) fn new(
        scheduler: Arc<Scheduler>,
        telemetry_path: String,
        timeout_max: Duration,
        timeout_offset: Duration,
        web: Arc<WebState>,
        limits: Limits,
    ) -> AppState {
        AppState {
            scheduler,
            telemetry_path,
            timeout_max,
            timeout_offset,
            ready: AtomicBool::new(false),
            web,
            auth: BasicAuth::default(),
            limits,
            in_flight: (limits.max_requests > 0)
                .then(|| Arc::new(Semaphore::new(limits.max_requests))),
            expected: Arc::new(Inventory::default()),
            otlp: None,
        }
    }

    /// The same state, exporting the expected inventory `expected`.
    pub(crate) fn with_expected(mut self, expected: Inventory) -> AppState {
        self.expected = Arc::new(expected);
        self
    }

    /// Exports the OTLP push's counters with each scrape.
    pub(crate) fn with_otlp(mut self, stats: Arc<crate::otlp::Stats>) -> AppState {
        self.otlp = Some(stats);
        self
    }
}

/// Builds the router.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let metrics_path = state.telemetry_path.clone();
    Router::new()
        .route(
            &metrics_path,
            get(metrics)
                .layer(CompressionLayer::new().gzip(true))
                .layer(middleware::from_fn_with_state(
                    Arc::clone(&state),
                    limit_in_flight,
                )),
        )
        .route("/", get(landing))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .fallback(not_found)
        // Outermost last: headers on every answer, then the timeout, then authentication.
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            request_timeout,
        ))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            response_headers,
        ))
        .with_state(state)
}

/// Adds the web config's `http_server_config.headers` to every response.
async fn response_headers(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let web = state.web.current();
    let mut response = next.run(request).await;
    for (name, value) in &web.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// 503 when the handler (authentication included) takes longer than the request timeout.
async fn request_timeout(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(state.limits.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::debug!("A request timed out.");
            (StatusCode::SERVICE_UNAVAILABLE, "Request timed out\n").into_response()
        }
    }
}

/// 401 with `WWW-Authenticate: Basic` unless the request carries a configured user's
/// password (when `basic_auth_users` is set).
async fn authenticate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let web = state.web.current();
    if web.users.is_empty()
        || state
            .auth
            .check(&web.users, request.headers().get(header::AUTHORIZATION))
            .await
    {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic"))],
        "Unauthorized\n",
    )
        .into_response()
}

/// 503 at once when `--web.max-requests` metrics requests are already in flight (as
/// node_exporter does), rather than queueing without bound.
async fn limit_in_flight(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(in_flight) = &state.in_flight else {
        return next.run(request).await;
    };
    match Arc::clone(in_flight).try_acquire_owned() {
        Ok(_permit) => next.run(request).await,
        Err(_) => {
            tracing::debug!(
                limit = state.limits.max_requests,
                "Refused a request over --web.max-requests."
            );
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Limit of concurrent requests reached ({}), try again later.\n",
                    state.limits.max_requests
                ),
            )
                .into_response()
        }
    }
}

async fn metrics(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let enabled = state.scheduler.source_names();
    let selection = match selection(query.as_deref().unwrap_or(""), &enabled) {
        Ok(selection) => selection,
        Err(reason) => {
            tracing::debug!(reason = reason.as_str(), "Refused a filtered scrape.");
            return (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response();
        }
    };
    let header = headers
        .get("x-prometheus-scrape-timeout-seconds")
        .and_then(|v| v.to_str().ok());
    let timeout = scrape_timeout(header, state.timeout_offset, state.timeout_max);
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let collection = match selection.runs(&enabled) {
        None => state.scheduler.collect(timeout).await,
        Some(runs) => state.scheduler.collect_only(timeout, &runs).await,
    };
    state.ready.store(true, Ordering::Release);
    let totals = state.scheduler.totals();
    let expected = Arc::clone(&state.expected);
    let otlp = state.otlp.clone();
    let body = tokio::task::spawn_blocking(move || {
        exposition::encode(
            mapping::exposed(
                &collection,
                &totals,
                &expected,
                otlp.as_deref()
                    .map(crate::otlp::families)
                    .unwrap_or_default(),
                &selection,
            ),
            format,
        )
    })
    .await;
    match body {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            )],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "Failed to encode metrics.");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to encode metrics\n",
            )
                .into_response()
        }
    }
}

/// The collectors a scrape's query asks for, as node_exporter reads `collect[]` and
/// `exclude[]`: every name in `collect[]` (repeats are one) must be an enabled collector;
/// `exclude[]` removes names from the enabled ones and ignores names it does not know; both
/// at once are refused. Unlike node_exporter, excluding every enabled collector leaves the
/// agent's own series alone, not every collector.
pub(crate) fn selection(query: &str, enabled: &[&'static str]) -> Result<Selection, String> {
    let mut collect = Vec::new();
    let mut exclude = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match percent_decode(key).as_str() {
            "collect[]" => collect.push(percent_decode(value)),
            "exclude[]" => exclude.push(percent_decode(value)),
            _ => {}
        }
    }
    if !collect.is_empty() && !exclude.is_empty() {
        return Err("Combined collect[] and exclude[] queries are not allowed.".to_owned());
    }
    if !collect.is_empty() {
        let mut chosen = std::collections::BTreeSet::new();
        for name in &collect {
            match enabled.iter().find(|e| **e == name.as_str()) {
                Some(known) => {
                    chosen.insert(*known);
                }
                None if railscope_collectors::SOURCES
                    .iter()
                    .any(|s| s.name == name.as_str()) =>
                {
                    return Err(format!(
                        "disabled collector: {name:?} (enabled: {})",
                        enabled.join(", ")
                    ));
                }
                None => {
                    return Err(format!(
                        "unknown collector: {name:?} (enabled: {})",
                        enabled.join(", ")
                    ));
                }
            }
        }
        return Ok(Selection::Only(chosen));
    }
    if !exclude.is_empty() {
        return Ok(Selection::Only(
            enabled
                .iter()
                .copied()
                .filter(|e| !exclude.iter().any(|x| x == e))
                .collect(),
        ));
    }
    Ok(Selection::All)
}

/// Decodes a query component as `application/x-www-form-urlencoded` does (`+` is a space);
/// an invalid escape is kept as it is.
fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                match (
                    bytes.get(i + 1).and_then(|b| hex(*b)),
                    bytes.get(i + 2).and_then(|b| hex(*b)),
                ) {
                    (Some(high), Some(low)) => {
                        out.push((high * 16 + low) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn landing(State(state): State<Arc<AppState>>) -> Html<String> {
    let path = html_escape(&state.telemetry_path);
    let collectors: String = state
        .scheduler
        .source_names()
        .iter()
        .map(|name| format!("<li><a href=\"{path}?collect[]={name}\"><code>{name}</code></a></li>"))
        .collect();
    Html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>railscope</title></head>\n<body>\n\
         <h1>railscope</h1>\n<p>Node telemetry agent for GPU cluster fabrics, version {} (revision {}).</p>\n\
         <ul>\n<li><a href=\"{path}\">Metrics</a></li>\n<li><a href=\"/-/healthy\">Health</a></li>\n<li><a href=\"/-/ready\">Readiness</a></li>\n</ul>\n\
         <h2>Enabled collectors</h2>\n<p>Each link shows one collector's metrics: <code>{path}?collect[]=&lt;name&gt;</code> (repeatable) exposes only the collectors named, <code>{path}?exclude[]=&lt;name&gt;</code> every enabled collector but those.</p>\n<ul>{collectors}</ul>\n</body>\n</html>\n",
        crate::build_info::VERSION,
        crate::build_info::REVISION,
    ))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn healthy() -> &'static str {
    "Healthy\n"
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "Ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Not ready: the first collection has not finished\n",
        )
            .into_response()
    }
}

async fn not_found(method: Method) -> Response {
    if method == Method::GET || method == Method::HEAD {
        (StatusCode::NOT_FOUND, "Not found\n").into_response()
    } else {
        (StatusCode::METHOD_NOT_ALLOWED, "Method not allowed\n").into_response()
    }
}

/// Serves `app` on every listener of `listeners` until `shutdown` resolves, then lets
/// requests in flight on any of them finish for a few seconds. TLS when the web config at start has it (the handshake uses the
/// configuration in force when the connection arrives, so a reloaded certificate applies
/// to new connections).
pub(crate) async fn serve(
    listeners: Vec<TcpListener>,
    app: Router,
    web: Arc<WebState>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let tls = web.current().tls.is_some();
    let watching = web.has_file();
    let service = TowerToHyperService::new(app);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut reload = tokio::time::interval(Duration::from_secs(1));
    reload.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    let mut next = 0usize;
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = accept(&listeners, &mut next) => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(%error, "Failed to accept a connection.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = reload.tick(), if watching => {
                // Certificates, users and headers are re-read at most once a second, off the
                // request path; the stat calls are cheap, a reload is rare.
                let web = Arc::clone(&web);
                let _ = tokio::task::spawn_blocking(move || web.reload_if_changed()).await;
                continue;
            }
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let io = WriteDeadline::new(stream, limits.request_timeout);
        let service = service.clone();
        let stop = stop_rx.clone();
        let acceptor = if tls {
            web.current()
                .tls
                .clone()
                .map(tokio_rustls::TlsAcceptor::from)
        } else {
            None
        };
        tokio::spawn(async move {
            match acceptor {
                None => serve_connection(io, service, limits, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.read_header_timeout, acceptor.accept(io))
                        .await
                    {
                        Ok(Ok(tls)) => serve_connection(tls, service, limits, stop).await,
                        Ok(Err(error)) => tracing::debug!(%error, "TLS handshake failed."),
                        Err(_) => tracing::debug!("TLS handshake timed out."),
                    }
                }
            }
        });
    }
    // Every connection holds a receiver: `closed` resolves when the last one has finished.
    let _ = stop_tx.send(true);
    drop(stop_rx);
    if tokio::time::timeout(SHUTDOWN_GRACE, stop_tx.closed())
        .await
        .is_err()
    {
        tracing::warn!("Requests still in flight at shutdown were cut off.");
    }
    Ok(())
}

/// The next connection on any of `listeners`, looking at them in turn from `next` so that
/// a busy one does not starve the others.
fn accept<'a>(
    listeners: &'a [TcpListener],
    next: &'a mut usize,
) -> impl Future<Output = io::Result<(tokio::net::TcpStream, SocketAddr)>> + 'a {
    std::future::poll_fn(move |cx| {
        let count = listeners.len();
        for step in 0..count {
            let index = (*next + step) % count;
            if let Poll::Ready(accepted) = listeners[index].poll_accept(cx) {
                *next = (index + 1) % count;
                return Poll::Ready(accepted);
            }
        }
        Poll::Pending
    })
}

async fn serve_connection<I>(
    io: I,
    service: TowerToHyperService<Router>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    if *stop.borrow() {
        connection.as_mut().graceful_shutdown();
    }
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "Connection ended with an error.");
            }
            return;
        }
        _ = stop.changed() => connection.as_mut().graceful_shutdown(),
    }
    if let Err(error) = connection.await {
        tracing::debug!(%error, "Connection ended with an error.");
    }
}

/// A stream whose writes fail with `TimedOut` once one has made no progress for `limit`:
/// a client that stops reading its response cannot hold the connection.
struct WriteDeadline<T> {
    inner: T,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(inner: T, limit: Duration) -> Self {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// Called when a write operation returned `Pending`: arms the deadline or reports it.
    fn check(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "response write made no progress",
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn wrap<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match result {
            Poll::Pending => self.check(cx).map(Err),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrap(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrap(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.wrap(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.wrap(cx, result)
    }
}

/// Binds `address`: `:port` listens on every interface (IPv6 and IPv4 where the host has
/// IPv6, IPv4 otherwise).
pub(crate) async fn bind(address: &str) -> std::io::Result<TcpListener> {
    if let Some(port) = address.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| std::io::Error::other(format!("invalid port in {address:?}")))?;
        return match TcpListener::bind(SocketAddr::from(([0u16; 8], port))).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind(SocketAddr::from(([0u8; 4], port))).await,
        };
    }
    let address = address.trim_start_matches('[').replace("]:", ":");
    match address.parse::<SocketAddr>() {
        Ok(socket) => TcpListener::bind(socket).await,
        Err(_) => TcpListener::bind(address.as_str()).await,
    }
}

/// Resolves when SIGTERM or SIGINT arrives.
pub(crate) async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("Received SIGINT, shutting down."),
        () = terminate => tracing::info!("Received SIGTERM, shutting down."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENABLED: &[&str] = &["infiniband", "netdev", "pci"];

    fn only(names: &[&'static str]) -> Selection {
        Selection::Only(names.iter().copied().collect())
    }

    /// node_exporter's handler, case by case (`node_exporter.go`, `NewNodeCollector`).
    #[test]
    fn collect_and_exclude_read_as_node_exporter_reads_them() {
        assert_eq!(selection("", ENABLED), Ok(Selection::All));
        assert_eq!(selection("foo=bar", ENABLED), Ok(Selection::All));
        assert_eq!(
            selection("collect[]=pci&collect[]=infiniband&collect[]=pci", ENABLED),
            Ok(only(&["infiniband", "pci"])),
            "repeats are one"
        );
        assert_eq!(
            selection("collect%5B%5D=netdev", ENABLED),
            Ok(only(&["netdev"])),
            "the brackets percent-encoded, as clients send them"
        );
        assert_eq!(
            selection("exclude[]=netdev&exclude[]=nonesuch&exclude[]=", ENABLED),
            Ok(only(&["infiniband", "pci"])),
            "exclude[] ignores names it does not know"
        );
        assert_eq!(
            selection(
                "exclude[]=infiniband&exclude[]=netdev&exclude[]=pci",
                ENABLED
            ),
            Ok(only(&[])),
            "excluding every collector leaves the agent's own series"
        );
        let err = selection("collect[]=infiniband&exclude[]=pci", ENABLED).unwrap_err();
        assert!(err.contains("Combined collect[] and exclude[]"), "{err}");
        let err = selection("collect[]=infiniband&collect[]=cpu", ENABLED).unwrap_err();
        assert!(err.starts_with("unknown collector: \"cpu\""), "{err}");
        let err = selection("collect[]=gpu", ENABLED).unwrap_err();
        assert!(err.starts_with("disabled collector: \"gpu\""), "{err}");
        let err = selection("collect[]=", ENABLED).unwrap_err();
        assert!(err.starts_with("unknown collector: \"\""), "{err}");
    }

    #[test]
    fn query_components_are_form_decoded() {
        assert_eq!(percent_decode("a%5Bb%5d+c"), "a[b] c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    /// `workload` is run with the collectors whose devices it resolves, and exposed alone.
    #[test]
    fn a_chosen_collector_runs_with_what_its_mapping_reads() {
        let enabled = ["infiniband", "netdev", "gpu", "workload"];
        assert_eq!(Selection::All.runs(&enabled), None);
        assert_eq!(
            only(&["workload"]).runs(&enabled),
            Some(vec!["infiniband", "gpu", "workload"])
        );
        assert_eq!(
            only(&["workload"]).runs(&["netdev", "workload"]),
            Some(vec!["workload"])
        );
        assert!(!only(&["workload"]).admits("gpu"));
    }
}
