//! The consumer side: resolving interfaces to endpoints, once ([`Resolver::resolve`]) or
//! live ([`Resolver::subscribe`]), with the registry-center protections of the design's
//! section 8.
//!
//! Layout, one concept per file:
//!
//! * `resolver.rs`: interface → apps → instances → metadata once per revision → endpoints;
//! * `subscription.rs`: what a consumer asks for;
//! * `channel.rs`: a load-balanced tonic channel following a subscription;
//! * `subscribe.rs`: the task that keeps a subscription live (watches, re-lists, background
//!   metadata retries, pushes);
//! * `app_view.rs`: one app's instances as a subscriber sees them (pure);
//! * `protection.rs`: self-preservation against mass expiry (pure);
//! * `coalesce.rs`: coalescing against notification storms (pure);
//! * `health.rs`: consumer-side health, setting failing endpoints aside (pure, plus a probe);
//! * `snapshot.rs`: the local snapshot on disk;
//! * `stats.rs`: counters.

mod app_view;
pub mod channel;
pub mod coalesce;
pub mod health;
pub mod protection;
mod resolver;
pub mod snapshot;
mod stats;
mod subscribe;
mod subscription;

pub use channel::{ChannelHandle, ChannelOptions};
pub use coalesce::CoalesceOptions;
pub use health::HealthOptions;
pub use protection::ProtectionOptions;
pub use resolver::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_IDLE, DEFAULT_FETCH_ATTEMPTS, DEFAULT_FETCH_TIMEOUT,
    Resolver, ResolverBuilder,
};
pub use snapshot::SnapshotOptions;
pub use stats::{ResolverStats, RevisionChecks, RuleCounts};
pub use subscribe::{
    DEFAULT_FETCH_RETRY_BASE, DEFAULT_FETCH_RETRY_MAX, DEFAULT_START_TIMEOUT, SubscribeOptions,
    SubscriptionHandle,
};
pub use subscription::Subscription;
