//! OTLP push's settings: `--otlp.*`, the config file's `otlp` section, validated into an
//! [`OtlpConfig`]. An empty endpoint (the default) leaves OTLP push off. The TLS files are
//! read and checked here, at start, so a bad one stops start-up naming its flag rather than
//! failing every export.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Command};
use serde::Deserialize;
use serde_json::Value as Json;

use super::error::ConfigError;
use super::value::{
    File, Rejected, Setting, Switch, Value, choice, positive, reject, text_from_file,
};

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

impl Value for Protocol {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(
            text,
            &[
                ("grpc", Protocol::Grpc),
                ("http/protobuf", Protocol::HttpProtobuf),
            ],
        )
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

/// Export headers: `key=value,key2=value2` on the command line (values percent-encoded, as
/// in `OTEL_EXPORTER_OTLP_HEADERS`), a map in the file. Keys are lower case (gRPC metadata
/// keys are; HTTP header names are case-insensitive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Headers(Vec<(String, String)>);

impl Value for Headers {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        let headers = parse_headers(text)?;
        for (key, value) in &headers {
            validate_header(key, value)?;
        }
        Ok(Headers(headers))
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        let map = BTreeMap::<String, String>::deserialize(value)
            .map_err(|_| reject("expected a map of header names to values"))?;
        let headers: Vec<(String, String)> = map
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        for (key, value) in &headers {
            validate_header(key, value)?;
        }
        Ok(Headers(headers))
    }
}

/// Whether exports are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gzip(bool);

impl Value for Gzip {
    fn from_text(text: &str) -> Result<Self, Rejected> {
        choice(text, &[("none", Gzip(false)), ("gzip", Gzip(true))])
    }
    fn from_file(value: Json) -> Result<Self, Rejected> {
        text_from_file(value)
    }
}

pub(crate) const ENDPOINT: Setting<String> = Setting::new(
    "otlp.endpoint",
    "otlp.endpoint",
    "Push every series over OTLP to this endpoint as well (http:// or https://; gRPC: the collector's host:port, e.g. http://otel-collector:4317; HTTP: its URL, /v1/metrics added when there is no path). Empty: no push",
    "expected a URL",
);
const PROTOCOL: Setting<Protocol> = Setting::new(
    "otlp.protocol",
    "otlp.protocol",
    "OTLP transport: grpc or http/protobuf",
    "expected one of grpc, http/protobuf",
)
.default("grpc");
const INTERVAL: Setting<Duration> = Setting::new(
    "otlp.interval",
    "otlp.interval",
    "Time between pushes; each push uses a collection shared with scrapes",
    "expected a positive duration such as 60s",
)
.default("60s")
.check(positive);
const TIMEOUT: Setting<Duration> = Setting::new(
    "otlp.timeout",
    "otlp.timeout",
    "Time one export may take",
    "expected a positive duration such as 60s",
)
.default("10s")
.check(positive);
pub(crate) const HEADERS: Setting<Headers> = Setting::new(
    "otlp.headers",
    "otlp.headers",
    "Headers (gRPC metadata) for every export: key=value,key2=value2, values percent-encoded as in OTEL_EXPORTER_OTLP_HEADERS",
    "expected key=value,key2=value2",
);
const COMPRESSION: Setting<Gzip> = Setting::new(
    "otlp.compression",
    "otlp.compression",
    "Compression of exports: none or gzip",
    "expected one of none, gzip",
)
.default("none");
const QUEUE_SIZE: Setting<usize> = Setting::new(
    "otlp.queue-size",
    "otlp.queue-size",
    "Batches kept while the endpoint is unreachable; past this the oldest is dropped and counted",
    "expected a whole number from 1 to 10000",
)
.default("10")
.check(|n| (1..=10_000).contains(n));
pub(crate) const CA_FILE: Setting<PathBuf> = Setting::new(
    "otlp.tls.ca-file",
    "otlp.tls.ca-file",
    "PEM CA certificates to verify the endpoint with, instead of the system's",
    "expected a path",
);
pub(crate) const CERT_FILE: Setting<PathBuf> = Setting::new(
    "otlp.tls.cert-file",
    "otlp.tls.cert-file",
    "PEM client certificate for endpoints that require one (with --otlp.tls.key-file)",
    "expected a path",
);
pub(crate) const KEY_FILE: Setting<PathBuf> = Setting::new(
    "otlp.tls.key-file",
    "otlp.tls.key-file",
    "PEM key of the client certificate",
    "expected a path",
);
const HARDWARE_SEMCONV: Switch = Switch {
    flag: "otlp.hardware-semconv",
    key: "otlp.hardware-semconv",
    help: "Push GPU and netdev series that the OpenTelemetry hardware semantic conventions name (hw.gpu.*, hw.network.*, hw.energy, hw.errors) under those names instead of railscope's",
};

/// Adds the `--otlp.*` flags.
pub(crate) fn args(cmd: Command) -> Command {
    cmd.arg(ENDPOINT.arg())
        .arg(PROTOCOL.arg())
        .arg(INTERVAL.arg())
        .arg(TIMEOUT.arg())
        .arg(HEADERS.arg())
        .arg(COMPRESSION.arg())
        .arg(QUEUE_SIZE.arg())
        .arg(CA_FILE.arg())
        .arg(CERT_FILE.arg())
        .arg(KEY_FILE.arg())
        .arg(HARDWARE_SEMCONV.arg())
}

/// The OTLP settings, or `None` when no endpoint is set (the other keys are then taken and
/// not checked: they configure nothing).
pub(crate) fn from_matches(
    matches: &ArgMatches,
    file: &mut File,
) -> Result<Option<OtlpConfig>, ConfigError> {
    let endpoint = ENDPOINT.get_opt(matches, file);
    let protocol = PROTOCOL.get(matches, file);
    let interval = INTERVAL.get(matches, file);
    let timeout = TIMEOUT.get(matches, file);
    let headers = HEADERS.get_opt(matches, file);
    let gzip = COMPRESSION.get(matches, file);
    let queue_size = QUEUE_SIZE.get(matches, file);
    let ca_file = CA_FILE.get_opt(matches, file);
    let cert_file = CERT_FILE.get_opt(matches, file);
    let key_file = KEY_FILE.get_opt(matches, file);
    let hardware_semconv = HARDWARE_SEMCONV.get(matches, file);
    let endpoint = endpoint?.unwrap_or_default();
    if endpoint.trim().is_empty() {
        return Ok(None);
    }
    let protocol = protocol?;
    let endpoint = endpoint_url(endpoint.trim(), protocol).map_err(|r| ENDPOINT.rejected(r))?;
    let (interval, timeout) = (interval?, timeout?);
    let headers = headers?.unwrap_or_default().0;
    let gzip = gzip?.0;
    let queue_size = queue_size?;
    let hardware_semconv = hardware_semconv?;
    let nonempty = |p: Option<PathBuf>| p.filter(|p| !p.as_os_str().is_empty());
    let tls = tls(
        nonempty(ca_file?),
        nonempty(cert_file?),
        nonempty(key_file?),
    )?;
    if !endpoint.starts_with("https://") && (tls.ca.is_some() || tls.identity.is_some()) {
        return Err(ConfigError::new(
            ENDPOINT.field(),
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
fn endpoint_url(text: &str, protocol: Protocol) -> Result<String, Rejected> {
    let uri: hyper::Uri = text
        .parse()
        .map_err(|e| reject(format!("{text:?} is not a URL: {e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => {
            return Err(reject(format!(
                "{text:?} must start with http:// or https://"
            )));
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(reject(format!("{text:?} has no host")));
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
        Protocol::Grpc => Err(reject(format!(
            "{text:?}: a gRPC endpoint is scheme://host:port without a path"
        ))),
    }
}

/// Parses `key=value,key2=value2` (values percent-encoded, as in
/// `OTEL_EXPORTER_OTLP_HEADERS`).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, Rejected> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| reject(format!("{item:?} is not key=value")))?;
        // gRPC metadata keys are lower case; HTTP header names are case-insensitive.
        out.push((
            key.trim().to_ascii_lowercase(),
            percent_decode(value.trim())?,
        ));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, Rejected> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| reject(format!("{text:?} has a bad percent escape")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| reject(format!("{text:?} does not decode to UTF-8")))
}

fn validate_header(key: &str, value: &str) -> Result<(), Rejected> {
    hyper::header::HeaderName::from_bytes(key.as_bytes())
        .map_err(|_| reject(format!("{key:?} is not a valid header name")))?;
    hyper::header::HeaderValue::from_str(value)
        .map_err(|_| reject(format!("the value of {key:?} is not a valid header value")))?;
    Ok(())
}

/// Reads the TLS files and checks that they hold what they should.
fn tls(
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
) -> Result<Tls, ConfigError> {
    let read = |setting: &Setting<PathBuf>, path: &PathBuf| {
        std::fs::read(path).map_err(|e| {
            ConfigError::new(
                setting.field(),
                format!("cannot read {}: {e}", path.display()),
            )
        })
    };
    let ca = ca_file.map(|p| read(&CA_FILE, &p)).transpose()?;
    let identity = match (cert_file, key_file) {
        (Some(cert), Some(key)) => Some((read(&CERT_FILE, &cert)?, read(&KEY_FILE, &key)?)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(ConfigError::new(
                KEY_FILE.field(),
                "a client certificate needs its key",
            ));
        }
        (None, Some(_)) => {
            return Err(ConfigError::new(
                CERT_FILE.field(),
                "a client key needs its certificate",
            ));
        }
    };
    let certificates =
        |setting: &Setting<PathBuf>, pem: &[u8]| match crate::pem::certificates_in(pem) {
            Ok(list) if !list.is_empty() => Ok(()),
            Ok(_) => Err(ConfigError::new(
                setting.field(),
                "no PEM certificate in the file",
            )),
            Err(e) => Err(ConfigError::new(
                setting.field(),
                format!("not a PEM certificate: {e}"),
            )),
        };
    if let Some(ca) = &ca {
        certificates(&CA_FILE, ca)?;
    }
    if let Some((cert, key)) = &identity {
        certificates(&CERT_FILE, cert)?;
        crate::pem::key_in(key).map_err(|e| {
            ConfigError::new(KEY_FILE.field(), format!("not a PEM private key: {e}"))
        })?;
    }
    Ok(Tls { ca, identity })
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
