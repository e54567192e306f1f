//! The local snapshot as a subscription uses it: served when the registry cannot be
//! reached at start, written from the live view after pushes.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::task::JoinSet;

use super::apps::Following;
use super::snapshot::{Snapshot, SnapshotOptions, key_of};
use crate::consumer::metadata::Fetching;
use crate::consumer::subscription::Subscription;
use crate::error::{Error, Result};
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
        .unwrap_or_else(|e| Err(Error::from(std::io::Error::other(e))));
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

/// A subscription's snapshot: the one read at start until used or no longer needed, and
/// the writes of new ones.
pub(super) struct Snapshots {
    options: Option<SnapshotOptions>,
    /// The snapshot read at start, until used or no longer needed.
    read: Option<Snapshot>,
    /// Whether the set comes (in part) from it.
    pub serving: bool,
    /// Whether a new one should be written.
    dirty: bool,
    writes: JoinSet<Result<()>>,
}

impl Snapshots {
    pub fn new(options: Option<SnapshotOptions>, read: Option<Snapshot>) -> Self {
        Snapshots {
            options,
            read,
            serving: false,
            dirty: false,
            writes: JoinSet::new(),
        }
    }

    /// Whether a snapshot read at start waits to be served.
    pub fn has_read(&self) -> bool {
        self.read.is_some()
    }

    /// The snapshot read at start, if it is still there (it goes once used, or once the
    /// registry has answered).
    pub fn take_read(&mut self) -> Option<Snapshot> {
        self.read.take()
    }

    /// Everything comes from the registry now: the snapshot read at start is not needed,
    /// and a set that was served from it is written anew. Returns whether serving ended.
    pub fn live(&mut self) -> bool {
        self.read = None;
        let ended = std::mem::take(&mut self.serving);
        self.dirty |= ended;
        ended
    }

    /// A live set was pushed: a new snapshot is due.
    pub fn pushed(&mut self) {
        self.dirty = true;
    }

    /// Writes a new snapshot, built by `build`, if one is due and none is being written.
    pub fn write_if_due(&mut self, subscription: &Subscription, build: impl FnOnce() -> Snapshot) {
        if !self.dirty || !self.writes.is_empty() {
            return;
        }
        self.dirty = false;
        if let Some(options) = &self.options {
            let snapshot = build();
            let path = options.path_for(subscription);
            self.writes
                .spawn_blocking(move || snapshot.write_atomic(&path));
        }
    }

    /// The next write that ended (pending while none runs).
    pub async fn written(&mut self) -> Result<()> {
        match self.writes.join_next().await {
            Some(joined) => joined.unwrap_or_else(|e| Err(Error::from(std::io::Error::other(e)))),
            None => std::future::pending().await,
        }
    }
}

/// Serves from `snapshot` what the registry has not given yet: its apps, the instances of
/// apps whose view has not answered, and its metadata.
pub(super) fn restore(snapshot: Snapshot, following: &mut Following, fetching: &mut Fetching) {
    for app in snapshot.apps {
        following.add_app(app);
    }
    following.mapping_known = true;
    for (app, instances) in snapshot.instances {
        following.add_app(app.clone());
        let list = instances
            .into_iter()
            .map(|i| (i.key_address(), Arc::new(i)))
            .collect();
        following.restore_app(&app, list);
    }
    for info in snapshot.metadata {
        fetching.restore(info);
    }
}

/// The snapshot of what a subscription serves now.
pub(super) fn build(
    subscription: &Subscription,
    following: &Following,
    fetching: &Fetching,
) -> Snapshot {
    Snapshot {
        subscription: key_of(subscription),
        apps: following.apps.keys().cloned().collect(),
        instances: following
            .apps
            .iter()
            .map(|(app, view)| {
                let instances = view.routable().map(|i| (**i).clone()).collect();
                (app.clone(), instances)
            })
            .collect(),
        metadata: fetching.metadata.values().map(|i| (**i).clone()).collect(),
    }
}
