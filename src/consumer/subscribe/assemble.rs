//! Assembling a subscription's endpoint set from its routed instances, their revisions'
//! metadata and consumer-side health. Pure: no I/O, no clock.
//!
//! Incremental: an instance's endpoints are rebuilt only when its record or its revision's
//! metadata changed since the last pass, so a single-instance change costs one instance's
//! endpoints plus assembling (sorting references, then cloning) the set. An instance whose
//! revision's metadata is not known (yet) keeps the endpoints it had. What the endpoints of
//! one revision share is kept from pass to pass too, so that instances joining over time
//! share it with those already there (built anew per pass, a churning fleet would hold one
//! copy per instance).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::apps::AppState;
use super::fetches::Key;
use crate::consumer::endpoints::RevisionEndpoints;
use crate::consumer::hosts::HostNames;
use crate::consumer::subscription::Subscription;
use crate::model::{Authority, EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance};

/// The endpoints of one routed instance as last computed, with what they were computed
/// from, so that they are reused while neither changes.
struct Computed {
    instance: Arc<ServiceInstance>,
    /// The metadata they were built from; `None` when they were carried over from an
    /// earlier record while the metadata of the instance's revision is not known.
    info: Option<Arc<MetadataInfo>>,
    endpoints: Vec<Endpoint>,
    /// The pass that last saw the instance routed.
    pass: u64,
}

/// What the endpoints of one revision share, with the metadata it was built from.
struct Shared {
    info: Arc<MetadataInfo>,
    endpoints: RevisionEndpoints,
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Assembly {
    /// The endpoints of each routed instance, by app and `{host}:{port}`.
    by_instance: HashMap<String, HashMap<String, Computed>>,
    /// What each revision's endpoints share, by app and revision.
    shared: HashMap<String, HashMap<String, Shared>>,
    /// How many passes ran (marks the entries a pass saw).
    pass: u64,
}

impl Assembly {
    /// The endpoint set: each routed instance's endpoints from its revision's metadata, or
    /// its last endpoints while that metadata is not known; addresses `failing` says are
    /// set aside for failed calls left out unless that would leave nothing. Sorted, without
    /// duplicates.
    pub fn compute(
        &mut self,
        apps: &BTreeMap<String, AppState>,
        metadata: &HashMap<Key, Arc<MetadataInfo>>,
        subscription: &Subscription,
        hosts: &HostNames,
        failing: Option<&dyn Fn(&Authority) -> bool>,
    ) -> Vec<Endpoint> {
        self.pass += 1;
        let pass = self.pass;
        // One lock for the pass: a cold pass looks up a host for every instance.
        let mut hosts = hosts.lock();
        for (app, view) in apps {
            let infos: HashMap<&str, &Arc<MetadataInfo>> = metadata
                .iter()
                .filter(|((a, _), _)| a == app)
                .map(|((_, revision), info)| (revision.as_str(), info))
                .collect();
            let computed = self.by_instance.entry(app.clone()).or_default();
            // Kept while its revision's metadata is the one known.
            let shared = self.shared.entry(app.clone()).or_default();
            shared.retain(|revision, kept| {
                infos
                    .get(revision.as_str())
                    .is_some_and(|info| Arc::ptr_eq(info, &kept.info))
            });
            for (revision, info) in &infos {
                if !shared.contains_key(*revision) {
                    let kept = Shared {
                        info: Arc::clone(info),
                        endpoints: RevisionEndpoints::new(info, subscription),
                    };
                    shared.insert((*revision).to_owned(), kept);
                }
            }
            // Each known revision's metadata with what its endpoints share: one lookup per
            // instance.
            let known: HashMap<&str, (&Arc<MetadataInfo>, &RevisionEndpoints)> = shared
                .iter()
                .map(|(revision, kept)| (revision.as_str(), (&kept.info, &kept.endpoints)))
                .collect();
            // A first pass inserts an entry per instance: room for all of them at once.
            computed.reserve(view.len().saturating_sub(computed.len()));
            for (address, instance) in view.routable_entries() {
                let revision = instance.revision();
                if revision == EMPTY_REVISION {
                    continue;
                }
                match (computed.get_mut(address.as_str()), known.get(revision)) {
                    (Some(last), Some(&(info, shared))) => {
                        let same_record =
                            Arc::ptr_eq(&last.instance, instance) || last.instance == *instance;
                        let same_info = last.info.as_ref().is_some_and(|i| Arc::ptr_eq(i, info));
                        if !(same_record && same_info) {
                            last.endpoints = shared.of(instance, &mut hosts);
                            last.info = Some(info.clone());
                        }
                        last.instance = instance.clone();
                        last.pass = pass;
                    }
                    // Metadata not known (yet): keep the last endpoints.
                    (Some(last), None) => {
                        last.info = None;
                        last.instance = instance.clone();
                        last.pass = pass;
                    }
                    (None, Some(&(info, shared))) => {
                        let endpoints = shared.of(instance, &mut hosts);
                        let entry = Computed {
                            instance: instance.clone(),
                            info: Some(info.clone()),
                            endpoints,
                            pass,
                        };
                        computed.insert(address.clone(), entry);
                    }
                    (None, None) => {}
                }
            }
        }
        for computed in self.by_instance.values_mut() {
            computed.retain(|_, c| c.pass == pass);
            shrink_if_mostly_empty(computed);
        }
        self.by_instance.retain(|_, computed| !computed.is_empty());
        self.shared
            .retain(|app, revisions| !revisions.is_empty() && apps.contains_key(app));
        shrink_if_mostly_empty(&mut self.by_instance);
        let mut chosen: Vec<&Endpoint> = self
            .by_instance
            .values()
            .flat_map(HashMap::values)
            .flat_map(|c| &c.endpoints)
            .collect();
        if let Some(failing) = failing {
            let healthy: Vec<&Endpoint> = chosen
                .iter()
                .copied()
                .filter(|e| !failing(&e.authority()))
                .collect();
            if !healthy.is_empty() {
                chosen = healthy;
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        chosen.into_iter().cloned().collect()
    }

    /// Every endpoint the last pass built, before health (with duplicates).
    pub fn all(&self) -> impl Iterator<Item = &Endpoint> {
        self.by_instance
            .values()
            .flat_map(HashMap::values)
            .flat_map(|c| &c.endpoints)
    }

    /// Forgets an app the subscription no longer follows.
    pub fn forget_app(&mut self, app: &str) {
        self.by_instance.remove(app);
        self.shared.remove(app);
    }
}

/// Gives memory back once a map holds a quarter of what it once did: an app that shrank
/// after a burst would otherwise keep its largest table for good.
fn shrink_if_mostly_empty<K: Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 16 && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Instances;
    use crate::consumer::views::Routable;
    use crate::model::{ServiceInfo, keys};

    const SHOP: &str = "shop";

    fn info(services: &[&str]) -> Arc<MetadataInfo> {
        let services = services.iter().map(|s| ServiceInfo::new(*s));
        Arc::new(MetadataInfo::new(SHOP, services).unwrap())
    }

    fn instance(port: u16, revision: &str) -> Arc<ServiceInstance> {
        let mut i = ServiceInstance::new(SHOP, "10.0.0.1", port);
        i.metadata.insert(keys::REVISION.into(), revision.into());
        Arc::new(i)
    }

    fn apps(instances: &[Arc<ServiceInstance>]) -> BTreeMap<String, AppState> {
        let routable: Instances = instances.iter().map(|i| (i.address(), i.clone())).collect();
        let mut state = AppState::default();
        state.update(Arc::new(Routable {
            instances: routable,
            protection_active: false,
            revision: 0,
        }));
        [(SHOP.to_owned(), state)].into()
    }

    fn known(infos: &[&Arc<MetadataInfo>]) -> HashMap<Key, Arc<MetadataInfo>> {
        infos
            .iter()
            .map(|i| ((SHOP.to_owned(), i.revision.clone()), Arc::clone(i)))
            .collect()
    }

    fn ports(endpoints: &[Endpoint]) -> Vec<u16> {
        endpoints.iter().map(|e| e.port).collect()
    }

    #[test]
    fn each_instance_gets_the_matching_services_of_its_revision_sorted() {
        let v1 = info(&["shop.A", "shop.B"]);
        let fleet = [
            instance(3, &v1.revision),
            instance(1, &v1.revision),
            instance(2, "0"),
        ];
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let set = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts, None);
        assert_eq!(ports(&set), [1, 3], "sorted; revision 0 exports nothing");
        assert!(set.iter().all(|e| e.instance_port == e.port));
    }

    #[test]
    fn an_instance_whose_new_revision_is_unknown_keeps_its_last_endpoints() {
        let v1 = info(&["shop.A"]);
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = assembly.compute(
            &apps(&[instance(1, &v1.revision)]),
            &known(&[&v1]),
            &sub,
            &hosts,
            None,
        );
        assert_eq!(first.len(), 1);
        // The instance moves to a revision whose metadata is still being fetched.
        let moved = apps(&[instance(1, "feed")]);
        let kept = assembly.compute(&moved, &known(&[&v1]), &sub, &hosts, None);
        assert_eq!(kept, first, "kept while the new metadata is unknown");
        // A new instance of the unknown revision gets nothing yet; one that leaves goes.
        let grown = apps(&[instance(1, "feed"), instance(2, "feed")]);
        assert_eq!(
            assembly.compute(&grown, &known(&[&v1]), &sub, &hosts, None),
            first
        );
        assert!(
            assembly
                .compute(&apps(&[]), &known(&[&v1]), &sub, &hosts, None)
                .is_empty()
        );
    }

    #[test]
    fn unchanged_instances_reuse_their_endpoints() {
        let v1 = info(&["shop.A"]);
        let fleet = [instance(1, &v1.revision), instance(2, &v1.revision)];
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts, None);
        let again = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts, None);
        assert_eq!(first, again);
        assert!(
            Arc::ptr_eq(&first[0].service, &again[0].service),
            "built once, cloned after"
        );
    }

    #[test]
    fn instances_joining_later_share_what_their_revision_s_endpoints_share() {
        let v1 = info(&["shop.A"]);
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = known(&[&v1]);
        assembly.compute(
            &apps(&[instance(1, &v1.revision)]),
            &first,
            &sub,
            &hosts,
            None,
        );
        // The first instance leaves as the second joins, then a third joins.
        let second = apps(&[instance(2, &v1.revision)]);
        let set = assembly.compute(&second, &first, &sub, &hosts, None);
        let third = apps(&[instance(2, &v1.revision), instance(3, &v1.revision)]);
        let later = assembly.compute(&third, &first, &sub, &hosts, None);
        assert_eq!(ports(&later), [2, 3]);
        for endpoint in &later {
            assert!(Arc::ptr_eq(&endpoint.app, &set[0].app), "one app string");
            assert!(Arc::ptr_eq(&endpoint.revision, &set[0].revision));
            assert!(Arc::ptr_eq(&endpoint.protocol, &set[0].protocol));
        }
        // New metadata for the revision (fetched again) is built from anew.
        let refetched = known(&[&info(&["shop.A"])]);
        let rebuilt = assembly.compute(&third, &refetched, &sub, &hosts, None);
        assert!(!Arc::ptr_eq(&rebuilt[0].app, &set[0].app));
    }

    #[test]
    fn failing_addresses_leave_unless_every_one_fails() {
        let v1 = info(&["shop.A"]);
        let fleet = [instance(1, &v1.revision), instance(2, &v1.revision)];
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let one = Authority::new("10.0.0.1", 1);
        let first_fails = |a: &Authority| *a == one;
        let set = assembly.compute(
            &apps(&fleet),
            &known(&[&v1]),
            &sub,
            &hosts,
            Some(&first_fails),
        );
        assert_eq!(ports(&set), [2]);
        let all_fail = |_: &Authority| true;
        let set = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts, Some(&all_fail));
        assert_eq!(ports(&set), [1, 2], "never nothing because of health");
    }

    #[test]
    fn a_forgotten_app_is_rebuilt_from_scratch() {
        let v1 = info(&["shop.A"]);
        let fleet = apps(&[instance(1, &v1.revision)]);
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = assembly.compute(&fleet, &known(&[&v1]), &sub, &hosts, None);
        assembly.forget_app(SHOP);
        let unknown = HashMap::new();
        assert!(
            assembly
                .compute(&fleet, &unknown, &sub, &hosts, None)
                .is_empty(),
            "nothing carried over"
        );
        assert_eq!(
            assembly.compute(&fleet, &known(&[&v1]), &sub, &hosts, None),
            first
        );
    }
}
