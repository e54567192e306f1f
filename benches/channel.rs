//! Per-call cost of the balanced channel's routing and weighted pick, side by side with
//! tower's power-of-two-choices balancer over the same endpoints (the channel's balancer
//! before routing) and with one plain tonic channel (the floor).
//!
//! Five Greeter providers on loopback, registered in the memory store: four untagged of the
//! default weight, one tagged `gray`. Sequential calls (one in flight) and 64 concurrent
//! callers, in alternating rounds; the median of the rounds per path.
//! `cargo bench --bench channel`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::consumer::ChannelOptions;
use introspect::{MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription};
use tonic::{Request, Response, Status};
use tower::ServiceExt as _;

#[rustfmt::skip]
#[path = "../proto/generated/helloworld.rs"]
#[allow(clippy::all, dead_code)]
mod pb;

use pb::greeter_client::GreeterClient;
use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

const APP: &str = "bench-greeter";
const ROUNDS: usize = 5;
const SEQUENTIAL_CALLS: usize = 5_000;
const CONCURRENT_CALLERS: usize = 64;
const CONCURRENT_CALLS_EACH: usize = 150;

struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            message: request.into_inner().name,
        }))
    }
}

/// Starts a provider exporting `service`; returns its address.
async fn provider(store: &Arc<dyn Store>, service: ServiceInfo) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder(APP, store.clone())
        .export(service)
        .build()
        .unwrap();
    let router = tonic::transport::Server::builder().add_service(GreeterServer::new(Hello));
    tokio::spawn(provider.serve(router, listener, std::future::pending()));
    address
}

/// Calls `SayHello` through `channel`: sequentially, or from concurrent callers; the time
/// per call.
async fn per_call<C>(channel: C, tag: Option<&'static str>, concurrent: bool) -> Duration
where
    C: tonic::client::GrpcService<tonic::body::Body> + Clone + Send + 'static,
    C::Future: Send,
    C::Error: Into<tower::BoxError>,
    C::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <C::ResponseBody as tonic::codegen::Body>::Error: Into<tower::BoxError> + Send,
{
    let call = move |mut client: GreeterClient<C>| async move {
        let mut request = Request::new(HelloRequest { name: "b".into() });
        if let Some(tag) = tag {
            request
                .metadata_mut()
                .insert("dubbo.tag", tag.parse().unwrap());
        }
        client.say_hello(request).await.expect("the call succeeds");
        client
    };
    let started = Instant::now();
    if concurrent {
        let mut callers = Vec::new();
        for _ in 0..CONCURRENT_CALLERS {
            let mut client = GreeterClient::new(channel.clone());
            callers.push(tokio::spawn(async move {
                for _ in 0..CONCURRENT_CALLS_EACH {
                    client = call(client).await;
                }
            }));
        }
        for caller in callers {
            caller.await.unwrap();
        }
        started.elapsed() / (CONCURRENT_CALLERS * CONCURRENT_CALLS_EACH) as u32
    } else {
        let mut client = GreeterClient::new(channel);
        for _ in 0..SEQUENTIAL_CALLS {
            client = call(client).await;
        }
        started.elapsed() / SEQUENTIAL_CALLS as u32
    }
}

/// tower's p2c by pending requests over plain tonic channels to `addresses`, behind a
/// buffer: the balanced channel's stack before routing, without its health and deadlines.
fn tower_p2c(
    addresses: &[std::net::SocketAddr],
) -> tower::buffer::Buffer<
    http::Request<tonic::body::Body>,
    futures::future::BoxFuture<'static, Result<http::Response<tonic::body::Body>, tower::BoxError>>,
> {
    use tower::load::{CompleteOnResponse, PendingRequests};
    let services: Vec<_> = addresses
        .iter()
        .map(|a| {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{a}"))
                .unwrap()
                .connect_lazy();
            PendingRequests::new(channel, CompleteOnResponse::default())
        })
        .collect();
    let discover = tower::discover::ServiceList::new(services);
    let balance = tower::balance::p2c::Balance::new(discover);
    let boxed = tower::util::BoxService::new(balance.map_err(tower::BoxError::from));
    tower::buffer::Buffer::new(boxed, 1024)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut untagged = Vec::new();
    for _ in 0..4 {
        untagged.push(provider(&store, ServiceInfo::new("helloworld.Greeter")).await);
    }
    let gray = provider(
        &store,
        ServiceInfo::new("helloworld.Greeter").with_param("dubbo.tag", "gray"),
    )
    .await;
    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    while subscription.current().len() < 5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (balanced, _handle) = resolver
        .balanced_channel_with(&subscription, ChannelOptions::default())
        .unwrap();
    let p2c = tower_p2c(&untagged);
    let floor = tonic::transport::Endpoint::from_shared(format!("http://{gray}"))
        .unwrap()
        .connect_lazy();

    println!(
        "per call, median of {ROUNDS} alternating rounds; sequential: {SEQUENTIAL_CALLS} calls, \
         concurrent: {CONCURRENT_CALLERS} callers x {CONCURRENT_CALLS_EACH}"
    );
    println!(
        "| calls | balanced, untagged | balanced, tagged gray | tower p2c | one plain channel |"
    );
    println!("|---|---|---|---|---|");
    for concurrent in [false, true] {
        let mut samples: [Vec<Duration>; 4] = Default::default();
        // A warm-up round, not counted: connections made, code paths hot.
        per_call(balanced.clone(), None, concurrent).await;
        per_call(p2c.clone(), None, concurrent).await;
        per_call(floor.clone(), None, concurrent).await;
        for _ in 0..ROUNDS {
            samples[0].push(per_call(balanced.clone(), None, concurrent).await);
            samples[1].push(per_call(balanced.clone(), Some("gray"), concurrent).await);
            samples[2].push(per_call(p2c.clone(), None, concurrent).await);
            samples[3].push(per_call(floor.clone(), None, concurrent).await);
        }
        let [routed, tagged, tower, plain] = samples.map(median);
        let mode = if concurrent {
            "concurrent"
        } else {
            "sequential"
        };
        let ratio = |d: Duration| d.as_secs_f64() / tower.as_secs_f64();
        println!(
            "| {mode} | {routed:?} ({:.2}x) | {tagged:?} ({:.2}x) | {tower:?} (1.00x) | {plain:?} ({:.2}x) |",
            ratio(routed),
            ratio(tagged),
            ratio(plain)
        );
    }
}
