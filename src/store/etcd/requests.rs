//! The [`Store`] calls of [`EtcdStore`]: one etcd request each, under the request timeout.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::proto::PbTxnOpResponse;
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnResponse};

use super::EtcdStore;
use super::convert::{convert_kv, header_revision};
use super::errors::{is_compacted, is_lease_not_found, map_error};
use crate::error::{Error, Result};
use crate::store::{CasOutcome, KeyValue, LeaseId, Page, Range, Store, Watch};

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let what = || format!("etcd get {}", Error::shorten(key));
        self.timed(what, |client| async move {
            let mut response = self
                .kv(&client)
                .get(key, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            Ok(response
                .take_kvs()
                .into_iter()
                .map(|kv| kv.0)
                .find(|kv| kv.key == key.as_bytes())
                .and_then(convert_kv))
        })
        .await
    }

    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        super::range::read_all(self, prefix).await
    }

    async fn get_prefix_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        revision: i64,
    ) -> Result<Page> {
        super::range::page(self, prefix, after, revision).await
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        let what = || format!("etcd put {}", Error::shorten(key));
        self.timed(what, |client| {
            let value = value.clone();
            async move {
                let options = lease.map(|id| PutOptions::new().with_lease(id));
                let response = self
                    .kv(&client)
                    .put(key, value, options)
                    .await
                    .map_err(|e| map_write_error(e, lease, &what()))?;
                header_revision(response.header(), &what())
            }
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        let what = || format!("etcd delete {}", Error::shorten(key));
        self.timed(what, |client| async move {
            let response = self
                .kv(&client)
                .delete(key, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            Ok(response.deleted() > 0)
        })
        .await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected_mod_revision: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        let what = || format!("etcd compare-and-swap {}", Error::shorten(key));
        self.timed(what, |client| {
            let value = value.clone();
            async move {
                let put = TxnOp::put(key, value, lease.map(|id| PutOptions::new().with_lease(id)));
                let response = self
                    .kv(&client)
                    .txn(cas_txn(key, expected_mod_revision, put))
                    .await
                    .map_err(|e| map_write_error(e, lease, &what()))?;
                cas_outcome(response, key, &what())
            }
        })
        .await
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected_mod_revision: i64,
    ) -> Result<CasOutcome> {
        if expected_mod_revision < 1 {
            // An absent key compares as revision 0: never "delete if absent".
            return Ok(CasOutcome::Conflict {
                current: self.get(key).await?,
            });
        }
        let what = || format!("etcd compare-and-delete {}", Error::shorten(key));
        self.timed(what, |client| async move {
            let response = self
                .kv(&client)
                .txn(cas_txn(
                    key,
                    expected_mod_revision,
                    TxnOp::delete(key, None),
                ))
                .await
                .map_err(|e| map_error(e, &what()))?;
            cas_outcome(response, key, &what())
        })
        .await
    }

    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        super::watch::open(self, prefix, from_revision).await
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        if ttl.is_zero() {
            return Err(Error::config("lease TTL must be positive"));
        }
        // etcd counts in whole seconds: round up, so a lease never lives shorter than asked.
        let seconds = i64::try_from(ttl.as_secs())
            .unwrap_or(i64::MAX - 1)
            .saturating_add(i64::from(ttl.subsec_nanos() > 0))
            .max(1);
        let what = || format!("etcd grant lease of {seconds}s");
        let response = self
            .timed(what, |client| async move {
                client
                    .lease_client()
                    .grant(seconds, None)
                    .await
                    .map_err(|e| map_error(e, &what()))
            })
            .await?;
        if !response.error().is_empty() {
            return Err(Error::store(format!("{}: {}", what(), response.error())));
        }
        let granted = u64::try_from(response.ttl()).unwrap_or(0).max(1);
        self.remember_ttl(response.id(), Duration::from_secs(granted));
        Ok(response.id())
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        let what = || format!("etcd keep-alive of lease {lease}");
        self.timed(what, |client| async move {
            // One keep-alive request on a fresh stream; etcd answers TTL 0 for a lease that
            // is gone, which `etcd-client` reports as an error.
            match client.lease_client().keep_alive(lease).await {
                Ok(_) => {}
                Err(e) if is_lease_not_found(&e) => {
                    self.forget_lease(lease);
                    return Err(Error::LeaseNotFound(lease));
                }
                // The keep-alive stream ended before answering.
                Err(etcd_client::Error::WatchError(reason)) => {
                    return Err(Error::store_unavailable(format!("{}: {reason}", what())));
                }
                Err(e) => return Err(map_error(e, &what())),
            }
            if let Some(ttl) = self.remembered_ttl(lease) {
                return Ok(ttl);
            }
            // A lease granted elsewhere: ask etcd for its TTL.
            let info = client
                .lease_client()
                .time_to_live(lease, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            if info.ttl() < 0 {
                return Err(Error::LeaseNotFound(lease));
            }
            let ttl = Duration::from_secs(u64::try_from(info.granted_ttl()).unwrap_or(0).max(1));
            self.remember_ttl(lease, ttl);
            Ok(ttl)
        })
        .await
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        let what = || format!("etcd revoke lease {lease}");
        let result = self
            .timed(what, |client| async move {
                match client.lease_client().revoke(lease).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_lease_not_found(&e) => Err(Error::LeaseNotFound(lease)),
                    Err(e) => Err(map_error(e, &what())),
                }
            })
            .await;
        if matches!(result, Ok(()) | Err(Error::LeaseNotFound(_))) {
            self.forget_lease(lease);
        }
        result
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        let what = || format!("etcd compact to revision {revision}");
        self.timed(what, |client| async move {
            match self.kv(&client).compact(revision, None).await {
                Ok(_) => Ok(()),
                // Already compacted at or past it: the history is gone, as asked.
                Err(e) if is_compacted(&e) => Ok(()),
                Err(e) => Err(map_error(e, &what())),
            }
        })
        .await
    }

    fn backend(&self) -> &'static str {
        "etcd"
    }
}

/// A write's error: [`Error::LeaseNotFound`] when the write named a lease etcd no longer
/// has, otherwise sorted as any other.
fn map_write_error(e: etcd_client::Error, lease: Option<LeaseId>, what: &str) -> Error {
    match (lease, is_lease_not_found(&e)) {
        (Some(id), true) => Error::LeaseNotFound(id),
        _ => map_error(e, what),
    }
}

/// The transaction of a compare-and-swap or -delete: `then` when `key`'s modification
/// revision is `expected` (an absent key compares as 0), else a read of the key.
fn cas_txn(key: &str, expected: i64, then: TxnOp) -> Txn {
    Txn::new()
        .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
        .and_then([then])
        .or_else([TxnOp::get(key, None)])
}

/// What a [`cas_txn`] did: written at the response's revision, or a conflict with the key
/// as the transaction read it.
fn cas_outcome(response: TxnResponse, key: &str, what: &str) -> Result<CasOutcome> {
    let revision = header_revision(response.header(), what)?;
    if response.succeeded() {
        return Ok(CasOutcome::Written { revision });
    }
    let mut current = None;
    for op in response.0.responses {
        if let Some(PbTxnOpResponse::ResponseRange(range)) = op.response {
            current = range
                .kvs
                .into_iter()
                .find(|kv| kv.key == key.as_bytes())
                .and_then(convert_kv);
        }
    }
    Ok(CasOutcome::Conflict { current })
}
