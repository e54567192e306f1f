//! Every name that reaches a key or a match key is validated before anything is written.

use std::sync::Arc;

use introspect::backend::kv::mapping::Mapping;
use introspect::backend::kv::registry::Registry;
use introspect::model::ReportKey;
use introspect::{
    Error, Layout, Limits, MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription,
};

fn hostile() -> Vec<String> {
    vec![
        String::new(),
        "a/b".into(),
        "../etc".into(),
        "..".into(),
        "nul\0byte".into(),
        "new\nline".into(),
        "tab\there".into(),
        "x".repeat(10_000),
        "comma,separated".into(),
    ]
}

fn is_invalid_name(result: Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(result, Err(Error::InvalidName { .. }))
}

#[tokio::test]
async fn hostile_names_are_refused_everywhere_and_nothing_is_written() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let layout = Layout::default();
    let registry = Registry::new(store.clone(), layout.clone(), Limits::default());
    let mapping = Mapping::new(store.clone(), layout, Limits::default());
    let resolver = Resolver::new(store.clone());
    for bad in hostile() {
        let bad = bad.as_str();
        let provider = |app: &str| Provider::builder(app, store.clone()).port(50051);
        assert!(
            is_invalid_name(provider(bad).export(ServiceInfo::new("a.B")).build()),
            "app {bad:?}"
        );
        assert!(
            is_invalid_name(provider("ok").export(ServiceInfo::new(bad)).build()),
            "interface {bad:?}"
        );
        if !bad.is_empty() {
            assert!(is_invalid_name(
                provider("ok")
                    .export(ServiceInfo::new("a.B").with_group(bad))
                    .build()
            ));
            assert!(is_invalid_name(
                provider("ok")
                    .export(ServiceInfo::new("a.B").with_version(bad))
                    .build()
            ));
            assert!(is_invalid_name(
                provider("ok")
                    .export(ServiceInfo::new("a.B").with_protocol(bad))
                    .build()
            ));
        }
        assert!(provider("ok").host(bad).build().is_err(), "host {bad:?}");
        assert!(is_invalid_name(registry.list(bad).await), "list {bad:?}");
        assert!(is_invalid_name(registry.deregister(bad, "h", 1).await));
        assert!(
            is_invalid_name(mapping.add(bad, "ok").await),
            "mapping interface {bad:?}"
        );
        assert!(
            is_invalid_name(mapping.add("a.B", bad).await),
            "mapping app {bad:?}"
        );
        assert!(is_invalid_name(mapping.get(bad).await));
        assert!(is_invalid_name(ReportKey::new(bad, "r")));
        assert!(is_invalid_name(ReportKey::new("ok", bad)));
        assert!(
            is_invalid_name(resolver.resolve(&Subscription::new(bad)).await),
            "subscription {bad:?}"
        );
        assert!(is_invalid_name(
            resolver
                .resolve(&Subscription::new("a.B").provided_by([bad]))
                .await
        ));
        assert!(
            Layout::new(bad).is_err() || bad.is_empty(),
            "namespace {bad:?}"
        );
    }
    assert!(
        store.get_prefix("").await.unwrap().kvs.is_empty(),
        "nothing was written"
    );
}

#[tokio::test]
async fn non_ascii_names_are_fine() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = Provider::builder("catálogo", store.clone())
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .export(ServiceInfo::new("tienda.Catálogo").with_group("größe"))
        .start()
        .await
        .unwrap();
    let endpoints = Resolver::new(store)
        .resolve(&Subscription::new("tienda.Catálogo"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(&*endpoints[0].app, "catálogo");
    provider.abort();
}

#[test]
fn error_messages_stay_short_for_huge_names() {
    let err = Provider::builder("x".repeat(10_000), Arc::new(MemoryStore::new()))
        .port(1)
        .build()
        .unwrap_err();
    assert!(err.to_string().len() < 200, "{err}");
}
