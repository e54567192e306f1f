//! The providers of one service as the rules see them (configurators applied), and the
//! clusters of the subsets the routes send calls to.

use std::collections::{BTreeMap, BTreeSet};

use introspect::Endpoint;
use introspect::consumer::LoadBalance;
use introspect::governance::{ProviderFacts, RouteParams, RuleSet, effective_weight};

use super::{ClusterPlan, Input};
use crate::callable::grpc_callable;

/// One provider in a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its host (unbracketed).
    pub host: String,
    /// The port calls go to.
    pub port: u16,
    /// Its app.
    pub app: String,
    /// Its weight now (warm-up applied), as sent: never 0 (providers of weight 0 are left
    /// out while another weighs more; all weigh 1 when none does).
    pub weight: u32,
    /// Its weight as published and configured, before warm-up.
    pub published_weight: u32,
    /// Whether it is still warming up.
    pub warming: bool,
    /// The parameters configurators set on it, with their new values.
    pub configured: BTreeMap<String, String>,
}

/// The gRPC-callable providers of a service, one per address, sorted, with their
/// parameters as configurators leave them.
pub(super) struct Members {
    endpoints: Vec<Endpoint>,
    /// Each one's parameters, configurators applied.
    params: Vec<BTreeMap<String, String>>,
    routes: Vec<RouteParams>,
    now_ms: i64,
    /// What cannot be said of them over xDS.
    pub(super) unexpressed: Vec<String>,
    /// When a warming provider's weight next grows by a step.
    pub(super) next_ramp_ms: Option<i64>,
}

/// How many steps a warm-up is pushed in: its weights are sent again as it ramps, in
/// tenths of the warm-up period (a minute each by default), not on every change.
const RAMP_STEPS: i64 = 10;
/// The shortest time between two ramp pushes.
const MIN_RAMP_STEP_MS: i64 = 1_000;

impl Members {
    /// The providers of `input`.
    pub(super) fn of(input: &Input<'_>) -> Members {
        let mut endpoints: Vec<Endpoint> = input
            .endpoints
            .iter()
            .filter(|e| grpc_callable(e))
            .cloned()
            .collect();
        endpoints.sort_by(|a, b| (&*a.host, a.port).cmp(&(&*b.host, b.port)));
        endpoints.dedup_by(|a, b| a.host == b.host && a.port == b.port);
        let params: Vec<BTreeMap<String, String>> = endpoints
            .iter()
            .map(|e| {
                input
                    .rules
                    .configure(input.consumer, &ProviderFacts::of(e, e.params()))
                    .unwrap_or_else(|| e.params().clone())
            })
            .collect();
        let routes: Vec<RouteParams> = endpoints
            .iter()
            .zip(&params)
            .map(|(e, p)| RouteParams::of_overridden(e, p))
            .collect();
        let mut unexpressed = Vec::new();
        let per_method: Vec<String> = endpoints
            .iter()
            .zip(&routes)
            .filter(|(_, r)| r.has_method_weights())
            .map(|(e, _)| e.address())
            .collect();
        if !per_method.is_empty() {
            unexpressed.push(format!(
                "per-method weights ({{method}}.weight) of {}: a cluster carries each \
                 provider's service weight",
                per_method.join(", ")
            ));
        }
        let next_ramp_ms = routes
            .iter()
            .filter_map(|r| next_ramp(r, input.now_ms))
            .min();
        Members {
            endpoints,
            params,
            routes,
            now_ms: input.now_ms,
            unexpressed,
            next_ramp_ms,
        }
    }

    /// What rules see of each provider.
    pub(super) fn facts(&self) -> Vec<ProviderFacts<'_>> {
        self.endpoints
            .iter()
            .zip(&self.params)
            .map(|(e, p)| ProviderFacts::of(e, p))
            .collect()
    }

    /// Whether each provider takes calls (`disabled`, configurators applied).
    pub(super) fn enabled(&self) -> Vec<bool> {
        self.routes.iter().map(|r| r.enabled).collect()
    }

    /// The tags calls may carry that route differently: the providers' static tags and
    /// the tags of their apps' tag rules.
    pub(super) fn tags(&self, rules: &RuleSet) -> BTreeSet<String> {
        let mut tags: BTreeSet<String> = self
            .routes
            .iter()
            .filter_map(|r| r.tag.as_deref().map(str::to_owned))
            .collect();
        let apps: BTreeSet<&str> = self.endpoints.iter().map(|e| &*e.app).collect();
        for app in apps {
            if let Some(rule) = rules.tag_rule(app) {
                tags.extend(rule.tag_names().map(str::to_owned));
            }
        }
        tags.retain(|t| !t.is_empty());
        tags
    }

    /// Provider `i`'s published parameters.
    pub(super) fn published(&self, i: usize) -> &BTreeMap<String, String> {
        self.endpoints[i].params()
    }

    /// The parameters configurators set on provider `i` (only those).
    pub(super) fn configured(&self, i: usize) -> BTreeMap<String, String> {
        let published = self.published(i);
        self.params[i]
            .iter()
            .filter(|(k, v)| published.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The address of provider `i` (`host:port`).
    pub(super) fn address(&self, i: usize) -> String {
        self.endpoints[i].address()
    }

    /// The cluster `name` of the providers `subset`: each weighed as a balanced channel
    /// weighs it (configured weight, warm-up). Envoy and gRPC take no weight of 0, so
    /// providers of weight 0 are left out while another weighs more, and all weigh 1 when
    /// none does (Java's uniform pick).
    pub(super) fn cluster(&self, name: &str, subset: &[usize]) -> ClusterPlan {
        let mut members: Vec<Member> = subset
            .iter()
            .map(|&i| {
                let r = &self.routes[i];
                let e = &self.endpoints[i];
                let weight = effective_weight(r.weight, r.warmup_ms, r.timestamp_ms, self.now_ms);
                Member {
                    host: e
                        .host
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_owned(),
                    port: e.port,
                    app: e.app.to_string(),
                    weight,
                    published_weight: r.weight.max(0).unsigned_abs(),
                    warming: next_ramp(r, self.now_ms).is_some(),
                    configured: self.configured(i),
                }
            })
            .collect();
        if members.iter().all(|m| m.weight == 0) {
            members.iter_mut().for_each(|m| m.weight = 1);
        } else {
            members.retain(|m| m.weight > 0);
        }
        let weights: Vec<u32> = members.iter().map(|m| m.weight).collect();
        for (m, w) in members.iter_mut().zip(super::fit_u32(&weights)) {
            m.weight = w;
        }
        let loadbalance = subset
            .first()
            .and_then(|&i| self.params[i].get("loadbalance"))
            .and_then(|name| LoadBalance::parse(name).ok())
            .unwrap_or_default();
        ClusterPlan {
            name: name.to_owned(),
            members,
            loadbalance,
        }
    }
}

/// When provider `r`'s warm-up weight next grows by a step, if it is warming at `now_ms`.
fn next_ramp(r: &RouteParams, now_ms: i64) -> Option<i64> {
    let warmup = i64::from(r.warmup_ms);
    if r.timestamp_ms <= 0 || warmup <= 0 || now_ms >= r.timestamp_ms + warmup {
        return None;
    }
    let step = (warmup / RAMP_STEPS).max(MIN_RAMP_STEP_MS);
    let elapsed = (now_ms - r.timestamp_ms).max(0);
    Some(r.timestamp_ms + (elapsed / step + 1) * step)
}

/// The name of the cluster of `subset`: the service's own for the untagged call's subset
/// (`default`), `{service}/none` for no provider, else `{service}/` and a digest of its
/// members' addresses (a service name has no `/`, so no cluster name is another service's).
pub(super) fn cluster_name(
    service: &str,
    subset: &[usize],
    default: &[usize],
    members: &Members,
) -> String {
    if subset == default {
        return service.to_owned();
    }
    if subset.is_empty() {
        return format!("{service}/none");
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &i in subset {
        for byte in members.address(i).bytes().chain([b',']) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{service}/{:012x}", hash >> 16)
}
