//! A registration on a key-value store: the record (an instance's or a consumer's) bound to
//! a lease of its own.

use std::marker::PhantomData;
use std::time::Duration;

use async_trait::async_trait;

use crate::backend::kv::layout::Layout;
use crate::backend::registration::{Record, RegisterOptions, Registration, check_identity};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ConsumerRecord, ServiceInstance};
use crate::store::{LeaseId, Store};

/// A record as a key-value store holds it: under a key of the layout, as checked bytes.
pub(super) trait KvRecord: Record {
    /// Where the record is written.
    fn key(&self, layout: &Layout) -> String;

    /// The record's bytes, checked first and refused when they do not fit `limits`.
    fn encode(&self, limits: &Limits) -> Result<Vec<u8>>;
}

impl KvRecord for ServiceInstance {
    fn key(&self, layout: &Layout) -> String {
        layout.instance_key(&self.service_name, &self.host, self.port)
    }

    fn encode(&self, limits: &Limits) -> Result<Vec<u8>> {
        self.validate()?;
        let json = self.to_json();
        limits.check_size("instance record", json.len(), limits.max_instance_bytes)?;
        Ok(json)
    }
}

impl KvRecord for ConsumerRecord {
    fn key(&self, layout: &Layout) -> String {
        layout.consumer_key(&self.app, &self.id)
    }

    fn encode(&self, limits: &Limits) -> Result<Vec<u8>> {
        self.to_json(limits)
    }
}

/// One record and its lease.
pub(super) struct KvRegistration<R> {
    store: std::sync::Arc<dyn Store>,
    key: String,
    identity: String,
    lease: LeaseId,
    ttl: Duration,
    limits: Limits,
    record: PhantomData<fn(&R)>,
}

impl<R: KvRecord> KvRegistration<R> {
    /// Grants a lease and writes `record` under it; revokes the lease if the write fails.
    pub(super) async fn register(
        store: std::sync::Arc<dyn Store>,
        layout: &Layout,
        record: &R,
        options: &RegisterOptions,
    ) -> Result<Self> {
        let value = record.encode(&options.limits)?;
        let key = record.key(layout);
        let lease = store.grant_lease(options.ttl).await?;
        if let Err(e) = store.put(&key, value, Some(lease)).await {
            let _ = store.revoke_lease(lease).await;
            return Err(e);
        }
        Ok(KvRegistration {
            store,
            key,
            identity: record.identity(),
            lease,
            ttl: options.ttl,
            limits: options.limits.clone(),
            record: PhantomData,
        })
    }

    /// An error of the store, with a lease it no longer has read as the registration lost.
    fn lost_if_gone(error: Error) -> Error {
        match error {
            Error::LeaseNotFound(lease) => {
                Error::registration_lost(format!("lease {lease} expired or was revoked"))
                    .caused_by(error)
            }
            other => other,
        }
    }
}

#[async_trait]
impl<R: KvRecord> Registration<R> for KvRegistration<R> {
    async fn update(&self, record: &R) -> Result<()> {
        check_identity(&self.identity, record)?;
        let value = record.encode(&self.limits)?;
        self.store
            .put(&self.key, value, Some(self.lease))
            .await
            .map_err(Self::lost_if_gone)?;
        Ok(())
    }

    async fn keep_alive(&self) -> Result<()> {
        self.store
            .keep_alive(self.lease)
            .await
            .map_err(Self::lost_if_gone)?;
        Ok(())
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
