//! [`ProviderOptions`]: how long a provider's registration lives, drains and waits, each
//! with its default.

use std::time::Duration;

/// How long a provider's registration lives, drains and waits. Every part has a default
/// (see each setter, and read it with the `get_` method of the same name); give them with
/// [`ProviderBuilder::options`](super::ProviderBuilder::options) or the builder's setters
/// of the same names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderOptions {
    /// The lease TTL (default 10 s); at least 1 s, checked when the provider is built.
    pub(crate) lease_ttl: Duration,
    /// The drain period of a graceful shutdown (default 2 s).
    pub(crate) drain: Duration,
    /// How long an earlier revision stays answerable (default 120 s).
    pub(crate) revision_grace: Duration,
    /// The delay between a rule change and the republished revision (default 1 s).
    pub(crate) publish_delay: Duration,
    /// The deadline of each registry call (default 5 s).
    pub(crate) store_timeout: Duration,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        ProviderOptions {
            lease_ttl: Duration::from_secs(10),
            drain: Duration::from_secs(2),
            revision_grace: Duration::from_secs(120),
            publish_delay: Duration::from_secs(1),
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT,
        }
    }
}

impl ProviderOptions {
    crate::setters::option_accessors! {
        /// Sets the lease TTL (default 10 s): a crashed provider disappears this long after
        /// its last keep-alive. On ZooKeeper, the session timeout asked for (the server may
        /// grant another, which is then used). Keep-alives go every third of the TTL granted.
        /// Under 1 s, [`ProviderBuilder::build`](super::ProviderBuilder::build) fails.
        lease_ttl / get_lease_ttl => lease_ttl: Duration;

        /// Sets the drain period of a graceful shutdown (default 2 s): the time between
        /// marking the instance disabled and deregistering it.
        drain_period / get_drain_period => drain: Duration;

        /// Sets how long an earlier revision stays answerable after an export change
        /// (default 120 s).
        revision_grace / get_revision_grace => revision_grace: Duration;

        /// Sets how long after a rule change the provider republishes (default 1 s, Java's
        /// `dubbo.application.metadata.publish.delay`): changes within one delay make one
        /// revision.
        rules_publish_delay / get_rules_publish_delay => publish_delay: Duration;

        /// Sets the deadline of each registry call (default 5 s): a hanging registry costs a
        /// timeout, never a hung provider.
        store_timeout / get_store_timeout => store_timeout: Duration;
    }
}
