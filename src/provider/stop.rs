//! The graceful stop: disabled first, deregistered after the drain period.
//!
//! The state lock is held only for each write, never across the drain: the keep-alive loop
//! keeps renewing the lease (and re-registers the disabled record if the lease is lost)
//! until the record is deleted.

use std::time::Duration;

use super::Shared;
use crate::error::{Error, Result};

impl Shared {
    /// Marks the instance disabled, waits `drain`, deletes the record and revokes the lease.
    pub(super) async fn deregister_gracefully(&self, drain: Duration) -> Result<()> {
        let disabled = {
            let mut state = self.state.lock().await;
            if state.lease.is_none() || state.stopped {
                // Never registered, or already stopped: nothing to withdraw.
                state.stopped = true;
                return Ok(());
            }
            state.instance.enabled = false;
            let disabled = self.registry.register(&state.instance, state.lease).await;
            match &disabled {
                Ok(_) => tracing::info!(
                    address = %state.instance.address(),
                    ?drain,
                    "instance disabled; draining"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "instance not disabled; deregistering at once");
                }
            }
            disabled
        };
        if disabled.is_ok() {
            tokio::time::sleep(drain).await;
        }
        let mut state = self.state.lock().await;
        state.stopped = true;
        let lease = state.lease.take();
        let instance = &state.instance;
        let deleted = self
            .registry
            .deregister(&instance.service_name, &instance.host, instance.port)
            .await;
        let revoked = match lease {
            Some(lease) => self.store.revoke_lease(lease).await,
            None => Ok(()),
        };
        tracing::info!(app = %instance.service_name, address = %instance.address(), "instance deregistered");
        disabled?;
        deleted?;
        match revoked {
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
