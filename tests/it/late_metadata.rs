//! A call never fails for want of metadata that is on its way: while an instance's
//! metadata is still being fetched, or retried after a failure that may pass, a call
//! through a balanced channel waits for it within the channel's endpoint wait; it fails at
//! once only when no fetch can mend the set (an answer that does not hash to its revision,
//! say), and after the wait, saying why, when the metadata never comes.
//!
//! Real tonic servers on loopback: a Greeter whose own MetadataService answers only when the
//! test lets it, a port that refuses connections, a MetadataService with a poisoned answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::greeter::CountingGreeter;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::GreeterServer;
use crate::support::hostile::serve_fixed;
use crate::support::ports::free_low_port;
use crate::support::records::Records;
use crate::support::wait::eventually;
use introspect::consumer::{BalancedChannel, ChannelHandle, ChannelOptions};
use introspect::model::keys;
use introspect::rpc::pb::metadata_service_v2_server::{MetadataServiceV2, MetadataServiceV2Server};
use introspect::rpc::pb::{MetadataInfoV2, MetadataRequest};
use introspect::rpc::to_wire;
use introspect::{
    MemoryStore, MetadataInfo, Resolver, ServiceInfo, Store, Subscription, SubscriptionHandle,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

const GREETER: &str = "helloworld.Greeter";

/// A MetadataService that answers `answer` only once its gate is open, counting requests.
struct Gated {
    answer: MetadataInfoV2,
    gate: watch::Receiver<bool>,
    asked: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl MetadataServiceV2 for Gated {
    async fn get_metadata_info(
        &self,
        _: Request<MetadataRequest>,
    ) -> Result<Response<MetadataInfoV2>, Status> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        let mut gate = self.gate.clone();
        if gate.wait_for(|open| *open).await.is_err() {
            return Err(Status::unavailable("the test ended"));
        }
        Ok(Response::new(self.answer.clone()))
    }
}

/// The Greeter's metadata: `helloworld.Greeter` over Triple.
fn greeter_info() -> MetadataInfo {
    Records::metadata("greeter", &[ServiceInfo::new(GREETER)])
}

/// Registers an instance of `info`'s app at `127.0.0.1:{port}` whose metadata is fetched
/// from its own MetadataService at `metadata_port`, and maps the Greeter to the app.
async fn register(store: &Arc<dyn Store>, info: &MetadataInfo, port: u16, metadata_port: u16) {
    let records = Records::new(store.clone());
    let mut instance = Records::instance(info, port);
    instance.metadata.remove(keys::STORAGE_TYPE);
    instance.metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        format!(r#"{{"port":"{metadata_port}","protocol":"tri","version":"2.0.0"}}"#),
    );
    records.register(&instance, None).await;
    records
        .mapping
        .add(GREETER, &info.app)
        .await
        .expect("mapping written");
}

/// What keeps a channel fed; dropped with the test.
type Kept = (Resolver, SubscriptionHandle, ChannelHandle);

/// A channel over a fresh subscription to the Greeter, with the given endpoint wait, and
/// why the subscription's first set is empty.
async fn channel(store: &Arc<dyn Store>, wait: Duration) -> (BalancedChannel, String, Kept) {
    let resolver = Resolver::builder(store.clone())
        .fetch_timeout(Duration::from_secs(20))
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let why = handle
        .why_empty()
        .expect("nothing is known at the start")
        .to_string();
    let options = ChannelOptions::default().endpoint_wait(wait);
    let (channel, feed) = resolver.balanced_channel_with(&handle, options).unwrap();
    (channel, why, (resolver, handle, feed))
}

fn hello() -> tonic::Request<HelloRequest> {
    tonic::Request::new(HelloRequest { name: "x".into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_call_waits_for_metadata_still_being_fetched() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let info = greeter_info();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (open, gate) = watch::channel(false);
    let asked = Arc::new(AtomicU64::new(0));
    let metadata = Gated {
        answer: to_wire(&info),
        gate,
        asked: asked.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GreeterServer::new(CountingGreeter::new(address)))
            .add_service(MetadataServiceV2Server::new(metadata))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    register(&store, &info, address.port(), address.port()).await;

    // The first set goes out after the first-fetch wait, empty: the fetch is still on its way.
    let (channel, why, _kept) = channel(&store, Duration::from_secs(20)).await;
    assert!(why.contains("no metadata known yet"), "{why}");
    eventually(
        Duration::from_secs(10),
        "the fetch to be in flight",
        || async { asked.load(Ordering::Relaxed) >= 1 },
    )
    .await;

    let mut client = GreeterClient::new(channel);
    let mut call = Box::pin(async move { client.say_hello(hello()).await });
    let early = tokio::time::timeout(Duration::from_millis(300), &mut call).await;
    assert!(
        early.is_err(),
        "the call waits for the metadata on its way, not {:?}",
        early.map(|answer| answer.map(|_| ()))
    );
    open.send_replace(true);
    let reply = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .expect("the call ends once the metadata arrived")
        .expect("the greeter answers");
    assert!(
        reply.get_ref().message.contains(&address.to_string()),
        "{}",
        reply.get_ref().message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_for_a_retried_fetch_only_the_endpoint_wait() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let info = greeter_info();
    // A port that refuses connections, as a provider whose server is not up yet: below the
    // range of ports bound to port 0, never handed out again in this process.
    let port = free_low_port(false);
    register(&store, &info, port, port).await;

    let wait = Duration::from_millis(1500);
    let (channel, why, _kept) = channel(&store, wait).await;
    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(20), async move {
        GreeterClient::new(channel).say_hello(hello()).await
    })
    .await
    .expect("the call ends by itself")
    .expect_err("nothing answers");
    let took = started.elapsed();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
    assert!(took >= wait, "waited the endpoint wait, not {took:?}");
    assert!(took < Duration::from_secs(15), "no more: {took:?}");
    assert!(status.message().contains(&why), "{status} says {why}");
    assert!(status.message().contains("endpoint wait"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_fails_at_once_when_no_fetch_can_mend_the_set() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let info = greeter_info();
    // Its only instance answers content that does not hash to the revision it claims.
    let mut poisoned = Records::metadata("greeter", &[ServiceInfo::new(GREETER).with_port(6666)]);
    poisoned.revision = info.revision.clone();
    let port = serve_fixed(to_wire(&poisoned)).await;
    register(&store, &info, port, port).await;

    let (channel, why, _kept) = channel(&store, Duration::from_secs(20)).await;
    let started = Instant::now();
    let status = GreeterClient::new(channel)
        .say_hello(hello())
        .await
        .expect_err("nothing can answer");
    let took = started.elapsed();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
    assert!(status.message().contains(&why), "{status} says {why}");
    assert!(
        took < Duration::from_secs(5),
        "failed at once, not after {took:?}"
    );
}
