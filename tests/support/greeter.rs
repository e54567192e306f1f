//! Real tonic Greeter servers on loopback, each registered through the provider module and
//! counting the calls it answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use introspect::{Provider, Store};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

/// The generated Greeter code.
#[rustfmt::skip] #[path = "../../proto/generated/helloworld.rs"] pub mod pb;

use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

/// Answers `SayHello` and counts the calls.
#[derive(Clone)]
pub struct CountingGreeter {
    calls: Arc<AtomicU64>,
    address: SocketAddr,
}

#[tonic::async_trait]
impl Greeter for CountingGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let name = request.into_inner().name;
        Ok(Response::new(HelloReply {
            message: format!("Hello {name} from {}", self.address),
        }))
    }
}

/// One running Greeter server and its provider.
pub struct GreeterNode {
    /// Where the server listens.
    pub address: SocketAddr,
    /// Calls answered so far.
    pub calls: Arc<AtomicU64>,
    provider: Option<Provider>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl GreeterNode {
    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The provider's graceful stop (disabled, drained, deregistered), then the server's.
    pub async fn shutdown(mut self) {
        self.deregister().await;
        self.stop_server().await;
    }

    /// The provider's graceful stop: disabled, drained, deregistered. The server still runs.
    pub async fn deregister(&mut self) {
        if let Some(provider) = self.provider.take() {
            provider.shutdown().await.expect("graceful deregistration");
        }
    }

    /// Stops the server (gracefully: calls in flight finish).
    pub async fn stop_server(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .expect("server stops in time")
            .expect("server task")
            .expect("server ran");
    }
}

/// Starts a Greeter server on `127.0.0.1:0` serving MetadataService beside it, and registers
/// it as an instance of `app` at its port, with the given drain period.
pub async fn start_greeter(store: &Arc<dyn Store>, app: &str, drain: Duration) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let greeter = CountingGreeter {
        calls: calls.clone(),
        address,
    };
    let provider = Provider::builder(app, store.clone())
        .port(address.port())
        .lease_ttl(Duration::from_secs(10))
        .drain_period(drain)
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .expect("valid provider");
    let (stop, stopped) = oneshot::channel::<()>();
    let router = tonic::transport::Server::builder()
        .add_service(GreeterServer::new(greeter))
        .add_service(provider.metadata_service());
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
        let _ = stopped.await;
    }));
    provider.start().await.expect("provider registers");
    GreeterNode {
        address,
        calls,
        provider: Some(provider),
        stop,
        server,
    }
}
