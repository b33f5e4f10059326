//! Packaging: the systemd unit, the Debian package, the container image, the Kubernetes base.
//!
//! * [`packaging`]: systemd unit, Kubernetes base, Debian package install and removal.
//! * [`image`]: the OCI image, chrooted and under podman.
//! * [`k8s_validate`]: the rendered Kubernetes base validates and passes checkov.
//! * [`helm`]: the Helm chart lints, renders the base's objects, and each switch only its own.
//!
//! Run this binary with `cargo test -p railscope-tests --test deploy`, one module of it with
//! `cargo test -p railscope-tests --test deploy packaging::`, and one test with
//! `cargo test -p railscope-tests --test deploy -- --exact packaging::<test name>`.

mod helm;
mod image;
mod k8s_validate;
mod packaging;
