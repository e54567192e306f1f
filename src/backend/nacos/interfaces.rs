//! Interface-level provider URLs on Nacos, as Dubbo's `NacosRegistry` writes them: an
//! ephemeral instance of service `providers:{interface}:{version}:{group}` (empty slots
//! kept, `$` written as `___` as for every naming service) in the registry's group, at the
//! URL's host and port, weight 1.0, cluster `DEFAULT`, its metadata every URL parameter plus
//! `category`, `protocol` and `path` (see [`ProviderUrl::nacos_metadata`]).
//!
//! It is registered on the naming client (the connection) of the instance's registration,
//! so it goes when that connection goes, and the SDK registers it again after a reconnect
//! as it does the instance. Nacos keys a client's registrations by service: two URLs of one
//! service key on one connection (one interface, version and group exported on two
//! protocols) would replace each other, so the second is refused.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use nacos_sdk::api::naming::{NamingService, ServiceInstance as NacosInstance};

use super::naming_instance::NamingInstance;
use super::{names, record};
use crate::backend::InterfaceRegistration;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ProviderUrl;

/// The services a registration's connection holds interface-level instances of.
pub(super) type Held = Arc<Mutex<BTreeSet<String>>>;

/// One interface-level instance on a registration's connection.
pub(super) struct NacosInterface {
    instance: NamingInstance,
    held: Held,
    limits: Limits,
}

/// The naming instance of `url`, checked against `limits`.
fn instance(url: &ProviderUrl, limits: &Limits) -> Result<NacosInstance> {
    url.validate()?;
    let metadata: HashMap<String, String> = url.nacos_metadata().into_iter().collect();
    limits.check_size(
        "interface-level instance",
        record::size_of(&url.host, &metadata),
        limits.max_instance_bytes,
    )?;
    let service = names::service_name(&url.nacos_service());
    Ok(NacosInstance {
        instance_id: None,
        ip: url.host.clone(),
        port: i32::from(url.port),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(names::DEFAULT_CLUSTER.to_owned()),
        service_name: Some(service),
        metadata,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl NacosInterface {
    /// Registers `url` on `naming` in `group`, unless the connection holds its service.
    pub(super) async fn register(
        naming: NamingService,
        group: &str,
        held: Held,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Self> {
        let nacos = instance(url, limits)?;
        let service = names::service_name(&url.nacos_service());
        if !lock(&held).insert(service.clone()) {
            return Err(Error::config(format!(
                "the interface-level service {service} is registered twice by one provider \
                 (one interface, version and group on two protocols): Nacos keeps one \
                 instance per service and connection"
            )));
        }
        let instance = NamingInstance::new(naming, group, service, nacos);
        if let Err(e) = instance.register().await {
            lock(&held).remove(instance.service());
            return Err(e);
        }
        Ok(NacosInterface {
            instance,
            held,
            limits: limits.clone(),
        })
    }
}

#[async_trait::async_trait]
impl InterfaceRegistration for NacosInterface {
    async fn update(&self, url: &ProviderUrl) -> Result<()> {
        let nacos = instance(url, &self.limits)?;
        let service = self.instance.service();
        if nacos.service_name.as_deref() != Some(service) {
            return Err(Error::Misuse(format!(
                "the interface-level registration of {service} cannot write {}",
                url.nacos_service()
            )));
        }
        self.instance.replace(nacos).await
    }

    async fn deregister(&self) -> Result<()> {
        self.instance.deregister().await?;
        lock(&self.held).remove(self.instance.service());
        Ok(())
    }

    fn id(&self) -> String {
        format!("nacos service {}", self.instance.key())
    }
}
