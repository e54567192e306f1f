//! With storage type `remote`: removing reported revisions that no instance uses any more.

use std::time::Duration;

use super::Shared;
use crate::backend::InstanceRead;
use crate::model::ReportKey;

impl Shared {
    /// Removes reported revisions that no registered instance has used for `grace`,
    /// checking every half grace period.
    pub(super) async fn report_cleanup_loop(&self, grace: Duration) {
        let app = self.exported.current().app.clone();
        let mut unused_since = std::collections::HashMap::new();
        let period = (grace / 2).max(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let (reported, list) = match (
                self.backend.reports().revisions(&app).await,
                self.backend
                    .instances()
                    .list(&app, InstanceRead::new(&self.limits))
                    .await,
            ) {
                (Ok(reported), Ok(list)) if list.skipped.is_empty() => (reported, list),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::debug!(%app, error = %e, "report cleanup skipped this round");
                    continue;
                }
                // A record we cannot read may use any revision: remove nothing.
                _ => continue,
            };
            let mut used: std::collections::HashSet<String> = list
                .instances
                .values()
                .map(|i| i.revision().to_owned())
                .collect();
            used.insert(self.exported.current().revision.clone());
            let now = tokio::time::Instant::now();
            for revision in crate::backend::kv::report::unused_revisions(
                &mut unused_since,
                &reported,
                &used,
                now,
                grace,
            ) {
                let removed = async {
                    let key = ReportKey::new(app.as_str(), revision.as_str())?;
                    self.backend.reports().remove(&key).await
                };
                match removed.await {
                    Ok(_) => tracing::info!(%app, %revision, "unused reported revision removed"),
                    Err(e) => tracing::warn!(%app, %revision, error = %e, "report not removed"),
                }
            }
        }
    }
}
