//! The consumer side: resolving interfaces to endpoints, once ([`Resolver::resolve`]) or
//! live ([`Resolver::subscribe`]), with the registry-center protections of the design's
//! section 8.
//!
//! # Protections
//!
//! Each applies once per resolver and app (in the app's shared view) or per address (in the
//! resolver's health), however many subscriptions and channels there are; their settings
//! sit on [`ResolverBuilder::subscribe_options`].
//!
//! * **Errors never empty a set**: a failed list, watch or mapping read keeps the last
//!   state; an instance whose new revision's metadata cannot be had keeps its endpoints.
//! * **Self-preservation** ([`ProtectionOptions`]): when more than a share of an app's
//!   instances expire within a window (a partition looks like that), the removals are
//!   held, the earlier expiries of the window too (retroactively), until the instances
//!   return or [`ProtectionOptions::max_hold`] passes. Releasing a hold is logged with the
//!   app and counts and counted (`hold_releases`). Graceful stops are never held.
//! * **A hold never sends calls to the dead**: a held instance is suspect at once:
//!   probed at once and then at the probe interval, and set aside in balanced channels
//!   until a probe answers. The retroactive rule is kept for partitions (whose expiries
//!   spread over the lease phases) because this guard keeps it from reviving a process
//!   that really died: it stays out of the channels while its connections are refused.
//!   [`SubscriptionHandle::current`] still lists a held instance;
//!   [`SubscriptionHandle::is_set_aside`] marks it.
//! * **Empty protection after a store wipe**, for apps of every size: a re-list whose store
//!   revision is lower than the last one seen means a wiped or replaced store (the etcd
//!   store also ends its watches when the cluster's revision goes backwards, which brings
//!   that re-list at once). Each app then keeps the instances the re-list misses until
//!   they re-register or [`ProtectionOptions::wipe_recovery`] passes (default
//!   [`DEFAULT_WIPE_RECOVERY`], 30 s). Graceful stops and deletions on a healthy store
//!   still leave at once.
//! * **Consumer-side health** ([`HealthOptions`]): the balanced channel records every
//!   call's outcome (passive health); applications may report outcomes too. After
//!   [`HealthOptions::failure_threshold`] consecutive failures (a refused connection at
//!   once) an address is set aside (left out of channels and of `current()`) and probed,
//!   with at most [`HealthOptions::probe_concurrency`] probes at once for the resolver,
//!   until it answers. If every endpoint of a channel is set aside, it routes to all
//!   (panic mode, logged and counted as `panic_routes`).
//! * **Deadlines**: a call through a balanced channel with a deadline fails with
//!   UNAVAILABLE when no endpoint is ready by then, instead of waiting.
//! * **Notification storms** are coalesced ([`CoalesceOptions`]); the **local snapshot**
//!   ([`SnapshotOptions`]) serves a consumer that starts while the store is unreachable.
//!
//! Layout, one concept per file:
//!
//! * `context.rs`: what the resolver and every subscription share (store layers, metadata
//!   source, counters, limits, TLS); the resolver and the subscriptions never call each
//!   other, both depend on it;
//! * `metadata.rs`: the metadata source: moka cache, single-flight loads, verification;
//! * `endpoints.rs`: building endpoints from instances and metadata (pure);
//! * `hosts.rs`: one shared string per host for every endpoint the resolver builds;
//! * `resolver.rs`: the facade: `resolve()`, `subscribe()`, counters;
//! * `subscription.rs`: what a consumer asks for;
//! * `subscribe/`: a live subscription: `handle` (what the user holds), `options`, `task`
//!   (the loop owning the state), `apps` (which apps it follows: the mapping bound and the
//!   release of junk apps), `sources` (mapping and instance watches, re-lists),
//!   `fetches` (background metadata fetches and retries), `assemble` (the endpoint set and
//!   its pushes), `restore` (the snapshot as a subscription uses it);
//! * `views.rs`: one shared watch and parsed view per app and per mapping for the whole
//!   resolver, released after a grace when no subscription follows it;
//! * `discover.rs`: a subscription as a stream of `tower::discover::Change`s;
//! * `channel.rs`: the balanced channel, a tower balancer over that stream; `dial.rs`:
//!   how it dials each endpoint (`ChannelOptions`); `passive.rs`: the per-endpoint layer
//!   recording each call's outcome into health (passive health, panic mode); `deadline.rs`:
//!   call deadlines that also bound the wait for an endpoint;
//! * `app_view.rs`: one app's instances as its shared view holds them, with
//!   self-preservation and the recovery after a store wipe (pure);
//! * `protection.rs`: self-preservation against mass expiry (pure);
//! * `coalesce.rs`: coalescing against notification storms (pure);
//! * `health.rs`: consumer-side health, setting failing endpoints aside (pure, plus a probe);
//! * `probes.rs`: the resolver's one health state and prober for every address;
//! * `snapshot.rs`: the local snapshot on disk;
//! * `stats.rs`: counters.

mod app_view;
pub mod channel;
mod coalesce;
mod context;
mod deadline;
mod dial;
pub mod discover;
mod endpoints;
mod health;
mod hosts;
mod metadata;
mod passive;
mod probes;
mod protection;
mod resolver;
#[doc(hidden)]
pub mod snapshot;
mod stats;
mod subscribe;
mod subscription;
mod views;

pub use channel::{
    BalancedChannel, ChannelHandle, ChannelOptions, DEFAULT_CHANGE_CAPACITY,
    DEFAULT_CONNECT_TIMEOUT,
};
pub use coalesce::{CoalesceOptions, DEFAULT_COALESCE_WINDOW};
pub use discover::Discovery;
pub use health::{
    DEFAULT_FAILURE_THRESHOLD, DEFAULT_PROBE_CONCURRENCY, DEFAULT_PROBE_INTERVAL,
    DEFAULT_PROBE_TIMEOUT, HealthOptions, Probe,
};
pub use protection::{
    DEFAULT_MAX_HOLD, DEFAULT_MIN_INSTANCES, DEFAULT_PROTECTION_THRESHOLD,
    DEFAULT_PROTECTION_WINDOW, DEFAULT_WIPE_RECOVERY, ProtectionOptions,
};
pub use resolver::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_IDLE, DEFAULT_FETCH_ATTEMPTS, DEFAULT_FETCH_TIMEOUT,
    Resolver, ResolverBuilder,
};
pub use snapshot::{MAX_SNAPSHOT_BYTES, SnapshotOptions};
pub use stats::{ResolverStats, RevisionChecks, RuleCounts};
pub use subscribe::{
    APP_RELEASE_GRACE, DEFAULT_FETCH_RETRY_BASE, DEFAULT_FETCH_RETRY_MAX, DEFAULT_FIRST_FETCH_WAIT,
    DEFAULT_START_TIMEOUT, SubscribeOptions, SubscriptionHandle,
};
pub use subscription::Subscription;
pub use views::VIEW_RELEASE_GRACE;
