//! Alert rules, recording rules, the mixin and the dashboards, in promtool, Alertmanager and a real
//! Prometheus fleet; the metric names they and doctor use; the manual's links.
//!
//! * [`alerts`]: promtool accepts the rules and their unit tests pass.
//! * [`mixin`]: the shipped files are what the mixin renders.
//! * [`dashboards`]: the Grafana dashboards' queries, variables and thresholds.
//! * [`inhibit`]: Alertmanager's inhibit rules.
//! * [`fleet`]: faults injected into a fleet of agents reach Alertmanager as exactly the matching
//!   alerts.
//! * [`names`]: every `railscope_*` name the mixin, rules, dashboards, doctor, OTLP and the
//!   inventory type by hand is a family the agent exports.
//! * [`docs`]: every relative link and anchor of README.md and docs/ resolves.
//!
//! Run this binary with `cargo test -p railscope-tests --test rules`, one module of it with
//! `cargo test -p railscope-tests --test rules alerts::`, and one test with
//! `cargo test -p railscope-tests --test rules -- --exact alerts::<test name>`.

mod alerts;
mod dashboards;
mod docs;
mod fleet;
mod inhibit;
mod mixin;
mod names;
