//! How consumer-side health behaves: [`HealthOptions`] (failures, outliers, probes, the
//! cap on ejections), and the [`Probe`] that checks a set-aside address.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;

/// Checks whether a set-aside address answers again.
///
/// Implemented by any `Fn(String, Duration) -> impl Future<Output = bool>` closure, called
/// with the address (an [`Authority`](crate::model::Authority): `host:port`, an IPv6 host in
/// brackets) and the probe deadline; it should answer within that
/// deadline (the caller does not enforce it).
pub trait Probe: Send + Sync + 'static {
    /// Whether `address` answers within `timeout`.
    fn probe(&self, address: String, timeout: Duration) -> BoxFuture<'static, bool>;
}

impl<F, Fut> Probe for F
where
    F: Fn(String, Duration) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    fn probe(&self, address: String, timeout: Duration) -> BoxFuture<'static, bool> {
        self(address, timeout).boxed()
    }
}

/// How consumer-side health behaves. Every part has a default; set them with the methods,
/// and read them with the `get_` methods of the same names.
#[derive(Clone)]
pub struct HealthOptions {
    pub(crate) enabled: bool,
    pub(crate) failure_threshold: u32,
    pub(crate) probe_interval: Duration,
    pub(crate) probe_timeout: Duration,
    pub(crate) probe_concurrency: usize,
    pub(crate) refused_at_once: bool,
    /// The application's probe; `None`: the gRPC-level one (`grpc_probe.rs`).
    pub(crate) probe: Option<Arc<dyn Probe>>,
    pub(crate) window: Duration,
    pub(crate) failure_rate: f64,
    pub(crate) failure_rate_min_calls: u32,
    pub(crate) latency_multiple: f64,
    pub(crate) latency_floor: Duration,
    pub(crate) latency_min_calls: u32,
    pub(crate) hung_after: Option<Duration>,
    pub(crate) max_ejection_percent: u8,
    pub(crate) max_probe_interval: Duration,
}

impl std::fmt::Debug for HealthOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthOptions")
            .field("enabled", &self.enabled)
            .field("failure_threshold", &self.failure_threshold)
            .field("probe_interval", &self.probe_interval)
            .field("probe_timeout", &self.probe_timeout)
            .field("probe_concurrency", &self.probe_concurrency)
            .field("refused_at_once", &self.refused_at_once)
            .field("window", &self.window)
            .field("failure_rate", &self.failure_rate)
            .field("failure_rate_min_calls", &self.failure_rate_min_calls)
            .field("latency_multiple", &self.latency_multiple)
            .field("latency_floor", &self.latency_floor)
            .field("latency_min_calls", &self.latency_min_calls)
            .field("hung_after", &self.hung_after)
            .field("max_ejection_percent", &self.max_ejection_percent)
            .field("max_probe_interval", &self.max_probe_interval)
            .finish_non_exhaustive()
    }
}

impl PartialEq for HealthOptions {
    /// Equal settings and the same probe (the same `Arc`).
    fn eq(&self, other: &Self) -> bool {
        self.enabled == other.enabled
            && self.failure_threshold == other.failure_threshold
            && self.probe_interval == other.probe_interval
            && self.probe_timeout == other.probe_timeout
            && self.probe_concurrency == other.probe_concurrency
            && self.refused_at_once == other.refused_at_once
            && self.window == other.window
            && self.failure_rate == other.failure_rate
            && self.failure_rate_min_calls == other.failure_rate_min_calls
            && self.latency_multiple == other.latency_multiple
            && self.latency_floor == other.latency_floor
            && self.latency_min_calls == other.latency_min_calls
            && self.hung_after == other.hung_after
            && self.max_ejection_percent == other.max_ejection_percent
            && self.max_probe_interval == other.max_probe_interval
            && match (&self.probe, &other.probe) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (a, b) => a.is_none() && b.is_none(),
            }
    }
}

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions {
            enabled: true,
            failure_threshold: 5,
            probe_interval: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(1),
            probe_concurrency: 16,
            refused_at_once: true,
            probe: None,
            window: Duration::from_secs(10),
            failure_rate: 0.2,
            failure_rate_min_calls: 20,
            latency_multiple: 3.0,
            latency_floor: Duration::from_millis(100),
            latency_min_calls: 5,
            hung_after: Some(Duration::from_secs(1)),
            max_ejection_percent: 50,
            max_probe_interval: Duration::from_secs(60),
        }
    }
}

impl HealthOptions {
    /// Ignores reports: no endpoint is ever set aside.
    pub fn disabled() -> Self {
        HealthOptions {
            enabled: false,
            ..Default::default()
        }
    }

    /// Probes set-aside endpoints with `probe` instead of the default, which proves a gRPC
    /// answer: a new HTTP/2 connection and a `grpc.health.v1.Health/Check` call within the
    /// probe timeout, any answer but `NOT_SERVING` (an `UNIMPLEMENTED` included) bringing
    /// the endpoint back. A TCP connect proves nothing: a stopped process still accepts.
    pub fn probe(mut self, probe: impl Probe) -> Self {
        self.probe = Some(Arc::new(probe));
        self
    }

    /// Whether reports set endpoints aside at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    crate::setters::option_accessors! {
        /// Sets the consecutive failures that set an endpoint aside (default
        /// 5, as Envoy's outlier detection; at least 1).
        failure_threshold / get_failure_threshold => failure_threshold: u32,
            |failures| failures.max(1);

        /// Sets the time between probes of a set-aside endpoint (default 5 s).
        probe_interval / get_probe_interval => probe_interval: Duration;

        /// Sets the deadline of one probe (default 1 s).
        probe_timeout / get_probe_timeout => probe_timeout: Duration;

        /// Sets how many probes the resolver runs at once, over all its subscriptions and
        /// channels (default 16, at least 1).
        probe_concurrency / get_probe_concurrency => probe_concurrency: usize,
            |probes| probes.max(1);

        /// Sets whether a refused connection sets an address aside at once (default `true`:
        /// nothing listens there) or counts as one failure like any other.
        refused_at_once / get_refused_at_once => refused_at_once: bool;

        /// Sets the window (default 10 s): an endpoint's failure rate is read over its last 64
        /// calls while they come within it of one another (a silence as long forgets them), and
        /// a latency older than it is stale (neither judged nor judging).
        window / get_window => window: Duration, |window| window.max(Duration::from_millis(2));

        /// Sets the failure rate that ejects an endpoint (default 0.2: a fifth of its last 64
        /// calls failed, as [`failure_threshold`](Self::failure_threshold) counts failures),
        /// once it took [`failure_rate_min_calls`](Self::failure_rate_min_calls). Over 1.0
        /// never ejects.
        failure_rate / get_failure_rate => failure_rate: f64,
            |rate| if rate.is_nan() { 2.0 } else { rate.max(0.0) };

        /// Sets the calls an endpoint takes before its failure rate is judged (default 20, at
        /// least 1; more than 64 never judges).
        failure_rate_min_calls / get_failure_rate_min_calls => failure_rate_min_calls: u32,
            |calls| calls.max(1);

        /// Sets how many times the median of the other endpoints' latency a method's recent
        /// latency at one endpoint must be for that endpoint to be ejected for the method
        /// (default 3.0; at least 1.0). Only the endpoints a method is called on are compared,
        /// and only on that method: a slow method ejects no endpoint for the others.
        latency_multiple / get_latency_multiple => latency_multiple: f64,
            |multiple| if multiple.is_nan() { f64::INFINITY } else { multiple.max(1.0) };

        /// Sets the latency under which no endpoint is ever slow, whatever the median (default
        /// 100 ms).
        latency_floor / get_latency_floor => latency_floor: Duration;

        /// Sets the answered calls of a method an endpoint takes in the window before its
        /// latency is judged or judges others (default 5, at least 1).
        latency_min_calls / get_latency_min_calls => latency_min_calls: u32, |calls| calls.max(1);

        /// Sets how long a call waits for its answer before the channel checks that its
        /// provider is alive (default 1 s; `None`: never): the probe, on a new connection,
        /// once per address at a time. A provider that does not answer it is ejected as hung,
        /// and the calls waiting on it fail at once (retried elsewhere when idempotent)
        /// instead of at their deadlines. Checking on a new connection rather than pinging the
        /// call's own costs grpc-java and grpc-go servers no ping strike.
        hung_after / get_hung_after => hung_after: Option<Duration>;

        /// Sets the most of a call's routed providers that outliers (failure rate, latency)
        /// may leave out, in percent, rounded up (default 50: two of three, two of four, at
        /// least one as Envoy's): past it, the outliers ejected longest stay out and the others
        /// take calls again. Endpoints that cannot be reached (refused,
        /// hung, failing every call, held) are not capped: a call to them fails; when every
        /// routed endpoint is out, calls go to all of them.
        max_ejection_percent / get_max_ejection_percent => max_ejection_percent: u8,
            |percent| percent.min(100);

        /// Sets the longest wait before an ejected endpoint is tried again (default 60 s): each
        /// ejection soon after the last waits one [`probe_interval`](Self::probe_interval)
        /// longer, up to this.
        max_probe_interval / get_max_probe_interval => max_probe_interval: Duration;
    }
}
