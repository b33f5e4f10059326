//! Generates the PodResources v1 messages and gRPC stubs from `proto/api.proto`, compiled
//! with protox (pure Rust: building the agent needs no `protoc`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/api.proto");
    let fds = protox::compile(["proto/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(std::env::var_os("CARGO_FEATURE_SERVER").is_some())
        .compile_fds(fds)?;
    Ok(())
}
