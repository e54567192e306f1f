//! Linking each exported interface to the app in the mapping, retried in the background.

use std::time::Duration;

use super::Shared;
use crate::backoff::Backoff;

impl Shared {
    /// Adds the app to each exported interface's mapping; returns the interfaces that failed.
    /// A provider registering at the interface level only writes none, as Dubbo Java.
    pub(super) async fn write_mappings(&self) -> Vec<String> {
        if !self.register_mode.writes_instance() {
            return Vec::new();
        }
        let current = self.exported.current();
        let mut interfaces: Vec<&str> =
            current.services.values().map(|s| s.name.as_str()).collect();
        interfaces.sort_unstable();
        interfaces.dedup();
        let mut pending = Vec::new();
        for interface in interfaces {
            match self
                .backend
                .mapping()
                .add(interface, &current.app, &self.limits)
                .await
            {
                Ok(_) => tracing::debug!(%interface, "interface mapped to the app"),
                Err(e) => {
                    if let Some(suppressed) = self.warn_allowed("mapping not written") {
                        tracing::warn!(%interface, error = %e, suppressed, "mapping not written yet; will retry");
                    }
                    pending.push(interface.to_owned());
                }
            }
        }
        pending
    }

    /// Retries mappings with backoff until written or the provider stops.
    pub(super) async fn retry_mappings(&self, mut pending: Vec<String>) {
        let app = self.exported.current().app.clone();
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        while !pending.is_empty() {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
            let mut still = Vec::new();
            for interface in pending {
                if self
                    .backend
                    .mapping()
                    .add(&interface, &app, &self.limits)
                    .await
                    .is_err()
                {
                    still.push(interface);
                }
            }
            pending = still;
        }
    }
}
