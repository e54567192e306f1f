//! The task of one view: it runs its source, applies what it reads (for an app, through the
//! app's [`AppView`]), tells health what the protections decided, and sends the result to
//! its members, only when something they route to changed.
//!
//! What health hears about an app's instances: a newly held instance is suspect (every
//! endpoint of it set aside until a probe answers) before any member sees it routable; an
//! instance that appears, or whose hold ended by a new record, is registered (whatever of
//! it is set aside is probed at once); one that leaves is forgotten.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::app::{AppView, Applied};
use super::snapshot::AppSnapshot;
use super::source::{follow_app, follow_mapping};
use super::{Command, Routable, SourceEvent, VIEW_RELEASE_GRACE, ViewKey, ViewUpdate, Views};
use crate::consumer::health::HealthInput;
use crate::consumer::stats::Counters;
use crate::consumer::timer::sleep_until;
use crate::model::ServiceInstance;

/// Events buffered between a view's source and the view.
const SOURCE_BUFFER: usize = 1024;

/// The last state a view sent, handed to members that join.
enum State {
    Apps(BTreeSet<String>),
    Instances(Arc<Routable>),
}

pub(super) struct View {
    views: Views,
    key: ViewKey,
    inbox: mpsc::UnboundedReceiver<Command>,
    members: HashMap<u64, mpsc::Sender<ViewUpdate>>,
    /// Observers of an app view: each gets a snapshot after every update applied.
    observers: HashMap<u64, watch::Sender<Arc<AppSnapshot>>>,
    state: Option<State>,
    /// An app view's instances and protections.
    app: Option<AppView>,
    /// Whether this view counts in the resolver's protected-apps gauge.
    protected: bool,
    idle_since: Option<Instant>,
}

impl View {
    pub(super) fn new(views: Views, key: ViewKey, inbox: mpsc::UnboundedReceiver<Command>) -> Self {
        let app = match &key {
            ViewKey::App(_) => Some(AppView::new(views.parts.protection.clone())),
            ViewKey::Mapping(_) => None,
        };
        View {
            views,
            key,
            inbox,
            members: HashMap::new(),
            observers: HashMap::new(),
            state: None,
            app,
            protected: false,
            idle_since: None,
        }
    }

    pub(super) async fn run(mut self) {
        let (tx, mut events) = mpsc::channel(SOURCE_BUFFER);
        let mut source = JoinSet::new();
        let parts = self.views.parts.clone();
        match &self.key {
            ViewKey::App(app) => source.spawn(follow_app(parts, app.clone(), tx).in_current_span()),
            ViewKey::Mapping(interface) => {
                source.spawn(follow_mapping(parts, interface.clone(), tx).in_current_span())
            }
        };
        loop {
            let release = self.idle_since.map(|t| t + VIEW_RELEASE_GRACE);
            let hold_ends = self.app.as_ref().and_then(AppView::next_release);
            tokio::select! {
                Some(command) = self.inbox.recv() => self.on_command(command).await,
                Some(event) = events.recv() => {
                    if let SourceEvent::Failed(error) = event {
                        self.fail(ViewUpdate::Failed(error)).await;
                        break;
                    }
                    self.on_event(event).await;
                }
                () = sleep_until(hold_ends) => self.release_holds().await,
                () = sleep_until(release) => {
                    let waiting = self.try_release();
                    if waiting.is_empty() {
                        break;
                    }
                    for command in waiting {
                        self.on_command(command).await;
                    }
                }
            }
        }
        if self.protected {
            Counters::sub(&self.views.parts.counters.protected_apps, 1);
        }
        tracing::debug!("view released");
    }

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Join(id, to) => {
                if let Some(state) = &self.state {
                    let _ = to.send(self.update_of(state)).await;
                }
                self.members.insert(id, to);
                self.idle_since = None;
            }
            Command::Observe(id, to) => {
                if let Some(snapshot) = self.snapshot() {
                    to.send_replace(snapshot);
                }
                self.observers.insert(id, to);
                self.idle_since = None;
            }
            Command::Leave(id) => {
                self.members.remove(&id);
                self.observers.remove(&id);
                if self.is_idle() {
                    self.idle_since = Some(Instant::now());
                }
            }
            Command::Seed(instances) => {
                if let Some(view) = &mut self.app {
                    view.seed(instances);
                }
            }
        }
    }

    /// Whether neither a member nor an observer follows the view.
    fn is_idle(&self) -> bool {
        self.members.is_empty() && self.observers.is_empty()
    }

    /// The app view's state as observers see it (`None` for a mapping view).
    fn snapshot(&self) -> Option<Arc<AppSnapshot>> {
        let view = self.app.as_ref()?;
        Some(Arc::new(AppSnapshot {
            app: self.app_name(),
            synced: view.is_synced(),
            registered: view.registered().clone(),
            holds: view.holds(),
            protection_active: view.protection_active(),
            failed: None,
        }))
    }

    /// Hands the observers the view's state, if any observes it.
    fn observe(&mut self) {
        if self.observers.is_empty() {
            return;
        }
        if let Some(snapshot) = self.snapshot() {
            for observer in self.observers.values() {
                observer.send_replace(snapshot.clone());
            }
        }
    }

    fn update_of(&self, state: &State) -> ViewUpdate {
        match (state, &self.key) {
            (State::Apps(apps), _) => ViewUpdate::Apps(apps.clone()),
            (State::Instances(routable), ViewKey::App(app)) => {
                ViewUpdate::Instances(app.clone(), routable.clone())
            }
            (State::Instances(_), ViewKey::Mapping(_)) => unreachable!("a mapping view"),
        }
    }

    /// Removes the view from the running ones if it may stop: nothing waits in its inbox.
    /// Returns the commands that were waiting otherwise (under the lock, so no join
    /// reaches the inbox after the view is gone).
    fn try_release(&mut self) -> Vec<Command> {
        let mut running = self.views.running.lock();
        let mut waiting = Vec::new();
        while let Ok(command) = self.inbox.try_recv() {
            waiting.push(command);
        }
        if waiting.is_empty() {
            running.remove(&self.key);
        }
        waiting
    }

    /// Hands a permanent failure of the source to every member, including subscriptions
    /// joining meanwhile, and leaves the running views: a later join starts a new view,
    /// which tries the registry again.
    async fn fail(&mut self, failure: ViewUpdate) {
        let waiting: Vec<Command> = {
            let mut running = self.views.running.lock();
            running.remove(&self.key);
            std::iter::from_fn(|| self.inbox.try_recv().ok()).collect()
        };
        for command in waiting {
            match command {
                Command::Join(id, to) => {
                    self.members.insert(id, to);
                }
                Command::Observe(id, to) => {
                    self.observers.insert(id, to);
                }
                Command::Leave(id) => {
                    self.members.remove(&id);
                    self.observers.remove(&id);
                }
                Command::Seed(_) => {}
            }
        }
        if let ViewUpdate::Failed(error) = &failure {
            let last = AppSnapshot {
                app: self.app_name(),
                failed: Some(error.clone()),
                ..self.snapshot().map(|s| (*s).clone()).unwrap_or_default()
            };
            let last = Arc::new(last);
            for observer in self.observers.values() {
                observer.send_replace(last.clone());
            }
        }
        for member in self.members.values() {
            let _ = member.send(failure.clone()).await;
        }
    }

    async fn on_event(&mut self, event: SourceEvent) {
        let now = Instant::now();
        let applied = match (event, &mut self.app) {
            (SourceEvent::Apps(apps), _) => {
                let unchanged = matches!(&self.state, Some(State::Apps(before)) if *before == apps);
                if unchanged {
                    Counters::bump(&self.views.parts.counters.unchanged_view_updates);
                    return;
                }
                self.state = Some(State::Apps(apps.clone()));
                self.send(ViewUpdate::Apps(apps)).await;
                return;
            }
            (SourceEvent::Reset(list), Some(view)) => {
                for (address, reason) in &list.skipped {
                    tracing::warn!(%address, %reason, "instance record skipped");
                }
                view.reset(list, now)
            }
            (SourceEvent::Changes(changes), Some(view)) if view.is_synced() => {
                view.apply(changes, now)
            }
            // Changes before the first list, or instance events in a mapping view.
            _ => return,
        };
        self.applied(applied);
        self.publish().await;
        self.observe();
    }

    /// Counts and logs what an update did to the holds, and makes the held instances
    /// suspect before any member sees them routable again.
    fn applied(&mut self, applied: Applied) {
        let parts = &self.views.parts;
        let counters = &parts.counters;
        let app = self.app_name();
        Counters::add(&counters.skipped_records, applied.skipped as u64);
        if applied.wiped {
            Counters::bump(&counters.wipes);
            tracing::warn!(
                %app,
                sign = applied.wipe_sign,
                kept = applied.newly_held.len(),
                bound = ?parts.protection.wipe_recovery,
                "the registry was wiped or replaced; keeping the instances it forgot until \
                 they re-register"
            );
        } else if applied.emptied {
            Counters::bump(&counters.emptied_apps);
            tracing::warn!(
                %app,
                kept = applied.newly_held.len(),
                bound = ?parts.protection.wipe_recovery,
                "the app's last instances went without a graceful stop; keeping them (probed) \
                 until they re-register"
            );
        } else if !applied.newly_held.is_empty() {
            Counters::add(&counters.held_removals, applied.newly_held.len() as u64);
            tracing::warn!(
                %app,
                held = applied.newly_held.len(),
                "mass expiry: self-preservation holds the removals; held instances are probed"
            );
        }
        for instance in &applied.newly_held {
            parts.health.feed(HealthInput::Held(&instance.authority()));
        }
        let mut returned = applied.returned.iter().map(|i| &**i);
        parts.health.feed(HealthInput::Registered(&mut returned));
        if !applied.returned.is_empty() {
            Counters::add(&counters.hold_releases, applied.returned.len() as u64);
            tracing::info!(
                %app,
                returned = applied.returned.len(),
                still_held = self.app.as_ref().map_or(0, AppView::held_count),
                "hold released: held instances registered again"
            );
        }
    }

    /// Releases the holds that are due, and sends what is left.
    async fn release_holds(&mut self) {
        let app = self.app_name();
        let Some(view) = &mut self.app else { return };
        let released = view.release_due(Instant::now());
        if released.is_empty() {
            return;
        }
        let count = (released.held.len() + released.kept.len()) as u64;
        Counters::add(&self.views.parts.counters.hold_releases, count);
        tracing::warn!(
            %app,
            held = released.held.len(),
            kept_after_wipe = released.kept.len(),
            still_held = view.held_count(),
            "hold released: held instances did not return in time and leave"
        );
        self.publish().await;
        self.observe();
    }

    /// Sends the app's routable set if it differs from the last one sent; tells health
    /// which instances appeared or left.
    async fn publish(&mut self) {
        let Some(view) = &self.app else { return };
        let parts = self.views.parts.clone();
        let next = view.routable_map();
        let protection_active = view.protection_active();
        let held = view.held_count();
        let revision = view.last_revision();
        let before = match &self.state {
            Some(State::Instances(before)) => Some(before.clone()),
            _ => None,
        };
        let empty = Routable::default();
        let last = before.as_deref().unwrap_or(&empty);
        let mut changed = before.is_none() || last.protection_active != protection_active;
        // New records (new instances, or holds ended by a new record): what of them is set
        // aside is probed at once.
        let new_records = next.iter().filter(|(address, instance)| {
            !last
                .instances
                .get(*address)
                .is_some_and(|was| Arc::ptr_eq(was, instance) || was == *instance)
        });
        let new_records: Vec<&ServiceInstance> = new_records.map(|(_, i)| &**i).collect();
        changed |= !new_records.is_empty();
        parts
            .health
            .feed(HealthInput::Registered(&mut new_records.into_iter()));
        for (address, instance) in last.instances.iter() {
            if !next.contains_key(address) {
                changed = true;
                parts.health.feed(HealthInput::Left(&instance.authority()));
            }
        }
        if !changed {
            Counters::bump(&parts.counters.unchanged_view_updates);
            return;
        }
        if protection_active != self.protected {
            self.protected = protection_active;
            let gauge = &parts.counters.protected_apps;
            if self.protected {
                Counters::bump(gauge);
            } else {
                Counters::sub(gauge, 1);
            }
        }
        let routable = Arc::new(Routable {
            instances: next,
            protection_active,
            held,
            revision,
        });
        self.state = Some(State::Instances(routable.clone()));
        self.send(ViewUpdate::Instances(self.app_name(), routable))
            .await;
    }

    fn app_name(&self) -> String {
        match &self.key {
            ViewKey::App(app) | ViewKey::Mapping(app) => app.clone(),
        }
    }

    /// Sends `update` to every member; forgets those that left.
    async fn send(&mut self, update: ViewUpdate) {
        let mut gone = Vec::new();
        for (id, member) in &self.members {
            if member.send(update.clone()).await.is_err() {
                gone.push(*id);
            }
        }
        for id in gone {
            self.members.remove(&id);
        }
        if self.is_idle() && self.idle_since.is_none() {
            self.idle_since = Some(Instant::now());
        }
    }
}
