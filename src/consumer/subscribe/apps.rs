//! Which apps a subscription follows: the apps of its mapping (read through the mapping's
//! shared view) or of its `provided_by` list, each followed through the app's shared view.
//!
//! A mapping read naming more apps than [`crate::Limits::max_apps_per_mapping`] is not a
//! valid read: it is ignored with one aggregated warning, and the apps already known keep
//! their endpoints. An app leaves only when a valid mapping read no longer names it **and**
//! it has no routable instances, for [`APP_RELEASE_GRACE`]: a garbled mapping never strips
//! an app that serves, while the junk it named is released.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::task::Task;
use crate::consumer::stats::Counters;
use crate::consumer::views::{Routable, ViewKey};
use crate::model::ServiceInstance;
use crate::registry::Instances;

/// How long an app no valid mapping names, and without routable instances, is kept before
/// the subscription releases it (and its share of the app's watch).
pub const APP_RELEASE_GRACE: Duration = Duration::from_secs(30);

/// One app as a subscription follows it: what the app's shared view routes to (the view
/// applied self-preservation and the wipe recovery, once for the resolver), or what the
/// snapshot said until the view answers.
#[derive(Debug, Default)]
pub(super) struct AppState {
    routable: Arc<Routable>,
    /// Whether the app's view has answered (the store was listed).
    pub synced: bool,
}

impl AppState {
    /// Takes the view's routable set; returns whether it differs from the last one.
    pub fn update(&mut self, routable: Arc<Routable>) -> bool {
        self.synced = true;
        let changed = !Arc::ptr_eq(&self.routable, &routable);
        self.routable = routable;
        changed
    }

    /// Serves `instances` (from the snapshot) until the view answers.
    pub fn restore(&mut self, instances: Instances) {
        self.routable = Arc::new(Routable {
            instances,
            protection_active: false,
        });
    }

    /// Whether the view holds removals of this app.
    pub fn protection_active(&self) -> bool {
        self.routable.protection_active
    }

    /// The instances to route to.
    pub fn routable(&self) -> impl Iterator<Item = &Arc<ServiceInstance>> {
        self.routable.instances.values()
    }

    /// The instances to route to, with their addresses (`{host}:{port}`).
    pub fn routable_entries(&self) -> impl Iterator<Item = (&String, &Arc<ServiceInstance>)> {
        self.routable.instances.iter()
    }
}

impl Task {
    /// Joins the shared view of the subscription's mapping.
    pub(super) fn follow_mapping(&mut self) {
        let key = ViewKey::Mapping(self.subscription.interface.clone());
        let membership =
            self.context
                .views
                .join(&self.context, key, self.id, self.sources_tx.clone());
        self.mapping_view = Some(membership);
    }

    /// Adds an app and joins its shared view.
    pub(super) fn add_app(&mut self, app: String) {
        self.unmapped.remove(&app);
        if self.apps.contains_key(&app) {
            return;
        }
        self.apps.insert(app.clone(), AppState::default());
        let key = ViewKey::App(app.clone());
        let membership =
            self.context
                .views
                .join(&self.context, key, self.id, self.sources_tx.clone());
        self.app_views.insert(app, membership);
    }

    /// A read of the mapping: follows its apps, and marks the apps it no longer names.
    pub(super) fn on_mapping(&mut self, apps: BTreeSet<String>, now: Instant) {
        self.mapping_known = true;
        self.mapping_from_store = true;
        let limit = self.context.limits.max_apps_per_mapping;
        if apps.len() > limit {
            Counters::bump(&self.context.counters.oversized_mappings);
            let interface = &self.subscription.interface;
            let cause = format!("mapping over the app limit: {interface}");
            if let Some(suppressed) = self.context.warnings.allow(&cause, now) {
                tracing::warn!(
                    %interface,
                    apps = apps.len(),
                    limit,
                    suppressed,
                    "mapping names more apps than the limit; ignored, known apps keep their endpoints"
                );
            }
            return;
        }
        for app in self.apps.keys() {
            if !apps.contains(app) {
                self.unmapped.entry(app.clone()).or_insert(now);
            }
        }
        for app in apps {
            self.add_app(app);
        }
    }

    /// Releases the apps no valid mapping names whose grace ended while they have no
    /// routable instances.
    pub(super) fn release_unmapped(&mut self, now: Instant) {
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
        for app in due {
            tracing::debug!(%app, "app left the mapping and has no instances; released");
            Counters::bump(&self.context.counters.released_apps);
            self.unmapped.remove(&app);
            self.apps.remove(&app);
            self.app_views.remove(&app);
            self.by_instance.remove(&app);
            self.dirty = true;
        }
    }

    /// When the next unmapped app's grace ends (those whose grace already ended wait for
    /// their instances to go, which wakes the task anyway).
    pub(super) fn next_unmapped_release(&self, now: Instant) -> Option<Instant> {
        self.unmapped
            .values()
            .map(|since| *since + APP_RELEASE_GRACE)
            .filter(|at| *at > now)
            .min()
    }
}
