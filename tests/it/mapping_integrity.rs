//! The mapping: apps only add themselves, concurrently, and garbage is cleaned on read.

use std::sync::Arc;

use futures::future::join_all;
use introspect::backend::kv::mapping::Mapping;
use introspect::{Layout, Limits, MemoryStore, Resolver, Store, Subscription};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_adders_all_end_up_in_the_mapping() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mapping = Mapping::new(store, Layout::default(), Limits::default());
    let apps: Vec<String> = (0..20).map(|i| format!("app-{i}")).collect();
    let adds = apps.iter().map(|app| {
        let mapping = mapping.clone();
        let app = app.clone();
        tokio::spawn(async move { mapping.add("shop.OrderService", &app).await })
    });
    for result in join_all(adds).await {
        result.unwrap().unwrap();
    }
    let found: Vec<String> = mapping
        .get("shop.OrderService")
        .await
        .unwrap()
        .apps
        .into_iter()
        .collect();
    let mut expected = apps;
    expected.sort();
    assert_eq!(found, expected);
}

#[tokio::test]
async fn adding_twice_writes_once_and_never_removes_others() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .put("/dubbo/mapping/a.B", b"other".to_vec(), None)
        .await
        .unwrap();
    let mapping = Mapping::new(store.clone(), Layout::default(), Limits::default());
    mapping.add("a.B", "mine").await.unwrap();
    let revision = store
        .get("/dubbo/mapping/a.B")
        .await
        .unwrap()
        .unwrap()
        .mod_revision;
    mapping.add("a.B", "mine").await.unwrap();
    let kv = store.get("/dubbo/mapping/a.B").await.unwrap().unwrap();
    assert_eq!(kv.mod_revision, revision, "no second write");
    assert_eq!(kv.value, b"mine,other");
}

#[tokio::test]
async fn garbage_in_a_mapping_value_is_cleaned_without_failing_the_resolve() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .put(
            "/dubbo/mapping/a.B",
            b",good, ,../evil,bad name,\n,x/y,good,".to_vec(),
            None,
        )
        .await
        .unwrap();
    let resolver = Resolver::new(store);
    let apps: Vec<String> = resolver
        .apps(&Subscription::new("a.B"))
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(apps, ["good"]);
    assert!(
        resolver
            .resolve(&Subscription::new("a.B"))
            .await
            .unwrap()
            .is_empty()
    );
}
