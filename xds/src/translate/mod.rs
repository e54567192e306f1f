//! A Dubbo consumer's routing of one service, expressed in xDS terms (pure): the rules in
//! force (configurators, static tags and tag rules, condition rules v3.0 and v3.1, the
//! call settings `retries`, `timeout`, `loadbalance`) over the service's providers, as
//! routes on the gRPC path and headers to clusters of providers with weights.
//!
//! The routing itself is the library's chain ([`introspect::governance::route`]), run once
//! per class of calls the rules tell apart (`classes`): what an xDS client is sent is what
//! a balanced channel of the same consumer does with the same call, never a second reading
//! of the rules. What xDS cannot say for a client is listed in
//! [`Translation::unexpressed`], never approximated silently.
//!
//! * `classes`: the classes of calls and the route matches that tell them apart.
//! * `members`: the providers as the rules see them, and the clusters of the subsets
//!   routed to.
//! * `policy`: how a routed call is made (retries, timeout, load balancing, ejection).
//! * `explain`: the translation in words ([`Translation`]'s `Display`).

pub mod classes;
mod explain;
mod members;
pub mod policy;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use introspect::Endpoint;
use introspect::consumer::{HealthOptions, LoadBalance};
use introspect::governance::{CallFacts, CallTag, ConsumerIdentity, RuleSet, route};

use self::classes::{Class, Dimension, Matcher, Witness, class_count, classes, needed};
use self::members::{Members, cluster_name};
use self::policy::{Outliers, RoutePolicy};

pub use self::members::Member;

/// The header a call's tag is sent in (Dubbo's attachment `dubbo.tag`).
pub const TAG_HEADER: &str = "dubbo.tag";
/// The header that forces a call's tag (`dubbo.force.tag: true`).
pub const FORCE_TAG_HEADER: &str = "dubbo.force.tag";
/// The most routes one service's configuration holds; past it the headers condition
/// rules read are no longer told apart (said in [`Translation::unexpressed`]).
pub const MAX_ROUTES: usize = 256;
/// The most values of one dimension (methods a rule names, tags, values of a header) told
/// apart; past it the rest are routed as values no rule names (said in
/// [`Translation::unexpressed`]).
pub const MAX_VALUES: usize = 64;

/// What a translation reads.
pub struct Input<'a> {
    /// The service (`helloworld.Greeter`).
    pub service: &'a str,
    /// Its endpoints as health leaves them (what is set aside left out).
    pub endpoints: &'a [Endpoint],
    /// The rules in force for its channels.
    pub rules: &'a RuleSet,
    /// The consumer the rules are evaluated for.
    pub consumer: &'a ConsumerIdentity,
    /// The consumer-side ejection settings, sent as each cluster's outlier detection.
    pub outliers: &'a HealthOptions,
    /// The wall clock, ms since the epoch (warm-up weights).
    pub now_ms: i64,
}

/// One route: the calls it matches and where they go.
#[derive(Clone, Debug, PartialEq)]
pub struct RoutePlan {
    /// What a call must match (all of them; none: any call).
    pub matchers: Vec<Matcher>,
    /// The clusters calls go to, with weights (one: all of them). A cluster of no provider
    /// when none can take them: every call fails.
    pub destinations: Vec<(String, u32)>,
    /// How the chain decided, step by step, in the words of `introspect route`.
    pub why: Vec<String>,
    /// How the calls are made.
    pub policy: RoutePolicy,
}

/// One cluster: a subset of the providers some route sends calls to.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterPlan {
    /// Its name: the service's own for the subset of an untagged call, else
    /// `{service}/{digest of its members}`, or `{service}/none` for no provider.
    pub name: String,
    /// Its providers, by address.
    pub members: Vec<Member>,
    /// The load balancer its providers publish (configurators applied).
    pub loadbalance: LoadBalance,
}

/// The xDS form of one service's routing. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Translation {
    /// The service.
    pub service: String,
    /// The consumer it was evaluated for (the server's, or a client's as its node says).
    pub consumer: ConsumerIdentity,
    /// The keys of the consumer's own URL the rules read (`application`, `host`, ...):
    /// what makes clients that say who they are routed apart.
    pub reads_consumer: Vec<String>,
    /// The routes, in the order a client tries them (the last matches any call).
    pub routes: Vec<RoutePlan>,
    /// The clusters the routes name, sorted by name.
    pub clusters: Vec<ClusterPlan>,
    /// The ejection every cluster is sent.
    pub outliers: Outliers,
    /// The keys of the rules in force.
    pub rules_in_force: Vec<String>,
    /// Rules refused or not applied (`key: reason`).
    pub problems: Vec<String>,
    /// What the rules or settings ask that xDS cannot say for a client, each once.
    pub unexpressed: Vec<String>,
    /// When a warming provider's weight next grows by a step (ms since the epoch): the
    /// translation is due again then.
    pub next_ramp_ms: Option<i64>,
}

impl Translation {
    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&ClusterPlan> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

/// Translates the routing of `input.service`. See the module docs.
pub fn translate(input: &Input<'_>) -> Arc<Translation> {
    let members = Members::of(input);
    let mut unexpressed = members.unexpressed.clone();
    let reads = input.rules.reads();
    let mut dimensions = Vec::new();
    let tags = matchable(
        "tag",
        members.tags(input.rules),
        is_header_value,
        &mut unexpressed,
    );
    let tag_dimensions = [
        Dimension::header(TAG_HEADER, &tags),
        Dimension::flag(FORCE_TAG_HEADER),
    ];
    if reads.method {
        let methods = reads.exact.get("method").cloned().unwrap_or_default();
        let mut methods = matchable("method", methods, is_method_name, &mut unexpressed);
        // Methods times tags: at most MAX_ROUTES classes before any header is told apart.
        let room = (MAX_ROUTES / class_count(&tag_dimensions)).saturating_sub(1);
        if methods.len() > room {
            unexpressed.push(format!(
                "method: with {} tags, routes for {room} of the {} methods named; the others \
                 are routed as methods no rule names",
                tags.len(),
                methods.len()
            ));
            methods = methods.into_iter().take(room).collect();
        }
        dimensions.push(Dimension::method(&methods));
    }
    dimensions.extend(tag_dimensions);
    for name in &reads.attachments {
        if name == TAG_HEADER || name == FORCE_TAG_HEADER {
            continue;
        }
        if !is_header_name(name) {
            unexpressed.push(format!(
                "the attachment {name:?} a condition rule reads: no header a client can send \
                 or a route can match by that name; calls are routed as calls without it"
            ));
            continue;
        }
        let values = reads.exact.get(name).cloned().unwrap_or_default();
        let values = matchable(name, values, is_header_value, &mut unexpressed);
        let header = Dimension::header(name, &values);
        if class_count(&dimensions).saturating_mul(header.states.len()) > MAX_ROUTES {
            unexpressed.push(format!(
                "the header {name} a condition rule reads: over {MAX_ROUTES} routes, calls are \
                 not told apart by it (routed as calls without it)"
            ));
            continue;
        }
        dimensions.push(header);
    }
    for term in &reads.inexact {
        unexpressed.push(format!(
            "the condition {term}: a pattern or argument, not a set of values a route can \
             match; calls are routed as calls with a value no rule names"
        ));
    }

    let order = classes(&dimensions);
    let mut routed: Vec<(Class, Routed)> = Vec::with_capacity(order.len());
    for class in order {
        let routed_class = route_class(input, &members, &dimensions, &class);
        routed.push((class, routed_class));
    }
    let default_subset = routed
        .last()
        .and_then(|(_, r)| r.choices.first().map(|(subset, _)| subset.clone()))
        .unwrap_or_default();
    let mut clusters: BTreeMap<String, ClusterPlan> = BTreeMap::new();
    let mut routes = Vec::new();
    for i in needed(&dimensions, &routed) {
        let (class, how) = &routed[i];
        let mut destinations = Vec::new();
        let weights: Vec<u32> = how.choices.iter().map(|(_, w)| *w).collect();
        for ((subset, _), weight) in how.choices.iter().zip(fit_u32(&weights)) {
            let name = cluster_name(input.service, subset, &default_subset, &members);
            clusters
                .entry(name.clone())
                .or_insert_with(|| members.cluster(&name, subset));
            destinations.push((name, weight));
        }
        if destinations.is_empty() {
            // No provider: a cluster of none, so that calls fail rather than fall through.
            let name = cluster_name(input.service, &[], &default_subset, &members);
            clusters
                .entry(name.clone())
                .or_insert_with(|| members.cluster(&name, &[]));
            destinations.push((name, 1));
        }
        let first = how.choices.first().and_then(|(s, _)| s.first().copied());
        let method = method_of(&dimensions, class);
        let policy = RoutePolicy::of(&members, first, method.as_deref(), &mut unexpressed);
        routes.push(RoutePlan {
            matchers: class
                .iter()
                .zip(&dimensions)
                .filter_map(|(s, d)| d.states[*s].matcher.clone())
                .collect(),
            destinations,
            why: how.why.clone(),
            policy,
        });
    }
    // The untagged subset's cluster exists even when no route names it alone.
    let default = cluster_name(input.service, &default_subset, &default_subset, &members);
    clusters
        .entry(default.clone())
        .or_insert_with(|| members.cluster(&default, &default_subset));
    for cluster in clusters.values() {
        policy::note_loadbalance(cluster, &mut unexpressed);
    }
    policy::note_outliers(input.outliers, &mut unexpressed);
    unexpressed.sort();
    unexpressed.dedup();
    Arc::new(Translation {
        service: input.service.to_owned(),
        consumer: input.consumer.clone(),
        reads_consumer: reads.consumer.iter().cloned().collect(),
        routes,
        clusters: clusters.into_values().collect(),
        outliers: Outliers::of(input.outliers),
        rules_in_force: input.rules.in_force().collect(),
        problems: input
            .rules
            .problems()
            .iter()
            .map(|p| format!("{}: {}", p.key, p.reason))
            .collect(),
        unexpressed,
        next_ramp_ms: members.next_ramp_ms,
    })
}

/// Where the calls of one class go: weighted subsets (indices into the members), and why.
/// Two classes route alike when their subsets and weights are the same, whatever the words.
#[derive(Clone, Debug)]
struct Routed {
    choices: Vec<(Vec<usize>, u32)>,
    why: Vec<String>,
}

impl PartialEq for Routed {
    fn eq(&self, other: &Routed) -> bool {
        self.choices == other.choices
    }
}

/// The method of `class`, when the method is one of its dimensions and the class names one.
fn method_of(dimensions: &[Dimension], class: &Class) -> Option<String> {
    dimensions
        .iter()
        .zip(class)
        .find(|(d, _)| d.reads == "method")
        .and_then(|(d, s)| match &d.states[*s].witness {
            Witness::Value(m) => Some(m.clone()),
            _ => None,
        })
}

/// A value no rule or provider names, standing for "any other" (no request carries it: a
/// NUL is no header value and no method name).
const OTHER: &str = "\u{0}other";

/// Runs the chain for a call of `class`.
fn route_class(
    input: &Input<'_>,
    members: &Members,
    dimensions: &[Dimension],
    class: &Class,
) -> Routed {
    let mut method: Option<String> = None;
    let mut attachments: BTreeMap<String, String> = BTreeMap::new();
    let mut tag: Option<String> = None;
    let mut force = false;
    for (d, s) in dimensions.iter().zip(class) {
        let value = match &d.states[*s].witness {
            Witness::Value(v) => Some(v.clone()),
            Witness::Absent => None,
            Witness::Other => Some(OTHER.to_owned()),
        };
        match d.reads.as_str() {
            "method" => method = value,
            TAG_HEADER => tag = value,
            FORCE_TAG_HEADER => force = value.as_deref() == Some("true"),
            name => {
                if let Some(v) = value {
                    attachments.insert(name.to_owned(), v);
                }
            }
        }
    }
    let tag = CallTag::new(tag.as_deref().unwrap_or(""), force);
    let call = CallFacts {
        consumer_app: &input.consumer.app,
        consumer_host: &input.consumer.host,
        consumer_params: &input.consumer.params,
        method: method.as_deref(),
        attachments: &attachments,
        tag: &tag,
    };
    let providers = members.facts();
    let routing = route(input.rules, &call, &providers, &members.enabled());
    Routed {
        choices: routing
            .choices
            .iter()
            .map(|c| (c.indices.clone(), c.weight))
            .collect(),
        why: routing.steps,
    }
}

/// The values of `read` a route can match, at most [`MAX_VALUES`]; the others noted.
fn matchable(
    read: &str,
    values: std::collections::BTreeSet<String>,
    plain: fn(&str) -> bool,
    unexpressed: &mut Vec<String>,
) -> std::collections::BTreeSet<String> {
    let (kept, odd): (Vec<String>, Vec<String>) = values.into_iter().partition(|v| plain(v));
    if !odd.is_empty() {
        unexpressed.push(format!(
            "{read} values no route can match ({}): routed as values no rule names",
            odd.iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if kept.len() > MAX_VALUES {
        unexpressed.push(format!(
            "{read}: {} values named, routes for the first {MAX_VALUES}; the others are routed as \
             values no rule names",
            kept.len()
        ));
    }
    kept.into_iter().take(MAX_VALUES).collect()
}

/// Whether `name` is a gRPC method name a path can hold.
fn is_method_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'$'))
}

/// Whether `name` is a header gRPC clients send and routes match: lower-case token
/// characters, not a gRPC-reserved (`grpc-`) or binary (`-bin`) one.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b'-')
        })
        && !name.starts_with("grpc-")
        && !name.ends_with("-bin")
}

/// Whether `value` can be a header's value (printable, at most 1 KiB).
fn is_header_value(value: &str) -> bool {
    !value.is_empty() && value.len() <= 1024 && value.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `weights` scaled down, when their sum does not fit a `u32` (what Envoy and gRPC take),
/// keeping each at least 1.
pub fn fit_u32(weights: &[u32]) -> Vec<u32> {
    let sum: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    let room = u64::from(u32::MAX)
        .saturating_sub(weights.len() as u64)
        .max(1);
    if sum <= u64::from(u32::MAX) {
        return weights.to_vec();
    }
    let divisor = sum.div_ceil(room);
    weights
        .iter()
        .map(|w| {
            u32::try_from(u64::from(*w) / divisor)
                .unwrap_or(u32::MAX)
                .max(1)
        })
        .collect()
}

/// The ms from `now_ms` until `at_ms`, for timers.
pub fn until(at_ms: i64, now_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(at_ms.saturating_sub(now_ms)).unwrap_or(0))
}
