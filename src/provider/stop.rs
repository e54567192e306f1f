//! The graceful stop: interface-level URLs removed and the record marked as stopping
//! first, deregistered after the drain period.
//!
//! Interface-level consumers (Dubbo 2.7, Dubbo 3 at `FORCE_INTERFACE`) know no stopping
//! marker: the URLs are deleted at once, so they move away during the drain while the
//! server still answers, as they do from a Dubbo Java provider, which unregisters first.
//!
//! The record is rewritten with `enabled: false` and the `introspect.stopping=true`
//! metadata key (see [`crate::model::keys::STOPPING`]): the first is what etcd readers know,
//! the second what every reader of this crate knows on every backend (ZooKeeper and Nacos
//! records have no usable `enabled`). Consumers stop routing to it at once, and its removal
//! after the drain is no expiry, so self-preservation never holds a deploy.
//!
//! The state lock is held only for each write, never across the drain: the keep-alive loop
//! keeps the registration alive (and registers the marked record again if it is lost)
//! until the record is deleted.

use std::time::Duration;

use super::Shared;
use crate::error::Result;

/// The most a server keeps answering once its record is deleted (see [`linger`]).
pub(super) const MAX_LINGER: Duration = Duration::from_millis(500);

/// How long a server that stops gracefully keeps answering after its record is deleted:
/// consumers that do not know the stopping marker (Dubbo Java and dubbo-go on ZooKeeper and
/// Nacos, dubbo-go on etcd, which reads no `enabled`) go on calling through the drain and
/// move away only once they see the deletion; a server that stopped at that moment refused
/// the call a dubbo-go consumer made before its watch had fired. The drain (`0`: stop at
/// once) or [`MAX_LINGER`], whichever is shorter.
pub(super) fn linger(drain: Duration) -> Duration {
    drain.min(MAX_LINGER)
}

impl Shared {
    /// Marks the instance as stopping, waits `drain`, deletes the record and ends its
    /// liveness.
    pub(super) async fn deregister_gracefully(&self, drain: Duration) -> Result<()> {
        let marked = {
            let mut state = self.state.lock().await;
            let Some(registration) = state.registration.clone().filter(|_| !state.stopped) else {
                // Never registered, or already stopped: nothing to withdraw.
                state.stopped = true;
                return Ok(());
            };
            self.withdraw_interfaces(&mut state).await;
            state.stopping = true;
            self.refresh_metadata(&mut state);
            let marked = registration.update(&state.instance).await;
            match &marked {
                Ok(()) => tracing::info!(
                    address = %state.instance.key_address(),
                    ?drain,
                    "instance marked as stopping; draining"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "instance not marked as stopping; deregistering at once");
                }
            }
            marked
        };
        if marked.is_ok() {
            tokio::time::sleep(drain).await;
        }
        let mut state = self.state.lock().await;
        state.stopped = true;
        let deregistered = match state.registration.take() {
            Some(registration) => registration.deregister().await,
            None => Ok(()),
        };
        let instance = &state.instance;
        match &deregistered {
            Ok(()) => tracing::info!(
                app = %instance.service_name,
                address = %instance.key_address(),
                "instance deregistered"
            ),
            Err(e) => tracing::warn!(
                app = %instance.service_name,
                address = %instance.key_address(),
                error = %e,
                "instance not deregistered: its record stays until its lease expires"
            ),
        }
        marked?;
        deregistered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_lingers_after_the_delete_for_the_drain_at_most_half_a_second() {
        assert_eq!(linger(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            linger(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
        assert_eq!(
            linger(super::super::ProviderOptions::default().drain),
            MAX_LINGER
        );
    }
}
