//! Metrics in the Prometheus text exposition format (version 0.0.4), and a tiny HTTP
//! endpoint serving them.
//!
//! [`Metrics`] gathers what to expose (a resolver's counters and instances per app, and the
//! MetadataService requests each provider answered); [`Metrics::render`] writes them out,
//! [`serve_metrics`] answers `GET /metrics` with them.
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
//! | `introspect_provider_metadata_requests_total{app,instance}` | counter | `GetMetadataInfo` requests a provider answered |
//!
//! and the other fields of [`ResolverStats`], each under `introspect_` with its own help
//! text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use tokio::task::JoinHandle;

use crate::consumer::{Resolver, ResolverStats};
use crate::error::Result;
use crate::provider::Provider;
use crate::rpc::ExportedMetadata;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Connections served at once by [`serve_metrics`]; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;
/// The longest a scrape connection may stay open.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(30);

/// What a metrics endpoint exposes: at most one resolver and any number of providers.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Metrics {
    resolver: Option<Resolver>,
    providers: Vec<ProviderSource>,
}

#[derive(Clone)]
struct ProviderSource {
    instance: String,
    exported: Arc<ExportedMetadata>,
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

impl Metrics {
    /// Nothing to expose yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exposes this resolver's counters (replacing any resolver given before).
    pub fn resolver(mut self, resolver: &Resolver) -> Self {
        self.resolver = Some(resolver.clone());
        self
    }

    /// Exposes the MetadataService requests `provider` answers, labelled with its app and
    /// its instance address (read now: add the provider once it has started).
    pub async fn provider(mut self, provider: &Provider) -> Self {
        self.providers.push(ProviderSource {
            instance: provider.instance().await.address(),
            exported: provider.exported().clone(),
        });
        self
    }

    /// The metrics in the text exposition format.
    pub async fn render(&self) -> String {
        let mut out = String::new();
        if let Some(resolver) = &self.resolver {
            let stats = resolver.stats().await;
            render_resolver_stats(&mut out, &stats, &resolver.instances_per_app());
        }
        if !self.providers.is_empty() {
            let rows: Vec<(String, String, u64)> = self
                .providers
                .iter()
                .map(|p| {
                    (
                        p.exported.current().app.clone(),
                        p.instance.clone(),
                        p.exported.served(),
                    )
                })
                .collect();
            header(
                &mut out,
                "introspect_provider_metadata_requests_total",
                "counter",
                "GetMetadataInfo requests the provider answered (found or not).",
            );
            for (app, instance, served) in &rows {
                let _ = writeln!(
                    out,
                    "introspect_provider_metadata_requests_total{{app=\"{}\",instance=\"{}\"}} {served}",
                    escape(app),
                    escape(instance)
                );
            }
            header(
                &mut out,
                "introspect_provider_revision_info",
                "gauge",
                "The provider's current revision, as a label (the value is always 1).",
            );
            for p in &self.providers {
                let current = p.exported.current();
                let _ = writeln!(
                    out,
                    "introspect_provider_revision_info{{app=\"{}\",instance=\"{}\",revision=\"{}\"}} 1",
                    escape(&current.app),
                    escape(&p.instance),
                    escape(&current.revision)
                );
            }
        }
        out
    }
}

/// A resolver's metrics in the text exposition format.
pub async fn render_resolver(resolver: &Resolver) -> String {
    Metrics::new().resolver(resolver).render().await
}

/// Writes resolver stats and instances per app in the text exposition format.
pub fn render_resolver_stats(
    out: &mut String,
    stats: &ResolverStats,
    instances_per_app: &BTreeMap<String, u64>,
) {
    let counters: [(&str, &str, u64); 18] = [
        (
            "metadata_fetches_total",
            "MetadataService calls made (each attempt on an instance counts once).",
            stats.metadata_fetches,
        ),
        (
            "metadata_cache_hits_total",
            "Metadata lookups answered from the cache.",
            stats.cache_hits,
        ),
        (
            "metadata_cache_misses_total",
            "Metadata lookups that had to load (concurrent callers share one load).",
            stats.cache_misses,
        ),
        (
            "metadata_fetch_failures_total",
            "MetadataService calls or metadata report reads that failed.",
            stats.fetch_failures,
        ),
        (
            "revision_mismatches_total",
            "Metadata answers rejected because their content did not hash to their revision.",
            stats.revision_mismatches,
        ),
        (
            "unsupported_metadata_services_total",
            "Instances not asked for metadata: their MetadataService is not V2 over tri or grpc.",
            stats.unsupported_metadata_services,
        ),
        (
            "metadata_report_reads_total",
            "Metadata report reads (storage type remote).",
            stats.report_reads,
        ),
        (
            "metadata_retries_total",
            "Background metadata fetches retried after a failure.",
            stats.metadata_retries,
        ),
        (
            "skipped_records_total",
            "Instance records skipped as malformed, oversized or misplaced.",
            stats.skipped_records,
        ),
        (
            "pushes_total",
            "Endpoint sets pushed to subscribers.",
            stats.pushes,
        ),
        (
            "unchanged_updates_total",
            "Coalesced updates not pushed because the endpoint set was unchanged.",
            stats.unchanged_updates,
        ),
        (
            "relists_total",
            "Instance lists read again after a watch ended.",
            stats.relists,
        ),
        (
            "watch_restarts_total",
            "Mapping and instance watches that ended with an error and were started again.",
            stats.watch_restarts,
        ),
        (
            "held_removals_total",
            "Instance expiries held by self-preservation.",
            stats.held_removals,
        ),
        (
            "set_aside_total",
            "Times an endpoint was set aside after consecutive call failures.",
            stats.set_aside,
        ),
        (
            "health_probes_total",
            "Health probes of set-aside endpoints.",
            stats.probes,
        ),
        (
            "snapshot_writes_total",
            "Local snapshots written.",
            stats.snapshot_writes,
        ),
        (
            "snapshot_loads_total",
            "Subscriptions started from the local snapshot because the store was unreachable.",
            stats.snapshot_loads,
        ),
    ];
    let gauges: [(&str, &str, u64); 4] = [
        (
            "revisions_known",
            "Distinct (app, revision) pairs whose metadata is cached.",
            stats.revisions_known,
        ),
        ("subscriptions", "Live subscriptions.", stats.subscriptions),
        (
            "protected_apps",
            "Apps (per subscription) whose removals self-preservation holds right now.",
            stats.protected_apps,
        ),
        (
            "protection_active",
            "1 while self-preservation holds removals in any subscription, else 0.",
            u64::from(stats.protection_active),
        ),
    ];
    for (kind, rows) in [("counter", &counters[..]), ("gauge", &gauges[..])] {
        for (name, help, value) in rows {
            let name = format!("introspect_{name}");
            header(out, &name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
    }
    header(
        out,
        "introspect_revision_checks_total",
        "counter",
        "Metadata answers checked against their revision, by declared rule and outcome.",
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
            let _ = writeln!(
                out,
                "introspect_revision_checks_total{{rule=\"{rule}\",outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    header(
        out,
        "introspect_app_instances",
        "gauge",
        "Routable instances per app, as the live subscriptions see them.",
    );
    for (app, n) in instances_per_app {
        let _ = writeln!(
            out,
            "introspect_app_instances{{app=\"{}\"}} {n}",
            escape(app)
        );
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value: backslash, double quote and line feed.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Serves the metrics over HTTP/1.1 at `addr` (port 0: any free port): `GET /metrics`
/// answers them, anything else 404 (or 405 for another method on `/metrics`). Returns the
/// bound address and the server task; abort the task to stop it.
///
/// Built on hyper, already in the tree through tonic: a real HTTP parser with header-read
/// timeouts and keep-alive rather than a hand-rolled one. At most 32 connections are
/// served at once, each for at most 30 seconds.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Metrics,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(address = %bound, "serving metrics at /metrics");
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            let Ok(permit) = limit.clone().acquire_owned().await else {
                return;
            };
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = hyper::service::service_fn(move |request| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&metrics, request).await) }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(5))
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                match tokio::time::timeout(CONNECTION_DEADLINE, connection).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "metrics connection ended"),
                    Err(_) => {
                        tracing::debug!(%peer, "metrics connection closed after its deadline")
                    }
                }
            });
        }
    });
    Ok((bound, task))
}

async fn answer(
    metrics: &Metrics,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
            response
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, value);
        }
        response
    };
    if request.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found; metrics are at /metrics\n".into(),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "use GET\n".into(),
        );
        response.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return response;
    }
    reply(StatusCode::OK, CONTENT_TYPE, metrics.render().await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn every_sample_has_help_and_type() {
        let mut out = String::new();
        let stats = ResolverStats {
            metadata_fetches: 3,
            protection_active: true,
            ..Default::default()
        };
        let apps = [("shop".to_owned(), 2)].into_iter().collect();
        render_resolver_stats(&mut out, &stats, &apps);
        assert!(out.contains("introspect_metadata_fetches_total 3\n"));
        assert!(out.contains("introspect_protection_active 1\n"));
        assert!(out.contains("introspect_app_instances{app=\"shop\"} 2\n"));
        let mut typed = std::collections::HashSet::new();
        for line in out.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                assert!(typed.insert(rest.split(' ').next().unwrap().to_owned()));
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(typed.contains(name), "{line}");
            }
        }
    }
}
