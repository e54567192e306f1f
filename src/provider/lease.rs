//! Registration with liveness (a lease, a session), the keep-alive loop and registering
//! again when the liveness is lost.

use std::time::Duration;

use super::Shared;
use crate::backend::{RegisterOptions, Writes};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::model::StorageType;

impl Shared {
    /// Registers the instance record with fresh liveness (and writes the report first, for
    /// storage type `remote`), replacing the registration it had.
    pub(super) async fn register_with_new_lease(&self) -> Result<()> {
        if self.storage_type == StorageType::Remote {
            self.backend
                .reports()
                .put_if_absent(&self.exported.current(), &self.limits)
                .await?;
        }
        let mut state = self.state.lock().await;
        if state.stopped {
            return Err(Error::Shutdown);
        }
        self.refresh_metadata(&mut state);
        let writes = if self.register_mode.writes_instance() {
            Writes::Record
        } else {
            Writes::LivenessOnly
        };
        let options = RegisterOptions::new(self.lease_ttl, &self.limits).writes(writes);
        let registration = self
            .backend
            .instances()
            .register(&state.instance, &options)
            .await?;
        state.registration = Some(registration.clone());
        // Those written went with the liveness they were bound to (or are replaced now).
        state.interfaces.clear();
        tracing::info!(
            app = %state.instance.service_name,
            address = %state.instance.key_address(),
            revision = %state.instance.revision(),
            registration = %registration.id(),
            ttl = ?registration.ttl(),
            mode = %self.register_mode,
            "instance registered"
        );
        if let Err(e) = self.sync_interfaces(&mut state).await {
            // Retried at the next keep-alive; the instance is registered.
            tracing::warn!(error = %e, "interface-level URLs not all written; will retry");
        }
        Ok(())
    }

    /// Keeps the registration alive every third of its TTL (the one the registry granted);
    /// when it is lost, or keep-alives have failed for longer than the TTL, registers again.
    pub(super) async fn keep_alive_loop(&self) {
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            let registration = self.state.lock().await.registration.clone();
            let ttl = registration.as_ref().map_or(self.lease_ttl, |r| r.ttl());
            let period = ttl / 3;
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            // The registration of now: a recovery meanwhile may have replaced it.
            let Some(registration) = self.state.lock().await.registration.clone() else {
                continue;
            };
            let id = registration.id();
            let deadline = renewal_deadline(ttl, period, last_renewal.elapsed());
            let renewal = tokio::time::timeout(deadline, registration.keep_alive()).await;
            let lost = match renewal {
                Ok(Ok(())) => {
                    tracing::debug!(registration = %id, "registration kept alive");
                    last_renewal = tokio::time::Instant::now();
                    let mut state = self.state.lock().await;
                    if state.interfaces_pending {
                        let _ = self.sync_interfaces(&mut state).await;
                    }
                    false
                }
                Ok(Err(Error::RegistrationLost { reason, .. })) => {
                    tracing::warn!(registration = %id, %reason, "registration lost");
                    true
                }
                Ok(Err(e)) => {
                    if let Some(suppressed) = self.warn_allowed("lease renewal failed") {
                        tracing::warn!(registration = %id, error = %e, suppressed, "keep-alive failed");
                    }
                    last_renewal.elapsed() > ttl
                }
                Err(_) => {
                    if let Some(suppressed) = self.warn_allowed("lease renewal timed out") {
                        tracing::warn!(registration = %id, suppressed, "keep-alive timed out");
                    }
                    last_renewal.elapsed() > ttl
                }
            };
            if lost {
                tracing::warn!(registration = %id, "registering again");
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

    /// Registers again with fresh liveness and rewrites the mappings, with backoff and
    /// jitter while the registry is down. A draining instance is registered again marked as
    /// stopping; a stopped one is not registered again. Also the first registration of a
    /// provider that started serving while the registry was down.
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

/// How long one renewal may wait for its answer: what is left of the TTL since the last
/// answered renewal, and at least a period. The request renews the lease when it reaches
/// the registry; only its answer may be slow. Giving up after a period (a third of the TTL)
/// would make every renewal of a registry answering later than that time out, and the
/// provider would count its lease lost and register again while the lease was renewed all
/// along.
fn renewal_deadline(ttl: Duration, period: Duration, since_renewal: Duration) -> Duration {
    ttl.saturating_sub(since_renewal).max(period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_may_wait_for_what_is_left_of_the_ttl() {
        let ttl = Duration::from_secs(2);
        let period = ttl / 3;
        // Started a period after the last answer: a second-late answer still counts.
        let deadline = renewal_deadline(ttl, period, period);
        assert_eq!(deadline, ttl - period);
        assert!(deadline > Duration::from_secs(1));
        // Renewals failing for longer than the TTL: each still gets a period.
        assert_eq!(renewal_deadline(ttl, period, ttl * 2), period);
    }
}
