//! The consumer record's task: registers the record with liveness, keeps it alive every
//! third of its TTL, rewrites it when what the subscriptions see changed (paced, see
//! `pace`), registers it again when the liveness is lost, and deletes it when the
//! resolver goes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::pace::Pace;
use super::table::Seen;
use crate::backend::{Backend, RegisterOptions, Registration};
use crate::backoff::Backoff;
use crate::consumer::timer::sleep_until;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ConsumerRecord;

/// The longest a final deregistration may take before the task gives up on it.
const DEREGISTER_DEADLINE: Duration = Duration::from_secs(5);

/// See the module docs.
pub(crate) struct RecordTask {
    pub backend: Backend,
    pub limits: Limits,
    /// The record without its subscriptions.
    pub base: ConsumerRecord,
    pub ttl: Duration,
    pub interval: Duration,
    pub seen: Arc<Seen>,
    pub cancel: CancellationToken,
    /// Set once the record is deleted (or the task gave up).
    pub done: watch::Sender<bool>,
}

impl RecordTask {
    /// The record as of now.
    fn record(&self) -> ConsumerRecord {
        let mut record = self.base.clone();
        record.subscriptions = self.seen.services();
        record
    }

    /// Registers the record, with backoff and jitter while the registry refuses; `None`
    /// once cancelled (or refused for good).
    async fn register(&self) -> Option<Arc<dyn Registration<ConsumerRecord>>> {
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            let options = RegisterOptions::new(self.ttl, &self.limits);
            match self
                .backend
                .consumers()
                .register(&self.record(), &options)
                .await
            {
                Ok(registration) => {
                    tracing::info!(
                        app = %self.base.app,
                        id = %self.base.id,
                        registration = %registration.id(),
                        "consumer record registered"
                    );
                    return Some(registration);
                }
                Err(e @ Error::Config { .. }) => {
                    tracing::warn!(error = %e, "consumer record not registered");
                    return None;
                }
                Err(e) => tracing::warn!(error = %e, "consumer record not registered; retrying"),
            }
            tokio::select! {
                () = self.cancel.cancelled() => return None,
                () = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }

    pub async fn run(self) {
        let mut changes = self.seen.changes();
        changes.borrow_and_update();
        let Some(mut registration) = self.register().await else {
            self.done.send_replace(true);
            return;
        };
        let mut pace = Pace::new(self.interval, Instant::now());
        let mut last_renewal = Instant::now();
        loop {
            let period = registration.ttl() / 3;
            let renew_at = last_renewal + period;
            let lost = tokio::select! {
                () = self.cancel.cancelled() => break,
                Ok(()) = changes.changed() => {
                    changes.borrow_and_update();
                    pace.changed();
                    false
                }
                () = tokio::time::sleep_until(renew_at) => {
                    match registration.keep_alive().await {
                        Ok(()) => {
                            last_renewal = Instant::now();
                            false
                        }
                        Err(Error::RegistrationLost { reason, .. }) => {
                            tracing::warn!(%reason, "consumer record lost");
                            true
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "consumer record keep-alive failed");
                            // Tried again a period later; lost once the TTL passed unrenewed.
                            last_renewal.elapsed() > registration.ttl()
                        }
                    }
                }
                () = sleep_until(pace.due()) => {
                    let now = Instant::now();
                    match registration.update(&self.record()).await {
                        Ok(()) => {
                            pace.written(now);
                            false
                        }
                        Err(Error::RegistrationLost { reason, .. }) => {
                            tracing::warn!(%reason, "consumer record lost");
                            true
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "consumer record not rewritten");
                            pace.failed(now);
                            false
                        }
                    }
                }
            };
            if lost {
                changes.borrow_and_update();
                match self.register().await {
                    Some(again) => registration = again,
                    None => break,
                }
                let now = Instant::now();
                pace.written(now);
                last_renewal = now;
            }
        }
        deregister(registration.as_ref()).await;
        self.done.send_replace(true);
    }
}

/// Deletes the record, bounded.
async fn deregister(registration: &dyn Registration<ConsumerRecord>) {
    let ended: Result<()> = tokio::time::timeout(DEREGISTER_DEADLINE, registration.deregister())
        .await
        .unwrap_or_else(|_| Err(Error::Shutdown));
    match ended {
        Ok(()) => tracing::info!(registration = %registration.id(), "consumer record deleted"),
        Err(e) => tracing::warn!(error = %e, "consumer record not deleted; its liveness ends it"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kv::layout::Layout;
    use crate::consumer::subscription::Subscription;
    use crate::store::{MemoryStore, Store};

    const INTERVAL: Duration = Duration::from_secs(10);

    struct Running {
        store: Arc<MemoryStore>,
        seen: Arc<Seen>,
        cancel: CancellationToken,
        done: watch::Receiver<bool>,
        key: String,
    }

    async fn start() -> Running {
        let store = Arc::new(MemoryStore::new());
        let backend = Backend::kv(store.clone(), Layout::default());
        let seen = Arc::new(Seen::default());
        let cancel = CancellationToken::new();
        let (done_tx, done) = watch::channel(false);
        let task = RecordTask {
            backend,
            limits: Limits::default(),
            base: ConsumerRecord::new("web", "id1", "10.0.0.9", 1),
            ttl: Duration::from_secs(10),
            interval: INTERVAL,
            seen: seen.clone(),
            cancel: cancel.clone(),
            done: done_tx,
        };
        tokio::spawn(task.run());
        let running = Running {
            store,
            seen,
            cancel,
            done,
            key: "/introspect/consumers/web/id1".into(),
        };
        while running.written().await.is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        running
    }

    impl Running {
        /// The record's last write: its store revision and record.
        async fn written(&self) -> Option<(i64, ConsumerRecord)> {
            let kv = self.store.get(&self.key).await.unwrap()?;
            let record = ConsumerRecord::from_json(&kv.value, &Limits::default()).unwrap();
            Some((kv.mod_revision, record))
        }

        fn see(&self, digest: &str) {
            let s = Subscription::new("shop.OrderService");
            self.seen.update(7, &s, digest.into(), 1, 3, 1000);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_is_written_within_the_interval_and_a_burst_once() {
        let running = start().await;
        let (first, record) = running.written().await.unwrap();
        assert!(record.subscriptions.is_empty());
        // A burst of changes right after the registration: one write, an interval later.
        for digest in ["aa", "bb", "cc"] {
            running.see(digest);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tokio::time::sleep(INTERVAL - Duration::from_secs(3) - Duration::from_millis(10)).await;
        assert_eq!(
            running.written().await.unwrap().0,
            first,
            "not before the interval"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (second, record) = running.written().await.unwrap();
        assert!(second > first);
        assert_eq!(record.subscriptions.len(), 1);
        assert_eq!(record.subscriptions[0].digest, "cc");
        // Nothing changed: no write, however long.
        tokio::time::sleep(INTERVAL * 3).await;
        assert_eq!(running.written().await.unwrap().0, second);
        // A change long after the last write goes out at once.
        running.see("dd");
        tokio::time::sleep(Duration::from_millis(1)).await;
        let (third, record) = running.written().await.unwrap();
        assert!(third > second);
        assert_eq!(record.subscriptions[0].digest, "dd");
        // Cancelled: the record is deleted.
        running.cancel.cancel();
        let mut done = running.done.clone();
        done.wait_for(|d| *d).await.unwrap();
        assert!(running.written().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_lease_is_registered_again_with_what_is_seen() {
        let running = start().await;
        running.see("aa");
        let kv = running.store.get(&running.key).await.unwrap().unwrap();
        running.store.revoke_lease(kv.lease).await.unwrap();
        assert!(running.written().await.is_none());
        // Found at the next keep-alive (a third of the TTL), registered at once.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let (_, record) = running.written().await.expect("registered again");
        assert_eq!(record.subscriptions[0].digest, "aa");
        let again = running.store.get(&running.key).await.unwrap().unwrap();
        assert_ne!(again.lease, kv.lease);
    }
}
