//! The HTTP server: `/metrics` (or `--web.telemetry-path`), a landing page at `/`,
//! `/-/healthy` and `/-/ready`, and a clean shutdown on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tower_http::compression::CompressionLayer;

use crate::exposition::{self, Format};
use crate::scheduler::{Scheduler, scrape_timeout};
use crate::{mapping, process};

/// What the handlers share.
#[derive(Debug)]
pub struct AppState {
    /// Runs collections.
    pub scheduler: Arc<Scheduler>,
    /// The metrics path.
    pub telemetry_path: String,
    /// Cap on a collection's duration.
    pub timeout_max: Duration,
    /// Time kept back from the scraper's timeout.
    pub timeout_offset: Duration,
    /// Set once the first collection has finished.
    pub ready: AtomicBool,
}

/// Builds the router.
pub fn router(state: Arc<AppState>) -> Router {
    let metrics_path = state.telemetry_path.clone();
    Router::new()
        .route(
            &metrics_path,
            get(metrics).layer(CompressionLayer::new().gzip(true)),
        )
        .route("/", get(landing))
        .route("/-/healthy", get(healthy))
        .route("/-/ready", get(ready))
        .fallback(not_found)
        .with_state(state)
}

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let header = headers
        .get("x-prometheus-scrape-timeout-seconds")
        .and_then(|v| v.to_str().ok());
    let timeout = scrape_timeout(header, state.timeout_offset, state.timeout_max);
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let collection = state.scheduler.collect(timeout).await;
    state.ready.store(true, Ordering::Release);
    let totals = state.scheduler.totals();
    let body = tokio::task::spawn_blocking(move || {
        let process = match process::read() {
            Ok(p) => Some(p),
            Err(error) => {
                tracing::debug!(%error, "Failed to read the agent's own process statistics.");
                None
            }
        };
        exposition::encode(
            &mapping::families(&collection, &totals, process.as_ref()),
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

async fn landing(State(state): State<Arc<AppState>>) -> Html<String> {
    let collectors: String = state
        .scheduler
        .source_names()
        .iter()
        .map(|name| format!("<li><code>{name}</code></li>"))
        .collect();
    let path = html_escape(&state.telemetry_path);
    Html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>railscope</title></head>\n<body>\n\
         <h1>railscope</h1>\n<p>Node telemetry agent for GPU cluster fabrics, version {} (revision {}).</p>\n\
         <ul>\n<li><a href=\"{path}\">Metrics</a></li>\n<li><a href=\"/-/healthy\">Health</a></li>\n<li><a href=\"/-/ready\">Readiness</a></li>\n</ul>\n\
         <h2>Enabled collectors</h2>\n<ul>{collectors}</ul>\n</body>\n</html>\n",
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

/// Binds `address`: `:port` listens on every interface (IPv6 and IPv4 where the host has
/// IPv6, IPv4 otherwise).
pub async fn bind(address: &str) -> std::io::Result<TcpListener> {
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
pub async fn shutdown_signal() {
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
