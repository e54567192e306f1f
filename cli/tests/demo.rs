//! The demo proves the point it prints: one metadata fetch per revision, not per instance.

use std::sync::Arc;

use introspect::{MemoryStore, Store};
use introspect_cli::demo::{DemoOptions, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_instances_two_revisions_two_fetches() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut out = Vec::new();
    let report = run(store.clone(), DemoOptions::default(), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(report.instances, 105);
    assert_eq!(report.endpoints, 105);
    assert_eq!(
        report.revisions, 3,
        "two for shop-orders, one for shop-payments"
    );
    assert_eq!(report.fetches, 3);
    assert_eq!(report.served, 3);
    assert!(
        text.contains("shop-orders     100 instances, 2 revision(s), 2 call(s) served"),
        "{text}"
    );
    assert_eq!(
        report.fetches_after_change, 4,
        "one more fetch for the new revision"
    );
    assert_eq!(report.revisions_after_change, 3);
    // The demo stops its providers gracefully: nothing is left registered.
    assert!(store.get_prefix("/services/").await.unwrap().kvs.is_empty());
}
