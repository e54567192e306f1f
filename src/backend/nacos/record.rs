//! The instance record on Nacos: a naming instance, as Dubbo Java 3.3
//! (`NacosNamingServiceUtils.toInstance`) and dubbo-go 3.3 (`toRegisterInstance`) register
//! it. Pure: no I/O.
//!
//! Written: the host as `ip`, the port, weight `1.0`, healthy, enabled, ephemeral, cluster
//! `DEFAULT`, and the metadata map with the same keys as the etcd and ZooKeeper records
//! (Nacos has no `enabled: false` a consumer could see: the server leaves disabled
//! instances out of what subscribers receive, so a draining instance says so with the
//! `introspect.stopping` metadata key instead).
//!
//! Read: what Dubbo Java's `toServiceInstance` reads (ip, port, metadata, healthy,
//! enabled), with the app given by the service followed, not by the record (Nacos fills
//! the record's service name as `group@@name`, or leaves it out). dubbo-go adds an `id`
//! metadata key (its instance id), which is dropped. Unhealthy instances are not listed, as
//! both Dubbo readers ask only for healthy ones.

use std::collections::HashMap;
use std::sync::Arc;

use nacos_sdk::api::naming::ServiceInstance as NacosInstance;

use super::names;
use crate::backend::InstanceList;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{InstanceMetadata, ServiceInstance};

/// The metadata key dubbo-go adds with its own instance id; never read.
pub const GO_ID_KEY: &str = "id";

/// The naming instance registered for `instance`.
pub fn to_nacos(instance: &ServiceInstance) -> NacosInstance {
    NacosInstance {
        instance_id: None,
        ip: instance.host.clone(),
        port: i32::from(instance.port),
        weight: 1.0,
        healthy: true,
        enabled: true,
        ephemeral: true,
        cluster_name: Some(names::DEFAULT_CLUSTER.to_owned()),
        service_name: Some(names::service_name(&instance.service_name)),
        metadata: instance
            .metadata
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<HashMap<_, _>>(),
    }
}

/// The size a naming instance takes as the record's bytes are counted against
/// [`Limits::max_instance_bytes`]: its host and every metadata key and value.
pub fn size_of(ip: &str, metadata: &HashMap<String, String>) -> usize {
    ip.len()
        + metadata
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>()
}

/// Whether a naming instance is one a Dubbo reader would route to: healthy and enabled
/// (Dubbo Java's `selectInstances(.., healthy = true)`; Nacos drops disabled ones itself).
pub fn is_listed(instance: &NacosInstance) -> bool {
    instance.healthy && instance.enabled
}

/// The `{host}:{port}` key of a naming instance as read (for skipped records too).
pub fn address_of(instance: &NacosInstance) -> String {
    format!("{}:{}", instance.ip, instance.port)
}

/// Reads a naming instance of `app`; fails on one over `limits` or whose names would break
/// the layout.
pub fn from_nacos(app: &str, instance: &NacosInstance, limits: &Limits) -> Result<ServiceInstance> {
    limits.check_size(
        "instance record",
        size_of(&instance.ip, &instance.metadata),
        limits.max_instance_bytes,
    )?;
    if instance.metadata.len() > limits.max_params + 1 {
        return Err(Error::TooLarge {
            what: "instance metadata entries",
            size: instance.metadata.len(),
            limit: limits.max_params,
        });
    }
    let port = u16::try_from(instance.port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(Error::InvalidPort(i64::from(instance.port)))?;
    let metadata: InstanceMetadata = instance
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != GO_ID_KEY)
        .collect();
    limits.check_size(
        "instance metadata entries",
        metadata.len(),
        limits.max_params,
    )?;
    let record = ServiceInstance {
        service_name: app.to_owned(),
        host: instance.ip.clone(),
        port,
        enabled: instance.enabled,
        healthy: instance.healthy,
        metadata,
    };
    record.validate()?;
    Ok(record)
}

/// The most naming instances of one service read (a bound on what a hostile registry costs).
pub const MAX_INSTANCES: usize = 200_000;

/// Reads the naming instances of `app` as one list: healthy and enabled ones only, each
/// parsed (one that fails is skipped with its reason, never failing the app), at most
/// [`MAX_INSTANCES`]. Nacos keys an instance by cluster, ip and port: a second record of
/// the same `{host}:{port}` (another cluster) is skipped as a duplicate.
pub fn parse_list(app: &str, listed: &[NacosInstance], limits: &Limits) -> InstanceList {
    let mut list = InstanceList::default();
    if listed.len() > MAX_INSTANCES {
        list.skipped.push((
            names::service_name(app),
            format!(
                "{} instances: only the first {MAX_INSTANCES} are read",
                listed.len()
            ),
        ));
    }
    for nacos in listed.iter().take(MAX_INSTANCES).filter(|i| is_listed(i)) {
        let address = address_of(nacos);
        if list.instances.contains_key(&address) {
            list.skipped.push((
                address,
                "a second record of this address (another cluster)".into(),
            ));
            continue;
        }
        match from_nacos(app, nacos, limits) {
            Ok(instance) => {
                list.instances.insert(address, Arc::new(instance));
            }
            Err(e) => list.skipped.push((Error::shorten(&address), e.to_string())),
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::keys;

    fn instance() -> ServiceInstance {
        let mut i = ServiceInstance::new("shop$v2", "10.0.0.7", 20880);
        i.metadata.insert(keys::REVISION.into(), "abc".into());
        i
    }

    #[test]
    fn written_as_dubbo_registers_it() {
        let n = to_nacos(&instance());
        assert_eq!(n.ip, "10.0.0.7");
        assert_eq!(n.port, 20880);
        assert_eq!(n.weight, 1.0);
        assert!(n.healthy && n.enabled && n.ephemeral);
        assert_eq!(n.cluster_name.as_deref(), Some("DEFAULT"));
        assert_eq!(n.service_name.as_deref(), Some("shop___v2"));
        assert_eq!(n.metadata[keys::REVISION], "abc");
        let back = from_nacos("shop$v2", &n, &Limits::default()).unwrap();
        assert_eq!(back, instance());
    }

    #[test]
    fn go_id_is_dropped_and_hostile_records_fail() {
        let limits = Limits::default();
        let mut n = to_nacos(&instance());
        n.metadata.insert("id".into(), "10.0.0.7:20880".into());
        assert!(
            !from_nacos("shop$v2", &n, &limits)
                .unwrap()
                .metadata
                .contains_key("id")
        );
        for port in [0, -1, 70_000] {
            let mut bad = n.clone();
            bad.port = port;
            assert!(from_nacos("shop", &bad, &limits).is_err(), "{port}");
        }
        let mut bad = n.clone();
        bad.ip = "a/b".into();
        assert!(from_nacos("shop", &bad, &limits).is_err());
        let mut bad = n.clone();
        bad.ip = String::new();
        assert!(from_nacos("shop", &bad, &limits).is_err());
        let mut huge = n.clone();
        huge.metadata
            .insert("k".into(), "v".repeat(limits.max_instance_bytes));
        assert!(matches!(
            from_nacos("shop", &huge, &limits),
            Err(Error::TooLarge { .. })
        ));
        let mut many = n.clone();
        for i in 0..=limits.max_params + 1 {
            many.metadata.insert(format!("k{i}"), String::new());
        }
        assert!(from_nacos("shop", &many, &limits).is_err());
        let mut bad_revision = n;
        bad_revision
            .metadata
            .insert(keys::REVISION.into(), "a/b".into());
        assert!(from_nacos("shop", &bad_revision, &limits).is_err());
    }

    #[test]
    fn lists_keep_healthy_records_and_skip_the_rest() {
        let limits = Limits::default();
        let good = to_nacos(&instance());
        let mut sick = good.clone();
        sick.port = 1;
        sick.healthy = false;
        let mut off = good.clone();
        off.port = 2;
        off.enabled = false;
        let mut broken = good.clone();
        broken.port = 0;
        let mut twin = good.clone();
        twin.cluster_name = Some("other".into());
        let list = parse_list("shop$v2", &[good, sick, off, broken, twin], &limits);
        assert_eq!(
            list.instances.keys().collect::<Vec<_>>(),
            ["10.0.0.7:20880"]
        );
        assert_eq!(list.skipped.len(), 2, "{:?}", list.skipped);
    }
}
