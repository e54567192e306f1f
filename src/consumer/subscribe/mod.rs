//! Live subscriptions: the task that turns watches into a stream of endpoint sets.
//!
//! Modeled on linkerd2-proxy's resolver. One task per subscription owns all of its state;
//! small source tasks do the I/O and feed it:
//!
//! * a mapping source (unless the subscription names its apps): get, then watch from the
//!   read's store revision + 1; an app that starts exporting the interface is added without
//!   a restart. Apps are only ever added (an app only adds itself to a mapping), so a
//!   garbled or deleted mapping value never strips a subscription;
//! * one instance source per (subscription, app): list, then watch from the list's store
//!   revision + 1 (no gap); on a watch error (compaction, lost connection) re-list with
//!   backoff and hand over the list as a reset, which the app's view diffs against what it
//!   has, so subscribers only see the difference. Watches are not shared between
//!   subscriptions.
//!
//! The task applies updates to each app's [`AppView`] (self-preservation decides which
//! expiries are held), fetches the metadata of new revisions in the background (retrying
//! failures with exponential backoff and jitter, never blocking other revisions), applies
//! consumer-side health, and pushes the endpoint set through a [`watch`] channel, coalesced
//! by a [`Coalescer`] and only when it changed. It writes the local snapshot after pushes
//! and serves from it when the store cannot be reached at start.
//!
//! Errors never remove anything: a failed list or mapping read keeps the last state, and an
//! instance whose new revision's metadata cannot be had keeps its last endpoints. So an
//! error never replaces a non-empty set with an empty one, while an instance that is really
//! gone (its record deleted) leaves at once, whatever other revisions are doing.
//!
//! Dropping the last [`SubscriptionHandle`] ends the task, which aborts its sources and so
//! closes its watches.

mod assemble;
mod fetches;
mod handle;
mod options;
mod restore;
mod sources;
mod task;

use std::time::Duration;

pub use handle::SubscriptionHandle;
pub use options::SubscribeOptions;
pub(crate) use task::start;

/// Default time a new subscription waits for the store (and the first metadata fetches)
/// before it serves from the snapshot, or from what it has.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(5);
/// Default first delay before a failed metadata fetch is retried.
pub const DEFAULT_FETCH_RETRY_BASE: Duration = Duration::from_millis(500);
/// Default longest delay between retries of a failed metadata fetch.
pub const DEFAULT_FETCH_RETRY_MAX: Duration = Duration::from_secs(30);
