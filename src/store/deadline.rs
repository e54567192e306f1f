//! A deadline on every store call, so that a store that hangs costs a timeout, never a hung
//! provider or resolver.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{CasOutcome, KeyValue, LeaseId, Page, Range, Store, Watch};
use crate::error::{Error, Result};

/// Wraps a [`Store`] so that each call fails with [`Error::Timeout`] after a deadline.
/// A watch's creation is bounded; its stream is not (it waits for changes by design).
pub struct DeadlineStore {
    inner: Arc<dyn Store>,
    deadline: Duration,
}

impl DeadlineStore {
    /// `inner` with `deadline` on every call.
    pub fn new(inner: Arc<dyn Store>, deadline: Duration) -> Self {
        DeadlineStore { inner, deadline }
    }

    async fn bounded<T>(&self, what: &str, call: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.deadline, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                what: format!("{} store {what}", self.inner.backend()),
                after: self.deadline,
            }),
        }
    }
}

#[async_trait]
impl Store for DeadlineStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.bounded("get", self.inner.get(key)).await
    }

    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        self.bounded("range", self.inner.get_prefix(prefix)).await
    }

    async fn get_prefix_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        revision: i64,
    ) -> Result<Page> {
        self.bounded(
            "range page",
            self.inner.get_prefix_page(prefix, after, revision),
        )
        .await
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        self.bounded("put", self.inner.put(key, value, lease)).await
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        self.bounded("delete", self.inner.delete(key)).await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected_mod_revision: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        self.bounded(
            "compare-and-swap",
            self.inner
                .compare_and_swap(key, expected_mod_revision, value, lease),
        )
        .await
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected_mod_revision: i64,
    ) -> Result<CasOutcome> {
        self.bounded(
            "compare-and-delete",
            self.inner.compare_and_delete(key, expected_mod_revision),
        )
        .await
    }

    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        self.bounded("watch", self.inner.watch_prefix(prefix, from_revision))
            .await
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        self.bounded("lease grant", self.inner.grant_lease(ttl))
            .await
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        self.bounded("lease keep-alive", self.inner.keep_alive(lease))
            .await
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        self.bounded("lease revoke", self.inner.revoke_lease(lease))
            .await
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        self.bounded("compact", self.inner.compact(revision)).await
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}
