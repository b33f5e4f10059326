//! OTLP push against real gRPC and HTTP receivers.
//!
//! * [`otlp`]: every series, outages, TLS with a client certificate, bad flags.
//!
//! Run this binary with `cargo test -p railscope-tests --test push`, one module of it with
//! `cargo test -p railscope-tests --test push otlp::`, and one test with
//! `cargo test -p railscope-tests --test push -- --exact otlp::<test name>`.

mod otlp;
