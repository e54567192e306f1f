//! One subscriber's view of one app's instances: what the store says, updated as a reset
//! (after a list) or as upserts and removals (from a watch), with self-preservation deciding
//! which removals are held. Pure: no I/O.

use std::sync::Arc;

use tokio::time::Instant;

use super::protection::{Protection, ProtectionOptions};
use crate::model::ServiceInstance;
use crate::registry::{InstanceChange, Instances};

/// What applying an update did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Whether the instances routed to (registered and enabled, or held) may have changed.
    pub changed: bool,
    /// Expiries newly held by self-preservation.
    pub newly_held: usize,
    /// Records skipped as unusable.
    pub skipped: usize,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct AppView {
    /// The registered instances by `{host}:{port}`, enabled or not.
    instances: Instances,
    protection: Protection,
    /// Whether the store has been listed since the subscription started.
    pub synced: bool,
}

impl AppView {
    pub fn new(options: ProtectionOptions) -> Self {
        AppView {
            instances: Instances::new(),
            protection: Protection::new(options),
            synced: false,
        }
    }

    /// Replaces the registered instances with a fresh list (after a list or a re-list).
    /// Instances missing from it are removals; those last seen enabled are expiries.
    pub fn reset(&mut self, list: Instances, now: Instant) -> Applied {
        let mut applied = Applied::default();
        let gone: Vec<String> = self
            .instances
            .keys()
            .filter(|a| !list.contains_key(*a))
            .cloned()
            .collect();
        let new_count = list.len();
        let old = std::mem::take(&mut self.instances);
        for (address, instance) in &list {
            self.protection.returned(address);
            if old.get(address) != Some(instance) {
                applied.changed = true;
            }
        }
        self.instances = list;
        for address in gone {
            applied.changed = true;
            if let Some(previous) = old.get(&address) {
                applied.newly_held += self.removed(&address, previous.clone(), new_count, now);
            }
        }
        applied
    }

    /// Applies a batch of changes from a watch.
    pub fn apply(&mut self, changes: Vec<InstanceChange>, now: Instant) -> Applied {
        let mut applied = Applied::default();
        for change in changes {
            match change {
                InstanceChange::Upsert(instance) => {
                    let address = instance.address();
                    self.protection.returned(&address);
                    self.instances.insert(address, instance);
                    applied.changed = true;
                }
                InstanceChange::Removed(address) => {
                    if let Some(previous) = self.instances.remove(&address) {
                        let remaining = self.instances.len();
                        applied.newly_held += self.removed(&address, previous, remaining, now);
                        applied.changed = true;
                    }
                }
                InstanceChange::Skipped { address, reason } => {
                    // An unusable record counts as absent, like a removal.
                    tracing::warn!(%address, %reason, "instance record skipped");
                    applied.skipped += 1;
                    if let Some(previous) = self.instances.remove(&address) {
                        let remaining = self.instances.len();
                        applied.newly_held += self.removed(&address, previous, remaining, now);
                        applied.changed = true;
                    }
                }
            }
        }
        applied
    }

    /// A record went away: an expiry when last seen enabled, a graceful removal otherwise.
    fn removed(
        &mut self,
        address: &str,
        previous: Arc<ServiceInstance>,
        remaining: usize,
        now: Instant,
    ) -> usize {
        if previous.enabled {
            self.protection.expired(address, previous, remaining, now)
        } else {
            0
        }
    }

    /// Releases held instances whose maximum hold ended; returns whether any was released.
    pub fn release_due(&mut self, now: Instant) -> bool {
        !self.protection.release_due(now).is_empty()
    }

    /// When the next held instance is released.
    pub fn next_release(&self) -> Option<Instant> {
        self.protection.next_release()
    }

    /// Whether removals are held.
    pub fn protection_active(&self) -> bool {
        self.protection.is_active()
    }

    /// The instances to route to: registered and enabled, plus the held ones.
    pub fn routable(&self) -> impl Iterator<Item = &Arc<ServiceInstance>> {
        self.routable_entries().map(|(_, i)| i)
    }

    /// The instances to route to, with their addresses (`{host}:{port}`).
    pub fn routable_entries(&self) -> impl Iterator<Item = (&String, &Arc<ServiceInstance>)> {
        self.instances.iter().filter(|(_, i)| i.enabled).chain(
            self.protection
                .held()
                .filter(|(a, _)| !self.instances.contains_key(*a)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(port: u16, enabled: bool) -> Arc<ServiceInstance> {
        let mut i = ServiceInstance::new("shop", "10.0.0.1", port);
        i.enabled = enabled;
        Arc::new(i)
    }

    fn list(n: u16) -> Instances {
        (0..n)
            .map(|p| {
                let i = instance(1000 + p, true);
                (i.address(), i)
            })
            .collect()
    }

    #[test]
    fn graceful_removal_is_never_held_and_disabled_leaves_at_once() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default().min_instances(1).threshold(0.0));
        v.reset(list(20), now);
        v.apply(vec![InstanceChange::Upsert(instance(1000, false))], now);
        assert_eq!(v.routable().count(), 19, "disabled leaves at once");
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert_eq!(a.newly_held, 0);
        assert!(!v.protection_active());
        assert_eq!(v.routable().count(), 19);
    }

    #[test]
    fn a_reset_missing_most_instances_is_held() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(20), now);
        let a = v.reset(list(2), now);
        assert!(a.changed);
        assert_eq!(a.newly_held, 18);
        assert_eq!(v.routable().count(), 20);
        // They come back with the next list.
        v.reset(list(20), now);
        assert!(!v.protection_active());
        assert_eq!(v.routable().count(), 20);
    }

    #[test]
    fn an_equal_reset_changes_nothing() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(3), now);
        assert!(!v.reset(list(3), now).changed);
    }
}
