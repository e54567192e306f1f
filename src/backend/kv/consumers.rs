//! Consumer records on a key-value store: `/introspect/consumers/{app}/{id}` under the
//! layout's namespace, each bound to a lease of its own.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::backend::consumers::{
    ConsumerList, ConsumerRegistration, ConsumerRegistry, MAX_CONSUMER_RECORDS,
};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::model::ConsumerRecord;
use crate::store::{KeyValue, LeaseId, Store};

use super::KvBackend;

/// One consumer record and its lease.
struct KvConsumer {
    store: Arc<dyn Store>,
    key: String,
    lease: LeaseId,
    ttl: Duration,
    app: String,
    id: String,
    limits: Limits,
}

#[async_trait]
impl ConsumerRegistration for KvConsumer {
    async fn update(&self, record: &ConsumerRecord) -> Result<()> {
        if record.app != self.app || record.id != self.id {
            return Err(Error::Config(format!(
                "the registration of consumer {}/{} cannot write the record of {}/{}",
                self.app, self.id, record.app, record.id
            )));
        }
        let json = record.to_json(&self.limits)?;
        match self.store.put(&self.key, json, Some(self.lease)).await {
            Ok(_) => Ok(()),
            Err(Error::LeaseNotFound(lease)) => Err(lost(lease)),
            Err(e) => Err(e),
        }
    }

    async fn keep_alive(&self) -> Result<()> {
        match self.store.keep_alive(self.lease).await {
            Ok(_) => Ok(()),
            Err(Error::LeaseNotFound(lease)) => Err(lost(lease)),
            Err(e) => Err(e),
        }
    }

    async fn deregister(&self) -> Result<()> {
        let deleted = self.store.delete(&self.key).await;
        let revoked = match self.store.revoke_lease(self.lease).await {
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        };
        deleted?;
        revoked
    }

    fn id(&self) -> String {
        format!("lease {}", self.lease)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }
}

fn lost(lease: LeaseId) -> Error {
    Error::RegistrationLost(format!("lease {lease} expired or was revoked"))
}

/// Parses one record; its key must be its own (`{app}/{id}` under the prefix).
fn parse(layout: &Layout, kv: &KeyValue, limits: &Limits) -> Result<ConsumerRecord> {
    let record = ConsumerRecord::from_json(&kv.value, limits)?;
    if kv.key != layout.consumer_key(&record.app, &record.id) {
        return Err(Error::Malformed {
            what: "consumer record",
            reason: format!(
                "the record of {}/{} is stored under another key",
                record.app, record.id
            ),
        });
    }
    Ok(record)
}

#[async_trait]
impl ConsumerRegistry for KvBackend {
    async fn register(
        &self,
        record: &ConsumerRecord,
        ttl: Duration,
        limits: &Limits,
    ) -> Result<Arc<dyn ConsumerRegistration>> {
        let json = record.to_json(limits)?;
        let key = self.layout.consumer_key(&record.app, &record.id);
        let lease = self.store.grant_lease(ttl).await?;
        if let Err(e) = self.store.put(&key, json, Some(lease)).await {
            let _ = self.store.revoke_lease(lease).await;
            return Err(e);
        }
        Ok(Arc::new(KvConsumer {
            store: self.store.clone(),
            key,
            lease,
            ttl,
            app: record.app.clone(),
            id: record.id.clone(),
            limits: limits.clone(),
        }))
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
            match page.kvs.last() {
                Some(last) if page.more => {
                    let after = last.key.clone();
                    page = self
                        .store
                        .get_prefix_page(&prefix, Some(&after), revision)
                        .await?;
                }
                _ => return Ok(list),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn records_live_apart_from_instances_and_bad_ones_are_skipped() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let backend = KvBackend::new(store.clone(), Layout::new("/ns").unwrap());
        let limits = Limits::default();
        let record = ConsumerRecord::new("web", "id1", "10.0.0.9", 1);
        let registration =
            ConsumerRegistry::register(&backend, &record, Duration::from_secs(10), &limits)
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
            Err(Error::RegistrationLost(_))
        ));
    }
}
