//! The `--otlp.*` flags and the config file's `otlp` section, validated into an
//! [`OtlpConfig`]. An empty endpoint (the default) leaves OTLP push off.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};
use serde::Deserialize;

use crate::config::{ConfigError, config_error, parse_duration, pick};

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// OTLP/gRPC (the collector's port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (port 4318, path `/v1/metrics`).
    HttpProtobuf,
}

/// Client TLS material, read at start.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    /// PEM CA certificates to trust instead of the system's.
    pub(crate) ca: Option<Vec<u8>>,
    /// PEM client certificate chain and key, for collectors that require one.
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.is_some())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

/// Validated OTLP push settings.
#[derive(Debug, Clone)]
pub(crate) struct OtlpConfig {
    /// Where to push: for gRPC `scheme://host:port`; for HTTP the full URL of the metrics
    /// path (`/v1/metrics` is added to a URL without a path).
    pub(crate) endpoint: String,
    /// The transport.
    pub(crate) protocol: Protocol,
    /// Time between pushes.
    pub(crate) interval: Duration,
    /// Time one export attempt may take.
    pub(crate) timeout: Duration,
    /// Headers (gRPC metadata) sent with every export.
    pub(crate) headers: Vec<(String, String)>,
    /// TLS client settings (used with `https://` endpoints).
    pub(crate) tls: Tls,
    /// Whether exports are gzip-compressed.
    pub(crate) gzip: bool,
    /// Batches kept while the endpoint cannot take them; past this the oldest is dropped.
    pub(crate) queue_size: usize,
    /// Whether series with an OpenTelemetry hardware semantic-convention name are pushed
    /// under that name.
    pub(crate) hardware_semconv: bool,
}

/// The config file's `otlp` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct FileOtlp {
    endpoint: Option<String>,
    protocol: Option<String>,
    interval: Option<String>,
    timeout: Option<String>,
    headers: Option<std::collections::BTreeMap<String, String>>,
    compression: Option<String>,
    queue_size: Option<u64>,
    hardware_semconv: Option<bool>,
    #[serde(default)]
    tls: FileOtlpTls,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileOtlpTls {
    ca_file: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
}

/// Adds the `--otlp.*` flags.
pub(crate) fn args(cmd: Command) -> Command {
    let value = |name: &'static str, help: &'static str| {
        Arg::new(name).long(name).value_name("VALUE").help(help)
    };
    cmd.arg(value("otlp.endpoint", "Push every series over OTLP to this endpoint as well (http:// or https://; gRPC: the collector's host:port, e.g. http://otel-collector:4317; HTTP: its URL, /v1/metrics added when there is no path). Empty: no push"))
        .arg(value("otlp.protocol", "OTLP transport: grpc or http/protobuf").default_value("grpc"))
        .arg(value("otlp.interval", "Time between pushes; each push uses a collection shared with scrapes").default_value("60s"))
        .arg(value("otlp.timeout", "Time one export may take").default_value("10s"))
        .arg(value("otlp.headers", "Headers (gRPC metadata) for every export: key=value,key2=value2, values percent-encoded as in OTEL_EXPORTER_OTLP_HEADERS"))
        .arg(value("otlp.compression", "Compression of exports: none or gzip").default_value("none"))
        .arg(value("otlp.queue-size", "Batches kept while the endpoint is unreachable; past this the oldest is dropped and counted").default_value("10"))
        .arg(value("otlp.tls.ca-file", "PEM CA certificates to verify the endpoint with, instead of the system's"))
        .arg(value("otlp.tls.cert-file", "PEM client certificate for endpoints that require one (with --otlp.tls.key-file)"))
        .arg(value("otlp.tls.key-file", "PEM key of the client certificate"))
        .arg(
            Arg::new("otlp.hardware-semconv")
                .long("otlp.hardware-semconv")
                .action(ArgAction::SetTrue)
                .help("Push GPU and netdev series that the OpenTelemetry hardware semantic conventions name (hw.gpu.*, hw.network.*, hw.energy, hw.errors) under those names instead of railscope's"),
        )
}

fn field(id: &str) -> String {
    format!("--{id} (otlp.{})", id.trim_start_matches("otlp."))
}

/// The OTLP settings, or `None` when no endpoint is set.
pub(crate) fn from_matches(
    matches: &ArgMatches,
    file: FileOtlp,
) -> Result<Option<OtlpConfig>, ConfigError> {
    let endpoint = pick(matches, "otlp.endpoint", file.endpoint);
    if endpoint.trim().is_empty() {
        return Ok(None);
    }
    let protocol = match pick(matches, "otlp.protocol", file.protocol).as_str() {
        "grpc" => Protocol::Grpc,
        "http/protobuf" => Protocol::HttpProtobuf,
        other => {
            return Err(config_error(
                field("otlp.protocol"),
                format!("{other:?} is not one of grpc, http/protobuf"),
            ));
        }
    };
    let endpoint = endpoint_url(endpoint.trim(), protocol)
        .map_err(|reason| config_error(field("otlp.endpoint"), reason))?;
    let positive = |id: &str, file: Option<String>| {
        parse_duration(&pick(matches, id, file))
            .filter(|d| !d.is_zero())
            .ok_or_else(|| config_error(field(id), "expected a positive duration such as 60s"))
    };
    let interval = positive("otlp.interval", file.interval)?;
    let timeout = positive("otlp.timeout", file.timeout)?;
    let headers = match (
        matches.value_source("otlp.headers") == Some(clap::parser::ValueSource::CommandLine),
        file.headers,
    ) {
        (false, Some(map)) => map
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect(),
        _ => parse_headers(
            matches
                .get_one::<String>("otlp.headers")
                .map_or("", String::as_str),
        )
        .map_err(|reason| config_error(field("otlp.headers"), reason))?,
    };
    for (key, value) in &headers {
        validate_header(key, value)
            .map_err(|reason| config_error(field("otlp.headers"), reason))?;
    }
    let gzip = match pick(matches, "otlp.compression", file.compression).as_str() {
        "none" => false,
        "gzip" => true,
        other => {
            return Err(config_error(
                field("otlp.compression"),
                format!("{other:?} is not one of none, gzip"),
            ));
        }
    };
    let queue_size = pick(
        matches,
        "otlp.queue-size",
        file.queue_size.map(|n| n.to_string()),
    )
    .parse::<usize>()
    .ok()
    .filter(|n| (1..=10_000).contains(n))
    .ok_or_else(|| {
        config_error(
            field("otlp.queue-size"),
            "expected a whole number from 1 to 10000",
        )
    })?;
    let hardware_semconv =
        matches.get_flag("otlp.hardware-semconv") || file.hardware_semconv.unwrap_or(false);
    let tls = tls(matches, file.tls)?;
    if !endpoint.starts_with("https://") && (tls.ca.is_some() || tls.identity.is_some()) {
        return Err(config_error(
            field("otlp.endpoint"),
            "TLS files are given but the endpoint is not https://",
        ));
    }
    Ok(Some(OtlpConfig {
        endpoint,
        protocol,
        interval,
        timeout,
        headers,
        tls,
        gzip,
        queue_size,
        hardware_semconv,
    }))
}

/// Checks the endpoint and completes an HTTP one with the metrics path.
fn endpoint_url(text: &str, protocol: Protocol) -> Result<String, String> {
    let uri: hyper::Uri = text
        .parse()
        .map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(format!("{text:?} must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{text:?} has no host"));
    }
    let path = uri.path();
    match protocol {
        Protocol::HttpProtobuf if path.is_empty() || path == "/" => {
            Ok(format!("{}/v1/metrics", text.trim_end_matches('/')))
        }
        Protocol::HttpProtobuf => Ok(text.to_owned()),
        Protocol::Grpc if path.is_empty() || path == "/" => {
            Ok(text.trim_end_matches('/').to_owned())
        }
        Protocol::Grpc => Err(format!(
            "{text:?}: a gRPC endpoint is scheme://host:port without a path"
        )),
    }
}

/// Parses `key=value,key2=value2` (values percent-encoded, as in
/// `OTEL_EXPORTER_OTLP_HEADERS`).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not key=value"))?;
        // gRPC metadata keys are lower case; HTTP header names are case-insensitive.
        out.push((
            key.trim().to_ascii_lowercase(),
            percent_decode(value.trim())?,
        ));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{text:?} has a bad percent escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} does not decode to UTF-8"))
}

fn validate_header(key: &str, value: &str) -> Result<(), String> {
    hyper::header::HeaderName::from_bytes(key.as_bytes())
        .map_err(|_| format!("{key:?} is not a valid header name"))?;
    hyper::header::HeaderValue::from_str(value)
        .map_err(|_| format!("the value of {key:?} is not a valid header value"))?;
    Ok(())
}

fn tls(matches: &ArgMatches, file: FileOtlpTls) -> Result<Tls, ConfigError> {
    let path = |id: &str, file: Option<String>| {
        Some(pick(matches, id, file))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let read = |id: &str, path: &PathBuf| {
        std::fs::read(path)
            .map_err(|e| config_error(field(id), format!("cannot read {}: {e}", path.display())))
    };
    let ca = path("otlp.tls.ca-file", file.ca_file)
        .map(|p| read("otlp.tls.ca-file", &p))
        .transpose()?;
    let cert = path("otlp.tls.cert-file", file.cert_file);
    let key = path("otlp.tls.key-file", file.key_file);
    let identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((
            read("otlp.tls.cert-file", &cert)?,
            read("otlp.tls.key-file", &key)?,
        )),
        (None, None) => None,
        (Some(_), None) => {
            return Err(config_error(
                field("otlp.tls.key-file"),
                "a client certificate needs its key",
            ));
        }
        (None, Some(_)) => {
            return Err(config_error(
                field("otlp.tls.cert-file"),
                "a client key needs its certificate",
            ));
        }
    };
    validate_pem(&ca, &identity)?;
    Ok(Tls { ca, identity })
}

/// Checks at start that the TLS files hold what they should, so a bad file stops start-up
/// naming its flag rather than failing every export.
fn validate_pem(
    ca: &Option<Vec<u8>>,
    identity: &Option<(Vec<u8>, Vec<u8>)>,
) -> Result<(), ConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certificates = |id: &str, pem: &[u8]| match CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(list) if !list.is_empty() => Ok(()),
        Ok(_) => Err(config_error(field(id), "no PEM certificate in the file")),
        Err(e) => Err(config_error(
            field(id),
            format!("not a PEM certificate: {e}"),
        )),
    };
    if let Some(ca) = ca {
        certificates("otlp.tls.ca-file", ca)?;
    }
    if let Some((cert, key)) = identity {
        certificates("otlp.tls.cert-file", cert)?;
        PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            config_error(
                field("otlp.tls.key-file"),
                format!("not a PEM private key: {e}"),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint_url("http://collector:4318", Protocol::HttpProtobuf).unwrap(),
            "http://collector:4318/v1/metrics"
        );
        assert_eq!(
            endpoint_url("https://collector:4318/", Protocol::HttpProtobuf).unwrap(),
            "https://collector:4318/v1/metrics"
        );
        assert_eq!(
            endpoint_url("http://gw/otlp/v1/metrics", Protocol::HttpProtobuf).unwrap(),
            "http://gw/otlp/v1/metrics"
        );
        assert_eq!(
            endpoint_url("http://collector:4317/", Protocol::Grpc).unwrap(),
            "http://collector:4317"
        );
        assert!(endpoint_url("collector:4317", Protocol::Grpc).is_err());
        assert!(endpoint_url("ftp://collector", Protocol::Grpc).is_err());
        assert!(endpoint_url("http://collector:4317/v1", Protocol::Grpc).is_err());
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_headers("api-key=a%20b, x-scope-orgid=fleet").unwrap(),
            vec![
                ("api-key".to_owned(), "a b".to_owned()),
                ("x-scope-orgid".to_owned(), "fleet".to_owned())
            ]
        );
        assert!(parse_headers("novalue").is_err());
        assert!(parse_headers("k=%zz").is_err());
        assert!(validate_header("Bad Name", "v").is_err());
        assert_eq!(parse_headers("Api-Key=x").unwrap()[0].0, "api-key");
        assert!(validate_header("ok", "line\nbreak").is_err());
    }
}
