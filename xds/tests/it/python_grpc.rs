//! A client no one here wrote: Python's `grpcio` resolving `xds:///helloworld.Greeter`
//! through this server (named in a `GRPC_XDS_BOOTSTRAP` file), calling real Greeter
//! providers and following them as they join, leave gracefully and crash.
//!
//! Needs the virtualenv of `scripts/setup.sh --with-python` (see `support/python.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::support::ads::{AdsClient, addresses};
use crate::support::crash::CrashableGreeter;
use crate::support::greeter::start_greeter;
use crate::support::process::PythonClient;
use crate::support::python::venv;
use introspect::consumer::ProtectionOptions;
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use introspect_xds::types::CLUSTER_LOAD_ASSIGNMENT;
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";
/// How long a change may take to reach the Python client.
const FOLLOW: Duration = Duration::from_secs(20);
/// How long the resolver keeps the last instances of an app that expired all at once
/// (its wipe recovery bound, 30 s by default): the crashed provider is its app's only one.
const RECOVERY: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_follows_providers_that_join_leave_and_crash() {
    let Some(venv) = venv() else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = start_greeter(&store, "greeter-a", Duration::from_millis(50)).await;
    let (a_address, a_key) = (a.address, a.address.to_string());

    let resolver = Resolver::builder(store.clone())
        .protection(ProtectionOptions::default().wipe_recovery(RECOVERY))
        .build();
    let server = XdsServer::builder(resolver).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds = listener.local_addr().unwrap();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));

    let dir = tempfile::tempdir().unwrap();
    let bootstrap = dir.path().join("bootstrap.json");
    let config = serde_json::json!({
        "xds_servers": [{
            "server_uri": xds.to_string(),
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {"id": "python-test", "locality": {}},
    });
    std::fs::write(&bootstrap, config.to_string()).unwrap();
    let started = std::time::Instant::now();
    let mut python = PythonClient::start(
        &venv.python(),
        &format!("xds:///{GREETER}"),
        &[("GRPC_XDS_BOOTSTRAP", bootstrap.to_str().unwrap())],
    );

    // One provider: every call reaches it.
    let first = python.call(10).await;
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.addresses(), vec![a_key.clone()]);

    // A second joins: round robin reaches both.
    let b = start_greeter(&store, "greeter-b", Duration::from_millis(1500)).await;
    let b_key = b.address.to_string();
    let mut both = vec![a_key.clone(), b_key.clone()];
    both.sort();
    python
        .call_until(20, FOLLOW, "calls to reach the joined provider", |c| {
            c.addresses() == both
        })
        .await;

    // It leaves gracefully: deregistered first, so once it has stopped no call fails and
    // none reaches it.
    b.shutdown().await;
    let after_leave = python.call(20).await;
    assert!(after_leave.errors.is_empty(), "{after_leave:?}");
    assert_eq!(after_leave.addresses(), vec![a_key.clone()]);

    // A third joins, then crashes: the client keeps calling the survivor, and once the
    // lease expires (and, as the app's last instance, the recovery bound passes) the xDS
    // state drops it too.
    let ttl = Duration::from_secs(3);
    let c = CrashableGreeter::start(&store, "greeter-c", ttl).await;
    let c_key = c.address.to_string();
    let mut with_c = vec![a_key.clone(), c_key.clone()];
    with_c.sort();
    python
        .call_until(20, FOLLOW, "calls to reach the third provider", |calls| {
            calls.addresses() == with_c
        })
        .await;
    c.crash();
    python
        .call_until(20, FOLLOW, "calls to go only to the survivor", |calls| {
            calls.errors.is_empty() && calls.addresses() == vec![a_key.clone()]
        })
        .await;
    let mut ads = AdsClient::connect(format!("http://{xds}")).await;
    ads.send(CLUSTER_LOAD_ASSIGNMENT, &[GREETER], "", "").await;
    let deadline = tokio::time::Instant::now() + ttl + RECOVERY + FOLLOW;
    loop {
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        let r = ads
            .next_within(wait)
            .await
            .expect("the crashed provider left the xDS state in time");
        if addresses(&r) == vec![a_key.clone()] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the crashed provider left the xDS state"
        );
        ads.ack(&r, &[GREETER]).await;
    }
    let last = python.call(10).await;
    assert!(last.errors.is_empty(), "{last:?}");
    assert_eq!(last.addresses(), vec![a_address.to_string()]);
    eprintln!("python interop test took {:?}", started.elapsed());
    a.shutdown().await;
}
