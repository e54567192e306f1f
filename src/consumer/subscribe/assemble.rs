//! Assembling a subscription's endpoint set from its routed instances and their revisions'
//! metadata. Pure: no I/O, no clock. Health does not enter it: what health sets aside is
//! the balancer's to leave out.
//!
//! Incremental: an instance's endpoints are rebuilt only when its record or its revision's
//! metadata changed since the last pass; the others are copied from the last pass. An
//! instance whose revision's metadata is not known (yet) keeps the endpoints it had. What
//! the endpoints of one revision share is kept from pass to pass too, so that instances
//! joining over time share it with those already there (built anew per pass, a churning
//! fleet would hold one copy per instance).
//!
//! Each app's last pass is kept as the routable set it walked and, in that set's order,
//! one vector of endpoints with where each instance's end: a pass walks the new set and
//! the last one side by side (both are sorted by address), so it finds an instance's last
//! endpoints without hashing or copying its address, and builds no vector per instance.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::apps::AppState;
use crate::consumer::endpoints::RevisionEndpoints;
use crate::consumer::hosts::HostNames;
use crate::consumer::metadata::Key;
use crate::consumer::subscription::Subscription;
use crate::consumer::views::Routable;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance};

/// What the last pass built for one instance of its set.
struct Built {
    /// The metadata its endpoints were built from; `None` when they were carried over from
    /// an earlier record while the metadata of the instance's revision is not known.
    info: Option<Arc<MetadataInfo>>,
    /// Where its endpoints end in [`AppPass::endpoints`] (they start where the previous
    /// instance's end).
    end: usize,
}

/// One app's last pass.
struct AppPass {
    /// The routable set it walked.
    routable: Arc<Routable>,
    /// One entry per instance of `routable`, in its order.
    built: Vec<Built>,
    /// The endpoints of all its instances, in `routable`'s order, before health.
    endpoints: Vec<Endpoint>,
}

/// One instance of a last pass with what it built.
struct Last<'a> {
    address: &'a str,
    instance: &'a Arc<ServiceInstance>,
    info: Option<&'a Arc<MetadataInfo>>,
    endpoints: &'a [Endpoint],
}

impl AppPass {
    /// Each instance the pass walked, in address order, with what it built.
    fn instances(&self) -> impl Iterator<Item = Last<'_>> {
        let mut start = 0;
        self.routable
            .instances
            .iter()
            .zip(&self.built)
            .map(move |((address, instance), built)| {
                let endpoints = &self.endpoints[start..built.end];
                start = built.end;
                Last {
                    address,
                    instance,
                    info: built.info.as_ref(),
                    endpoints,
                }
            })
    }
}

/// What the endpoints of one revision share, with the metadata it was built from.
struct Shared {
    info: Arc<MetadataInfo>,
    endpoints: RevisionEndpoints,
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Assembly {
    /// Each app's last pass.
    passes: HashMap<String, AppPass>,
    /// What each revision's endpoints share, by app and revision.
    shared: HashMap<String, HashMap<String, Shared>>,
}

impl Assembly {
    /// The endpoint set: each routed instance's endpoints from its revision's metadata, or
    /// its last endpoints while that metadata is not known. Sorted, without duplicates.
    /// Health does not enter it: what health sets aside is the balancer's to leave out.
    pub fn compute(
        &mut self,
        apps: &BTreeMap<String, AppState>,
        metadata: &HashMap<Key, Arc<MetadataInfo>>,
        subscription: &Subscription,
        hosts: &HostNames,
    ) -> Vec<Endpoint> {
        // One lock for the pass: a cold pass looks up a host for every instance.
        let mut hosts = hosts.lock();
        for (app, view) in apps {
            let infos: HashMap<&str, &Arc<MetadataInfo>> = metadata
                .iter()
                .filter(|((a, _), _)| a == app)
                .map(|((_, revision), info)| (revision.as_str(), info))
                .collect();
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
            let routable = view.routable_set();
            let last = self.passes.remove(app.as_str());
            let per_instance = known.values().map(|(_, s)| s.per_instance()).max();
            let room = last.as_ref().map_or_else(
                || routable.instances.len() * per_instance.unwrap_or(0),
                |last| last.endpoints.len(),
            );
            let mut built = Vec::with_capacity(routable.instances.len());
            let mut endpoints = Vec::with_capacity(room);
            let mut previous = last.iter().flat_map(AppPass::instances).peekable();
            for (address, instance) in routable.instances.iter() {
                // Both sets are sorted by address: the last pass's entry, if any, is next.
                while previous.next_if(|p| p.address < address.as_str()).is_some() {}
                let before = previous.next_if(|p| p.address == address.as_str());
                let revision = instance.revision();
                let info = if revision == EMPTY_REVISION {
                    None
                } else {
                    known.get(revision)
                };
                let info = match (before, info) {
                    (Some(last), Some(&(info, shared))) => {
                        let same_record =
                            Arc::ptr_eq(last.instance, instance) || *last.instance == *instance;
                        let same_info = last.info.is_some_and(|i| Arc::ptr_eq(i, info));
                        if same_record && same_info {
                            endpoints.extend_from_slice(last.endpoints);
                        } else {
                            shared.extend(instance, &mut hosts, &mut endpoints);
                        }
                        Some(info.clone())
                    }
                    // Metadata not known (yet): keep the last endpoints.
                    (Some(last), None) if revision != EMPTY_REVISION => {
                        endpoints.extend_from_slice(last.endpoints);
                        None
                    }
                    (None, Some(&(info, shared))) => {
                        shared.extend(instance, &mut hosts, &mut endpoints);
                        Some(info.clone())
                    }
                    _ => None,
                };
                let end = endpoints.len();
                built.push(Built { info, end });
            }
            let pass = AppPass {
                routable: Arc::clone(routable),
                built,
                endpoints,
            };
            self.passes.insert(app.clone(), pass);
        }
        self.passes.retain(|app, _| apps.contains_key(app));
        self.shared
            .retain(|app, revisions| !revisions.is_empty() && apps.contains_key(app));
        let total = self.passes.values().map(|p| p.endpoints.len()).sum();
        let mut chosen = Vec::with_capacity(total);
        chosen.extend(self.all().cloned());
        // Unstable: equal endpoints are indistinguishable (and removed just after).
        chosen.sort_unstable();
        chosen.dedup();
        chosen
    }

    /// Every endpoint the last pass built, before health (with duplicates).
    pub fn all(&self) -> impl Iterator<Item = &Endpoint> {
        self.passes.values().flat_map(|p| &p.endpoints)
    }

    /// Forgets an app the subscription no longer follows.
    pub fn forget_app(&mut self, app: &str) {
        self.passes.remove(app);
        self.shared.remove(app);
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
        let routable: Instances = instances
            .iter()
            .map(|i| (i.key_address(), i.clone()))
            .collect();
        let mut state = AppState::default();
        state.update(Arc::new(Routable {
            instances: Arc::new(routable),
            protection_active: false,
            held: 0,
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

    proptest::proptest! {
        /// Pass after pass, as instances come, go, change their record and change
        /// revision (to one whose metadata is not known, too), every instance has the
        /// endpoints it would have alone, or, while its revision's metadata is unknown, the
        /// last it had.
        #[test]
        fn every_pass_gives_each_instance_what_it_would_have_alone(
            passes in proptest::collection::vec(
                proptest::collection::btree_map(0u16..24, (0usize..3, proptest::bool::ANY), 0..16),
                1..8,
            )
        ) {
            let v1 = info(&["shop.A"]);
            let v2 = info(&["shop.A", "shop.B"]);
            let revisions = [v1.revision.as_str(), v2.revision.as_str(), "feed"];
            let metadata = known(&[&v1, &v2]);
            let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
            let mut assembly = Assembly::default();
            let mut last: BTreeMap<u16, Vec<Endpoint>> = BTreeMap::new();
            for pass in passes {
                // A record may also change within its revision: its own port for the protocol.
                let record = |port: u16, (r, own): (usize, bool)| {
                    let mut i = (*instance(port, revisions[r])).clone();
                    if own {
                        let ports = format!(r#"[{{"port":{},"protocol":"tri"}}]"#, 9000 + port);
                        i.metadata.insert(keys::ENDPOINTS.into(), ports);
                    }
                    Arc::new(i)
                };
                let fleet: Vec<_> = pass.iter().map(|(port, r)| record(*port, *r)).collect();
                last.retain(|port, _| pass.contains_key(port));
                for (port, r) in &pass {
                    if r.0 < 2 {
                        let alone = apps(&[record(*port, *r)]);
                        let own = Assembly::default().compute(&alone, &metadata, &sub, &hosts);
                        last.insert(*port, own);
                    }
                }
                let mut expected: Vec<Endpoint> = last.values().flatten().cloned().collect();
                expected.sort_unstable();
                let set = assembly.compute(&apps(&fleet), &metadata, &sub, &hosts);
                proptest::prop_assert_eq!(set, expected);
            }
        }
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
        let set = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts);
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
        );
        assert_eq!(first.len(), 1);
        // The instance moves to a revision whose metadata is still being fetched.
        let moved = apps(&[instance(1, "feed")]);
        let kept = assembly.compute(&moved, &known(&[&v1]), &sub, &hosts);
        assert_eq!(kept, first, "kept while the new metadata is unknown");
        // A new instance of the unknown revision gets nothing yet; one that leaves goes.
        let grown = apps(&[instance(1, "feed"), instance(2, "feed")]);
        assert_eq!(
            assembly.compute(&grown, &known(&[&v1]), &sub, &hosts),
            first
        );
        assert!(
            assembly
                .compute(&apps(&[]), &known(&[&v1]), &sub, &hosts)
                .is_empty()
        );
    }

    #[test]
    fn unchanged_instances_reuse_their_endpoints() {
        let v1 = info(&["shop.A"]);
        let fleet = [instance(1, &v1.revision), instance(2, &v1.revision)];
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts);
        let again = assembly.compute(&apps(&fleet), &known(&[&v1]), &sub, &hosts);
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
        assembly.compute(&apps(&[instance(1, &v1.revision)]), &first, &sub, &hosts);
        // The first instance leaves as the second joins, then a third joins.
        let second = apps(&[instance(2, &v1.revision)]);
        let set = assembly.compute(&second, &first, &sub, &hosts);
        let third = apps(&[instance(2, &v1.revision), instance(3, &v1.revision)]);
        let later = assembly.compute(&third, &first, &sub, &hosts);
        assert_eq!(ports(&later), [2, 3]);
        for endpoint in &later {
            assert!(Arc::ptr_eq(&endpoint.app, &set[0].app), "one app string");
            assert!(Arc::ptr_eq(&endpoint.revision, &set[0].revision));
            assert!(Arc::ptr_eq(&endpoint.protocol, &set[0].protocol));
        }
        // New metadata for the revision (fetched again) is built from anew.
        let refetched = known(&[&info(&["shop.A"])]);
        let rebuilt = assembly.compute(&third, &refetched, &sub, &hosts);
        assert!(!Arc::ptr_eq(&rebuilt[0].app, &set[0].app));
    }

    #[test]
    fn a_forgotten_app_is_rebuilt_from_scratch() {
        let v1 = info(&["shop.A"]);
        let fleet = apps(&[instance(1, &v1.revision)]);
        let (hosts, sub) = (HostNames::default(), Subscription::new("shop.A"));
        let mut assembly = Assembly::default();
        let first = assembly.compute(&fleet, &known(&[&v1]), &sub, &hosts);
        assembly.forget_app(SHOP);
        let unknown = HashMap::new();
        assert!(
            assembly.compute(&fleet, &unknown, &sub, &hosts).is_empty(),
            "nothing carried over"
        );
        assert_eq!(
            assembly.compute(&fleet, &known(&[&v1]), &sub, &hosts),
            first
        );
    }
}
