//! A registration on a key-value store: the instance record bound to a lease of its own.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::backend::Registration;
use crate::error::{Error, Result};
use crate::model::ServiceInstance;
use crate::registry::Registry;
use crate::store::{LeaseId, Store};

/// One instance record and its lease.
pub(super) struct KvRegistration {
    store: Arc<dyn Store>,
    registry: Registry,
    lease: LeaseId,
    ttl: Duration,
    app: String,
    host: String,
    port: u16,
}

impl KvRegistration {
    /// Grants a lease and writes `instance` under it; revokes the lease if the write fails.
    pub(super) async fn register(
        store: Arc<dyn Store>,
        registry: Registry,
        instance: &ServiceInstance,
        ttl: Duration,
    ) -> Result<Self> {
        let lease = store.grant_lease(ttl).await?;
        if let Err(e) = registry.register(instance, Some(lease)).await {
            let _ = store.revoke_lease(lease).await;
            return Err(e);
        }
        Ok(KvRegistration {
            store,
            registry,
            lease,
            ttl,
            app: instance.service_name.clone(),
            host: instance.host.clone(),
            port: instance.port,
        })
    }
}

#[async_trait]
impl Registration for KvRegistration {
    async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        if instance.service_name != self.app
            || instance.host != self.host
            || instance.port != self.port
        {
            return Err(Error::Config(format!(
                "a registration of {}/{}:{} cannot write the record of {}/{}",
                self.app,
                self.host,
                self.port,
                instance.service_name,
                instance.address()
            )));
        }
        self.registry.register(instance, Some(self.lease)).await?;
        Ok(())
    }

    async fn keep_alive(&self) -> Result<()> {
        match self.store.keep_alive(self.lease).await {
            Ok(_) => Ok(()),
            Err(Error::LeaseNotFound(lease)) => Err(Error::RegistrationLost(format!(
                "lease {lease} expired or was revoked"
            ))),
            Err(e) => Err(e),
        }
    }

    async fn deregister(&self) -> Result<()> {
        let deleted = self
            .registry
            .deregister(&self.app, &self.host, self.port)
            .await;
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
