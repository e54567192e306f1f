//! Hostile peers: a MetadataService that answers whatever it is told to, a TCP listener that
//! accepts and never answers, and a store that can be made to hang.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use introspect::rpc::pb::metadata_service_v2_server::{MetadataServiceV2, MetadataServiceV2Server};
use introspect::rpc::pb::{MetadataInfoV2, MetadataRequest};
use introspect::store::{CasOutcome, KeyValue, LeaseId, Range, Store, Watch};
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

/// A store that forwards to another until told to hang; then every call pends forever.
pub struct HangingStore {
    inner: Arc<dyn Store>,
    hang: AtomicBool,
}

impl HangingStore {
    pub fn new(inner: Arc<dyn Store>, hang: bool) -> Self {
        HangingStore {
            inner,
            hang: AtomicBool::new(hang),
        }
    }

    pub fn hang(&self) {
        self.hang.store(true, Ordering::SeqCst);
    }

    async fn gate(&self) {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait]
impl Store for HangingStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.gate().await;
        self.inner.get(key).await
    }
    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        self.gate().await;
        self.inner.get_prefix(prefix).await
    }
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        self.gate().await;
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, key: &str) -> Result<bool> {
        self.gate().await;
        self.inner.delete(key).await
    }
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        self.gate().await;
        self.inner
            .compare_and_swap(key, expected, value, lease)
            .await
    }
    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        self.gate().await;
        self.inner.watch_prefix(prefix, from_revision).await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        self.gate().await;
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        self.gate().await;
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        self.gate().await;
        self.inner.revoke_lease(lease).await
    }
    async fn compact(&self, revision: i64) -> Result<()> {
        self.gate().await;
        self.inner.compact(revision).await
    }
    fn backend(&self) -> &'static str {
        "hanging"
    }
}

/// The loopback address of a port.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}
