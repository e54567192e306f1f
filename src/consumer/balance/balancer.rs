//! The balancer under the channel's buffer: for each attempt of a call, the routing
//! stage's subset (`governance`: configurators, disabled providers, tags, condition
//! rules), less the providers the call tried already, then health (ejected endpoints left
//! out, slow ones for their slow methods, outliers within the cap, panic mode when every
//! routed one is out), then the select stage
//! (`consumer/select`): the call's policy read from the first routed provider, and its
//! load balancer's pick.
//!
//! It takes its endpoints from the feeder as [`Update`]s: an address joins with its
//! endpoint, is rerouted when a new revision changes it (no new connection), and leaves;
//! and the rules in force from the rules watcher. Routings are cached per distinct call
//! input (tag, and the method and attachments the rules read) until the endpoints or the
//! rules change; health is read once per change of health, not per call.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rand::SeedableRng as _;
use rand::rngs::SmallRng;
use tokio::sync::{mpsc, watch};
use tower::{BoxError, Service, ServiceExt as _};

use super::cluster::{CallRecord, NoProviderLeft, first_answer};
use super::deadline::{Dispatched, write_grpc_timeout};
use super::{BoxedFuture, Marked, Request};
use crate::consumer::health::{EndpointKey, HealthRegistry, Left, Standing, route_around_capped};
use crate::consumer::rules::RulesReport;
use crate::consumer::select::loadbalance::{Balancers, CallKey, Candidate, ResponseTimes};
use crate::consumer::select::policy::{CallPolicy, Cluster, ConsumerSettings, PolicyInputs};
use crate::consumer::select::retry;
use crate::consumer::stats::Counters;
use crate::governance::{
    CallFacts, CallTag, ConsumerIdentity, ProviderFacts, RouteParams, Routing, RuleSet,
    effective_weight, route,
};
use crate::model::{Authority, Endpoint};

/// A change of the balancer's endpoints, from the feeder.
pub(super) enum Update {
    /// `address` joins (or is replaced), called through `service`.
    Insert {
        address: Authority,
        key: EndpointKey,
        service: Marked,
        endpoint: Endpoint,
    },
    /// The endpoint at `address` changed (a new revision at the same address).
    Reroute(Authority, Endpoint),
    /// `address` leaves.
    Remove(Authority),
}

/// One endpoint of the balancer.
struct Slot {
    address: Authority,
    key: EndpointKey,
    service: Marked,
    endpoint: Endpoint,
    /// Its service parameters as configurators override them; `None` when none applies.
    overridden: Option<Arc<BTreeMap<String, String>>>,
    /// What it says for routing, configurators applied.
    route: Arc<RouteParams>,
    /// Calls handed to it and not yet answered: the load measure.
    in_flight: Arc<AtomicUsize>,
    /// Its recent response times, for `shortestresponse`.
    times: Arc<ResponseTimes>,
    /// The parameters configurators set on it (only those), for the call policy.
    configured: BTreeMap<String, String>,
    /// The policies of calls whose first routed provider it is, per method ("" for none),
    /// until its parameters change.
    policies: HashMap<Box<str>, Arc<CallPolicy>>,
}

impl Slot {
    /// Its service parameters, configurators applied.
    fn params(&self) -> &BTreeMap<String, String> {
        self.overridden
            .as_deref()
            .unwrap_or_else(|| self.endpoint.params())
    }

    /// Applies the configurators of `rules` (what a consumer of `consumer` sees of it).
    fn configure(&mut self, rules: &RuleSet, consumer: &ConsumerIdentity) {
        let facts = ProviderFacts::of(&self.endpoint, self.endpoint.params());
        self.overridden = rules.configure(consumer, &facts).map(Arc::new);
        self.route = Arc::new(RouteParams::of_overridden(&self.endpoint, self.params()));
        let published = self.endpoint.params();
        self.configured = match &self.overridden {
            Some(overridden) => overridden
                .iter()
                .filter(|(key, value)| published.get(*key) != Some(*value))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            None => BTreeMap::new(),
        };
        self.policies.clear();
    }

    /// The policy of calls of `method` whose first routed provider this is.
    fn policy(
        &mut self,
        method: Option<&str>,
        consumer: &ConsumerSettings,
        consumer_timeout: Option<Duration>,
    ) -> Arc<CallPolicy> {
        if let Some(policy) = self.policies.get(method.unwrap_or("")) {
            return policy.clone();
        }
        let inputs = PolicyInputs {
            consumer,
            consumer_timeout,
            provider: self.endpoint.params(),
            configured: &self.configured,
        };
        let policy = Arc::new(CallPolicy::resolve(&inputs, method));
        for problem in &policy.not_applied {
            tracing::warn!(address = %self.address, "{problem}");
        }
        // Bounded: methods are the callers' own paths.
        if self.policies.len() >= 64 {
            self.policies.clear();
        }
        self.policies
            .insert(method.unwrap_or("").into(), policy.clone());
        policy
    }
}

/// What of one call routing depends on: the key of the cached routings.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CallInput {
    tag: CallTag,
    /// The method, when a rule reads it.
    method: Option<Box<str>>,
    /// The attachments the rules read, by name (absent ones left out).
    attachments: BTreeMap<String, String>,
}

/// See the module docs.
pub(super) struct Balancer {
    updates: mpsc::Receiver<Update>,
    slots: Vec<Slot>,
    /// The consumer's own settings of calls.
    settings: Arc<ConsumerSettings>,
    /// The consumer's own deadline of calls that set none.
    request_timeout: Option<Duration>,
    /// The load balancers' state.
    balancers: Balancers,
    /// When the channel began: its endpoints' response-time windows turn together from it.
    origin: tokio::time::Instant,
    /// The consumer's own tag, for calls that carry none.
    default_tag: CallTag,
    /// Who the consumer is, for rules.
    consumer: Arc<ConsumerIdentity>,
    rule_changes: watch::Receiver<Arc<RuleSet>>,
    rules: Arc<RuleSet>,
    /// The channel's report of its rules in the consumer record: kept, not read, so that
    /// it lasts as long as the balancer routes.
    _report: Option<Arc<RulesReport>>,
    /// Set while calls wait for the config centre's first answers.
    rules_wait: Option<BoxFuture<'static, ()>>,
    health: Arc<HealthRegistry>,
    health_changes: watch::Receiver<u64>,
    counters: Arc<Counters>,
    /// Routings per call input, until the endpoints or the rules change.
    routed: HashMap<CallInput, Arc<Routing>>,
    /// Where each slot stands with health, as of the last change of health or endpoints.
    standing: Vec<Standing>,
    aside_stale: bool,
    /// Whether the last call went to set-aside endpoints only.
    panic: bool,
    rng: SmallRng,
    /// Scratch space of one pick.
    untried: Vec<usize>,
    candidates: Vec<usize>,
}

impl Balancer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        updates: mpsc::Receiver<Update>,
        settings: Arc<ConsumerSettings>,
        request_timeout: Option<Duration>,
        default_tag: CallTag,
        consumer: Arc<ConsumerIdentity>,
        mut rule_changes: watch::Receiver<Arc<RuleSet>>,
        report: Option<Arc<RulesReport>>,
        health: Arc<HealthRegistry>,
        counters: Arc<Counters>,
    ) -> Self {
        let rules = rule_changes.borrow_and_update().clone();
        Balancer {
            updates,
            slots: Vec::new(),
            settings,
            request_timeout,
            balancers: Balancers::default(),
            origin: tokio::time::Instant::now(),
            default_tag,
            consumer,
            rule_changes,
            rules,
            _report: report,
            rules_wait: None,
            health_changes: health.changes(),
            health,
            counters,
            routed: HashMap::new(),
            standing: Vec::new(),
            aside_stale: true,
            panic: false,
            rng: SmallRng::from_os_rng(),
            untried: Vec::new(),
            candidates: Vec::new(),
        }
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Insert {
                address,
                key,
                service,
                endpoint,
            } => {
                let mut slot = Slot {
                    address,
                    key,
                    service,
                    endpoint,
                    overridden: None,
                    route: Arc::default(),
                    in_flight: Arc::default(),
                    times: Arc::new(ResponseTimes::new(self.origin)),
                    configured: BTreeMap::new(),
                    policies: HashMap::new(),
                };
                slot.configure(&self.rules, &self.consumer);
                count_unparsed(&self.counters, &slot.route);
                match self.slots.iter().position(|s| s.address == slot.address) {
                    Some(i) => self.slots[i] = slot,
                    None => self.slots.push(slot),
                }
            }
            Update::Reroute(address, endpoint) => {
                if let Some(slot) = self.slots.iter_mut().find(|s| s.address == address) {
                    slot.endpoint = endpoint;
                    slot.configure(&self.rules, &self.consumer);
                    count_unparsed(&self.counters, &slot.route);
                }
            }
            Update::Remove(address) => self.slots.retain(|s| s.address != address),
        }
        self.routed.clear();
        self.aside_stale = true;
    }

    /// Takes the rules in force when they changed: configurators apply again, routings are
    /// made again.
    fn refresh_rules(&mut self) {
        if !self.rule_changes.has_changed().unwrap_or(false) {
            return;
        }
        self.rules = self.rule_changes.borrow_and_update().clone();
        for slot in &mut self.slots {
            slot.configure(&self.rules, &self.consumer);
        }
        self.routed.clear();
    }

    /// Waits for the config centre's first answers (the watcher gives up waiting after a
    /// bound of its own, and a watcher gone leaves the rules as they are).
    fn wait_for_rules(&mut self, cx: &mut TaskContext<'_>) -> Poll<()> {
        loop {
            self.refresh_rules();
            if self.rules.is_loaded() {
                self.rules_wait = None;
                return Poll::Ready(());
            }
            let wait = self.rules_wait.get_or_insert_with(|| {
                let mut changes = self.rule_changes.clone();
                async move {
                    if changes.changed().await.is_err() {
                        futures::future::pending::<()>().await;
                    }
                }
                .boxed()
            });
            match wait.poll_unpin(cx) {
                Poll::Ready(()) => self.rules_wait = None,
                Poll::Pending => {
                    if self.rule_changes.has_changed().is_err() {
                        // No watcher: route without its rules.
                        self.rules = Arc::new(RuleSet::none());
                        self.rules_wait = None;
                        return Poll::Ready(());
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    /// What of `request` routing depends on, under the rules in force.
    fn input_of(&self, request: &Request) -> CallInput {
        let tag = CallTag::of_request(request.headers(), &self.default_tag);
        let reads = self.rules.reads();
        let method = reads
            .method
            .then(|| method_of(request.uri().path()).map(Box::from))
            .flatten();
        let attachments = reads
            .attachments
            .iter()
            .filter_map(|name| {
                let value = request.headers().get(name.as_str())?.to_str().ok()?;
                Some((name.clone(), value.to_owned()))
            })
            .collect();
        CallInput {
            tag,
            method,
            attachments,
        }
    }

    /// Where calls of `input` may go (cached).
    fn routed(&mut self, input: &CallInput) -> Arc<Routing> {
        if let Some(routed) = self.routed.get(input) {
            return routed.clone();
        }
        let providers: Vec<ProviderFacts<'_>> = self
            .slots
            .iter()
            .map(|slot| ProviderFacts::of(&slot.endpoint, slot.params()))
            .collect();
        let enabled: Vec<bool> = self.slots.iter().map(|s| s.route.enabled).collect();
        let call = CallFacts {
            consumer_app: &self.consumer.app,
            consumer_host: &self.consumer.host,
            consumer_params: &self.consumer.params,
            method: input.method.as_deref(),
            attachments: &input.attachments,
            tag: &input.tag,
        };
        let routed = Arc::new(route(&self.rules, &call, &providers, &enabled));
        // A bounded cache: tags and attachments are the callers' own values.
        if self.routed.len() >= 256 {
            self.routed.clear();
        }
        self.routed.insert(input.clone(), routed.clone());
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
        self.standing = self.health.standing_of(&keys);
        self.aside_stale = false;
    }

    /// Which of the routing's subsets a call takes, drawn by weight (most routings have
    /// one).
    fn choose(&mut self, routing: &Routing) -> usize {
        let choices = &routing.choices;
        if choices.len() < 2 {
            return 0;
        }
        let total: u64 = choices.iter().map(|c| u64::from(c.weight)).sum();
        let mut draw = rand::Rng::random_range(&mut self.rng, 0..total.max(1));
        for (i, choice) in choices.iter().enumerate() {
            if draw < u64::from(choice.weight) {
                return i;
            }
            draw -= u64::from(choice.weight);
        }
        choices.len() - 1
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
        if !self.rules.is_loaded() && self.wait_for_rules(cx).is_pending() {
            return Poll::Pending;
        }
        if self.slots.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        self.refresh_rules();
        let input = self.input_of(&request);
        let routing = self.routed(&input);
        if routing.is_empty() {
            let status =
                tonic::Status::unavailable(format!("no provider routed: {}", routing.why()));
            return futures::future::ready(Err(Box::new(status) as BoxError)).boxed();
        }
        self.refresh_health();
        let record = CallRecord::of(&request);
        let routed = &routing.choices[self.choose(&routing)].indices;
        // A retry goes only to a provider the call has not tried.
        self.untried.clear();
        let slots = &self.slots;
        let picks = record.as_ref().map(|r| r.picks());
        self.untried.extend(routed.iter().copied().filter(|&i| {
            picks
                .as_ref()
                .is_none_or(|p| !p.contains(&slots[i].address))
        }));
        drop(picks);
        if self.untried.is_empty() {
            return futures::future::ready(Err(Box::new(NoProviderLeft) as BoxError)).boxed();
        }
        let standing = &self.standing;
        let path = request.uri().path();
        let left = |i: usize| standing.get(i).map_or(Left::No, |s| s.for_path(path));
        let cap = self.health.max_ejection_percent();
        let around = route_around_capped(&self.untried, left, cap, &mut self.candidates);
        if around.capped_back > 0 {
            Counters::bump(&self.counters.capped_routes);
        }
        if around.panic {
            if !self.panic {
                self.panic = true;
                Counters::bump(&self.counters.panic_routes);
                tracing::warn!(
                    "every endpoint the call may go to is set aside: routing to all of them \
                     (panic mode)"
                );
            }
        } else if self.panic {
            self.panic = false;
            tracing::info!("an endpoint is healthy again: the channel leaves panic mode");
        }
        let method = method_of(request.uri().path());
        // The call's policy, as Java reads it from the first routed provider.
        let first = routed[0];
        let mut policy = self.slots[first].policy(method, &self.settings, self.request_timeout);
        if let Some(retries) = record.as_ref().and_then(|r| r.call_retries) {
            policy = Arc::new((*policy).clone().with_call_retries(retries));
        }
        // A call that set no deadline itself gets the policy's.
        let deadline = policy.timeout.value.and_then(|timeout| {
            let mark = Dispatched::of(&request)?;
            mark.deadline().is_none().then(|| mark.bound_by(timeout))
        });
        let now_wall = now_ms();
        let now = tokio::time::Instant::now();
        let candidates: Vec<Candidate<'_>> = self
            .candidates
            .iter()
            .map(|&i| {
                let slot = &self.slots[i];
                let route = &slot.route;
                Candidate {
                    address: slot.address.as_str(),
                    weight: effective_weight(
                        route.weight_for(method),
                        route.warmup_ms,
                        route.timestamp_ms,
                        now_wall,
                    ),
                    active: slot.in_flight.load(Ordering::Relaxed),
                    stats: &slot.times,
                }
            })
            .collect();
        let key = CallKey {
            method,
            hash_key: request
                .headers()
                .get(HASH_KEY_HEADER)
                .map(http::HeaderValue::as_bytes),
        };
        let lb = policy.loadbalance.value;
        let index = self
            .balancers
            .select(lb, &candidates, &key, now, &mut self.rng);
        let chosen = self.candidates[index];
        // Forking: more providers at once, each picked as the first was, when the body can
        // be sent to each.
        let forks = usize::try_from(policy.forks.value).unwrap_or(usize::MAX);
        let forking = policy.cluster.value == Cluster::Forking
            && forks > 1
            && candidates.len() > 1
            && record.as_ref().is_some_and(|r| r.body_complete());
        let mut more = Vec::new();
        if forking {
            let mut rest: Vec<usize> = (0..candidates.len()).filter(|&j| j != index).collect();
            while more.len() + 1 < forks && !rest.is_empty() {
                let others: Vec<Candidate<'_>> = rest.iter().map(|&j| candidates[j]).collect();
                let k = self.balancers.select(lb, &others, &key, now, &mut self.rng);
                more.push(self.candidates[rest.remove(k)]);
            }
        }
        drop(candidates);
        if let Some(deadline) = deadline {
            write_grpc_timeout(request.headers_mut(), deadline);
        }
        if let Some(record) = &record {
            for &i in std::iter::once(&chosen).chain(&more) {
                record.picked(&self.slots[i].address, &policy);
            }
        }
        if more.is_empty() {
            return self.dispatch(chosen, request);
        }
        let copies = record
            .as_ref()
            .map(|r| r.copies(&request, more.len()))
            .unwrap_or_default();
        let mut attempts = vec![self.dispatch(chosen, request)];
        for (&i, copy) in more.iter().zip(copies) {
            attempts.push(self.dispatch(i, copy));
        }
        first_answer(attempts).boxed()
    }
}

impl Balancer {
    /// Sends `request` to the endpoint of slot `i`, counted in its load and response
    /// times.
    fn dispatch(&self, i: usize, request: Request) -> BoxedFuture {
        let slot = &self.slots[i];
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        let in_flight = InFlight(slot.in_flight.clone());
        let times = slot.times.clone();
        let mut service = slot.service.clone();
        async move {
            let _in_flight = in_flight;
            service.ready().await?;
            let started = tokio::time::Instant::now();
            let answer = service.call(request).await;
            let succeeded = answer.as_ref().is_ok_and(|response| {
                retry::grpc_code(response.headers()).is_none_or(|code| code == tonic::Code::Ok)
            });
            let now = tokio::time::Instant::now();
            times.record(now.saturating_duration_since(started), succeeded, now);
            answer
        }
        .boxed()
    }
}

/// Counts what an endpoint publishes for routing that does not parse (read as Java's
/// defaults).
fn count_unparsed(counters: &Counters, route: &RouteParams) {
    Counters::add(&counters.unparsed_route_params, route.bad.len() as u64);
}

/// The request header whose value `consistenthash` hashes (a gRPC call's body, where Java
/// finds the arguments it hashes, is not read); a call without it is picked by weight.
pub const HASH_KEY_HEADER: &str = "introspect-hash-key";

/// The method of a gRPC call's path (`/pkg.Service/Method`), if it names one.
pub(super) fn method_of(path: &str) -> Option<&str> {
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
