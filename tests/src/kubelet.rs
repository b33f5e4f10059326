//! A kubelet's PodResources v1 service on a unix socket, for tests: a real gRPC server
//! generated from the same `.proto` as the agent's client, answering what the test puts in
//! its [`State`] while it runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use railscope_podresources::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};
use railscope_podresources::{
    AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices,
    ContainerResources, GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest,
    ListPodResourcesResponse, PodResources,
};
use tonic::{Request, Response, Status};

/// What the fake kubelet answers, changed by the test while it runs.
#[derive(Default)]
pub struct State {
    /// What `List` answers.
    pub pods: Vec<PodResources>,
    /// What `GetAllocatableResources` answers.
    pub allocatable: Vec<ContainerDevices>,
    /// How long `List` takes.
    pub delay: Duration,
}

#[derive(Clone)]
struct Kubelet(Arc<Mutex<State>>);

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let (pods, delay) = {
            let s = self.0.lock().unwrap();
            (s.pods.clone(), s.delay)
        };
        tokio::time::sleep(delay).await;
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: pods,
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Ok(Response::new(AllocatableResourcesResponse {
            devices: self.0.lock().unwrap().allocatable.clone(),
            ..Default::default()
        }))
    }

    async fn get(
        &self,
        _: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("not used by railscope"))
    }
}

/// The fake kubelet serving on `socket` until dropped (its runtime shut down, the socket
/// removed, as a kubelet that stops).
pub struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    socket: PathBuf,
}

impl Server {
    /// Serves `state` on `socket` (replacing a stale socket file).
    pub fn start(socket: &Path, state: &Arc<Mutex<State>>) -> Server {
        let _ = std::fs::remove_file(socket);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(async { tokio::net::UnixListener::bind(socket).unwrap() });
        let service = PodResourcesListerServer::new(Kubelet(Arc::clone(state)));
        runtime.spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener))
                .await
                .unwrap();
        });
        Server {
            runtime: Some(runtime),
            socket: socket.to_path_buf(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Devices of one resource.
pub fn devices(resource: &str, ids: &[&str]) -> ContainerDevices {
    ContainerDevices {
        resource_name: resource.to_owned(),
        device_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        topology: None,
    }
}

/// A pod.
pub fn pod(namespace: &str, name: &str, containers: Vec<ContainerResources>) -> PodResources {
    PodResources {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        containers,
    }
}

/// A container with device-plugin devices.
pub fn container(name: &str, devs: Vec<ContainerDevices>) -> ContainerResources {
    ContainerResources {
        name: name.to_owned(),
        devices: devs,
        ..Default::default()
    }
}
