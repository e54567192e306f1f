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

use super::client::{Reader, map_error};
use super::interfaces::{Held, NacosInterface};
use super::{epoch, names, record};
use crate::backend::{InterfaceRegistration, Registration};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ProviderUrl, ServiceInstance};

/// Tries of a first registration refused as unauthenticated (see `register`).
const LOGIN_TRIES: u32 = 10;
/// The wait between them.
const LOGIN_WAIT: Duration = Duration::from_millis(300);

/// One naming instance (or, for a provider registering at the interface level only, none)
/// and the client that holds it.
pub(super) struct NacosRegistration {
    /// Whether the instance is registered (else the client holds interface-level ones only).
    registered: bool,
    /// The interface-level services this client holds.
    interfaces: Held,
    naming: NamingService,
    reader: Arc<Reader>,
    group: String,
    service: String,
    app: String,
    address: String,
    record: std::sync::Mutex<nacos_sdk::api::naming::ServiceInstance>,
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
    pub(super) async fn register(
        naming: NamingService,
        reader: Arc<Reader>,
        group: &str,
        instance: &ServiceInstance,
        ttl: Duration,
        limits: &Limits,
    ) -> Result<Self> {
        let nacos = check(instance, limits)?;
        epoch::ensure(reader.config().await?).await?;
        let service = names::service_name(&instance.service_name);
        // The SDK logs a new client in on a task of its own; a request that overtakes the
        // login is refused as unknown. A few tries tell that from wrong credentials.
        let what = format!("register {service} {}", instance.address());
        let mut tries = 0;
        loop {
            match naming
                .register_instance(service.clone(), Some(group.to_owned()), nacos.clone())
                .await
                .map_err(|e| map_error(e, &what))
            {
                Ok(()) => break,
                Err(Error::Unauthenticated(_)) if tries < LOGIN_TRIES => {
                    tries += 1;
                    tokio::time::sleep(LOGIN_WAIT).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(NacosRegistration {
            registered: true,
            interfaces: Held::default(),
            naming,
            reader,
            group: group.to_owned(),
            service,
            app: instance.service_name.clone(),
            address: instance.address(),
            record: std::sync::Mutex::new(nacos),
            limits: limits.clone(),
            ttl,
        })
    }

    /// A client of its own for `instance`'s interface-level instances, registering no
    /// instance of the app.
    pub(super) async fn liveness(
        naming: NamingService,
        reader: Arc<Reader>,
        group: &str,
        instance: &ServiceInstance,
        ttl: Duration,
        limits: &Limits,
    ) -> Result<Self> {
        let nacos = check(instance, limits)?;
        epoch::ensure(reader.config().await?).await?;
        Ok(NacosRegistration {
            registered: false,
            interfaces: Held::default(),
            naming,
            reader,
            group: group.to_owned(),
            service: names::service_name(&instance.service_name),
            app: instance.service_name.clone(),
            address: instance.address(),
            record: std::sync::Mutex::new(nacos),
            limits: limits.clone(),
            ttl,
        })
    }

    fn current(&self) -> nacos_sdk::api::naming::ServiceInstance {
        self.record.lock().expect("record lock").clone()
    }
}

#[async_trait]
impl Registration for NacosRegistration {
    async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        if instance.service_name != self.app || !instance.is_at(&self.address) {
            return Err(Error::Config(format!(
                "a registration of {}/{} cannot write the record of {}/{}",
                self.app,
                self.address,
                instance.service_name,
                instance.address()
            )));
        }
        let nacos = check(instance, &self.limits)?;
        if !self.registered {
            return Ok(());
        }
        self.naming
            .register_instance(
                self.service.clone(),
                Some(self.group.clone()),
                nacos.clone(),
            )
            .await
            .map_err(|e| map_error(e, &format!("update {} {}", self.service, self.address)))?;
        *self.record.lock().expect("record lock") = nacos;
        Ok(())
    }

    async fn keep_alive(&self) -> Result<()> {
        epoch::ensure(self.reader.config().await?).await
    }

    async fn deregister(&self) -> Result<()> {
        if !self.registered {
            return Ok(());
        }
        self.naming
            .deregister_instance(
                self.service.clone(),
                Some(self.group.clone()),
                self.current(),
            )
            .await
            .map_err(|e| map_error(e, &format!("deregister {} {}", self.service, self.address)))
    }

    fn id(&self) -> String {
        format!("nacos connection of {}/{}", self.service, self.address)
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
            self.naming.clone(),
            &self.group,
            self.interfaces.clone(),
            url,
            limits,
        )
        .await?;
        Ok(Arc::new(registered))
    }
}
