//! Per client where the rules need it: two providers of one app on the memory store (whose
//! config centre holds the rules), a condition rule whose `when` reads the consumer's own
//! app and a parameter, and scripted ADS clients whose nodes say different things of
//! themselves (see `node.rs` for the convention): each is sent the routes and assignment of
//! a consumer as its node says, a client saying nothing the server's own; and a rule change
//! reaches each as a new version. Beside them, the warm-up ramp pushed in steps.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::{Locality, Node};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, Value};
use introspect::backend::{Backend, ConfigKey, ConfigWrite};
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use introspect_xds::types::{CLUSTER_LOAD_ASSIGNMENT, ROUTE_CONFIGURATION};
use prost::Message;
use tokio::sync::oneshot;

use crate::support::ads::{AdsClient, addresses};
use crate::support::greeter::{GreeterNode, start_greeter};

const GREETER: &str = "helloworld.Greeter";
const RULE_KEY: &str = "helloworld.Greeter::.condition-router";

fn metadata(fields: &[(&str, &str)]) -> Option<Struct> {
    Some(Struct {
        fields: fields
            .iter()
            .map(|(k, v)| {
                let value = Value {
                    kind: Some(Kind::StringValue((*v).to_owned())),
                };
                ((*k).to_owned(), value)
            })
            .collect(),
    })
}

/// The addresses an untagged call of `client` goes to: the cluster its route
/// configuration's last route names, and that cluster's assignment.
async fn untagged_reaches(client: &mut AdsClient) -> Vec<String> {
    client.send(ROUTE_CONFIGURATION, &[GREETER], "", "").await;
    let rds = client.next().await;
    client.ack(&rds, &[GREETER]).await;
    let routes = RouteConfiguration::decode(rds.resources[0].value.as_slice()).unwrap();
    let last = routes.virtual_hosts[0].routes.last().unwrap();
    let Some(Action::Route(action)) = &last.action else {
        panic!("a route action")
    };
    let Some(ClusterSpecifier::Cluster(cluster)) = &action.cluster_specifier else {
        panic!("one cluster: {action:?}")
    };
    client
        .send(CLUSTER_LOAD_ASSIGNMENT, &[cluster.as_str()], "", "")
        .await;
    let eds = client.next().await;
    client.ack(&eds, &[cluster.as_str()]).await;
    let mut reached = addresses(&eds);
    reached.sort();
    reached
}

async fn put_rule(backend: &Backend, text: &str) {
    let key = ConfigKey::new(RULE_KEY, "dubbo").unwrap();
    let current = backend.config().get(&key).await.unwrap();
    backend
        .config()
        .put(
            &key,
            ConfigWrite::new(text, current.as_ref().map(|item| &item.version)),
        )
        .await
        .unwrap();
}

fn sorted(nodes: &[&GreeterNode]) -> Vec<String> {
    let mut out: Vec<String> = nodes.iter().map(|n| n.address.to_string()).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_is_routed_as_its_node_says() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::kv(store.clone(), Default::default());
    let a = start_greeter(&store, "greeter", Duration::from_millis(50)).await;
    let b = start_greeter(&store, "greeter", Duration::from_millis(50)).await;
    put_rule(
        &backend,
        &format!(
            "configVersion: v3.0\nscope: service\nkey: {GREETER}\nenabled: true\nconditions:\n  \
             - 'application = web => port = {b}'\n  - 'region = hz => port = {a}'\n",
            a = a.address.port(),
            b = b.address.port()
        ),
    )
    .await;
    let resolver = Resolver::builder(backend.clone())
        .application("shop")
        .build();
    let server = XdsServer::builder(resolver).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));

    let mut anyone = AdsClient::connect(address.clone()).await;
    assert_eq!(untagged_reaches(&mut anyone).await, sorted(&[&a, &b]));
    let mut web = AdsClient::connect(address.clone()).await.saying(Node {
        id: "web-1".into(),
        metadata: metadata(&[("application", "web")]),
        ..Default::default()
    });
    assert_eq!(untagged_reaches(&mut web).await, sorted(&[&b]));
    let mut in_hz = AdsClient::connect(address.clone()).await.saying(Node {
        id: "hz-1".into(),
        locality: Some(Locality {
            region: "hz".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(untagged_reaches(&mut in_hz).await, sorted(&[&a]));

    // The rule changes: the web client is sent a new version of its routes.
    put_rule(
        &backend,
        &format!(
            "configVersion: v3.0\nscope: service\nkey: {GREETER}\nenabled: true\nconditions:\n  \
             - 'application = web => port = {a}'\n",
            a = a.address.port()
        ),
    )
    .await;
    let pushed = loop {
        let response = web.next().await;
        web.ack(&response, &[GREETER]).await;
        if response.type_url == CLUSTER_LOAD_ASSIGNMENT {
            break response;
        }
    };
    assert_eq!(addresses(&pushed), vec![a.address.to_string()]);
    a.shutdown().await;
    b.shutdown().await;
}

/// The weight each address has in an assignment, whatever the client kind's layout.
fn weights(
    response: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse,
) -> Vec<u32> {
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    response
        .resources
        .iter()
        .flat_map(|any| {
            let cla = ClusterLoadAssignment::decode(any.value.as_slice()).unwrap();
            cla.endpoints
                .into_iter()
                .flat_map(|l| l.lb_endpoints)
                .map(|e| e.load_balancing_weight.map_or(0, |w| w.value))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A provider warming up is sent again as its weight grows, in steps, not on every tick:
/// a warm-up of 5 s (steps of a second, the shortest) is pushed about six times, rising,
/// until it weighs what it publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warming_provider_is_pushed_again_as_its_weight_grows() {
    use crate::support::greeter::{greeter_service, start_greeter_exporting};

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::kv(store.clone(), Default::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let warming = start_greeter_exporting(
        backend.clone(),
        "greeter",
        Duration::from_secs(10),
        Duration::from_millis(50),
        listener,
        None,
        greeter_service()
            .with_param("weight", "100")
            .with_param("warmup", "5000"),
    )
    .await;
    let server = XdsServer::builder(Resolver::new(store.clone())).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    let mut client = AdsClient::connect(address).await;
    client
        .send(CLUSTER_LOAD_ASSIGNMENT, &[GREETER], "", "")
        .await;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let response = client.next().await;
        client.ack(&response, &[GREETER]).await;
        let weight = weights(&response)[0];
        seen.push(weight);
        if weight >= 100 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still warming after 20 s: {seen:?}"
        );
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "rising: {seen:?}");
    assert!(
        (3..=7).contains(&seen.len()),
        "a few steps, not every tick: {seen:?}"
    );
    eprintln!("weights pushed while warming: {seen:?}");
    warming.shutdown().await;
}
