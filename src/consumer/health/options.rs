//! How consumer-side health behaves: [`HealthOptions`], and the [`Probe`] that checks a
//! set-aside address.

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

/// How consumer-side health behaves. Every part has a default; set them with the methods.
#[derive(Clone)]
pub struct HealthOptions {
    pub(crate) enabled: bool,
    pub(crate) failure_threshold: u32,
    pub(crate) probe_interval: Duration,
    pub(crate) probe_timeout: Duration,
    pub(crate) probe_concurrency: usize,
    pub(crate) refused_at_once: bool,
    pub(crate) probe: Arc<dyn Probe>,
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
            && Arc::ptr_eq(&self.probe, &other.probe)
    }
}

impl Default for HealthOptions {
    fn default() -> Self {
        HealthOptions {
            enabled: true,
            failure_threshold: HealthOptions::DEFAULT_FAILURE_THRESHOLD,
            probe_interval: HealthOptions::DEFAULT_PROBE_INTERVAL,
            probe_timeout: HealthOptions::DEFAULT_PROBE_TIMEOUT,
            probe_concurrency: HealthOptions::DEFAULT_PROBE_CONCURRENCY,
            refused_at_once: true,
            probe: default_probe(),
        }
    }
}

impl HealthOptions {
    /// Default consecutive failures that set an endpoint aside (as Envoy's outlier detection).
    pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;

    /// Default time between probes of a set-aside endpoint.
    pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(5);

    /// Default deadline of one probe.
    pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

    /// Default number of probes one resolver runs at once.
    pub const DEFAULT_PROBE_CONCURRENCY: usize = 16;

    /// Ignores reports: no endpoint is ever set aside.
    pub fn disabled() -> Self {
        HealthOptions {
            enabled: false,
            ..Default::default()
        }
    }

    /// Sets the consecutive failures that set an endpoint aside (default
    /// [`Self::DEFAULT_FAILURE_THRESHOLD`], at least 1).
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.failure_threshold = failures.max(1);
        self
    }

    /// Sets the time between probes of a set-aside endpoint (default
    /// [`Self::DEFAULT_PROBE_INTERVAL`]).
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// Sets the deadline of one probe (default [`Self::DEFAULT_PROBE_TIMEOUT`]).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Sets how many probes the resolver runs at once, over all its subscriptions and
    /// channels (default [`Self::DEFAULT_PROBE_CONCURRENCY`], at least 1).
    pub fn probe_concurrency(mut self, probes: usize) -> Self {
        self.probe_concurrency = probes.max(1);
        self
    }

    /// Sets whether a refused connection sets an address aside at once (default `true`:
    /// nothing listens there) or counts as one failure like any other.
    pub fn refused_at_once(mut self, at_once: bool) -> Self {
        self.refused_at_once = at_once;
        self
    }

    /// Probes set-aside endpoints with `probe` instead of a TCP connect (for a gRPC health
    /// check, say).
    pub fn probe(mut self, probe: impl Probe) -> Self {
        self.probe = Arc::new(probe);
        self
    }

    /// Whether reports set endpoints aside at all.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

/// The default probe: a TCP connect to the address within the deadline.
fn default_probe() -> Arc<dyn Probe> {
    Arc::new(|address: String, timeout: Duration| async move {
        matches!(
            tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await,
            Ok(Ok(_))
        )
    })
}
