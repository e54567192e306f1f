//! Registration under a lease, the keep-alive loop and re-registration when the lease is
//! lost.

use std::time::Duration;

use super::Shared;
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::model::StorageType;

impl Shared {
    /// Grants a fresh lease and writes the instance record under it (and the report first,
    /// for storage type `remote`).
    pub(super) async fn register_with_new_lease(&self) -> Result<()> {
        if self.storage_type == StorageType::Remote {
            self.report.publish(&self.exported.current()).await?;
        }
        let mut state = self.state.lock().await;
        if state.stopped {
            return Err(Error::Shutdown);
        }
        self.refresh_metadata(&mut state);
        let lease = self.store.grant_lease(self.lease_ttl).await?;
        if let Err(e) = self.registry.register(&state.instance, Some(lease)).await {
            let _ = self.store.revoke_lease(lease).await;
            return Err(e);
        }
        state.lease = Some(lease);
        tracing::info!(
            app = %state.instance.service_name,
            address = %state.instance.address(),
            revision = %state.instance.revision(),
            lease,
            "instance registered"
        );
        Ok(())
    }

    /// Renews the lease every third of its TTL; when the lease is lost, or renewals have
    /// failed for longer than the TTL, registers again under a new lease.
    pub(super) async fn keep_alive_loop(&self) {
        let period = self.lease_ttl / 3;
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let Some(lease) = self.state.lock().await.lease else {
                continue;
            };
            let renewal = tokio::time::timeout(period, self.store.keep_alive(lease)).await;
            let lost = match renewal {
                Ok(Ok(_)) => {
                    tracing::debug!(lease, "lease renewed");
                    last_renewal = tokio::time::Instant::now();
                    false
                }
                Ok(Err(Error::LeaseNotFound(_))) => true,
                Ok(Err(e)) => {
                    if let Some(suppressed) = self.warn_allowed("lease renewal failed") {
                        tracing::warn!(lease, error = %e, suppressed, "lease renewal failed");
                    }
                    last_renewal.elapsed() > self.lease_ttl
                }
                Err(_) => {
                    if let Some(suppressed) = self.warn_allowed("lease renewal timed out") {
                        tracing::warn!(lease, suppressed, "lease renewal timed out");
                    }
                    last_renewal.elapsed() > self.lease_ttl
                }
            };
            if lost {
                tracing::warn!(lease, "lease lost; registering again");
                self.recover().await;
                last_renewal = tokio::time::Instant::now();
            }
        }
    }

    /// Whether a warning of `cause` is written now (at most one line per cause per
    /// interval): `Some` with the number suppressed since the last one.
    pub(super) fn warn_allowed(&self, cause: &'static str) -> Option<u64> {
        self.warnings.allow(cause, "", tokio::time::Instant::now())
    }

    /// Registers again under a new lease and rewrites the mappings, with backoff and jitter
    /// while the store is down. A draining instance is registered again disabled; a stopped
    /// one is not registered again. Also the first registration of a provider that started
    /// serving while the store was down.
    pub(super) async fn recover(&self) {
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            match self.register_with_new_lease().await {
                Ok(()) => break,
                Err(Error::Shutdown) => return,
                Err(e) => {
                    if let Some(suppressed) = self.warn_allowed("registration failed") {
                        tracing::warn!(error = %e, suppressed, "registration failed; retrying");
                    }
                }
            }
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
        let pending = self.write_mappings().await;
        if !pending.is_empty() {
            self.retry_mappings(pending).await;
        }
    }
}
