//! What the Greeter examples share: the generated code, the Greeter service, a provider
//! that serves it beside MetadataService, the store and metrics flags.
//!
//! Each example uses part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use introspect::metrics::{Metrics, MetricsTask};
use introspect::store::{EtcdOptions, EtcdStore};
use introspect::{MemoryStore, Provider, Store};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

/// Code generated from `proto/helloworld.proto`.
#[rustfmt::skip] #[path = "../../proto/generated/helloworld.rs"] pub mod pb;

use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

/// The boxed error of the examples' `main`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The interface the Greeter examples export and subscribe to.
pub const INTERFACE: &str = "helloworld.Greeter";

/// Logs to stderr, filtered by `RUST_LOG` (default: `default`, e.g. `info`).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// etcd at `urls` (comma-separated), or the embedded store when `None`.
pub async fn open_store(urls: Option<&str>) -> Result<Arc<dyn Store>, BoxError> {
    Ok(match urls {
        Some(urls) => {
            let endpoints = EtcdOptions::parse_endpoints(urls)?;
            Arc::new(EtcdStore::connect(EtcdOptions::new(endpoints)).await?)
        }
        None => Arc::new(MemoryStore::new()),
    })
}

/// When an address is given, installs the Prometheus exporter at `http://{addr}/metrics`
/// and publishes `metrics` to it every second until the returned task is dropped.
pub async fn maybe_serve_metrics(
    addr: Option<SocketAddr>,
    metrics: Metrics,
) -> Result<Option<MetricsTask>, BoxError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;
    println!("metrics at http://{addr}/metrics");
    Ok(Some(metrics.spawn(Duration::from_secs(1))))
}

/// Answers `SayHello` with a greeting naming the server's address.
pub struct HelloGreeter {
    address: String,
}

#[tonic::async_trait]
impl Greeter for HelloGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(HelloReply {
            message: format!("Hello {name}, from {}", self.address),
        }))
    }
}

/// The server address a greeting names.
pub fn server_of(message: &str) -> &str {
    message.rsplit(", from ").next().unwrap_or(message)
}

/// A Greeter server with its provider, registered in the store.
pub struct GreeterNode {
    /// The registered address (`host:port`).
    pub address: String,
    /// The provider, to stop gracefully or to expose in metrics.
    pub provider: Provider,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl GreeterNode {
    /// Starts a Greeter server listening at `listen` (port 0: any free port), with
    /// MetadataService in the same tonic server, and registers it as an instance of `app`
    /// at `host` (default: the listening IP) and the listening port.
    pub async fn start(
        store: Arc<dyn Store>,
        app: &str,
        listen: SocketAddr,
        host: Option<String>,
        drain: Duration,
    ) -> Result<GreeterNode, BoxError> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let bound = listener.local_addr()?;
        let host = match host {
            Some(host) => host,
            None if bound.ip().is_unspecified() => {
                return Err(
                    "listening on all interfaces: give --host, the address consumers reach".into(),
                );
            }
            None => bound.ip().to_string(),
        };
        let provider = Provider::builder(app, store)
            .host(host)
            .port(bound.port())
            .drain_period(drain)
            .export_service::<GreeterServer<HelloGreeter>>()
            .build()?;
        let address = introspect::rpc::authority(&provider.instance().await.host, bound.port());
        let greeter = HelloGreeter {
            address: address.clone(),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let router = tonic::transport::Server::builder()
            .add_service(GreeterServer::new(greeter))
            .add_service(provider.metadata_service());
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
            let _ = stopped.await;
        }));
        provider.start().await?;
        Ok(GreeterNode {
            address,
            provider,
            stop,
            server,
        })
    }

    /// Stops gracefully: the provider is disabled, drained and deregistered (consumers stop
    /// calling it), then the server stops, letting calls in flight finish.
    pub async fn shutdown(self) -> Result<(), BoxError> {
        self.provider.shutdown().await?;
        let _ = self.stop.send(());
        self.server.await??;
        Ok(())
    }
}
