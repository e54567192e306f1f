//! Explaining where a call would go ([`Resolver::explain_route`]): the subscription's
//! providers, the rules the config centre holds for them now, and for each provider whether
//! a call of the given input is routed to it, by which rule or parameter it is not, its
//! effective weight, and whether consumer-side health sets it aside. The same chain the
//! balanced channel runs (discovery, routing, health), on one read of the rules.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use super::health::{Ejection, Left, route_around_capped};
use super::resolver::Resolver;
use super::select::policy::{CallPolicy, ConsumerSettings, PolicyInputs, RETRIES_HEADER, Source};
use super::subscribe::SubscriptionHandle;
use crate::error::Result;
use crate::governance::watch::read_rules;
use crate::governance::{
    CallFacts, CallTag, ConsumerIdentity, ProviderFacts, RouteParams, Routing, RuleProblem,
    RuleSet, effective_weight, route, rule_keys, service_key,
};
use crate::model::Endpoint;

/// The call to explain: what the balanced channel would route by.
#[derive(Clone, Debug, Default)]
pub struct RouteQuery {
    /// The method called (`SayHello`); `None`: no method in particular.
    pub method: Option<String>,
    /// The request's headers (attachments), by name.
    pub headers: BTreeMap<String, String>,
    /// The call's tag (the request's `dubbo.tag` header wins over it, as in calls): the
    /// channel's own tag ([`ChannelOptions::tag`](crate::consumer::ChannelOptions::tag)),
    /// which its consumer URL carries as `dubbo.tag`.
    pub tag: CallTag,
    /// The channel's own consumer parameters
    /// ([`ChannelOptions::consumer_param`](crate::consumer::ChannelOptions::consumer_param)),
    /// over the resolver's (with [`consumer_app`](Self::consumer_app), over none).
    pub consumer_params: BTreeMap<String, String>,
    /// The consumer's app to explain for, in place of the resolver's own (`None`: the
    /// resolver's): one resolver (a console's) can then explain the calls of any app
    /// without building another.
    pub consumer_app: Option<String>,
    /// The consumer's own settings of calls (a channel's
    /// [`ChannelOptions`](crate::consumer::ChannelOptions): cluster, retries, load
    /// balancer, per method, idempotent methods), to explain the call's policy.
    pub settings: ConsumerSettings,
    /// The consumer's own deadline of calls that set none
    /// ([`ChannelOptions::request_timeout`](crate::consumer::ChannelOptions::request_timeout)).
    pub request_timeout: Option<Duration>,
}

/// Where a call of a [`RouteQuery`] goes. See the module docs.
#[derive(Clone, Debug, Serialize)]
pub struct RouteReport {
    /// The consumer's app the rules were read for (empty: unknown).
    pub consumer_app: String,
    /// The consumer URL's parameters the rules were evaluated with, as the balanced
    /// channel of the query's subscription, tag and parameters routes by.
    pub consumer_params: BTreeMap<String, String>,
    /// The keys of the rules in force, in the order they apply.
    pub rules_in_force: Vec<String>,
    /// Rules refused or not applied, with why.
    pub problems: Vec<RouteProblem>,
    /// What was noticed in the rules in force that changes nothing (a field Java ignores,
    /// a configurator item dropped alone), by key.
    pub notes: Vec<RouteProblem>,
    /// How each step of the chain decided.
    pub steps: Vec<String>,
    /// Each provider (one per dialable address).
    pub providers: Vec<ProviderRoute>,
    /// How the call is made once routed: its cluster, retries, load balancer and timeout,
    /// each with where it came from (`None` when no provider is routed).
    pub call: Option<CallReport>,
}

/// How a call is made (its [`CallPolicy`]), in a [`RouteReport`].
#[derive(Clone, Debug, Serialize)]
pub struct CallReport {
    /// The cluster (`failover`, `failfast`, `forking`) and where it came from.
    pub cluster: SettingReport,
    /// Retries after the first try, and where they came from.
    pub retries: SettingReport,
    /// Tries in all under the cluster.
    pub tries: u32,
    /// Providers called at once under `forking`.
    pub forks: SettingReport,
    /// The load balancer.
    pub loadbalance: SettingReport,
    /// The deadline of a call that sets none (`none`: no deadline), in ms.
    pub timeout: SettingReport,
    /// Whether the query's method may be processed twice (idempotent).
    pub idempotent: bool,
    /// What failed attempts are tried again on another provider, in words.
    pub retried: String,
    /// Settings read and not applied, with why.
    pub not_applied: Vec<String>,
}

/// One setting of a call and where it came from.
#[derive(Clone, Debug, Serialize)]
pub struct SettingReport {
    /// Its value, as Dubbo writes it.
    pub value: String,
    /// Where it came from (`default`, `consumer option`, `provider parameter KEY`,
    /// `configurator KEY`, `call header retries`).
    pub from: String,
}

impl CallReport {
    fn of(policy: &CallPolicy, idempotent: bool) -> CallReport {
        fn setting<T: ToString>(value: T, source: &Source) -> SettingReport {
            SettingReport {
                value: value.to_string(),
                from: source.to_string(),
            }
        }
        let timeout = match policy.timeout.value {
            Some(t) => t.as_millis().to_string(),
            None => "none".to_owned(),
        };
        let retried = if idempotent {
            "attempts that never reached a provider, declined ones (trailers-only \
             UNAVAILABLE, UNIMPLEMENTED), timeouts, lost connections, and RESOURCE_EXHAUSTED \
             or ABORTED answers (the method is idempotent)"
        } else {
            "attempts that never reached a provider and declined ones (trailers-only \
             UNAVAILABLE, UNIMPLEMENTED); not timeouts or other failures (the method is not \
             marked idempotent)"
        };
        CallReport {
            cluster: setting(policy.cluster.value, &policy.cluster.source),
            retries: setting(policy.retries.value, &policy.retries.source),
            tries: policy.tries(),
            forks: setting(policy.forks.value, &policy.forks.source),
            loadbalance: setting(policy.loadbalance.value, &policy.loadbalance.source),
            timeout: setting(timeout, &policy.timeout.source),
            idempotent,
            retried: retried.to_owned(),
            not_applied: policy.not_applied.clone(),
        }
    }
}

/// A rule refused or not applied.
#[derive(Clone, Debug, Serialize)]
pub struct RouteProblem {
    /// Its key.
    pub key: String,
    /// Why.
    pub reason: String,
}

/// One provider's part in a [`RouteReport`].
#[derive(Clone, Debug, Serialize)]
pub struct ProviderRoute {
    /// Where calls go (`host:port`).
    pub address: String,
    /// Its app.
    pub app: String,
    /// Its revision.
    pub revision: String,
    /// Its tag, configurators applied.
    pub tag: Option<String>,
    /// Whether it is enabled, configurators applied.
    pub enabled: bool,
    /// Whether a call of the query may go to it.
    pub routed: bool,
    /// Why not, when it may not.
    pub routed_out_by: Option<String>,
    /// Whether consumer-side health ejects it now (for the query's method, when it is
    /// slow at that method alone): a call routed to it goes to another routed provider,
    /// unless the cap on outliers lets it back or every one of them is out (panic mode).
    pub set_aside: bool,
    /// Why, since when and until when, when it is.
    pub ejection: Option<Ejection>,
    /// Its effective weight now (warm-up applied) for the query's method.
    pub weight: u32,
    /// Its weight for the query's method as published and configured, before warm-up:
    /// above [`weight`](Self::weight) while it warms up, so a reader can tell a young
    /// provider from a light one.
    pub published_weight: u32,
    /// Its warm-up period in ms (Dubbo's `warmup`, 10 minutes unless it says otherwise).
    pub warmup_ms: u32,
    /// The parameters configurators changed, with their new values.
    pub configured: BTreeMap<String, String>,
    /// Parameters that did not parse, read as their defaults.
    pub bad_params: Vec<String>,
}

impl Resolver {
    /// Explains where a call of `query` through a balanced channel of `subscription` goes
    /// now: the rules are read from the config centre once (as a channel would watch
    /// them), the providers are the subscription's current endpoints, and the consumer's
    /// URL is the one such a channel routes by. Fails on a consumer parameter of the query
    /// that is not valid (see
    /// [`ResolverBuilder::consumer_param`](crate::consumer::ResolverBuilder::consumer_param)).
    pub async fn explain_route(
        &self,
        subscription: &SubscriptionHandle,
        query: &RouteQuery,
    ) -> Result<RouteReport> {
        let own = &self.channel_parts().consumer;
        let base = match &query.consumer_app {
            Some(app) => ConsumerIdentity::new(Some(app.clone()), Some(own.host.clone())),
            None => (**own).clone(),
        };
        let wanted = subscription.subscription();
        let consumer = base.with_params(&query.consumer_params)?.for_channel(
            &wanted.interface,
            wanted.version.as_deref(),
            wanted.group.as_deref(),
            &query.tag,
        );
        let mut endpoints: Vec<Endpoint> = subscription.current().to_vec();
        endpoints.sort_by_key(Endpoint::authority);
        endpoints.dedup_by_key(|e| e.authority());
        let service = service_key(
            &wanted.interface,
            wanted.version.as_deref(),
            wanted.group.as_deref(),
        );
        let apps: BTreeSet<&str> = endpoints.iter().map(|e| &*e.app).collect();
        let keys = rule_keys(&consumer.app, &service, apps.iter().copied());
        let read = read_rules(self.backend().config(), keys).await;
        let mut problems = read.refused;
        problems.extend(read.unread.into_iter().map(|(key, error)| RuleProblem {
            key,
            reason: error.to_string(),
        }));
        for key in rule_keys(&consumer.app, &service, apps.iter().copied()) {
            let name = key.key();
            if let Ok(Some(_)) = self.backend().config().misplaced(&name).await {
                problems.push(RuleProblem {
                    key: name,
                    reason: "also written where nobody reads it (ZooKeeper /dubbo/config/{key}, \
                             without the group, as some dubbo-admin versions write it); Dubbo \
                             members read /dubbo/config/dubbo/{key}"
                        .to_owned(),
                });
            }
        }
        let set = RuleSet::new(read.rules, problems);
        let overridden: Vec<Option<BTreeMap<String, String>>> = endpoints
            .iter()
            .map(|e| set.configure(&consumer, &ProviderFacts::of(e, e.params())))
            .collect();
        let params: Vec<&BTreeMap<String, String>> = endpoints
            .iter()
            .zip(&overridden)
            .map(|(e, o)| o.as_ref().unwrap_or_else(|| e.params()))
            .collect();
        let routes: Vec<RouteParams> = endpoints
            .iter()
            .zip(&params)
            .map(|(e, p)| RouteParams::of_overridden(e, p))
            .collect();
        let providers: Vec<ProviderFacts<'_>> = endpoints
            .iter()
            .zip(&params)
            .map(|(e, p)| ProviderFacts::of(e, p))
            .collect();
        let enabled: Vec<bool> = routes.iter().map(|r| r.enabled).collect();
        let headers: BTreeMap<String, String> = query
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        let tag = call_tag(&headers, &query.tag);
        let call = CallFacts {
            consumer_app: &consumer.app,
            consumer_host: &consumer.host,
            consumer_params: &consumer.params,
            method: query.method.as_deref(),
            attachments: &headers,
            tag: &tag,
        };
        let mut routing = route(&set, &call, &providers, &enabled);
        let health = &self.channel_parts().health;
        let keys: Vec<_> = endpoints.iter().map(super::subscribe::key_of).collect();
        let standing = health.standing_of(&keys.iter().collect::<Vec<_>>());
        let path = format!(
            "/{}/{}",
            wanted.interface,
            query.method.as_deref().unwrap_or("")
        );
        let left: Vec<Left> = standing.iter().map(|s| s.for_path(&path)).collect();
        let aside: Vec<bool> = left.iter().map(|l| *l != Left::No).collect();
        let ejections = health.ejections();
        let ejection_of = |i: usize| {
            let address = endpoints[i].address();
            ejections
                .iter()
                .find(|e| {
                    e.address == address
                        && (e.method.is_none() || e.method.as_deref() == Some(path.as_str()))
                })
                .cloned()
        };
        let cap = health.max_ejection_percent();
        if let Some(step) = health_step(&routing, &left, cap) {
            routing.steps.push(step);
        }
        let now = crate::consumer::seen::now_ms();
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        let reports = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let r = &routes[i];
                let configured = reports_configured(e.params(), overridden[i].as_ref());
                let published = r.weight_for(query.method.as_deref());
                ProviderRoute {
                    address: e.address(),
                    app: e.app.to_string(),
                    revision: e.revision.to_string(),
                    tag: r.tag.as_deref().map(str::to_owned),
                    enabled: r.enabled,
                    routed: routing.reaches(i),
                    routed_out_by: routing.routed_out[i].clone(),
                    set_aside: aside[i],
                    ejection: aside[i].then(|| ejection_of(i)).flatten(),
                    weight: effective_weight(published, r.warmup_ms, r.timestamp_ms, now),
                    published_weight: published.max(0).unsigned_abs(),
                    warmup_ms: r.warmup_ms.max(0).unsigned_abs(),
                    configured,
                    bad_params: r
                        .bad
                        .iter()
                        .map(|b| format!("{}={}", b.key, b.value))
                        .collect(),
                }
            })
            .collect();
        let method = query.method.as_deref();
        let call = (0..endpoints.len())
            .find(|&i| routing.reaches(i))
            .map(|first| {
                let published = endpoints[first].params();
                let configured = reports_configured(published, overridden[first].as_ref());
                let inputs = PolicyInputs {
                    consumer: &query.settings,
                    consumer_timeout: query.request_timeout,
                    provider: published,
                    configured: &configured,
                };
                let mut policy = CallPolicy::resolve(&inputs, method);
                if let Some(retries) = headers
                    .get(RETRIES_HEADER)
                    .and_then(|r| r.trim().parse().ok())
                {
                    policy = policy.with_call_retries(retries);
                }
                CallReport::of(&policy, query.settings.is_idempotent(method))
            });
        Ok(RouteReport {
            call,
            consumer_app: consumer.app.clone(),
            consumer_params: consumer.params.clone(),
            rules_in_force: set.in_force().collect(),
            problems: set
                .problems()
                .iter()
                .map(|p| RouteProblem {
                    key: p.key.clone(),
                    reason: p.reason.clone(),
                })
                .collect(),
            notes: set
                .notes()
                .into_iter()
                .map(|p| RouteProblem {
                    key: p.key,
                    reason: p.reason,
                })
                .collect(),
            steps: routing.steps,
            providers: reports,
        })
    }
}

/// The parameters configurators set on a provider publishing `published`, whose
/// parameters then read `overridden`.
fn reports_configured(
    published: &BTreeMap<String, String>,
    overridden: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    overridden.map_or_else(BTreeMap::new, |o| {
        o.iter()
            .filter(|(k, v)| published.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    })
}

/// The health step of the chain, when health ejects some routed provider: how many,
/// whether the cap on outliers lets some back, and whether calls then go to all of them
/// (the rule of [`route_around_capped`]).
fn health_step(routing: &Routing, left: &[Left], cap: u8) -> Option<String> {
    let routed: Vec<usize> = (0..left.len()).filter(|&i| routing.reaches(i)).collect();
    let set_aside = routed.iter().filter(|&&i| left[i] != Left::No).count();
    if set_aside == 0 {
        return None;
    }
    let mut kept = Vec::new();
    let around = route_around_capped(&routed, |i| left[i], cap, &mut kept);
    let of = routed.len();
    let mut step = if around.panic {
        format!("health: all {of} routed providers set aside; calls go to all of them (panic mode)")
    } else if around.capped_back == 0 {
        format!(
            "health: {set_aside} of {of} routed providers set aside; calls go to the other {}",
            kept.len()
        )
    } else {
        format!(
            "health: {set_aside} of {of} routed providers set aside; calls go to {} of them",
            kept.len()
        )
    };
    if around.capped_back > 0 {
        step.push_str(&format!(
            " ({} outlier(s) let back: at most {cap}% of the routed providers, rounded up, \
             may be left out for their failure rate or latency, or nothing else could take \
             the call)",
            around.capped_back
        ));
    }
    Some(step)
}

/// The call's tag as a request with `headers` would carry it.
fn call_tag(headers: &BTreeMap<String, String>, default: &CallTag) -> CallTag {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            map.insert(name, value);
        }
    }
    CallTag::of_request(&map, default)
}
