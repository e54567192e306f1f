//! How the calls of a route are made, in xDS terms: Dubbo's `retries` and `timeout` as the
//! library reads them for the route's first provider ([`CallPolicy`]), each cluster's load
//! balancer, and consumer-side ejection as outlier detection. What xDS cannot say is noted.

use std::time::Duration;

use introspect::consumer::{
    CallPolicy, Cluster, ConsumerSettings, HealthOptions, LoadBalance, PolicyInputs,
};

use super::ClusterPlan;
use super::members::Members;

/// How a route's calls are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutePolicy {
    /// Retries after the first try: `retries` under `failover`, none under `failfast`.
    pub retries: u32,
    /// The call's deadline when it sets none (`timeout`), if any.
    pub timeout: Option<Duration>,
    /// Where the retries and the timeout came from, in words.
    pub from: String,
}

impl RoutePolicy {
    /// The policy of calls of `method` whose first routed provider is `first` (none: no
    /// provider, no calls made).
    pub(super) fn of(
        members: &Members,
        first: Option<usize>,
        method: Option<&str>,
        unexpressed: &mut Vec<String>,
    ) -> RoutePolicy {
        let Some(first) = first else {
            return RoutePolicy {
                retries: 0,
                timeout: None,
                from: "no provider".to_owned(),
            };
        };
        let settings = ConsumerSettings::default();
        let configured = members.configured(first);
        let inputs = PolicyInputs {
            consumer: &settings,
            consumer_timeout: None,
            provider: members.published(first),
            configured: &configured,
        };
        let policy = CallPolicy::resolve(&inputs, method);
        if policy.cluster.value == Cluster::Forking {
            unexpressed.push(
                "cluster forking: xDS has no parallel tries; calls are tried once with retries"
                    .to_owned(),
            );
        }
        unexpressed.extend(policy.not_applied.iter().cloned());
        RoutePolicy {
            retries: policy.tries().saturating_sub(1),
            timeout: policy.timeout.value,
            from: format!(
                "cluster {} ({}), retries {} ({}), timeout {} ({})",
                policy.cluster.value,
                policy.cluster.source,
                policy.retries.value,
                policy.retries.source,
                policy
                    .timeout
                    .value
                    .map_or_else(|| "none".to_owned(), |t| format!("{} ms", t.as_millis())),
                policy.timeout.source
            ),
        }
    }
}

/// Consumer-side ejection as xDS outlier detection says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outliers {
    /// Consecutive failures that eject a provider (Envoy's `consecutive_5xx`; gRPC has no
    /// such ejection).
    pub consecutive_failures: u32,
    /// The failure rate that ejects a provider, in percent.
    pub failure_percent: u32,
    /// The calls a provider must have taken in a window for its rate to count.
    pub min_calls: u32,
    /// The window rates are taken over.
    pub interval: Duration,
    /// How long a first ejection lasts.
    pub base_ejection: Duration,
    /// The most providers ejected at once, in percent.
    pub max_ejection_percent: u32,
}

impl Outliers {
    /// What `options` eject, as outlier detection.
    pub(super) fn of(options: &HealthOptions) -> Outliers {
        Outliers {
            consecutive_failures: options.get_failure_threshold(),
            failure_percent: (options.get_failure_rate() * 100.0)
                .round()
                .clamp(0.0, 100.0) as u32,
            min_calls: options.get_failure_rate_min_calls(),
            // Envoy takes neither of 0.
            interval: options.get_window().max(Duration::from_millis(1)),
            base_ejection: options.get_probe_interval().max(Duration::from_millis(1)),
            max_ejection_percent: u32::from(options.get_max_ejection_percent()),
        }
    }
}

/// Notes what the load balancer of `cluster` cannot be for a client.
pub(super) fn note_loadbalance(cluster: &ClusterPlan, unexpressed: &mut Vec<String>) {
    let note = match cluster.loadbalance {
        LoadBalance::RoundRobin | LoadBalance::P2c | LoadBalance::LeastActive => return,
        LoadBalance::Random => {
            "loadbalance random: sent as weighted round robin (the same shares, in turn \
             rather than at random)"
        }
        LoadBalance::ShortestResponse => {
            "loadbalance shortestresponse: xDS has no latency-aware balancer; least request \
             for Envoy, round robin for gRPC"
        }
        LoadBalance::ConsistentHash => {
            "loadbalance consistenthash: Dubbo hashes the call's arguments, which xDS cannot \
             read; weighted round robin"
        }
    };
    unexpressed.push(format!("{}: {note}", cluster.name));
}

/// Notes what consumer-side ejection xDS cannot say.
pub(super) fn note_outliers(options: &HealthOptions, unexpressed: &mut Vec<String>) {
    if !options.is_enabled() {
        return;
    }
    unexpressed.push(
        "ejection of slow providers (latency against the others) and of hung connections: \
         xDS outlier detection counts failures only"
            .to_owned(),
    );
    unexpressed.push(
        "ejection after consecutive failures: Envoy only (gRPC ejects by failure rate)".to_owned(),
    );
}
