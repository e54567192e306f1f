//! gRPC server reflection on the provider's own MetadataService server: generic tools can
//! list it without the proto file.

mod support;

use std::sync::Arc;

use introspect::{MemoryStore, ServiceInfo, Store};
use support::fleet::start_provider;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

async fn ask(port: u16, request: MessageRequest) -> MessageResponse {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let mut answers = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    answers
        .message()
        .await
        .unwrap()
        .unwrap()
        .message_response
        .unwrap()
}

#[tokio::test]
async fn reflection_lists_and_describes_the_metadata_service() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    let port = provider.instance().await.metadata_service_port();

    let MessageResponse::ListServicesResponse(list) =
        ask(port, MessageRequest::ListServices(String::new())).await
    else {
        panic!("expected a service list");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"org.apache.dubbo.metadata.MetadataServiceV2".to_owned()),
        "{names:?}"
    );

    let symbol =
        MessageRequest::FileContainingSymbol("org.apache.dubbo.metadata.MetadataServiceV2".into());
    let MessageResponse::FileDescriptorResponse(files) = ask(port, symbol).await else {
        panic!("expected the descriptor of the contract");
    };
    assert!(!files.file_descriptor_proto.is_empty());
}
