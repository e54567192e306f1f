//! What the console follows: every app the registry lists, each through the resolver's own
//! follow of its shared view ([`Resolver::follow_app`]), with a short change log per app,
//! and the events that carry each change to the open pages.
//!
//! Memory stays bounded: one snapshot per app (shared with the view), a first-seen time per
//! instance, [`LOG_LEN`] log entries per app, [`EVENT_BUFFER`] events for slow pages (a page
//! further behind is told to read again).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use introspect::ServiceInstance;
use introspect::consumer::{AppFollow, AppSnapshot, Resolver};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

use super::ConsoleOptions;
use super::audit::Audit;

/// Log entries kept per app.
pub const LOG_LEN: usize = 50;
/// Events buffered for a page that reads slowly.
pub const EVENT_BUFFER: usize = 256;
/// Holds listed in an app's summary (the count is always exact).
const SUMMARY_HOLDS: usize = 100;
/// Changes carried by one event (the rest are counted).
const EVENT_CHANGES: usize = 20;

/// One event for the pages: its SSE name (`app`, `removed`, `apps`, `consumers`) and JSON
/// data.
#[derive(Debug)]
pub struct Event {
    /// The SSE event name.
    pub name: &'static str,
    /// The JSON data.
    pub data: String,
}

/// One change the console saw.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What: `registered`, `left`, `stopped`, `disabled`, `enabled`, `revision`, `held`,
    /// `released`, `returned`, `set-aside`, `back`, `listed`, `failed`.
    pub kind: &'static str,
    /// The instance's `{host}:{port}` (empty for the whole app).
    pub address: String,
    /// More about it (a revision, a cause, a count).
    pub detail: String,
}

impl LogEntry {
    /// As JSON.
    pub fn to_json(&self) -> Value {
        json!({"at_ms": self.at_ms, "kind": self.kind, "address": self.address, "detail": self.detail})
    }
}

/// What the console holds of one app.
pub struct AppEntry {
    /// The view's latest snapshot.
    pub snapshot: Arc<AppSnapshot>,
    /// The addresses health sets aside.
    pub aside: BTreeSet<String>,
    /// When the console first saw each instance (ms since the epoch), and whether that was
    /// its first read (the instance may be older).
    pub seen: HashMap<String, (u64, bool)>,
    /// The latest changes, oldest first.
    pub log: VecDeque<LogEntry>,
    follow: AbortHandle,
}

/// The console's picture of the fleet.
pub struct Fleet {
    /// The resolver everything is read through.
    pub resolver: Resolver,
    /// The registered consumers and how their sets compare.
    pub audit: Audit,
    state: Mutex<State>,
    events: broadcast::Sender<Arc<Event>>,
    /// Set when the console stops: open event streams end.
    stopped: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    apps: BTreeMap<String, AppEntry>,
    /// Why the last look for apps failed, if it did.
    discover_error: Option<String>,
}

/// Stops following when dropped.
pub struct Running {
    fleet: Arc<Fleet>,
    discover: AbortHandle,
    audit: AbortHandle,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.discover.abort();
        self.audit.abort();
        self.fleet.stopped.send_replace(true);
        for entry in self.fleet.lock().apps.values() {
            entry.follow.abort();
        }
    }
}

impl Fleet {
    /// Starts looking for apps every `discover_every` and following each one found, and
    /// auditing the consumers every `audit_every`.
    pub fn start(resolver: Resolver, options: &ConsoleOptions) -> (Arc<Fleet>, Running) {
        let fleet = Arc::new(Fleet {
            resolver,
            audit: Audit::new(options.stale_after),
            state: Mutex::default(),
            events: broadcast::channel(EVENT_BUFFER).0,
            stopped: watch::channel(false).0,
        });
        let discover = tokio::spawn(discover(Arc::downgrade(&fleet), options.discover_every));
        let audit = tokio::spawn(audit_rounds(Arc::downgrade(&fleet), options.audit_every));
        let running = Running {
            fleet: fleet.clone(),
            discover: discover.abort_handle(),
            audit: audit.abort_handle(),
        };
        (fleet, running)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver of the events to come.
    pub fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// A receiver whose value turns true when the console stops.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// Every app's summary, and why the last look for apps failed, if it did.
    pub fn summaries(&self) -> (Vec<Value>, Option<String>) {
        let state = self.lock();
        let apps = state.apps.iter().map(|(a, e)| summary(a, e)).collect();
        (apps, state.discover_error.clone())
    }

    /// Reads one app's entry under the lock.
    pub fn with_app<T>(&self, app: &str, read: impl FnOnce(&AppEntry) -> T) -> Option<T> {
        self.lock().apps.get(app).map(read)
    }

    /// Sends an event to the open pages.
    pub fn send(&self, name: &'static str, mut data: Value) {
        super::bounded::clip(&mut data);
        let _ = self.events.send(Arc::new(Event {
            name,
            data: data.to_string(),
        }));
    }

    /// Starts following `app` unless it is followed already (a follow that failed is
    /// started again).
    fn follow(self: &Arc<Self>, app: &str) {
        let followed = self
            .lock()
            .apps
            .get(app)
            .map(|e| e.snapshot.failed.is_none());
        if followed == Some(true) {
            return;
        }
        let follow = match self.resolver.follow_app(app) {
            Ok(follow) => follow,
            Err(error) => {
                tracing::warn!(app = %app.escape_debug(), %error, "app not followed");
                return;
            }
        };
        let task = tokio::spawn(follow_app(Arc::downgrade(self), follow));
        let mut state = self.lock();
        match state.apps.get_mut(app) {
            // Again after a failure: the log and the first-seen times stay.
            Some(entry) => {
                entry.snapshot = Arc::new(AppSnapshot::default());
                entry.follow = task.abort_handle();
            }
            None => {
                let entry = AppEntry {
                    snapshot: Arc::new(AppSnapshot::default()),
                    aside: BTreeSet::new(),
                    seen: HashMap::new(),
                    log: VecDeque::new(),
                    follow: task.abort_handle(),
                };
                state.apps.insert(app.to_owned(), entry);
            }
        }
    }

    /// Takes in a new snapshot of `app` and what health sets aside: logs what changed,
    /// tells the pages.
    fn update(&self, snapshot: Arc<AppSnapshot>, aside: BTreeSet<String>) {
        let app = snapshot.app.clone();
        let now = now_ms();
        let event = {
            let mut state = self.lock();
            let Some(entry) = state.apps.get_mut(&app) else {
                return;
            };
            // Health changes wake every follow; most leave this app as it was.
            if Arc::ptr_eq(&entry.snapshot, &snapshot) && entry.aside == aside {
                return;
            }
            let changes = changes(&entry.snapshot, &snapshot, &entry.aside, &aside, now);
            let first = !entry.snapshot.synced && snapshot.synced;
            for address in snapshot.registered.keys() {
                entry.seen.entry(address.clone()).or_insert((now, first));
            }
            entry.seen.retain(|a, _| {
                snapshot.registered.contains_key(a)
                    || snapshot.holds.iter().any(|h| &h.address == a)
            });
            for change in &changes {
                if entry.log.len() == LOG_LEN {
                    entry.log.pop_front();
                }
                entry.log.push_back(change.clone());
            }
            entry.snapshot = snapshot;
            entry.aside = aside;
            let carried: Vec<Value> = changes
                .iter()
                .take(EVENT_CHANGES)
                .map(LogEntry::to_json)
                .collect();
            json!({
                "app": app,
                "summary": summary(&app, entry),
                "changes": carried,
                "more_changes": changes.len().saturating_sub(EVENT_CHANGES),
            })
        };
        self.send("app", event);
    }

    /// Forgets the apps the registry no longer lists that hold nothing; follows new ones.
    fn discovered(self: &Arc<Self>, apps: Result<BTreeSet<String>, String>) {
        let apps = match apps {
            Ok(apps) => apps,
            Err(error) => {
                let mut state = self.lock();
                if state.discover_error.as_ref() != Some(&error) {
                    state.discover_error = Some(error.clone());
                    drop(state);
                    self.send("apps", json!({"error": error}));
                }
                return;
            }
        };
        let gone: Vec<String> = {
            let mut state = self.lock();
            let recovered = state.discover_error.take().is_some();
            let gone: Vec<String> = state
                .apps
                .iter()
                .filter(|(app, e)| {
                    !apps.contains(*app)
                        && e.snapshot.registered.is_empty()
                        && e.snapshot.holds.is_empty()
                })
                .map(|(app, _)| app.clone())
                .collect();
            for app in &gone {
                if let Some(entry) = state.apps.remove(app) {
                    entry.follow.abort();
                }
            }
            if recovered {
                drop(state);
                self.send("apps", json!({"error": null}));
            }
            gone
        };
        for app in gone {
            self.send("removed", json!({"app": app}));
        }
        for app in &apps {
            self.follow(app);
        }
    }
}

/// Looks for apps every `every`, as long as the fleet exists.
async fn discover(fleet: Weak<Fleet>, every: Duration) {
    loop {
        let Some(strong) = fleet.upgrade() else {
            return;
        };
        let apps = strong
            .resolver
            .list_apps()
            .await
            .map(|apps| apps.into_keys().collect())
            .map_err(|e| e.to_string());
        strong.discovered(apps);
        drop(strong);
        tokio::time::sleep(every).await;
    }
}

/// Feeds one app's follow into the fleet until the follow ends or the fleet goes.
async fn follow_app(fleet: Weak<Fleet>, mut follow: AppFollow) {
    loop {
        let snapshot = follow.current();
        let aside = set_aside(&follow, &snapshot);
        let Some(strong) = fleet.upgrade() else {
            return;
        };
        strong.update(snapshot, aside);
        drop(strong);
        if let Err(error) = follow.changed().await {
            if let Some(strong) = fleet.upgrade() {
                // The last snapshot carries the failure: the next look for apps follows
                // the app again.
                let last = follow.current();
                let aside = set_aside(&follow, &last);
                strong.update(last, aside);
                let failed = LogEntry {
                    at_ms: now_ms(),
                    kind: "failed",
                    address: String::new(),
                    detail: error.to_string(),
                };
                let app = follow.app().to_owned();
                if let Some(entry) = strong.lock().apps.get_mut(&app) {
                    entry.log.push_back(failed);
                    if entry.log.len() > LOG_LEN {
                        entry.log.pop_front();
                    }
                }
                strong.send("app", json!({"app": app, "failed": error.to_string()}));
            }
            return;
        }
    }
}

/// The addresses of `snapshot` (registered or held) that health sets aside.
fn set_aside(follow: &AppFollow, snapshot: &AppSnapshot) -> BTreeSet<String> {
    let registered = snapshot.registered.iter();
    let held = snapshot.holds.iter().map(|h| (&h.address, &h.instance));
    registered
        .chain(held)
        .filter(|(_, i)| follow.is_set_aside(i))
        .map(|(a, _)| a.clone())
        .collect()
}

/// What changed from `before` to `after`, as log entries.
fn changes(
    before: &AppSnapshot,
    after: &AppSnapshot,
    aside_before: &BTreeSet<String>,
    aside_after: &BTreeSet<String>,
    now: u64,
) -> Vec<LogEntry> {
    let entry = |kind, address: &str, detail: String| LogEntry {
        at_ms: now,
        kind,
        address: address.to_owned(),
        detail,
    };
    let mut log = Vec::new();
    if !before.synced {
        if after.synced {
            log.push(entry(
                "listed",
                "",
                format!("{} instances", after.registered.len()),
            ));
        }
        return log;
    }
    let held_before: HashMap<&str, _> = before
        .holds
        .iter()
        .map(|h| (h.address.as_str(), h))
        .collect();
    let held_after: HashMap<&str, _> = after
        .holds
        .iter()
        .map(|h| (h.address.as_str(), h))
        .collect();
    for (address, instance) in &after.registered {
        match before.registered.get(address) {
            None if held_before.contains_key(address.as_str()) => {
                log.push(entry("returned", address, instance.revision().to_owned()));
            }
            None => log.push(entry("registered", address, instance.revision().to_owned())),
            Some(was) => {
                if was.revision() != instance.revision() {
                    log.push(entry(
                        "revision",
                        address,
                        format!("{} -> {}", was.revision(), instance.revision()),
                    ));
                }
                if was.accepts_calls() != instance.accepts_calls() {
                    let kind = if instance.accepts_calls() {
                        "enabled"
                    } else {
                        "disabled"
                    };
                    log.push(entry(kind, address, state_of(instance)));
                }
            }
        }
    }
    for (address, was) in &before.registered {
        if after.registered.contains_key(address) {
            continue;
        }
        match held_after.get(address.as_str()) {
            Some(hold) => log.push(entry("held", address, hold.cause.as_str().to_owned())),
            None if !was.accepts_calls() => log.push(entry("stopped", address, state_of(was))),
            None => log.push(entry("left", address, "expired or deleted".to_owned())),
        }
    }
    for address in held_before.keys() {
        if !held_after.contains_key(address) && !after.registered.contains_key(*address) {
            log.push(entry("released", address, "hold ended".to_owned()));
        }
    }
    for address in aside_after.difference(aside_before) {
        log.push(entry(
            "set-aside",
            address,
            "probed until it answers".to_owned(),
        ));
    }
    for address in aside_before.difference(aside_after) {
        let present =
            after.registered.contains_key(address) || held_after.contains_key(address.as_str());
        if present {
            log.push(entry("back", address, "answers again".to_owned()));
        }
    }
    log
}

fn state_of(instance: &ServiceInstance) -> String {
    if instance.is_stopping() {
        "stopping".to_owned()
    } else if instance.enabled {
        "enabled".to_owned()
    } else {
        "disabled".to_owned()
    }
}

/// One app's line on the apps page.
pub fn summary(app: &str, entry: &AppEntry) -> Value {
    let snapshot = &entry.snapshot;
    let total = snapshot.registered.len();
    let mut revisions: BTreeMap<&str, usize> = BTreeMap::new();
    for instance in snapshot.registered.values() {
        *revisions.entry(instance.revision()).or_default() += 1;
    }
    let mut revisions: Vec<(&str, usize)> = revisions.into_iter().collect();
    revisions.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let disabled = snapshot
        .registered
        .values()
        .filter(|i| !i.accepts_calls())
        .count();
    json!({
        "app": app,
        "synced": snapshot.synced,
        "instances": total,
        "revisions": revisions.iter().map(|(r, n)| json!({
            "revision": r, "instances": n, "share": share(*n, total),
        })).collect::<Vec<_>>(),
        "disabled": disabled,
        "held": snapshot.holds.len(),
        "set_aside": entry.aside.len(),
        "protection_active": snapshot.protection_active,
        "holds": holds_json(snapshot, SUMMARY_HOLDS),
        "failed": snapshot.failed.as_ref().map(|e| e.to_string()),
    })
}

/// Up to `max` holds as JSON, with the milliseconds left.
pub fn holds_json(snapshot: &AppSnapshot, max: usize) -> Vec<Value> {
    snapshot
        .holds
        .iter()
        .take(max)
        .map(|h| {
            json!({
                "address": h.address,
                "revision": h.instance.revision(),
                "cause": h.cause.as_str(),
                "ends_in_ms": h.time_left().as_millis() as u64,
            })
        })
        .collect()
}

/// `part` of `total` as a share in 0..=1, rounded to 4 places.
pub fn share(part: usize, total: usize) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (part as f64 / total as f64 * 10_000.0).round() / 10_000.0
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Audits every `every` while the fleet lives; tells the pages when something changed.
async fn audit_rounds(fleet: Weak<Fleet>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(fleet) = fleet.upgrade() else {
            return;
        };
        if fleet.audit.round(&fleet.resolver).await {
            let summary = fleet.audit.rows(|_| true, 0);
            fleet.send(
                "consumers",
                json!({
                    "total": summary["total"],
                    "stale": summary["stale"],
                    "older_rules": summary["older_rules"],
                }),
            );
        }
    }
}
