//! What the resolver and its subscriptions share: the registry backend, the metadata
//! source with its cache, the counters, the limits, the TLS configuration, the shared views
//! the health of every address and the shared host names.
//!
//! The [`super::Resolver`] facade and every subscription task hold one `Arc<Context>`;
//! neither calls the other, so dependencies point one way: resolver and subscriptions →
//! context → backend, metadata source, counters.

use crate::tls::ClientTlsConfig;

use super::hosts::HostNames;
use super::metadata::MetadataSource;
use super::probes::HealthRegistry;
use super::protection::ProtectionOptions;
use super::stats::Counters;
use super::views::Views;
use crate::backend::Backend;
use crate::limits::Limits;
use crate::warnings::Aggregator;

/// See the module docs.
pub(crate) struct Context {
    /// The registry backend (each call under the store deadline): instances listed and
    /// followed per app, interface → apps, metadata reports.
    pub backend: Backend,
    /// Metadata of (app, revision), cached and loaded once.
    pub metadata: MetadataSource,
    /// Size limits on everything read.
    pub limits: Limits,
    /// Counters every part bumps.
    pub counters: Counters,
    /// The TLS configuration of MetadataService calls, also the default of channels.
    pub tls: Option<ClientTlsConfig>,
    /// The shared per-app and per-mapping views.
    pub views: Views,
    /// Repeated warnings, aggregated per cause.
    pub warnings: Aggregator,
    /// Consumer-side health of every address, for all subscriptions and channels.
    pub health: HealthRegistry,
    /// Self-preservation, applied once per app in its shared view.
    pub protection: ProtectionOptions,
    /// One shared string per host, for every endpoint built.
    pub hosts: HostNames,
}
