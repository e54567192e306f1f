//! Shared views: one store watch and one parsed view per app (and per interface's mapping)
//! for a whole resolver, however many subscriptions follow it.
//!
//! A view is a task that runs one source (an app's instance list and watch, or an
//! interface's mapping read and watch, see [`super::subscribe`]'s sources), keeps the last
//! state it read, and fans each update out to the subscriptions that joined it. A
//! subscription that joins late starts from that state.
//!
//! An app's view owns the app's protections, once per resolver: its [`AppView`] applies
//! self-preservation and the recovery after a store wipe, and what the subscriptions
//! receive is the resulting routable set ([`Routable`], shared as one `Arc`). The view also
//! tells the resolver's health ([`super::probes`]) what it decided: held instances are
//! suspect (set aside in channels until a probe answers), returned ones are probed at
//! once, and instances that left are forgotten. Releasing a hold is logged with the app
//! and counts, and counted (`hold_releases`). When the last subscription leaves, the view waits a
//! grace period ([`VIEW_RELEASE_GRACE`]) before it stops and closes its watch, so that a
//! flapping mapping or a resubscription does not churn watches.
//!
//! Joining and the view's decision to stop happen under one lock, so a join never reaches
//! a view that is going away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::app_view::{AppView, Applied, Released};
use super::context::Context;
use super::stats::Counters;
use super::subscribe::sources::{Source, watch_app, watch_mapping};
use crate::backend::Instances;

/// What one app's shared view routes to: registered and enabled instances plus the held
/// ones, by `{host}:{port}`.
#[derive(Debug, Default)]
pub(crate) struct Routable {
    /// The instances.
    pub instances: Instances,
    /// Whether some of them are held (by self-preservation or a wipe recovery).
    pub protection_active: bool,
}

/// How long a view nobody follows keeps its watch before it stops.
pub const VIEW_RELEASE_GRACE: Duration = Duration::from_secs(10);
/// Updates buffered between a view's source and the view.
const SOURCE_BUFFER: usize = 1024;

/// What a view follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ViewKey {
    /// An app's instances.
    App(String),
    /// An interface's mapping.
    Mapping(String),
}

enum Command {
    Join(u64, mpsc::Sender<Source>),
    Leave(u64),
}

/// The views of one resolver, by what they follow.
#[derive(Default)]
pub(crate) struct Views {
    running: Mutex<HashMap<ViewKey, mpsc::UnboundedSender<Command>>>,
}

/// A subscription's membership of one view; dropping it leaves the view.
#[derive(Debug)]
pub(crate) struct Membership {
    id: u64,
    commands: mpsc::UnboundedSender<Command>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Leave(self.id));
    }
}

impl Views {
    /// Joins subscription `id` to the view of `key` (starting the view if none runs): its
    /// updates go to `to`, starting with the view's current state.
    pub fn join(
        &self,
        context: &Arc<Context>,
        key: ViewKey,
        id: u64,
        to: mpsc::Sender<Source>,
    ) -> Membership {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(commands) = running.get(&key)
            && commands.send(Command::Join(id, to.clone())).is_ok()
        {
            return Membership {
                id,
                commands: commands.clone(),
            };
        }
        let (commands, inbox) = mpsc::unbounded_channel();
        let _ = commands.send(Command::Join(id, to));
        running.insert(key.clone(), commands.clone());
        let span = match &key {
            ViewKey::App(app) => tracing::debug_span!("app_view", %app),
            ViewKey::Mapping(interface) => tracing::debug_span!("mapping_view", %interface),
        };
        let app = match &key {
            ViewKey::App(_) => Some(AppView::new(context.protection.clone())),
            ViewKey::Mapping(_) => None,
        };
        let view = View {
            context: context.clone(),
            key,
            inbox,
            members: HashMap::new(),
            state: None,
            app,
            protected: false,
            idle_since: None,
        };
        tokio::spawn(view.run().instrument(span));
        Membership { id, commands }
    }

    /// How many views run.
    pub fn len(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Removes `key` now; returns the commands that were waiting in its inbox (under the
    /// lock, so no join reaches the inbox after this).
    fn close(&self, key: &ViewKey, inbox: &mut mpsc::UnboundedReceiver<Command>) -> Vec<Command> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.remove(key);
        let mut waiting = Vec::new();
        while let Ok(command) = inbox.try_recv() {
            waiting.push(command);
        }
        waiting
    }

    /// Removes `key` if its view may stop: nothing is waiting in its inbox. Returns the
    /// commands that were waiting otherwise.
    fn try_release(
        &self,
        key: &ViewKey,
        inbox: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Vec<Command> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut waiting = Vec::new();
        while let Ok(command) = inbox.try_recv() {
            waiting.push(command);
        }
        if waiting.is_empty() {
            running.remove(key);
        }
        waiting
    }
}

/// The last state a view read, handed to subscriptions that join.
enum State {
    Apps(std::collections::BTreeSet<String>),
    Instances(String, Arc<Routable>),
}

struct View {
    context: Arc<Context>,
    key: ViewKey,
    inbox: mpsc::UnboundedReceiver<Command>,
    members: HashMap<u64, mpsc::Sender<Source>>,
    state: Option<State>,
    /// An app view's instances and protections.
    app: Option<AppView>,
    /// Whether this view counts in the resolver's protected-apps gauge.
    protected: bool,
    idle_since: Option<Instant>,
}

impl View {
    async fn run(mut self) {
        let (tx, mut updates) = mpsc::channel(SOURCE_BUFFER);
        let mut source = JoinSet::new();
        match &self.key {
            ViewKey::App(app) => {
                source.spawn(watch_app(self.context.clone(), app.clone(), tx).in_current_span())
            }
            ViewKey::Mapping(interface) => source.spawn(
                watch_mapping(self.context.clone(), interface.clone(), tx).in_current_span(),
            ),
        };
        loop {
            let release = self.idle_since.map(|t| t + VIEW_RELEASE_GRACE);
            let hold_ends = self.app.as_ref().and_then(AppView::next_release);
            tokio::select! {
                Some(command) = self.inbox.recv() => self.on_command(command).await,
                Some(update) = updates.recv() => {
                    if let Source::Failed(_) = update {
                        self.fail(update).await;
                        break;
                    }
                    self.on_update(update).await;
                }
                () = sleep_until(hold_ends) => self.release_holds().await,
                () = sleep_until(release) => {
                    let waiting = self.context.views.try_release(&self.key, &mut self.inbox);
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
            Counters::sub(&self.context.counters.protected_apps, 1);
        }
        tracing::debug!("view released");
    }

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::Join(id, to) => {
                if let Some(state) = &self.state {
                    let _ = to.send(state.as_source()).await;
                }
                self.members.insert(id, to);
                self.idle_since = None;
            }
            Command::Leave(id) => {
                self.members.remove(&id);
                if self.members.is_empty() {
                    self.idle_since = Some(Instant::now());
                }
            }
        }
    }

    /// Hands a permanent failure of the source to every member, including subscriptions
    /// joining meanwhile, and leaves the resolver's views: a later join starts a new view,
    /// which tries the store again.
    async fn fail(&mut self, failure: Source) {
        for command in self.context.views.close(&self.key, &mut self.inbox) {
            match command {
                Command::Join(id, to) => {
                    self.members.insert(id, to);
                }
                Command::Leave(id) => {
                    self.members.remove(&id);
                }
            }
        }
        for member in self.members.values() {
            let _ = member.send(failure.clone()).await;
        }
    }

    async fn on_update(&mut self, update: Source) {
        if let Source::Reset(app, list) = &update {
            for (address, reason) in &list.skipped {
                Counters::bump(&self.context.counters.skipped_records);
                tracing::warn!(%app, %address, %reason, "instance record skipped");
            }
        }
        let update = match (update, &mut self.app) {
            (Source::Apps(apps), _) => {
                self.state = Some(State::Apps(apps.clone()));
                Source::Apps(apps)
            }
            (Source::Reset(app, list), Some(view)) => {
                let now = Instant::now();
                let applied = view.reset(list.instances, list.revision, list.epoch.as_deref(), now);
                view.synced = true;
                self.applied(&app, applied)
            }
            (Source::Changes(app, changes), Some(view)) if view.synced => {
                let now = Instant::now();
                let applied = view.apply(changes, now);
                self.applied(&app, applied)
            }
            _ => return,
        };
        self.send(update).await;
    }

    /// Acts on what an update did to the app: tells health, logs and counts, and returns
    /// the routable set to send.
    fn applied(&mut self, app: &str, applied: Applied) -> Source {
        let context = &self.context;
        let counters = &context.counters;
        Counters::add(&counters.skipped_records, applied.skipped as u64);
        if applied.wiped {
            Counters::bump(&counters.wipes);
            tracing::warn!(
                %app,
                kept = applied.newly_held.len(),
                bound = ?context.protection.wipe_recovery,
                sign = applied.wipe_sign,
                "the registry was wiped or replaced; keeping the instances it forgot until \
                 they re-register"
            );
        } else if !applied.newly_held.is_empty() {
            Counters::add(&counters.held_removals, applied.newly_held.len() as u64);
            tracing::warn!(
                %app,
                held = applied.newly_held.len(),
                "mass expiry: self-preservation holds the removals; held instances are probed"
            );
        }
        // Held instances are suspect before any subscription sees them routable again.
        for address in &applied.newly_held {
            context.health.suspect(context, address);
        }
        if !applied.returned.is_empty() {
            Counters::add(&counters.hold_releases, applied.returned.len() as u64);
            tracing::info!(
                %app,
                returned = applied.returned.len(),
                still_held = self.app.as_ref().map_or(0, AppView::held_count),
                "hold released: held instances registered again"
            );
            for address in &applied.returned {
                context.health.returned(address);
            }
        }
        self.routable(app)
    }

    /// Releases the holds that are due, and sends what is left.
    async fn release_holds(&mut self) {
        let Some(view) = &mut self.app else { return };
        let released: Released = view.release_due(Instant::now());
        if released.is_empty() {
            return;
        }
        let ViewKey::App(app) = self.key.clone() else {
            return;
        };
        let count = (released.held.len() + released.kept.len()) as u64;
        Counters::add(&self.context.counters.hold_releases, count);
        tracing::warn!(
            %app,
            held = released.held.len(),
            kept_after_wipe = released.kept.len(),
            still_held = view.held_count(),
            "hold released: held instances did not return in time and leave"
        );
        let update = self.routable(&app);
        self.send(update).await;
    }

    /// The app's routable set as an update (it becomes the view's state); forgets the
    /// health of instances that left since the last one.
    fn routable(&mut self, app: &str) -> Source {
        let Some(view) = &self.app else {
            return Source::View(app.to_owned(), Arc::default());
        };
        let routable = Arc::new(Routable {
            instances: view.routable_map(),
            protection_active: view.protection_active(),
        });
        if let Some(State::Instances(_, before)) = &self.state {
            for address in before.instances.keys() {
                if !routable.instances.contains_key(address) {
                    self.context.health.forget(address);
                }
            }
        }
        if routable.protection_active != self.protected {
            self.protected = routable.protection_active;
            let gauge = &self.context.counters.protected_apps;
            if self.protected {
                Counters::bump(gauge);
            } else {
                Counters::sub(gauge, 1);
            }
        }
        self.state = Some(State::Instances(app.to_owned(), routable.clone()));
        Source::View(app.to_owned(), routable)
    }

    /// Sends `update` to every member; forgets those that left.
    async fn send(&mut self, update: Source) {
        let mut gone = Vec::new();
        for (id, member) in &self.members {
            if member.send(update.clone()).await.is_err() {
                gone.push(*id);
            }
        }
        for id in gone {
            self.members.remove(&id);
        }
        if self.members.is_empty() && self.idle_since.is_none() {
            self.idle_since = Some(Instant::now());
        }
    }
}

impl State {
    fn as_source(&self) -> Source {
        match self {
            State::Apps(apps) => Source::Apps(apps.clone()),
            State::Instances(app, routable) => Source::View(app.clone(), routable.clone()),
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
