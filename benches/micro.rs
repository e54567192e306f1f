//! Criterion micro-benchmarks of the hot pure paths: `cargo bench --bench micro`.
//!
//! * `revision/{10,100,1000}`: the `sha256-v1` revision of an app exporting that many
//!   services, each with the ~25 parameters of a real Dubbo service;
//! * `endpoints/10000`: endpoint assembly for 10,000 instances of one revision
//!   (`Resolver::endpoints_of` with the metadata cached: grouping by revision, cache lookup,
//!   one endpoint per instance);
//! * `instance_json/parse`: parsing and validating one instance record as stored (~700 B);
//! * `instance_json/serde_alone`: the same record read by serde_json alone (no validation),
//!   the path a record takes when it is not in the plain form the reader of its own reads;
//! * `instance_json/parse_and_keep/10000`: 10,000 distinct records parsed and kept, then
//!   dropped, as an app's list does (the heap grows, unlike in a loop over one record).

#[allow(dead_code)]
#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use introspect::backend::kv::registry::Registry;
use introspect::consumer::Resolver;
use introspect::{Limits, MemoryStore, ServiceInfo, ServiceInstance, Store, Subscription};

use common::{APP, INTERFACES, service_params, start_metadata_server, synthetic};

fn revision(c: &mut Criterion) {
    let mut group = c.benchmark_group("revision");
    for n in [10usize, 100, 1_000] {
        let services: BTreeMap<String, Arc<ServiceInfo>> = (0..n)
            .map(|i| {
                let interface = format!("com.example.shop.Service{i}");
                let mut service = ServiceInfo::new(&interface);
                service.params = service_params(&interface, "tri", 0);
                (service.match_key(), Arc::new(service))
            })
            .collect();
        group.bench_with_input(BenchmarkId::from_parameter(n), &services, |b, services| {
            b.iter(|| introspect::model::revision(black_box(APP), black_box(services)))
        });
    }
    group.finish();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn endpoints(c: &mut Criterion) {
    const N: usize = 10_000;
    let rt = runtime();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (server, instances, resolver) = rt.block_on(async {
        let server = start_metadata_server(&store, 0).await;
        let template = server.instance().await;
        let registry = Registry::new(store.clone(), Default::default(), Default::default());
        for i in 0..N {
            registry
                .register(&synthetic(&template, i), None)
                .await
                .expect("registered");
        }
        let instances = registry.list(APP).await.expect("listed").instances;
        let resolver = Resolver::new(store.clone());
        (server, instances, resolver)
    });
    let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
    let warm = rt.block_on(resolver.endpoints_of(APP, &instances, &subscription));
    assert_eq!(warm.0.len(), N);
    let mut group = c.benchmark_group("endpoints");
    group.sample_size(20);
    group.bench_function(BenchmarkId::from_parameter(N), |b| {
        b.iter(|| rt.block_on(resolver.endpoints_of(APP, black_box(&instances), &subscription)))
    });
    group.finish();
    drop(server);
}

fn instance_json(c: &mut Criterion) {
    let rt = runtime();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (server, record) = rt.block_on(async {
        let server = start_metadata_server(&store, 0).await;
        let record = synthetic(&server.instance().await, 0).to_json();
        (server, record)
    });
    let limits = Limits::default();
    c.bench_function("instance_json/parse", |b| {
        b.iter(|| ServiceInstance::from_json(black_box(&record), &limits).expect("parses"))
    });
    // The same record read by serde alone, without the plain metadata reader (and without
    // validation), side by side with the row above.
    c.bench_function("instance_json/serde_alone", |b| {
        b.iter(|| serde_json::from_slice::<ServiceInstance>(black_box(&record)).expect("parses"))
    });
    // 10,000 distinct records parsed and kept, then dropped, as a list of an app does.
    let records: Vec<Vec<u8>> = rt.block_on(async {
        let template = server.instance().await;
        (0..10_000)
            .map(|i| synthetic(&template, i).to_json())
            .collect()
    });
    let mut group = c.benchmark_group("instance_json");
    group.sample_size(20);
    group.bench_function("parse_and_keep/10000", |b| {
        b.iter(|| {
            let kept: Vec<ServiceInstance> = records
                .iter()
                .map(|r| ServiceInstance::from_json(black_box(r), &limits).expect("parses"))
                .collect();
            drop(black_box(kept));
        })
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, revision, endpoints, instance_json);
criterion_main!(benches);
