//! Real tonic Greeter servers on loopback, each run by `Provider::serve` and counting the
//! calls it answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use introspect::backend::InstanceRead;
use introspect::provider::ProviderBuilder;
use introspect::{Provider, ServiceInfo, Store};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use super::wait::eventually;

/// The generated Greeter code.
#[rustfmt::skip] #[path = "../../../proto/generated/helloworld.rs"] pub mod pb;

use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

/// Answers `SayHello` naming its server's address, and counts the calls. While paused
/// (like a process stopped with SIGSTOP) it answers nothing until resumed.
#[derive(Clone)]
pub struct CountingGreeter {
    calls: Arc<AtomicU64>,
    /// Calls of a Dubbo peer (Java or Go): they name themselves `dubbo-…`.
    peer_calls: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
    address: SocketAddr,
}

impl CountingGreeter {
    /// A greeter naming `address` in its answers.
    pub fn new(address: SocketAddr) -> Self {
        CountingGreeter {
            calls: Arc::default(),
            peer_calls: Arc::default(),
            paused: Arc::default(),
            address,
        }
    }

    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The counter of calls answered.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.calls.clone()
    }

    /// The counter of the calls a Dubbo peer (Java or Go, named `dubbo-…`) made: what a
    /// side-by-side test waits on, apart from Introspect's own calls.
    pub fn peer_counter(&self) -> Arc<AtomicU64> {
        self.peer_calls.clone()
    }

    /// Stops answering (calls wait) until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.paused.store(true, Ordering::Relaxed);
    }

    /// Answers again, the waiting calls too.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::Relaxed);
    }

    /// Whether it is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }
}

#[tonic::async_trait]
impl Greeter for CountingGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        while self.is_paused() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let name = request.into_inner().name;
        if name.starts_with("dubbo-") {
            self.peer_calls.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Response::new(HelloReply {
            message: format!("Hello {name} from {}", self.address),
        }))
    }
}

/// A tonic router serving `greeter`.
pub fn greeter_router(greeter: CountingGreeter) -> tonic::transport::server::Router {
    tonic::transport::Server::builder().add_service(GreeterServer::new(greeter))
}

/// Whether the instance record of `app` at `address` is in `store` (enabled or not).
pub async fn is_registered(store: &Arc<dyn Store>, app: &str, address: SocketAddr) -> bool {
    // The store key keeps Dubbo's unbracketed form, also for IPv6 hosts (`::1:50051`).
    let key = format!("/services/{app}/{}:{}", address.ip(), address.port());
    store.get(&key).await.expect("store answers").is_some()
}

/// One Greeter server run by `Provider::serve`.
pub struct GreeterNode {
    /// Where the server listens (and the instance is registered).
    pub address: SocketAddr,
    calls: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    serving: JoinHandle<introspect::Result<()>>,
}

impl GreeterNode {
    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The counter of calls answered, to read after a stop.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.calls.clone()
    }

    /// Sends the shutdown signal: the provider disables the instance, drains and
    /// deregisters while the server still answers; then the server stops.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits until `serve` has returned, which it does after the server stopped.
    pub async fn stopped(self) {
        tokio::time::timeout(Duration::from_secs(10), self.serving)
            .await
            .expect("serve returns in time")
            .expect("serve task")
            .expect("graceful stop");
    }

    /// The whole graceful stop.
    pub async fn shutdown(mut self) {
        self.stop();
        self.stopped().await;
    }
}

/// Starts a Greeter server on `127.0.0.1:0` with `Provider::serve` as an instance of `app`
/// registered in `backend` (any registry) with lease TTL `ttl` (on ZooKeeper the session
/// timeout asked for) and the given drain period, and waits until it is listed.
pub async fn start_greeter_on(
    backend: introspect::Backend,
    app: &str,
    ttl: Duration,
    drain: Duration,
) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_greeter_advertised(backend, app, ttl, drain, listener, None).await
}

/// Like [`start_greeter_on`], on the caller's `listener`, registered at `advertised_port`
/// when given (consumers then dial that port, a fault proxy in front of the server, say)
/// rather than at the listener's.
pub async fn start_greeter_advertised(
    backend: introspect::Backend,
    app: &str,
    ttl: Duration,
    drain: Duration,
    listener: tokio::net::TcpListener,
    advertised_port: Option<u16>,
) -> GreeterNode {
    let greeter = greeter_service();
    start_greeter_exporting(backend, app, ttl, drain, listener, advertised_port, greeter).await
}

/// The Greeter as [`start_greeter_on`] exports it, to add parameters to (a weight, a tag).
pub fn greeter_service() -> ServiceInfo {
    use tonic::server::NamedService as _;
    ServiceInfo::new(GreeterServer::<CountingGreeter>::NAME)
}

/// Like [`start_greeter_advertised`], exporting `service` (the Greeter's name, with
/// parameters of its own) instead of the plain Greeter.
pub async fn start_greeter_exporting(
    backend: introspect::Backend,
    app: &str,
    ttl: Duration,
    drain: Duration,
    listener: tokio::net::TcpListener,
    advertised_port: Option<u16>,
    service: ServiceInfo,
) -> GreeterNode {
    let address = listener.local_addr().unwrap();
    let mut registered = address;
    let greeter = CountingGreeter::new(address);
    let calls = greeter.calls.clone();
    let mut builder = Provider::builder(app, backend.clone())
        .lease_ttl(ttl)
        .drain_period(drain)
        .export(service);
    if let Some(port) = advertised_port {
        builder = builder.port(port);
        registered.set_port(port);
    }
    let provider = builder.build().expect("valid provider");
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(provider.serve(greeter_router(greeter), listener, async {
        let _ = stopped.await;
    }));
    let limits = introspect::Limits::default();
    eventually(
        Duration::from_secs(20),
        "the greeter to register",
        || async {
            backend
                .instances()
                .list(app, InstanceRead::new(&limits))
                .await
                .is_ok_and(|list| list.instances.contains_key(&registered.to_string()))
        },
    )
    .await;
    GreeterNode {
        address,
        calls,
        stop: Some(stop),
        serving,
    }
}

/// Starts a Greeter server on `127.0.0.1:0` with `Provider::serve` as an instance of `app`
/// with the given drain period, and waits until it is registered.
pub async fn start_greeter(store: &Arc<dyn Store>, app: &str, drain: Duration) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_greeter(listener, store, app, drain).await
}

/// Like [`start_greeter`], on a listener of the caller's (an IPv6 one, say); the instance
/// is registered at the listener's IP and port.
pub async fn serve_greeter(
    listener: tokio::net::TcpListener,
    store: &Arc<dyn Store>,
    app: &str,
    drain: Duration,
) -> GreeterNode {
    serve_greeter_with(listener, store, app, drain, None, |b| b).await
}

/// Like [`serve_greeter`], over TLS with `tls` when given, its provider's builder changed
/// by `configure` first.
pub async fn serve_greeter_with(
    listener: tokio::net::TcpListener,
    store: &Arc<dyn Store>,
    app: &str,
    drain: Duration,
    tls: Option<tonic::transport::ServerTlsConfig>,
    configure: impl FnOnce(ProviderBuilder) -> ProviderBuilder,
) -> GreeterNode {
    let address = listener.local_addr().unwrap();
    let greeter = CountingGreeter::new(address);
    let calls = greeter.calls.clone();
    let builder = Provider::builder(app, store.clone())
        .lease_ttl(Duration::from_secs(10))
        .drain_period(drain)
        .export_service::<GreeterServer<CountingGreeter>>();
    let provider = configure(builder).build().expect("valid provider");
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls).expect("TLS configuration");
    }
    let router = server.add_service(GreeterServer::new(greeter));
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(provider.serve(router, listener, async {
        let _ = stopped.await;
    }));
    eventually(Duration::from_secs(5), "the greeter to register", || {
        is_registered(store, app, address)
    })
    .await;
    GreeterNode {
        address,
        calls,
        stop: Some(stop),
        serving,
    }
}

/// A probe for consumer-side health that wants an answer, not only a connection: it opens
/// a connection to `address`, speaks the HTTP/2 client preface and waits for the server's
/// first bytes (its SETTINGS) within `timeout`. A fault proxy accepts connections while it
/// blackholes them, where a real partition leaves the connect itself unanswered, so the
/// default probe (a TCP connect) would find a blackholed endpoint alive.
pub async fn answers_http2(address: String, timeout: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        // The preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0).
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        stream.write_all(&hello).await.ok()?;
        let mut answer = [0u8; 9];
        stream.read_exact(&mut answer).await.ok()?;
        Some(answer[3] == 4)
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}
