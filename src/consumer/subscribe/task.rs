//! The subscription task: one per subscription, owning all of its state; it applies what
//! the sources send, starts fetches and probes, and pushes coalesced endpoint sets.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::apps::AppState;
use super::assemble::Computed;
use super::fetches::{Fetch, Joined, Key};
use super::handle::Shared;
use super::options::SubscribeOptions;
use super::sources::Source;
use crate::consumer::coalesce::Coalescer;
use crate::consumer::context::Context;
use crate::consumer::health::Outcome;
use crate::consumer::snapshot::Snapshot;
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::consumer::views::Membership;
use crate::error::{Error, Result};
use crate::model::{Endpoint, MetadataInfo};

enum Wake {
    Closed,
    Source(Source),
    Fetched(Joined),
    Report(String, bool),
    Health,
    Written(Result<()>),
    Timer,
}

pub(super) struct Task {
    /// This subscription's entry in the resolver's instances-per-app gauge.
    pub(super) id: u64,
    pub(super) context: Arc<Context>,
    pub(super) subscription: Subscription,
    pub(super) options: SubscribeOptions,
    pub(super) sources_tx: mpsc::Sender<Source>,
    pub(super) sources_rx: mpsc::Receiver<Source>,
    /// This subscription's membership of its mapping's shared view; dropping it leaves.
    pub(super) mapping_view: Option<Membership>,
    /// Its memberships of its apps' shared views.
    pub(super) app_views: HashMap<String, Membership>,
    /// Apps a valid mapping no longer names, since when.
    pub(super) unmapped: HashMap<String, Instant>,
    pub(super) apps: BTreeMap<String, AppState>,
    /// Whether the apps are known (from the store, the subscription or the snapshot).
    pub(super) mapping_known: bool,
    /// Whether the apps are known from the store or the subscription.
    pub(super) mapping_from_store: bool,
    /// The metadata of the revisions in use.
    pub(super) metadata: HashMap<Key, Arc<MetadataInfo>>,
    /// Revisions in use whose metadata is not known yet.
    pub(super) fetches: HashMap<Key, Fetch>,
    pub(super) fetch_tasks: JoinSet<(Key, Result<Arc<MetadataInfo>>)>,
    pub(super) fetch_ids: HashMap<tokio::task::Id, Key>,
    /// The endpoints of each routed instance, by app and `{host}:{port}`, as last computed
    /// (see [`Task::compute`]).
    pub(super) by_instance: HashMap<String, HashMap<String, Computed>>,
    /// How many times [`Task::compute`] ran (marks the entries of `by_instance` it saw).
    pub(super) compute_pass: u64,
    pub(super) coalescer: Coalescer,
    /// Moves when the resolver's health of some address changes.
    pub(super) health_changes: watch::Receiver<u64>,
    pub(super) reports: mpsc::Receiver<(String, bool)>,
    pub(super) tx: watch::Sender<Arc<Vec<Endpoint>>>,
    pub(super) shared: Arc<Shared>,
    /// Taken when the first set is published.
    pub(super) ready: Option<oneshot::Sender<()>>,
    pub(super) start_deadline: Instant,
    /// Until when the first set waits for first fetches, once the store has been read.
    pub(super) fetch_wait_until: Option<Instant>,
    /// The snapshot read at start, until used or no longer needed.
    pub(super) snapshot: Option<Snapshot>,
    pub(super) serving_snapshot: bool,
    pub(super) snapshot_dirty: bool,
    pub(super) writes: JoinSet<Result<()>>,
    /// Whether the routed instances, metadata or health changed since the last tick.
    pub(super) dirty: bool,
    /// Set when the store refused for good: the task stops following it.
    pub(super) stopped: bool,
}

impl Task {
    pub(super) async fn run(mut self) {
        Counters::bump(&self.context.counters.subscriptions);
        tracing::debug!("subscription started");
        if self.subscription.provided_by.is_empty() {
            self.follow_mapping();
        } else {
            for app in self.subscription.provided_by.clone() {
                self.add_app(app);
            }
            self.mapping_known = true;
            self.mapping_from_store = true;
        }
        loop {
            let now = Instant::now();
            self.tick(now);
            let deadline = self.next_deadline(now);
            let wake = tokio::select! {
                biased;
                () = self.tx.closed() => Wake::Closed,
                Some(source) = self.sources_rx.recv() => Wake::Source(source),
                Some(joined) = self.fetch_tasks.join_next_with_id(),
                    if !self.fetch_tasks.is_empty() => Wake::Fetched(joined),
                Some((address, ok)) = self.reports.recv() => Wake::Report(address, ok),
                Ok(()) = self.health_changes.changed() => Wake::Health,
                Some(joined) = self.writes.join_next(), if !self.writes.is_empty() => {
                    Wake::Written(joined.unwrap_or_else(|e| Err(Error::Io(std::io::Error::other(e)))))
                }
                () = sleep_until(deadline) => Wake::Timer,
            };
            let now = Instant::now();
            match wake {
                Wake::Closed => break,
                Wake::Source(source) => {
                    self.on_source(source, now);
                    while let Ok(source) = self.sources_rx.try_recv() {
                        self.on_source(source, now);
                    }
                }
                Wake::Fetched(joined) => self.on_fetched(joined, now),
                Wake::Report(address, ok) => {
                    self.on_report(&address, ok);
                    while let Ok((address, ok)) = self.reports.try_recv() {
                        self.on_report(&address, ok);
                    }
                }
                Wake::Health => self.dirty = true,
                Wake::Written(result) => match result {
                    Ok(()) => Counters::bump(&self.context.counters.snapshot_writes),
                    Err(e) => {
                        let cause = format!("snapshot not written: {}", self.id);
                        if let Some(suppressed) = self.context.warnings.allow(&cause, now) {
                            tracing::warn!(error = %e, suppressed, "snapshot not written");
                        }
                    }
                },
                Wake::Timer => {}
            }
            if self.stopped {
                break;
            }
        }
        Counters::sub(&self.context.counters.subscriptions, 1);
        self.context.counters.set_instances(self.id, None);
        tracing::debug!(interface = %self.subscription.interface, "subscription ended");
    }

    /// Does everything that is due at `now`: releases, fetches, the first publication,
    /// coalesced pushes and snapshot writes.
    fn tick(&mut self, now: Instant) {
        self.release_unmapped(now);
        self.ensure_fetches(now);
        self.update_protection_flag();
        let live = self.live();
        if live && self.serving_snapshot {
            self.serving_snapshot = false;
            self.shared.serving_snapshot.store(false, Ordering::Relaxed);
            self.snapshot_dirty = true;
        }
        if live {
            self.snapshot = None;
        }
        let mut became_ready = false;
        if self.ready.is_some() {
            if self.fetch_wait_until.is_none() && self.store_read() {
                self.fetch_wait_until = Some(now + self.options.first_fetch_wait);
            }
            if self.initial_complete(now) {
                became_ready = true;
            } else if now >= self.start_deadline {
                if let Some(snapshot) = self.snapshot.take() {
                    self.load_snapshot(snapshot, now);
                }
                became_ready = true;
            }
            if became_ready {
                self.coalescer.changed(now);
            }
        } else if self.dirty {
            self.coalescer.changed(now);
        }
        if self.dirty || became_ready {
            let per_app = self
                .apps
                .iter()
                .map(|(app, view)| (app.clone(), view.routable().count() as u64))
                .collect();
            self.context.counters.set_instances(self.id, Some(per_app));
        }
        self.dirty = false;
        if (self.ready.is_none() || became_ready) && self.coalescer.is_due(now) {
            self.push(now);
        }
        if let Some(ready) = self.ready.take_if(|_| became_ready) {
            let _ = ready.send(());
        }
        if self.snapshot_dirty && self.writes.is_empty() {
            self.snapshot_dirty = false;
            if let Some(options) = &self.options.snapshot {
                let snapshot = self.build_snapshot();
                let path = options.path_for(&self.subscription);
                self.writes
                    .spawn_blocking(move || snapshot.write_atomic(&path));
            }
        }
    }

    /// The earliest time something is due.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let mut next = self.coalescer.due();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.ready.is_some() {
            consider(Some(self.start_deadline));
            consider(self.fetch_wait_until);
        }
        for fetch in self.fetches.values().filter(|f| !f.in_flight) {
            consider(Some(fetch.next_try));
        }
        consider(self.next_unmapped_release(now));
        next
    }

    fn on_source(&mut self, source: Source, now: Instant) {
        match source {
            Source::Apps(apps) => self.on_mapping(apps, now),
            Source::View(app, routable) => {
                if let Some(state) = self.apps.get_mut(&app) {
                    self.dirty |= state.update(routable);
                }
            }
            Source::Failed(error) => self.fail(error),
            // The shared views apply lists and changes; subscriptions get `View`s.
            Source::Reset(..) | Source::Changes(..) => {}
        }
    }

    /// The store refused for good: keeps the last set (errors never remove endpoints),
    /// records why for the handles and stops following the store. The handles see the
    /// error from `changed()` once the task is gone.
    fn fail(&mut self, error: Arc<Error>) {
        if self.stopped {
            return;
        }
        if self.ready.is_some() {
            // `subscribe()` returns the error itself: nothing to keep, nothing to log.
            tracing::debug!(%error, "the store refused the subscription before its first set");
        } else {
            tracing::warn!(
                interface = %self.subscription.interface,
                %error,
                "the store refused the subscription; it no longer follows the store and keeps its last set"
            );
        }
        *self.shared.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
        self.stopped = true;
    }

    /// A call outcome the application reported: it goes to the resolver's health (a
    /// change there wakes every subscription).
    fn on_report(&mut self, address: &str, ok: bool) {
        Counters::bump(&self.context.counters.health_reports);
        let outcome = if ok {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        self.context.health.record(&self.context, address, outcome);
    }

    /// Whether the apps are known and every app listed.
    fn store_read(&self) -> bool {
        self.mapping_known && self.apps.values().all(|v| v.synced)
    }

    /// Whether the first publication can go out: the store read, and no revision on its
    /// first fetch, or the wait for the first fetches over.
    fn initial_complete(&self, now: Instant) -> bool {
        self.store_read()
            && (self.fetch_wait_until.is_some_and(|t| now >= t)
                || !self
                    .fetches
                    .values()
                    .any(|f| f.in_flight && f.failures() == 0))
    }

    /// Whether everything comes from the store (not from the snapshot).
    pub(super) fn live(&self) -> bool {
        self.mapping_from_store && self.apps.values().all(|v| v.synced)
    }

    /// Mirrors whether some app's view holds removals into the handles' flag (the
    /// resolver's gauge counts each app once, in its view).
    fn update_protection_flag(&mut self) {
        let active = self.apps.values().any(AppState::protection_active);
        self.shared
            .protection_active
            .store(active, Ordering::Relaxed);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
