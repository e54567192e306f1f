//! How a subscription behaves.

use std::time::Duration;

use super::{DEFAULT_FETCH_RETRY_BASE, DEFAULT_FETCH_RETRY_MAX, DEFAULT_START_TIMEOUT};
use crate::consumer::coalesce::CoalesceOptions;
use crate::consumer::health::HealthOptions;
use crate::consumer::protection::ProtectionOptions;
use crate::consumer::snapshot::SnapshotOptions;

/// How a subscription behaves. Every part has defaults; see each field.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscribeOptions {
    /// Coalescing of bursts (default [`CoalesceOptions::default`]).
    pub coalesce: CoalesceOptions,
    /// Self-preservation (default [`ProtectionOptions::default`]).
    pub protection: ProtectionOptions,
    /// Consumer-side health (default [`HealthOptions::default`]).
    pub health: HealthOptions,
    /// The local snapshot (default: none).
    pub snapshot: Option<SnapshotOptions>,
    /// How long a new subscription waits for the store before serving from the snapshot
    /// (default [`DEFAULT_START_TIMEOUT`]).
    pub start_timeout: Duration,
    /// First delay before a failed metadata fetch is retried (default
    /// [`DEFAULT_FETCH_RETRY_BASE`]).
    pub fetch_retry_base: Duration,
    /// Longest delay between retries (default [`DEFAULT_FETCH_RETRY_MAX`]).
    pub fetch_retry_max: Duration,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            coalesce: CoalesceOptions::default(),
            protection: ProtectionOptions::default(),
            health: HealthOptions::default(),
            snapshot: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            fetch_retry_base: DEFAULT_FETCH_RETRY_BASE,
            fetch_retry_max: DEFAULT_FETCH_RETRY_MAX,
        }
    }
}

impl SubscribeOptions {
    /// Sets the coalescing options.
    pub fn coalesce(mut self, coalesce: CoalesceOptions) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Sets the self-preservation options.
    pub fn protection(mut self, protection: ProtectionOptions) -> Self {
        self.protection = protection;
        self
    }

    /// Sets the consumer-side health options.
    pub fn health(mut self, health: HealthOptions) -> Self {
        self.health = health;
        self
    }

    /// Keeps a local snapshot.
    pub fn snapshot(mut self, snapshot: SnapshotOptions) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Sets how long a new subscription waits for the store.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Sets the first and the longest delay of metadata fetch retries.
    pub fn fetch_retry(mut self, base: Duration, max: Duration) -> Self {
        self.fetch_retry_base = base;
        self.fetch_retry_max = max.max(base);
        self
    }
}
