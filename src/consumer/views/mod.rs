//! Shared views: one registry follow and one parsed view per app (and per interface's
//! mapping) for a whole resolver, however many subscriptions follow it.
//!
//! Data flows one way: a *source* (`source.rs`) follows the registry backend and sends
//! [`SourceEvent`]s to its view's task (`task.rs`), which applies them (for an app, through
//! its [`AppView`](app::AppView) and self-preservation, once for the resolver), tells the
//! resolver's health what it decided, and fans the result out to the subscriptions that
//! joined as [`ViewUpdate`]s. A subscription that joins late starts from the view's last
//! state. When the last subscription leaves, the view waits [`VIEW_RELEASE_GRACE`] before it
//! stops and closes its follow, so that a flapping mapping or a resubscription does not
//! churn watches. Joining and the view's decision to stop happen under one lock, so a join
//! never reaches a view that is going away.
//!
//! * `source`: following the backend, retrying with backoff, aggregated warnings;
//! * `app`: one app's instances with the protections (pure);
//! * `protection`: self-preservation against mass expiry (pure);
//! * `snapshot`: the picture of an app's view that observers follow (pure data);
//! * `task`: the view task.

pub(crate) mod app;
pub(crate) mod protection;
pub(crate) mod snapshot;
mod source;
mod task;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;

use crate::backend::{Backend, InstanceChange, InstanceList, Instances};
use crate::consumer::health::HealthRegistry;
use crate::consumer::metadata::MetadataSource;
use crate::consumer::stats::Counters;
use crate::error::Error;
use crate::limits::Limits;
use crate::warnings::Aggregator;
use protection::ProtectionOptions;
use snapshot::AppSnapshot;

/// How long a view nobody follows keeps its watch before it stops.
pub const VIEW_RELEASE_GRACE: Duration = Duration::from_secs(10);

/// What one app's shared view routes to: registered and enabled instances plus the held
/// ones, by `{host}:{port}`.
#[derive(Debug, Default)]
pub(crate) struct Routable {
    /// The instances (shared with the view's own map when they are all it has).
    pub instances: Arc<Instances>,
    /// Whether some of them are held (by self-preservation or a wipe recovery).
    pub protection_active: bool,
    /// How many of them are held: their records left the registry.
    pub held: usize,
    /// The highest registry revision the app was listed at (`0`: none known).
    pub revision: i64,
}

/// What a source sends its view.
#[derive(Debug)]
pub(crate) enum SourceEvent {
    /// The apps of the mapping (all of them, as read).
    Apps(BTreeSet<String>),
    /// A fresh list of the app's instances.
    Reset(InstanceList),
    /// Changes to the app's instances, in order.
    Changes(Vec<InstanceChange>),
    /// The registry refused for good (credentials, permissions): the source stopped.
    Failed(Arc<Error>),
}

/// What a view sends the subscriptions that joined it.
#[derive(Clone, Debug)]
pub(crate) enum ViewUpdate {
    /// The apps of an interface's mapping.
    Apps(BTreeSet<String>),
    /// What an app's view routes to now (the protections applied).
    Instances(String, Arc<Routable>),
    /// The registry refused for good: the view stopped.
    Failed(Arc<Error>),
}

/// What a view follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ViewKey {
    /// An app's instances.
    App(String),
    /// An interface's mapping.
    Mapping(String),
}

/// What the views of one resolver need: the backend and what they tell or count.
pub(crate) struct ViewParts {
    pub backend: Backend,
    pub limits: Limits,
    pub protection: ProtectionOptions,
    pub health: Arc<HealthRegistry>,
    pub counters: Arc<Counters>,
    pub warnings: Arc<Aggregator>,
    /// Where the revisions seen in a first read start loading (see `early.rs`).
    pub metadata: Arc<MetadataSource>,
}

enum Command {
    Join(u64, mpsc::Sender<ViewUpdate>),
    /// An observer of an app's view: it gets an [`AppSnapshot`] after every update the view
    /// applies (latest wins), and keeps the view running like a member.
    Observe(u64, watch::Sender<Arc<AppSnapshot>>),
    Leave(u64),
    /// A subscription's snapshot of the app (see [`app::AppView::seed`]).
    Seed(Instances),
}

/// The running views, by what they follow.
#[derive(Default)]
struct Running {
    views: Mutex<HashMap<ViewKey, mpsc::UnboundedSender<Command>>>,
}

/// The views of one resolver. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Views {
    running: Arc<Running>,
    parts: Arc<ViewParts>,
}

/// A subscription's membership of one view; dropping it leaves the view.
#[derive(Debug)]
pub(crate) struct Membership {
    id: u64,
    commands: mpsc::UnboundedSender<Command>,
}

impl Membership {
    /// Hands the app's view a snapshot of its instances, the last known set until the
    /// registry is listed (see [`app::AppView::seed`]).
    pub fn seed(&self, instances: Instances) {
        let _ = self.commands.send(Command::Seed(instances));
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Leave(self.id));
    }
}

impl Views {
    /// No view runs yet.
    pub fn new(parts: ViewParts) -> Self {
        Views {
            running: Arc::default(),
            parts: Arc::new(parts),
        }
    }

    /// Joins subscription `id` to the view of `key` (starting the view if none runs): its
    /// updates go to `to`, starting with the view's current state.
    pub fn join(&self, key: ViewKey, id: u64, to: mpsc::Sender<ViewUpdate>) -> Membership {
        self.enter(key, id, move || Command::Join(id, to.clone()))
    }

    /// Observes the view of `app` as observer `id` (starting the view if none runs): the
    /// receiver holds the view's latest snapshot (an empty, unsynced one until the view
    /// has read the registry).
    pub fn observe(&self, app: &str, id: u64) -> (Membership, watch::Receiver<Arc<AppSnapshot>>) {
        let empty = AppSnapshot {
            app: app.to_owned(),
            ..AppSnapshot::default()
        };
        let (to, from) = watch::channel(Arc::new(empty));
        let membership = self.enter(ViewKey::App(app.to_owned()), id, move || {
            Command::Observe(id, to.clone())
        });
        (membership, from)
    }

    /// Hands the command `command` makes to the view of `key`, starting the view if none
    /// runs (or the running one is going away).
    fn enter(&self, key: ViewKey, id: u64, command: impl Fn() -> Command) -> Membership {
        let mut running = self.running.lock();
        if let Some(commands) = running.get(&key)
            && commands.send(command()).is_ok()
        {
            return Membership {
                id,
                commands: commands.clone(),
            };
        }
        let (commands, inbox) = mpsc::unbounded_channel();
        let _ = commands.send(command());
        running.insert(key.clone(), commands.clone());
        let span = match &key {
            ViewKey::App(app) => tracing::debug_span!("app_view", %app),
            ViewKey::Mapping(interface) => tracing::debug_span!("mapping_view", %interface),
        };
        let view = task::View::new(self.clone(), key, inbox);
        tokio::spawn(view.run().instrument(span));
        Membership { id, commands }
    }

    /// How many views run.
    pub fn len(&self) -> usize {
        self.running.lock().len()
    }
}

impl Running {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ViewKey, mpsc::UnboundedSender<Command>>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }
}
