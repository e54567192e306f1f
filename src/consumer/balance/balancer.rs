//! The balancer under the channel's buffer: for each call, the routing stage's subset
//! (`consumer/routing`: static tags, disabled providers), then health (set-aside endpoints
//! left out, panic mode when every routed one is), then a weighted, load-aware pick.
//!
//! It takes its endpoints from the feeder as [`Update`]s: an address joins with its
//! service and what it says for routing, is rerouted when a new revision changes that
//! (no new connection), and leaves. Routed subsets are cached per distinct call tag until
//! the endpoints change; health is read once per change of health, not per call.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::FutureExt as _;
use rand::SeedableRng as _;
use rand::rngs::SmallRng;
use tokio::sync::{mpsc, watch};
use tower::{BoxError, Service, ServiceExt as _};

use super::{BoxedFuture, Marked, Request};
use crate::consumer::health::{EndpointKey, HealthRegistry};
use crate::consumer::routing::{
    CallTag, RouteParams, TagSelection, effective_weight, pick, select_by_tag,
};
use crate::consumer::stats::Counters;
use crate::model::Authority;

/// A change of the balancer's endpoints, from the feeder.
pub(super) enum Update {
    /// `address` joins (or is replaced), called through `service`.
    Insert {
        address: Authority,
        key: EndpointKey,
        service: Marked,
        route: Arc<RouteParams>,
    },
    /// What `address` says for routing changed (a new revision at the same address).
    Reroute(Authority, Arc<RouteParams>),
    /// `address` leaves.
    Remove(Authority),
}

/// One endpoint of the balancer.
struct Slot {
    address: Authority,
    key: EndpointKey,
    service: Marked,
    route: Arc<RouteParams>,
    /// Calls handed to it and not yet answered: the load measure.
    in_flight: Arc<AtomicUsize>,
}

/// The endpoints one call tag may go to.
struct Routed {
    /// Indices into the slots.
    indices: Vec<usize>,
    selection: TagSelection,
    /// How many routed endpoints are disabled (left out before the tag).
    disabled: usize,
}

/// See the module docs.
pub(super) struct Balancer {
    updates: mpsc::Receiver<Update>,
    slots: Vec<Slot>,
    /// The consumer's own tag, for calls that carry none.
    default_tag: CallTag,
    health: Arc<HealthRegistry>,
    health_changes: watch::Receiver<u64>,
    counters: Arc<Counters>,
    /// Routed subsets per call tag, until the endpoints change.
    routed: HashMap<CallTag, Arc<Routed>>,
    /// Whether each slot is set aside, as of the last change of health or endpoints.
    aside: Vec<bool>,
    aside_stale: bool,
    /// Whether the last call went to set-aside endpoints only.
    panic: bool,
    rng: SmallRng,
    /// Scratch space of one pick.
    candidates: Vec<usize>,
    weights: Vec<u32>,
    loads: Vec<usize>,
}

impl Balancer {
    pub fn new(
        updates: mpsc::Receiver<Update>,
        default_tag: CallTag,
        health: Arc<HealthRegistry>,
        counters: Arc<Counters>,
    ) -> Self {
        Balancer {
            updates,
            slots: Vec::new(),
            default_tag,
            health_changes: health.changes(),
            health,
            counters,
            routed: HashMap::new(),
            aside: Vec::new(),
            aside_stale: true,
            panic: false,
            rng: SmallRng::from_os_rng(),
            candidates: Vec::new(),
            weights: Vec::new(),
            loads: Vec::new(),
        }
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Insert {
                address,
                key,
                service,
                route,
            } => {
                let slot = Slot {
                    address,
                    key,
                    service,
                    route,
                    in_flight: Arc::default(),
                };
                match self.slots.iter().position(|s| s.address == slot.address) {
                    Some(i) => self.slots[i] = slot,
                    None => self.slots.push(slot),
                }
            }
            Update::Reroute(address, route) => {
                if let Some(slot) = self.slots.iter_mut().find(|s| s.address == address) {
                    slot.route = route;
                }
            }
            Update::Remove(address) => self.slots.retain(|s| s.address != address),
        }
        self.routed.clear();
        self.aside_stale = true;
    }

    /// The endpoints a call tagged `tag` may go to (cached).
    fn routed(&mut self, tag: &CallTag) -> Arc<Routed> {
        if let Some(routed) = self.routed.get(tag) {
            return routed.clone();
        }
        let enabled: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].route.enabled)
            .collect();
        let tags = enabled.iter().map(|&i| self.slots[i].route.tag.as_deref());
        let (kept, selection) = select_by_tag(tag, tags);
        let routed = Arc::new(Routed {
            indices: kept.into_iter().map(|k| enabled[k]).collect(),
            selection,
            disabled: self.slots.len() - enabled.len(),
        });
        // A bounded cache: request tags are the callers' own values.
        if self.routed.len() >= 64 {
            self.routed.clear();
        }
        self.routed.insert(tag.clone(), routed.clone());
        routed
    }

    /// Reads which endpoints health sets aside, when health or the endpoints changed.
    fn refresh_health(&mut self) {
        let changed = self.health_changes.has_changed().unwrap_or(false);
        if !changed && !self.aside_stale {
            return;
        }
        self.health_changes.borrow_and_update();
        let keys: Vec<&EndpointKey> = self.slots.iter().map(|s| &s.key).collect();
        self.aside = self.health.aside_of(&keys);
        self.aside_stale = false;
    }

    /// Why a call tagged `tag` has no endpoint to go to.
    fn why_none(&self, tag: &CallTag, routed: &Routed) -> String {
        let total = self.slots.len();
        let disabled = match routed.disabled {
            0 => String::new(),
            n => format!(", {n} of them disabled"),
        };
        let tag = tag.tag.as_deref().unwrap_or_default();
        match routed.selection {
            TagSelection::Tagged => format!(
                "no provider is tagged {tag:?} and the call's tag is forced \
                 (dubbo.force.tag); {total} provider(s){disabled}"
            ),
            TagSelection::FellBack => format!(
                "no provider is tagged {tag:?} and none is untagged to fall back to; \
                 {total} provider(s){disabled}"
            ),
            TagSelection::Untagged if routed.disabled == total => {
                format!("every provider ({total}) is disabled")
            }
            TagSelection::Untagged => format!(
                "the call is untagged and every enabled provider is tagged; \
                 {total} provider(s){disabled}"
            ),
        }
    }
}

/// Takes one off an endpoint's calls in flight when dropped.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Service<Request> for Balancer {
    type Response = super::Response;
    type Error = BoxError;
    type Future = BoxedFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        // A closed feeder leaves the endpoints as they are.
        while let Poll::Ready(Some(update)) = self.updates.poll_recv(cx) {
            self.apply(update);
        }
        if self.slots.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let tag = CallTag::of_request(request.headers(), &self.default_tag);
        let routed = self.routed(&tag);
        if routed.indices.is_empty() {
            let status = tonic::Status::unavailable(format!(
                "no provider routed: {}",
                self.why_none(&tag, &routed)
            ));
            return futures::future::ready(Err(Box::new(status) as BoxError)).boxed();
        }
        self.refresh_health();
        self.candidates.clear();
        self.candidates.extend(
            routed
                .indices
                .iter()
                .copied()
                .filter(|&i| !self.aside.get(i).copied().unwrap_or(false)),
        );
        if self.candidates.is_empty() {
            if !self.panic {
                self.panic = true;
                Counters::bump(&self.counters.panic_routes);
                tracing::warn!(
                    "every endpoint the call may go to is set aside: routing to all of them \
                     (panic mode)"
                );
            }
            self.candidates.extend(routed.indices.iter().copied());
        } else if self.panic {
            self.panic = false;
            tracing::info!("an endpoint is healthy again: the channel leaves panic mode");
        }
        let method = method_of(request.uri().path());
        let now = now_ms();
        self.weights.clear();
        self.loads.clear();
        for &i in &self.candidates {
            let slot = &self.slots[i];
            let route = &slot.route;
            self.weights.push(effective_weight(
                route.weight_for(method),
                route.warmup_ms,
                route.timestamp_ms,
                now,
            ));
            self.loads.push(slot.in_flight.load(Ordering::Relaxed));
        }
        let chosen = self.candidates[pick(&self.weights, &self.loads, &mut self.rng)];
        let slot = &self.slots[chosen];
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        let in_flight = InFlight(slot.in_flight.clone());
        let mut service = slot.service.clone();
        async move {
            let _in_flight = in_flight;
            service.ready().await?;
            service.call(request).await
        }
        .boxed()
    }
}

/// The method of a gRPC call's path (`/pkg.Service/Method`), if it names one.
fn method_of(path: &str) -> Option<&str> {
    path.rsplit_once('/')
        .map(|(_, method)| method)
        .filter(|m| !m.is_empty())
}

/// The wall clock in ms since the epoch, as providers write their start time.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_is_the_last_segment_of_the_path() {
        assert_eq!(method_of("/helloworld.Greeter/SayHello"), Some("SayHello"));
        assert_eq!(method_of("/helloworld.Greeter/"), None);
        assert_eq!(method_of(""), None);
    }
}
