//! Counters a user, a test or a metrics exporter can read.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::{RevisionRule, Verification};

/// Live counters of a resolver.
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) metadata_fetches: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) cache_misses: AtomicU64,
    pub(crate) fetch_failures: AtomicU64,
    pub(crate) revision_mismatches: AtomicU64,
    pub(crate) report_reads: AtomicU64,
    pub(crate) skipped_records: AtomicU64,
    pub(crate) subscriptions: AtomicU64,
    pub(crate) pushes: AtomicU64,
    pub(crate) unchanged_updates: AtomicU64,
    pub(crate) relists: AtomicU64,
    pub(crate) watch_restarts: AtomicU64,
    pub(crate) held_removals: AtomicU64,
    pub(crate) protected_apps: AtomicU64,
    pub(crate) metadata_retries: AtomicU64,
    pub(crate) set_aside: AtomicU64,
    pub(crate) health_reports: AtomicU64,
    pub(crate) oversized_mappings: AtomicU64,
    pub(crate) released_apps: AtomicU64,
    pub(crate) probes: AtomicU64,
    pub(crate) hold_releases: AtomicU64,
    pub(crate) wipes: AtomicU64,
    pub(crate) call_failures: AtomicU64,
    pub(crate) panic_routes: AtomicU64,
    pub(crate) snapshot_writes: AtomicU64,
    pub(crate) snapshot_loads: AtomicU64,
    pub(crate) unsupported_metadata_services: AtomicU64,
    /// Revision checks by rule bucket (see [`RevisionChecks`]) and outcome (verified,
    /// rejected, unverifiable).
    pub(crate) revision_checks: [[AtomicU64; 3]; 4],
    /// Ids handed to subscriptions, for their entry in `instances`.
    pub(crate) next_subscription: AtomicU64,
    /// Routable instances per app, as each live subscription sees them.
    pub(crate) instances: Mutex<HashMap<u64, BTreeMap<String, u64>>>,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts the check of one answer whose instance declared `declared` (the rule's name,
    /// `None` for no rule).
    pub(crate) fn count_check(&self, declared: Option<&str>, outcome: Verification) {
        let bucket = match declared.map(RevisionRule::declared) {
            Some(Some(RevisionRule::Sha256V1)) => 0,
            Some(Some(RevisionRule::Sha256V2)) => 1,
            None | Some(Some(RevisionRule::JavaMd5)) => 2,
            Some(None) => 3,
        };
        let outcome = match outcome {
            Verification::Verified(_) => 0,
            Verification::Rejected(_) => 1,
            Verification::Unverifiable => 2,
        };
        Self::bump(&self.revision_checks[bucket][outcome]);
    }

    /// Lowers a gauge, never below zero.
    pub(crate) fn sub(counter: &AtomicU64, n: u64) {
        let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            Some(v.saturating_sub(n))
        });
    }

    /// Records the routable instances per app seen by subscription `id` (`None`: it ended).
    pub(crate) fn set_instances(&self, id: u64, per_app: Option<BTreeMap<String, u64>>) {
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        match per_app {
            Some(per_app) => instances.insert(id, per_app),
            None => instances.remove(&id),
        };
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

    /// A consistent-enough copy of the counters.
    pub fn snapshot(&self, revisions_known: u64) -> ResolverStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ResolverStats {
            metadata_fetches: get(&self.metadata_fetches),
            cache_hits: get(&self.cache_hits),
            cache_misses: get(&self.cache_misses),
            fetch_failures: get(&self.fetch_failures),
            revision_mismatches: get(&self.revision_mismatches),
            report_reads: get(&self.report_reads),
            skipped_records: get(&self.skipped_records),
            revisions_known,
            subscriptions: get(&self.subscriptions),
            pushes: get(&self.pushes),
            unchanged_updates: get(&self.unchanged_updates),
            relists: get(&self.relists),
            watch_restarts: get(&self.watch_restarts),
            held_removals: get(&self.held_removals),
            protected_apps: get(&self.protected_apps),
            protection_active: get(&self.protected_apps) > 0,
            metadata_retries: get(&self.metadata_retries),
            set_aside: get(&self.set_aside),
            health_reports: get(&self.health_reports),
            oversized_mappings: get(&self.oversized_mappings),
            released_apps: get(&self.released_apps),
            shared_views: 0,
            probes: get(&self.probes),
            hold_releases: get(&self.hold_releases),
            wipes: get(&self.wipes),
            call_failures: get(&self.call_failures),
            panic_routes: get(&self.panic_routes),
            snapshot_writes: get(&self.snapshot_writes),
            snapshot_loads: get(&self.snapshot_loads),
            unsupported_metadata_services: get(&self.unsupported_metadata_services),
            revision_checks: {
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
            },
        }
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

/// A copy of a resolver's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolverStats {
    /// MetadataService calls made (each attempt on an instance counts once).
    pub metadata_fetches: u64,
    /// Metadata lookups answered from the cache.
    pub cache_hits: u64,
    /// Metadata lookups that had to load (concurrent callers share one load).
    pub cache_misses: u64,
    /// MetadataService calls or report reads that failed.
    pub fetch_failures: u64,
    /// Answers rejected because their content did not hash to their revision.
    pub revision_mismatches: u64,
    /// Metadata report reads (storage type `remote`).
    pub report_reads: u64,
    /// Instance records skipped as malformed, oversized or misplaced.
    pub skipped_records: u64,
    /// Distinct (app, revision) pairs whose metadata is cached.
    pub revisions_known: u64,
    /// Live subscriptions (gauge).
    pub subscriptions: u64,
    /// Endpoint sets pushed to subscribers.
    pub pushes: u64,
    /// Coalesced updates not pushed because the endpoint set was unchanged.
    pub unchanged_updates: u64,
    /// Instance lists read again after a watch ended (compaction, lost connection).
    pub relists: u64,
    /// Mapping and instance watches that ended with an error and were started again.
    pub watch_restarts: u64,
    /// Expiries held by self-preservation instead of being applied.
    pub held_removals: u64,
    /// Apps whose removals are held right now (gauge; one per app and resolver).
    pub protected_apps: u64,
    /// Whether self-preservation (or a wipe recovery) holds removals of some app right now.
    pub protection_active: bool,
    /// Background metadata fetches retried after a failure.
    pub metadata_retries: u64,
    /// Times an endpoint was set aside after consecutive call failures.
    pub set_aside: u64,
    /// Call outcomes reported through a subscription handle and applied to its health.
    pub health_reports: u64,
    /// Mapping reads ignored because they named more apps than
    /// [`crate::Limits::max_apps_per_mapping`].
    pub oversized_mappings: u64,
    /// Apps a subscription stopped following: no longer in a valid mapping and without
    /// routable instances for a grace period.
    pub released_apps: u64,
    /// Shared views running (gauge): one per app and per mapping followed by some
    /// subscription, or in its release grace; each holds one store watch.
    pub shared_views: u64,
    /// Health probes of set-aside endpoints.
    pub probes: u64,
    /// Held instances released: they returned, or their maximum hold (or the recovery
    /// bound after a store wipe) passed.
    pub hold_releases: u64,
    /// Re-lists that found the store wiped or replaced (its revision went backwards), per
    /// app.
    pub wipes: u64,
    /// Calls through balanced channels that failed (transport error, UNAVAILABLE or
    /// DEADLINE_EXCEEDED), as passive health recorded them.
    pub call_failures: u64,
    /// Times a balanced channel found every endpoint set aside and routed to all of them
    /// (panic mode).
    pub panic_routes: u64,
    /// Local snapshots written.
    pub snapshot_writes: u64,
    /// Subscriptions started from a local snapshot because the store was unreachable.
    pub snapshot_loads: u64,
    /// Instances not asked for metadata because their MetadataService speaks a protocol or
    /// contract this crate cannot call (e.g. Dubbo's V1 over `dubbo`).
    pub unsupported_metadata_services: u64,
    /// Metadata answers checked against their revision, per rule.
    pub revision_checks: RevisionChecks,
}
