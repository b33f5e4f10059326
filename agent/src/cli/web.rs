//! The HTTP server's settings: `--web.*`, the config file's `web` section.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Command};

use super::error::ConfigError;
use super::value::{File, Rejected, Setting, Switch, positive, reject};

/// Default listen address.
pub(crate) const DEFAULT_LISTEN_ADDRESS: &str = ":9477";

const LISTEN_ADDRESS: Setting<String> = Setting::new(
    "web.listen-address",
    "web.listen-address",
    "Address on which to expose metrics and the web interface; repeatable, one listener each (the config file's key takes a list)",
    "expected [host]:port",
)
.default(DEFAULT_LISTEN_ADDRESS)
.repeated();
const SYSTEMD_SOCKET: Switch = Switch {
    flag: "web.systemd-socket",
    key: "web.systemd-socket",
    help: "Use the sockets systemd socket activation passes (LISTEN_FDS) instead of --web.listen-address",
};
const TELEMETRY_PATH: Setting<String> = Setting::new(
    "web.telemetry-path",
    "web.telemetry-path",
    "Path under which to expose metrics",
    "expected a path",
)
.default("/metrics");
const CONFIG_FILE: Setting<String> = Setting::new(
    "web.config.file",
    "web.config-file",
    "Web configuration file (exporter-toolkit format): TLS, basic auth, response headers; re-read when it or its certificate files change",
    "expected a path",
);
const MAX_REQUESTS: Setting<usize> = Setting::new(
    "web.max-requests",
    "web.max-requests",
    "Maximum number of concurrent metrics requests; more are answered 503 at once. 0 disables the limit",
    "expected a whole number (0: no limit)",
)
.default("40");
const READ_HEADER_TIMEOUT: Setting<Duration> = Setting::new(
    "web.read-header-timeout",
    "web.read-header-timeout",
    "Time a client has for the TLS handshake and each request head; also closes idle keep-alive connections",
    "expected a positive duration such as 30s",
)
.default("30s")
.check(positive);
const REQUEST_TIMEOUT: Setting<Duration> = Setting::new(
    "web.request-timeout",
    "web.request-timeout",
    "Time a request may take to be answered (else 503), and the longest a response write may stall (else the connection is closed)",
    "expected a positive duration such as 30s",
)
.default("30s")
.check(positive);

/// The flags that only serving uses (hidden under `railscope doctor`).
pub(crate) const SERVING_FLAGS: [&str; 7] = [
    LISTEN_ADDRESS.flag,
    SYSTEMD_SOCKET.flag,
    TELEMETRY_PATH.flag,
    CONFIG_FILE.flag,
    MAX_REQUESTS.flag,
    READ_HEADER_TIMEOUT.flag,
    REQUEST_TIMEOUT.flag,
];

/// The HTTP server's validated settings.
#[derive(Debug, Clone)]
pub(crate) struct Web {
    /// Addresses to listen on, one listener each (`:9477`, `127.0.0.1:9477`, `[::1]:9477`).
    pub(crate) listen_addresses: Vec<String>,
    /// Serve on the sockets systemd passes instead of the listen addresses.
    pub(crate) systemd_socket: bool,
    /// Path of the metrics endpoint.
    pub(crate) telemetry_path: String,
    /// The web configuration file (TLS, basic auth, headers), if any.
    pub(crate) config_file: Option<PathBuf>,
    /// Concurrent metrics requests served; 0: no limit.
    pub(crate) max_requests: usize,
    /// Time for a TLS handshake and for each request head (also the keep-alive idle limit).
    pub(crate) read_header_timeout: Duration,
    /// Time for a handler to answer, and the longest a response write may stall.
    pub(crate) request_timeout: Duration,
}

/// Adds the `--web.*` flags.
pub(crate) fn args(cmd: Command) -> Command {
    cmd.arg(LISTEN_ADDRESS.arg())
        .arg(SYSTEMD_SOCKET.arg())
        .arg(TELEMETRY_PATH.arg())
        .arg(CONFIG_FILE.arg().value_name("PATH"))
        .arg(MAX_REQUESTS.arg())
        .arg(READ_HEADER_TIMEOUT.arg())
        .arg(REQUEST_TIMEOUT.arg())
}

/// The `web` settings from the command line and the file.
pub(crate) fn from_matches(matches: &ArgMatches, file: &mut File) -> Result<Web, ConfigError> {
    let listen_addresses = LISTEN_ADDRESS.get_all(matches, file)?;
    for address in &listen_addresses {
        validate_listen_address(address).map_err(|r| LISTEN_ADDRESS.rejected(r))?;
    }
    let systemd_socket = SYSTEMD_SOCKET.get(matches, file)?;
    let telemetry_path = TELEMETRY_PATH.get(matches, file)?;
    if !telemetry_path.starts_with('/')
        || telemetry_path == "/"
        || telemetry_path.starts_with("/-/")
    {
        return Err(ConfigError::new(
            TELEMETRY_PATH.field(),
            format!("{telemetry_path:?} must start with '/' and differ from '/' and '/-/...'"),
        ));
    }
    let config_file = CONFIG_FILE
        .get_opt(matches, file)?
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    Ok(Web {
        listen_addresses,
        systemd_socket,
        telemetry_path,
        config_file,
        max_requests: MAX_REQUESTS.get(matches, file)?,
        read_header_timeout: READ_HEADER_TIMEOUT.get(matches, file)?,
        request_timeout: REQUEST_TIMEOUT.get(matches, file)?,
    })
}

/// Resolves `:9477` (all interfaces), `host:port` and `[v6]:port`.
pub(crate) fn validate_listen_address(address: &str) -> Result<(), Rejected> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| reject(format!("{address:?} is not [host]:port")))?;
    port.parse::<u16>()
        .map_err(|_| reject(format!("{address:?} has no valid port")))?;
    if host.starts_with('[') != host.ends_with(']') {
        return Err(reject(format!(
            "{address:?} has an unbalanced IPv6 bracket"
        )));
    }
    Ok(())
}
