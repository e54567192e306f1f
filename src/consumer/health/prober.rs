//! The probe driver of a resolver's health: it starts the probes that are due (at most
//! [`HealthOptions::probe_concurrency`](super::HealthOptions::probe_concurrency) at once),
//! forgets what stayed gone for its grace, then sleeps until the next thing is due or the
//! schedule changes. Started on the first address set aside, stopped with its registry.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::options::Probe;
use crate::model::Authority;

/// What a prober drives (the resolver's health registry): which probes are due, what they
/// found, and the forgetting of what stayed gone.
pub(super) trait Probed: Send + Sync + 'static {
    /// Forgets what stayed gone for its grace at `now`, marks the probes due as started;
    /// returns them, with when something is next due.
    fn due(&self, now: Instant) -> (Vec<Authority>, Option<Instant>);

    /// A probe of `address` finished.
    fn probed(&self, address: &Authority, answered: bool);

    /// The probe and its deadline.
    fn probe(&self) -> (Arc<dyn Probe>, Duration);

    /// The prober of this target.
    fn prober(&self) -> &Prober;
}

/// The driver's handle, owned by its registry.
pub(crate) struct Prober {
    wake: Arc<Notify>,
    started: AtomicBool,
    semaphore: Arc<Semaphore>,
    /// Ends the driver with the registry.
    stop: CancellationToken,
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Prober {
    pub(super) fn new(concurrency: usize) -> Self {
        Prober {
            wake: Arc::new(Notify::new()),
            started: AtomicBool::new(false),
            semaphore: Arc::new(Semaphore::new(concurrency.max(1))),
            stop: CancellationToken::new(),
        }
    }

    /// The schedule may have changed: the driver looks again.
    pub(super) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the driver of `target` if it does not run (and a runtime is at hand).
    pub(super) fn ensure_running<T: Probed>(&self, target: &Arc<T>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let stop = self.stop.clone();
                let driver = drive(Arc::downgrade(target), self.wake.clone());
                runtime.spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = driver => {}
                    }
                });
            }
            Err(_) => self.started.store(false, Ordering::Release),
        }
    }
}

/// Starts what is due, then sleeps until the next due time or a wake.
async fn drive<T: Probed>(target: Weak<T>, wake: Arc<Notify>) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let Some(target) = target.upgrade() else {
                return;
            };
            let (due, next) = target.due(Instant::now());
            for address in due {
                let semaphore = target.prober().semaphore.clone();
                tokio::spawn(probe(Arc::downgrade(&target), address, semaphore));
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
async fn probe<T: Probed>(target: Weak<T>, address: Authority, semaphore: Arc<Semaphore>) {
    let Ok(_permit) = semaphore.acquire_owned().await else {
        return;
    };
    let Some((probe, timeout)) = target.upgrade().map(|t| t.probe()) else {
        return;
    };
    // A probe that panics counts as failed: the address stays set aside and is probed
    // again at the next interval.
    let attempt = AssertUnwindSafe(probe.probe(address.to_string(), timeout))
        .catch_unwind()
        .await;
    let answered = attempt.unwrap_or_else(|_| {
        tracing::warn!(%address, "health probe panicked; counted as failed");
        false
    });
    if let Some(target) = target.upgrade() {
        target.probed(&address, answered);
        target.prober().wake();
    }
}
