//! Live subscriptions: the task that turns the resolver's shared views into a stream of
//! endpoint sets.
//!
//! Modeled on linkerd2-proxy's resolver. One task per subscription owns all of its state;
//! the I/O happens in the shared views (one per app and one per mapping, whatever the
//! number of subscriptions), which hand the subscription each app's routable set with the
//! protections applied. The task's parts, one file each:
//!
//! * `apps`: which apps it follows: the apps of its mapping (or its `provided_by` list),
//!   each through the app's shared view. A mapping read naming more apps than the limit is
//!   ignored; an app leaves only when a valid read no longer names it **and** it has no
//!   routable instances, after [`APP_RELEASE_GRACE`], so a garbled or deleted mapping
//!   never strips an app that serves;
//! * the metadata of new revisions, fetched in the background by
//!   `consumer::metadata`'s `fetches` (retried with
//!   exponential backoff and jitter, never blocking other revisions; the first set waits
//!   for the first fetches only for [`SubscribeOptions::first_fetch_wait`], 500 ms unless
//!   set);
//! * `assemble`: the endpoint set from the routed instances and their metadata (pure,
//!   incremental; health is the balancer's to apply);
//! * `publish`: the first set and the coalesced pushes (`coalesce`), only when it changed;
//! * `restore` and `snapshot`: the local snapshot, served when the registry cannot be
//!   reached at start and written after pushes;
//! * `interfaces`: the interface level, followed only when the subscription's migration
//!   step reads it (see [`crate::consumer::MigrationStep`]); `migration`: the levels a
//!   subscription reads and why, held by its task; `migration_follow`: the migration rule
//!   followed; `migration_move`: when a move the rule asks for applies;
//! * `handle`: what the user holds; `options`: how it behaves; `task`: the select loop.
//!
//! Errors never remove anything: a failed read keeps the last state, and an instance
//! whose new revision's metadata cannot be had keeps its last endpoints. So an error never
//! replaces a non-empty set with an empty one, while an instance that is really gone (its
//! record deleted) leaves at once, whatever other revisions are doing.
//!
//! A permanent error (the registry refused the credentials or the permissions) ends the
//! subscription: the task logs one line and stops, the last set stays in
//! [`SubscriptionHandle::current`] (and in channels built on it), and
//! [`SubscriptionHandle::changed`] returns the error. Before the first set, `subscribe()`
//! returns it. Transient errors are retried.
//!
//! Dropping the last [`SubscriptionHandle`] ends the task, which leaves its views; a view
//! no subscription follows closes its watch after [`crate::consumer::VIEW_RELEASE_GRACE`].

mod answering;
mod apps;
mod assemble;
pub(crate) mod coalesce;
mod handle;
mod interfaces;
mod migration;
pub(crate) mod migration_follow;
mod migration_move;
mod options;
mod publish;
mod restore;
pub mod snapshot;
mod task;

use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::Instrument as _;

use crate::consumer::health::HealthRegistry;
use crate::consumer::hosts::HostNames;
use crate::consumer::metadata::MetadataSource;
use crate::consumer::seen::table::Seen;
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::consumer::views::Views;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::warnings::Aggregator;
use restore::read_snapshot;
use task::Task;

pub use apps::APP_RELEASE_GRACE;
pub use handle::SubscriptionHandle;
pub(crate) use handle::key_of;
pub use options::SubscribeOptions;

/// What the subscriptions of one resolver share.
pub(crate) struct SubscribeParts {
    /// The registry backend (for the interface level; the views read the rest).
    pub backend: crate::backend::Backend,
    /// The shared views of apps and mappings.
    pub views: Views,
    /// Metadata of (app, revision), cached and loaded once.
    pub metadata: Arc<MetadataSource>,
    /// Consumer-side health of every address.
    pub health: Arc<HealthRegistry>,
    /// Counters every part bumps.
    pub counters: Arc<Counters>,
    /// Repeated warnings, aggregated per cause.
    pub warnings: Arc<Aggregator>,
    /// One shared string per host, for every endpoint built.
    pub hosts: Arc<HostNames>,
    /// Size limits on everything read.
    pub limits: Limits,
    /// What the subscriptions see, for the consumer record (when there is one).
    pub seen: Option<Arc<Seen>>,
    /// The consumer app's migration rule, when the app is named.
    pub migration: Option<migration_follow::MigrationFollow>,
}

/// Starts a subscription; returns once the first set is published: when the registry has
/// been read and the first metadata fetches are done or have had their short wait
/// ([`SubscribeOptions::first_fetch_wait`]), or when the start timeout passed.
pub(crate) async fn start(
    parts: Arc<SubscribeParts>,
    subscription: Subscription,
    options: SubscribeOptions,
) -> Result<SubscriptionHandle> {
    subscription.validate()?;
    let snapshot = match &options.snapshot {
        Some(o) => {
            o.create_dir().await?;
            read_snapshot(o.path_for(&subscription), &subscription, &parts.limits).await
        }
        None => None,
    };
    let (ready_tx, ready_rx) = oneshot::channel();
    let (task, handle) = Task::new(parts, subscription, options, snapshot, ready_tx);
    let span = tracing::info_span!(
        "subscription",
        interface = %handle.subscription().interface,
        id = task.id()
    );
    tokio::spawn(task.run().instrument(span));
    if ready_rx.await.is_err() {
        // The task ended before its first set: the registry refused it for good.
        return Err(handle.ended().unwrap_or(Error::Shutdown));
    }
    Ok(handle.seen())
}
