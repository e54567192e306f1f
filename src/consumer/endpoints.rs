//! Building endpoints from instances and their revision's metadata. Pure: no I/O.
//!
//! An endpoint is an instance's host with, for each service of the revision matching the
//! subscription, the service's port if it has one, else the port the instance declares for
//! the service's protocol (`dubbo.endpoints`), else the instance port.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::subscription::Subscription;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance};

/// The enabled instances with a revision, grouped by revision (revision `0`, no services,
/// is left out).
pub(crate) fn by_revision<'a>(
    instances: impl IntoIterator<Item = &'a Arc<ServiceInstance>>,
) -> BTreeMap<&'a str, Vec<&'a Arc<ServiceInstance>>> {
    let mut grouped: BTreeMap<&str, Vec<&Arc<ServiceInstance>>> = BTreeMap::new();
    for instance in instances
        .into_iter()
        .filter(|i| i.enabled && i.revision() != EMPTY_REVISION)
    {
        grouped
            .entry(instance.revision())
            .or_default()
            .push(instance);
    }
    grouped
}

/// The endpoints of instances sharing one revision's metadata.
pub(crate) fn build_endpoints(
    info: &MetadataInfo,
    members: &[&Arc<ServiceInstance>],
    subscription: &Subscription,
) -> Vec<Endpoint> {
    let services: Vec<_> = info
        .matching(
            &subscription.interface,
            subscription.group.as_deref(),
            subscription.version.as_deref(),
            subscription.protocol.as_deref(),
        )
        .collect();
    let mut endpoints = Vec::with_capacity(services.len() * members.len());
    for instance in members {
        for service in &services {
            let port = if service.port > 0 {
                service.port
            } else {
                instance.port_for_protocol(&service.protocol)
            };
            endpoints.push(Endpoint {
                app: info.app.clone(),
                host: instance.host.clone(),
                port,
                protocol: service.protocol.clone(),
                revision: info.revision.clone(),
                service: Arc::clone(service),
            });
        }
    }
    endpoints
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn instance(info: &MetadataInfo, port: u16, enabled: bool) -> Arc<ServiceInstance> {
        let mut i = ServiceInstance::new(&info.app, "10.0.0.1", port);
        i.metadata
            .insert(crate::model::keys::REVISION.into(), info.revision.clone());
        i.enabled = enabled;
        Arc::new(i)
    }

    #[test]
    fn only_matching_services_of_enabled_instances_become_endpoints() {
        let info = MetadataInfo::new(
            "shop",
            [
                ServiceInfo::new("shop.A"),
                ServiceInfo::new("shop.B").with_port(7000),
            ],
        )
        .unwrap();
        let all = [instance(&info, 1, true), instance(&info, 2, false)];
        let grouped = by_revision(&all);
        assert_eq!(grouped.len(), 1);
        let members = &grouped[info.revision.as_str()];
        assert_eq!(members.len(), 1, "the disabled instance is left out");
        let a = build_endpoints(&info, members, &Subscription::new("shop.A"));
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].port, a[0].app.as_str()), (1, "shop"));
        let b = build_endpoints(&info, members, &Subscription::new("shop.B"));
        assert_eq!(b[0].port, 7000, "the service's own port wins");
        assert!(build_endpoints(&info, members, &Subscription::new("shop.C")).is_empty());
    }
}
