//! Live subscriptions: the task that turns watches into a stream of endpoint sets.
//!
//! Modeled on linkerd2-proxy's resolver. One task per subscription owns all of its state;
//! small source tasks do the I/O and feed it:
//!
//! * a mapping source (unless the subscription names its apps): get, then watch from the
//!   read's store revision + 1; an app that starts exporting the interface is added without
//!   a restart. Apps are only ever added (an app only adds itself to a mapping), so a
//!   garbled or deleted mapping value never strips a subscription;
//! * one instance source per (subscription, app): list, then watch from the list's store
//!   revision + 1 (no gap); on a watch error (compaction, lost connection) re-list with
//!   backoff and hand over the list as a reset, which the app's view diffs against what it
//!   has, so subscribers only see the difference. Watches are not shared between
//!   subscriptions.
//!
//! The task applies updates to each app's [`AppView`] (self-preservation decides which
//! expiries are held), fetches the metadata of new revisions in the background (retrying
//! failures with exponential backoff and jitter, never blocking other revisions), applies
//! consumer-side health, and pushes the endpoint set through a [`watch`] channel, coalesced
//! by a [`Coalescer`] and only when it changed. It writes the local snapshot after pushes
//! and serves from it when the store cannot be reached at start.
//!
//! Errors never remove anything: a failed list or mapping read keeps the last state, and an
//! instance whose new revision's metadata cannot be had keeps its last endpoints. So an
//! error never replaces a non-empty set with an empty one, while an instance that is really
//! gone (its record deleted) leaves at once, whatever other revisions are doing.
//!
//! Dropping the last [`SubscriptionHandle`] ends the task, which aborts its sources and so
//! closes its watches.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::app_view::{AppView, Applied};
use super::coalesce::{CoalesceOptions, Coalescer};
use super::health::{self, HealthOptions, HealthTracker};
use super::protection::ProtectionOptions;
use super::resolver::{Resolver, build_endpoints};
use super::snapshot::{Snapshot, SnapshotOptions, key_of};
use super::stats::Counters;
use super::subscription::Subscription;
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::mapping::Mapping;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance};
use crate::registry::{InstanceChange, InstanceList, Registry};
use crate::rpc::authority;

/// Default time a new subscription waits for the store (and the first metadata fetches)
/// before it serves from the snapshot, or from what it has.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(5);
/// Default first delay before a failed metadata fetch is retried.
pub const DEFAULT_FETCH_RETRY_BASE: Duration = Duration::from_millis(500);
/// Default longest delay between retries of a failed metadata fetch.
pub const DEFAULT_FETCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// First delay before a failed list or watch of the store is tried again.
const RELIST_BASE: Duration = Duration::from_millis(100);
/// Longest delay between tries of a failed list or watch.
const RELIST_MAX: Duration = Duration::from_secs(10);
/// Updates buffered between the sources and the subscription task.
const SOURCE_BUFFER: usize = 1024;
/// Health reports buffered; reports beyond it are dropped (they are advisory).
const REPORT_BUFFER: usize = 4096;

/// How a subscription behaves. Every part has defaults; see each field.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscribeOptions {
    /// Coalescing of bursts (default [`CoalesceOptions::default`]).
    pub coalesce: CoalesceOptions,
    /// Self-preservation (default [`ProtectionOptions::default`]).
    pub protection: ProtectionOptions,
    /// Consumer-side health (default [`HealthOptions::default`]).
    pub health: HealthOptions,
    /// The local snapshot (default: none).
    pub snapshot: Option<SnapshotOptions>,
    /// How long a new subscription waits for the store before serving from the snapshot
    /// (default [`DEFAULT_START_TIMEOUT`]).
    pub start_timeout: Duration,
    /// First delay before a failed metadata fetch is retried (default
    /// [`DEFAULT_FETCH_RETRY_BASE`]).
    pub fetch_retry_base: Duration,
    /// Longest delay between retries (default [`DEFAULT_FETCH_RETRY_MAX`]).
    pub fetch_retry_max: Duration,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            coalesce: CoalesceOptions::default(),
            protection: ProtectionOptions::default(),
            health: HealthOptions::default(),
            snapshot: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            fetch_retry_base: DEFAULT_FETCH_RETRY_BASE,
            fetch_retry_max: DEFAULT_FETCH_RETRY_MAX,
        }
    }
}

impl SubscribeOptions {
    /// Sets the coalescing options.
    pub fn coalesce(mut self, coalesce: CoalesceOptions) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Sets the self-preservation options.
    pub fn protection(mut self, protection: ProtectionOptions) -> Self {
        self.protection = protection;
        self
    }

    /// Sets the consumer-side health options.
    pub fn health(mut self, health: HealthOptions) -> Self {
        self.health = health;
        self
    }

    /// Keeps a local snapshot.
    pub fn snapshot(mut self, snapshot: SnapshotOptions) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Sets how long a new subscription waits for the store.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Sets the first and the longest delay of metadata fetch retries.
    pub fn fetch_retry(mut self, base: Duration, max: Duration) -> Self {
        self.fetch_retry_base = base;
        self.fetch_retry_max = max.max(base);
        self
    }
}

/// What the handles and the task share.
#[derive(Debug)]
struct Shared {
    protection_active: AtomicBool,
    serving_snapshot: AtomicBool,
    reports: mpsc::Sender<(String, bool)>,
}

/// A live subscription: the current endpoint set and its changes.
///
/// Cheap to clone; the subscription's task, and the watches it alone uses, stop when the
/// last clone is dropped.
#[derive(Clone, Debug)]
pub struct SubscriptionHandle {
    subscription: Arc<Subscription>,
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    shared: Arc<Shared>,
}

impl SubscriptionHandle {
    /// What was subscribed to.
    pub fn subscription(&self) -> &Subscription {
        &self.subscription
    }

    /// The current endpoint set, sorted.
    pub fn current(&self) -> Arc<Vec<Endpoint>> {
        self.endpoints.borrow().clone()
    }

    /// Waits for the next pushed endpoint set (one this handle has not seen) and returns it.
    /// Fails with [`Error::Shutdown`] only if the subscription's task is gone.
    pub async fn changed(&mut self) -> Result<Arc<Vec<Endpoint>>> {
        self.endpoints
            .changed()
            .await
            .map_err(|_| Error::Shutdown)?;
        Ok(self.endpoints.borrow_and_update().clone())
    }

    /// A receiver of endpoint sets, for use in `select!` loops.
    pub fn watch(&self) -> watch::Receiver<Arc<Vec<Endpoint>>> {
        self.endpoints.clone()
    }

    /// Whether self-preservation is holding removals of some app right now.
    pub fn protection_active(&self) -> bool {
        self.shared.protection_active.load(Ordering::Relaxed)
    }

    /// Whether the set comes (in part) from the local snapshot because the store has not
    /// been read since the start.
    pub fn serving_snapshot(&self) -> bool {
        self.shared.serving_snapshot.load(Ordering::Relaxed)
    }

    /// Reports that a call to `endpoint` succeeded (resets its failure count; brings it
    /// back if it was set aside).
    pub fn report_success(&self, endpoint: &Endpoint) {
        self.report(endpoint, true);
    }

    /// Reports that a call to `endpoint` failed; after consecutive failures its address is
    /// set aside and probed until it answers.
    pub fn report_failure(&self, endpoint: &Endpoint) {
        self.report(endpoint, false);
    }

    fn report(&self, endpoint: &Endpoint, ok: bool) {
        // Reports are advisory: when the task is busy and the buffer full, drop them.
        let _ = self
            .shared
            .reports
            .try_send((authority(&endpoint.host, endpoint.port), ok));
    }
}

/// Starts a subscription; returns once the first set is published, or the start timeout
/// passed.
pub(super) async fn start(
    resolver: Resolver,
    subscription: Subscription,
    options: SubscribeOptions,
) -> Result<SubscriptionHandle> {
    subscription.validate()?;
    let snapshot =
        options
            .snapshot
            .as_ref()
            .and_then(|o| match Snapshot::read(&o.path, resolver.limits()) {
                Ok(Some(s)) if s.is_for(&subscription) => Some(s),
                Ok(Some(_)) => {
                    tracing::warn!(path = ?o.path, "snapshot is for another subscription; ignored");
                    None
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(path = ?o.path, error = %e, "snapshot unusable; ignored");
                    None
                }
            });
    let (tx, mut rx) = watch::channel(Arc::new(Vec::new()));
    let (reports_tx, reports) = mpsc::channel(REPORT_BUFFER);
    let (ready_tx, ready_rx) = oneshot::channel();
    let shared = Arc::new(Shared {
        protection_active: AtomicBool::new(false),
        serving_snapshot: AtomicBool::new(false),
        reports: reports_tx,
    });
    let (sources_tx, sources_rx) = mpsc::channel(SOURCE_BUFFER);
    let now = Instant::now();
    let id = resolver
        .counters()
        .next_subscription
        .fetch_add(1, Ordering::Relaxed);
    let task = Task {
        id,
        start_deadline: now + options.start_timeout,
        coalescer: Coalescer::new(&options.coalesce),
        health: HealthTracker::new(options.health.clone()),
        resolver,
        subscription: subscription.clone(),
        options,
        sources_tx,
        sources_rx,
        sources: JoinSet::new(),
        apps: BTreeMap::new(),
        mapping_known: false,
        mapping_from_store: false,
        metadata: HashMap::new(),
        fetches: HashMap::new(),
        fetch_tasks: JoinSet::new(),
        fetch_ids: HashMap::new(),
        by_instance: HashMap::new(),
        compute_pass: 0,
        reports,
        probes: JoinSet::new(),
        tx,
        shared: shared.clone(),
        ready: Some(ready_tx),
        snapshot,
        serving_snapshot: false,
        snapshot_dirty: false,
        writes: JoinSet::new(),
        protected_apps: 0,
        dirty: false,
    };
    let span = tracing::info_span!("subscription", interface = %subscription.interface, id);
    tokio::spawn(task.run().instrument(span));
    ready_rx.await.map_err(|_| Error::Shutdown)?;
    rx.borrow_and_update();
    Ok(SubscriptionHandle {
        subscription: Arc::new(subscription),
        endpoints: rx,
        shared,
    })
}

/// An update from a source task.
enum Source {
    /// The apps of the mapping (all of them, as read).
    Apps(BTreeSet<String>),
    /// A fresh list of one app's instances.
    Reset(String, InstanceList),
    /// Changes to one app's instances, in order.
    Changes(String, Vec<InstanceChange>),
}

/// (app, revision).
type Key = (String, String);

/// The endpoints of one routed instance as last computed, with what they were computed
/// from, so that they are reused while neither changes.
struct Computed {
    instance: Arc<ServiceInstance>,
    /// The metadata they were built from; `None` when they were carried over from an
    /// earlier record while the metadata of the instance's revision is not known.
    info: Option<Arc<MetadataInfo>>,
    endpoints: Vec<Endpoint>,
    /// The [`Task::compute`] pass that last saw the instance routed.
    pass: u64,
}

/// What a background metadata fetch task ends with.
type Joined = std::result::Result<
    (tokio::task::Id, (Key, Result<Arc<MetadataInfo>>)),
    tokio::task::JoinError,
>;

/// The fetch state of a revision whose metadata is not known.
struct Fetch {
    in_flight: bool,
    next_try: Instant,
    /// Its attempts count the failures so far.
    backoff: Backoff,
}

impl Fetch {
    fn failures(&self) -> u32 {
        self.backoff.attempts()
    }
}

enum Wake {
    Closed,
    Source(Source),
    Fetched(Joined),
    Report(String, bool),
    Probed(String, bool),
    Written(Result<()>),
    Timer,
}

struct Task {
    /// This subscription's entry in the resolver's instances-per-app gauge.
    id: u64,
    resolver: Resolver,
    subscription: Subscription,
    options: SubscribeOptions,
    sources_tx: mpsc::Sender<Source>,
    sources_rx: mpsc::Receiver<Source>,
    /// The mapping and instance sources; dropping the set aborts them.
    sources: JoinSet<()>,
    apps: BTreeMap<String, AppView>,
    /// Whether the apps are known (from the store, the subscription or the snapshot).
    mapping_known: bool,
    /// Whether the apps are known from the store or the subscription.
    mapping_from_store: bool,
    /// The metadata of the revisions in use.
    metadata: HashMap<Key, Arc<MetadataInfo>>,
    /// Revisions in use whose metadata is not known yet.
    fetches: HashMap<Key, Fetch>,
    fetch_tasks: JoinSet<(Key, Result<Arc<MetadataInfo>>)>,
    fetch_ids: HashMap<tokio::task::Id, Key>,
    /// The endpoints of each routed instance, by app and `{host}:{port}`, as last computed
    /// (see [`Task::compute`]).
    by_instance: HashMap<String, HashMap<String, Computed>>,
    /// How many times [`Task::compute`] ran (marks the entries of `by_instance` it saw).
    compute_pass: u64,
    coalescer: Coalescer,
    health: HealthTracker,
    reports: mpsc::Receiver<(String, bool)>,
    probes: JoinSet<(String, bool)>,
    tx: watch::Sender<Arc<Vec<Endpoint>>>,
    shared: Arc<Shared>,
    /// Taken when the first set is published.
    ready: Option<oneshot::Sender<()>>,
    start_deadline: Instant,
    /// The snapshot read at start, until used or no longer needed.
    snapshot: Option<Snapshot>,
    serving_snapshot: bool,
    snapshot_dirty: bool,
    writes: JoinSet<Result<()>>,
    /// How many apps hold removals (mirrored into the resolver's gauge).
    protected_apps: u64,
    /// Whether the routed instances, metadata or health changed since the last tick.
    dirty: bool,
}

impl Task {
    async fn run(mut self) {
        Counters::bump(&self.resolver.counters().subscriptions);
        tracing::debug!("subscription started");
        if self.subscription.provided_by.is_empty() {
            let source = watch_mapping(
                self.resolver.clone(),
                self.subscription.interface.clone(),
                self.sources_tx.clone(),
            );
            self.sources.spawn(source.in_current_span());
        } else {
            for app in self.subscription.provided_by.clone() {
                self.add_app(app);
            }
            self.mapping_known = true;
            self.mapping_from_store = true;
        }
        loop {
            self.tick(Instant::now());
            let deadline = self.next_deadline();
            let wake = tokio::select! {
                biased;
                () = self.tx.closed() => Wake::Closed,
                Some(source) = self.sources_rx.recv() => Wake::Source(source),
                Some(joined) = self.fetch_tasks.join_next_with_id(),
                    if !self.fetch_tasks.is_empty() => Wake::Fetched(joined),
                Some((address, ok)) = self.reports.recv() => Wake::Report(address, ok),
                Some(joined) = self.probes.join_next(), if !self.probes.is_empty() => match joined {
                    Ok((address, ok)) => Wake::Probed(address, ok),
                    Err(_) => Wake::Timer,
                },
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
                    self.on_report(&address, ok, now);
                    while let Ok((address, ok)) = self.reports.try_recv() {
                        self.on_report(&address, ok, now);
                    }
                }
                Wake::Probed(address, ok) => {
                    if self.health.probed(&address, ok, now) {
                        tracing::info!(%address, "set-aside endpoint answers again");
                        self.dirty = true;
                    }
                }
                Wake::Written(result) => match result {
                    Ok(()) => Counters::bump(&self.resolver.counters().snapshot_writes),
                    Err(e) => tracing::warn!(error = %e, "snapshot not written"),
                },
                Wake::Timer => {}
            }
        }
        Counters::sub(&self.resolver.counters().subscriptions, 1);
        self.resolver.counters().set_instances(self.id, None);
        Counters::sub(
            &self.resolver.counters().protected_apps,
            self.protected_apps,
        );
        tracing::debug!(interface = %self.subscription.interface, "subscription ended");
    }

    /// Does everything that is due at `now`: releases, fetches, probes, the first
    /// publication, coalesced pushes and snapshot writes.
    fn tick(&mut self, now: Instant) {
        for view in self.apps.values_mut() {
            if view.release_due(now) {
                self.dirty = true;
            }
        }
        self.ensure_fetches(now);
        for address in self.health.due_probes(now) {
            Counters::bump(&self.resolver.counters().probes);
            let timeout = self.options.health.probe_timeout;
            self.probes.spawn(async move {
                let ok = health::probe(&address, timeout).await;
                (address, ok)
            });
        }
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
            if self.initial_complete() {
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
            self.resolver
                .counters()
                .set_instances(self.id, Some(per_app));
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
                let path = options.path.clone();
                self.writes
                    .spawn_blocking(move || snapshot.write_atomic(&path));
            }
        }
    }

    /// The earliest time something is due.
    fn next_deadline(&self) -> Option<Instant> {
        let mut next = self.coalescer.due();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if self.ready.is_some() {
            consider(Some(self.start_deadline));
        }
        for view in self.apps.values() {
            consider(view.next_release());
        }
        for fetch in self.fetches.values().filter(|f| !f.in_flight) {
            consider(Some(fetch.next_try));
        }
        consider(self.health.next_probe());
        next
    }

    fn on_source(&mut self, source: Source, now: Instant) {
        match source {
            Source::Apps(apps) => {
                self.mapping_known = true;
                self.mapping_from_store = true;
                for app in apps {
                    self.add_app(app);
                }
            }
            Source::Reset(app, list) => {
                let counters = self.resolver.counters();
                for (address, reason) in &list.skipped {
                    Counters::bump(&counters.skipped_records);
                    tracing::warn!(%app, %address, %reason, "instance record skipped");
                }
                if let Some(view) = self.apps.get_mut(&app) {
                    let applied = view.reset(list.instances, now);
                    view.synced = true;
                    self.note(applied);
                }
            }
            Source::Changes(app, changes) => {
                if let Some(view) = self.apps.get_mut(&app) {
                    let applied = view.apply(changes, now);
                    self.note(applied);
                }
            }
        }
    }

    fn note(&mut self, applied: Applied) {
        let counters = self.resolver.counters();
        Counters::add(&counters.held_removals, applied.newly_held as u64);
        Counters::add(&counters.skipped_records, applied.skipped as u64);
        if applied.newly_held > 0 {
            tracing::warn!(
                interface = %self.subscription.interface,
                held = applied.newly_held,
                "mass expiry: self-preservation holds the removals"
            );
        }
        self.dirty |= applied.changed;
    }

    fn on_report(&mut self, address: &str, ok: bool, now: Instant) {
        if ok {
            self.dirty |= self.health.success(address);
        } else if self.health.failure(address, now) {
            tracing::warn!(%address, "endpoint set aside after consecutive failures");
            Counters::bump(&self.resolver.counters().set_aside);
            self.dirty = true;
        }
    }

    fn on_fetched(&mut self, joined: Joined, now: Instant) {
        let (key, result) = match joined {
            Ok((id, (key, result))) => {
                self.fetch_ids.remove(&id);
                (key, result)
            }
            Err(e) => match self.fetch_ids.remove(&e.id()) {
                Some(key) => (key, Err(Error::Io(std::io::Error::other(e.to_string())))),
                None => return,
            },
        };
        match result {
            Ok(info) => {
                self.fetches.remove(&key);
                self.metadata.insert(key, info);
                self.dirty = true;
            }
            Err(e) => {
                if let Some(fetch) = self.fetches.get_mut(&key) {
                    fetch.in_flight = false;
                    let delay = fetch.backoff.next_delay();
                    fetch.next_try = now + delay;
                    tracing::warn!(
                        app = %key.0, revision = %key.1, error = %e, retry_in = ?delay,
                        "metadata unavailable; retrying in the background"
                    );
                }
            }
        }
    }

    /// Adds an app and starts its instance source.
    fn add_app(&mut self, app: String) {
        if self.apps.contains_key(&app) {
            return;
        }
        self.apps
            .insert(app.clone(), AppView::new(self.options.protection.clone()));
        let span = tracing::debug_span!("instance_source", %app);
        let source = watch_app(
            self.resolver.registry().clone(),
            self.resolver.clone(),
            app,
            self.sources_tx.clone(),
        );
        self.sources.spawn(source.instrument(span));
    }

    /// Starts the fetches of revisions in use whose metadata is unknown (first tries and
    /// retries that are due) and forgets revisions no longer in use.
    ///
    /// Runs at every wake: the revisions in use are collected borrowed (no allocation per
    /// instance), and the members of a revision only when its fetch starts.
    fn ensure_fetches(&mut self, now: Instant) {
        let mut in_use: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (app, view) in &self.apps {
            for instance in view.routable() {
                let revision = instance.revision();
                if revision != EMPTY_REVISION {
                    in_use.insert((app.as_str(), revision));
                }
            }
        }
        let used = |key: &Key| in_use.contains(&(key.0.as_str(), key.1.as_str()));
        self.metadata.retain(|key, _| used(key));
        self.fetches.retain(|key, _| used(key));
        for (app, revision) in in_use {
            let key = (app.to_owned(), revision.to_owned());
            if self.metadata.contains_key(&key) {
                continue;
            }
            let (base, max) = (self.options.fetch_retry_base, self.options.fetch_retry_max);
            let fetch = self.fetches.entry(key.clone()).or_insert_with(|| Fetch {
                in_flight: false,
                next_try: now,
                backoff: Backoff::new(base, max),
            });
            if fetch.in_flight || fetch.next_try > now {
                continue;
            }
            if fetch.failures() > 0 {
                Counters::bump(&self.resolver.counters().metadata_retries);
            }
            fetch.in_flight = true;
            let members: Vec<Arc<ServiceInstance>> = self.apps[app]
                .routable()
                .filter(|i| i.revision() == revision)
                .cloned()
                .collect();
            let resolver = self.resolver.clone();
            let task_key = key.clone();
            let handle = self.fetch_tasks.spawn(async move {
                let refs: Vec<&Arc<ServiceInstance>> = members.iter().collect();
                let result = resolver.metadata(&task_key.0, &task_key.1, &refs).await;
                (task_key, result)
            });
            self.fetch_ids.insert(handle.id(), key);
        }
    }

    /// Whether the first publication can go out: apps known, every app listed, and no
    /// revision on its first fetch.
    fn initial_complete(&self) -> bool {
        self.mapping_known
            && self.apps.values().all(|v| v.synced)
            && !self
                .fetches
                .values()
                .any(|f| f.in_flight && f.failures() == 0)
    }

    /// Whether everything comes from the store (not from the snapshot).
    fn live(&self) -> bool {
        self.mapping_from_store && self.apps.values().all(|v| v.synced)
    }

    fn update_protection_flag(&mut self) {
        let active = self.apps.values().filter(|v| v.protection_active()).count() as u64;
        let gauge = &self.resolver.counters().protected_apps;
        if active > self.protected_apps {
            Counters::add(gauge, active - self.protected_apps);
        } else {
            Counters::sub(gauge, self.protected_apps - active);
        }
        self.protected_apps = active;
        self.shared
            .protection_active
            .store(active > 0, Ordering::Relaxed);
    }

    /// Serves from the snapshot what the store has not given yet.
    fn load_snapshot(&mut self, snapshot: Snapshot, now: Instant) {
        tracing::warn!(
            interface = %self.subscription.interface,
            "store not reached in time; serving from the local snapshot"
        );
        Counters::bump(&self.resolver.counters().snapshot_loads);
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
                view.reset(list, now);
            }
        }
        for info in snapshot.metadata {
            self.metadata
                .entry((info.app.clone(), info.revision.clone()))
                .or_insert_with(|| Arc::new(info));
        }
        self.ensure_fetches(now);
    }

    fn build_snapshot(&self) -> Snapshot {
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

    /// Computes the set and pushes it if it differs from what subscribers have.
    fn push(&mut self, now: Instant) {
        let next = self.compute();
        let pushed = self.tx.borrow().as_slice() != next.as_slice();
        let counters = self.resolver.counters();
        if pushed {
            self.tx.send_replace(Arc::new(next));
            Counters::bump(&counters.pushes);
            if self.live() {
                self.snapshot_dirty = true;
            }
        } else {
            Counters::bump(&counters.unchanged_updates);
        }
        self.coalescer.handled(now, pushed);
    }

    /// The endpoint set: each routed instance's endpoints from its revision's metadata, or
    /// its last endpoints while that metadata is not known; set-aside addresses left out
    /// unless that would leave nothing.
    ///
    /// Incremental: an instance's endpoints are rebuilt only when its record or its
    /// revision's metadata changed since the last pass, so a single-instance change costs
    /// one instance's endpoints plus assembling (sorting references, then cloning) the set.
    fn compute(&mut self) -> Vec<Endpoint> {
        self.compute_pass += 1;
        let pass = self.compute_pass;
        for (app, view) in &self.apps {
            let infos: HashMap<&str, &Arc<MetadataInfo>> = self
                .metadata
                .iter()
                .filter(|((a, _), _)| a == app)
                .map(|((_, revision), info)| (revision.as_str(), info))
                .collect();
            if !self.by_instance.contains_key(app) {
                self.by_instance.insert(app.clone(), HashMap::new());
            }
            let computed = self.by_instance.get_mut(app).expect("inserted above");
            for (address, instance) in view.routable_entries() {
                let revision = instance.revision();
                if revision == EMPTY_REVISION {
                    continue;
                }
                let info = infos.get(revision).copied();
                match (computed.get_mut(address.as_str()), info) {
                    (Some(last), Some(info)) => {
                        let same_record =
                            Arc::ptr_eq(&last.instance, instance) || last.instance == *instance;
                        let same_info = last.info.as_ref().is_some_and(|i| Arc::ptr_eq(i, info));
                        if !(same_record && same_info) {
                            last.endpoints = build_endpoints(info, &[instance], &self.subscription);
                            last.info = Some(info.clone());
                        }
                        last.instance = instance.clone();
                        last.pass = pass;
                    }
                    // Metadata not known (yet): keep the last endpoints.
                    (Some(last), None) => {
                        last.info = None;
                        last.instance = instance.clone();
                        last.pass = pass;
                    }
                    (None, Some(info)) => {
                        let endpoints = build_endpoints(info, &[instance], &self.subscription);
                        computed.insert(
                            address.clone(),
                            Computed {
                                instance: instance.clone(),
                                info: Some(info.clone()),
                                endpoints,
                                pass,
                            },
                        );
                    }
                    (None, None) => {}
                }
            }
        }
        for computed in self.by_instance.values_mut() {
            computed.retain(|_, c| c.pass == pass);
        }
        self.by_instance.retain(|_, computed| !computed.is_empty());
        let all: Vec<&Endpoint> = self
            .by_instance
            .values()
            .flat_map(HashMap::values)
            .flat_map(|c| &c.endpoints)
            .collect();
        let mut chosen = all;
        if !self.health.is_empty() {
            let addresses: HashSet<String> =
                chosen.iter().map(|e| authority(&e.host, e.port)).collect();
            self.health.retain(|a| addresses.contains(a));
            let healthy: Vec<&Endpoint> = chosen
                .iter()
                .copied()
                .filter(|e| !self.health.is_set_aside(&authority(&e.host, e.port)))
                .collect();
            if !healthy.is_empty() {
                chosen = healthy;
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        chosen.into_iter().cloned().collect()
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The mapping source: get, then watch; again with backoff after any error.
async fn watch_mapping(resolver: Resolver, interface: String, tx: mpsc::Sender<Source>) {
    let mapping: &Mapping = resolver.mapping();
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    loop {
        match mapping.get(&interface).await {
            Ok(value) => {
                if tx.send(Source::Apps(value.apps)).await.is_err() {
                    return;
                }
                match mapping.watch(&interface, value.revision + 1).await {
                    Ok(mut watch) => {
                        backoff.reset();
                        loop {
                            match watch.next().await {
                                Ok(apps) => {
                                    if tx.send(Source::Apps(apps)).await.is_err() {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    Counters::bump(&resolver.counters().watch_restarts);
                                    tracing::info!(%interface, error = %e, "mapping watch ended; reading it again");
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => tracing::warn!(%interface, error = %e, "cannot watch the mapping"),
                }
            }
            Err(e) => tracing::warn!(%interface, error = %e, "cannot read the mapping"),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// An app's instance source: list, then watch from the list's revision + 1; re-list with
/// backoff after any error. Changes already buffered are sent as one batch.
async fn watch_app(registry: Registry, resolver: Resolver, app: String, tx: mpsc::Sender<Source>) {
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    let mut relisting = false;
    loop {
        match registry.list(&app).await {
            Ok(list) => {
                if relisting {
                    Counters::bump(&resolver.counters().relists);
                    tracing::info!(%app, instances = list.instances.len(), revision = list.revision, "instances re-listed");
                }
                let from = list.revision + 1;
                if tx.send(Source::Reset(app.clone(), list)).await.is_err() {
                    return;
                }
                match registry.watch(&app, from).await {
                    Ok(mut watch) => {
                        backoff.reset();
                        loop {
                            let mut changes = match watch.next().await {
                                Ok(changes) => changes,
                                Err(e) => {
                                    Counters::bump(&resolver.counters().watch_restarts);
                                    tracing::info!(%app, error = %e, "instance watch ended; re-listing");
                                    break;
                                }
                            };
                            let mut ended = false;
                            while let Some(more) = watch.next().now_or_never() {
                                match more {
                                    Ok(more) => changes.extend(more),
                                    Err(e) => {
                                        Counters::bump(&resolver.counters().watch_restarts);
                                        tracing::info!(%app, error = %e, "instance watch ended; re-listing");
                                        ended = true;
                                        break;
                                    }
                                }
                            }
                            if !changes.is_empty()
                                && tx
                                    .send(Source::Changes(app.clone(), changes))
                                    .await
                                    .is_err()
                            {
                                return;
                            }
                            if ended {
                                break;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(%app, error = %e, "cannot watch instances"),
                }
            }
            Err(e) => tracing::warn!(%app, error = %e, "cannot list instances"),
        }
        relisting = true;
        tokio::time::sleep(backoff.next_delay()).await;
    }
}
