//! Consumer records on a key-value store: `/introspect/consumers/{app}/{id}` under the
//! layout's namespace, each bound to a lease of its own.

use std::sync::Arc;

use async_trait::async_trait;

use crate::backend::consumers::{ConsumerList, ConsumerRegistry, MAX_CONSUMER_RECORDS};
use crate::backend::kv::layout::Layout;
use crate::backend::registration::{RegisterOptions, Registration};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ConsumerRecord;
use crate::store::KeyValue;

use super::KvBackend;
use super::registration::KvRegistration;

/// Parses one record; its key must be its own (`{app}/{id}` under the prefix).
fn parse(layout: &Layout, kv: &KeyValue, limits: &Limits) -> Result<ConsumerRecord> {
    let record = ConsumerRecord::from_json(&kv.value, limits)?;
    if kv.key != layout.consumer_key(&record.app, &record.id) {
        return Err(Error::malformed(
            "consumer record",
            format!(
                "the record of {}/{} is stored under another key",
                record.app, record.id
            ),
        ));
    }
    Ok(record)
}

#[async_trait]
impl ConsumerRegistry for KvBackend {
    async fn register(
        &self,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>> {
        let registration =
            KvRegistration::register(self.store.clone(), &self.layout, record, options).await?;
        Ok(Arc::new(registration))
    }

    /// Read in pages pinned to the revision of the first one, stopping after
    /// [`MAX_CONSUMER_RECORDS`].
    async fn list(&self, limits: &Limits) -> Result<ConsumerList> {
        let prefix = self.layout.consumers_prefix();
        let mut list = ConsumerList::default();
        let mut page = self.store.get_prefix_page(&prefix, None, 0).await?;
        let revision = page.revision;
        loop {
            for kv in &page.kvs {
                if list.records.len() + list.skipped.len() >= MAX_CONSUMER_RECORDS {
                    list.truncated = true;
                    return Ok(list);
                }
                match parse(&self.layout, kv, limits) {
                    Ok(record) => list.records.push(record),
                    Err(e) => list.skipped.push((kv.key.clone(), e.to_string())),
                }
            }
            let Some(after) = page.next_after() else {
                return Ok(list);
            };
            page = self
                .store
                .get_prefix_page(&prefix, Some(&after), revision)
                .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, Store};
    use std::time::Duration;

    const TTL: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn records_live_apart_from_instances_and_bad_ones_are_skipped() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let backend = KvBackend::new(store.clone(), Layout::new("/ns").unwrap());
        let limits = Limits::default();
        let record = ConsumerRecord::new("web", "id1", "10.0.0.9", 1);
        let registration =
            ConsumerRegistry::register(&backend, &record, &RegisterOptions::new(TTL, &limits))
                .await
                .unwrap();
        assert!(
            store
                .get("/ns/introspect/consumers/web/id1")
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            store
                .get_prefix("/ns/services/")
                .await
                .unwrap()
                .kvs
                .is_empty()
        );
        store
            .put("/ns/introspect/consumers/web/bad", b"{oops".to_vec(), None)
            .await
            .unwrap();
        // A valid record under another consumer's key.
        store
            .put(
                "/ns/introspect/consumers/web/other",
                record.to_json(&limits).unwrap(),
                None,
            )
            .await
            .unwrap();
        let list = ConsumerRegistry::list(&backend, &limits).await.unwrap();
        assert_eq!(list.records, vec![record.clone()]);
        assert_eq!(list.skipped.len(), 2, "{:?}", list.skipped);
        assert!(list.skipped[0].0.ends_with("/web/bad"));
        assert!(list.skipped[0].1.contains("malformed consumer record"));
        registration.deregister().await.unwrap();
        assert!(
            store
                .get("/ns/introspect/consumers/web/id1")
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            registration.keep_alive().await,
            Err(Error::RegistrationLost { .. })
        ));
    }
}
