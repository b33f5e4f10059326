//! The HTTP surface of the agent: what a scraper talks to, and how it is let in.
//!
//! * [`server`]: the endpoints (`/metrics` or `--web.telemetry-path`, the landing page,
//!   `/-/healthy`, `/-/ready`) and the accept loop with its limits: header and handshake
//!   deadlines, capped request heads, a stalled-write timeout and the cap on concurrent
//!   scrapes ([`server::Limits`]).
//! * [`web_config`]: the exporter-toolkit `--web.config.file` (TLS with optional client
//!   certificates, basic auth users, response headers), validated into a
//!   [`web_config::WebConfig`] and reloaded by [`web_config::WebState`] when its files change.
//! * [`activation`]: the sockets systemd socket activation passes (`--web.systemd-socket`).
//! * [`basic_auth`]: bcrypt verification of `Authorization` headers, with a verdict cache so
//!   that a scrape every few seconds costs one bcrypt per password change.

pub(crate) mod activation;
pub(crate) mod basic_auth;
pub(crate) mod server;
pub(crate) mod web_config;
