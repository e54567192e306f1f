//! The metadata source: the metadata of (app, revision), cached, loaded once and verified.
//!
//! * **Cache**: a bounded moka cache keyed by (app, revision) holding `Arc<MetadataInfo>`;
//!   idle entries go after a while.
//! * **Single flight**: concurrent callers asking for one uncached revision share one load.
//! * **Load**: the metadata report first when an instance says its storage type is
//!   `remote`, then the MetadataService of a random instance of the revision, then the
//!   others, up to an attempt limit.
//! * **Verification**: every answer goes through [`verify_answer`], the one place that
//!   decides whether an answer is accepted for the revision asked for.
//! * **Identity**: with an identity check, an instance whose certificate does not name the
//!   app is refused (counted and logged in [`Rejections`]) and the next one asked.

use std::sync::Arc;
use std::time::Duration;

use rand::seq::SliceRandom;
use tracing::Instrument as _;

use super::rejections::Rejections;
use crate::backend::MetadataReports;
use crate::consumer::stats::Counters;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{
    Declared, MetadataInfo, ReportKey, ServiceInstance, StorageType, Verification, verification,
};
use crate::rpc::MetadataClient;
use crate::warnings::{Aggregator, aggregated};

/// (app, revision).
type CacheKey = (String, String);

/// How a [`MetadataSource`] caches and fetches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheSettings {
    /// Instances of one revision tried before a fetch gives up (at least 1).
    pub fetch_attempts: usize,
    /// (app, revision) entries cached.
    pub capacity: u64,
    /// How long an unused entry is kept.
    pub idle: Duration,
}

/// See the module docs.
pub(crate) struct MetadataSource {
    reports: Arc<dyn MetadataReports>,
    limits: Limits,
    client: MetadataClient,
    counters: Arc<Counters>,
    rejections: Arc<Rejections>,
    fetch_attempts: usize,
    cache: moka::future::Cache<CacheKey, Arc<MetadataInfo>>,
    /// Failed fetches and unusable instances, one line per app and cause per interval:
    /// a revision whose instances all fail is tried again and again.
    warnings: Aggregator,
}

impl MetadataSource {
    /// A source reading `reports` (within `limits`) and calling MetadataServices with
    /// `client`, counting into `counters` and `rejections`.
    pub fn new(
        reports: Arc<dyn MetadataReports>,
        limits: Limits,
        client: MetadataClient,
        counters: Arc<Counters>,
        rejections: Arc<Rejections>,
        settings: CacheSettings,
    ) -> Self {
        let CacheSettings {
            fetch_attempts,
            capacity: cache_capacity,
            idle: cache_idle,
        } = settings;
        MetadataSource {
            reports,
            limits,
            client,
            counters,
            rejections,
            fetch_attempts: fetch_attempts.max(1),
            cache: moka::future::Cache::builder()
                .max_capacity(cache_capacity)
                .time_to_idle(cache_idle)
                .build(),
            warnings: Aggregator::default(),
        }
    }

    /// The metadata of `app` at `revision`: from the cache, else loaded once (concurrent
    /// callers share the load) from the report or one of `members`.
    pub async fn get(
        &self,
        app: &str,
        revision: &str,
        members: &[&Arc<ServiceInstance>],
    ) -> Result<Arc<MetadataInfo>> {
        self.fetch(app, revision, members)
            .await
            .map_err(|failed| failed.error)
    }

    /// Like [`get`](Self::get), saying of a failure whether a retry may mend it.
    pub async fn fetch(
        &self,
        app: &str,
        revision: &str,
        members: &[&Arc<ServiceInstance>],
    ) -> std::result::Result<Arc<MetadataInfo>, Unfetched> {
        if let Some(info) = self.get_cached(app, revision).await {
            return Ok(info);
        }
        let counters = &*self.counters;
        let key = (app.to_owned(), revision.to_owned());
        let candidates: Vec<Arc<ServiceInstance>> = members.iter().map(|i| Arc::clone(i)).collect();
        let span = tracing::debug_span!("metadata_load", %app, %revision);
        let load = async {
            Counters::bump(&counters.cache_misses);
            let loaded = self.load(counters, app, revision, candidates).await;
            if let Ok(info) = &loaded {
                tracing::debug!(services = info.services.len(), "metadata loaded");
            }
            loaded.map(Arc::new)
        }
        .instrument(span);
        self.cache
            .try_get_with(key, load)
            .await
            .map_err(|failed: Arc<Unfetched>| Unfetched {
                error: Error::MetadataUnavailable {
                    app: app.to_owned(),
                    revision: revision.to_owned(),
                    reason: failed.error.to_string(),
                    last: Some(crate::error::Shared::new(failed.error.clone())),
                },
                lasting: failed.lasting,
            })
    }

    /// The metadata of `app` at `revision` if it is cached, without loading it (a load in
    /// flight is not waited for).
    pub async fn get_cached(&self, app: &str, revision: &str) -> Option<Arc<MetadataInfo>> {
        let info = self
            .cache
            .get(&(app.to_owned(), revision.to_owned()))
            .await?;
        Counters::bump(&self.counters.cache_hits);
        Some(info)
    }

    /// How many instances of one revision a load tries before it gives up.
    pub fn fetch_attempts(&self) -> usize {
        self.fetch_attempts
    }

    /// Whether the metadata of `app` at `revision` is cached (a load in flight is not).
    pub fn is_cached(&self, app: &str, revision: &str) -> bool {
        self.cache
            .contains_key(&(app.to_owned(), revision.to_owned()))
    }

    /// How many revisions are cached, once pending evictions have run.
    pub async fn cached(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.entry_count()
    }

    /// Forgets every cached revision.
    pub async fn clear(&self) {
        self.cache.invalidate_all();
        self.cache.run_pending_tasks().await;
    }

    /// Loads metadata: the report first when an instance says `remote`, then the
    /// MetadataService of a random instance of the revision, then the others, up to the
    /// attempt limit. Answers [`verify_answer`] rejects are not used. A failure is lasting
    /// when every source asked failed in a way no retry mends (see [`lasting`]).
    async fn load(
        &self,
        counters: &Counters,
        app: &str,
        revision: &str,
        mut candidates: Vec<Arc<ServiceInstance>>,
    ) -> std::result::Result<MetadataInfo, Unfetched> {
        let mut last_error = Error::MetadataUnavailable {
            app: app.to_owned(),
            revision: revision.to_owned(),
            reason: "no instance to ask".into(),
            last: None,
        };
        // Whether some source failed in a way that may pass (or had nothing yet).
        let mut mendable = candidates.is_empty();
        // The revision's rule, when any of its instances declares one (see
        // `verification::effective_rule`): an instance that declares nothing cannot get an
        // unchecked answer into the shared cache.
        let group_rule = verification::effective_rule(
            Declared::Nothing,
            candidates.iter().map(|i| i.declared_rule()),
        );
        if candidates
            .iter()
            .any(|i| i.storage_type() == StorageType::Remote)
        {
            Counters::bump(&counters.report_reads);
            let read = async {
                let key = ReportKey::new(app, revision)?;
                self.reports.get(&key, &self.limits).await
            };
            match read.await {
                Ok(Some(info)) => match verify_answer(&info, app, revision, group_rule, counters) {
                    Ok(()) => return Ok(info),
                    Err(e) => {
                        Counters::bump(&counters.revision_mismatches);
                        last_error = e;
                    }
                },
                // The report may be written yet.
                Ok(None) => mendable = true,
                Err(e) => {
                    Counters::bump(&counters.fetch_failures);
                    mendable |= !lasting(&e);
                    last_error = e;
                }
            }
        }
        // Members are tried in random order (callers share the load), and checked only
        // when their turn comes: a revision of 10,000 members costs a few checks, not
        // 10,000. Instances whose MetadataService this client cannot speak are not dialled.
        candidates.shuffle(&mut rand::rng());
        let mut asked = 0;
        for instance in &candidates {
            if asked == self.fetch_attempts {
                break;
            }
            if let Err(error) = instance.metadata_service_target() {
                Counters::bump(&counters.unsupported_metadata_services);
                aggregated!(warn, self.warnings, "instance not asked for metadata", app,
                    %app, %error);
                mendable |= !lasting(&error);
                last_error = error;
                continue;
            }
            asked += 1;
            Counters::bump(&counters.metadata_fetches);
            let port = instance.metadata_service_port();
            let span = tracing::debug_span!("metadata_fetch", %app, %revision, host = %instance.host, port);
            let answer = self
                .client
                .fetch_for_app(app, &instance.host, port, revision)
                .instrument(span)
                .await;
            let checked = answer.and_then(|info| {
                let declared = verification::effective_rule(instance.declared_rule(), [group_rule]);
                verify_answer(&info, app, revision, declared, counters).map(|()| info)
            });
            match checked {
                Ok(info) => return Ok(info),
                Err(error) => {
                    if matches!(error, Error::RevisionMismatch { .. }) {
                        Counters::bump(&counters.revision_mismatches);
                    } else {
                        Counters::bump(&counters.fetch_failures);
                    }
                    if matches!(error, Error::IdentityRejected { .. }) {
                        // Its own line, one per rogue, shared with balanced channels.
                        self.rejections.record(&error);
                    } else {
                        aggregated!(warn, self.warnings,
                            "metadata fetch failed; trying another instance", app,
                            %app, %revision, %error);
                    }
                    mendable |= !lasting(&error);
                    last_error = error;
                }
            }
        }
        Err(Unfetched {
            error: last_error,
            lasting: !mendable,
        })
    }
}

/// A failed metadata fetch: why, and whether retrying it cannot help.
#[derive(Debug)]
pub(crate) struct Unfetched {
    /// Why it failed (the last failure seen).
    pub error: Error,
    /// Whether every source asked failed in a way no retry mends (see [`lasting`]): the
    /// revision stays unknown until its instances change.
    pub lasting: bool,
}

/// Whether retrying a metadata fetch that failed with `error` cannot help while the
/// instance stays as it is: its answer does not hash to its revision, is for another app or
/// revision, is too large or does not parse; its certificate does not name the app; it
/// speaks a MetadataService this crate cannot call, or none at all; or it refused our
/// credentials. Connection trouble, timeouts and the rest may pass: a provider whose
/// server is still starting refuses connections for a while.
pub(crate) fn lasting(error: &Error) -> bool {
    match error {
        Error::RevisionMismatch { .. }
        | Error::Malformed { .. }
        | Error::TooLarge { .. }
        | Error::IdentityRejected { .. }
        | Error::UnsupportedMetadataService { .. } => true,
        Error::Rpc { status, .. } => matches!(
            status.code(),
            tonic::Code::Unimplemented
                | tonic::Code::Unauthenticated
                | tonic::Code::PermissionDenied
        ),
        other => other.is_permanent(),
    }
}

/// The one verification decision: whether an answer (from a MetadataService or the report)
/// is accepted as the metadata of `app` at `revision`.
///
/// It must name that app and revision, and its content must hash to that revision under
/// the `declared` rule (see [`verification::verify`]: only a declared rule rejects; with no
/// rule, Dubbo Java's MD5 rule is tried and a mismatch is merely unverifiable). The outcome
/// is counted per rule.
pub(crate) fn verify_answer(
    info: &MetadataInfo,
    app: &str,
    revision: &str,
    declared: Declared,
    counters: &Counters,
) -> Result<()> {
    if info.app != app || info.revision != revision {
        return Err(Error::malformed(
            "metadata answer",
            format!(
                "asked for {app}/{revision}, got {}/{}",
                Error::shorten(&info.app),
                Error::shorten(&info.revision)
            ),
        ));
    }
    let outcome = verification::verify(declared, revision, info);
    counters.count_check(declared, outcome);
    match outcome {
        Verification::Rejected(rule) => Err(Error::RevisionMismatch {
            app: app.to_owned(),
            claimed: revision.to_owned(),
            computed: info.computed_revision_under(rule),
        }),
        Verification::Verified(_) | Verification::Unverifiable => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    #[test]
    fn failures_no_retry_mends_are_lasting() {
        let mismatch = Error::RevisionMismatch {
            app: "a".into(),
            claimed: "1".into(),
            computed: "2".into(),
        };
        assert!(lasting(&mismatch));
        let unimplemented = Error::Rpc {
            address: "h:1".into(),
            status: tonic::Status::unimplemented("no MetadataService"),
        };
        assert!(lasting(&unimplemented));
        let refused = Error::Connect {
            address: "h:1".into(),
            reason: "connection refused".into(),
            source: None,
        };
        assert!(
            !lasting(&refused),
            "a server still starting refuses connections"
        );
        let slow = Error::Timeout {
            what: "metadata".into(),
            after: Duration::from_secs(1),
        };
        assert!(!lasting(&slow));
        let busy = Error::Rpc {
            address: "h:1".into(),
            status: tonic::Status::unavailable("starting"),
        };
        assert!(!lasting(&busy));
    }

    #[test]
    fn answers_for_another_app_or_revision_are_refused() {
        let counters = Counters::default();
        let v1 = Declared::of(Some("sha256-v1"));
        let info = MetadataInfo::new("shop", [ServiceInfo::new("shop.A")]).unwrap();
        assert!(verify_answer(&info, "shop", &info.revision, v1, &counters).is_ok());
        assert!(
            verify_answer(&info, "other", &info.revision, Declared::Nothing, &counters).is_err()
        );
        assert!(verify_answer(&info, "shop", "abc", Declared::Nothing, &counters).is_err());
        let mut forged = info.clone();
        forged.services.clear();
        assert!(
            verify_answer(&forged, "shop", &info.revision, v1, &counters).is_err(),
            "content that does not hash to the revision"
        );
        assert!(
            verify_answer(
                &forged,
                "shop",
                &info.revision,
                Declared::Nothing,
                &counters
            )
            .is_ok(),
            "not rejected when the provider declares no rule"
        );
    }
}
