//! Which apps a subscription follows: the apps of its mapping (read through the mapping's
//! shared view) or of its `provided_by` list, each followed through the app's shared view.
//!
//! A mapping read naming more apps than [`crate::Limits::max_apps_per_mapping`] is not a
//! valid read: it is ignored with one aggregated warning, and the apps already known keep
//! their endpoints. An app leaves only when a valid mapping read no longer names it **and**
//! it has no routable instances, for [`APP_RELEASE_GRACE`]: a garbled mapping never strips
//! an app that serves, while the junk it named is released.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::backend::Instances;
use crate::consumer::metadata::AppRevisions;
use crate::consumer::views::{Membership, Routable, ViewKey, ViewUpdate, Views};
use crate::model::ServiceInstance;

/// How long an app no valid mapping names, and without routable instances, is kept before
/// the subscription releases it (and its share of the app's watch).
pub const APP_RELEASE_GRACE: Duration = Duration::from_secs(30);

/// One app as a subscription follows it: what the app's shared view routes to (the view
/// applied self-preservation and the wipe recovery, once for the resolver), or what the
/// snapshot said until the view answers.
#[derive(Debug, Default)]
pub(super) struct AppState {
    routable: Arc<Routable>,
    /// The revisions of the routable instances (`0` left out), sorted: worked out at the
    /// first wake after the set changed (`None` until then), read at every wake.
    revisions: Option<Vec<String>>,
    /// Whether the app's view has answered (the registry was listed).
    pub synced: bool,
}

impl AppState {
    /// Takes the view's routable set; returns whether it differs from the last one.
    pub fn update(&mut self, routable: Arc<Routable>) -> bool {
        self.synced = true;
        let changed = !Arc::ptr_eq(&self.routable, &routable);
        self.routable = routable;
        if changed {
            self.revisions = None;
        }
        changed
    }

    /// Serves `instances` (from the snapshot) until the view answers.
    pub fn restore(&mut self, instances: Instances) {
        self.revisions = None;
        self.routable = Arc::new(Routable {
            instances: Arc::new(instances),
            protection_active: false,
            held: 0,
            revision: 0,
        });
    }

    /// Whether the view holds removals of this app.
    pub fn protection_active(&self) -> bool {
        self.routable.protection_active
    }

    /// Whether every instance to route to is held (none is registered), and there is one.
    pub fn held_only(&self) -> bool {
        self.routable.held > 0 && self.routable.held >= self.routable.instances.len()
    }

    /// The instances to route to.
    pub fn routable(&self) -> impl Iterator<Item = &Arc<ServiceInstance>> {
        self.routable.instances.values()
    }

    /// The revisions of the instances to route to (`0` left out), each once, sorted, as
    /// the last [`Self::members_of_due`] found them.
    pub fn revisions(&self) -> impl Iterator<Item = &str> {
        self.revisions.iter().flatten().map(String::as_str)
    }

    /// The routable set as the app's view sent it (or the snapshot restored it).
    pub fn routable_set(&self) -> &Arc<Routable> {
        &self.routable
    }

    /// Works out the revisions when the set changed, and returns the members of each
    /// revision `due` says a fetch starts for: one walk over the set for both (a cold
    /// start walks a set of thousands once, not once per question), and none when the
    /// revisions are known and none is due.
    pub fn members_of_due(
        &mut self,
        due: impl Fn(&str) -> bool,
    ) -> Vec<(String, Vec<Arc<ServiceInstance>>)> {
        if let Some(known) = &self.revisions
            && !known.iter().any(|revision| due(revision))
        {
            return Vec::new();
        }
        // Hashed, then the few distinct revisions sorted: a tree compares each instance's
        // 64-character revision with several others.
        let mut seen: HashMap<&str, Option<Vec<Arc<ServiceInstance>>>> = HashMap::new();
        for instance in self.routable.instances.values() {
            let revision = instance.revision();
            if revision == crate::model::EMPTY_REVISION {
                continue;
            }
            let members = seen
                .entry(revision)
                .or_insert_with(|| due(revision).then(Vec::new));
            if let Some(members) = members {
                members.push(Arc::clone(instance));
            }
        }
        let mut revisions: Vec<String> = seen.keys().map(|r| (*r).to_owned()).collect();
        revisions.sort_unstable();
        let mut starting: Vec<_> = seen
            .into_iter()
            .filter_map(|(revision, members)| Some((revision.to_owned(), members?)))
            .collect();
        starting.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.revisions = Some(revisions);
        starting
    }
}

/// What a mapping read did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum MappingRead {
    /// Taken: new apps are followed, missing ones marked.
    Taken,
    /// Ignored: it named more apps than the limit.
    Oversized,
}

/// The apps of one subscription and its memberships of their views.
pub(super) struct Following {
    views: Views,
    /// The subscription's id, as views know it.
    id: u64,
    /// Where its views send their updates.
    to: mpsc::Sender<ViewUpdate>,
    /// Its membership of its mapping's view; dropping it leaves.
    mapping_view: Option<Membership>,
    /// Its memberships of its apps' views.
    app_views: HashMap<String, Membership>,
    /// Apps a valid mapping no longer names, since when.
    unmapped: HashMap<String, Instant>,
    /// The apps followed.
    pub apps: BTreeMap<String, AppState>,
    /// Whether the apps are known (from the registry, the subscription or the snapshot).
    pub mapping_known: bool,
    /// Whether the apps are known from the registry or the subscription.
    pub mapping_from_store: bool,
}

impl Following {
    /// Follows nothing yet; views send to `to`.
    pub fn new(views: Views, id: u64, to: mpsc::Sender<ViewUpdate>) -> Self {
        Following {
            views,
            id,
            to,
            mapping_view: None,
            app_views: HashMap::new(),
            unmapped: HashMap::new(),
            apps: BTreeMap::new(),
            mapping_known: false,
            mapping_from_store: false,
        }
    }

    /// Joins the shared view of `interface`'s mapping.
    pub fn follow_mapping(&mut self, interface: &str) {
        let key = ViewKey::Mapping(interface.to_owned());
        self.mapping_view = Some(self.views.join(key, self.id, self.to.clone()));
    }

    /// Follows `apps` without a mapping (a `provided_by` list).
    pub fn follow_apps(&mut self, apps: &[String]) {
        for app in apps {
            self.add_app(app.clone());
        }
        self.mapping_known = true;
        self.mapping_from_store = true;
    }

    /// Adds an app and joins its shared view.
    pub fn add_app(&mut self, app: String) {
        self.unmapped.remove(&app);
        if self.apps.contains_key(&app) {
            return;
        }
        self.apps.insert(app.clone(), AppState::default());
        let key = ViewKey::App(app.clone());
        let membership = self.views.join(key, self.id, self.to.clone());
        self.app_views.insert(app, membership);
    }

    /// A read of the mapping: follows its apps, and marks the apps it no longer names,
    /// unless it names more than `limit` apps.
    pub fn on_mapping(
        &mut self,
        apps: BTreeSet<String>,
        limit: usize,
        now: Instant,
    ) -> MappingRead {
        self.mapping_known = true;
        self.mapping_from_store = true;
        if apps.len() > limit {
            return MappingRead::Oversized;
        }
        for app in self.apps.keys() {
            if !apps.contains(app) {
                self.unmapped.entry(app.clone()).or_insert(now);
            }
        }
        for app in apps {
            self.add_app(app);
        }
        MappingRead::Taken
    }

    /// Serves `instances` (from the snapshot) for `app` until its view answers, and hands
    /// them to the view as the last known set (a first list that misses them is their
    /// expiry, not a silent reset). Nothing happens once the view has answered.
    pub fn restore_app(&mut self, app: &str, instances: Instances) {
        let Some(state) = self.apps.get_mut(app).filter(|s| !s.synced) else {
            return;
        };
        if let Some(view) = self.app_views.get(app) {
            view.seed(instances.clone());
        }
        state.restore(instances);
    }

    /// A view's routable set; returns whether it changed what the subscription routes to.
    pub fn on_view(&mut self, app: &str, routable: Arc<Routable>) -> bool {
        self.apps
            .get_mut(app)
            .is_some_and(|state| state.update(routable))
    }

    /// Releases the apps no valid mapping names whose grace ended while they have no
    /// routable instances; returns them.
    pub fn release_unmapped(&mut self, now: Instant) -> Vec<String> {
        let due: Vec<String> = self
            .unmapped
            .iter()
            .filter(|(app, since)| {
                now >= **since + APP_RELEASE_GRACE
                    && self
                        .apps
                        .get(*app)
                        .is_none_or(|view| view.routable().next().is_none())
            })
            .map(|(app, _)| app.clone())
            .collect();
        for app in &due {
            tracing::debug!(%app, "app left the mapping and has no instances; released");
            self.unmapped.remove(app);
            self.apps.remove(app);
            self.app_views.remove(app);
        }
        due
    }

    /// When the next unmapped app's grace ends (those whose grace already ended wait for
    /// their instances to go, which wakes the task anyway).
    pub fn next_release(&self, now: Instant) -> Option<Instant> {
        self.unmapped
            .values()
            .map(|since| *since + APP_RELEASE_GRACE)
            .filter(|at| *at > now)
            .min()
    }

    /// Whether the apps are known and every app listed.
    pub fn store_read(&self) -> bool {
        self.mapping_known && self.apps.values().all(|v| v.synced)
    }

    /// Whether everything comes from the registry (not from the snapshot).
    pub fn live(&self) -> bool {
        self.mapping_from_store && self.apps.values().all(|v| v.synced)
    }

    /// Whether some app's view holds removals.
    pub fn protection_active(&self) -> bool {
        self.apps.values().any(AppState::protection_active)
    }

    /// The highest registry revision any of its apps was listed at (`0`: none known).
    pub fn position(&self) -> i64 {
        self.apps
            .values()
            .map(|v| v.routable.revision)
            .max()
            .unwrap_or(0)
    }

    /// Routable instances per app.
    pub fn instances_per_app(&self) -> BTreeMap<String, u64> {
        self.apps
            .iter()
            .map(|(app, view)| (app.clone(), view.routable().count() as u64))
            .collect()
    }
}

impl AppRevisions for AppState {
    fn revisions(&self) -> impl Iterator<Item = &str> {
        AppState::revisions(self)
    }

    fn members_of_due(
        &mut self,
        due: impl Fn(&str) -> bool,
    ) -> Vec<(String, Vec<Arc<ServiceInstance>>)> {
        AppState::members_of_due(self, due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::keys;

    fn routable(revisions: &[&str]) -> Arc<Routable> {
        let instances: Instances = revisions
            .iter()
            .enumerate()
            .map(|(port, revision)| {
                let mut i = ServiceInstance::new("shop", "10.0.0.1", port as u16 + 1);
                i.metadata.insert(keys::REVISION.into(), (*revision).into());
                (i.key_address(), Arc::new(i))
            })
            .collect();
        Arc::new(Routable {
            instances: Arc::new(instances),
            protection_active: false,
            held: 0,
            revision: 0,
        })
    }

    fn ports(members: &[Arc<ServiceInstance>]) -> Vec<u16> {
        members.iter().map(|i| i.port).collect()
    }

    #[test]
    fn one_walk_finds_the_revisions_and_the_members_of_the_due_ones() {
        let mut app = AppState::default();
        assert!(app.update(routable(&["b", "a", "0", "b", "c"])));
        let starting = app.members_of_due(|revision| revision != "c");
        let found: Vec<(&str, Vec<u16>)> = starting
            .iter()
            .map(|(revision, members)| (revision.as_str(), ports(members)))
            .collect();
        assert_eq!(found, [("a", vec![2]), ("b", vec![1, 4])]);
        assert_eq!(app.revisions().collect::<Vec<_>>(), ["a", "b", "c"]);
        // Known revisions, none due: nothing to start.
        assert!(app.members_of_due(|_| false).is_empty());
        assert_eq!(app.revisions().collect::<Vec<_>>(), ["a", "b", "c"]);
        // A retry due later: its members, from the same set.
        let retry = app.members_of_due(|revision| revision == "c");
        assert_eq!(retry.len(), 1);
        assert_eq!((retry[0].0.as_str(), ports(&retry[0].1)), ("c", vec![5]));
        // A new set: its revisions are worked out afresh.
        app.update(routable(&["d", "0"]));
        assert!(app.members_of_due(|_| false).is_empty());
        assert_eq!(app.revisions().collect::<Vec<_>>(), ["d"]);
    }
}
