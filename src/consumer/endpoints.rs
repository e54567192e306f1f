//! Building endpoints from instances and their revision's metadata. Pure: no I/O.
//!
//! An endpoint is an instance's host with, for each service of the revision matching the
//! subscription, the service's port if it has one, else the port the instance declares for
//! the service's protocol (`dubbo.endpoints`), else the instance port.
//!
//! What the endpoints of one revision have in common (app, revision, the matching services
//! and their protocols) is built once per revision as a [`RevisionEndpoints`] and shared by
//! every endpoint; an instance adds only its host (one string the resolver shares among all
//! the endpoints of that host, see `hosts.rs`) and a port per service.

use std::collections::{BTreeMap, HashMap};
use std::iter::Peekable;
use std::sync::Arc;

use super::hosts::{HostNames, Table};
use super::subscription::Subscription;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInfo, ServiceInstance};

/// The enabled instances with a revision, grouped by revision (revision `0`, no services,
/// is left out).
pub(crate) fn by_revision<'a>(
    instances: impl IntoIterator<Item = &'a Arc<ServiceInstance>>,
) -> BTreeMap<&'a str, Vec<&'a Arc<ServiceInstance>>> {
    let mut grouped: BTreeMap<&str, Vec<&Arc<ServiceInstance>>> = BTreeMap::new();
    for instance in instances.into_iter().filter(routed) {
        grouped
            .entry(instance.revision())
            .or_default()
            .push(instance);
    }
    grouped
}

/// What every endpoint of one revision shares, for one subscription: built once per
/// revision, then stamped onto each instance of it.
pub(crate) struct RevisionEndpoints {
    app: Arc<str>,
    revision: Arc<str>,
    /// The matching services, each with its protocol (one shared string per protocol).
    services: Vec<(Arc<ServiceInfo>, Arc<str>)>,
}

impl RevisionEndpoints {
    /// The shared part of the endpoints of `info`'s instances for `subscription`.
    pub(crate) fn new(info: &MetadataInfo, subscription: &Subscription) -> Self {
        let mut protocols: Vec<Arc<str>> = Vec::new();
        let services = info
            .matching(
                &subscription.interface,
                subscription.group.as_deref(),
                subscription.version.as_deref(),
                subscription.protocol.as_deref(),
            )
            .map(|service| {
                let protocol = match protocols.iter().find(|p| ***p == *service.protocol) {
                    Some(known) => known.clone(),
                    None => {
                        let new: Arc<str> = Arc::from(service.protocol.as_str());
                        protocols.push(new.clone());
                        new
                    }
                };
                (Arc::clone(service), protocol)
            })
            .collect();
        RevisionEndpoints {
            app: Arc::from(info.app.as_str()),
            revision: Arc::from(info.revision.as_str()),
            services,
        }
    }

    /// How many endpoints each instance of the revision gets.
    pub(crate) fn per_instance(&self) -> usize {
        self.services.len()
    }

    /// Appends `instance`'s endpoints to `out`, with its host from `hosts`.
    pub(crate) fn extend(
        &self,
        instance: &ServiceInstance,
        hosts: &mut Table,
        out: &mut Vec<Endpoint>,
    ) {
        if self.services.is_empty() {
            return;
        }
        let host = hosts.get(&instance.host);
        let timestamp = instance.started_at_ms();
        for (service, protocol) in &self.services {
            let port = if service.port > 0 {
                service.port
            } else {
                instance.port_for_protocol(&service.protocol)
            };
            out.push(Endpoint {
                app: self.app.clone(),
                host: host.clone(),
                port,
                instance_port: instance.port,
                protocol: protocol.clone(),
                revision: self.revision.clone(),
                service: Arc::clone(service),
                timestamp,
            });
        }
    }

    /// The endpoints of one instance.
    #[cfg(test)]
    fn of(&self, instance: &ServiceInstance, hosts: &mut Table) -> Vec<Endpoint> {
        let mut out = Vec::with_capacity(self.per_instance());
        self.extend(instance, hosts, &mut out);
        out
    }
}

/// Appends the endpoints of `members`, [`routed`] instances of one revision whose
/// endpoints share `shared`.
pub(crate) fn extend_members(
    members: &[&Arc<ServiceInstance>],
    shared: &RevisionEndpoints,
    hosts: &HostNames,
    out: &mut Vec<Endpoint>,
) {
    let mut hosts = hosts.lock();
    for instance in members {
        shared.extend(instance, &mut hosts, out);
    }
}

/// Whether an instance gets endpoints of its revision: it takes calls and has a revision
/// (revision `0` exports no service).
pub(crate) fn routed(instance: &&Arc<ServiceInstance>) -> bool {
    instance.accepts_calls() && instance.revision() != EMPTY_REVISION
}

/// Walks `walk` (instances that take calls, each with a revision) as far as their
/// revisions are known: appends the endpoints of those whose revision is in `cached`,
/// gathers those whose revision is in `uncached` as its members. Stops before the first
/// instance of a revision in neither and returns that revision; `None` once the walk is
/// done. The caller looks the revision up, files it under one of the two and walks on.
pub(crate) fn walk_known<'a>(
    walk: &mut Peekable<impl Iterator<Item = &'a Arc<ServiceInstance>>>,
    cached: &HashMap<&'a str, RevisionEndpoints>,
    uncached: &mut BTreeMap<&'a str, Vec<&'a Arc<ServiceInstance>>>,
    hosts: &HostNames,
    out: &mut Vec<Endpoint>,
) -> Option<&'a str> {
    let mut hosts = hosts.lock();
    while let Some(&instance) = walk.peek() {
        let revision = instance.revision();
        if let Some(shared) = cached.get(revision) {
            shared.extend(instance, &mut hosts, out);
        } else if let Some(members) = uncached.get_mut(revision) {
            members.push(instance);
        } else {
            return Some(revision);
        }
        walk.next();
    }
    None
}

/// The endpoints of instances sharing one revision's metadata.
#[cfg(test)]
fn build_endpoints(
    info: &MetadataInfo,
    members: &[&Arc<ServiceInstance>],
    subscription: &Subscription,
    hosts: &HostNames,
) -> Vec<Endpoint> {
    let shared = RevisionEndpoints::new(info, subscription);
    let mut out = Vec::with_capacity(shared.per_instance() * members.len());
    extend_members(members, &shared, hosts, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProtocolPort;

    fn instance(info: &MetadataInfo, host: &str, port: u16, enabled: bool) -> Arc<ServiceInstance> {
        let mut i = ServiceInstance::new(&info.app, host, port);
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
        let all = [
            instance(&info, "10.0.0.1", 1, true),
            instance(&info, "10.0.0.1", 2, false),
        ];
        let grouped = by_revision(&all);
        assert_eq!(grouped.len(), 1);
        let members = &grouped[info.revision.as_str()];
        assert_eq!(members.len(), 1, "the disabled instance is left out");
        let hosts = HostNames::default();
        let a = build_endpoints(&info, members, &Subscription::new("shop.A"), &hosts);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].port, &*a[0].app), (1, "shop"));
        let b = build_endpoints(&info, members, &Subscription::new("shop.B"), &hosts);
        assert_eq!(b[0].port, 7000, "the service's own port wins");
        assert!(build_endpoints(&info, members, &Subscription::new("shop.C"), &hosts).is_empty());
    }

    /// Endpoint assembly as it was before the per-revision data was shared: every endpoint
    /// built from scratch with strings of its own.
    fn from_scratch(
        info: &MetadataInfo,
        members: &[&Arc<ServiceInstance>],
        subscription: &Subscription,
    ) -> Vec<Endpoint> {
        let mut out = Vec::new();
        for instance in members {
            for service in info.matching(
                &subscription.interface,
                subscription.group.as_deref(),
                subscription.version.as_deref(),
                subscription.protocol.as_deref(),
            ) {
                let port = if service.port > 0 {
                    service.port
                } else {
                    instance.port_for_protocol(&service.protocol)
                };
                out.push(Endpoint {
                    app: Arc::from(info.app.clone()),
                    host: Arc::from(instance.host.clone()),
                    port,
                    instance_port: instance.port,
                    protocol: Arc::from(service.protocol.clone()),
                    revision: Arc::from(info.revision.clone()),
                    service: Arc::new((**service).clone()),
                    timestamp: instance.started_at_ms(),
                });
            }
        }
        out
    }

    #[test]
    fn shared_assembly_equals_assembly_from_scratch() {
        let service = |protocol: &str| {
            let mut s = ServiceInfo::new("shop.A");
            s.protocol = protocol.into();
            s
        };
        let info = MetadataInfo::new(
            "shop",
            [
                service("tri"),
                service("grpc"),
                service("dubbo").with_port(20880),
                ServiceInfo::new("shop.B"),
            ],
        )
        .unwrap();
        let mut instances = Vec::new();
        for i in 0..20u16 {
            let mut record =
                (*instance(&info, &format!("10.0.{}.{}", i / 8, i), 8000 + i, true)).clone();
            if i % 3 == 0 {
                // Some instances declare a port of their own for a protocol.
                let ports = vec![ProtocolPort {
                    port: 9000 + i,
                    protocol: "grpc".into(),
                }];
                record.metadata.insert(
                    crate::model::keys::ENDPOINTS.into(),
                    serde_json::to_string(&ports).unwrap(),
                );
            }
            instances.push(Arc::new(record));
        }
        let members: Vec<&Arc<ServiceInstance>> = instances.iter().collect();
        let hosts = HostNames::default();
        for subscription in [
            Subscription::new("shop.A"),
            Subscription::new("shop.A").protocol("grpc"),
            Subscription::new("shop.A").protocol("dubbo"),
            Subscription::new("shop.B"),
            Subscription::new("shop.C"),
        ] {
            let shared = build_endpoints(&info, &members, &subscription, &hosts);
            let old = from_scratch(&info, &members, &subscription);
            assert_eq!(shared, old, "{subscription:?}");
            let one_by_one: Vec<Endpoint> = members
                .iter()
                .flat_map(|i| RevisionEndpoints::new(&info, &subscription).of(i, &mut hosts.lock()))
                .collect();
            assert_eq!(one_by_one, old, "{subscription:?}");
        }
        let grpc = build_endpoints(
            &info,
            &members,
            &Subscription::new("shop.A").protocol("grpc"),
            &hosts,
        );
        assert_eq!(grpc.len(), 20);
        assert_eq!(
            grpc[0].port, 9000,
            "the instance's own port for the protocol"
        );
        assert_eq!(grpc[1].port, 8001, "else the instance port");
        let all = build_endpoints(&info, &members, &Subscription::new("shop.A"), &hosts);
        assert!(
            all.windows(2)
                .all(|w| w[0].host != w[1].host || Arc::ptr_eq(&w[0].host, &w[1].host)),
            "one host string per instance"
        );
        let b = build_endpoints(&info, &members, &Subscription::new("shop.B"), &hosts);
        assert!(
            Arc::ptr_eq(&all[0].host, &b[0].host),
            "the endpoint sets of two interfaces share their hosts"
        );
        assert!(
            all.iter()
                .all(|e| Arc::ptr_eq(&e.revision, &all[0].revision))
        );
    }
}
