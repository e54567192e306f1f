//! Resolver and provider metrics, published through the [`metrics`] facade.
//!
//! The library holds no HTTP server and formats no text: it records into whatever recorder
//! the application installed (for Prometheus, `metrics-exporter-prometheus`; the
//! `introspect` tool's `--metrics ADDR` does that). Without a recorder, publishing costs
//! next to nothing.
//!
//! [`Metrics`] names what to publish (a resolver's counters and instances per app, the
//! MetadataService requests each provider answered). [`Metrics::publish`] records the
//! current values once; [`Metrics::spawn`] does it now and then every interval until the
//! returned [`MetricsTask`] is dropped. The values are read from the stats snapshots
//! ([`crate::ResolverStats`], [`crate::rpc::ExportedMetadata::served`]), so counters are
//! set to their absolute totals.
//!
//! ```no_run
//! # async fn demo(resolver: introspect::Resolver, provider: introspect::Provider) {
//! use std::time::Duration;
//! use introspect::metrics::Metrics;
//!
//! // After installing a recorder (e.g. metrics_exporter_prometheus::PrometheusBuilder):
//! let _publishing = Metrics::new()
//!     .resolver(&resolver)
//!     .provider(&provider)
//!     .await
//!     .spawn(Duration::from_secs(1));
//! # }
//! ```
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `introspect_metadata_fetches_total` | counter | MetadataService calls made |
//! | `introspect_metadata_cache_hits_total` | counter | metadata lookups answered from the cache |
//! | `introspect_metadata_cache_misses_total` | counter | metadata lookups that had to load |
//! | `introspect_metadata_fetch_failures_total` | counter | MetadataService calls or report reads that failed |
//! | `introspect_revisions_known` | gauge | (app, revision) pairs whose metadata is cached |
//! | `introspect_app_instances{app}` | gauge | routable instances per app, as subscriptions see them |
//! | `introspect_watch_restarts_total` | counter | watches that ended with an error and were restarted |
//! | `introspect_relists_total` | counter | instance lists read again after a watch ended |
//! | `introspect_protection_active` | gauge | 1 while self-preservation holds removals |
//! | `introspect_pushes_total` | counter | endpoint sets pushed to subscribers |
//! | `introspect_revision_checks_total{rule,outcome}` | counter | metadata answers checked against their revision: rule `sha256-v1`, `sha256-v2`, `java-md5` (no rule declared) or `other`; outcome `verified`, `rejected` or `unverifiable` |
//! | `introspect_unsupported_metadata_services_total` | counter | instances not asked for metadata: their MetadataService is not V2 over tri or grpc |
//! | `introspect_identity_rejections_total` | counter | servers the identity check refused (channel endpoints removed, MetadataService calls refused) |
//! | `introspect_app_identity_rejections_total{app}` | counter | the same, per app the refused servers were resolved for |
//! | `introspect_provider_metadata_requests_total{app,instance}` | counter | `GetMetadataInfo` requests a provider answered |
//! | `introspect_provider_revision_info{app,instance,revision}` | gauge | 1 for a provider's current revision, 0 for those it had |
//!
//! and the other fields of [`ResolverStats`], each under `introspect_` with its own
//! description.
//!
//! # Label cardinality
//!
//! The `app` label of `introspect_app_instances` (and of
//! `introspect_app_identity_rejections_total`) takes its values from the store, which
//! whoever writes the store controls. At most 100 distinct apps get
//! a series of their own in each ([`Metrics::max_app_labels`] changes the bound), first
//! come, first served; the values of the others are summed under `app="other"`. A provider's labels
//! come from its own configuration, not from the store.

mod labels;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, gauge};
use tokio::task::JoinHandle;

use crate::consumer::{Resolver, ResolverStats};
use crate::provider::Provider;
use crate::rpc::ExportedMetadata;

pub use labels::OTHER as OTHER_APPS;

/// The bound on distinct `app` label values unless [`Metrics::max_app_labels`] sets
/// another; see the module docs.
const DEFAULT_MAX_APP_LABELS: usize = 100;

/// What to publish: at most one resolver and any number of providers. Cheap to clone; the
/// clones share the label bound's state.
#[derive(Clone)]
pub struct Metrics {
    resolver: Option<Resolver>,
    providers: Vec<ProviderSource>,
    state: Arc<Mutex<State>>,
}

#[derive(Clone)]
struct ProviderSource {
    instance: String,
    exported: Arc<ExportedMetadata>,
}

/// What publishing remembers between two rounds.
struct State {
    apps: labels::BoundedLabels,
    /// The apps of `introspect_app_identity_rejections_total`, bounded apart.
    rejecting_apps: labels::BoundedLabels,
    /// The revision last published per provider instance, to set its info gauge to 0 once
    /// it is replaced.
    revisions: BTreeMap<String, String>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            resolver: None,
            providers: Vec::new(),
            state: Arc::new(Mutex::new(State {
                apps: labels::BoundedLabels::new(DEFAULT_MAX_APP_LABELS),
                rejecting_apps: labels::BoundedLabels::new(DEFAULT_MAX_APP_LABELS),
                revisions: BTreeMap::new(),
            })),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("resolver", &self.resolver.is_some())
            .field(
                "providers",
                &self
                    .providers
                    .iter()
                    .map(|p| &p.instance)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The values of one publishing round, read from the stats snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// The resolver's counters, if a resolver is published.
    pub resolver: Option<ResolverStats>,
    /// Routable instances per app, as the resolver's live subscriptions see them.
    pub instances_per_app: BTreeMap<String, u64>,
    /// Servers the identity check refused, per app.
    pub identity_rejections_per_app: BTreeMap<String, u64>,
    /// Per provider: its app, its instance address, its current revision and the
    /// `GetMetadataInfo` requests it answered.
    pub providers: Vec<ProviderSample>,
}

/// One provider's values in a [`Sample`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderSample {
    /// The provider's app.
    pub app: String,
    /// Its instance address, `host:port`.
    pub instance: String,
    /// Its current revision.
    pub revision: String,
    /// `GetMetadataInfo` requests it answered (found or not).
    pub served: u64,
}

impl Metrics {
    /// Nothing to publish yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes this resolver's counters (replacing any resolver given before).
    pub fn resolver(mut self, resolver: &Resolver) -> Self {
        self.resolver = Some(resolver.clone());
        self
    }

    /// Publishes the MetadataService requests `provider` answers, labelled with its app and
    /// its instance address (read now: add the provider once it has started).
    pub async fn provider(mut self, provider: &Provider) -> Self {
        self.providers.push(ProviderSource {
            instance: provider.instance().await.key_address(),
            exported: provider.exported().clone(),
        });
        self
    }

    /// At most `max` distinct `app` label values (default 100); the
    /// rest are summed under [`OTHER_APPS`]. Resets what was admitted so far.
    pub fn max_app_labels(self, max: usize) -> Self {
        if let Ok(mut state) = self.state.lock() {
            state.apps = labels::BoundedLabels::new(max);
            state.rejecting_apps = labels::BoundedLabels::new(max);
        }
        self
    }

    /// Reads the current values.
    pub async fn sample(&self) -> Sample {
        let mut sample = Sample::default();
        if let Some(resolver) = &self.resolver {
            sample.resolver = Some(resolver.stats().await);
            sample.instances_per_app = resolver.instances_per_app();
            sample.identity_rejections_per_app = resolver.identity_rejections_per_app();
        }
        sample.providers = self
            .providers
            .iter()
            .map(|p| {
                let current = p.exported.current();
                ProviderSample {
                    app: current.app.clone(),
                    instance: p.instance.clone(),
                    revision: current.revision.clone(),
                    served: p.exported.served(),
                }
            })
            .collect();
        sample
    }

    /// Records `sample` into the installed recorder, folding `app` labels past the bound.
    pub fn record(&self, sample: &Sample) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(stats) = &sample.resolver {
            record_resolver(stats);
            describe_gauge!(
                "introspect_app_instances",
                "Routable instances per app, as the live subscriptions see them."
            );
            for (app, n) in state.apps.fold(&sample.instances_per_app) {
                gauge!("introspect_app_instances", "app" => app).set(n as f64);
            }
            if !sample.identity_rejections_per_app.is_empty() {
                describe_counter!(
                    "introspect_app_identity_rejections_total",
                    "Servers the identity check refused, per app they were resolved for."
                );
            }
            let rejections = &sample.identity_rejections_per_app;
            for (app, n) in state.rejecting_apps.fold(rejections) {
                counter!("introspect_app_identity_rejections_total", "app" => app).absolute(n);
            }
        }
        if !sample.providers.is_empty() {
            describe_counter!(
                "introspect_provider_metadata_requests_total",
                "GetMetadataInfo requests the provider answered (found or not)."
            );
            describe_gauge!(
                "introspect_provider_revision_info",
                "1 for the provider's current revision, 0 for the revisions it had before."
            );
        }
        for p in &sample.providers {
            counter!(
                "introspect_provider_metadata_requests_total",
                "app" => p.app.clone(),
                "instance" => p.instance.clone()
            )
            .absolute(p.served);
            let previous = state
                .revisions
                .insert(p.instance.clone(), p.revision.clone());
            if let Some(previous) = previous.filter(|r| *r != p.revision) {
                gauge!(
                    "introspect_provider_revision_info",
                    "app" => p.app.clone(),
                    "instance" => p.instance.clone(),
                    "revision" => previous
                )
                .set(0.0);
            }
            gauge!(
                "introspect_provider_revision_info",
                "app" => p.app.clone(),
                "instance" => p.instance.clone(),
                "revision" => p.revision.clone()
            )
            .set(1.0);
        }
    }

    /// Reads the current values and records them.
    pub async fn publish(&self) {
        let sample = self.sample().await;
        self.record(&sample);
    }

    /// Publishes now and then every `every` (at least 10 ms) on a task of its own, until the
    /// returned handle is dropped. Needs a tokio runtime.
    pub fn spawn(self, every: Duration) -> MetricsTask {
        let every = every.max(Duration::from_millis(10));
        MetricsTask(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                self.publish().await;
            }
        }))
    }
}

/// The task [`Metrics::spawn`] started; dropping it stops publishing.
#[derive(Debug)]
pub struct MetricsTask(JoinHandle<()>);

impl Drop for MetricsTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn record_resolver(stats: &ResolverStats) {
    for series in stats.series() {
        let name = format!("introspect_{}", series.name);
        if series.counter {
            describe_counter!(name.clone(), series.help);
            counter!(name).absolute(series.value);
        } else {
            describe_gauge!(name.clone(), series.help);
            gauge!(name).set(series.value as f64);
        }
    }
    describe_counter!(
        "introspect_revision_checks_total",
        "Metadata answers checked against their revision, by rule and outcome."
    );
    let checks = &stats.revision_checks;
    for (rule, counts) in [
        ("sha256-v1", checks.sha256_v1),
        ("sha256-v2", checks.sha256_v2),
        ("java-md5", checks.java_md5),
        ("other", checks.other_rules),
    ] {
        for (outcome, n) in [
            ("verified", counts.verified),
            ("rejected", counts.rejected),
            ("unverifiable", counts.unverifiable),
        ] {
            counter!("introspect_revision_checks_total", "rule" => rule, "outcome" => outcome)
                .absolute(n);
        }
    }
}
