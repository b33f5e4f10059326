//! The kubelet's PodResources API, v1 (`/var/lib/kubelet/pod-resources/kubelet.sock`),
//! generated at build time from `proto/api.proto`, which has the package, service, message
//! and field names and numbers Kubernetes publishes (1.31 through 1.34).
//!
//! The client (`pod_resources_lister_client`) is what railscope's `workload` source asks;
//! with the `server` feature, `pod_resources_lister_server` lets a test play the kubelet
//! from the same definition.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("v1");
