//! gRPC server reflection, `v1` and `v1alpha`, on both ways of serving MetadataService: the
//! provider's own listener and the user's router run by `Provider::serve`. Generic tools
//! list and describe it without the proto file, whichever version they speak.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fleet::start_provider;
use crate::support::greeter::start_greeter;
use introspect::{MemoryStore, ServiceInfo, Store};

const CONTRACT: &str = "org.apache.dubbo.metadata.MetadataServiceV2";

async fn channel(port: u16) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// What a reflection client learned: the services listed, and how many file descriptors
/// describe the contract.
#[derive(Debug)]
struct Learned {
    services: Vec<String>,
    contract_files: usize,
}

/// Asks with reflection `v1` (grpcurl, current tools).
async fn ask_v1(port: u16) -> Learned {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

    let mut client = ServerReflectionClient::new(channel(port).await);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol(CONTRACT.into()),
    ]
    .map(|r| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(r),
    });
    let mut answers = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection v1 is served")
        .into_inner();
    let mut next = async || -> MessageResponse {
        let answer: ServerReflectionResponse = answers.message().await.unwrap().unwrap();
        answer.message_response.unwrap()
    };
    let MessageResponse::ListServicesResponse(list) = next().await else {
        panic!("expected a service list");
    };
    let MessageResponse::FileDescriptorResponse(files) = next().await else {
        panic!("expected the descriptor of the contract");
    };
    Learned {
        services: list.service.into_iter().map(|s| s.name).collect(),
        contract_files: files.file_descriptor_proto.len(),
    }
}

/// Asks with reflection `v1alpha` (Python's grpcio-reflection and other older tools).
async fn ask_v1alpha(port: u16) -> Learned {
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1alpha::{ServerReflectionRequest, ServerReflectionResponse};

    let mut client = ServerReflectionClient::new(channel(port).await);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol(CONTRACT.into()),
    ]
    .map(|r| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(r),
    });
    let mut answers = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection v1alpha is served")
        .into_inner();
    let mut next = async || -> MessageResponse {
        let answer: ServerReflectionResponse = answers.message().await.unwrap().unwrap();
        answer.message_response.unwrap()
    };
    let MessageResponse::ListServicesResponse(list) = next().await else {
        panic!("expected a service list");
    };
    let MessageResponse::FileDescriptorResponse(files) = next().await else {
        panic!("expected the descriptor of the contract");
    };
    Learned {
        services: list.service.into_iter().map(|s| s.name).collect(),
        contract_files: files.file_descriptor_proto.len(),
    }
}

/// Each version lists the contract (and itself) and describes the contract.
async fn both_versions_describe_the_contract(port: u16) {
    for (version, learned) in [
        ("v1", ask_v1(port).await),
        ("v1alpha", ask_v1alpha(port).await),
    ] {
        assert!(
            learned.services.contains(&CONTRACT.to_owned()),
            "{version}: {learned:?}"
        );
        let itself = format!("grpc.reflection.{version}.ServerReflection");
        assert!(learned.services.contains(&itself), "{version}: {learned:?}");
        assert!(learned.contract_files > 0, "{version}: {learned:?}");
    }
}

#[tokio::test]
async fn the_providers_own_listener_serves_reflection_v1_and_v1alpha() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    both_versions_describe_the_contract(provider.instance().await.metadata_service_port()).await;
    provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_router_run_by_serve_serves_reflection_v1_and_v1alpha() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let node = start_greeter(&store, "greeter", Duration::from_millis(10)).await;
    both_versions_describe_the_contract(node.address.port()).await;
    node.shutdown().await;
}
