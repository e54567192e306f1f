//! The local snapshot as a subscription uses it: served when the store cannot be reached
//! at start, written from the live view.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::task::Task;
use crate::consumer::snapshot::{Snapshot, key_of};
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::error::Error;
use crate::limits::Limits;

/// Reads the snapshot at `path` for `subscription`, on a blocking thread (the file may be
/// up to [`crate::consumer::MAX_SNAPSHOT_BYTES`]; reading, hashing and parsing it would
/// stall the runtime). A missing, unusable or foreign snapshot is `None`, with a warning.
pub(super) async fn read_snapshot(
    path: PathBuf,
    subscription: &Subscription,
    limits: &Limits,
) -> Option<Snapshot> {
    let limits = limits.clone();
    let file = path.clone();
    let read = tokio::task::spawn_blocking(move || Snapshot::read(&file, &limits))
        .await
        .unwrap_or_else(|e| Err(Error::Io(std::io::Error::other(e))));
    match read {
        Ok(Some(s)) if s.is_for(subscription) => Some(s),
        Ok(Some(_)) => {
            tracing::warn!(?path, "snapshot is for another subscription; ignored");
            None
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(?path, error = %e, "snapshot unusable; ignored");
            None
        }
    }
}

impl Task {
    /// Serves from the snapshot what the store has not given yet.
    pub(super) fn load_snapshot(&mut self, snapshot: Snapshot, now: Instant) {
        tracing::warn!(
            interface = %self.subscription.interface,
            "store not reached in time; serving from the local snapshot"
        );
        Counters::bump(&self.context.counters.snapshot_loads);
        self.serving_snapshot = true;
        self.shared.serving_snapshot.store(true, Ordering::Relaxed);
        for app in snapshot.apps {
            self.add_app(app);
        }
        self.mapping_known = true;
        for (app, instances) in snapshot.instances {
            self.add_app(app.clone());
            if let Some(view) = self.apps.get_mut(&app).filter(|v| !v.synced) {
                let list = instances
                    .into_iter()
                    .map(|i| (i.address(), Arc::new(i)))
                    .collect();
                view.restore(list);
            }
        }
        for info in snapshot.metadata {
            self.metadata
                .entry((info.app.clone(), info.revision.clone()))
                .or_insert_with(|| Arc::new(info));
        }
        self.ensure_fetches(now);
    }

    pub(super) fn build_snapshot(&self) -> Snapshot {
        Snapshot {
            subscription: key_of(&self.subscription),
            apps: self.apps.keys().cloned().collect(),
            instances: self
                .apps
                .iter()
                .map(|(app, view)| {
                    let instances = view.routable().map(|i| (**i).clone()).collect();
                    (app.clone(), instances)
                })
                .collect(),
            metadata: self.metadata.values().map(|i| (**i).clone()).collect(),
        }
    }
}
