//! Per-call cost of the balanced channel's routing and weighted pick: with no rules read,
//! with rules read and none in force, under a tag rule and under a v3.1 condition rule
//! (drawn per call), side by side with tower's power-of-two-choices balancer over the same
//! endpoints (the channel's balancer before routing) and one plain tonic channel (the
//! floor).
//!
//! Greeter providers on loopback, registered in the memory store: five of one app (four
//! untagged, one tagged `gray`), five of another (grouped by a tag rule). Sequential calls
//! (one in flight) and 64 concurrent callers, in alternating rounds; the median of the
//! rounds per path.
//! `cargo bench --bench channel`.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::consumer::{BalancedChannel, ChannelHandle, ChannelOptions, SubscriptionHandle};
use introspect::{Backend, MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription};
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
/// The app of the providers a tag rule groups.
const RULED_APP: &str = "bench-ruled-greeter";
/// The consumer app whose condition rule splits its calls.
const V31_CONSUMER: &str = "bench-v31-consumer";
const INTERFACE: &str = "helloworld.Greeter";
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

/// Starts a provider of `app` exporting `service`; returns its address.
async fn provider(store: &Arc<dyn Store>, app: &str, service: ServiceInfo) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder(app, store.clone())
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

/// A balanced channel of `resolver` to the Greeters of `app`, once it has `count` of them.
async fn channel_to(resolver: &Resolver, app: &str, count: usize) -> (BalancedChannel, Kept) {
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE).provided_by([app.to_owned()]))
        .await
        .unwrap();
    while subscription.current().len() < count {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (channel, handle) = resolver
        .balanced_channel_with(&subscription, ChannelOptions::default())
        .unwrap();
    (channel, (subscription, handle))
}

/// What keeps a channel fed while it is measured.
type Kept = (SubscriptionHandle, ChannelHandle);

async fn run() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    let mut untagged = Vec::new();
    for _ in 0..4 {
        untagged.push(provider(&store, APP, ServiceInfo::new(INTERFACE)).await);
    }
    provider(
        &store,
        APP,
        ServiceInfo::new(INTERFACE).with_param("dubbo.tag", "gray"),
    )
    .await;
    let mut ruled = Vec::new();
    for _ in 0..5 {
        ruled.push(provider(&store, RULED_APP, ServiceInfo::new(INTERFACE)).await);
    }
    // A tag rule of the second app (blue: one of its providers, so untagged calls go to the
    // other four), and a v3.1 condition rule of one consumer's app splitting its calls
    // 50 : 50 between two pairs of the first app's untagged providers.
    let config = backend.config();
    let tag_rule = format!(
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: {RULED_APP}\ntags:\n  \
         - name: blue\n    addresses: ['{}']\n",
        ruled[0]
    );
    config
        .put(
            &ConfigKey::new(format!("{RULED_APP}.tag-router"), "dubbo").unwrap(),
            ConfigWrite::create(&tag_rule),
        )
        .await
        .unwrap();
    let v31 = format!(
        "configVersion: v3.1\nscope: application\nkey: {V31_CONSUMER}\nenabled: true\n\
         conditions:\n  - from:\n      match: 'method=SayHello'\n    to:\n      \
         - match: 'port={}'\n        weight: 50\n      - match: 'port={}'\n        \
         weight: 50\n",
        untagged[0].port(),
        untagged[1].port()
    );
    config
        .put(
            &ConfigKey::new(format!("{V31_CONSUMER}.condition-router"), "dubbo").unwrap(),
            ConfigWrite::create(&v31),
        )
        .await
        .unwrap();

    let unruled = Resolver::builder(store.clone()).rules(false).build();
    let reading = Resolver::new(store.clone());
    let split = Resolver::builder(store.clone())
        .application(V31_CONSUMER)
        .build();
    let (off, _a) = channel_to(&unruled, APP, 5).await;
    let (none, _b) = channel_to(&reading, APP, 5).await;
    let (tagged, _c) = channel_to(&reading, RULED_APP, 5).await;
    let (drawn, _d) = channel_to(&split, APP, 5).await;
    let p2c = tower_p2c(&untagged);
    let floor = tonic::transport::Endpoint::from_shared(format!("http://{}", untagged[0]))
        .unwrap()
        .connect_lazy();

    println!(
        "per call, median of {ROUNDS} alternating rounds; sequential: {SEQUENTIAL_CALLS} calls, \
         concurrent: {CONCURRENT_CALLERS} callers x {CONCURRENT_CALLS_EACH}; ratios to the \
         channel that reads no rules"
    );
    println!(
        "| calls | rules not read | no rule in force | a tag rule | a v3.1 condition rule \
         | tower p2c | one plain channel |"
    );
    println!("|---|---|---|---|---|---|---|");
    for concurrent in [false, true] {
        let mut samples: [Vec<Duration>; 6] = Default::default();
        // A warm-up round, not counted: connections made, code paths hot.
        for channel in [&off, &none, &tagged, &drawn] {
            per_call(channel.clone(), None, concurrent).await;
        }
        per_call(p2c.clone(), None, concurrent).await;
        per_call(floor.clone(), None, concurrent).await;
        for _ in 0..ROUNDS {
            samples[0].push(per_call(off.clone(), None, concurrent).await);
            samples[1].push(per_call(none.clone(), None, concurrent).await);
            samples[2].push(per_call(tagged.clone(), None, concurrent).await);
            samples[3].push(per_call(drawn.clone(), None, concurrent).await);
            samples[4].push(per_call(p2c.clone(), None, concurrent).await);
            samples[5].push(per_call(floor.clone(), None, concurrent).await);
        }
        let medians = samples.map(median);
        let mode = if concurrent {
            "concurrent"
        } else {
            "sequential"
        };
        let row: Vec<String> = medians
            .iter()
            .map(|d| {
                format!(
                    "{d:.1?} ({:.2}x)",
                    d.as_secs_f64() / medians[0].as_secs_f64()
                )
            })
            .collect();
        println!("| {mode} | {} |", row.join(" | "));
    }
}
