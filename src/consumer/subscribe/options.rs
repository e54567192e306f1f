//! How a subscription behaves.

use std::time::Duration;

use super::coalesce::CoalesceOptions;
use super::snapshot::SnapshotOptions;
use crate::governance::migration::MigrationStep;

/// How each subscription of a resolver behaves: coalescing, the local snapshot, the start
/// and the metadata fetch retries. Every part has a default; see each setter, and read it with
/// the `get_` method of the same name. (What
/// applies to the whole resolver, consumer-side health and self-preservation, is set on
/// [`crate::consumer::ResolverBuilder`].)
#[derive(Clone, Debug, PartialEq)]
pub struct SubscribeOptions {
    pub(crate) coalesce: CoalesceOptions,
    pub(crate) snapshot: Option<SnapshotOptions>,
    pub(crate) start_timeout: Duration,
    pub(crate) snapshot_wait: Duration,
    pub(crate) first_fetch_wait: Duration,
    pub(crate) fetch_retry_base: Duration,
    pub(crate) fetch_retry_max: Duration,
    pub(crate) migration_step: Option<MigrationStep>,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            coalesce: CoalesceOptions::default(),
            snapshot: None,
            start_timeout: Duration::from_secs(5),
            snapshot_wait: Duration::from_secs(1),
            first_fetch_wait: Duration::from_millis(500),
            fetch_retry_base: Duration::from_millis(500),
            fetch_retry_max: Duration::from_secs(30),
            migration_step: None,
        }
    }
}

impl SubscribeOptions {
    /// Sets the coalescing of bursts (default [`CoalesceOptions::default`]).
    pub fn coalesce(mut self, coalesce: CoalesceOptions) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Keeps a local snapshot (default: none). Its directory is created when missing;
    /// `subscribe()` fails, saying why, when it cannot be.
    pub fn snapshot(mut self, snapshot: SnapshotOptions) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Sets the first and the longest delay of background metadata fetch retries (default
    /// 500 ms and 30 s).
    pub fn fetch_retry(mut self, base: Duration, max: Duration) -> Self {
        self.fetch_retry_base = base;
        self.fetch_retry_max = max.max(base);
        self
    }

    /// The coalescing of bursts in effect (see [`coalesce`](Self::coalesce)).
    pub fn get_coalesce(&self) -> &CoalesceOptions {
        &self.coalesce
    }

    /// The first and the longest delay of background metadata fetch retries in effect (see
    /// [`fetch_retry`](Self::fetch_retry)).
    pub fn get_fetch_retry(&self) -> (Duration, Duration) {
        (self.fetch_retry_base, self.fetch_retry_max)
    }

    /// Sets which level(s) of discovery a subscription reads unless it says
    /// ([`Subscription::migration`](crate::Subscription::migration)). Default: Dubbo Java
    /// 3.3's, [`MigrationStep::ApplicationFirst`], on a backend with an interface level
    /// (ZooKeeper, Nacos, etcd), so that a consumer mid-migration reaches providers that
    /// register at the interface level only and falls back to them when the application
    /// level empties; [`MigrationStep::ForceApplication`] elsewhere (the embedded store has
    /// one level: nothing more is read, nothing is logged). Set
    /// [`MigrationStep::ForceApplication`] to read the application level alone and save
    /// the interface level's read and watch per subscription.
    pub fn migration_step(mut self, step: MigrationStep) -> Self {
        self.migration_step = Some(step);
        self
    }

    /// The step [`migration_step`](Self::migration_step) set; `None` for the default, which
    /// depends on the backend (see [`MigrationStep::default_for`]).
    pub fn get_migration_step(&self) -> Option<MigrationStep> {
        self.migration_step
    }

    /// The step a subscription without its own reads on a backend that has an interface
    /// level (`interface_level`) or not: the one set, else the default.
    pub(crate) fn step_on(&self, interface_level: bool) -> MigrationStep {
        self.migration_step
            .unwrap_or_else(|| MigrationStep::default_for(interface_level))
    }

    crate::setters::option_accessors! {
        /// Sets how long a new subscription that found a snapshot waits for the registry
        /// before it serves the snapshot (default 1 s; the start timeout
        /// bounds it). The snapshot is served marked
        /// ([`SubscriptionHandle::serving_snapshot`](crate::SubscriptionHandle::serving_snapshot))
        /// and gives way to the registry's own state when it answers.
        snapshot_wait / get_snapshot_wait => snapshot_wait: Duration;

        /// Sets how long a new subscription waits for the store (and its first metadata
        /// fetches) before it serves from the snapshot, or from what it has (default
        /// 5 s).
        start_timeout / get_start_timeout => start_timeout: Duration;

        /// Sets how long the first set waits for the first metadata fetches once the store has
        /// been read (default 500 ms: well under the fetch timeout, so one hung MetadataService
        /// never delays the others). After it the first set goes out
        /// with what is known, and a revision still being fetched (a MetadataService that hangs
        /// until the fetch timeout, say) joins when its metadata arrives: one slow revision
        /// never delays the others. Zero publishes as soon as the store has been read. The
        /// start timeout bounds the whole start regardless.
        first_fetch_wait / get_first_fetch_wait => first_fetch_wait: Duration;
    }
}
