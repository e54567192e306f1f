//! The Prometheus metrics endpoint, scraped with a raw HTTP request over TCP.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use introspect::metrics::{Metrics, serve_metrics};
use introspect::{MemoryStore, Resolver, ServiceInfo, Store, Subscription};
use support::fleet::start_fleet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `request` and reads the whole answer (the server closes after `Connection: close`).
async fn raw_http(address: std::net::SocketAddr, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes")
        .unwrap();
    String::from_utf8(answer).expect("UTF-8 answer")
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
}

/// Checks the text exposition format and returns the samples by series.
fn parse_exposition(body: &str) -> HashMap<String, f64> {
    let mut typed: HashMap<String, String> = HashMap::new();
    let mut helped = std::collections::HashSet::new();
    let mut samples = HashMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has a text");
            assert!(!help.is_empty());
            assert!(
                helped.insert(name.to_owned()),
                "one HELP per metric: {name}"
            );
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            assert!(helped.contains(name), "HELP before TYPE: {name}");
            assert!(
                typed.insert(name.to_owned(), kind.to_owned()).is_none(),
                "one TYPE per metric: {name}"
            );
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let name = series.split('{').next().unwrap();
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                "{name}"
            );
            assert!(typed.contains_key(name), "sample after its TYPE: {line}");
            if typed[name] == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
            if series.contains('{') {
                assert!(series.ends_with('}'), "{series}");
            }
            let value: f64 = value.parse().expect("numeric value");
            assert!(
                samples.insert(series.to_owned(), value).is_none(),
                "duplicate series {series}"
            );
        }
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_resolver_and_provider_counters() {
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
    let (address, server) = serve_metrics("127.0.0.1:0".parse().unwrap(), metrics)
        .await
        .unwrap();

    let answer = raw_http(address, &get("/metrics")).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let samples = parse_exposition(body);
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
    expect("introspect_watch_restarts_total", 0.0);
    expect("introspect_pushes_total", stats.pushes as f64);
    expect("introspect_app_instances{app=\"shop-orders\"}", 3.0);
    let revision = fleet[0].revision();
    let mut served_total = 0.0;
    for provider in &fleet {
        let instance = provider.instance().await.address();
        let series = format!(
            "introspect_provider_metadata_requests_total{{app=\"shop-orders\",instance=\"{instance}\"}}"
        );
        served_total += samples
            .get(&series)
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

    let missing = raw_http(address, &get("/other")).await;
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    let post = raw_http(
        address,
        "POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    let garbage = raw_http(address, "\u{1}\u{2} nonsense\r\n\r\n").await;
    assert!(
        garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
        "{garbage}"
    );

    // The gauge follows the subscription; it is gone with it.
    drop(live);
    support::wait::eventually(Duration::from_secs(5), "the gauge to go", || async {
        resolver.instances_per_app().is_empty()
    })
    .await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_metrics_when_asked() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let options = introspect::demo::DemoOptions {
        blue: 2,
        green: 2,
        payments: 1,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let mut out = Vec::new();
    let report = introspect::demo::run(store, options, &mut out)
        .await
        .unwrap();
    assert_eq!(report.instances, 5);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Metrics at http://127.0.0.1:"), "{text}");
}
