//! The consumer side: resolving interfaces to endpoints, once ([`Resolver::resolve`]) or
//! live ([`Resolver::subscribe`]), with the registry-center protections of the design's
//! section 8.
//!
//! Layout, one concept per file:
//!
//! * `context.rs`: what the resolver and every subscription share (store layers, metadata
//!   source, counters, limits, TLS); the resolver and the subscriptions never call each
//!   other, both depend on it;
//! * `metadata.rs`: the metadata source: moka cache, single-flight loads, verification;
//! * `endpoints.rs`: building endpoints from instances and metadata (pure);
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
//! * `channel.rs`: the balanced channel, a tower balancer over that stream, and `dial.rs`:
//!   how it dials each endpoint (`ChannelOptions`);
//! * `app_view.rs`: one app's instances as a subscriber sees them (pure);
//! * `protection.rs`: self-preservation against mass expiry (pure);
//! * `coalesce.rs`: coalescing against notification storms (pure);
//! * `health.rs`: consumer-side health, setting failing endpoints aside (pure, plus a probe);
//! * `snapshot.rs`: the local snapshot on disk;
//! * `stats.rs`: counters.

mod app_view;
pub mod channel;
mod coalesce;
mod context;
mod dial;
pub mod discover;
mod endpoints;
mod health;
mod metadata;
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
    DEFAULT_FAILURE_THRESHOLD, DEFAULT_PROBE_INTERVAL, DEFAULT_PROBE_TIMEOUT, HealthOptions, Probe,
};
pub use protection::{
    DEFAULT_MAX_HOLD, DEFAULT_MIN_INSTANCES, DEFAULT_PROTECTION_THRESHOLD,
    DEFAULT_PROTECTION_WINDOW, ProtectionOptions,
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
