//! Publishing a subscription's endpoint set: when the first set may go out, and the
//! coalesced pushes after it, only when the set changed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::coalesce::{CoalesceOptions, Coalescer};
use super::handle::Shared;
use crate::consumer::stats::Counters;
use crate::model::Endpoint;

/// Where the first set stands.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// Published already.
    Done,
    /// Still waiting for the registry or the first fetches.
    Waiting,
    /// It goes out now: the registry was read and the first fetches are done or have had
    /// their wait.
    Complete,
    /// It goes out now, with what is known (and the snapshot, if there is one): the start
    /// timeout passed, or the snapshot's wait.
    TimedOut,
}

/// See the module docs.
pub(super) struct Publisher {
    coalescer: Coalescer,
    tx: watch::Sender<Arc<Vec<Endpoint>>>,
    pub(super) shared: Arc<Shared>,
    /// Taken when the first set is published.
    ready: Option<oneshot::Sender<()>>,
    start_deadline: Instant,
    /// When a snapshot read at start is served if the registry has not answered.
    snapshot_deadline: Instant,
    first_fetch_wait: Duration,
    /// Until when the first set waits for first fetches, once the registry has been read.
    fetch_wait_until: Option<Instant>,
}

impl Publisher {
    pub fn new(
        coalesce: &CoalesceOptions,
        tx: watch::Sender<Arc<Vec<Endpoint>>>,
        shared: Arc<Shared>,
        ready: oneshot::Sender<()>,
        (start_deadline, snapshot_deadline): (Instant, Instant),
        first_fetch_wait: Duration,
    ) -> Self {
        Publisher {
            coalescer: Coalescer::new(coalesce),
            tx,
            shared,
            ready: Some(ready),
            start_deadline,
            snapshot_deadline: snapshot_deadline.min(start_deadline),
            first_fetch_wait,
            fetch_wait_until: None,
        }
    }

    /// Whether the first set went out.
    pub fn started(&self) -> bool {
        self.ready.is_none()
    }

    /// Where the first set stands at `now`, given whether the registry was read, whether a
    /// revision is on its first fetch, and whether a snapshot waits to be served.
    pub fn start(
        &mut self,
        now: Instant,
        store_read: bool,
        first_fetches: bool,
        snapshot: bool,
    ) -> Start {
        if self.ready.is_none() {
            return Start::Done;
        }
        if self.fetch_wait_until.is_none() && store_read {
            self.fetch_wait_until = Some(now + self.first_fetch_wait);
        }
        let waited = self.fetch_wait_until.is_some_and(|t| now >= t);
        if store_read && (waited || !first_fetches) {
            Start::Complete
        } else if now >= self.start_deadline || (snapshot && now >= self.snapshot_deadline) {
            Start::TimedOut
        } else {
            Start::Waiting
        }
    }

    /// The first set went out: `subscribe()` returns.
    pub fn announce_start(&mut self) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(());
        }
    }

    /// Something the set is made of changed at `now`.
    pub fn changed(&mut self, now: Instant) {
        self.coalescer.changed(now);
    }

    /// Whether a change waits for its push.
    pub fn pending(&self) -> bool {
        self.coalescer.due().is_some()
    }

    /// Makes a pending change due at `now`, window or not.
    pub fn hurry(&mut self, now: Instant) {
        self.coalescer.hurry(now);
    }

    /// Whether the handles say self-preservation holds removals.
    pub fn protection_shown(&self) -> bool {
        self.shared.protection_active.load(Ordering::Relaxed)
    }

    /// Whether a push is due at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.coalescer.is_due(now)
    }

    /// Publishes `next` if it differs from what subscribers have; returns whether it did.
    pub fn push(&mut self, next: Vec<Endpoint>, now: Instant, counters: &Counters) -> bool {
        let pushed = self.tx.borrow().as_slice() != next.as_slice();
        if pushed {
            self.tx.send_replace(Arc::new(next));
            Counters::bump(&counters.pushes);
        } else {
            Counters::bump(&counters.unchanged_updates);
        }
        self.coalescer.handled(now, pushed);
        pushed
    }

    /// When something is next due: a push, or a step of the start. The snapshot's
    /// deadline counts only while a `snapshot` waits to be served: past it, with none, it
    /// would stay due, and the task would wake without pause until the registry answers.
    pub fn next_due(&self, snapshot: bool) -> Option<Instant> {
        let mut next = self.coalescer.due();
        if self.ready.is_some() {
            let snapshot = snapshot.then_some(self.snapshot_deadline);
            for t in [Some(self.start_deadline), snapshot, self.fetch_wait_until]
                .into_iter()
                .flatten()
            {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }

    /// Resolves when every handle is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Mirrors whether some app's view holds removals into the handles' flag.
    pub fn set_protection_active(&self, active: bool) {
        self.shared
            .protection_active
            .store(active, Ordering::Relaxed);
    }

    /// Mirrors whether the set comes from the snapshot into the handles' flag.
    pub fn set_serving_snapshot(&self, serving: bool) {
        self.shared
            .serving_snapshot
            .store(serving, Ordering::Relaxed);
    }
}
