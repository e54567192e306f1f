//! [`ResolverOptions`]: a resolver's fetch, cache, registry-call and consumer-record
//! settings, each with its default.

use std::time::Duration;

/// A resolver's metadata fetches, its metadata cache, its registry calls and its consumer
/// record. Every part has a default (see each setter, and read it with the `get_` method
/// of the same name); give them with
/// [`ResolverBuilder::options`](super::ResolverBuilder::options) or the builder's setters
/// of the same names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolverOptions {
    /// The deadline of one MetadataService call (default 3 s).
    pub(crate) fetch_timeout: Duration,
    /// Instances of one revision tried before a fetch gives up (default 5, at least 1).
    pub(crate) fetch_attempts: usize,
    /// (app, revision) metadata entries cached (default 10 000).
    pub(crate) cache_capacity: u64,
    /// How long an unused cached revision is kept (default 30 minutes).
    pub(crate) cache_idle: Duration,
    /// The deadline of each registry call (default 5 s).
    pub(crate) store_timeout: Duration,
    /// The liveness of the consumer record (default 10 s, at least 1 s).
    pub(crate) consumer_ttl: Duration,
    /// The shortest time between two rewrites of the consumer record (default 10 s).
    pub(crate) consumer_refresh: Duration,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            fetch_timeout: Duration::from_secs(3),
            fetch_attempts: 5,
            cache_capacity: 10_000,
            cache_idle: Duration::from_secs(30 * 60),
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT,
            consumer_ttl: Duration::from_secs(10),
            consumer_refresh: Duration::from_secs(10),
        }
    }
}

impl ResolverOptions {
    crate::setters::option_accessors! {
        /// Sets the deadline of one MetadataService call (default 3 s).
        fetch_timeout / get_fetch_timeout => fetch_timeout: Duration;

        /// Sets how many instances of a revision one fetch tries (default 5, at least 1).
        fetch_attempts / get_fetch_attempts => fetch_attempts: usize, |attempts| attempts.max(1);

        /// Sets how many (app, revision) metadata entries are cached (default 10 000).
        cache_capacity / get_cache_capacity => cache_capacity: u64;

        /// Sets how long an unused cached revision is kept (default 30 minutes).
        cache_idle / get_cache_idle => cache_idle: Duration;

        /// Sets the deadline of each registry call (default 5 s).
        store_timeout / get_store_timeout => store_timeout: Duration;

        /// Sets the liveness of the consumer record, as a provider's lease (default 10 s, at
        /// least 1 s). Only read when the resolver registers one
        /// ([`ResolverBuilder::register_consumer`](super::ResolverBuilder::register_consumer)).
        consumer_ttl / get_consumer_ttl => consumer_ttl: Duration,
            |ttl| ttl.max(Duration::from_secs(1));

        /// Sets the shortest time between two rewrites of the consumer record (default 10 s):
        /// changes within it are written together at its end. Only read when the resolver
        /// registers one.
        consumer_refresh / get_consumer_refresh => consumer_refresh: Duration;
    }
}
