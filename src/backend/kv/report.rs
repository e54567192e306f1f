//! The metadata report: metadata info stored under `/dubbo/metadata/{app}/{revision}`, for
//! instances with storage type `remote`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::kv::layout::Layout;
use crate::backend::reports::read_report;
use crate::error::Result;
use crate::limits::Limits;
use crate::model::{MetadataInfo, ReportKey, names};
use crate::store::{CasOutcome, Store};

/// Publishes and reads metadata reports.
#[derive(Clone)]
pub struct MetadataReport {
    store: Arc<dyn Store>,
    layout: Layout,
    limits: Limits,
}

impl MetadataReport {
    /// A metadata report over `store`.
    pub fn new(store: Arc<dyn Store>, layout: Layout, limits: Limits) -> Self {
        MetadataReport {
            store,
            layout,
            limits,
        }
    }

    /// Stores `info` unless its revision is there already (a revision's content never
    /// changes). Returns whether it was written.
    pub async fn publish(&self, info: &MetadataInfo) -> Result<bool> {
        let json = info.to_report(&self.limits)?;
        let key = self.layout.report_key(&info.app, &info.revision);
        Ok(matches!(
            self.store.compare_and_swap(&key, 0, json, None).await?,
            CasOutcome::Written { .. }
        ))
    }

    /// The reported metadata under `key`, if any. A report whose content does not belong to
    /// the key it is stored under is an error.
    pub async fn get(&self, key: &ReportKey) -> Result<Option<MetadataInfo>> {
        let path = self.layout.report_key(key.app(), key.revision());
        let Some(kv) = self.store.get(&path).await? else {
            return Ok(None);
        };
        read_report(key, &kv.value, &self.limits).map(Some)
    }

    /// The revisions reported for `app`.
    pub async fn revisions(&self, app: &str) -> Result<Vec<String>> {
        names::validate_app(app)?;
        let prefix = self.layout.report_prefix(app);
        let range = self.store.get_prefix(&prefix).await?;
        Ok(range
            .kvs
            .iter()
            .filter_map(|kv| kv.key.strip_prefix(&prefix).map(str::to_owned))
            .collect())
    }

    /// Removes the report under `key`; returns whether it existed.
    pub async fn remove(&self, key: &ReportKey) -> Result<bool> {
        let path = self.layout.report_key(key.app(), key.revision());
        self.store.delete(&path).await
    }
}

/// Tracks reported revisions that no instance uses: `unused_since` remembers since when each
/// was seen unused (a revision seen in use again is forgotten). Returns the reported
/// revisions unused for at least `grace` at `now`.
pub fn unused_revisions(
    unused_since: &mut HashMap<String, Instant>,
    reported: &[String],
    used: &HashSet<String>,
    now: Instant,
    grace: Duration,
) -> Vec<String> {
    unused_since.retain(|r, _| !used.contains(r) && reported.contains(r));
    let mut due = Vec::new();
    for revision in reported.iter().filter(|r| !used.contains(*r)) {
        let since = *unused_since.entry(revision.clone()).or_insert(now);
        if now.duration_since(since) >= grace {
            due.push(revision.clone());
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_due_after_being_unused_for_the_grace_period() {
        let grace = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut since = HashMap::new();
        let reported = vec!["a".to_owned(), "b".to_owned()];
        let used: HashSet<String> = ["a".to_owned()].into();
        assert!(unused_revisions(&mut since, &reported, &used, t0, grace).is_empty());
        assert_eq!(
            unused_revisions(&mut since, &reported, &used, t0 + grace, grace),
            ["b"]
        );
        // Used again meanwhile: the clock starts over.
        let both: HashSet<String> = ["a".to_owned(), "b".to_owned()].into();
        unused_revisions(&mut since, &reported, &both, t0 + grace, grace);
        assert!(unused_revisions(&mut since, &reported, &used, t0 + grace * 2, grace).is_empty());
    }
}
