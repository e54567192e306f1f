//! Hostile peers: a MetadataService that answers whatever it is told to, and a TCP listener
//! that accepts and never answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use introspect::rpc::pb::metadata_service_v2_server::{MetadataServiceV2, MetadataServiceV2Server};
use introspect::rpc::pb::{MetadataInfoV2, MetadataRequest};
use introspect::store::Store;
use introspect::{Result, ServiceInstance};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

/// Answers every request with the same message.
#[derive(Clone)]
pub struct FixedAnswer(pub MetadataInfoV2);

#[tonic::async_trait]
impl MetadataServiceV2 for FixedAnswer {
    async fn get_metadata_info(
        &self,
        _: Request<MetadataRequest>,
    ) -> Result<Response<MetadataInfoV2>, Status> {
        Ok(Response::new(self.0.clone()))
    }
}

/// Serves `answer` on a loopback port until the test ends; returns the port.
pub async fn serve_fixed(answer: MetadataInfoV2) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let service =
        MetadataServiceV2Server::new(FixedAnswer(answer)).max_encoding_message_size(usize::MAX);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    port
}

/// Accepts connections and never answers: holds each one open, writing a byte now and then.
pub async fn serve_silence() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                loop {
                    if socket.write_all(b"\0").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        }
    });
    port
}

/// Writes an instance record of `app` at `127.0.0.1:port` claiming `revision`, as a hostile
/// or foreign process would, straight into the store.
pub async fn register_raw(
    store: &Arc<dyn Store>,
    app: &str,
    port: u16,
    revision: &str,
    declares_rule: bool,
) {
    let mut instance = ServiceInstance::new(app, "127.0.0.1", port);
    instance
        .metadata
        .insert("dubbo.metadata.revision".into(), revision.into());
    if declares_rule {
        instance
            .metadata
            .insert("introspect.revision-rule".into(), "sha256-v1".into());
    }
    store
        .put(
            &format!("/services/{app}/127.0.0.1:{port}"),
            instance.to_json(),
            None,
        )
        .await
        .unwrap();
}

/// The loopback address of a port.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A loopback port whose connections never complete: its listener's accept queue is full
/// and nobody accepts, so the kernel drops further handshakes (the connecting side waits
/// until its own timeout). Held open until the returned guard is dropped.
pub async fn serve_unreachable() -> (u16, Vec<tokio::net::TcpStream>, tokio::net::TcpListener) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(loopback(0)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let listener = socket.listen(1).unwrap();
    // Fill the accept queue; the connects past it hang, so each is bounded.
    let mut fillers = Vec::new();
    for _ in 0..8 {
        let connect = tokio::net::TcpStream::connect(loopback(port));
        if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_millis(200), connect).await {
            fillers.push(stream);
        }
    }
    (port, fillers, listener)
}
