//! A store that can be switched off: while down, every call fails as an unreachable store
//! would. Watches already open keep running (end them with `MemoryStore::cancel_watches`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use introspect::store::{CasOutcome, KeyValue, LeaseId, Range, Watch};
use introspect::{Error, MemoryStore, Result, Store};

pub struct FlakyStore {
    pub inner: Arc<MemoryStore>,
    down: AtomicBool,
}

impl FlakyStore {
    pub fn new(inner: Arc<MemoryStore>) -> Self {
        FlakyStore {
            inner,
            down: AtomicBool::new(false),
        }
    }

    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn check(&self) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            Err(Error::StoreUnavailable("switched off by the test".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Store for FlakyStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.check()?;
        self.inner.get(key).await
    }
    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        self.check()?;
        self.inner.get_prefix(prefix).await
    }
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        self.check()?;
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, key: &str) -> Result<bool> {
        self.check()?;
        self.inner.delete(key).await
    }
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        self.check()?;
        self.inner
            .compare_and_swap(key, expected, value, lease)
            .await
    }
    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        self.check()?;
        self.inner.watch_prefix(prefix, from_revision).await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        self.check()?;
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        self.check()?;
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        self.check()?;
        self.inner.revoke_lease(lease).await
    }
    async fn compact(&self, revision: i64) -> Result<()> {
        self.check()?;
        self.inner.compact(revision).await
    }
    fn backend(&self) -> &'static str {
        "flaky-memory"
    }
}
