//! `railscope doctor --from URL`: one GET of a running agent's metrics, over plain HTTP or
//! TLS (verified against `--from.ca-file`, with a client certificate when the agent asks for
//! one) and with basic auth, as the agent's web config may require.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

use super::facts::Facts;
use crate::cli::ConfigError;
use crate::cli::doctor::From;

use super::Error;

/// Where and how to read an agent's metrics.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    url: String,
    tls: bool,
    host: String,
    port: u16,
    path_and_query: String,
    ca_file: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
    authorization: Option<String>,
    timeout: Duration,
}

impl Target {
    /// Checks the URL and the TLS and auth flags that go with it.
    pub(crate) fn new(from: &From) -> Result<Self, ConfigError> {
        let From {
            url,
            ca_file,
            cert_file,
            key_file,
            username,
            password_file,
            timeout,
        } = from.clone();
        let url = url.as_str();
        let bad = |reason: &str| ConfigError::new("--from", format!("{url:?}: {reason}"));
        let uri: hyper::Uri = url.parse().map_err(|e| bad(&format!("not a URL ({e})")))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("expected http:// or https://")),
        };
        let host = uri
            .host()
            .ok_or_else(|| bad("no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let path_and_query = match uri.path_and_query().map(|p| p.as_str()) {
            None | Some("/") | Some("") => "/metrics".to_owned(),
            Some(p) => p.to_owned(),
        };
        if !tls && (ca_file.is_some() || cert_file.is_some()) {
            return Err(ConfigError::new(
                "--from.ca-file/--from.cert-file",
                "only for an https:// URL",
            ));
        }
        if tls && ca_file.is_none() {
            return Err(ConfigError::new(
                "--from.ca-file",
                "an https:// agent needs the CA that signed its certificate",
            ));
        }
        let client_cert = match (cert_file, key_file) {
            (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
            (None, None) => None,
            _ => {
                return Err(ConfigError::new(
                    "--from.cert-file/--from.key-file",
                    "give both or neither",
                ));
            }
        };
        let authorization = match (username, password_file) {
            (Some(user), Some(file)) => {
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    ConfigError::new("--from.password-file", format!("{file}: {e}"))
                })?;
                let password = text.lines().next().unwrap_or("");
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
            (None, None) => None,
            _ => {
                return Err(ConfigError::new(
                    "--from.username/--from.password-file",
                    "give both or neither",
                ));
            }
        };
        Ok(Target {
            url: url.to_owned(),
            tls,
            host,
            port,
            path_and_query,
            ca_file: ca_file.map(PathBuf::from),
            client_cert,
            authorization,
            timeout,
        })
    }

    /// How the report names the source.
    pub(crate) fn display(&self) -> String {
        format!("the agent at {}", self.url)
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig, Error> {
        let file_error = |flag: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
            Error::Config(ConfigError::new(flag, format!("{}: {e}", path.display())))
        };
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = &self.ca_file {
            let certs = crate::pem::certificates_in_file(ca)
                .map_err(|e| file_error("--from.ca-file", ca, &e))?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| file_error("--from.ca-file", ca, &e))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| self.error(&e))?
            .with_root_certificates(roots);
        match &self.client_cert {
            None => Ok(builder.with_no_client_auth()),
            Some((cert, key)) => {
                let chain = crate::pem::certificates_in_file(cert)
                    .map_err(|e| file_error("--from.cert-file", cert, &e))?;
                let key = crate::pem::key_in_file(key)
                    .map_err(|e| file_error("--from.key-file", key, &e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::Config(ConfigError::new("--from.cert-file", e.to_string())))
            }
        }
    }

    /// A failure to read this agent.
    fn error(&self, reason: &dyn std::fmt::Display) -> Error {
        Error::Remote {
            url: self.url.clone(),
            reason: reason.to_string(),
        }
    }
}

/// GETs the target's metrics and parses them.
pub(crate) fn fetch(target: &Target) -> Result<Facts, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let text = runtime.block_on(async {
        tokio::time::timeout(target.timeout, get(target))
            .await
            .unwrap_or_else(|_| {
                Err(target.error(&format_args!("no answer within {:?}", target.timeout)))
            })
    })?;
    Facts::parse_text(&text).map_err(|e| target.error(&e))
}

async fn get(target: &Target) -> Result<String, Error> {
    let at = |e: &dyn std::fmt::Display| target.error(e);
    let tcp = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| at(&e))?;
    let authority = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut request = Request::get(target.path_and_query.as_str())
        .header(hyper::header::HOST, authority)
        .header(
            hyper::header::ACCEPT,
            "text/plain;version=0.0.4;q=1,*/*;q=0.1",
        )
        .header(hyper::header::USER_AGENT, "railscope-doctor");
    if let Some(auth) = &target.authorization {
        request = request.header(hyper::header::AUTHORIZATION, auth);
    }
    let request = request.body(Empty::<Bytes>::new()).map_err(|e| at(&e))?;
    let response = if target.tls {
        let config = target.tls_config()?;
        let name = ServerName::try_from(target.host.clone()).map_err(|e| at(&e))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| at(&format_args!("TLS: {e}")))?;
        send(TokioIo::new(stream), request).await
    } else {
        send(TokioIo::new(tcp), request).await
    }
    .map_err(|e| at(&e))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| at(&e))?
        .to_bytes();
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        let first = text.lines().next().unwrap_or("").trim();
        return Err(at(&format_args!("HTTP {status}: {first}")));
    }
    Ok(text)
}

async fn send<S>(
    io: TokioIo<S>,
    request: Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}
