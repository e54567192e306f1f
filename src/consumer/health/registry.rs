//! The resolver's shared health: one [`HealthTracker`] and one prober for all of its
//! subscriptions and balanced channels.
//!
//! Whatever changes health from outside comes in through one method,
//! [`HealthRegistry::feed`], as a [`HealthInput`] (see `input.rs` for its writers); the
//! rest is the registry's own doing: probe answers ([`Probed`]) and liveness check answers.
//!
//! Health is kept per [`Authority`], not per subscription: a call outcome reported by one
//! channel, or a hold decided by one app's shared view, counts for every subscription and
//! channel of the resolver, and a set-aside address is probed once, however many
//! subscriptions route to it. Probes run on one driver task per resolver (started on the
//! first address set aside; see `prober.rs`).
//!
//! Whoever depends on health follows it through a generation counter
//! ([`HealthRegistry::changes`]) that moves whenever an address is set aside or comes
//! back: subscriptions recompute, and balanced channels read which of their endpoints are
//! set aside ([`HealthRegistry::standing_of`]) once per change, not per call.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;

use super::ejection::{Ejection, EjectionReason, Standing};
use super::grpc_probe::GrpcProbe;
use super::input::{EndpointKey, HealthInput};
use super::options::{HealthOptions, Probe};
use super::prober::{Probed, Prober};
use super::tracker::{HealthTracker, Outcome};
use crate::consumer::stats::Counters;
use crate::model::Authority;

/// The error of a call that waited on a provider ejected as hung: it may have reached the
/// provider (retried elsewhere only when idempotent), and no answer will come.
#[derive(Debug)]
pub(crate) struct ProviderHung(pub Authority);

impl std::fmt::Display for ProviderHung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the provider at {} stopped answering (no answer to a liveness check while the \
             call waited); the call may have reached it",
            self.0
        )
    }
}

impl std::error::Error for ProviderHung {}

/// See the module docs.
pub(crate) struct HealthRegistry {
    options: HealthOptions,
    /// The application's probe, or the gRPC-level one.
    probe: Arc<dyn Probe>,
    counters: Arc<Counters>,
    inner: Mutex<Inner>,
    generation: watch::Sender<u64>,
    prober: Prober,
}

struct Inner {
    tracker: HealthTracker,
}

impl HealthRegistry {
    /// Nothing reported yet; counts into `counters`; probes over `tls` when the resolver
    /// dials so (unless the options name a probe).
    pub fn new(
        options: HealthOptions,
        counters: Arc<Counters>,
        tls: Option<crate::tls::ClientTlsConfig>,
    ) -> Arc<Self> {
        let probe = options
            .probe
            .clone()
            .unwrap_or_else(|| Arc::new(GrpcProbe::new(tls)));
        Arc::new(HealthRegistry {
            probe,
            inner: Mutex::new(Inner {
                tracker: HealthTracker::new(options.clone()),
            }),
            prober: Prober::new(options.probe_concurrency),
            options,
            counters,
            generation: watch::channel(0).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether an endpoint may take no call: its address is set aside, or its instance is
    /// held and has not answered a probe yet.
    pub fn is_endpoint_aside(&self, endpoint: &EndpointKey) -> bool {
        self.lock()
            .tracker
            .is_endpoint_aside(&endpoint.address, &endpoint.instance)
    }

    /// How many addresses are set aside.
    pub fn set_aside_count(&self) -> usize {
        self.lock().tracker.set_aside_count()
    }

    /// A receiver whose value moves whenever an address is set aside or comes back.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Where each of `endpoints` stands for a pick, under one lock.
    pub fn standing_of(&self, endpoints: &[&EndpointKey]) -> Vec<Standing> {
        let inner = self.lock();
        endpoints
            .iter()
            .map(|e| inner.tracker.standing(&e.address, &e.instance))
            .collect()
    }

    /// The most of a call's providers outliers may leave out, in percent.
    pub fn max_ejection_percent(&self) -> u8 {
        self.options.max_ejection_percent
    }

    /// How long a call waits for its answer before its provider's liveness is checked.
    pub fn hung_after(&self) -> Option<std::time::Duration> {
        self.options.hung_after.filter(|_| self.options.enabled)
    }

    /// What is ejected now, why, since when, and when it is tried again.
    pub fn ejections(&self) -> Vec<Ejection> {
        self.lock().tracker.ejections(Instant::now())
    }

    /// Takes in one thing health is told: the one way in for every writer (see
    /// [`HealthInput`]).
    #[inline]
    pub fn feed(self: &Arc<Self>, input: HealthInput<'_>) {
        match input {
            HealthInput::Called {
                endpoint,
                outcome,
                answered,
            } => self.record(endpoint, outcome, answered),
            HealthInput::Waiting(endpoint) => self.check_alive(endpoint, EjectionReason::Hung),
            HealthInput::Lost(endpoint) => self.check_alive(endpoint, EjectionReason::Lost),
            HealthInput::Held(instance) => self.suspect(instance),
            HealthInput::Registered(instances) => self.registered_all(instances),
            HealthInput::Left(instance) => self.forget(instance),
        }
    }

    /// Records a call's outcome for `endpoint`, with the method's path and its time to an
    /// answer when it got one.
    fn record(
        self: &Arc<Self>,
        endpoint: &EndpointKey,
        outcome: Outcome,
        answered: Option<(&str, std::time::Duration)>,
    ) {
        let mut inner = self.lock();
        let address = &endpoint.address;
        let was_aside = inner.tracker.is_set_aside(address);
        let now = Instant::now();
        let changed = inner
            .tracker
            .record(address, &endpoint.instance, outcome, answered, now);
        if !changed {
            return;
        }
        if inner.tracker.is_set_aside(address) && !was_aside {
            self.ejected(&inner, address, now);
        } else if was_aside && !inner.tracker.is_set_aside(address) {
            tracing::info!(%address, "ejected endpoint answers again: it rejoins");
        } else if let Some((path, _)) = answered {
            for ejection in inner.tracker.ejections(now) {
                if ejection.method.as_deref() == Some(path) && ejection.ejected_for.is_zero() {
                    Counters::bump(&self.counters.ejected_slow);
                    tracing::warn!("method ejected at one endpoint: {ejection}");
                }
            }
        }
        self.changed(inner);
    }

    /// Counts and logs the ejection of `address` at `now`.
    fn ejected(&self, inner: &Inner, address: &Authority, now: Instant) {
        let Some(ejection) = inner
            .tracker
            .ejections(now)
            .into_iter()
            .find(|e| e.address == address.as_str() && e.method.is_none())
        else {
            return;
        };
        let counters = &self.counters;
        Counters::bump(&counters.set_aside);
        match ejection.reason {
            EjectionReason::FailureRate { .. } => {
                Counters::bump(&counters.ejected_failure_rate);
            }
            EjectionReason::Hung | EjectionReason::Lost => Counters::bump(&counters.ejected_hung),
            _ => {}
        }
        tracing::warn!("endpoint ejected: {ejection}");
    }

    /// Checks, once at a time per address, that `endpoint`'s provider answers; one that
    /// does not is ejected for `reason`: hung for a call that waited past the bound (its
    /// waiting calls then give up, see [`Self::is_hung`]), lost for a call whose connection
    /// was lost (so that the next calls do not go the same way).
    fn check_alive(self: &Arc<Self>, endpoint: &EndpointKey, reason: EjectionReason) {
        let address = endpoint.address.clone();
        if !self.lock().tracker.check_alive(&address, Instant::now()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.lock()
                .tracker
                .checked(&address, true, reason, Instant::now());
            return;
        };
        Counters::bump(&self.counters.liveness_checks);
        let registry = Arc::downgrade(self);
        let (probe, timeout) = (self.probe.clone(), self.options.probe_timeout);
        runtime.spawn(async move {
            // A probe of the application's own may not keep its deadline: silence past it
            // is no answer.
            let check = probe.probe(address.to_string(), timeout);
            let answered = tokio::time::timeout(timeout, check).await == Ok(true);
            let Some(registry) = registry.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut inner = registry.lock();
            if inner.tracker.checked(&address, answered, reason, now) {
                registry.ejected(&inner, &address, now);
                registry.changed(inner);
            }
        });
    }

    /// Whether `address` is ejected as hung.
    pub fn is_hung(&self, address: &Authority) -> bool {
        self.lock().tracker.is_hung(address)
    }

    /// `instance` (the authority of its record) is held by self-preservation: every
    /// endpoint of it is set aside until a probe, at once, answers.
    fn suspect(self: &Arc<Self>, instance: &Authority) {
        let mut inner = self.lock();
        if inner.tracker.suspect(instance, Instant::now()) {
            tracing::debug!(%instance, "held instance set aside until a probe answers");
        }
        self.changed(inner);
    }

    /// The records of `instances` were written (again): whatever of them is set aside is
    /// probed at once. One lock for all of them; a fleet's first list writes thousands
    /// while nothing is set aside, which then costs no authority built.
    fn registered_all<'a>(
        self: &Arc<Self>,
        instances: impl IntoIterator<Item = &'a crate::model::ServiceInstance>,
    ) {
        let mut inner = self.lock();
        if inner.tracker.set_aside_count() == 0 {
            return;
        }
        let now = Instant::now();
        for instance in instances {
            inner.tracker.registered(&instance.authority(), now);
        }
        drop(inner);
        self.prober.wake();
    }

    /// `instance` is no endpoint any more.
    fn forget(self: &Arc<Self>, instance: &Authority) {
        let mut inner = self.lock();
        if inner.tracker.forget(instance, Instant::now()) {
            self.bump(&mut inner);
        }
        drop(inner);
        self.prober.wake();
    }

    /// Announces a change of health: subscriptions recompute, waiting endpoints poll again,
    /// the prober reconsiders its schedule.
    fn changed(self: &Arc<Self>, mut inner: MutexGuard<'_, Inner>) {
        self.bump(&mut inner);
        drop(inner);
        self.prober.ensure_running(self);
        self.prober.wake();
    }

    fn bump(&self, _inner: &mut Inner) {
        self.generation.send_modify(|g| *g += 1);
    }
}

impl Probed for HealthRegistry {
    fn due(&self, now: Instant) -> (Vec<Authority>, Option<Instant>) {
        let mut inner = self.lock();
        if inner.tracker.sweep(now) {
            self.bump(&mut inner);
        }
        let due = inner.tracker.due_probes(now);
        Counters::add(&self.counters.probes, due.len() as u64);
        (due, inner.tracker.next_due())
    }

    fn probed(&self, address: &Authority, answered: bool) {
        let mut inner = self.lock();
        if inner.tracker.probed(address, answered, Instant::now()) {
            tracing::info!(%address, "ejected endpoint answers a probe: it rejoins");
            // The driver is running (it made this probe): announce without starting it.
            self.bump(&mut inner);
        }
    }

    fn probe(&self) -> (Arc<dyn Probe>, std::time::Duration) {
        (self.probe.clone(), self.options.probe_timeout)
    }

    fn prober(&self) -> &Prober {
        &self.prober
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: &str) -> EndpointKey {
        let address = Authority::new(host, 1);
        EndpointKey {
            instance: address.clone(),
            address,
        }
    }

    fn refused(endpoint: &EndpointKey) -> HealthInput<'_> {
        HealthInput::Called {
            endpoint,
            outcome: Outcome::Refused,
            answered: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_channel_reads_which_endpoints_are_aside_once_per_change() {
        let registry = HealthRegistry::new(HealthOptions::default(), Arc::default(), None);
        let (a, b) = (key("10.0.0.1"), key("10.0.0.2"));
        let changes = registry.changes();
        assert_eq!(
            registry.standing_of(&[&a, &b]),
            [Standing::In, Standing::In]
        );
        registry.feed(refused(&a));
        assert!(
            changes.has_changed().unwrap(),
            "a change of health is announced"
        );
        assert_eq!(
            registry.standing_of(&[&a, &b]),
            [Standing::Out, Standing::In]
        );
        registry.feed(refused(&b));
        assert_eq!(
            registry.standing_of(&[&a, &b]),
            [Standing::Out, Standing::Out]
        );
        assert_eq!(*registry.changes().borrow(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_liveness_check_ejects_as_hung_once_its_deadline_passes() {
        let silent = |_: String, _: std::time::Duration| std::future::pending::<bool>();
        let options = HealthOptions::default().probe(silent);
        let counters = Arc::new(Counters::default());
        let registry = HealthRegistry::new(options, counters.clone(), None);
        let a = key("10.0.0.1");
        let mut changes = registry.changes();
        let start = Instant::now();
        registry.feed(HealthInput::Waiting(&a));
        registry.feed(HealthInput::Waiting(&a));
        assert!(!registry.is_hung(&a.address));
        changes.changed().await.unwrap();
        assert!(registry.is_hung(&a.address));
        assert_eq!(
            Instant::now() - start,
            HealthOptions::default().probe_timeout,
            "ejected when the check's deadline passed"
        );
        let stats = counters.snapshot();
        assert_eq!((stats.liveness_checks, stats.ejected_hung), (1, 1));
        let ejections = registry.ejections();
        assert_eq!(ejections.len(), 1);
        assert_eq!(ejections[0].reason, super::super::EjectionReason::Hung);
    }
}
