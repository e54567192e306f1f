//! Counters a user, a test or a metrics exporter can read.

use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
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
        }
    }
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
}
