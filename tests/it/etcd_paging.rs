//! Prefix reads in pages on a real etcd: a listing pinned to the first page's store
//! revision holds every record exactly once, whatever is written between pages, and what
//! is written between pages reaches the watch that follows the listing.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::support::etcd::EtcdServer;
use introspect::backend::kv::registry::{InstanceChange, Registry};
use introspect::store::{EtcdStore, Page};
use introspect::{Error, Layout, Limits, MemoryStore, ServiceInstance, Store};

const APP: &str = "shop";
const RECORDS: u16 = 10;
const PAGE: usize = 3;

/// A store on `etcd` that reads prefixes in pages of `PAGE` keys.
async fn paged_store(etcd: &EtcdServer) -> Arc<dyn Store> {
    let options = etcd.options().with_range_page_size(PAGE);
    Arc::new(EtcdStore::connect(options).await.unwrap())
}

fn registry(store: &Arc<dyn Store>) -> Registry {
    Registry::new(store.clone(), Layout::default(), Limits::default())
}

fn instance(port: u16) -> ServiceInstance {
    ServiceInstance::new(APP, "10.0.0.1", port)
}

async fn register_fleet(registry: &Registry) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for i in 0..RECORDS {
        let record = instance(8000 + i);
        registry.register(&record, None).await.unwrap();
        keys.insert(Layout::default().instance_key(APP, "10.0.0.1", 8000 + i));
    }
    keys
}

#[tokio::test]
async fn a_pinned_paged_read_has_every_record_once_and_the_watch_sees_writes_between_pages() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store = paged_store(&etcd).await;
    let registry = registry(&store);
    let written = register_fleet(&registry).await;
    let prefix = Layout::default().app_prefix(APP);

    let first = store.get_prefix_page(&prefix, None, 0).await.unwrap();
    assert_eq!(first.kvs.len(), PAGE);
    assert!(first.more);
    let pinned = first.revision;

    // Between pages: a new record (its key sorts after every page read so far) and the
    // deletion of a record not read yet.
    let late = instance(8099);
    registry.register(&late, None).await.unwrap();
    let gone = 8000 + RECORDS - 1;
    assert!(registry.deregister(APP, "10.0.0.1", gone).await.unwrap());

    let mut seen: Vec<String> = first.kvs.iter().map(|kv| kv.key.clone()).collect();
    let mut page: Page = first;
    let mut pages = 1;
    while page.more {
        let after = page.kvs.last().unwrap().key.clone();
        page = store
            .get_prefix_page(&prefix, Some(&after), pinned)
            .await
            .unwrap();
        assert_eq!(
            page.revision, pinned,
            "every page is of the pinned revision"
        );
        assert!(page.kvs.len() <= PAGE);
        seen.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        pages += 1;
    }
    assert_eq!(pages, usize::from(RECORDS).div_ceil(PAGE));
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "no record twice: {seen:?}");
    assert_eq!(
        unique, written,
        "exactly the records of the pinned revision: the late one absent, the deleted one present"
    );

    // The watch from the pinned revision + 1 has both writes, in order.
    let mut watch = registry.watch(APP, pinned + 1).await.unwrap();
    let mut changes = Vec::new();
    while changes.len() < 2 {
        changes.extend(watch.next().await.unwrap());
    }
    assert!(
        matches!(&changes[0], InstanceChange::Upsert(i) if i.port == 8099),
        "{changes:?}"
    );
    assert!(
        matches!(&changes[1], InstanceChange::Removed(a) if *a == format!("10.0.0.1:{gone}")),
        "{changes:?}"
    );
}

#[tokio::test]
async fn listings_read_in_pages_equal_one_read_of_the_whole_prefix() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let paged = paged_store(&etcd).await;
    let whole: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(etcd.options().with_range_page_size(10_000))
            .await
            .unwrap(),
    );
    let written = register_fleet(&registry(&paged)).await;
    let prefix = Layout::default().app_prefix(APP);

    let in_pages = paged.get_prefix(&prefix).await.unwrap();
    let at_once = whole.get_prefix(&prefix).await.unwrap();
    assert_eq!(in_pages, at_once);
    let keys: Vec<&str> = in_pages.kvs.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, written.iter().map(String::as_str).collect::<Vec<_>>());

    let list = registry(&paged).list(APP).await.unwrap();
    assert_eq!(list.instances.len(), usize::from(RECORDS));
    assert!(list.skipped.is_empty());
    assert_eq!(list.revision, at_once.revision);
    let ports: Vec<u16> = list.instances.values().map(|i| i.port).collect();
    assert_eq!(ports, (8000..8000 + RECORDS).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_page_of_a_compacted_revision_fails_as_compacted_and_a_later_listing_reads_the_current_one()
 {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store = paged_store(&etcd).await;
    let registry = registry(&store);
    register_fleet(&registry).await;
    let prefix = Layout::default().app_prefix(APP);

    let first = store.get_prefix_page(&prefix, None, 0).await.unwrap();
    let now = registry.register(&instance(8099), None).await.unwrap();
    store.compact(now).await.unwrap();
    let after = first.kvs.last().unwrap().key.clone();
    let error = store
        .get_prefix_page(&prefix, Some(&after), first.revision)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Compacted { .. }), "{error}");

    // A listing after the compaction reads the current revision.
    let list = registry.list(APP).await.unwrap();
    assert_eq!(list.instances.len(), usize::from(RECORDS) + 1);
    assert_eq!(list.revision, now);
}

#[tokio::test]
async fn a_store_without_pages_answers_one_page() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let registry = registry(&store);
    register_fleet(&registry).await;
    let prefix = Layout::default().app_prefix(APP);
    let page = store.get_prefix_page(&prefix, None, 0).await.unwrap();
    assert_eq!(page.kvs.len(), usize::from(RECORDS));
    assert!(!page.more);
    let third = page.kvs[2].key.clone();
    let rest = store
        .get_prefix_page(&prefix, Some(&third), page.revision)
        .await
        .unwrap();
    assert_eq!(
        rest.kvs.len(),
        usize::from(RECORDS) - 3,
        "only keys after `after`"
    );
}

/// A record of `APP` at `port` whose metadata carries `padding` bytes.
fn padded(port: u16, padding: usize) -> ServiceInstance {
    let mut record = instance(port);
    record
        .metadata
        .insert("padding".into(), "x".repeat(padding));
    record
}

#[tokio::test]
async fn pages_sized_by_bytes_are_asked_again_smaller_when_records_grew() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    // Default page sizing under a 32 KiB response limit: after reading small records, a
    // page asks for about a quarter of the limit's worth of them.
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(etcd.options().with_max_response_bytes(32 * 1024))
            .await
            .unwrap(),
    );
    let registry = registry(&store);
    for i in 0..200 {
        registry.register(&instance(8000 + i), None).await.unwrap();
    }
    assert_eq!(registry.list(APP).await.unwrap().instances.len(), 200);

    // The records grow to 6 KiB, so the page sized for the small ones (about 50 keys) is
    // over the limit and must be asked again with fewer keys.
    for i in 0..100 {
        registry
            .register(&padded(8000 + i, 6 * 1024), None)
            .await
            .unwrap();
    }
    let list = registry.list(APP).await.unwrap();
    assert_eq!(list.instances.len(), 200, "every record, once");
    assert!(list.skipped.is_empty());
    let grown = list
        .instances
        .values()
        .filter(|i| i.metadata.contains_key("padding"))
        .count();
    assert_eq!(grown, 100);

    // One record over the response limit is a clear error, not a loop.
    registry
        .register(&padded(9000, 40 * 1024), None)
        .await
        .unwrap();
    let error = registry.list(APP).await.unwrap_err();
    assert!(matches!(error, Error::TooLarge { .. }), "{error}");
}
