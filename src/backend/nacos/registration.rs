//! A registration on Nacos: an ephemeral naming instance on a naming client (a gRPC
//! connection) of its own.
//!
//! Nacos 2.x keys a client's registrations by service on one connection: a second instance
//! of the same app registered through the same client replaces the first. Dubbo Java works
//! around it (`NacosNamingServiceWrapper`: batch registration, or another connection per
//! instance); here every registration has its own client, so providers of one app in one
//! process are each an instance.
//!
//! The connection is the lease: the server drops the instance when the connection closes
//! (a crash closes the socket) or stops answering its health checks. The SDK reconnects by
//! itself and registers the instance again after a reconnect (its "redo"), so
//! [`Registration::keep_alive`] has no lease to renew: it makes sure the registry's epoch
//! exists (a server that lost its configs gets a new one) and reports the server
//! unreachable while it is. [`Registration::ttl`] is the TTL asked for: the provider's
//! keep-alive rhythm, not a lease the server holds.
//!
//! An export change or the stopping marker registers the instance again with its new
//! metadata (as `NacosServiceDiscovery.doUpdate` does); deregister removes it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::naming::NamingService;

use super::client::Reader;
use super::interfaces::{Held, NacosInterface};
use super::naming_instance::NamingInstance;
use super::{epoch, names, record};
use crate::backend::{
    InterfaceRegistration, Record, RegisterOptions, Registration, Writes, check_identity,
};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::{ProviderUrl, ServiceInstance};

/// One naming instance (or, for a provider registering at the interface level only, none)
/// and the client that holds it.
pub(super) struct NacosRegistration {
    /// The app's instance; registered unless the client holds interface-level ones only.
    instance: NamingInstance,
    /// Whether the instance is registered.
    registered: bool,
    /// The interface-level services this client holds.
    interfaces: Held,
    reader: Arc<Reader>,
    group: String,
    /// `{app}/{host}:{port}`.
    identity: String,
    limits: Limits,
    ttl: Duration,
}

/// Checks `instance` and measures its record against `limits`.
fn check(
    instance: &ServiceInstance,
    limits: &Limits,
) -> Result<nacos_sdk::api::naming::ServiceInstance> {
    instance.validate()?;
    let nacos = record::to_nacos(instance);
    limits.check_size(
        "instance record",
        record::size_of(&nacos.ip, &nacos.metadata),
        limits.max_instance_bytes,
    )?;
    Ok(nacos)
}

impl NacosRegistration {
    /// Ensures the epoch and, unless `options` ask for the liveness alone, registers
    /// `instance` on a client of its own.
    pub(super) async fn register(
        naming: NamingService,
        reader: Arc<Reader>,
        group: &str,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Self> {
        let nacos = check(instance, &options.limits)?;
        epoch::ensure(reader.config().await?).await?;
        let service = names::service_name(&instance.service_name);
        let registered = options.writes == Writes::Record;
        let held = NamingInstance::new(naming, group, service, nacos);
        if registered {
            held.register().await?;
        }
        Ok(NacosRegistration {
            instance: held,
            registered,
            interfaces: Held::default(),
            reader,
            group: group.to_owned(),
            identity: instance.identity(),
            limits: options.limits.clone(),
            ttl: options.ttl,
        })
    }
}

#[async_trait]
impl Registration for NacosRegistration {
    async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        check_identity(&self.identity, instance)?;
        let nacos = check(instance, &self.limits)?;
        if !self.registered {
            return Ok(());
        }
        self.instance.replace(nacos).await
    }

    async fn keep_alive(&self) -> Result<()> {
        epoch::ensure(self.reader.config().await?).await
    }

    async fn deregister(&self) -> Result<()> {
        if !self.registered {
            return Ok(());
        }
        self.instance.deregister().await
    }

    fn id(&self) -> String {
        format!("nacos connection of {}", self.identity)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn register_interface(
        &self,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Arc<dyn InterfaceRegistration>> {
        let registered = NacosInterface::register(
            self.instance.naming().clone(),
            &self.group,
            self.interfaces.clone(),
            url,
            limits,
        )
        .await?;
        Ok(Arc::new(registered))
    }
}
