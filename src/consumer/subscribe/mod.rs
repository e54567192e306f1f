//! Live subscriptions: the task that turns watches into a stream of endpoint sets.
//!
//! Modeled on linkerd2-proxy's resolver. One task per subscription owns all of its state;
//! source tasks do the I/O and feed it through the resolver's shared views
//! ([`crate::consumer`]'s `views`: one per app and one per mapping, whatever the number of
//! subscriptions):
//!
//! * a mapping source (unless the subscription names its apps): get, then watch from the
//!   read's store revision + 1; an app that starts exporting the interface is added without
//!   a restart. A read naming more apps than the limit is ignored; an app leaves only when
//!   a valid read no longer names it and it has no routable instances, after a grace (see
//!   `apps.rs`), so a garbled or deleted mapping value never strips an app that serves;
//! * one instance source per app: list, then watch from the list's store revision + 1 (no
//!   gap); on a watch error (compaction, lost connection) re-list with backoff and hand
//!   over the list as a reset, which each subscription's view of the app diffs against what
//!   it has, so subscribers only see the difference. A subscription that joins a running
//!   view starts from the view's last list, as a reset.
//!
//! Each app's shared view applies self-preservation and the recovery after a store wipe
//! once for the resolver, and hands its subscriptions the app's routable set. The task
//! keeps that set per app (its only per-app state besides its filter), fetches the
//! metadata of new revisions in the background (retrying failures with exponential backoff
//! and jitter, never blocking other revisions; the first set waits for the first fetches
//! only for [`DEFAULT_FIRST_FETCH_WAIT`] or the configured bound, after which a revision
//! still being fetched joins when it arrives), leaves out the addresses the resolver's
//! consumer-side health sets aside for failed calls, and pushes the endpoint set through a
//! [`watch`] channel, coalesced
//! by a [`Coalescer`] and only when it changed. It writes the local snapshot after pushes
//! and serves from it when the store cannot be reached at start.
//!
//! Errors never remove anything: a failed list or mapping read keeps the last state, and an
//! instance whose new revision's metadata cannot be had keeps its last endpoints. So an
//! error never replaces a non-empty set with an empty one, while an instance that is really
//! gone (its record deleted) leaves at once, whatever other revisions are doing.
//!
//! A permanent error (the store refused the credentials or the permissions) ends the
//! subscription: its sources stop, the task logs one line and stops, the last set stays in
//! [`SubscriptionHandle::current`] (and in channels built on it), and
//! [`SubscriptionHandle::changed`] returns the error. Before the first set, `subscribe()`
//! returns it. Transient errors are retried as above.
//!
//! Dropping the last [`SubscriptionHandle`] ends the task, which leaves its views; a view
//! no subscription follows closes its watch after [`crate::consumer::VIEW_RELEASE_GRACE`].

mod apps;
mod assemble;
mod fetches;
mod handle;
mod options;
mod restore;
pub(crate) mod sources;
mod task;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::consumer::coalesce::Coalescer;
use crate::consumer::context::Context;
use crate::consumer::subscription::Subscription;
use crate::error::{Error, Result};
use handle::Shared;
use restore::read_snapshot;
use task::Task;

pub use apps::APP_RELEASE_GRACE;
pub use handle::SubscriptionHandle;
pub use options::SubscribeOptions;

/// Default time a new subscription waits for the store (and the first metadata fetches)
/// before it serves from the snapshot, or from what it has.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(5);
/// Default time the first set waits for the first metadata fetches, once the store has been
/// read: well under the fetch timeout, so one hung MetadataService never delays the others.
pub const DEFAULT_FIRST_FETCH_WAIT: Duration = Duration::from_millis(500);
/// Default first delay before a failed metadata fetch is retried.
pub const DEFAULT_FETCH_RETRY_BASE: Duration = Duration::from_millis(500);
/// Default longest delay between retries of a failed metadata fetch.
pub const DEFAULT_FETCH_RETRY_MAX: Duration = Duration::from_secs(30);

/// Updates buffered between the sources and the subscription task.
const SOURCE_BUFFER: usize = 1024;
/// Health reports buffered; reports beyond it are dropped (they are advisory).
const REPORT_BUFFER: usize = 4096;

/// Starts a subscription; returns once the first set is published: when the store has been
/// read and the first metadata fetches are done or have had their short wait
/// ([`SubscribeOptions::first_fetch_wait`]), or when the start timeout passed.
pub(crate) async fn start(
    context: Arc<Context>,
    subscription: Subscription,
    options: SubscribeOptions,
) -> Result<SubscriptionHandle> {
    subscription.validate()?;
    let snapshot = match &options.snapshot {
        Some(o) => read_snapshot(o.path_for(&subscription), &subscription, &context.limits).await,
        None => None,
    };
    let (tx, mut rx) = watch::channel(Arc::new(Vec::new()));
    let (reports_tx, reports) = mpsc::channel(REPORT_BUFFER);
    let (ready_tx, ready_rx) = oneshot::channel();
    let shared = Arc::new(Shared {
        protection_active: AtomicBool::new(false),
        serving_snapshot: AtomicBool::new(false),
        ended: std::sync::Mutex::new(None),
        reports: reports_tx,
        context: context.clone(),
    });
    let (sources_tx, sources_rx) = mpsc::channel(SOURCE_BUFFER);
    let now = Instant::now();
    let id = context
        .counters
        .next_subscription
        .fetch_add(1, Ordering::Relaxed);
    let task = Task {
        id,
        start_deadline: now + options.start_timeout,
        fetch_wait_until: None,
        coalescer: Coalescer::new(&options.coalesce),
        health_changes: context.health.changes(),
        context,
        subscription: subscription.clone(),
        options,
        sources_tx,
        sources_rx,
        mapping_view: None,
        app_views: HashMap::new(),
        unmapped: HashMap::new(),
        apps: BTreeMap::new(),
        mapping_known: false,
        mapping_from_store: false,
        metadata: HashMap::new(),
        fetches: HashMap::new(),
        fetch_tasks: JoinSet::new(),
        fetch_ids: HashMap::new(),
        by_instance: HashMap::new(),
        compute_pass: 0,
        reports,
        tx,
        shared: shared.clone(),
        ready: Some(ready_tx),
        snapshot,
        serving_snapshot: false,
        snapshot_dirty: false,
        writes: JoinSet::new(),
        dirty: false,
        stopped: false,
    };
    let span = tracing::info_span!("subscription", interface = %subscription.interface, id);
    tokio::spawn(task.run().instrument(span));
    if ready_rx.await.is_err() {
        // The task ended before its first set: the store refused it for good.
        return Err(shared.ended().unwrap_or(Error::Shutdown));
    }
    rx.borrow_and_update();
    Ok(SubscriptionHandle {
        subscription: Arc::new(subscription),
        endpoints: rx,
        shared,
    })
}
