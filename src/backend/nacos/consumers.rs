//! Consumer records on Nacos: an ephemeral naming instance of service `{app}` in the group
//! [`GROUP`] (apart from the providers' group, so that no Dubbo reader lists it), on a
//! naming client of its own, like a provider's registration: the connection is the lease,
//! and the SDK registers it again after a reconnect.
//!
//! Nacos keys an instance by `ip#port#cluster`: the cluster is the consumer's id, so two
//! consumers of one app on one host stay two instances. The ip is the record's host, the
//! port [`PORT`], and the record's JSON is the metadata value of [`METADATA_KEY`].

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::naming::{NamingService, ServiceInstance as NacosInstance};

use super::client::{Reader, map_error};
use super::naming_instance::NamingInstance;
use super::{names, reads};
use crate::backend::consumers::{ConsumerList, MAX_CONSUMER_RECORDS};
use crate::backend::{Record, RegisterOptions, Registration, check_identity};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ConsumerRecord, names as model_names};

/// The naming group of consumer records.
pub const GROUP: &str = "INTROSPECT_CONSUMERS";
/// The metadata key holding the record's JSON.
pub const METADATA_KEY: &str = "introspect.consumer";
/// The port of a consumer's naming instance (a consumer listens on none; Nacos wants one).
pub const PORT: i32 = 1;

/// The naming instance of `record`.
fn to_nacos(record: &ConsumerRecord, limits: &Limits) -> Result<NacosInstance> {
    let json = record.to_json(limits)?;
    let json = String::from_utf8(json).map_err(|e| Error::unparsable("consumer record", e))?;
    Ok(NacosInstance {
        instance_id: None,
        ip: record.host.clone(),
        port: PORT,
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(record.id.clone()),
        service_name: Some(names::service_name(&record.app)),
        metadata: HashMap::from([(METADATA_KEY.to_owned(), json)]),
    })
}

/// One consumer's naming instance and the client that holds it.
pub(super) struct NacosConsumer {
    instance: NamingInstance,
    /// `{app}/{id}`.
    identity: String,
    limits: Limits,
    ttl: Duration,
}

impl NacosConsumer {
    pub(super) async fn register(
        naming: NamingService,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Self> {
        let nacos = to_nacos(record, &options.limits)?;
        let service = names::service_name(&record.app);
        let instance = NamingInstance::new(naming, GROUP, service, nacos);
        instance.register().await?;
        Ok(NacosConsumer {
            instance,
            identity: record.identity(),
            limits: options.limits.clone(),
            ttl: options.ttl,
        })
    }
}

#[async_trait]
impl Registration<ConsumerRecord> for NacosConsumer {
    async fn update(&self, record: &ConsumerRecord) -> Result<()> {
        check_identity(&self.identity, record)?;
        self.instance.replace(to_nacos(record, &self.limits)?).await
    }

    async fn keep_alive(&self) -> Result<()> {
        // The connection is the lease and the SDK registers again after a reconnect.
        Ok(())
    }

    async fn deregister(&self) -> Result<()> {
        self.instance.deregister().await
    }

    fn id(&self) -> String {
        format!("nacos connection of consumer {}", self.identity)
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// Reads one naming instance of `app` as a consumer record.
fn from_nacos(app: &str, instance: &NacosInstance, limits: &Limits) -> Result<ConsumerRecord> {
    let json = instance.metadata.get(METADATA_KEY).ok_or_else(|| {
        Error::malformed("consumer record", format!("no {METADATA_KEY} metadata"))
    })?;
    let record = ConsumerRecord::from_json(json.as_bytes(), limits)?;
    if record.app != app || instance.cluster_name.as_deref() != Some(record.id.as_str()) {
        return Err(Error::malformed(
            "consumer record",
            format!(
                "the record of {}/{} is registered as another instance",
                record.app, record.id
            ),
        ));
    }
    Ok(record)
}

/// Every consumer record, at most [`MAX_CONSUMER_RECORDS`].
pub(super) async fn list(reader: &Reader, limits: &Limits) -> Result<ConsumerList> {
    let naming = reader.naming().await?;
    let mut services = reads::service_names(naming, GROUP, MAX_CONSUMER_RECORDS).await?;
    services.sort_unstable();
    services.dedup();
    let mut list = ConsumerList::default();
    for service in services {
        let app = names::app_of_service(&service);
        if let Err(e) = model_names::validate_app(&app) {
            list.skipped
                .push((format!("{GROUP}@@{service}"), e.to_string()));
            continue;
        }
        let instances = naming
            .get_all_instances(service.clone(), Some(GROUP.to_owned()), Vec::new(), false)
            .await
            .map_err(|e| map_error(e, &format!("list {GROUP}@@{service}")))?;
        for instance in &instances {
            if list.records.len() + list.skipped.len() >= MAX_CONSUMER_RECORDS {
                list.truncated = true;
                return Ok(list);
            }
            match from_nacos(&app, instance, limits) {
                Ok(record) => list.records.push(record),
                Err(e) => list.skipped.push((
                    format!(
                        "{GROUP}@@{service} {}#{}",
                        instance.ip,
                        instance.cluster_name.as_deref().unwrap_or("")
                    ),
                    e.to_string(),
                )),
            }
        }
    }
    list.records
        .sort_by(|a, b| (&a.app, &a.id).cmp(&(&b.app, &b.id)));
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_consumers_on_one_host_are_two_instances_and_read_back() {
        let limits = Limits::default();
        let a = ConsumerRecord::new("web", "id1", "10.0.0.9", 1);
        let b = ConsumerRecord::new("web", "id2", "10.0.0.9", 1);
        let (na, nb) = (
            to_nacos(&a, &limits).unwrap(),
            to_nacos(&b, &limits).unwrap(),
        );
        assert_eq!((na.ip.as_str(), na.port), (nb.ip.as_str(), nb.port));
        assert_ne!(na.cluster_name, nb.cluster_name);
        assert_eq!(from_nacos("web", &na, &limits).unwrap(), a);
        assert!(from_nacos("other", &na, &limits).is_err());
        let mut bare = na.clone();
        bare.metadata.clear();
        assert!(from_nacos("web", &bare, &limits).is_err());
    }
}
