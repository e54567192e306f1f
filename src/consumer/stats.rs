//! Counters a user, a test or a metrics exporter can read.
//!
//! One table, [`stats!`], lists every counter and gauge once: its field, its kind, its
//! metric name and its description. It makes the live [`Counters`] (atomics every part of
//! the resolver bumps), the [`ResolverStats`] copy, the copy from one to the other, and the
//! series [`crate::metrics`] publishes, so a new counter is one line.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::{Declared, RevisionRule, Verification};

/// One published series of [`ResolverStats`]: its metric name (without `introspect_`),
/// whether it is a counter (else a gauge), its description and its value.
pub(crate) struct Series {
    pub name: &'static str,
    pub counter: bool,
    pub help: &'static str,
    pub value: u64,
}

macro_rules! stats {
    ($($kind:ident $field:ident = $metric:literal: $help:literal;)*) => {
        /// Live counters of a resolver: one atomic per field of [`ResolverStats`].
        #[derive(Debug, Default)]
        pub struct Counters {
            $(pub(crate) $field: AtomicU64,)*
            /// Revision checks by rule bucket (see [`RevisionChecks`]) and outcome (verified,
            /// rejected, unverifiable).
            pub(crate) revision_checks: [[AtomicU64; 3]; 4],
            /// Ids handed to subscriptions, for their entry in `instances`.
            pub(crate) next_subscription: AtomicU64,
            /// Routable instances per app, as each live subscription sees them.
            pub(crate) instances: Mutex<HashMap<u64, BTreeMap<String, u64>>>,
            /// Identity rejections per app (at most [`MAX_REJECTING_APPS`] apps).
            pub(crate) rejections: Mutex<BTreeMap<String, u64>>,
        }

        /// A copy of a resolver's counters.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct ResolverStats {
            $(#[doc = $help] pub $field: u64,)*
            /// Whether self-preservation (or a wipe recovery) holds removals of some app
            /// right now.
            pub protection_active: bool,
            /// Metadata answers checked against their revision, per rule.
            pub revision_checks: RevisionChecks,
        }

        impl Counters {
            /// A consistent-enough copy of the counters.
            pub fn snapshot(&self) -> ResolverStats {
                let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
                ResolverStats {
                    $($field: get(&self.$field),)*
                    protection_active: get(&self.protected_apps) > 0,
                    revision_checks: self.revision_checks(),
                }
            }
        }

        impl ResolverStats {
            /// Every field as a published series.
            pub(crate) fn series(&self) -> Vec<Series> {
                let mut series = vec![$(Series {
                    name: $metric,
                    counter: stats!(@counter $kind),
                    help: $help,
                    value: self.$field,
                },)*];
                series.push(Series {
                    name: "protection_active",
                    counter: false,
                    help: "1 while self-preservation holds removals of some app, else 0.",
                    value: u64::from(self.protection_active),
                });
                series
            }
        }
    };
    (@counter counter) => { true };
    (@counter gauge) => { false };
}

stats! {
    counter metadata_fetches = "metadata_fetches_total":
        "MetadataService calls made (each attempt on an instance counts once).";
    counter cache_hits = "metadata_cache_hits_total":
        "Metadata lookups answered from the cache.";
    counter cache_misses = "metadata_cache_misses_total":
        "Metadata lookups that had to load (concurrent callers share one load).";
    counter fetch_failures = "metadata_fetch_failures_total":
        "MetadataService calls or metadata report reads that failed.";
    counter revision_mismatches = "revision_mismatches_total":
        "Metadata answers rejected because their content did not hash to their revision.";
    counter report_reads = "metadata_report_reads_total":
        "Metadata report reads (storage type remote).";
    counter metadata_retries = "metadata_retries_total":
        "Background metadata fetches retried after a failure.";
    counter unsupported_metadata_services = "unsupported_metadata_services_total":
        "Instances not asked for metadata: their MetadataService speaks a protocol or \
         contract this crate cannot call (e.g. Dubbo's V1 over dubbo).";
    counter skipped_records = "skipped_records_total":
        "Instance records skipped as malformed, oversized or misplaced.";
    gauge revisions_known = "revisions_known":
        "Distinct (app, revision) pairs whose metadata is cached.";
    gauge subscriptions = "subscriptions":
        "Live subscriptions.";
    counter pushes = "pushes_total":
        "Endpoint sets pushed to subscribers.";
    counter unchanged_updates = "unchanged_updates_total":
        "Coalesced updates not pushed because the endpoint set was unchanged.";
    counter unchanged_view_updates = "unchanged_view_updates_total":
        "Registry events that left an app's routable instances as they were (an identical \
         upsert, the removal of an unknown address, an equal re-list), so no subscription \
         was told.";
    counter relists = "relists_total":
        "Instance lists read again after a watch ended (compaction, lost connection).";
    counter watch_restarts = "watch_restarts_total":
        "Mapping and instance watches that ended with an error and were started again.";
    counter held_removals = "held_removals_total":
        "Expiries held by self-preservation instead of being applied.";
    gauge protected_apps = "protected_apps":
        "Apps whose removals are held right now (one per app and resolver).";
    counter hold_releases = "hold_releases_total":
        "Held instances released: they returned, or their maximum hold (or the recovery \
         bound after a registry wipe) passed.";
    counter wipes = "store_wipes_total":
        "Re-lists that found the registry wiped or replaced (its epoch changed or went, or \
         its revision went backwards), per app.";
    counter emptied_apps = "emptied_apps_total":
        "Registry events that would have emptied an app by expiries (not by graceful stops); \
         its last instances were kept, probed, for the recovery bound instead.";
    counter set_aside = "set_aside_total":
        "Times an endpoint was ejected (set aside) for its calls, for any reason (refused, \
         consecutive failures, failure rate, hung); slow methods are counted apart.";
    counter ejected_failure_rate = "ejections_failure_rate_total":
        "Endpoints ejected because too many of their calls in the window failed.";
    counter ejected_slow = "ejections_slow_total":
        "Methods ejected at one endpoint because they answer there far slower than at the \
         others.";
    counter ejected_hung = "ejections_hung_total":
        "Endpoints ejected as hung or lost: a call waited past the bound, or lost its \
         connection, and the provider did not answer a liveness check.";
    counter liveness_checks = "liveness_checks_total":
        "Liveness checks of providers a call waited on past the bound.";
    counter capped_routes = "ejection_cap_routes_total":
        "Calls whose providers were picked among outliers let back in by the cap on \
         ejections (or because nothing else could take them).";
    gauge set_aside_addresses = "set_aside_addresses":
        "Addresses set aside right now (failing, or held and not yet answering a probe).";
    counter health_reports = "health_reports_total":
        "Call outcomes reported through a subscription handle and applied to its health.";
    counter probes = "health_probes_total":
        "Health probes of set-aside endpoints.";
    counter call_failures = "call_failures_total":
        "Calls through balanced channels that failed (transport error, UNAVAILABLE or \
         DEADLINE_EXCEEDED), as passive health recorded them.";
    counter identity_rejections = "identity_rejections_total":
        "Servers refused by the identity check (their certificate does not name the app \
         they were resolved for, or does not chain to its CAs): balanced-channel endpoints \
         removed (once per endpoint and cause, not per re-check) and MetadataService calls \
         refused; per app in Resolver::identity_rejections_per_app.";
    counter call_attempts = "call_attempts_total":
        "Attempts of calls through balanced channels that reached the balancer's pick \
         (a call retried on another provider makes several).";
    counter attempts_not_sent = "call_attempts_not_sent_total":
        "Attempts that never reached their provider (connection not made, REFUSED_STREAM, \
         a graceful GOAWAY above them): retried on another provider.";
    counter attempts_declined = "call_attempts_declined_total":
        "Attempts the provider declined unprocessed (a trailers-only UNAVAILABLE or \
         UNIMPLEMENTED): retried on another provider while the call may.";
    counter attempts_failed = "call_attempts_failed_total":
        "Attempts that may have been processed and failed (a timeout, a lost connection, \
         another status): retried only for idempotent calls.";
    counter retries = "call_retries_total":
        "Attempts sent again to another provider.";
    counter retries_over_budget = "call_retries_over_budget_total":
        "Retries the retry budget refused: the call got its last attempt's answer.";
    counter panic_routes = "panic_routes_total":
        "Times a balanced channel found every endpoint set aside and routed to all of them \
         (panic mode).";
    counter unparsed_route_params = "unparsed_route_params_total":
        "Routing parameters a provider publishes (weight, warmup, {method}.weight) that do \
         not parse, read as Java's defaults: counted each time an endpoint joins a balanced \
         channel or its parameters change (explain_route shows which).";
    counter oversized_mappings = "oversized_mappings_total":
        "Mapping reads ignored because they named more apps than the limit.";
    counter released_apps = "released_apps_total":
        "Apps a subscription stopped following: no longer in a valid mapping and without \
         routable instances for a grace period.";
    gauge shared_views = "shared_views":
        "Shared views running: one per app and per mapping followed by some subscription, \
         or in its release grace; each holds one registry watch.";
    gauge interface_follows = "interface_follows":
        "Interface-level follows running: one per subscription whose migration step reads \
         the interface level (FORCE_INTERFACE, APPLICATION_FIRST); each holds one registry \
         watch.";
    counter skipped_provider_urls = "skipped_provider_urls_total":
        "Interface-level provider URLs skipped as malformed or over a bound, per read.";
    counter uncallable_provider_urls = "uncallable_provider_urls_total":
        "Interface-level provider URLs of a subscribed service whose protocol the channel \
         does not speak (dubbo://), left out, per read.";
    counter snapshot_writes = "snapshot_writes_total":
        "Local snapshots written.";
    counter snapshot_loads = "snapshot_loads_total":
        "Subscriptions started from a local snapshot because the registry was unreachable.";
}

/// Apps whose identity rejections are counted one by one; the rejections of further apps
/// are counted in the total only.
pub(crate) const MAX_REJECTING_APPS: usize = 10_000;

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Sets a gauge.
    pub(crate) fn set(gauge: &AtomicU64, n: u64) {
        gauge.store(n, Ordering::Relaxed);
    }

    /// Lowers a gauge, never below zero.
    pub(crate) fn sub(counter: &AtomicU64, n: u64) {
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    /// Counts the check of one answer checked under `declared`.
    pub(crate) fn count_check(&self, declared: Declared, outcome: Verification) {
        let bucket = match declared {
            Declared::Rule(RevisionRule::Sha256V1) => 0,
            Declared::Rule(RevisionRule::Sha256V2) => 1,
            Declared::Nothing | Declared::Rule(RevisionRule::JavaMd5) => 2,
            Declared::Unknown => 3,
        };
        let outcome = match outcome {
            Verification::Verified(_) => 0,
            Verification::Rejected(_) => 1,
            Verification::Unverifiable => 2,
        };
        Self::bump(&self.revision_checks[bucket][outcome]);
    }

    fn revision_checks(&self) -> RevisionChecks {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counts = |bucket: &[AtomicU64; 3]| RuleCounts {
            verified: get(&bucket[0]),
            rejected: get(&bucket[1]),
            unverifiable: get(&bucket[2]),
        };
        RevisionChecks {
            sha256_v1: counts(&self.revision_checks[0]),
            sha256_v2: counts(&self.revision_checks[1]),
            java_md5: counts(&self.revision_checks[2]),
            other_rules: counts(&self.revision_checks[3]),
        }
    }

    /// Records the routable instances per app seen by subscription `id` (`None`: it ended).
    pub(crate) fn set_instances(&self, id: u64, per_app: Option<BTreeMap<String, u64>>) {
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        match per_app {
            Some(per_app) => instances.insert(id, per_app),
            None => instances.remove(&id),
        };
    }

    /// Counts one identity rejection of a server of `app`.
    pub(crate) fn count_rejection(&self, app: &str) {
        Self::bump(&self.identity_rejections);
        let mut rejections = self.rejections.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = rejections.get_mut(app) {
            *n += 1;
        } else if rejections.len() < MAX_REJECTING_APPS {
            rejections.insert(app.to_owned(), 1);
        }
    }

    /// Identity rejections per app.
    pub fn rejections_per_app(&self) -> BTreeMap<String, u64> {
        self.rejections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Routable instances per app: for each app, the most any live subscription sees.
    pub fn instances_per_app(&self) -> BTreeMap<String, u64> {
        let instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for per_app in instances.values() {
            for (app, &n) in per_app {
                let entry = out.entry(app.clone()).or_default();
                *entry = (*entry).max(n);
            }
        }
        out
    }
}

/// Metadata answers checked against their revision under one rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleCounts {
    /// Answers whose content hashes to their revision.
    pub verified: u64,
    /// Answers rejected: a declared rule, and content that does not hash to the revision.
    pub rejected: u64,
    /// Answers used unchecked: no known rule reproduces their revision.
    pub unverifiable: u64,
}

/// Metadata answers checked against their revision, by the rule the instance declared (see
/// [`crate::model::verification`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevisionChecks {
    /// Instances declaring `sha256-v1`.
    pub sha256_v1: RuleCounts,
    /// Instances declaring `sha256-v2`.
    pub sha256_v2: RuleCounts,
    /// Instances declaring no rule, checked under Dubbo Java 3.2+'s MD5 rule; a mismatch is
    /// unverifiable, never rejected.
    pub java_md5: RuleCounts,
    /// Instances declaring a rule this crate does not know: always unverifiable.
    pub other_rules: RuleCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_one_series_with_a_name_of_its_own() {
        let counters = Counters::default();
        Counters::bump(&counters.pushes);
        Counters::add(&counters.protected_apps, 2);
        let stats = counters.snapshot();
        assert_eq!((stats.pushes, stats.protected_apps), (1, 2));
        assert!(stats.protection_active);
        let series = stats.series();
        let mut names: Vec<&str> = series.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), series.len(), "no two series share a name");
        for s in &series {
            assert_eq!(s.counter, s.name.ends_with("_total"), "{}", s.name);
        }
    }
}
