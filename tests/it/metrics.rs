//! Metrics through the `metrics` facade: a resolver's and its providers' stats recorded into
//! a Prometheus recorder and read back from its exposition.

use std::collections::HashMap;
use std::sync::Arc;

use crate::support::fleet::start_fleet;
use introspect::metrics::Metrics;
use introspect::{MemoryStore, Resolver, ServiceInfo, Store, Subscription};
use metrics_exporter_prometheus::PrometheusBuilder;

/// The samples of a text exposition, by series (`name{labels}`).
fn samples(exposition: &str) -> HashMap<String, f64> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// Records one round of `metrics` into a fresh recorder and returns its exposition.
async fn publish_once(metrics: &Metrics) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let sample = metrics.sample().await;
    metrics::with_local_recorder(&recorder, || metrics.record(&sample));
    handle.render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolver_and_provider_stats_reach_the_recorder() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let fleet = start_fleet(
        &store,
        "shop-orders",
        3,
        &[ServiceInfo::new("shop.OrderService")],
    )
    .await;
    let resolver = Resolver::new(store.clone());
    let subscription = Subscription::new("shop.OrderService");
    assert_eq!(resolver.resolve(&subscription).await.unwrap().len(), 3);
    assert_eq!(resolver.resolve(&subscription).await.unwrap().len(), 3);
    let live = resolver.subscribe(subscription).await.unwrap();
    assert_eq!(live.current().len(), 3);

    let mut metrics = Metrics::new().resolver(&resolver);
    for provider in &fleet {
        metrics = metrics.provider(provider).await;
    }
    let body = publish_once(&metrics).await;
    let samples = samples(&body);
    let stats = resolver.stats().await;
    assert_eq!(
        stats.metadata_fetches, 1,
        "one revision, one fetch: {stats:?}"
    );
    let expect = |series: &str, value: f64| {
        assert_eq!(samples.get(series), Some(&value), "{series} in\n{body}");
    };
    expect("introspect_metadata_fetches_total", 1.0);
    expect("introspect_metadata_cache_misses_total", 1.0);
    expect(
        "introspect_metadata_cache_hits_total",
        stats.cache_hits as f64,
    );
    assert!(stats.cache_hits >= 2, "{stats:?}");
    expect("introspect_metadata_fetch_failures_total", 0.0);
    expect("introspect_revisions_known", 1.0);
    expect("introspect_subscriptions", 1.0);
    expect("introspect_protection_active", 0.0);
    expect("introspect_pushes_total", stats.pushes as f64);
    expect("introspect_app_instances{app=\"shop-orders\"}", 3.0);
    assert!(
        body.contains("# HELP introspect_metadata_fetches_total MetadataService calls made"),
        "descriptions reach the exporter:\n{body}"
    );
    let revision = fleet[0].revision();
    let mut served_total = 0.0;
    for provider in &fleet {
        let instance = provider.instance().await.key_address();
        served_total += samples
            .get(&format!(
                "introspect_provider_metadata_requests_total{{app=\"shop-orders\",instance=\"{instance}\"}}"
            ))
            .copied()
            .expect("a series per provider");
        expect(
            &format!(
                "introspect_provider_revision_info{{app=\"shop-orders\",instance=\"{instance}\",revision=\"{revision}\"}}"
            ),
            1.0,
        );
    }
    assert_eq!(served_total, 1.0, "the providers answered one fetch in all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_labels_from_the_store_are_bounded() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut fleet = Vec::new();
    for app in ["app-a", "app-b", "app-c", "app-d"] {
        fleet.extend(start_fleet(&store, app, 1, &[ServiceInfo::new("shop.Shared")]).await);
    }
    let resolver = Resolver::new(store.clone());
    let live = resolver
        .subscribe(Subscription::new("shop.Shared"))
        .await
        .unwrap();
    assert_eq!(live.current().len(), 4);
    let metrics = Metrics::new().resolver(&resolver).max_app_labels(2);
    let body = publish_once(&metrics).await;
    let series: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("introspect_app_instances{"))
        .collect();
    assert_eq!(series.len(), 3, "two apps and `other`: {series:?}");
    let samples = samples(&body);
    assert_eq!(
        samples.get("introspect_app_instances{app=\"other\"}"),
        Some(&2.0),
        "{body}"
    );
    let total: f64 = series
        .iter()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(total, 4.0, "every instance is counted once: {body}");
}
