//! The HTTP surface of the real binary: endpoints and process behaviour, TLS and basic auth with
//! real clients, and load.
//!
//! * [`http`]: endpoints, content negotiation, gzip, start-up errors, SIGTERM.
//! * [`filters`]: `collect[]` and `exclude[]` on the metrics path.
//! * [`listeners`]: repeated listen addresses and systemd socket activation.
//! * [`web`]: TLS, basic auth, client certificates, limits, reloads.
//! * [`load`]: bursts beyond `--web.max-requests` and long keep-alive sequences.
//!
//! Run this binary with `cargo test -p railscope-tests --test surface`, one module of it with
//! `cargo test -p railscope-tests --test surface http::`, and one test with
//! `cargo test -p railscope-tests --test surface -- --exact http::<test name>`.

mod filters;
mod http;
mod listeners;
mod load;
mod web;
