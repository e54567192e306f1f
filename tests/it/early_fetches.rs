//! A cold resolve fetches each revision's metadata while the rest of the app's list is
//! still being read, when verification keeps its strength: here the second page of a list
//! is held back until the test lets it go, on a store that pages like etcd.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use introspect::model::keys;
use introspect::store::{CasOutcome, KeyValue, LeaseId, Page, Range, Watch};
use introspect::{MemoryStore, Resolver, Result, ServiceInfo, Store, Subscription};
use tokio::sync::watch;

use crate::support::records::{ORDERS, Records};
use crate::support::wait::eventually;

/// Keys per page: more than the instances one metadata load may try (5 by default).
const PAGE: usize = 6;

/// A memory store read in pages of [`PAGE`] keys, whose pages after the first wait until
/// the test opens the gate.
struct GatedPages {
    inner: Arc<MemoryStore>,
    open: watch::Receiver<bool>,
    /// Set when a page after the first was asked for.
    asked: watch::Sender<bool>,
}

#[async_trait]
impl Store for GatedPages {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }
    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        self.inner.get_prefix(prefix).await
    }
    async fn get_prefix_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        _revision: i64,
    ) -> Result<Page> {
        if after.is_some() {
            self.asked.send_replace(true);
            let mut open = self.open.clone();
            let _ = open.wait_for(|open| *open).await;
        }
        let range = self.inner.get_prefix(prefix).await?;
        let mut rest = range
            .kvs
            .into_iter()
            .filter(|kv| after.is_none_or(|after| kv.key.as_str() > after));
        let kvs: Vec<KeyValue> = rest.by_ref().take(PAGE).collect();
        Ok(Page {
            kvs,
            revision: range.revision,
            more: rest.next().is_some(),
        })
    }
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, key: &str) -> Result<bool> {
        self.inner.delete(key).await
    }
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        self.inner
            .compare_and_swap(key, expected, value, lease)
            .await
    }
    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        self.inner.watch_prefix(prefix, from_revision).await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        self.inner.revoke_lease(lease).await
    }
    async fn compact(&self, revision: i64) -> Result<()> {
        self.inner.compact(revision).await
    }
    fn backend(&self) -> &'static str {
        "gated-pages"
    }
}

/// Three pages of one revision's instances (read from the report in the store), each
/// declaring the `sha256-v1` rule unless `declared` is false; the gate and what it saw.
async fn fleet(declared: bool) -> (Arc<GatedPages>, watch::Sender<bool>, watch::Receiver<bool>) {
    let inner = Arc::new(MemoryStore::new());
    let records = Records::new(inner.clone());
    let info = Records::metadata("shop-orders", &[ServiceInfo::new(ORDERS)]);
    records.publish(&info).await;
    for port in 1..=(3 * PAGE as u16) {
        let mut instance = Records::instance(&info, 20_000 + port);
        if !declared {
            instance.metadata.remove(keys::REVISION_RULE);
        }
        records.register(&instance, None).await;
    }
    let (open, gate) = watch::channel(false);
    let (asked, seen) = watch::channel(false);
    let store = Arc::new(GatedPages {
        inner,
        open: gate,
        asked,
    });
    (store, open, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_s_metadata_is_fetched_before_the_list_is_read() {
    let (store, open, _) = fleet(true).await;
    let resolver = Resolver::new(store.clone() as Arc<dyn Store>);
    let subscription = Subscription::new(ORDERS);
    let resolve = tokio::spawn({
        let resolver = resolver.clone();
        async move { resolver.resolve(&subscription).await }
    });
    eventually(
        Duration::from_secs(10),
        "the metadata read while the second page is held",
        || async { resolver.stats().await.report_reads == 1 },
    )
    .await;
    assert!(!resolve.is_finished(), "the list is not read yet");
    open.send_replace(true);
    let endpoints = resolve.await.unwrap().unwrap();
    assert_eq!(endpoints.len(), 3 * PAGE, "every instance");
    let stats = resolver.stats().await;
    assert_eq!(
        (stats.report_reads, stats.cache_misses),
        (1, 1),
        "the resolve joined the early read: one load of the revision"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_declaring_no_rule_is_fetched_after_the_whole_list() {
    let (store, open, mut asked) = fleet(false).await;
    let resolver = Resolver::new(store.clone() as Arc<dyn Store>);
    let subscription = Subscription::new(ORDERS);
    let resolve = tokio::spawn({
        let resolver = resolver.clone();
        async move { resolver.resolve(&subscription).await }
    });
    asked.wait_for(|asked| *asked).await.unwrap();
    // The first page is parsed right after the second is asked for; give it time.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        resolver.stats().await.report_reads,
        0,
        "no early read: the rule is chosen over every member"
    );
    open.send_replace(true);
    assert_eq!(resolve.await.unwrap().unwrap().len(), 3 * PAGE);
    assert_eq!(resolver.stats().await.report_reads, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_s_first_read_fetches_early_too() {
    let (store, open, _) = fleet(true).await;
    let resolver = Resolver::new(store.clone() as Arc<dyn Store>);
    let subscribe = tokio::spawn({
        let resolver = resolver.clone();
        async move { resolver.subscribe(Subscription::new(ORDERS)).await }
    });
    eventually(
        Duration::from_secs(10),
        "the metadata read while the second page is held",
        || async { resolver.stats().await.report_reads == 1 },
    )
    .await;
    open.send_replace(true);
    let mut handle = subscribe.await.unwrap().unwrap();
    while handle.current().len() < 3 * PAGE {
        handle.changed().await.unwrap();
    }
    assert_eq!(resolver.stats().await.cache_misses, 1, "one load");
}
