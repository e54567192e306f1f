//! The provider's lifecycle: the graceful stop keeps its lease renewed, the instance record
//! names every protocol's real port, and newcomers' mistakes fail with words.

use std::sync::Arc;
use std::time::Duration;

use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::GreeterServer;
use crate::support::greeter::{CountingGreeter, greeter_router};
use crate::support::wait::eventually;
use introspect::rpc::MetadataClient;
use introspect::{Error, Limits, MemoryStore, Provider, ServiceInfo, ServiceInstance, Store};

const ORDERS: &str = "shop.OrderService";
const GREETER: &str = "helloworld.Greeter";

fn memory() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

/// The record under `key` and the lease it is bound to, if present.
async fn record(store: &Arc<dyn Store>, key: &str) -> Option<(ServiceInstance, i64)> {
    let kv = store.get(key).await.unwrap()?;
    let instance = ServiceInstance::from_json(&kv.value, &Limits::default()).unwrap();
    Some((instance, kv.lease))
}

#[tokio::test(start_paused = true)]
async fn the_lease_stays_renewed_through_a_drain_longer_than_its_ttl() {
    let store = memory();
    let ttl = Duration::from_secs(3);
    let provider = Provider::builder("shop-orders", store.clone())
        .port(50051)
        .check_metadata_service(false)
        .lease_ttl(ttl)
        .drain_period(ttl * 3)
        .export(ServiceInfo::new(ORDERS))
        .start()
        .await
        .unwrap();
    let registration = provider.registration_id().await.expect("registered");
    let lease: i64 = registration
        .strip_prefix("lease ")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("a lease on the memory store, not {registration}"));
    let key = "/services/shop-orders/127.0.0.1:50051";
    let stopping = tokio::spawn(provider.shutdown());

    // Every half TTL through the drain (three TTLs long): the record is still there,
    // disabled, under the lease it was registered with (renewed, never lost and replaced).
    for step in 1..=5 {
        tokio::time::sleep(ttl / 2).await;
        let (instance, bound) = record(&store, key)
            .await
            .unwrap_or_else(|| panic!("record lost {step} half-TTLs into the drain"));
        assert!(!instance.enabled, "disabled while draining");
        assert_eq!(bound, lease, "still under its first lease");
    }

    stopping.await.unwrap().expect("graceful stop");
    assert!(
        record(&store, key).await.is_none(),
        "deleted after the drain"
    );
    assert!(
        matches!(
            store.keep_alive(lease).await,
            Err(introspect::Error::LeaseNotFound(_))
        ),
        "the lease was revoked"
    );
}

/// Serves `router` with `Provider::serve` in a task; returns the shutdown trigger and the
/// task.
fn spawn_serve(
    provider: Provider,
    router: tonic::transport::server::Router,
    listener: tokio::net::TcpListener,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<introspect::Result<()>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(provider.serve(router, listener, async {
        let _ = stopped.await;
    }));
    (stop, task)
}

async fn say_hello(port: u16) -> Result<String, String> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(2));
    let channel = endpoint.connect().await.map_err(|e| e.to_string())?;
    let mut client = GreeterClient::new(channel);
    let reply = client
        .say_hello(HelloRequest { name: "x".into() })
        .await
        .map_err(|s| s.to_string())?;
    Ok(reply.into_inner().message)
}

#[tokio::test]
async fn serve_registers_while_serving_and_deregisters_before_the_server_stops() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder("greeter", store.clone())
        .drain_period(Duration::from_millis(600))
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let revision = provider.revision();
    let router = greeter_router(CountingGreeter::new(address));
    let (stop, serving) = spawn_serve(provider, router, listener);
    let key = format!("/services/greeter/{address}");

    eventually(
        Duration::from_secs(5),
        "the instance to register",
        || async { record(&store, &key).await.is_some() },
    )
    .await;
    let (instance, _) = record(&store, &key).await.unwrap();
    assert_eq!(
        (instance.host.as_str(), instance.port),
        ("127.0.0.1", address.port())
    );
    assert_eq!(instance.metadata_service_port(), address.port());
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    let info = client
        .fetch("127.0.0.1", address.port(), &revision)
        .await
        .expect("MetadataService was added to the router");
    assert!(
        info.services
            .values()
            .any(|s| s.name == "helloworld.Greeter")
    );
    assert!(say_hello(address.port()).await.is_ok());

    // The signal: disabled first, and the server still answers through the drain.
    stop.send(()).unwrap();
    eventually(
        Duration::from_secs(5),
        "the instance to be disabled",
        || async {
            record(&store, &key)
                .await
                .is_some_and(|(instance, _)| !instance.enabled)
        },
    )
    .await;
    say_hello(address.port())
        .await
        .expect("the server answers while the instance drains");

    // Then the record goes, and only then the server stops.
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("serve returns")
        .unwrap()
        .expect("graceful stop");
    assert!(record(&store, &key).await.is_none());
    assert!(
        say_hello(address.port()).await.is_err(),
        "the server stopped"
    );
}

/// A signal future installs its handler when first polled (`introspect::shutdown_signal`
/// does): polled only once registered, a SIGTERM in between would end the process the
/// default way, its record left behind until the lease expires.
#[tokio::test]
async fn serve_listens_for_its_signal_before_it_registers() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder("greeter", store.clone())
        .drain_period(Duration::ZERO)
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let router = greeter_router(CountingGreeter::new(address));
    let key = format!("/services/greeter/{address}");
    let (first_poll, registered_at_first_poll) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let probe = (store.clone(), key.clone());
    let signal = async move {
        // The memory store answers at once: this runs within the signal's first poll.
        let registered = probe.0.get(&probe.1).await.unwrap().is_some();
        let _ = first_poll.send(registered);
        let _ = stopped.await;
    };
    let serving = tokio::spawn(provider.serve(router, listener, signal));
    let registered = tokio::time::timeout(Duration::from_secs(5), registered_at_first_poll)
        .await
        .expect("the signal is polled")
        .unwrap();
    assert!(
        !registered,
        "the signal is polled before the record is written"
    );
    eventually(
        Duration::from_secs(5),
        "the instance to register",
        || async { record(&store, &key).await.is_some() },
    )
    .await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("serve returns")
        .unwrap()
        .expect("graceful stop");
    assert!(record(&store, &key).await.is_none(), "deregistered");
}

#[tokio::test]
async fn serve_on_all_interfaces_registers_a_reachable_host() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = Provider::builder("greeter", store.clone())
        .drain_period(Duration::ZERO)
        .export(ServiceInfo::new(ORDERS))
        .build()
        .unwrap();
    let router = tonic::transport::Server::builder().add_service(GreeterServer::new(
        CountingGreeter::new(([127, 0, 0, 1], port).into()),
    ));
    let (stop, serving) = spawn_serve(provider, router, listener);
    let registry = introspect::backend::kv::registry::Registry::new(
        store.clone(),
        introspect::Layout::default(),
        Limits::default(),
    );
    eventually(
        Duration::from_secs(5),
        "the instance to register",
        || async { !registry.list("greeter").await.unwrap().instances.is_empty() },
    )
    .await;
    let list = registry.list("greeter").await.unwrap();
    let instance = list.instances.values().next().unwrap();
    let ip: std::net::IpAddr = instance.host.parse().expect("an IP address");
    assert!(!ip.is_unspecified(), "{ip}");
    assert_eq!(instance.port, port);
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn serve_refuses_a_router_that_already_serves_the_metadata_service() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let provider = Provider::builder("greeter", store.clone())
        .export(ServiceInfo::new(ORDERS))
        .build()
        .unwrap();
    let router = tonic::transport::Server::builder().add_service(provider.metadata_service());
    let err = provider
        .serve(router, listener, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Misuse(m) if m.contains("already serves")),
        "{err}"
    );
    assert!(store.get_prefix("/services/").await.unwrap().kvs.is_empty());
}

#[tokio::test]
async fn start_without_the_metadata_service_in_the_router_says_what_to_add() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // The newcomer's router: their service, no MetadataService.
    let router = greeter_router(CountingGreeter::new(address));
    let server = tokio::spawn(
        router.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let provider = Provider::builder("greeter", store.clone())
        .port(address.port())
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let err = provider.start().await.unwrap_err();
    let Error::MetadataServiceMissing {
        address: called,
        advice,
        ..
    } = &err
    else {
        panic!("expected MetadataServiceMissing: {err}");
    };
    assert_eq!(called, &address.to_string());
    assert!(advice.contains("metadata_service()"), "{advice}");
    assert!(
        store.get_prefix("/services/").await.unwrap().kvs.is_empty(),
        "nothing registered"
    );
    server.abort();

    // Nothing listening at all: it says so, and what to do.
    let err = Provider::builder("greeter", store.clone())
        .port(address.port())
        .export(ServiceInfo::new(ORDERS))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::MetadataServiceMissing { advice, .. } if advice.contains("nothing answered")),
        "{err}"
    );
}

#[tokio::test]
async fn start_inside_a_router_with_the_metadata_service_passes_the_check() {
    let store = memory();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder("greeter", store.clone())
        .port(address.port())
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let router =
        greeter_router(CountingGreeter::new(address)).add_service(provider.metadata_service());
    let server = tokio::spawn(
        router.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    provider.start().await.expect("the check passes");
    assert_eq!(provider.exported().served(), 1, "the check asked once");
    provider.shutdown().await.unwrap();
    server.abort();
}

#[tokio::test]
async fn a_port_never_set_and_unspecified_hosts_are_refused_in_words() {
    let store = memory();
    let err = Provider::builder("greeter", store.clone())
        .export(ServiceInfo::new(ORDERS))
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason: m, .. } if m.contains("port was never set")),
        "{err}"
    );
    assert!(matches!(
        Provider::builder("greeter", store.clone()).port(0).build(),
        Err(Error::InvalidPort(0))
    ));
    for host in ["0.0.0.0", "::", "[::]"] {
        let err = Provider::builder("greeter", store.clone())
            .host(host)
            .port(50051)
            .build()
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidName { kind: "host", .. })
                && err.to_string().contains("unspecified"),
            "{host}: {err}"
        );
    }
    assert!(store.get_prefix("").await.unwrap().kvs.is_empty());
}

/// The port a Dubbo consumer dials for a service of `protocol` on `instance`, read as Dubbo
/// Java's `ServiceInstancesChangedListener` (dubbo-registry-api) reads it: the first
/// `dubbo.endpoints` entry of the protocol (`ServiceInstanceMetadataUtils.getEndpoint`,
/// a list of `DefaultServiceInstance.Endpoint {port, protocol}`), else the instance port.
/// It never reads a service's own port from the metadata; dubbo-go does the same.
fn dubbo_port(instance: &ServiceInstance, protocol: &str) -> u16 {
    let endpoints: Vec<serde_json::Value> =
        serde_json::from_str(&instance.metadata["dubbo.endpoints"]).unwrap();
    endpoints
        .iter()
        .find(|e| e["protocol"] == protocol)
        .and_then(|e| e["port"].as_u64())
        .map_or(instance.port, |p| u16::try_from(p).unwrap())
}

#[tokio::test]
async fn a_dubbo_reader_finds_each_protocols_real_port() {
    let store = memory();
    // `tri` on the instance port (the router run by serve), `grpc` on a server of its own.
    let tri = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tri_address = tri.local_addr().unwrap();
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_address = grpc.local_addr().unwrap();
    let grpc_server = tokio::spawn(
        greeter_router(CountingGreeter::new(grpc_address))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc)),
    );
    let provider = Provider::builder("greeter", store.clone())
        .drain_period(Duration::ZERO)
        .export(ServiceInfo::new(GREETER))
        .export(
            ServiceInfo::new(GREETER)
                .with_protocol("grpc")
                .with_port(grpc_address.port()),
        )
        .build()
        .unwrap();
    let revision = provider.revision();
    let (stop, serving) = spawn_serve(
        provider,
        greeter_router(CountingGreeter::new(tri_address)),
        tri,
    );
    let key = format!("/services/greeter/{tri_address}");
    eventually(
        Duration::from_secs(5),
        "the instance to register",
        || async { record(&store, &key).await.is_some() },
    )
    .await;
    let (instance, _) = record(&store, &key).await.unwrap();

    // The Dubbo reader dials each protocol at the server that really serves it.
    assert_eq!(dubbo_port(&instance, "tri"), tri_address.port());
    assert_eq!(dubbo_port(&instance, "grpc"), grpc_address.port());
    for (protocol, server) in [("tri", tri_address), ("grpc", grpc_address)] {
        let answer = say_hello(dubbo_port(&instance, protocol)).await.unwrap();
        assert!(
            answer.ends_with(&server.to_string()),
            "{protocol}: {answer}"
        );
    }

    // The MetadataService url-params name its own port, protocol and version, and it
    // answers there.
    let params: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&instance.metadata["dubbo.metadata-service.url-params"]).unwrap();
    assert_eq!(params["port"], tri_address.port().to_string());
    assert_eq!(params["protocol"], "tri");
    assert_eq!(params["version"], "2.0.0");
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    client
        .fetch("127.0.0.1", params["port"].parse().unwrap(), &revision)
        .await
        .expect("MetadataService answers at the advertised port");

    // This crate's consumer agrees.
    let resolver = introspect::Resolver::new(store.clone());
    for (protocol, server) in [("tri", tri_address), ("grpc", grpc_address)] {
        let endpoints = resolver
            .resolve(&introspect::Subscription::new(GREETER).protocol(protocol))
            .await
            .unwrap();
        let ports: Vec<u16> = endpoints.iter().map(|e| e.port).collect();
        assert_eq!(ports, [server.port()], "{protocol}");
    }

    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    grpc_server.abort();
}
