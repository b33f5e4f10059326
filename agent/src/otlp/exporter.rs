//! The OTLP exporter for the configured endpoint: gRPC over tonic, or HTTP/protobuf over
//! hyper, both with rustls (ring) when the endpoint is `https://`.
//!
//! The exporter's own retries are off: a failed batch goes back to the head of the agent's
//! queue and is tried again there, so one retry schedule covers both transports and what
//! waits is bounded by `--otlp.queue-size`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cli::ConfigError;
use crate::cli::otlp::{
    CA_FILE, CERT_FILE, ENDPOINT, HEADERS, KEY_FILE, OtlpConfig, Protocol, Tls,
};
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig, Identity};
use opentelemetry_otlp::{
    Compression, MetricExporter, RetryPolicy, WithExportConfig, WithHttpConfig, WithTonicConfig,
};
use opentelemetry_sdk::metrics::Temporality;

/// Builds the exporter; an error names the setting at fault (a bad certificate, key or
/// header). Must run inside the Tokio runtime (the HTTP client spawns on it).
pub(crate) fn build(config: &OtlpConfig) -> Result<MetricExporter, ConfigError> {
    let https = config.endpoint.starts_with("https://");
    let compression = config.gzip.then_some(Compression::Gzip);
    let exporter = match config.protocol {
        Protocol::Grpc => {
            let mut metadata = MetadataMap::new();
            for (key, value) in &config.headers {
                let key =
                    tonic::metadata::MetadataKey::from_bytes(key.as_bytes()).map_err(|e| {
                        ConfigError::new(HEADERS.field(), format!("header {key:?}: {e}"))
                    })?;
                let value = value.parse().map_err(|e| {
                    ConfigError::new(HEADERS.field(), format!("header {key:?}: {e}"))
                })?;
                metadata.insert(key, value);
            }
            let mut builder = MetricExporter::builder()
                .with_tonic()
                .with_endpoint(config.endpoint.clone())
                .with_timeout(config.timeout)
                .with_temporality(Temporality::Cumulative)
                .with_retry_policy(RetryPolicy::disabled())
                .with_metadata(metadata);
            if let Some(compression) = compression {
                builder = builder.with_compression(compression);
            }
            if https {
                builder = builder.with_tls_config(tonic_tls(&config.tls));
            }
            builder.build()
        }
        Protocol::HttpProtobuf => {
            let tls = rustls_config(&config.tls)?;
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .build();
            let client =
                opentelemetry_http::hyper::HyperClient::new(connector, config.timeout, None);
            let mut builder = MetricExporter::builder()
                .with_http()
                .with_endpoint(config.endpoint.clone())
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(config.timeout)
                .with_temporality(Temporality::Cumulative)
                .with_retry_policy(RetryPolicy::disabled())
                .with_http_client(client)
                .with_headers(config.headers.iter().cloned().collect::<HashMap<_, _>>());
            if let Some(compression) = compression {
                builder = builder.with_compression(compression);
            }
            builder.build()
        }
    };
    exporter.map_err(|e| ConfigError::new(ENDPOINT.field(), e.to_string()))
}

fn tonic_tls(tls: &Tls) -> ClientTlsConfig {
    let mut config = ClientTlsConfig::new();
    config = match &tls.ca {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_native_roots(),
    };
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(Identity::from_pem(cert, key));
    }
    config
}

/// The rustls client configuration for OTLP/HTTP: the given CA (else the system's roots)
/// and the client certificate, if any.
fn rustls_config(tls: &Tls) -> Result<rustls::ClientConfig, ConfigError> {
    let ca_error = |e: String| ConfigError::new(CA_FILE.field(), e);
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca {
        Some(ca) => {
            for cert in crate::pem::certificates_in(ca).map_err(|e| ca_error(e.to_string()))? {
                roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(ca_error("no certificate in the file".to_owned()));
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for error in &native.errors {
                tracing::debug!(%error, "Could not load a system CA certificate.");
            }
            let (added, _) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                tracing::warn!(
                    "No system CA certificates found: OTLP over https:// will fail without --otlp.tls.ca-file."
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::new(ENDPOINT.field(), e.to_string()))?
        .with_root_certificates(roots);
    match &tls.identity {
        Some((cert, key)) => {
            let chain = crate::pem::certificates_in(cert)
                .map_err(|e| ConfigError::new(CERT_FILE.field(), e.to_string()))?;
            let key = crate::pem::key_in(key)
                .map_err(|e| ConfigError::new(KEY_FILE.field(), e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ConfigError::new(CERT_FILE.field(), e.to_string()))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}
