//! Revision verification against a hostile MetadataService, and storage type `remote`.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fleet::{start_provider, start_provider_with};
use crate::support::hostile::serve_fixed;
use crate::support::records::Records;
use introspect::model::{StorageType, keys};
use introspect::rpc::to_wire;
use introspect::{
    Error, MemoryStore, MetadataInfo, Provider, Resolver, ServiceInfo, Store, Subscription,
};

const ORDERS: &str = "shop.OrderService";

fn services() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new(ORDERS),
        ServiceInfo::new("shop.CartService"),
    ]
}

/// Serves `answer` (poisoned metadata) on `127.0.0.1:0`; returns the port.
async fn serve_hostile(answer: MetadataInfo) -> u16 {
    serve_fixed(to_wire(&answer)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_metadata_answer_is_rejected_and_another_instance_tried() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let honest = start_provider(&store, "shop-orders", services()).await;
    let revision = honest.revision();

    // Same app and claimed revision, other content: OrderService redirected elsewhere.
    let mut poisoned = MetadataInfo::new(
        "shop-orders",
        vec![
            ServiceInfo::new(ORDERS)
                .with_port(6666)
                .with_param("weight", "9999"),
            ServiceInfo::new("shop.CartService"),
        ],
    )
    .unwrap();
    assert_ne!(poisoned.revision, revision);
    poisoned.revision = revision.clone();
    let hostile_port = serve_hostile(poisoned).await;

    // Its record claims the honest revision and the provider's rule (sha256-v2), next to the
    // honest one.
    let mut record = honest.instance().await;
    record.port = hostile_port;
    record.metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        format!(r#"{{"port":"{hostile_port}","protocol":"tri","version":"2.0.0"}}"#),
    );
    record.metadata.insert(keys::ENDPOINTS.into(), "[]".into());
    assert_eq!(record.declared_revision_rule(), Some("sha256-v2"));
    Records::new(store.clone()).register(&record, None).await;
    let hostile = Arc::new(record);

    let resolver = Resolver::builder(store.clone())
        .fetch_timeout(Duration::from_secs(2))
        .build();
    // Asked alone, the hostile instance's answer is rejected and counted.
    let err = resolver
        .metadata("shop-orders", &revision, &[&hostile])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MetadataUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("hashes to"), "{err}");
    assert_eq!(resolver.stats().await.revision_mismatches, 1);
    assert_eq!(
        resolver.stats().await.revisions_known,
        0,
        "nothing poisoned is cached"
    );

    // Resolving the interface: whichever instance is asked first, the honest content wins
    // (retried until the hostile one was asked first at least once).
    let subscription = Subscription::new(ORDERS);
    for _ in 0..64 {
        resolver.clear_cache().await;
        let endpoints = resolver.resolve(&subscription).await.unwrap();
        assert_eq!(
            endpoints.len(),
            2,
            "both instances of the revision are endpoints"
        );
        assert!(
            endpoints
                .iter()
                .all(|e| e.port != 6666 && e.params().is_empty())
        );
        if resolver.stats().await.revision_mismatches >= 2 {
            break;
        }
    }
    assert!(resolver.stats().await.revision_mismatches >= 2);
}

#[tokio::test]
async fn remote_storage_is_read_from_the_report_first() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // MetadataService is not served anywhere: only the report can answer.
    let provider = Provider::builder("shop-orders", store.clone())
        .port(50051)
        .storage_type(StorageType::Remote)
        .export(ServiceInfo::new(ORDERS))
        .start()
        .await
        .unwrap();
    let resolver = Resolver::new(store.clone());
    let endpoints = resolver.resolve(&Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(endpoints[0].port, 50051);
    let stats = resolver.stats().await;
    assert_eq!(
        (stats.report_reads, stats.metadata_fetches),
        (1, 0),
        "{stats:?}"
    );
    provider.abort();
}

#[tokio::test]
async fn remote_storage_falls_back_to_the_metadata_service() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = start_provider_with(&store, "shop-orders", services(), |b| {
        b.storage_type(StorageType::Remote)
    })
    .await;
    let key = format!("/dubbo/metadata/shop-orders/{}", provider.revision());
    assert!(
        store.get(&key).await.unwrap().is_some(),
        "the report was put"
    );
    store.delete(&key).await.unwrap();
    let resolver = Resolver::new(store.clone());
    let endpoints = resolver.resolve(&Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(endpoints.len(), 1);
    let stats = resolver.stats().await;
    assert_eq!(
        (stats.report_reads, stats.metadata_fetches),
        (1, 1),
        "{stats:?}"
    );
    assert_eq!(provider.exported().served(), 1);
}

#[tokio::test(start_paused = true)]
async fn unused_reported_revisions_are_removed_after_the_grace_period() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let grace = Duration::from_secs(60);
    let start = |port: u16| {
        Provider::builder("shop-orders", store.clone())
            .port(port)
            .storage_type(StorageType::Remote)
            .report_cleanup(grace)
            .lease_ttl(Duration::from_secs(3600))
            .drain_period(Duration::from_millis(10))
            .export(ServiceInfo::new(ORDERS))
            .start()
    };
    let a = start(50051).await.unwrap();
    let b = start(50052).await.unwrap();
    let old = a.revision();
    a.set_services([ServiceInfo::new(ORDERS).with_param("weight", "2")])
        .await
        .unwrap();
    let new = a.revision();
    let report = introspect::backend::kv::report::MetadataReport::new(
        store.clone(),
        introspect::Layout::default(),
        introspect::Limits::default(),
    );
    let mut reported = report.revisions("shop-orders").await.unwrap();
    reported.sort();
    let mut both = vec![old.clone(), new.clone()];
    both.sort();
    assert_eq!(reported, both);

    // b still uses the old revision: it stays.
    tokio::time::sleep(grace * 3).await;
    assert_eq!(report.revisions("shop-orders").await.unwrap().len(), 2);

    // b stops: the old revision is removed once unused for the grace period.
    b.shutdown().await.unwrap();
    tokio::time::sleep(grace / 2).await;
    assert_eq!(
        report.revisions("shop-orders").await.unwrap().len(),
        2,
        "grace period"
    );
    tokio::time::sleep(grace * 2).await;
    assert_eq!(report.revisions("shop-orders").await.unwrap(), [new]);
    a.shutdown().await.unwrap();
}
