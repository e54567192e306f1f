//! Limits on what the network and the store can make a consumer allocate.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::fleet::start_provider;
use crate::support::hostile::{register_raw, serve_fixed};
use introspect::rpc::MetadataClient;
use introspect::rpc::pb::{MetadataInfoV2, ServiceInfoV2};
use introspect::{Error, Limits, MemoryStore, Resolver, ServiceInfo, Store, Subscription};

fn service(name: &str, params: HashMap<String, String>) -> ServiceInfoV2 {
    ServiceInfoV2 {
        name: name.into(),
        protocol: "tri".into(),
        path: name.into(),
        params,
        ..Default::default()
    }
}

#[tokio::test]
async fn oversized_answer_is_refused_by_the_client() {
    let huge = HashMap::from([("blob".to_owned(), "x".repeat(1 << 20))]);
    let answer = MetadataInfoV2 {
        app: "shop".into(),
        version: "r1".into(),
        services: HashMap::from([("a.B:tri".to_owned(), service("a.B", huge))]),
    };
    let port = serve_fixed(answer).await;
    let limits = Limits {
        max_metadata_bytes: 64 * 1024,
        ..Limits::default()
    };
    let err = MetadataClient::new(Duration::from_secs(2), limits)
        .fetch("127.0.0.1", port, "r1")
        .await
        .unwrap_err();
    match err {
        Error::Rpc { status, .. } => assert_eq!(status.code(), tonic::Code::OutOfRange, "{status}"),
        other => panic!("expected a refused message, got {other}"),
    }
}

#[tokio::test]
async fn too_many_services_or_params_are_refused() {
    let many: HashMap<String, ServiceInfoV2> = (0..50)
        .map(|i| {
            (
                format!("a.S{i}:tri"),
                service(&format!("a.S{i}"), HashMap::new()),
            )
        })
        .collect();
    let port = serve_fixed(MetadataInfoV2 {
        app: "shop".into(),
        version: "r1".into(),
        services: many,
    })
    .await;
    let limits = Limits {
        max_services: 10,
        ..Limits::default()
    };
    let err = MetadataClient::new(Duration::from_secs(2), limits.clone())
        .fetch("127.0.0.1", port, "r1")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                what: "metadata info service count",
                ..
            }
        ),
        "{err}"
    );

    let params: HashMap<String, String> =
        (0..50).map(|i| (format!("k{i}"), "v".to_owned())).collect();
    let services = HashMap::from([("a.B:tri".to_owned(), service("a.B", params))]);
    let port = serve_fixed(MetadataInfoV2 {
        app: "shop".into(),
        version: "r1".into(),
        services,
    })
    .await;
    let limits = Limits {
        max_params: 10,
        ..Limits::default()
    };
    let err = MetadataClient::new(Duration::from_secs(2), limits)
        .fetch("127.0.0.1", port, "r1")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                what: "service parameter count",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn services_under_a_foreign_match_key_or_with_bad_ports_are_refused() {
    let services = HashMap::from([(
        "a.Trusted:tri".to_owned(),
        service("a.Evil", HashMap::new()),
    )]);
    let port = serve_fixed(MetadataInfoV2 {
        app: "shop".into(),
        version: "r1".into(),
        services,
    })
    .await;
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    assert!(matches!(
        client.fetch("127.0.0.1", port, "r1").await,
        Err(Error::Malformed { .. })
    ));

    let mut bad_port = service("a.B", HashMap::new());
    bad_port.port = -5;
    let services = HashMap::from([("a.B:tri".to_owned(), bad_port)]);
    let port = serve_fixed(MetadataInfoV2 {
        app: "shop".into(),
        version: "r1".into(),
        services,
    })
    .await;
    assert!(matches!(
        client.fetch("127.0.0.1", port, "r1").await,
        Err(Error::Malformed { .. })
    ));

    // An answer for another revision than asked.
    let port = serve_fixed(MetadataInfoV2 {
        app: "shop".into(),
        version: "other".into(),
        services: HashMap::new(),
    })
    .await;
    assert!(matches!(
        client.fetch("127.0.0.1", port, "r1").await,
        Err(Error::Malformed { .. })
    ));
}

#[tokio::test]
async fn oversized_or_malformed_instance_records_are_skipped_not_fatal() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _p = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    store
        .put(
            "/services/shop-orders/10.0.0.1:1",
            b"{not json".to_vec(),
            None,
        )
        .await
        .unwrap();
    let mut huge = introspect::ServiceInstance::new("shop-orders", "10.0.0.2", 2);
    huge.metadata.insert("junk".into(), "x".repeat(200 * 1024));
    store
        .put("/services/shop-orders/10.0.0.2:2", huge.to_json(), None)
        .await
        .unwrap();
    // A record of another app planted under this app's prefix.
    let foreign = introspect::ServiceInstance::new("other-app", "10.0.0.3", 3);
    store
        .put("/services/shop-orders/10.0.0.3:3", foreign.to_json(), None)
        .await
        .unwrap();

    let resolver = Resolver::new(store);
    let endpoints = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1, "the honest instance still resolves");
    assert_eq!(resolver.stats().await.skipped_records, 3);
}

#[tokio::test]
async fn oversized_mapping_value_reads_as_no_apps() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let value = "a,".repeat(200 * 1024);
    store
        .put("/dubbo/mapping/shop.OrderService", value.into_bytes(), None)
        .await
        .unwrap();
    let resolver = Resolver::new(store.clone());
    assert!(
        resolver
            .resolve(&Subscription::new("shop.OrderService"))
            .await
            .unwrap()
            .is_empty()
    );
    // And a hostile instance whose revision claims are huge is skipped by name validation.
    register_raw(&store, "shop-orders", 9, &"r".repeat(1000), false).await;
    let list = introspect::backend::kv::registry::Registry::new(
        store,
        introspect::Layout::default(),
        Limits::default(),
    )
    .list("shop-orders")
    .await
    .unwrap();
    assert!(list.instances.is_empty());
    assert_eq!(list.skipped.len(), 1);
}
