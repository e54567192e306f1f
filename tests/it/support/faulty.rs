//! A store whose faults a test switches on and off: healthy (forwards to a memory store),
//! down (every call fails as an unreachable store would) or hanging (every call pends
//! forever). Watches already open keep running (end them with `MemoryStore::cancel_watches`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use introspect::store::{CasOutcome, KeyValue, LeaseId, Range, Watch};
use introspect::{Error, MemoryStore, Result, Store};

const HEALTHY: u8 = 0;
const DOWN: u8 = 1;
const HANGING: u8 = 2;

pub struct FaultyStore {
    pub inner: Arc<MemoryStore>,
    mode: AtomicU8,
}

impl FaultyStore {
    pub fn new(inner: Arc<MemoryStore>) -> Self {
        FaultyStore {
            inner,
            mode: AtomicU8::new(HEALTHY),
        }
    }

    /// A store over a new memory store that hangs from the start.
    pub fn hanging() -> Self {
        let store = Self::new(Arc::new(MemoryStore::new()));
        store.hang();
        store
    }

    /// Every call fails (`true`) or forwards again (`false`).
    pub fn set_down(&self, down: bool) {
        self.mode
            .store(if down { DOWN } else { HEALTHY }, Ordering::SeqCst);
    }

    /// Every call pends forever from now on.
    pub fn hang(&self) {
        self.mode.store(HANGING, Ordering::SeqCst);
    }

    async fn check(&self) -> Result<()> {
        match self.mode.load(Ordering::SeqCst) {
            DOWN => Err(Error::store_unavailable("switched off by the test")),
            HANGING => std::future::pending().await,
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.check().await?;
        self.inner.get(key).await
    }
    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        self.check().await?;
        self.inner.get_prefix(prefix).await
    }
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        self.check().await?;
        self.inner.put(key, value, lease).await
    }
    async fn delete(&self, key: &str) -> Result<bool> {
        self.check().await?;
        self.inner.delete(key).await
    }
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        self.check().await?;
        self.inner
            .compare_and_swap(key, expected, value, lease)
            .await
    }
    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        self.check().await?;
        self.inner.watch_prefix(prefix, from_revision).await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        self.check().await?;
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        self.check().await?;
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        self.check().await?;
        self.inner.revoke_lease(lease).await
    }
    async fn compact(&self, revision: i64) -> Result<()> {
        self.check().await?;
        self.inner.compact(revision).await
    }
    fn backend(&self) -> &'static str {
        "faulty-memory"
    }
}
