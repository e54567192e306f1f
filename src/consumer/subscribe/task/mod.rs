//! The subscription task: one per subscription, owning its parts; it waits for whatever
//! comes next (a view update, a fetch, a health change, a report, a snapshot write, a
//! timer), hands it to the part it concerns, then does what is due.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

mod level;

use super::SubscribeParts;
use super::apps::{Following, MappingRead};
use super::assemble::Assembly;
use super::handle::{Shared, SubscriptionHandle};
use super::interfaces::{InterfaceLevel, InterfaceUpdate};
use super::migration::{Migration, next_health, next_rule};
use super::migration_follow::RuleNow;
use super::migration_move::PendingMove;
use super::options::SubscribeOptions;
use super::publish::{Publisher, Start};
use super::restore::{self, Snapshots};
use super::snapshot::Snapshot;
use crate::consumer::explain::{AppFindings, Explanation};
use crate::consumer::metadata::{Ended, Fetching, Joined};
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::consumer::timer::sleep_until;
use crate::consumer::views::ViewUpdate;
use crate::error::{Error, Result};
use crate::governance::migration::{Level, LevelChoice, MigrationStep, application_first_level};
use crate::model::EMPTY_REVISION;
use crate::warnings::aggregated;

/// View updates buffered for the task.
const UPDATE_BUFFER: usize = 1024;
/// How long a new subscription waits for the first answer about the consumer app's
/// migration rule before it starts at its own step (the rule still applies once read).
const RULE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

enum Wake {
    Closed,
    Update(ViewUpdate),
    Fetched(Joined),
    Interface(InterfaceUpdate),
    Rule,
    Health,
    Written(Result<()>),
    Timer,
}

pub(super) struct Task {
    /// This subscription's id: its entry in the instances-per-app gauge, its membership
    /// of views.
    id: u64,
    parts: Arc<SubscribeParts>,
    subscription: Subscription,
    updates: mpsc::Receiver<ViewUpdate>,
    following: Following,
    fetching: Fetching,
    assembly: Assembly,
    publisher: Publisher,
    snapshots: Snapshots,
    /// Whether the routed instances or metadata changed since the last tick.
    dirty: bool,
    /// Set when the registry refused for good: the task stops following it.
    stopped: bool,
    /// Which levels it reads and why: the migration state (`migration.rs`).
    migration: Migration,
}

impl Task {
    /// The task and the first handle of a new subscription.
    pub(super) fn new(
        parts: Arc<SubscribeParts>,
        subscription: Subscription,
        options: SubscribeOptions,
        snapshot: Option<Snapshot>,
        ready: oneshot::Sender<()>,
    ) -> (Task, SubscriptionHandle) {
        let id = parts
            .counters
            .next_subscription
            .fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(Arc::new(Vec::new()));
        let (updates_tx, updates) = mpsc::channel(UPDATE_BUFFER);
        let step = subscription
            .migration
            .unwrap_or_else(|| options.step_on(parts.backend.interface_level()));
        let shared = Arc::new(Shared {
            id,
            protection_active: AtomicBool::new(false),
            serving_snapshot: AtomicBool::new(false),
            ended: std::sync::Mutex::new(None),
            health: parts.health.clone(),
            counters: parts.counters.clone(),
            why_empty: watch::channel(None).0,
            level: watch::channel(Arc::new(LevelChoice::initial(step))).0,
        });
        let now = Instant::now();
        let retry = (options.fetch_retry_base, options.fetch_retry_max);
        let task = Task {
            id,
            // (`rule` is set below, once `parts` is moved in.)
            following: Following::new(parts.views.clone(), id, updates_tx),
            fetching: Fetching::new(parts.metadata.clone(), retry),
            assembly: Assembly::default(),
            publisher: Publisher::new(
                &options.coalesce,
                tx,
                shared.clone(),
                ready,
                (now + options.start_timeout, now + options.snapshot_wait),
                options.first_fetch_wait,
            ),
            snapshots: Snapshots::new(options.snapshot.clone(), snapshot),
            updates,
            parts,
            subscription: subscription.clone(),
            dirty: false,
            stopped: false,
            migration: Migration::new(step),
        };
        let mut task = task;
        task.migration.rule = task.parts.migration.as_ref().map(|m| m.subscribe());
        let handle = SubscriptionHandle {
            subscription: Arc::new(subscription),
            endpoints: rx,
            shared,
        };
        (task, handle)
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    pub(super) async fn run(mut self) {
        Counters::bump(&self.parts.counters.subscriptions);
        if let Some(rule) = &mut self.migration.rule {
            // Start at the rule's step when it is read in time, not at ours then switch.
            let answered = rule.wait_for(|now| !matches!(now, RuleNow::Unknown));
            let _ = tokio::time::timeout(RULE_WAIT, answered).await;
            self.migration.step = self.chosen_step();
        }
        tracing::debug!(step = %self.migration.step, "subscription started");
        self.start_levels();
        while !self.stopped {
            let now = Instant::now();
            self.tick(now);
            let deadline = self.next_due(now);
            let wake = tokio::select! {
                biased;
                () = self.publisher.closed() => Wake::Closed,
                Some(update) = self.updates.recv() => Wake::Update(update),
                joined = self.fetching.next() => Wake::Fetched(joined),
                update = next_interface(&mut self.migration.interface) => Wake::Interface(update),
                () = next_rule(&mut self.migration.rule) => Wake::Rule,
                () = next_health(&mut self.migration.health) => Wake::Health,
                written = self.snapshots.written() => Wake::Written(written),
                () = sleep_until(deadline) => Wake::Timer,
            };
            let now = Instant::now();
            match wake {
                Wake::Closed => break,
                Wake::Update(update) => {
                    self.on_update(update, now);
                    while let Ok(update) = self.updates.try_recv() {
                        self.on_update(update, now);
                    }
                }
                Wake::Fetched(joined) => {
                    match self.fetching.on_fetched(joined, now, &self.parts.warnings) {
                        Ended::Known => self.dirty = true,
                        Ended::Outlook => self.explain_again(),
                        Ended::Unchanged => {}
                    }
                }
                Wake::Interface(update) => self.on_interface(update),
                Wake::Rule => {
                    self.migration.refused = None;
                    self.choose_again(now);
                    // The same step may come with another threshold or proportion.
                    self.dirty = true;
                }
                Wake::Health => self.on_health(),
                Wake::Written(Ok(())) => Counters::bump(&self.parts.counters.snapshot_writes),
                Wake::Written(Err(error)) => {
                    let subject = self.id.to_string();
                    aggregated!(warn, self.parts.warnings, "snapshot not written", &subject,
                        %error);
                }
                Wake::Timer => {}
            }
        }
        if let Some(seen) = &self.parts.seen {
            seen.remove(self.id);
        }
        Counters::sub(&self.parts.counters.subscriptions, 1);
        self.parts.counters.set_instances(self.id, None);
        tracing::debug!(interface = %self.subscription.interface, "subscription ended");
    }

    /// Does everything that is due at `now`: releases, fetches, the first publication,
    /// coalesced pushes and snapshot writes.
    fn tick(&mut self, now: Instant) {
        let parts = self.parts.clone();
        let counters = &parts.counters;
        for app in self.following.release_unmapped(now) {
            Counters::bump(&counters.released_apps);
            self.assembly.forget_app(&app);
            self.dirty = true;
        }
        self.fetching
            .ensure(&mut self.following.apps, now, counters);
        self.decide_move(now);
        if self.following.live() && self.snapshots.live() {
            self.publisher.set_serving_snapshot(false);
        }
        let start = self.publisher.start(
            now,
            self.store_read(),
            self.fetching.first_fetches_pending(),
            self.snapshots.has_read(),
        );
        if start == Start::TimedOut
            && let Some(snapshot) = self.snapshots.take_read()
        {
            self.serve_snapshot(snapshot, now);
        }
        let starting = matches!(start, Start::Complete | Start::TimedOut);
        if starting || (start == Start::Done && self.dirty) {
            self.publisher.changed(now);
        }
        let holding = self.following.protection_active();
        if !holding && self.publisher.protection_shown() {
            // A released hold goes out at once, with the set it leaves, not a window later.
            self.publisher.hurry(now);
        }
        if self.dirty || starting {
            let per_app = self.following.instances_per_app();
            counters.set_instances(self.id, Some(per_app));
        }
        self.dirty = false;
        if (start == Start::Done || starting) && self.publisher.is_due(now) {
            self.push(now);
        }
        // The flag describes the published set: a hold shows at once (its instances are
        // listed already), a release only with the push that drops them.
        if holding || !self.publisher.pending() {
            self.publisher.set_protection_active(holding);
        }
        if starting {
            self.publisher.announce_start();
        }
        let (subscription, following, fetching) =
            (&self.subscription, &self.following, &self.fetching);
        self.snapshots.write_if_due(subscription, || {
            restore::build(subscription, following, fetching)
        });
    }

    /// Whether every level the step reads has been read: the apps (their mapping and
    /// each app), the interface level.
    fn store_read(&self) -> bool {
        (!self.migration.step.reads_application() || self.following.store_read())
            && self
                .migration
                .interface
                .as_ref()
                .is_none_or(|level| level.synced)
    }

    /// Computes the set and pushes it if it differs from what subscribers have.
    fn push(&mut self, now: Instant) {
        let application = if self.migration.step.reads_application() {
            self.assembly.compute(
                &self.following.apps,
                &self.fetching.metadata,
                &self.subscription,
                &self.parts.hosts,
            )
        } else {
            Vec::new()
        };
        let from_interface = match self.migration.step {
            MigrationStep::ForceApplication => false,
            MigrationStep::ForceInterface => true,
            MigrationStep::ApplicationFirst => {
                let (interface, set_aside) = self.application_first_inputs(&application);
                self.migration.set_aside = set_aside;
                let (threshold, _) = self.application_first_settings();
                let level =
                    application_first_level(application.len(), set_aside, interface, threshold);
                level == Level::Interface
            }
        };
        self.show_level(from_interface, &application);
        let interface_set = match (&mut self.migration.interface, from_interface) {
            (Some(level), true) => {
                Some(&level.set(&self.subscription, &self.parts.hosts).endpoints)
            }
            _ => None,
        };
        let next = match interface_set {
            Some(all) => all.clone(),
            None => application,
        };
        let why = next.is_empty().then(|| Arc::new(self.explanation()));
        self.publisher.shared.why_empty.send_if_modified(|known| {
            let changed = *known != why;
            *known = why;
            changed
        });
        if let Some(seen) = &self.parts.seen {
            let mut all: Vec<&crate::model::Endpoint> = if from_interface {
                next.iter().collect()
            } else {
                self.assembly.all().collect()
            };
            all.sort_unstable();
            all.dedup();
            let digest = crate::model::consumer_record::digest_of(all.iter().copied());
            let position = self.following.position();
            let now_ms = crate::consumer::seen::now_ms();
            let count = all.len() as u64;
            seen.update(self.id, &self.subscription, digest, count, position, now_ms);
            seen.set_level(self.id, &self.publisher.shared.level.borrow());
        }
        let pushed = self.publisher.push(next, now, &self.parts.counters);
        if pushed && self.following.live() {
            self.snapshots.pushed();
        }
    }

    /// Explains the empty set again, while it is empty: whether the metadata of some
    /// instance is still on its way changed, and with it whether calls wait for it.
    fn explain_again(&mut self) {
        if self.publisher.shared.why_empty.borrow().is_none() {
            return;
        }
        let why = Arc::new(self.explanation());
        self.publisher.shared.why_empty.send_if_modified(|known| {
            let changed = known.as_ref().is_some_and(|known| *known != why);
            if changed {
                *known = Some(why);
            }
            changed
        });
    }

    /// Why the subscription resolves to what it has, from what it followed.
    fn explanation(&self) -> Explanation {
        let apps = self.following.apps.iter().map(|(app, view)| {
            let (mut count, mut unknown, mut on_its_way) = (0, 0, 0);
            for instance in view.routable() {
                count += 1;
                if instance.revision() == EMPTY_REVISION {
                    continue;
                }
                let key = (app.clone(), instance.revision().to_owned());
                if !self.fetching.metadata.contains_key(&key) {
                    unknown += 1;
                    on_its_way += usize::from(self.fetching.on_its_way(&key));
                }
            }
            let infos = self
                .fetching
                .metadata
                .iter()
                .filter(|((a, _), _)| a == app)
                .map(|(_, info)| &**info);
            AppFindings::new(app.clone(), count, unknown, infos)
                .with_metadata_on_its_way(on_its_way)
        });
        Explanation {
            subscription: self.subscription.clone(),
            read: self.following.store_read(),
            from_mapping: self.subscription.provided_by.is_empty(),
            apps: apps.collect(),
            interface_level: self
                .migration
                .interface
                .as_ref()
                .map(|level| level.findings(self.migration.step)),
            step: self
                .parts
                .backend
                .interface_level()
                .then_some(self.migration.step),
        }
    }

    /// The earliest time something is due.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        [
            self.publisher.next_due(self.snapshots.has_read()),
            self.fetching.next_try(),
            self.following.next_release(now),
            self.migration.pending.as_ref().map(PendingMove::not_before),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_update(&mut self, update: ViewUpdate, now: Instant) {
        match update {
            ViewUpdate::Apps(apps) => self.on_mapping(apps, now),
            ViewUpdate::Instances(app, routable) => {
                self.dirty |= self.following.on_view(&app, routable);
            }
            ViewUpdate::Failed(error) => self.fail(error),
        }
    }

    /// A read of the mapping, unless it names more apps than the limit.
    fn on_mapping(&mut self, apps: std::collections::BTreeSet<String>, now: Instant) {
        let limit = self.parts.limits.max_apps_per_mapping;
        let named = apps.len();
        if self.following.on_mapping(apps, limit, now) == MappingRead::Oversized {
            Counters::bump(&self.parts.counters.oversized_mappings);
            let interface = &self.subscription.interface;
            aggregated!(warn, self.parts.warnings,
                "mapping names more apps than the limit; ignored, known apps keep their endpoints",
                interface, %interface, apps = named, limit);
        }
        // An `applications` entry of the rule may name one of the apps now mapped.
        self.choose_again(now);
    }

    /// The registry refused for good: keeps the last set (errors never remove endpoints),
    /// records why for the handles and stops following the registry. The handles see the
    /// error from `changed()` once the task is gone.
    fn fail(&mut self, error: Arc<Error>) {
        if self.stopped {
            return;
        }
        if self.publisher.started() {
            tracing::warn!(
                interface = %self.subscription.interface,
                %error,
                "the registry refused the subscription; it no longer follows the registry and \
                 keeps its last set"
            );
        } else {
            // `subscribe()` returns the error itself: nothing to keep, nothing to log.
            tracing::debug!(%error, "the registry refused the subscription before its first set");
        }
        self.publisher.shared.end(error);
        self.stopped = true;
    }

    /// Serves from the snapshot what the registry has not given yet.
    fn serve_snapshot(&mut self, snapshot: Snapshot, now: Instant) {
        tracing::warn!(
            interface = %self.subscription.interface,
            "registry not reached in time; serving from the local snapshot"
        );
        Counters::bump(&self.parts.counters.snapshot_loads);
        self.snapshots.serving = true;
        self.publisher.set_serving_snapshot(true);
        restore::restore(snapshot, &mut self.following, &mut self.fetching);
        self.fetching
            .ensure(&mut self.following.apps, now, &self.parts.counters);
    }
}

/// The next update of the interface level; pending forever when it is not read.
async fn next_interface(level: &mut Option<InterfaceLevel>) -> InterfaceUpdate {
    match level {
        Some(level) => level.next().await,
        None => std::future::pending().await,
    }
}
