//! `railscope doctor`: golden reports, findings, `--from`, NCCL variables, the exit status.
//!
//! * [`doctor`]: the doctor subcommand end to end.
//! * [`doctor_rules`]: doctor's shared thresholds and XID classes come from the mixin's config,
//!   and a change on the mixin's side alone fails the check.
//!
//! Run this binary with `cargo test -p railscope-tests --test doctor`, one module of it with
//! `cargo test -p railscope-tests --test doctor doctor::`, and one test with
//! `cargo test -p railscope-tests --test doctor -- --exact doctor::<test name>`.

mod doctor;
mod doctor_rules;
