//! What a rule change costs the xDS server at fleet scale: `cargo bench -p introspect-xds
//! --bench rules`. 100 services of one app, 100 instances each (A tenth of them tagged
//! `gray`), under a service configurator (weights), the app's tag rule and a v3.1
//! condition rule on one method.
//!
//! * `translate/one_service`: one service translated again (a rule of that service
//!   changed): the chain per class of calls, clusters, weights;
//! * `translate/app_wide`: all 100 translated again (a rule of their app changed);
//! * `resources/one_service_{grpc,envoy}`: the changed service's RouteConfiguration,
//!   Clusters and ClusterLoadAssignments built and encoded for one client.
//!
//! The bytes a change pushes to one client (the resources it touches, encoded) are printed
//! beside the timings.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use introspect::consumer::HealthOptions;
use introspect::governance::{ConsumerIdentity, Rule, RuleKey, RuleSet};
use introspect::{Endpoint, ServiceInfo};
use introspect_xds::Translation;
use introspect_xds::resources::{Client, cluster, load_assignment, route_configuration};
use introspect_xds::translate::{Input, translate};
use prost::Message;

const SERVICES: usize = 100;
const INSTANCES: usize = 100;
const APP: &str = "shop";

fn endpoints(service: &str) -> Vec<Endpoint> {
    (0..INSTANCES)
        .map(|i| {
            let mut info = ServiceInfo::new(service)
                .with_protocol("tri")
                .with_param("weight", if i % 2 == 0 { "100" } else { "200" })
                .with_param("warmup", "0");
            if i % 10 == 0 {
                info = info.with_param("dubbo.tag", "gray");
            }
            let port = 20_000 + u16::try_from(i).unwrap();
            Endpoint {
                app: APP.into(),
                host: format!("10.0.{}.{}", i / 250, i % 250 + 1).into(),
                port,
                instance_port: port,
                protocol: "tri".into(),
                revision: "r1".into(),
                service: Arc::new(info),
                timestamp: 0,
            }
        })
        .collect()
}

fn rules(service: &str, weight: u32) -> RuleSet {
    let configurators = format!(
        "configVersion: v3.0\nscope: service\nkey: {service}\nenabled: true\nconfigs:\n  \
         - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: [\"10.0.0.1:20000\"]\n    \
         parameters:\n      weight: {weight}\n      retries: 3\n"
    );
    let tags = format!(
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: {APP}\ntags:\n  - name: blue\n    \
         addresses: [\"10.0.0.2:20001\", \"10.0.0.4:20003\"]\n"
    );
    let conditions = format!(
        "configVersion: v3.1\nscope: service\nkey: {service}\nenabled: true\nconditions:\n  \
         - from:\n      match: method=PlaceOrder\n    to:\n      - match: weight=100\n        \
         weight: 80\n      - match: weight=200\n        weight: 20\n"
    );
    let key = format!("{service}::");
    let parsed = [
        (RuleKey::ServiceConfigurators(key.clone()), configurators),
        (RuleKey::TagRule(APP.into()), tags),
        (RuleKey::ServiceConditions(key), conditions),
    ]
    .map(|(k, text)| {
        let rule = Rule::parse(&k, &text).expect("a valid rule");
        (k, rule)
    });
    RuleSet::new(parsed, Vec::new())
}

fn translated(service: &str, endpoints: &[Endpoint], rules: &RuleSet) -> Arc<Translation> {
    let consumer = ConsumerIdentity::new(Some("web".into()), Some("10.1.0.1".into()));
    translate(&Input {
        service,
        endpoints,
        rules,
        consumer: &consumer,
        outliers: &HealthOptions::default(),
        now_ms: 1_800_000_000_000,
    })
}

/// One cluster's name, encoded Cluster and encoded ClusterLoadAssignment.
type EncodedCluster = (String, Vec<u8>, Vec<u8>);

/// The resources of `t` for `client`, encoded: the RouteConfiguration, then each
/// cluster's Cluster and ClusterLoadAssignment.
fn encoded(t: &Translation, client: Client) -> (Vec<u8>, Vec<EncodedCluster>) {
    let routes = route_configuration(t, client).encode_to_vec();
    let clusters = t
        .clusters
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                cluster(t, c, client).encode_to_vec(),
                load_assignment(c, client).encode_to_vec(),
            )
        })
        .collect();
    (routes, clusters)
}

/// The bytes a change from `before` to `after` pushes to one client: the route
/// configuration when it changed, every cluster (CDS is sent whole), the assignments that
/// changed.
fn pushed(before: &Translation, after: &Translation, client: Client) -> usize {
    let (old_routes, old) = encoded(before, client);
    let (new_routes, new) = encoded(after, client);
    let mut bytes = 0;
    if old_routes != new_routes {
        bytes += new_routes.len();
    }
    if old.iter().map(|c| &c.1).ne(new.iter().map(|c| &c.1)) {
        bytes += new.iter().map(|c| c.1.len()).sum::<usize>();
    }
    for (name, _, assignment) in &new {
        if !old.iter().any(|(n, _, a)| n == name && a == assignment) {
            bytes += assignment.len();
        }
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let services: Vec<(String, Vec<Endpoint>)> = (0..SERVICES)
        .map(|i| {
            let name = format!("com.example.shop.Service{i}");
            let endpoints = endpoints(&name);
            (name, endpoints)
        })
        .collect();
    let (service, one) = &services[0];
    let set = rules(service, 100);
    let changed = rules(service, 300);
    let before = translated(service, one, &set);
    let after = translated(service, one, &changed);
    let routes = RouteConfiguration::decode(
        route_configuration(&after, Client::Grpc)
            .encode_to_vec()
            .as_slice(),
    )
    .expect("decodes");
    eprintln!(
        "one service: {} routes, {} clusters; a configurator weight change pushes {} B to a \
         gRPC client, {} B to Envoy (the resources it touches)",
        routes.virtual_hosts[0].routes.len(),
        after.clusters.len(),
        pushed(&before, &after, Client::Grpc),
        pushed(&before, &after, Client::Envoy),
    );

    let mut group = c.benchmark_group("translate");
    group.bench_function("one_service", |b| {
        b.iter(|| translated(black_box(service), black_box(one), black_box(&changed)))
    });
    let sets: Vec<RuleSet> = services.iter().map(|(s, _)| rules(s, 300)).collect();
    group.bench_function("app_wide", |b| {
        b.iter(|| {
            for ((service, endpoints), set) in services.iter().zip(&sets) {
                black_box(translated(service, endpoints, set));
            }
        })
    });
    group.finish();
    let mut group = c.benchmark_group("resources");
    for (name, client) in [
        ("one_service_grpc", Client::Grpc),
        ("one_service_envoy", Client::Envoy),
    ] {
        group.bench_function(name, |b| b.iter(|| encoded(black_box(&after), client)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
