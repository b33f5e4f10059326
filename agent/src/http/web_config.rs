//! The web configuration file (`--web.config.file`): TLS, basic auth and response headers,
//! in the format of Prometheus' exporter-toolkit (`docs/web-configuration.md` there), so one
//! file serves railscope and every other exporter on a node.
//!
//! [`load`] parses and validates a file into a [`WebConfig`]: every bcrypt hash is checked,
//! the certificate, key and client CA are read and turned into a rustls
//! [`ServerConfig`](rustls::ServerConfig) (ring provider), cipher suites and curves are mapped
//! by name to rustls constants. An invalid file is a [`WebConfigError`] that names the key.
//! [`WebState`] holds the live configuration; [`WebState::reload_if_changed`] re-reads it
//! when the file, the certificate, the key or the client CA changes (by modification time,
//! size and inode), keeping the old configuration when the new one is invalid.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use axum::http::{HeaderName, HeaderValue};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, SupportedKxGroup, ring};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme, SupportedCipherSuite};
use serde::Deserialize;

/// An invalid web configuration: the key (`tls_server_config.client_auth_type`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub(crate) struct WebConfigError {
    /// The key, dotted from the top of the file; empty when the file as a whole is at fault
    /// (unreadable, not YAML, an unknown key: the reason names it).
    pub(crate) field: String,
    /// What is wrong with it.
    pub(crate) reason: String,
}

fn error(field: impl Into<String>, reason: impl Into<String>) -> WebConfigError {
    WebConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The bcrypt hash unknown users are checked against, so that an unknown user costs as much
/// time as a known one (no user enumeration by timing). The password is "fakepassword"; the
/// same hash exporter-toolkit uses.
pub(crate) const FAKE_BCRYPT_HASH: &str =
    "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

/// Response headers that may be configured, with their allowed values (`None`: any value);
/// exporter-toolkit's list.
const ALLOWED_HEADERS: &[(&str, Option<&[&str]>)] = &[
    ("Strict-Transport-Security", None),
    ("X-Content-Type-Options", Some(&["nosniff"])),
    ("X-Frame-Options", Some(&["deny", "sameorigin"])),
    ("X-XSS-Protection", None),
    ("Content-Security-Policy", None),
];

/// TLS 1.2 cipher suites by their Go (`crypto/tls`) names. TLS 1.3 suites are always on,
/// as in Go.
const CIPHER_SUITES: &[(&str, SupportedCipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// TLS 1.3 suite names Go accepts in `cipher_suites`; they are always enabled.
const TLS13_SUITE_NAMES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Go names of suites rustls does not implement (CBC, RC4, 3DES, static RSA key exchange).
const UNSUPPORTED_SUITE_NAMES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Key exchange groups by their Go names.
const CURVES: &[(&str, &dyn SupportedKxGroup)] = &[
    ("X25519", ring::kx_group::X25519),
    ("CurveP256", ring::kx_group::SECP256R1),
    ("CurveP384", ring::kx_group::SECP384R1),
];

/// Go curve names the ring provider does not implement.
const UNSUPPORTED_CURVE_NAMES: &[&str] = &["CurveP521", "X25519MLKEM768"];

/// The file's schema (exporter-toolkit's `web.Config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWebConfig {
    tls_server_config: Option<FileTls>,
    http_server_config: Option<FileHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_ca_file: Option<String>,
    client_auth_type: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    cert: Option<serde::de::IgnoredAny>,
    key: Option<serde::de::IgnoredAny>,
    client_ca: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// How a client certificate is asked for and checked (Go's `tls.ClientAuthType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// No client certificate is requested.
    NoClientCert,
    /// One is requested; none or any is accepted, unverified.
    RequestClientCert,
    /// One is required; any is accepted, unverified.
    RequireAnyClientCert,
    /// None is accepted; one given must chain to `client_ca_file`.
    VerifyClientCertIfGiven,
    /// One is required and must chain to `client_ca_file`.
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    const NAMES: &[(&str, ClientAuth)] = &[
        ("NoClientCert", ClientAuth::NoClientCert),
        ("RequestClientCert", ClientAuth::RequestClientCert),
        ("RequireAnyClientCert", ClientAuth::RequireAnyClientCert),
        // exporter-toolkit's older name for RequireAnyClientCert.
        ("RequireClientCert", ClientAuth::RequireAnyClientCert),
        (
            "VerifyClientCertIfGiven",
            ClientAuth::VerifyClientCertIfGiven,
        ),
        (
            "RequireAndVerifyClientCert",
            ClientAuth::RequireAndVerifyClientCert,
        ),
    ];

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// A validated web configuration.
#[derive(Debug, Clone)]
pub(crate) struct WebConfig {
    /// The TLS server configuration; `None` serves plain HTTP.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth users and their bcrypt hashes; empty: no authentication.
    pub(crate) users: BTreeMap<String, String>,
    /// Headers added to every response.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    /// `http_server_config.http2` as given (default true). railscope serves HTTP/1.1 only,
    /// so it has no effect; it is accepted so that one file serves every exporter.
    pub(crate) http2: bool,
    /// The files this configuration was read from: the web config file, then the
    /// certificate, key and client CA files it names.
    pub(crate) files: Vec<PathBuf>,
}

impl WebConfig {
    /// No TLS, no users, no headers: what runs without `--web.config.file`.
    pub(crate) fn plain() -> WebConfig {
        WebConfig {
            tls: None,
            users: BTreeMap::new(),
            headers: Vec::new(),
            http2: true,
            files: Vec::new(),
        }
    }
}

/// Reads and validates the web configuration file at `path`. Relative file names in it are
/// relative to the file's directory, as in exporter-toolkit.
pub(crate) fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| error("", format!("cannot read: {e}")))?;
    let file = if text.trim().is_empty() {
        FileWebConfig::default()
    } else {
        serde_saphyr::from_str::<FileWebConfig>(&text).map_err(|e| error("", e.to_string()))?
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut config = WebConfig::plain();
    config.files.push(path.to_path_buf());
    if file.rate_limit.is_some() {
        return Err(error(
            "rate_limit",
            "not supported; --web.max-requests bounds concurrent scrapes",
        ));
    }
    if let Some(http) = file.http_server_config {
        config.http2 = http.http2.unwrap_or(true);
        for (name, value) in http.headers.unwrap_or_default() {
            config.headers.push(validate_header(&name, &value)?);
        }
    }
    for (user, hash) in file.basic_auth_users.unwrap_or_default() {
        let field = format!("basic_auth_users.{user}");
        if user.is_empty() || user.contains(':') {
            return Err(error(
                field,
                "a user name must be non-empty and contain no ':'",
            ));
        }
        hash.parse::<bcrypt::HashParts>()
            .map_err(|e| error(&field, format!("not a bcrypt hash: {e}")))?;
        config.users.insert(user, hash);
    }
    // Files last: every key is checked before any certificate is read.
    if let Some(tls) = file.tls_server_config {
        config.tls = build_tls(&tls, dir, &mut config.files)?;
    }
    Ok(config)
}

fn validate_header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), WebConfigError> {
    let field = format!("http_server_config.headers.{name}");
    let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
        let known: Vec<_> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
        return Err(error(
            field,
            format!(
                "this header can not be configured (allowed: {})",
                known.join(", ")
            ),
        ));
    };
    if let Some(values) = allowed
        && !values.contains(&value)
    {
        return Err(error(
            field,
            format!(
                "invalid value {value:?} (expected one of: {})",
                values.join(", ")
            ),
        ));
    }
    let header_name =
        HeaderName::from_bytes(name.as_bytes()).map_err(|e| error(&field, e.to_string()))?;
    let header_value =
        HeaderValue::from_str(value).map_err(|e| error(&field, format!("invalid value: {e}")))?;
    Ok((header_name, header_value))
}

fn resolve(dir: &Path, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

fn nonempty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|s| !s.is_empty())
}

fn tls_version(field: &str, name: &str) -> Result<u8, WebConfigError> {
    match name {
        "TLS12" => Ok(12),
        "TLS13" => Ok(13),
        "TLS10" | "TLS11" => Err(error(
            field,
            format!("{name:?} is not supported (rustls implements TLS12 and TLS13)"),
        )),
        other => Err(error(
            field,
            format!("unknown value {other:?} (known: TLS12, TLS13)"),
        )),
    }
}

/// The section that [`build_tls`] reads: the prefix of every key its errors name.
const TLS: &str = "tls_server_config";

/// Checks `tls_server_config` and reads its files into a rustls configuration; `None` for a
/// section without certificate and key. Every key is checked before any file is read.
fn build_tls(
    tls: &FileTls,
    dir: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Option<Arc<rustls::ServerConfig>>, WebConfigError> {
    reject_inline_pem(tls)?;
    let Some((cert_file, key_file)) = cert_and_key_files(tls, dir)? else {
        return Ok(None);
    };
    files.push(cert_file.clone());
    files.push(key_file.clone());
    let (client_auth, client_ca) = client_auth(tls, dir)?;
    if let Some(ca) = &client_ca {
        files.push(ca.clone());
    }
    let (min, versions) = protocol_versions(tls)?;
    let provider = Arc::new(crypto_provider(tls, min)?);

    let (certs, key) = read_cert_and_key(&cert_file, &key_file)?;
    let verifier = client_verifier(client_auth, client_ca.as_deref(), &provider)?;
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| error(format!("{TLS}.min_version"), e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| {
            error(
                format!("{TLS}.key_file"),
                format!(
                    "{} does not fit {}: {e}",
                    key_file.display(),
                    cert_file.display()
                ),
            )
        })?;
    // The server's suite order wins when asked (Go's prefer_server_cipher_suites).
    server.ignore_client_order = tls.prefer_server_cipher_suites.unwrap_or(false);
    // HTTP/1.1 is all railscope serves.
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(server)))
}

/// exporter-toolkit's inline `cert`, `key` and `client_ca` (PEM in the file itself) are
/// not supported; the error names the `_file` key to use instead.
fn reject_inline_pem(tls: &FileTls) -> Result<(), WebConfigError> {
    for (key, present) in [
        ("cert", tls.cert.is_some()),
        ("key", tls.key.is_some()),
        ("client_ca", tls.client_ca.is_some()),
    ] {
        if present {
            return Err(error(
                format!("{TLS}.{key}"),
                format!("inline PEM is not supported; use {key}_file"),
            ));
        }
    }
    Ok(())
}

/// The certificate and key files, resolved against `dir`; `None` when neither is given.
fn cert_and_key_files(
    tls: &FileTls,
    dir: &Path,
) -> Result<Option<(PathBuf, PathBuf)>, WebConfigError> {
    match (nonempty(&tls.cert_file), nonempty(&tls.key_file)) {
        // As in exporter-toolkit: a TLS section without certificate and key serves plain HTTP.
        (None, None) => {
            if nonempty(&tls.client_ca_file).is_some() {
                return Err(error(
                    format!("{TLS}.client_ca_file"),
                    "given without cert_file and key_file",
                ));
            }
            Ok(None)
        }
        (Some(_), None) => Err(error(format!("{TLS}.key_file"), "missing")),
        (None, Some(_)) => Err(error(format!("{TLS}.cert_file"), "missing")),
        (Some(c), Some(k)) => Ok(Some((resolve(dir, c), resolve(dir, k)))),
    }
}

/// `client_auth_type` and the client CA file (resolved against `dir`), checked against
/// each other.
fn client_auth(tls: &FileTls, dir: &Path) -> Result<(ClientAuth, Option<PathBuf>), WebConfigError> {
    let client_auth = match tls.client_auth_type.as_deref() {
        None | Some("") => ClientAuth::NoClientCert,
        Some(name) => by_go_name(
            ClientAuth::NAMES,
            &[],
            "",
            &format!("{TLS}.client_auth_type"),
            name,
        )?,
    };
    let client_ca = nonempty(&tls.client_ca_file).map(|f| resolve(dir, f));
    match (&client_ca, client_auth) {
        (Some(_), ClientAuth::NoClientCert) => {
            return Err(error(
                format!("{TLS}.client_ca_file"),
                "given with client_auth_type NoClientCert (set a client_auth_type)",
            ));
        }
        (None, auth) if auth.verifies() => {
            return Err(error(
                format!("{TLS}.client_ca_file"),
                format!(
                    "missing: client_auth_type {auth:?} verifies client certificates against it"
                ),
            ));
        }
        _ => {}
    }
    if tls
        .client_allowed_sans
        .as_ref()
        .is_some_and(|s| !s.is_empty())
    {
        return Err(error(
            format!("{TLS}.client_allowed_sans"),
            "not supported; issue client certificates from a dedicated client_ca_file",
        ));
    }
    Ok((client_auth, client_ca))
}

/// `min_version` (default TLS12) and the protocol versions from it to `max_version`
/// (default TLS13).
fn protocol_versions(
    tls: &FileTls,
) -> Result<(u8, Vec<&'static rustls::SupportedProtocolVersion>), WebConfigError> {
    let min = tls_version(
        &format!("{TLS}.min_version"),
        tls.min_version.as_deref().unwrap_or("TLS12"),
    )?;
    let max = tls_version(
        &format!("{TLS}.max_version"),
        tls.max_version.as_deref().unwrap_or("TLS13"),
    )?;
    if min > max {
        return Err(error(format!("{TLS}.min_version"), "is above max_version"));
    }
    let versions = [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(v, _)| (min..=max).contains(v))
        .map(|(_, p)| p)
        .collect();
    Ok((min, versions))
}

/// The ring provider, narrowed to `cipher_suites` and `curve_preferences` when given.
/// `min` is the lowest TLS version, which needs a TLS 1.2 suite when it is 12.
fn crypto_provider(tls: &FileTls, min: u8) -> Result<CryptoProvider, WebConfigError> {
    let mut provider = ring::default_provider();
    if let Some(names) = &tls.cipher_suites {
        let field = format!("{TLS}.cipher_suites");
        let mut suites: Vec<SupportedCipherSuite> = provider
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some())
            .copied()
            .collect();
        for name in names {
            if TLS13_SUITE_NAMES.contains(&name.as_str()) {
                continue;
            }
            let suite = by_go_name(
                CIPHER_SUITES,
                UNSUPPORTED_SUITE_NAMES,
                "rustls",
                &field,
                name,
            )?;
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        if min == 12 && !suites.iter().any(|s| s.tls13().is_none()) {
            return Err(error(
                field,
                "no TLS 1.2 cipher suite left while min_version is TLS12",
            ));
        }
        provider.cipher_suites = suites;
    }
    if let Some(names) = &tls.curve_preferences {
        let field = format!("{TLS}.curve_preferences");
        let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
        for name in names {
            let group = by_go_name(
                CURVES,
                UNSUPPORTED_CURVE_NAMES,
                "the ring provider",
                &field,
                name,
            )?;
            if !groups.iter().any(|g| g.name() == group.name()) {
                groups.push(group);
            }
        }
        if groups.is_empty() {
            return Err(error(field, "empty"));
        }
        provider.kx_groups = groups;
    }
    Ok(provider)
}

/// Looks `name` up in a table of Go names. A name in `unsupported` is one Go knows that
/// `implementor` (rustls, the ring provider) does not; any other is unknown, and the error
/// for `field` lists the table.
fn by_go_name<T: Copy>(
    table: &[(&str, T)],
    unsupported: &[&str],
    implementor: &str,
    field: &str,
    name: &str,
) -> Result<T, WebConfigError> {
    if let Some((_, value)) = table.iter().find(|(n, _)| *n == name) {
        return Ok(*value);
    }
    if unsupported.contains(&name) {
        return Err(error(
            field,
            format!("{name:?} is not supported by {implementor}"),
        ));
    }
    let known: Vec<_> = table.iter().map(|(n, _)| *n).collect();
    Err(error(
        field,
        format!("unknown value {name:?} (known: {})", known.join(", ")),
    ))
}

/// The certificate chain and the private key, read from their PEM files.
fn read_cert_and_key(
    cert_file: &Path,
    key_file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), WebConfigError> {
    let certs = crate::pem::certificates_in_file(cert_file).map_err(|e| {
        error(
            format!("{TLS}.cert_file"),
            format!("{}: {e}", cert_file.display()),
        )
    })?;
    if certs.is_empty() {
        return Err(error(
            format!("{TLS}.cert_file"),
            format!("{}: no certificate in it", cert_file.display()),
        ));
    }
    let key = crate::pem::key_in_file(key_file).map_err(|e| {
        error(
            format!("{TLS}.key_file"),
            format!("{}: {e}", key_file.display()),
        )
    })?;
    Ok((certs, key))
}

/// How client certificates are checked: not at all, accepted unverified, or chained to
/// the client CA file (already checked to be there when `client_auth` verifies).
fn client_verifier(
    client_auth: ClientAuth,
    client_ca: Option<&Path>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, WebConfigError> {
    Ok(match client_auth {
        ClientAuth::NoClientCert => Arc::new(rustls::server::NoClientAuth),
        ClientAuth::RequestClientCert | ClientAuth::RequireAnyClientCert => {
            Arc::new(AnyClientCert {
                mandatory: client_auth == ClientAuth::RequireAnyClientCert,
                provider: Arc::clone(provider),
            })
        }
        ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
            let field = format!("{TLS}.client_ca_file");
            let ca = client_ca.ok_or_else(|| error(&field, "missing"))?;
            let mut roots = rustls::RootCertStore::empty();
            let cas = crate::pem::certificates_in_file(ca)
                .map_err(|e| error(&field, format!("{}: {e}", ca.display())))?;
            let (added, _) = roots.add_parsable_certificates(cas);
            if added == 0 {
                return Err(error(
                    field,
                    format!("{}: no usable CA certificate in it", ca.display()),
                ));
            }
            let builder =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider));
            let builder = if client_auth == ClientAuth::VerifyClientCertIfGiven {
                builder.allow_unauthenticated()
            } else {
                builder
            };
            builder
                .build()
                .map_err(|e| error(field, format!("{}: {e}", ca.display())))?
        }
    })
}

/// `RequestClientCert` / `RequireAnyClientCert`: asks for a certificate and accepts any (as
/// Go does), still checking that the client holds its key.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What identifies a file's version: modification time, size and inode (a Kubernetes
/// Secret update swaps a symlink, which changes the inode).
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamps(files: &[PathBuf]) -> Vec<Stamp> {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|f| {
            std::fs::metadata(f)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len(), m.ino())))
        })
        .collect()
}

/// The live web configuration, swapped when its files change.
#[derive(Debug)]
pub(crate) struct WebState {
    path: Option<PathBuf>,
    current: RwLock<Arc<WebConfig>>,
    seen: std::sync::Mutex<Vec<Stamp>>,
}

impl WebState {
    /// The state for `config`, loaded from `path` (`None`: no web config file).
    pub(crate) fn new(path: Option<PathBuf>, config: WebConfig) -> WebState {
        let seen = stamps(&config.files);
        WebState {
            path,
            current: RwLock::new(Arc::new(config)),
            seen: std::sync::Mutex::new(seen),
        }
    }

    /// Whether a web config file is watched.
    pub(crate) fn has_file(&self) -> bool {
        self.path.is_some()
    }

    /// The configuration in force.
    pub(crate) fn current(&self) -> Arc<WebConfig> {
        match self.current.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Re-reads the configuration when one of its files changed since the last look.
    /// A new configuration that is invalid, or that would turn TLS on or off (that needs a
    /// restart: the listener's protocol is fixed), is logged once and the old one kept.
    pub(crate) fn reload_if_changed(&self) {
        let Some(path) = &self.path else { return };
        let current = self.current();
        let now = stamps(&current.files);
        {
            let mut seen = match self.seen.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if *seen == now {
                return;
            }
            *seen = now;
        }
        match load(path) {
            Ok(new) if new.tls.is_some() != current.tls.is_some() => {
                tracing::error!(
                    path = %path.display(),
                    "Web config changed TLS on or off; that needs a restart. Keeping the previous web config."
                );
            }
            Ok(new) => {
                let stamped = stamps(&new.files);
                tracing::info!(path = %path.display(), "Reloaded the web config.");
                if let Ok(mut seen) = self.seen.lock() {
                    *seen = stamped;
                }
                match self.current.write() {
                    Ok(mut guard) => *guard = Arc::new(new),
                    Err(poisoned) => *poisoned.into_inner() = Arc::new(new),
                }
            }
            Err(error) => {
                tracing::error!(
                    path = %path.display(),
                    %error,
                    "Invalid web config; keeping the previous one."
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<WebConfig, WebConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        std::fs::write(&path, text).unwrap();
        load(&path)
    }

    fn field_of(text: &str) -> String {
        load_text(text).unwrap_err().field
    }

    #[test]
    fn empty_and_plain() {
        let c = load_text("").unwrap();
        assert!(c.tls.is_none() && c.users.is_empty() && c.headers.is_empty());
        let c = load_text("tls_server_config: {}\n").unwrap();
        assert!(c.tls.is_none());
    }

    #[test]
    fn users_are_validated() {
        let hash = bcrypt::hash_with_result("pw", 4)
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY);
        let c = load_text(&format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        assert_eq!(c.users["alice"], hash);
        assert_eq!(
            field_of("basic_auth_users:\n  alice: notahash\n"),
            "basic_auth_users.alice"
        );
        assert_eq!(
            field_of(
                "basic_auth_users:\n  'a:b': '$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n"
            ),
            "basic_auth_users.a:b"
        );
        FAKE_BCRYPT_HASH.parse::<bcrypt::HashParts>().unwrap();
    }

    #[test]
    fn headers_are_allow_listed() {
        let c = load_text(
            "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n",
        )
        .unwrap();
        assert_eq!(c.headers.len(), 2);
        assert!(!c.http2);
        assert_eq!(
            field_of("http_server_config:\n  headers:\n    Server: x\n"),
            "http_server_config.headers.Server"
        );
        let err = load_text("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n")
            .unwrap_err();
        assert_eq!(
            err.field,
            "http_server_config.headers.X-Content-Type-Options"
        );
        assert!(err.reason.contains("nosniff"), "{err}");
    }

    #[test]
    fn tls_keys_are_checked_before_files_are_read() {
        let cases = [
            (
                "tls_server_config:\n  cert_file: a.pem\n",
                "tls_server_config.key_file",
            ),
            (
                "tls_server_config:\n  key_file: a.pem\n",
                "tls_server_config.cert_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Foo\n",
                "tls_server_config.client_auth_type",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
                "tls_server_config.client_ca_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
                "tls_server_config.client_ca_file",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n",
                "tls_server_config.min_version",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: TLS14\n",
                "tls_server_config.max_version",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
                "tls_server_config.min_version",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n",
                "tls_server_config.cipher_suites",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_FANCY]\n",
                "tls_server_config.cipher_suites",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [CurveP521]\n",
                "tls_server_config.curve_preferences",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [P256]\n",
                "tls_server_config.curve_preferences",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n",
                "tls_server_config.client_allowed_sans",
            ),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n",
                "tls_server_config.cert_file",
            ),
            ("rate_limit:\n  interval: 1s\n", "rate_limit"),
        ];
        for (text, field) in cases {
            assert_eq!(field_of(text), field, "{text}");
        }
        let err = load_text(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Foo\n",
        )
        .unwrap_err();
        assert!(err.reason.starts_with("unknown value \"Foo\""), "{err}");
        let err = load_text("tls_server_confg: {}\n").unwrap_err();
        assert!(err.reason.contains("tls_server_confg"), "{err}");
    }

    #[test]
    fn names_map_to_rustls_constants() {
        for (name, suite) in CIPHER_SUITES {
            let rustls_name = format!("{:?}", suite.suite());
            assert_eq!(
                rustls_name.trim_end_matches("_SHA256"),
                name.trim_end_matches("_SHA256"),
            );
        }
        assert_eq!(
            CURVES.iter().map(|(_, g)| g.name()).collect::<Vec<_>>(),
            [
                rustls::NamedGroup::X25519,
                rustls::NamedGroup::secp256r1,
                rustls::NamedGroup::secp384r1
            ]
        );
    }

    #[test]
    fn the_example_web_config_is_valid_up_to_its_files() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/web-config.yml");
        let err = load(Path::new(path)).unwrap_err();
        // Everything parses and validates until the certificate, which the example only names.
        assert_eq!(err.field, "tls_server_config.cert_file", "{err}");
    }
}
