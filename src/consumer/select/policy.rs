//! How one call is made: its cluster, retries, forks, load balancer and timeout, read as
//! Dubbo Java 3.3 reads them, each with where it came from. Pure.
//!
//! Java reads two URLs. The *directory's consumer URL* (the reference's own settings, then
//! consumer-side configurators over them) gives `retries` (`FailoverClusterInvoker`) and
//! `forks`; a provider's published `retries` is not read. The *first routed invoker's URL*
//! gives `loadbalance` (`AbstractClusterInvoker.initLoadBalance`) and `timeout`
//! (`TripleInvoker`), looked up layer by layer: configurators, then the consumer's own
//! settings (`InstanceAddressURL` reads the consumer's first for every key but a few), then
//! the provider's service parameters; within each layer `{method}.{key}` before `{key}`.
//! A per-call `retries` attachment (here the request header `retries`) wins over all. The
//! cluster itself is chosen once, from the consumer's settings, when Java makes the
//! reference: a configurator's `cluster` changes nothing there, and is reported so here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use super::loadbalance::LoadBalance;

/// Dubbo's `retries` when nothing sets it: three tries in all.
pub const DEFAULT_RETRIES: u32 = 2;
/// Dubbo's `forks` when nothing sets it.
pub const DEFAULT_FORKS: u32 = 2;

/// What to do when a call's attempt fails (Dubbo's `cluster`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Cluster {
    /// Try another provider, up to `retries` times (Dubbo's default). Only what is safe to
    /// retry is retried (see [`crate::consumer::ChannelOptions::retries`]).
    #[default]
    Failover,
    /// One try: a failure is the call's. A provider whose connection cannot be made is
    /// still passed over for another, as Java's pick passes over a disconnected one.
    Failfast,
    /// `forks` providers at once, the first success wins. It may process a call several
    /// times: only when set explicitly, and only for calls whose body fits the replay
    /// bound.
    Forking,
}

impl Cluster {
    /// The cluster Java names `name`; `None` for one not applied here (`failsafe`,
    /// `failback`, `broadcast`, `available`, `mergeable`, `zone-aware`, anything else).
    pub fn parse(name: &str) -> Option<Cluster> {
        match name.trim() {
            "failover" => Some(Cluster::Failover),
            "failfast" => Some(Cluster::Failfast),
            "forking" => Some(Cluster::Forking),
            _ => None,
        }
    }
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cluster::Failover => "failover",
            Cluster::Failfast => "failfast",
            Cluster::Forking => "forking",
        })
    }
}

/// Where a setting of a call came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Nothing set it: Dubbo's default.
    Default,
    /// The consumer's own options ([`crate::consumer::ChannelOptions`]).
    Consumer,
    /// A parameter the provider publishes, by key.
    Provider(String),
    /// A consumer-side configurator, by the parameter key it set.
    Configurator(String),
    /// The call itself (a request header, or the call's own deadline).
    Call(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Consumer => f.write_str("consumer option"),
            Source::Provider(key) => write!(f, "provider parameter {key}"),
            Source::Configurator(key) => write!(f, "configurator {key}"),
            Source::Call(what) => write!(f, "call {what}"),
        }
    }
}

/// One setting's value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value in force.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Setting<T> {
    fn default_of(value: T) -> Self {
        Setting {
            value,
            source: Source::Default,
        }
    }
}

/// The consumer's own settings of calls, per channel: Java's reference (and method) config.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerSettings {
    /// The cluster.
    pub cluster: Option<Cluster>,
    /// Retries after the first try.
    pub retries: Option<u32>,
    /// Providers a forking call goes to at once.
    pub forks: Option<u32>,
    /// The load balancer.
    pub loadbalance: Option<LoadBalance>,
    /// Per method: retries, load balancer, timeout.
    pub methods: BTreeMap<String, MethodSettings>,
    /// Methods whose calls may be processed twice (`*`: every method): their timeouts,
    /// lost connections and failing statuses are retried too.
    pub idempotent: BTreeSet<String>,
}

impl ConsumerSettings {
    /// Whether calls of `method` may be processed twice.
    pub fn is_idempotent(&self, method: Option<&str>) -> bool {
        !self.idempotent.is_empty()
            && (self.idempotent.contains("*")
                || method.is_some_and(|m| self.idempotent.contains(m)))
    }
}

/// Marks one call as safe to process twice (its request's extensions, e.g.
/// `request.extensions_mut().insert(Idempotent)` on a `tonic::Request`): a timeout, a lost
/// connection or a failing status is then retried on another provider, as for the methods
/// [`crate::consumer::ChannelOptions::idempotent`] names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Idempotent;

/// The consumer's settings of one method (Java's `<dubbo:method>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MethodSettings {
    /// Retries after the first try.
    pub retries: Option<u32>,
    /// The load balancer.
    pub loadbalance: Option<LoadBalance>,
    /// The deadline of the method's calls that set none.
    pub timeout: Option<Duration>,
}

/// How one call is made. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallPolicy {
    /// The cluster.
    pub cluster: Setting<Cluster>,
    /// Retries after the first try (failover).
    pub retries: Setting<u32>,
    /// Providers called at once (forking).
    pub forks: Setting<u32>,
    /// The load balancer.
    pub loadbalance: Setting<LoadBalance>,
    /// The deadline of a call that sets none itself (`None`: no deadline).
    pub timeout: Setting<Option<Duration>>,
    /// Values that were read and not applied, with why (a name not known, a number that
    /// does not parse): they are never guessed.
    pub not_applied: Vec<String>,
}

impl Default for CallPolicy {
    fn default() -> Self {
        CallPolicy {
            cluster: Setting::default_of(Cluster::Failover),
            retries: Setting::default_of(DEFAULT_RETRIES),
            forks: Setting::default_of(DEFAULT_FORKS),
            loadbalance: Setting::default_of(LoadBalance::default()),
            timeout: Setting::default_of(None),
            not_applied: Vec::new(),
        }
    }
}

/// What a call's policy is read from.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInputs<'a> {
    /// The consumer's own settings.
    pub consumer: &'a ConsumerSettings,
    /// The consumer's own deadline for calls that set none
    /// ([`crate::consumer::ChannelOptions::request_timeout`]).
    pub consumer_timeout: Option<Duration>,
    /// The first routed provider's service parameters as it publishes them.
    pub provider: &'a BTreeMap<String, String>,
    /// The parameters consumer-side configurators set on it (only those).
    pub configured: &'a BTreeMap<String, String>,
}

impl CallPolicy {
    /// The policy of a call of `method` (none: no method in particular) from `inputs`.
    pub fn resolve(inputs: &PolicyInputs<'_>, method: Option<&str>) -> CallPolicy {
        let mut policy = CallPolicy::default();
        let consumer = inputs.consumer;
        let own = method.and_then(|m| consumer.methods.get(m));
        if let Some(cluster) = consumer.cluster {
            policy.cluster = consumer_setting(cluster);
        }
        if let Some(value) = inputs.configured.get("cluster") {
            policy.not_applied.push(format!(
                "configurator cluster={value}: Java chooses the cluster once, when the \
                 reference is made; set it on the consumer"
            ));
        }
        // The directory's URL: configurators over the consumer's own; not the provider's.
        let configured_retries = lookup(inputs.configured, method, "retries", Source::Configurator);
        let retries = count(configured_retries, &mut policy)
            .or_else(|| own.and_then(|o| o.retries).map(consumer_setting))
            .or_else(|| consumer.retries.map(consumer_setting));
        if let Some(retries) = retries {
            policy.retries = retries;
        }
        let configured_forks = lookup(inputs.configured, None, "forks", Source::Configurator);
        let forks =
            count(configured_forks, &mut policy).or_else(|| consumer.forks.map(consumer_setting));
        if let Some(forks) = forks {
            policy.forks = forks;
        }
        // The invoker's URL: configurators, the consumer's own, the provider's.
        let configured_lb = lookup(
            inputs.configured,
            method,
            "loadbalance",
            Source::Configurator,
        );
        let provider_lb = lookup(inputs.provider, method, "loadbalance", Source::Provider);
        let own_lb = own
            .and_then(|o| o.loadbalance)
            .or(consumer.loadbalance)
            .map(consumer_setting);
        let named = |found, policy: &mut CallPolicy| {
            parsed(found, policy, |text| {
                LoadBalance::parse(text).map_err(|not_applied| not_applied.to_string())
            })
        };
        let lb = named(configured_lb, &mut policy)
            .or(own_lb)
            .or_else(|| named(provider_lb, &mut policy));
        if let Some(lb) = lb {
            policy.loadbalance = lb;
        }
        let configured_timeout = lookup(inputs.configured, method, "timeout", Source::Configurator);
        let provider_timeout = lookup(inputs.provider, method, "timeout", Source::Provider);
        let own_timeout = own
            .and_then(|o| o.timeout)
            .or(inputs.consumer_timeout)
            .map(|t| consumer_setting(Some(t)));
        let millis = |found, policy: &mut CallPolicy| {
            parsed(found, policy, |text| match text.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Ok(Some(Duration::from_millis(ms))),
                _ => Err(format!(
                    "timeout {text:?} is not a positive number of milliseconds"
                )),
            })
        };
        let timeout = millis(configured_timeout, &mut policy)
            .or(own_timeout)
            .or_else(|| millis(provider_timeout, &mut policy));
        if let Some(timeout) = timeout {
            policy.timeout = timeout;
        }
        policy
    }

    /// The tries a call may make in all: one, plus its retries under failover.
    pub fn tries(&self) -> u32 {
        match self.cluster.value {
            Cluster::Failover => self.retries.value.saturating_add(1),
            Cluster::Failfast | Cluster::Forking => 1,
        }
    }

    /// The policy with a call's own `retries` (its request header) in force.
    pub fn with_call_retries(mut self, retries: u32) -> CallPolicy {
        self.retries = Setting {
            value: retries,
            source: Source::Call("header retries".into()),
        };
        self
    }
}

fn consumer_setting<T>(value: T) -> Setting<T> {
    Setting {
        value,
        source: Source::Consumer,
    }
}

/// `{method}.{key}`, else `{key}`, in `params`, with its source.
fn lookup(
    params: &BTreeMap<String, String>,
    method: Option<&str>,
    key: &str,
    source: fn(String) -> Source,
) -> Option<(String, Source)> {
    if params.is_empty() {
        return None;
    }
    if let Some(method) = method {
        let own = format!("{method}.{key}");
        if let Some(value) = params.get(&own).filter(|v| !v.is_empty()) {
            return Some((value.clone(), source(own)));
        }
    }
    let value = params.get(key).filter(|v| !v.is_empty())?;
    Some((value.clone(), source(key.to_owned())))
}

/// A count (`retries`, `forks`) found, as Java reads it: a negative one reads as 0 (Java
/// makes at least one try). One that does not parse is reported, not applied.
fn count(found: Option<(String, Source)>, policy: &mut CallPolicy) -> Option<Setting<u32>> {
    parsed(found, policy, |text| match text.trim().parse::<i64>() {
        Ok(n) => Ok(u32::try_from(n.max(0)).unwrap_or(u32::MAX)),
        Err(_) => Err(format!("{text:?} is not a number")),
    })
}

/// A value found, read by `parse`; one it refuses is reported (with where it was found and
/// why) in the policy's values not applied, and not applied.
fn parsed<T>(
    found: Option<(String, Source)>,
    policy: &mut CallPolicy,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<Setting<T>> {
    let (text, source) = found?;
    match parse(&text) {
        Ok(value) => Some(Setting { value, source }),
        Err(why) => {
            policy.not_applied.push(format!("{source}: {why}"));
            None
        }
    }
}

/// The request header a call sets its own retries by (Dubbo's `retries` attachment); the
/// channel reads it and strips it before sending.
pub const RETRIES_HEADER: &str = "retries";

/// The retries a call asks for in its headers, if it asks for a number.
pub fn call_retries(headers: &http::HeaderMap) -> Option<u32> {
    let value = headers.get(RETRIES_HEADER)?.to_str().ok()?;
    let n: i64 = value.trim().parse().ok()?;
    Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn resolve(
        consumer: &ConsumerSettings,
        timeout: Option<Duration>,
        provider: &[(&str, &str)],
        configured: &[(&str, &str)],
        method: Option<&str>,
    ) -> CallPolicy {
        let (provider, configured) = (map(provider), map(configured));
        let inputs = PolicyInputs {
            consumer,
            consumer_timeout: timeout,
            provider: &provider,
            configured: &configured,
        };
        CallPolicy::resolve(&inputs, method)
    }

    #[test]
    fn nothing_set_is_failover_with_two_retries_and_no_deadline() {
        let policy = resolve(&ConsumerSettings::default(), None, &[], &[], None);
        assert_eq!(policy.cluster.value, Cluster::Failover);
        assert_eq!(policy.retries, Setting::default_of(2));
        assert_eq!(policy.tries(), 3);
        assert_eq!(policy.loadbalance.value, LoadBalance::P2c);
        assert_eq!(policy.timeout.value, None);
        assert!(policy.not_applied.is_empty());
    }

    #[test]
    fn retries_come_from_configurators_then_the_consumer_never_the_provider() {
        let consumer = ConsumerSettings {
            retries: Some(5),
            ..ConsumerSettings::default()
        };
        let provider = [("retries", "7")];
        let policy = resolve(&consumer, None, &provider, &[], None);
        assert_eq!(policy.retries.value, 5);
        assert_eq!(policy.retries.source, Source::Consumer);
        let policy = resolve(&ConsumerSettings::default(), None, &provider, &[], None);
        assert_eq!(policy.retries.value, 2, "a provider's retries is not read");
        let configured = [("retries", "0")];
        let policy = resolve(&consumer, None, &provider, &configured, None);
        assert_eq!(policy.retries.value, 0);
        assert_eq!(
            policy.retries.source,
            Source::Configurator("retries".into())
        );
        assert_eq!(policy.tries(), 1);
        let per_method = [("retries", "0"), ("SayHello.retries", "4")];
        let policy = resolve(&consumer, None, &[], &per_method, Some("SayHello"));
        assert_eq!(policy.retries.value, 4);
        assert_eq!(
            resolve(&consumer, None, &[], &[("retries", "-3")], None).tries(),
            1,
            "a negative count is one try"
        );
    }

    #[test]
    fn loadbalance_and_timeout_read_configurator_consumer_provider_method_first() {
        let mut consumer = ConsumerSettings::default();
        let provider = [
            ("loadbalance", "random"),
            ("SayHello.loadbalance", "roundrobin"),
            ("timeout", "500"),
        ];
        let policy = resolve(&consumer, None, &provider, &[], Some("SayHello"));
        assert_eq!(policy.loadbalance.value, LoadBalance::RoundRobin);
        assert_eq!(
            policy.loadbalance.source,
            Source::Provider("SayHello.loadbalance".into())
        );
        assert_eq!(policy.timeout.value, Some(Duration::from_millis(500)));
        consumer.loadbalance = Some(LoadBalance::LeastActive);
        let policy = resolve(
            &consumer,
            Some(Duration::from_secs(2)),
            &provider,
            &[],
            Some("SayHello"),
        );
        assert_eq!(policy.loadbalance.value, LoadBalance::LeastActive);
        assert_eq!(policy.timeout.value, Some(Duration::from_secs(2)));
        assert_eq!(policy.timeout.source, Source::Consumer);
        let configured = [("loadbalance", "consistenthash"), ("timeout", "9000")];
        let policy = resolve(
            &consumer,
            Some(Duration::from_secs(2)),
            &provider,
            &configured,
            Some("SayHello"),
        );
        assert_eq!(policy.loadbalance.value, LoadBalance::ConsistentHash);
        assert_eq!(policy.timeout.value, Some(Duration::from_secs(9)));
    }

    #[test]
    fn names_and_numbers_not_understood_are_reported_never_guessed() {
        let provider = [("loadbalance", "adaptive"), ("timeout", "soon")];
        let policy = resolve(&ConsumerSettings::default(), None, &provider, &[], None);
        assert_eq!(policy.loadbalance.value, LoadBalance::P2c);
        assert_eq!(policy.timeout.value, None);
        assert_eq!(policy.not_applied.len(), 2, "{:?}", policy.not_applied);
        assert!(policy.not_applied[0].contains("adaptive"));
        let configured = [("cluster", "forking"), ("retries", "many")];
        let policy = resolve(&ConsumerSettings::default(), None, &[], &configured, None);
        assert_eq!(policy.cluster.value, Cluster::Failover);
        assert_eq!(policy.retries.value, 2);
        assert_eq!(policy.not_applied.len(), 2, "{:?}", policy.not_applied);
    }

    #[test]
    fn clusters_by_java_names_and_the_tries_each_makes() {
        assert_eq!(Cluster::parse("failfast"), Some(Cluster::Failfast));
        assert_eq!(Cluster::parse("forking"), Some(Cluster::Forking));
        assert_eq!(Cluster::parse("failsafe"), None);
        let consumer = ConsumerSettings {
            cluster: Some(Cluster::Failfast),
            retries: Some(4),
            ..ConsumerSettings::default()
        };
        assert_eq!(resolve(&consumer, None, &[], &[], None).tries(), 1);
    }

    #[test]
    fn a_call_asks_for_its_own_retries_in_a_header() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(call_retries(&headers), None);
        headers.insert(RETRIES_HEADER, "0".parse().unwrap());
        assert_eq!(call_retries(&headers), Some(0));
        headers.insert(RETRIES_HEADER, "x".parse().unwrap());
        assert_eq!(call_retries(&headers), None);
        let policy = CallPolicy::default().with_call_retries(1);
        assert_eq!(policy.tries(), 2);
    }
}
