//! The kubelet's PodResources API (v1) over its unix socket: `List` every collection,
//! `GetAllocatableResources` every [`ALLOCATABLE_EVERY`] (the kubelet's own guidance: the
//! answer changes only when devices are plugged, unplugged or change health).
//!
//! Each collection connects anew: a unix socket connects in microseconds, and a kubelet
//! that restarted (a new socket at the same path) is then simply reached again. Every call
//! is bounded by the collection's deadline. The calls run on a current-thread runtime of the
//! source's own, on the collection's thread.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use railscope_podresources::pod_resources_lister_client::PodResourcesListerClient;
use railscope_podresources::{AllocatableResourcesRequest, ListPodResourcesRequest};
use tokio::net::UnixStream;
use tonic::transport::{Endpoint, Uri};

use super::{Assignment, Kubelet, KubeletError};
use crate::error::ErrorKind;

/// Devices per resource.
type Allocatable = Vec<(String, usize)>;

/// How often the allocatable devices are asked for.
pub const ALLOCATABLE_EVERY: Duration = Duration::from_secs(60);

/// The longest message accepted from the kubelet (a node with thousands of pods and
/// devices stays far below it).
const MAX_MESSAGE: usize = 16 << 20;

/// The `List` call, as errors name it.
const LIST: &str = "PodResourcesLister/List";
/// The `GetAllocatableResources` call.
const ALLOCATABLE: &str = "PodResourcesLister/GetAllocatableResources";

/// A client of one kubelet socket.
#[derive(Debug)]
pub struct Client {
    socket: PathBuf,
    /// Taken only when the client is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    /// The allocatable devices by resource, and when they were asked for.
    allocatable: Mutex<Option<(Instant, Allocatable)>>,
    /// Whether a permission-denied socket was logged.
    denied: std::sync::atomic::AtomicBool,
}

impl Client {
    /// A client of `socket`.
    pub fn new(socket: PathBuf) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        Ok(Client {
            socket,
            runtime: Some(runtime),
            allocatable: Mutex::new(None),
            denied: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the socket exists (a node without Kubernetes has none). A socket the agent
    /// may not reach (the kubelet's directory is root's, mode 0750) is logged once, as a
    /// kubelet it is not set up to ask, not counted as an error every scrape.
    pub fn socket_exists(&self) -> bool {
        match std::fs::symlink_metadata(&self.socket) {
            Ok(_) => true,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::PermissionDenied
                    && !self.denied.swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::warn!(
                        collector = "workload",
                        socket = %self.socket.display(),
                        "The kubelet's PodResources socket cannot be reached (permission denied): pods are not attributed to their devices. Connecting needs root (see SECURITY.md)."
                    );
                }
                false
            }
        }
    }

    /// Lists every pod's devices (and the allocatable ones when due), before `deadline`.
    pub fn read(&self, deadline: Instant) -> Result<Kubelet, KubeletError> {
        let due = {
            let kept = self.allocatable.lock().unwrap_or_else(|e| e.into_inner());
            kept.as_ref()
                .is_none_or(|(at, _)| at.elapsed() >= ALLOCATABLE_EVERY)
        };
        let socket = self.socket.clone();
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(runtime) = &self.runtime else {
            return Err((
                LIST,
                ErrorKind::Io,
                "the client is shutting down".to_owned(),
            ));
        };
        let (list, allocatable) = runtime.block_on(async move {
            tokio::time::timeout(left, ask(socket, due))
                .await
                .unwrap_or_else(|_| {
                    Err((
                        LIST,
                        ErrorKind::Timeout,
                        format!("the kubelet did not answer within {left:?}"),
                    ))
                })
        })?;
        let mut kept = self.allocatable.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(now) = allocatable {
            *kept = Some((Instant::now(), now));
        }
        let mut view = list;
        view.allocatable = kept.as_ref().map(|(_, a)| a.clone()).unwrap_or_default();
        Ok(view)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // The agent drops its sources inside its own async runtime, where dropping a runtime
        // the blocking way panics.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Connects to `socket`, lists the pods' devices and, when `allocatable` is due, the node's.
async fn ask(
    socket: PathBuf,
    allocatable: bool,
) -> Result<(Kubelet, Option<Allocatable>), KubeletError> {
    // The URI is required and ignored: the connector dials the socket.
    let channel = Endpoint::from_static("http://kubelet.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { UnixStream::connect(socket).await.map(TokioIo::new) }
        }))
        .await
        .map_err(|e| (LIST, ErrorKind::Io, format!("cannot connect: {e}")))?;
    let mut client = PodResourcesListerClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
    let list = client
        .list(ListPodResourcesRequest {})
        .await
        .map_err(|s| (LIST, status_kind(&s), s.to_string()))?
        .into_inner();
    let view = assignments(list);
    let allocatable = if allocatable {
        match client
            .get_allocatable_resources(AllocatableResourcesRequest {})
            .await
        {
            Ok(r) => Some(allocatable_counts(r.into_inner())),
            // A kubelet older than 1.23 (or with the feature off) does not offer it.
            Err(s) if s.code() == tonic::Code::Unimplemented => Some(Vec::new()),
            Err(s) => return Err((ALLOCATABLE, status_kind(&s), s.to_string())),
        }
    } else {
        None
    };
    Ok((view, allocatable))
}

fn status_kind(status: &tonic::Status) -> ErrorKind {
    match status.code() {
        tonic::Code::DeadlineExceeded => ErrorKind::Timeout,
        tonic::Code::Unavailable => ErrorKind::Unavailable,
        _ => ErrorKind::Io,
    }
}

/// Every device of every container, from a `List` answer.
pub fn assignments(list: railscope_podresources::ListPodResourcesResponse) -> Kubelet {
    let mut out = Vec::new();
    let pods = list.pod_resources.len();
    for pod in list.pod_resources {
        for container in pod.containers {
            let base = |resource: &str, device_id: &str| Assignment {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                container: container.name.clone(),
                resource: resource.to_owned(),
                device_id: device_id.to_owned(),
                claim: None,
            };
            for devices in &container.devices {
                for id in &devices.device_ids {
                    out.push(base(&devices.resource_name, id));
                }
            }
            for dynamic in &container.dynamic_resources {
                for claimed in &dynamic.claim_resources {
                    let mut a = base(&claimed.driver_name, &claimed.device_name);
                    a.claim = Some((dynamic.claim_namespace.clone(), dynamic.claim_name.clone()));
                    out.push(a);
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Kubelet {
        assignments: out,
        pods,
        allocatable: Vec::new(),
    }
}

/// Allocatable devices per resource.
pub fn allocatable_counts(
    resp: railscope_podresources::AllocatableResourcesResponse,
) -> Allocatable {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for d in resp.devices {
        *counts.entry(d.resource_name).or_default() += d.device_ids.len();
    }
    counts.into_iter().collect()
}
