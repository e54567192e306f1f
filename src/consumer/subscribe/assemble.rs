//! Assembling a subscription's endpoint set from its routed instances, their revisions'
//! metadata and consumer-side health, and pushing it when it changed.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::time::Instant;

use super::task::Task;
use crate::consumer::endpoints::RevisionEndpoints;
use crate::consumer::stats::Counters;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance};
use crate::rpc::authority;

/// The endpoints of one routed instance as last computed, with what they were computed
/// from, so that they are reused while neither changes.
pub(super) struct Computed {
    instance: Arc<ServiceInstance>,
    /// The metadata they were built from; `None` when they were carried over from an
    /// earlier record while the metadata of the instance's revision is not known.
    info: Option<Arc<MetadataInfo>>,
    endpoints: Vec<Endpoint>,
    /// The [`Task::compute`] pass that last saw the instance routed.
    pass: u64,
}

impl Task {
    /// Computes the set and pushes it if it differs from what subscribers have.
    pub(super) fn push(&mut self, now: Instant) {
        let next = self.compute();
        let pushed = self.tx.borrow().as_slice() != next.as_slice();
        let counters = &self.context.counters;
        if pushed {
            self.tx.send_replace(Arc::new(next));
            Counters::bump(&counters.pushes);
            if self.live() {
                self.snapshot_dirty = true;
            }
        } else {
            Counters::bump(&counters.unchanged_updates);
        }
        self.coalescer.handled(now, pushed);
    }

    /// The endpoint set: each routed instance's endpoints from its revision's metadata, or
    /// its last endpoints while that metadata is not known; addresses the resolver's health
    /// sets aside for failed calls left out unless that would leave nothing (held ones
    /// that are merely suspect stay listed; balanced channels leave them out).
    ///
    /// Incremental: an instance's endpoints are rebuilt only when its record or its
    /// revision's metadata changed since the last pass, so a single-instance change costs
    /// one instance's endpoints plus assembling (sorting references, then cloning) the set.
    fn compute(&mut self) -> Vec<Endpoint> {
        self.compute_pass += 1;
        let pass = self.compute_pass;
        for (app, view) in &self.apps {
            let infos: HashMap<&str, &Arc<MetadataInfo>> = self
                .metadata
                .iter()
                .filter(|((a, _), _)| a == app)
                .map(|((_, revision), info)| (revision.as_str(), info))
                .collect();
            if !self.by_instance.contains_key(app) {
                self.by_instance.insert(app.clone(), HashMap::new());
            }
            let computed = self.by_instance.get_mut(app).expect("inserted above");
            // What the endpoints of one revision share, built once per revision and pass.
            let mut shared: HashMap<&str, RevisionEndpoints> = HashMap::new();
            let subscription = &self.subscription;
            let mut endpoints_of = |revision, info: &MetadataInfo, instance: &ServiceInstance| {
                shared
                    .entry(revision)
                    .or_insert_with(|| RevisionEndpoints::new(info, subscription))
                    .of(instance, &mut self.context.hosts.lock())
            };
            for (address, instance) in view.routable_entries() {
                let revision = instance.revision();
                if revision == EMPTY_REVISION {
                    continue;
                }
                let info = infos.get(revision).copied();
                match (computed.get_mut(address.as_str()), info) {
                    (Some(last), Some(info)) => {
                        let same_record =
                            Arc::ptr_eq(&last.instance, instance) || last.instance == *instance;
                        let same_info = last.info.as_ref().is_some_and(|i| Arc::ptr_eq(i, info));
                        if !(same_record && same_info) {
                            last.endpoints = endpoints_of(revision, info, instance);
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
                    (None, Some(info)) => {
                        let endpoints = endpoints_of(revision, info, instance);
                        computed.insert(
                            address.clone(),
                            Computed {
                                instance: instance.clone(),
                                info: Some(info.clone()),
                                endpoints,
                                pass,
                            },
                        );
                    }
                    (None, None) => {}
                }
            }
        }
        for computed in self.by_instance.values_mut() {
            computed.retain(|_, c| c.pass == pass);
        }
        self.by_instance.retain(|_, computed| !computed.is_empty());
        let all: Vec<&Endpoint> = self
            .by_instance
            .values()
            .flat_map(HashMap::values)
            .flat_map(|c| &c.endpoints)
            .collect();
        let mut chosen = all;
        let health = &self.context.health;
        if health.set_aside_count() > 0 {
            let healthy: Vec<&Endpoint> = chosen
                .iter()
                .copied()
                .filter(|e| !health.is_failing(&authority(&e.host, e.port)))
                .collect();
            if !healthy.is_empty() {
                chosen = healthy;
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        chosen.into_iter().cloned().collect()
    }
}
