//! One hung MetadataService never delays the others: a subscription's first set waits for
//! the first metadata fetches only for a short bound, and a revision still being fetched
//! joins when its metadata arrives. Real servers and sockets, bounded real time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::fleet::start_provider;
use crate::support::hostile::{register_raw, serve_silence};
use crate::support::records::{ORDERS, Records, ports};
use crate::support::wait::eventually;
use introspect::model::keys;
use introspect::rpc::pb::metadata_service_v2_server::{MetadataServiceV2, MetadataServiceV2Server};
use introspect::rpc::pb::{MetadataInfoV2, MetadataRequest};
use introspect::rpc::to_wire;
use introspect::{MemoryStore, Resolver, ServiceInfo, Store, Subscription};
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

/// How long the slow MetadataService takes to answer.
const SLOW: Duration = Duration::from_secs(2);
/// The fetch timeout: the slow answer fits, the hung one never comes.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers after [`SLOW`].
struct Slow(MetadataInfoV2);

#[tonic::async_trait]
impl MetadataServiceV2 for Slow {
    async fn get_metadata_info(
        &self,
        _: Request<MetadataRequest>,
    ) -> Result<Response<MetadataInfoV2>, Status> {
        tokio::time::sleep(SLOW).await;
        Ok(Response::new(self.0.clone()))
    }
}

async fn serve_slow(answer: MetadataInfoV2) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MetadataServiceV2Server::new(Slow(answer)))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_revision_does_not_hold_the_first_set() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // Revision one: a real provider, answering at once.
    let honest = start_provider(&store, "shop-orders", vec![ServiceInfo::new(ORDERS)]).await;
    let honest_port = honest.instance().await.port;
    // Revision two: its only instance accepts connections and never answers.
    register_raw(
        &store,
        "shop-orders",
        serve_silence().await,
        "0f1e2d3c4b5a",
        true,
    )
    .await;
    // Revision three: answers, after a while.
    let slow_info = Records::metadata(
        "shop-orders",
        &[ServiceInfo::new(ORDERS), ServiceInfo::new("shop.Slow")],
    );
    let slow_port = serve_slow(to_wire(&slow_info)).await;
    let mut slow = Records::instance(&slow_info, slow_port);
    slow.metadata.remove(keys::STORAGE_TYPE);
    Records::new(store.clone()).register(&slow, None).await;

    let resolver = Resolver::builder(store)
        .fetch_timeout(FETCH_TIMEOUT)
        .build();
    let started = Instant::now();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let waited = started.elapsed();
    // Published with what is known after the short wait (500 ms by default), neither after
    // the hung fetch's timeout nor after the slow answer.
    assert!(waited < SLOW - Duration::from_millis(500), "{waited:?}");
    assert_eq!(ports(&handle.current()), [honest_port]);

    // The slow revision joins when its metadata arrives; the hung one never does, and
    // never takes anything away.
    eventually(
        SLOW + Duration::from_secs(5),
        "the slow revision to join",
        || {
            let handle = handle.clone();
            async move {
                let mut want = vec![honest_port, slow_port];
                want.sort_unstable();
                ports(&handle.current()) == want
            }
        },
    )
    .await;
    honest.abort();
}
