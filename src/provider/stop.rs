//! The graceful stop: disabled first, deregistered after the drain period.

use super::Shared;
use crate::error::{Error, Result};

impl Shared {
    /// Marks the instance disabled, waits the drain period, deletes the record and revokes
    /// the lease.
    pub(super) async fn deregister_gracefully(&self) -> Result<()> {
        let mut state = self.state.lock().await;
        let Some(lease) = state.lease.take() else {
            return Ok(());
        };
        state.instance.enabled = false;
        let disabled = self.registry.register(&state.instance, Some(lease)).await;
        match &disabled {
            Ok(_) => tracing::info!(
                address = %state.instance.address(),
                drain = ?self.drain,
                "instance disabled; draining"
            ),
            Err(e) => tracing::warn!(error = %e, "instance not disabled; deregistering at once"),
        }
        if disabled.is_ok() {
            tokio::time::sleep(self.drain).await;
        }
        let instance = &state.instance;
        let deleted = self
            .registry
            .deregister(&instance.service_name, &instance.host, instance.port)
            .await;
        let revoked = self.store.revoke_lease(lease).await;
        tracing::info!(app = %instance.service_name, address = %instance.address(), "instance deregistered");
        disabled?;
        deleted?;
        match revoked {
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
