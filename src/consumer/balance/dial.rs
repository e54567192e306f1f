//! How a balanced channel dials its endpoints: the options (connect and request timeouts,
//! TLS) and the tonic endpoint of one address, with the identity check when there is one.

use std::collections::BTreeMap;
use std::time::Duration;

use tonic::transport::Endpoint as TonicEndpoint;

use crate::consumer::select::{
    Cluster, ConsumerSettings, LoadBalance, MethodSettings, RetryBudget,
};
use crate::error::{Error, Result};
use crate::governance::{CallTag, ConsumerIdentity};
use crate::model::Authority;
use crate::tls::{ClientTlsConfig, IdentityCheck, Refusals};

/// Which TLS configuration the channel's endpoints use.
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) enum TlsChoice {
    /// The resolver's (plaintext when it has none).
    #[default]
    FromResolver,
    /// This one.
    Use(Box<ClientTlsConfig>),
    /// None: plaintext whatever the resolver uses.
    Plaintext,
}

/// How a balanced channel dials its endpoints. Every part has a default (read the plain ones
/// with the `get_` methods).
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Option<Duration>,
    pub(super) tls: TlsChoice,
    pub(super) capacity: usize,
    pub(super) passive_health: bool,
    pub(super) endpoint_wait: Duration,
    pub(super) tag: CallTag,
    /// The channel's own consumer parameters, checked when the channel is built.
    pub(super) consumer_params: BTreeMap<String, String>,
    pub(super) calls: ConsumerSettings,
    pub(super) retry_budget: RetryBudget,
    pub(super) replay_limit: usize,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: None,
            tls: TlsChoice::FromResolver,
            capacity: 1024,
            passive_health: true,
            endpoint_wait: Duration::from_secs(3),
            tag: CallTag::none(),
            consumer_params: BTreeMap::new(),
            calls: ConsumerSettings::default(),
            retry_budget: RetryBudget::default(),
            replay_limit: 64 * 1024,
        }
    }
}

impl ChannelOptions {
    /// Sets the deadline of calls that set none themselves (default: none; set deadlines
    /// per call with `tonic::Request::set_timeout`): the consumer's own `timeout`, as
    /// Dubbo reads it, over a provider's published `timeout` and under a consumer-side
    /// configurator's. A call's own deadline is never later than this. A call's deadline
    /// bounds all its attempts and its wait for an endpoint: still waiting when it passes,
    /// it fails with UNAVAILABLE.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Dials the endpoints over TLS with this configuration instead of the resolver's. The
    /// resolver's identity check still applies (this configuration then names no CA).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = TlsChoice::Use(Box::new(tls));
        self
    }

    /// Dials the endpoints in plaintext even when the resolver uses TLS. No identity can be
    /// checked then.
    pub fn plaintext(mut self) -> Self {
        self.tls = TlsChoice::Plaintext;
        self
    }

    /// Tags the calls that carry no `dubbo.tag` header of their own with `tag` (default:
    /// none), as a Dubbo consumer's own `dubbo.tag`: they go to providers of that tag, else
    /// to untagged ones. An empty tag is no tag.
    pub fn tag(mut self, tag: &str) -> Self {
        self.tag = CallTag::new(tag, self.tag.force);
        self
    }

    /// Sets whether tagged calls go only to providers of their tag, never falling back to
    /// untagged ones (default `false`; Dubbo's `dubbo.force.tag`). A request's own
    /// `dubbo.force.tag` header wins.
    pub fn force_tag(mut self, force: bool) -> Self {
        self.tag.force = force;
        self
    }

    /// Adds a parameter of this channel's consumer URL, over the resolver's
    /// ([`ResolverBuilder::consumer_param`](crate::consumer::ResolverBuilder::consumer_param),
    /// whose rules it follows): what condition rules read of this reference alone. A key
    /// set twice keeps its last value. A key or value the resolver's setter would refuse
    /// makes [`Resolver::balanced_channel_with`](crate::consumer::Resolver::balanced_channel_with)
    /// fail.
    pub fn consumer_param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.consumer_params.insert(key.into(), value.into());
        self
    }

    /// What rules see of this channel's consumer: `own` (the resolver's consumer) as a
    /// reference of `interface`, `version` and `group`, tagged with this channel's tag and
    /// with its own parameters. Fails on a parameter of its own that is not valid.
    pub(crate) fn consumer_of(
        &self,
        own: &ConsumerIdentity,
        interface: &str,
        version: Option<&str>,
        group: Option<&str>,
    ) -> Result<ConsumerIdentity> {
        Ok(own
            .with_params(&self.consumer_params)?
            .for_channel(interface, version, group, &self.tag))
    }

    /// Sets Dubbo's `cluster` of the channel's calls (default [`Cluster::Failover`]): what
    /// a failed attempt leads to. Java chooses it once, from the consumer's settings, as
    /// here; a configurator's `cluster` is reported, not applied.
    pub fn cluster(mut self, cluster: Cluster) -> Self {
        self.calls.cluster = Some(cluster);
        self
    }

    /// Sets Dubbo's `retries` (default 2, Dubbo's): how many more providers a failed call
    /// may try under failover. Only what is safe is retried: an attempt that never reached
    /// its provider (connection refused or not made, `REFUSED_STREAM`, a graceful
    /// `GOAWAY` above it) or that the provider declined unprocessed (a trailers-only
    /// `UNAVAILABLE` or `UNIMPLEMENTED`); timeouts, lost connections and other statuses
    /// only for [idempotent](Self::idempotent) calls. Each retry goes to a provider the
    /// call has not tried, inside the call's deadline and the
    /// [retry budget](Self::retry_budget). A consumer-side configurator's `retries` (what
    /// dubbo-admin's retry page writes) overrides this; a request header `retries` overrides
    /// both for one call (it is not sent). 0 turns retries off, but a provider whose
    /// connection cannot be made is still passed over for another, as Java's pick passes
    /// over a disconnected one.
    pub fn retries(mut self, retries: u32) -> Self {
        self.calls.retries = Some(retries);
        self
    }

    /// Sets Dubbo's `forks` (default 2): how many providers a call goes to at once under
    /// [`Cluster::Forking`].
    pub fn forks(mut self, forks: u32) -> Self {
        self.calls.forks = Some(forks.max(1));
        self
    }

    /// Sets Dubbo's `loadbalance` (default: none, which picks by weight and load, see
    /// [`LoadBalance::P2c`]). A consumer-side configurator's overrides it; it overrides a
    /// provider's published `loadbalance`.
    pub fn loadbalance(mut self, loadbalance: LoadBalance) -> Self {
        self.calls.loadbalance = Some(loadbalance);
        self
    }

    /// Sets `retries`, `loadbalance` and `timeout` for calls of one method (Java's
    /// `<dubbo:method>`), over the channel's own.
    pub fn method(mut self, method: &str, settings: MethodSettings) -> Self {
        self.calls.methods.insert(method.to_owned(), settings);
        self
    }

    /// Marks calls of `method` (`*`: every method) as safe to process twice: their
    /// timeouts, lost connections and the statuses of
    /// [`IDEMPOTENT_RETRY_CODES`](crate::consumer::IDEMPOTENT_RETRY_CODES) are retried
    /// too. Read a method's `idempotency_level` from its proto to decide; one call can be
    /// marked with the [`Idempotent`](crate::consumer::Idempotent) request extension.
    pub fn idempotent(mut self, method: &str) -> Self {
        self.calls.idempotent.insert(method.to_owned());
        self
    }

    /// Sets how much retrying the channel may add (default [`RetryBudget::default`]:
    /// 20% of calls plus 10 per second over 10 s, linkerd's).
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.retry_budget = budget;
        self
    }

    /// Sets how many endpoint changes are buffered for the balancer (default
    /// 1024, at least 1).
    pub fn change_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// The deadline of calls that set none themselves, in effect (see
    /// [`request_timeout`](Self::request_timeout)).
    pub fn get_request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// How many endpoint changes are buffered, in effect (see
    /// [`change_capacity`](Self::change_capacity)).
    pub fn get_change_capacity(&self) -> usize {
        self.capacity
    }

    crate::setters::option_accessors! {
        /// Sets the deadline of one connection attempt (default 3 s).
        connect_timeout / get_connect_timeout => connect_timeout: Duration;

        /// Sets whether the channel records each call's outcome into the resolver's
        /// consumer-side health (default `true`: passive health). Off, endpoints are still left
        /// out while health sets them aside (on the application's reports, or while a held
        /// instance does not answer its probe), but calls through the channel never do so.
        passive_health / get_passive_health => passive_health: bool;

        /// Sets how long a call waits for the balancer to have an endpoint that may take it
        /// (default 3 s), whatever its deadline: one still waiting then
        /// fails with UNAVAILABLE, so a call without a deadline never hangs because no endpoint
        /// comes. While the subscription resolves to nothing, calls fail at once instead,
        /// saying why. A call handed to an endpoint whose connection cannot be made fails after
        /// the connect timeout; one whose server accepts it waits for its answer up to its own
        /// deadline (set one, or [`request_timeout`](Self::request_timeout)).
        endpoint_wait / get_endpoint_wait => endpoint_wait: Duration;

        /// Sets how many bytes of a request body are kept so that a retry can send it again
        /// (default 64 KiB: a unary call's message is usually far below it): a call whose body is
        /// larger is sent once.
        replay_limit / get_replay_limit => replay_limit: usize;
    }
}

/// Makes the tonic endpoint of one address.
#[derive(Clone, Debug)]
pub(super) struct Dialer {
    pub(super) connect_timeout: Duration,
    pub(super) tls: Option<ClientTlsConfig>,
    /// The identity check of every TLS connection, if any.
    pub(super) identity: Option<IdentityCheck>,
}

impl Dialer {
    /// Whether endpoints are checked before they join (TLS with an identity check).
    pub(super) fn checks_identity(&self) -> bool {
        self.tls.is_some() && self.identity.is_some()
    }

    /// The endpoint of `address` (TLS without an identity check, or plaintext).
    pub(super) fn endpoint(&self, address: &Authority) -> Result<TonicEndpoint> {
        self.endpoint_with(address, None)
    }

    /// The endpoint of `address`, resolved for `app`, whose every TLS handshake checks the
    /// server's identity and tells each refusal to `refusals`.
    pub(super) fn checked(
        &self,
        address: &Authority,
        app: &str,
        refusals: Refusals,
    ) -> Result<TonicEndpoint> {
        self.endpoint_with(address, Some((app, refusals)))
    }

    fn endpoint_with(
        &self,
        address: &Authority,
        checked: Option<(&str, Refusals)>,
    ) -> Result<TonicEndpoint> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let invalid = |reason: String| Error::Connect {
            address: address.to_string(),
            reason,
            source: None,
        };
        // No request timeout here: the channel writes each attempt's deadline into its
        // `grpc-timeout`, which tonic enforces.
        let endpoint = TonicEndpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| invalid(e.to_string()).caused_by(e))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        let applied = match (&self.tls, &self.identity, checked) {
            (Some(tls), Some(identity), Some((app, refusals))) => {
                let at = address.as_str();
                crate::tls::apply_identity(endpoint, tls, identity, app, at, refusals)
            }
            (Some(tls), _, _) => crate::tls::apply(endpoint, tls),
            (None, _, _) => Ok(endpoint),
        };
        applied.map_err(|e| invalid(format!("TLS: {e}")).caused_by(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialer_applies_scheme_and_rejects_garbage() {
        let dialer = Dialer {
            connect_timeout: Duration::from_secs(1),
            tls: None,
            identity: None,
        };
        let e = dialer.endpoint(&Authority::new("127.0.0.1", 80)).unwrap();
        assert_eq!(e.uri().to_string(), "http://127.0.0.1:80/");
        let v6 = dialer.endpoint(&Authority::new("::1", 80)).unwrap();
        assert_eq!(v6.uri().to_string(), "http://[::1]:80/");
        assert!(dialer.endpoint(&Authority::new("bad host", 80)).is_err());
    }

    #[test]
    fn a_channel_routes_as_its_own_reference_of_the_consumer() {
        let own = ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
        let options = ChannelOptions::default()
            .tag("gray")
            .consumer_param("zone", "a");
        let consumer = options
            .consumer_of(&own, "helloworld.Greeter", Some("1.0.0"), None)
            .unwrap();
        let p = |k: &str| consumer.params.get(k).map(String::as_str);
        assert_eq!(p("interface"), Some("helloworld.Greeter"));
        assert_eq!(p("version"), Some("1.0.0"));
        assert_eq!(p("group"), None);
        assert_eq!(p("dubbo.tag"), Some("gray"));
        assert_eq!(p("zone"), Some("a"));
        assert_eq!(p("application"), Some("shop"));
        let bad = ChannelOptions::default().consumer_param("interface", "other.Service");
        let error = bad
            .consumer_of(&own, "helloworld.Greeter", None, None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("consumer parameter \"interface\""),
            "{error}"
        );
    }
}
