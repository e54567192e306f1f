//! Consumer-side health: endpoints that keep failing calls are set aside and probed.
//!
//! Call outcomes are reported for an address (`host:port`): by the balanced channel for
//! every call it routes (passive health), or by the application through a
//! [`crate::SubscriptionHandle`]. After a number of consecutive failures the address is set
//! aside and probed at an interval; a refused connection sets it aside at once (nothing
//! listens there). An instance that self-preservation holds is *suspect*: set aside and
//! probed at once, so that calls go to it only once it answers. The first probe (or
//! reported call) that succeeds brings an address back. The tracker here is pure; the
//! resolver keeps one for all its subscriptions and channels (see `probes.rs`), and the
//! probe is the one piece of I/O: a TCP connect by default, or any [`Probe`] given to
//! [`HealthOptions::probe`]. A probe that panics counts as a failed one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::time::Instant;

/// Default consecutive failures that set an endpoint aside (as Envoy's outlier detection).
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// Default time between probes of a set-aside endpoint.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// Default deadline of one probe.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a set-aside address that is no endpoint any more stays set aside (unprobed)
/// before it is forgotten: longer than a subscription and its channels take to drop it.
const FORGET_GRACE: Duration = Duration::from_secs(10);

/// Default number of probes one resolver runs at once.
pub const DEFAULT_PROBE_CONCURRENCY: usize = 16;

/// The outcome of one call, as health sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The call got an answer (any status but UNAVAILABLE or DEADLINE_EXCEEDED).
    Success,
    /// A transport error, UNAVAILABLE or DEADLINE_EXCEEDED.
    Failure,
    /// The connection was refused: nothing listens at the address.
    Refused,
}

/// Checks whether a set-aside address answers again.
///
/// Implemented by any `Fn(String, Duration) -> impl Future<Output = bool>` closure, called
/// with the address (`host:port`) and the probe deadline; it should answer within that
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
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            probe_interval: DEFAULT_PROBE_INTERVAL,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            probe_concurrency: DEFAULT_PROBE_CONCURRENCY,
            refused_at_once: true,
            probe: default_probe(),
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

    /// Sets the consecutive failures that set an endpoint aside (default
    /// [`DEFAULT_FAILURE_THRESHOLD`], at least 1).
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.failure_threshold = failures.max(1);
        self
    }

    /// Sets the time between probes of a set-aside endpoint (default
    /// [`DEFAULT_PROBE_INTERVAL`]).
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// Sets the deadline of one probe (default [`DEFAULT_PROBE_TIMEOUT`]).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Sets how many probes the resolver runs at once, over all its subscriptions and
    /// channels (default [`DEFAULT_PROBE_CONCURRENCY`], at least 1).
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

#[derive(Clone, Debug, Default)]
struct State {
    failures: u32,
    set_aside: bool,
    /// Set aside as suspect (held by self-preservation), not for failed calls.
    suspect: bool,
    /// Since when the address is no endpoint any more (it stays set aside, unprobed, for
    /// [`FORGET_GRACE`], so that channels still holding it do not call it meanwhile).
    gone_since: Option<Instant>,
    next_probe: Option<Instant>,
    probing: bool,
}

/// Health of endpoints by address (`host:port`).
#[derive(Clone, Debug)]
pub(crate) struct HealthTracker {
    options: HealthOptions,
    by_address: HashMap<String, State>,
}

impl HealthTracker {
    /// Nothing reported yet.
    pub fn new(options: HealthOptions) -> Self {
        HealthTracker {
            options,
            by_address: HashMap::new(),
        }
    }

    /// A call to `address` succeeded. Returns whether that brought it back from aside.
    pub fn success(&mut self, address: &str) -> bool {
        match self.by_address.remove(address) {
            Some(state) => state.set_aside,
            None => false,
        }
    }

    /// A call to `address` failed at `now`. Returns whether that set it aside.
    #[cfg(test)]
    pub fn failure(&mut self, address: &str, now: Instant) -> bool {
        self.record(address, Outcome::Failure, now)
    }

    /// Records one call's outcome at `now`. Returns whether that changed whether `address`
    /// is set aside.
    pub fn record(&mut self, address: &str, outcome: Outcome, now: Instant) -> bool {
        if outcome == Outcome::Success {
            return self.success(address);
        }
        if !self.options.enabled {
            return false;
        }
        let threshold = match outcome {
            Outcome::Refused if self.options.refused_at_once => 1,
            _ => self.options.failure_threshold,
        };
        let state = self.by_address.entry(address.to_owned()).or_default();
        state.failures = state.failures.saturating_add(1);
        state.gone_since = None;
        if state.suspect && state.failures >= threshold {
            // A suspect that fails calls (panic mode routed to it) is failing.
            state.suspect = false;
            return true;
        }
        if !state.set_aside && state.failures >= threshold {
            state.set_aside = true;
            state.next_probe = Some(now + self.options.probe_interval);
            return true;
        }
        false
    }

    /// `address` is suspect (self-preservation holds it): set aside until a probe, due at
    /// once, answers. Returns whether it was not set aside before.
    pub fn suspect(&mut self, address: &str, now: Instant) -> bool {
        if !self.options.enabled {
            return false;
        }
        let state = self.by_address.entry(address.to_owned()).or_default();
        state.gone_since = None;
        let newly = !state.set_aside;
        if newly {
            state.set_aside = true;
            state.suspect = true;
        }
        if !state.probing {
            state.next_probe = Some(now);
        }
        newly
    }

    /// Probes `address` at once if it is set aside (its record was written again).
    pub fn probe_soon(&mut self, address: &str, now: Instant) {
        if let Some(state) = self.by_address.get_mut(address)
            && state.set_aside
            && !state.probing
        {
            state.gone_since = None;
            state.next_probe = Some(now);
        }
    }

    /// `address` is no endpoint any more at `now`: forgotten at once if it is not set
    /// aside, else after a grace, unprobed meanwhile. Forgets the addresses whose grace
    /// ended; returns whether one of them was set aside.
    pub fn forget(&mut self, address: &str, now: Instant) -> bool {
        if let Some(state) = self.by_address.get_mut(address) {
            if state.set_aside {
                state.gone_since.get_or_insert(now);
            } else {
                self.by_address.remove(address);
            }
        }
        let before = self.by_address.len();
        self.by_address
            .retain(|_, s| s.gone_since.is_none_or(|t| now < t + FORGET_GRACE));
        self.by_address.len() != before
    }

    /// The set-aside addresses due for a probe at `now`; they are marked as being probed.
    pub fn due_probes(&mut self, now: Instant) -> Vec<String> {
        let mut due = Vec::new();
        for (address, state) in &mut self.by_address {
            if state.set_aside
                && !state.probing
                && state.gone_since.is_none()
                && state.next_probe.is_some_and(|t| t <= now)
            {
                state.probing = true;
                due.push(address.clone());
            }
        }
        due
    }

    /// A probe of `address` finished at `now`. Returns whether it brought it back.
    pub fn probed(&mut self, address: &str, answered: bool, now: Instant) -> bool {
        if answered {
            return self.success(address);
        }
        if let Some(state) = self.by_address.get_mut(address) {
            state.probing = false;
            state.next_probe = Some(now + self.options.probe_interval);
        }
        false
    }

    /// When the next probe is due.
    pub fn next_probe(&self) -> Option<Instant> {
        self.by_address
            .values()
            .filter(|s| s.set_aside && !s.probing && s.gone_since.is_none())
            .filter_map(|s| s.next_probe)
            .min()
    }

    /// Whether `address` is set aside (failing, or suspect until a probe answers).
    pub fn is_set_aside(&self, address: &str) -> bool {
        self.by_address.get(address).is_some_and(|s| s.set_aside)
    }

    /// Whether `address` is set aside for failed calls (not merely suspect).
    pub fn is_failing(&self, address: &str) -> bool {
        self.by_address
            .get(address)
            .is_some_and(|s| s.set_aside && !s.suspect)
    }

    /// How many addresses are set aside.
    pub fn set_aside_count(&self) -> usize {
        self.by_address.values().filter(|s| s.set_aside).count()
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

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "10.0.0.1:50051";

    #[test]
    fn consecutive_failures_set_aside_and_a_success_resets() {
        let now = Instant::now();
        let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(3));
        assert!(!h.failure(A, now));
        assert!(!h.failure(A, now));
        assert!(!h.success(A), "not aside yet");
        assert!(!h.failure(A, now));
        assert!(!h.failure(A, now));
        assert!(h.failure(A, now), "third consecutive failure");
        assert!(h.is_set_aside(A));
        assert!(!h.failure(A, now), "already aside");
    }

    #[test]
    fn set_aside_endpoints_are_probed_until_they_answer() {
        let now = Instant::now();
        let interval = Duration::from_secs(5);
        let mut h = HealthTracker::new(
            HealthOptions::default()
                .failure_threshold(1)
                .probe_interval(interval),
        );
        h.failure(A, now);
        assert_eq!(h.next_probe(), Some(now + interval));
        assert!(h.due_probes(now).is_empty());
        assert_eq!(h.due_probes(now + interval), vec![A.to_owned()]);
        assert!(
            h.due_probes(now + interval).is_empty(),
            "one probe at a time"
        );
        assert!(!h.probed(A, false, now + interval));
        assert_eq!(h.next_probe(), Some(now + interval * 2));
        assert_eq!(h.due_probes(now + interval * 2).len(), 1);
        assert!(h.probed(A, true, now + interval * 2));
        assert!(!h.is_set_aside(A));
        assert_eq!(h.next_probe(), None);
    }

    #[test]
    fn a_refused_connection_sets_aside_at_once_unless_told_otherwise() {
        let now = Instant::now();
        let mut h = HealthTracker::new(HealthOptions::default());
        assert!(h.record(A, Outcome::Refused, now));
        assert!(h.is_set_aside(A));
        assert!(
            h.record(A, Outcome::Success, now),
            "a success brings it back"
        );
        let mut h = HealthTracker::new(HealthOptions::default().refused_at_once(false));
        assert!(!h.record(A, Outcome::Refused, now));
        assert!(!h.is_set_aside(A));
    }

    #[test]
    fn a_suspect_is_set_aside_and_probed_at_once() {
        let now = Instant::now();
        let mut h = HealthTracker::new(HealthOptions::default());
        assert!(h.suspect(A, now));
        assert!(h.is_set_aside(A));
        assert_eq!(h.next_probe(), Some(now));
        assert_eq!(h.due_probes(now), vec![A.to_owned()]);
        assert!(!h.suspect(A, now), "already aside");
        assert!(!h.is_failing(A), "suspect, not failing");
        assert!(!h.probed(A, false, now));
        assert!(h.is_set_aside(A), "a refusing instance stays aside");
        assert_eq!(h.next_probe(), Some(now + DEFAULT_PROBE_INTERVAL));
        h.probe_soon(A, now + Duration::from_secs(1));
        assert_eq!(h.next_probe(), Some(now + Duration::from_secs(1)));
        // Gone: still aside for a grace, unprobed, then forgotten.
        assert!(!h.forget(A, now));
        assert!(h.is_set_aside(A));
        assert_eq!(h.next_probe(), None);
        assert!(h.forget("10.0.0.9:1", now + FORGET_GRACE));
        assert!(!h.is_set_aside(A));
    }

    #[test]
    fn disabled_never_sets_aside() {
        let mut h = HealthTracker::new(HealthOptions::disabled());
        for _ in 0..100 {
            assert!(!h.failure(A, Instant::now()));
        }
    }
}
