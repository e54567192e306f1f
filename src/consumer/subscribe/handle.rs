//! The user's side of a subscription: the current set, its changes, health reports.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::consumer::balance::Discovery;
use crate::consumer::explain::Explanation;
use crate::consumer::health::{
    EndpointKey, HealthInput, HealthRegistry, Outcome, route_around_capped,
};
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::error::{Error, Result};
use crate::governance::migration::LevelChoice;
use crate::model::Endpoint;

/// What the handles and the task share.
pub(super) struct Shared {
    /// The subscription's id: its entry in the consumer record.
    pub(super) id: u64,
    pub(super) protection_active: AtomicBool,
    pub(super) serving_snapshot: AtomicBool,
    /// Why the subscription stopped following the registry, once it did.
    pub(super) ended: Mutex<Option<Arc<Error>>>,
    /// The resolver's health, which decides what is set aside.
    pub(super) health: Arc<HealthRegistry>,
    /// Where reported call outcomes are counted.
    pub(super) counters: Arc<Counters>,
    /// Why the set is empty, while it is.
    pub(super) why_empty: watch::Sender<Option<Arc<Explanation>>>,
    /// Which level the set comes from, and why.
    pub(super) level: watch::Sender<Arc<LevelChoice>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("protection_active", &self.protection_active)
            .field("serving_snapshot", &self.serving_snapshot)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The error that ended the subscription, as a value of its own.
    pub(super) fn ended(&self) -> Option<Error> {
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.as_deref().cloned()
    }

    /// Records why the subscription stopped following the registry.
    pub(super) fn end(&self, error: Arc<Error>) {
        *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
    }
}

/// A live subscription: the current endpoint set and its changes.
///
/// Cheap to clone; the subscription's task, and the watches it alone uses, stop when the
/// last clone is dropped.
#[derive(Clone, Debug)]
pub struct SubscriptionHandle {
    pub(super) subscription: Arc<Subscription>,
    pub(super) endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    pub(super) shared: Arc<Shared>,
}

impl SubscriptionHandle {
    /// Marks the current set as seen (the first set, before `subscribe` returns it).
    pub(super) fn seen(mut self) -> Self {
        self.endpoints.borrow_and_update();
        self
    }

    /// The subscription's id among the resolver's: its entry in the consumer record.
    pub(crate) fn id(&self) -> u64 {
        self.shared.id
    }

    /// What was subscribed to.
    pub fn subscription(&self) -> &Subscription {
        &self.subscription
    }

    /// The current endpoint set, sorted: every endpoint discovery finds for the
    /// subscription, whatever consumer-side health says of it. Health is a view of its own
    /// beside it: [`healthy`](Self::healthy), [`is_set_aside`](Self::is_set_aside).
    pub fn current(&self) -> Arc<Vec<Endpoint>> {
        self.endpoints.borrow().clone()
    }

    /// The current set as health leaves it: without the endpoints consumer-side health sets
    /// aside, as a balanced channel leaves them out of a call of no particular method:
    /// outliers within the cap, and all of them when that would leave none (panic mode; see
    /// [`route_around`](crate::consumer::route_around)). A method slow at one endpoint
    /// alone does not take the endpoint out of this set. Sorted.
    pub fn healthy(&self) -> Vec<Endpoint> {
        let current = self.current();
        let keys: Vec<EndpointKey> = current.iter().map(key_of).collect();
        let health = &self.shared.health;
        let standing = health.standing_of(&keys.iter().collect::<Vec<_>>());
        let members: Vec<usize> = (0..current.len()).collect();
        let mut kept = Vec::with_capacity(members.len());
        let cap = health.max_ejection_percent();
        route_around_capped(&members, |i| standing[i].for_path(""), cap, &mut kept);
        kept.into_iter().map(|i| current[i].clone()).collect()
    }

    /// A receiver that changes whenever consumer-side health sets an endpoint aside or
    /// brings one back (its value is a generation count): read
    /// [`healthy`](Self::healthy) or [`is_set_aside`](Self::is_set_aside) again then.
    pub fn health_watch(&self) -> watch::Receiver<u64> {
        self.shared.health.changes()
    }

    /// Waits for the next pushed endpoint set (one this handle has not seen) and returns it.
    ///
    /// Transient registry errors never surface here: the subscription retries them and
    /// keeps its set. It fails when the subscription has stopped following the registry:
    /// with the permanent error that ended it ([`Error::Unauthenticated`],
    /// [`Error::PermissionDenied`], see [`Error::is_permanent`]), after which the last set
    /// stays in [`current`](Self::current) and no more sets come; or with
    /// [`Error::Shutdown`] if its task is gone otherwise (the runtime shut down).
    pub async fn changed(&mut self) -> Result<Arc<Vec<Endpoint>>> {
        if self.endpoints.changed().await.is_err() {
            return Err(self.shared.ended().unwrap_or(Error::Shutdown));
        }
        Ok(self.endpoints.borrow_and_update().clone())
    }

    /// Why the subscription stopped following the registry, if it did: the permanent error
    /// [`changed`](Self::changed) returns. For `select!` loops over [`watch`](Self::watch),
    /// whose receiver reports the end as a closed channel.
    pub fn ended(&self) -> Option<Error> {
        self.shared.ended()
    }

    /// A receiver of endpoint sets, for use in `select!` loops. Its `changed()` fails once
    /// the subscription ends (see [`ended`](Self::ended)).
    pub fn watch(&self) -> watch::Receiver<Arc<Vec<Endpoint>>> {
        self.endpoints.clone()
    }

    /// The subscription's endpoint changes as a stream of tower `Change`s, keyed by
    /// dialable address, starting with the current set. See [`Discovery`].
    pub fn discover(&self) -> Discovery {
        Discovery::new(self.watch())
    }

    /// Why the current set is empty, while it is (`None` while it is not): no app mapped to
    /// the interface, no instances, or nothing exported that matches what was asked (with
    /// what is exported instead). A balanced channel over the subscription fails calls with
    /// these words meanwhile: at once, or, while the metadata of some instance is on its
    /// way ([`Explanation::awaits_metadata`]), once the call's wait for an endpoint ends.
    pub fn why_empty(&self) -> Option<Arc<Explanation>> {
        self.shared.why_empty.borrow().clone()
    }

    /// [`why_empty`](Self::why_empty) as it changes, for the balanced channel.
    pub(crate) fn why_empty_watch(&self) -> watch::Receiver<Option<Arc<Explanation>>> {
        self.shared.why_empty.subscribe()
    }

    /// Which level of discovery the current set comes from (the application level, or the
    /// interface level's provider URLs), with the step in force, where it comes from (the
    /// consumer's own or its app's migration rule), what each level holds, and a rule's
    /// move that waits or was refused. Its `Display` says it in one line.
    pub fn level(&self) -> Arc<LevelChoice> {
        self.shared.level.borrow().clone()
    }

    /// [`level`](Self::level) as it changes, for `select!` loops.
    pub fn level_watch(&self) -> watch::Receiver<Arc<LevelChoice>> {
        self.shared.level.subscribe()
    }

    /// Whether self-preservation holds removals of some app in the set
    /// [`current`](Self::current) returns: it changes with the set it describes, so a
    /// released hold reads inactive only once the released instances are gone from it.
    pub fn protection_active(&self) -> bool {
        self.shared.protection_active.load(Ordering::Relaxed)
    }

    /// Whether the set comes (in part) from the local snapshot because the registry has
    /// not been read since the start.
    pub fn serving_snapshot(&self) -> bool {
        self.shared.serving_snapshot.load(Ordering::Relaxed)
    }

    /// Whether consumer-side health sets `endpoint` aside: for failed calls, or because its
    /// instance is held by self-preservation and has not answered a probe yet. It stays in
    /// [`current`](Self::current); [`healthy`](Self::healthy) and balanced channels leave
    /// it out unless every endpoint is set aside.
    pub fn is_set_aside(&self, endpoint: &Endpoint) -> bool {
        self.shared.health.is_endpoint_aside(&key_of(endpoint))
    }

    /// Reports that a call to `endpoint` succeeded (resets its failure count; brings it
    /// back if it was set aside as unreachable: refused, failing, hung or held; not if it
    /// was ejected for its failure rate).
    pub fn report_success(&self, endpoint: &Endpoint) {
        self.report(endpoint, true);
    }

    /// Reports that a call to `endpoint` failed; after consecutive failures, or past the
    /// failure rate, its address is set aside and probed until it answers.
    pub fn report_failure(&self, endpoint: &Endpoint) {
        self.report(endpoint, false);
    }

    fn report(&self, endpoint: &Endpoint, ok: bool) {
        Counters::bump(&self.shared.counters.health_reports);
        let outcome = if ok {
            Outcome::Success
        } else {
            Outcome::Failure
        };
        self.shared.health.feed(HealthInput::Called {
            endpoint: &key_of(endpoint),
            outcome,
            answered: None,
        });
    }
}

/// How health knows `endpoint`.
pub(crate) fn key_of(endpoint: &Endpoint) -> EndpointKey {
    EndpointKey {
        address: endpoint.authority(),
        instance: endpoint.instance_authority(),
    }
}
