//! The resolver's shared health: one [`HealthTracker`] and one prober for all of its
//! subscriptions and balanced channels.
//!
//! Health is kept per address (`host:port`), not per subscription: a call outcome reported
//! by one channel, or a hold decided by one app's shared view, counts for every
//! subscription and channel of the resolver, and a set-aside address is probed once,
//! however many subscriptions route to it. Probes run on one driver task per resolver
//! (started on the first address set aside), at most
//! [`HealthOptions::probe_concurrency`](super::HealthOptions::probe_concurrency) at once.
//!
//! Whoever depends on health follows it two ways: subscriptions through a generation
//! counter ([`HealthRegistry::changes`]) that moves whenever an address is set aside or
//! comes back, and the balanced channel's endpoints through wakers
//! ([`HealthRegistry::ready_or_wait`]) woken on the same changes.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;

use futures::FutureExt as _;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::health::{HealthOptions, HealthTracker, Outcome};
use super::stats::Counters;

/// Whether a channel endpoint may take calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Its address is not set aside.
    Healthy,
    /// Its address is set aside, and so is every other of its channel: route anyway.
    Panic,
    /// Its address is set aside: wait for a change of health.
    Wait,
}

/// See the module docs.
pub(crate) struct HealthRegistry {
    options: HealthOptions,
    inner: Mutex<Inner>,
    generation: watch::Sender<u64>,
    wake_driver: Arc<Notify>,
    driver_started: AtomicBool,
    /// Ends the probe driver with the resolver.
    stop_driver: CancellationToken,
}

impl Drop for HealthRegistry {
    fn drop(&mut self) {
        self.stop_driver.cancel();
    }
}

struct Inner {
    tracker: HealthTracker,
    /// Channel endpoints waiting for a change of health.
    wakers: Vec<Waker>,
}

impl HealthRegistry {
    /// Nothing reported yet.
    pub fn new(options: HealthOptions) -> Self {
        HealthRegistry {
            inner: Mutex::new(Inner {
                tracker: HealthTracker::new(options.clone()),
                wakers: Vec::new(),
            }),
            options,
            generation: watch::channel(0).0,
            wake_driver: Arc::new(Notify::new()),
            driver_started: AtomicBool::new(false),
            stop_driver: CancellationToken::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `address` is set aside (failing, or suspect until a probe answers): a
    /// balanced channel routes no call to it.
    pub fn is_set_aside(&self, address: &str) -> bool {
        self.lock().tracker.is_set_aside(address)
    }

    /// Whether `address` is set aside for failed calls: it leaves subscriptions' sets too
    /// (a suspect one stays listed there while self-preservation holds it).
    pub fn is_failing(&self, address: &str) -> bool {
        self.lock().tracker.is_failing(address)
    }

    /// How many addresses are set aside.
    pub fn set_aside_count(&self) -> usize {
        self.lock().tracker.set_aside_count()
    }

    /// A receiver whose value moves whenever an address is set aside or comes back.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Whether a channel endpoint at `address`, one of the channel's `addresses`, may take
    /// calls. When it may not, `waker` is woken on the next change of health.
    pub fn ready_or_wait(&self, address: &str, addresses: &[Arc<str>], waker: &Waker) -> Readiness {
        let mut inner = self.lock();
        if !inner.tracker.is_set_aside(address) {
            return Readiness::Healthy;
        }
        // Registered in both remaining cases: in panic mode the endpoint wants to know when
        // a sibling recovers too (it then polls again and waits).
        if !inner.wakers.iter().any(|w| w.will_wake(waker)) {
            inner.wakers.push(waker.clone());
        }
        if addresses.iter().all(|a| inner.tracker.is_set_aside(a)) {
            Readiness::Panic
        } else {
            Readiness::Wait
        }
    }

    /// Records a call's outcome for `address`.
    pub fn record(&self, context: &Arc<Context>, address: &str, outcome: Outcome) {
        let mut inner = self.lock();
        if !inner.tracker.record(address, outcome, Instant::now()) {
            return;
        }
        if inner.tracker.is_set_aside(address) {
            Counters::bump(&context.counters.set_aside);
            tracing::warn!(%address, ?outcome, "endpoint set aside after failed calls");
        } else {
            tracing::info!(%address, "set-aside endpoint answers again");
        }
        self.changed(inner, context);
    }

    /// `address` is held by self-preservation: set aside until a probe, at once, answers.
    pub fn suspect(&self, context: &Arc<Context>, address: &str) {
        let mut inner = self.lock();
        if inner.tracker.suspect(address, Instant::now()) {
            tracing::debug!(%address, "held instance set aside until a probe answers");
        }
        self.changed(inner, context);
    }

    /// `address`'s record was written again: a set-aside address is probed at once.
    pub fn returned(&self, address: &str) {
        self.lock().tracker.probe_soon(address, Instant::now());
        self.wake_driver.notify_one();
    }

    /// `address` is no endpoint any more.
    pub fn forget(&self, address: &str) {
        let mut inner = self.lock();
        if inner.tracker.forget(address, Instant::now()) {
            self.bump(&mut inner);
        }
    }

    /// Announces a change of health: subscriptions recompute, waiting endpoints poll again,
    /// the driver reconsiders its schedule.
    fn changed(&self, mut inner: MutexGuard<'_, Inner>, context: &Arc<Context>) {
        self.bump(&mut inner);
        drop(inner);
        self.ensure_driver(context);
        self.wake_driver.notify_one();
    }

    fn bump(&self, inner: &mut Inner) {
        self.generation.send_modify(|g| *g += 1);
        for waker in inner.wakers.drain(..) {
            waker.wake();
        }
    }

    /// Starts the probe driver if it does not run (and a runtime is at hand).
    fn ensure_driver(&self, context: &Arc<Context>) {
        if self.driver_started.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let semaphore = Arc::new(Semaphore::new(self.options.probe_concurrency));
                let stop = self.stop_driver.clone();
                let driver = drive(Arc::downgrade(context), self.wake_driver.clone(), semaphore);
                runtime.spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = driver => {}
                    }
                });
            }
            Err(_) => self.driver_started.store(false, Ordering::Release),
        }
    }

    /// A probe of `address` finished.
    fn probed(&self, context: &Arc<Context>, address: &str, answered: bool) {
        let mut inner = self.lock();
        if inner.tracker.probed(address, answered, Instant::now()) {
            tracing::info!(%address, "set-aside endpoint answers a probe; it rejoins");
            self.changed(inner, context);
        }
    }
}

/// The probe driver: starts the probes that are due, then sleeps until the next one or a
/// change of schedule. Stopped when its resolver is dropped.
async fn drive(context: Weak<Context>, wake: Arc<Notify>, semaphore: Arc<Semaphore>) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let Some(context) = context.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut inner = context.health.lock();
            let due = inner.tracker.due_probes(now);
            let next = inner.tracker.next_probe();
            drop(inner);
            for address in due {
                Counters::bump(&context.counters.probes);
                tokio::spawn(probe(Arc::downgrade(&context), address, semaphore.clone()));
            }
            next
        };
        match next {
            Some(next) => tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(next) => {}
            },
            None => notified.await,
        }
    }
}

/// Probes `address` once, within the bound on probes at once.
async fn probe(context: Weak<Context>, address: String, semaphore: Arc<Semaphore>) {
    let Ok(_permit) = semaphore.acquire_owned().await else {
        return;
    };
    let Some((probe, timeout)) = context.upgrade().map(|c| {
        (
            c.health.options.probe.clone(),
            c.health.options.probe_timeout,
        )
    }) else {
        return;
    };
    // A probe that panics counts as failed: the address stays set aside and is probed
    // again at the next interval.
    let attempt = AssertUnwindSafe(probe.probe(address.clone(), timeout))
        .catch_unwind()
        .await;
    let answered = attempt.unwrap_or_else(|_| {
        tracing::warn!(%address, "health probe panicked; counted as failed");
        false
    });
    if let Some(context) = context.upgrade() {
        context.health.probed(&context, &address, answered);
        context.health.wake_driver.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aside(registry: &HealthRegistry, address: &str) {
        registry
            .lock()
            .tracker
            .record(address, Outcome::Refused, Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn set_aside_endpoints_wait_until_all_are_aside_then_all_route() {
        let registry = HealthRegistry::new(HealthOptions::default());
        let addresses: Vec<Arc<str>> = vec!["10.0.0.1:1".into(), "10.0.0.2:1".into()];
        let waker = futures::task::noop_waker();
        let ready = |a: &str| registry.ready_or_wait(a, &addresses, &waker);
        assert_eq!(ready("10.0.0.1:1"), Readiness::Healthy);
        aside(&registry, "10.0.0.1:1");
        assert_eq!(ready("10.0.0.1:1"), Readiness::Wait);
        assert_eq!(ready("10.0.0.2:1"), Readiness::Healthy);
        assert_eq!(
            registry.lock().wakers.len(),
            1,
            "one waker, registered once"
        );
        aside(&registry, "10.0.0.2:1");
        assert_eq!(ready("10.0.0.1:1"), Readiness::Panic);
        assert_eq!(ready("10.0.0.2:1"), Readiness::Panic);
        // A change of health wakes whoever waits.
        let mut inner = registry.lock();
        registry.bump(&mut inner);
        assert!(inner.wakers.is_empty());
        assert_eq!(*registry.changes().borrow(), 1);
    }
}
