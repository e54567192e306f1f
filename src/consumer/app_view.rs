//! One app's instances as the resolver's shared view of the app holds them: what the store
//! says, updated as a reset (after a list) or as upserts and removals (from a watch), with
//! self-preservation deciding which removals are held and the recovery after a store wipe
//! keeping what a wiped store forgot. Pure: no I/O.
//!
//! A wipe is seen as a re-list that carries one of the backend-neutral signs of a registry
//! that was wiped or replaced:
//!
//! * its epoch (a random id that providers create when it is absent) changed, or
//!   disappeared, since the last list;
//! * its revision (where the backend has one: etcd's store revision, a ZooKeeper zxid) is
//!   lower than the last one seen;
//! * where the backend gives neither (no revision, no epoch now or before), the read empties
//!   an app that had instances accepting calls: a successful read that says "nothing" is
//!   then not trusted at once.
//!
//! The instances the re-list misses are then kept, in apps of any size, until they
//! re-register or the recovery bound ([`super::ProtectionOptions::wipe_recovery`]) passes.
//! Graceful stops (records marked `enabled: false` or `introspect.stopping`) and deletions
//! on a healthy registry are not affected: they leave at once.

use std::sync::Arc;

use tokio::time::Instant;

use super::protection::{Protection, ProtectionOptions};
use crate::backend::{InstanceChange, Instances};
use crate::model::ServiceInstance;

/// What applying an update did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Whether the instances routed to (registered and enabled, or held) may have changed.
    pub changed: bool,
    /// Addresses newly held by self-preservation or kept by a wipe recovery.
    pub newly_held: Vec<String>,
    /// Held addresses whose record was written again (their hold ended).
    pub returned: Vec<String>,
    /// Records skipped as unusable.
    pub skipped: usize,
    /// Whether this update found the store wiped or replaced.
    pub wiped: bool,
    /// The sign it was seen by, for the log (empty unless [`Applied::wiped`]).
    pub wipe_sign: &'static str,
}

/// Holds released at one time (see [`AppView::release_due`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Released {
    /// Instances self-preservation held for its maximum time.
    pub held: Vec<String>,
    /// Instances a wipe recovery kept until its bound.
    pub kept: Vec<String>,
}

impl Released {
    /// Whether nothing was released.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty() && self.kept.is_empty()
    }
}

#[derive(Debug)]
struct Recovery {
    until: Instant,
    /// Instances the wiped store forgot that have not re-registered.
    kept: Instances,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct AppView {
    /// The registered instances by `{host}:{port}`, enabled or not.
    instances: Instances,
    protection: Protection,
    wipe_recovery: std::time::Duration,
    recovery: Option<Recovery>,
    /// The highest store revision a list was read at (`0`: none known).
    last_revision: i64,
    /// The registry's epoch as the last list read it.
    last_epoch: Option<String>,
    /// Whether the store has been listed since the view started.
    pub synced: bool,
}

impl AppView {
    pub fn new(options: ProtectionOptions) -> Self {
        AppView {
            instances: Instances::new(),
            wipe_recovery: options.wipe_recovery,
            protection: Protection::new(options),
            recovery: None,
            last_revision: 0,
            last_epoch: None,
            synced: false,
        }
    }

    /// Replaces the registered instances with a fresh list read at store `revision` (`0`:
    /// the backend has none) with the registry's `epoch` (after a list or a re-list).
    /// Instances missing from it are removals, those last seen accepting calls expiries,
    /// unless the list shows the registry was wiped or replaced (see the module docs): then
    /// they are kept until they re-register or the recovery bound passes.
    pub fn reset(
        &mut self,
        list: Instances,
        revision: i64,
        epoch: Option<&str>,
        now: Instant,
    ) -> Applied {
        let mut applied = Applied::default();
        let sign = self.wipe_sign(&list, revision, epoch);
        let wiped = self.synced && sign.is_some() && !self.wipe_recovery.is_zero();
        self.last_revision = if wiped {
            revision
        } else {
            self.last_revision.max(revision)
        };
        self.last_epoch = epoch.map(str::to_owned);
        let gone: Vec<String> = self
            .instances
            .keys()
            .filter(|a| !list.contains_key(*a))
            .cloned()
            .collect();
        let new_count = list.len();
        let old = std::mem::take(&mut self.instances);
        for (address, instance) in &list {
            self.returned(address, &mut applied);
            if old.get(address) != Some(instance) {
                applied.changed = true;
            }
        }
        self.instances = list;
        if wiped {
            applied.wiped = true;
            applied.wipe_sign = sign.unwrap_or_default();
            let recovery = self.recovery.get_or_insert_with(|| Recovery {
                until: now + self.wipe_recovery,
                kept: Instances::new(),
            });
            for address in gone {
                if let Some(previous) = old.get(&address).filter(|i| i.accepts_calls()) {
                    recovery.kept.insert(address.clone(), previous.clone());
                    applied.newly_held.push(address);
                }
            }
            if recovery.kept.is_empty() {
                self.recovery = None;
            }
            return applied;
        }
        for address in gone {
            applied.changed = true;
            if let Some(previous) = old.get(&address) {
                let held = self.removed(&address, previous.clone(), new_count, now);
                applied.newly_held.extend(held);
            }
        }
        applied
    }

    /// The sign by which a list read at `revision` with `epoch` shows the registry wiped or
    /// replaced since the last list, if it does.
    fn wipe_sign(
        &self,
        list: &Instances,
        revision: i64,
        epoch: Option<&str>,
    ) -> Option<&'static str> {
        if revision > 0 && revision < self.last_revision {
            return Some("its revision went backwards");
        }
        match (self.last_epoch.as_deref(), epoch) {
            (Some(before), Some(now)) if before != now => return Some("its epoch changed"),
            (Some(_), None) => return Some("its epoch disappeared"),
            _ => {}
        }
        let no_signal = revision == 0 && epoch.is_none() && self.last_epoch.is_none();
        let emptied = list.is_empty() && self.instances.values().any(|i| i.accepts_calls());
        (no_signal && emptied).then_some("a read without revision or epoch emptied the app")
    }

    /// Applies a batch of changes from a watch.
    pub fn apply(&mut self, changes: Vec<InstanceChange>, now: Instant) -> Applied {
        let mut applied = Applied::default();
        for change in changes {
            match change {
                InstanceChange::Upsert(instance) => {
                    let address = instance.address();
                    self.returned(&address, &mut applied);
                    self.instances.insert(address, instance);
                    applied.changed = true;
                }
                InstanceChange::Removed(address) => {
                    self.forget_kept(&address);
                    if let Some(previous) = self.instances.remove(&address) {
                        let remaining = self.instances.len();
                        let held = self.removed(&address, previous, remaining, now);
                        applied.newly_held.extend(held);
                        applied.changed = true;
                    }
                }
                InstanceChange::Skipped { address, reason } => {
                    // An unusable record counts as absent, like a removal.
                    tracing::warn!(%address, %reason, "instance record skipped");
                    applied.skipped += 1;
                    if let Some(previous) = self.instances.remove(&address) {
                        let remaining = self.instances.len();
                        let held = self.removed(&address, previous, remaining, now);
                        applied.newly_held.extend(held);
                        applied.changed = true;
                    }
                }
            }
        }
        applied
    }

    /// The record at `address` was written again: its hold, if any, ends.
    fn returned(&mut self, address: &str, applied: &mut Applied) {
        let kept = self.forget_kept(address);
        if self.protection.returned(address) || kept {
            applied.returned.push(address.to_owned());
        }
    }

    /// Drops `address` from a wipe recovery; returns whether it was kept.
    fn forget_kept(&mut self, address: &str) -> bool {
        let Some(recovery) = &mut self.recovery else {
            return false;
        };
        let kept = recovery.kept.remove(address).is_some();
        if recovery.kept.is_empty() {
            self.recovery = None;
        }
        kept
    }

    /// A record went away: an expiry when last seen accepting calls, a graceful removal
    /// otherwise (disabled, or marked as stopping).
    fn removed(
        &mut self,
        address: &str,
        previous: Arc<ServiceInstance>,
        remaining: usize,
        now: Instant,
    ) -> Vec<String> {
        if previous.accepts_calls() {
            self.protection.expired(address, previous, remaining, now)
        } else {
            Vec::new()
        }
    }

    /// Releases held instances whose maximum hold ended, and a wipe recovery whose bound
    /// passed.
    pub fn release_due(&mut self, now: Instant) -> Released {
        let held = self.protection.release_due(now);
        let kept = match self.recovery.take_if(|r| r.until <= now) {
            Some(recovery) => recovery.kept.into_keys().collect(),
            None => Vec::new(),
        };
        Released { held, kept }
    }

    /// When the next held instance, or the wipe recovery, is released.
    pub fn next_release(&self) -> Option<Instant> {
        let recovery = self.recovery.as_ref().map(|r| r.until);
        match (self.protection.next_release(), recovery) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether removals are held (by self-preservation or a wipe recovery).
    pub fn protection_active(&self) -> bool {
        self.protection.is_active() || self.recovery.is_some()
    }

    /// How many instances are held (by self-preservation or a wipe recovery).
    pub fn held_count(&self) -> usize {
        self.protection.held().count() + self.recovery.as_ref().map_or(0, |r| r.kept.len())
    }

    /// The instances to route to: registered and enabled, plus the held and kept ones.
    #[cfg(test)]
    pub fn routable(&self) -> impl Iterator<Item = &Arc<ServiceInstance>> {
        self.routable_entries().map(|(_, i)| i)
    }

    /// The instances to route to, with their addresses (`{host}:{port}`).
    pub fn routable_entries(&self) -> impl Iterator<Item = (&String, &Arc<ServiceInstance>)> {
        let kept = self.recovery.iter().flat_map(|r| r.kept.iter());
        self.instances
            .iter()
            .filter(|(_, i)| i.accepts_calls())
            .chain(
                self.protection
                    .held()
                    .filter(|(a, _)| !self.instances.contains_key(*a)),
            )
            .chain(kept.filter(|(a, _)| !self.instances.contains_key(*a)))
    }

    /// The instances to route to, as a map.
    pub fn routable_map(&self) -> Instances {
        self.routable_entries()
            .map(|(a, i)| (a.clone(), i.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::protection::DEFAULT_WIPE_RECOVERY;

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
        v.reset(list(20), 1, None, now);
        v.apply(vec![InstanceChange::Upsert(instance(1000, false))], now);
        assert_eq!(v.routable().count(), 19, "disabled leaves at once");
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert!(a.newly_held.is_empty());
        assert!(!v.protection_active());
        assert_eq!(v.routable().count(), 19);
    }

    #[test]
    fn a_reset_missing_most_instances_is_held() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(20), 1, None, now);
        let a = v.reset(list(2), 2, None, now);
        assert!(a.changed);
        assert_eq!(a.newly_held.len(), 18);
        assert_eq!(v.routable().count(), 20);
        // They come back with the next list.
        v.reset(list(20), 1, None, now);
        assert!(!v.protection_active());
        assert_eq!(v.routable().count(), 20);
    }

    #[test]
    fn an_equal_reset_changes_nothing() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(3), 1, None, now);
        assert!(!v.reset(list(3), 2, None, now).changed);
    }

    #[test]
    fn a_wiped_store_keeps_a_small_app_until_it_re_registers_or_the_bound() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(2), 40, None, now);
        v.synced = true;
        // The store restarted empty: a re-list at a lower revision finds nothing.
        let a = v.reset(Instances::new(), 1, None, now);
        assert!(a.wiped);
        assert_eq!(a.newly_held.len(), 2);
        assert_eq!(v.routable().count(), 2, "an app of 2 is not emptied");
        assert!(v.protection_active());
        // One re-registers; the other is kept.
        let one = list(1);
        let a = v.apply(
            vec![InstanceChange::Upsert(one["10.0.0.1:1000"].clone())],
            now,
        );
        assert_eq!(a.returned, ["10.0.0.1:1000"]);
        assert_eq!(v.routable().count(), 2);
        assert_eq!(v.next_release(), Some(now + DEFAULT_WIPE_RECOVERY));
        let released = v.release_due(now + DEFAULT_WIPE_RECOVERY);
        assert_eq!(released.kept, ["10.0.0.1:1001"]);
        assert_eq!(v.routable().count(), 1);
        assert!(!v.protection_active());
    }

    #[test]
    fn an_epoch_that_changes_or_disappears_is_a_wipe_whatever_the_revision() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(2), 40, Some("a"), now);
        v.synced = true;
        // Same epoch, higher revision, one gone: an ordinary removal.
        let a = v.reset(list(1), 50, Some("a"), now);
        assert!(!a.wiped);
        assert_eq!(v.routable().count(), 1);
        v.reset(list(2), 51, Some("a"), now);
        // A replaced registry whose revision went *up*: the epoch tells.
        let a = v.reset(Instances::new(), 90, Some("b"), now);
        assert!(a.wiped, "{a:?}");
        assert_eq!(a.wipe_sign, "its epoch changed");
        assert_eq!(v.routable().count(), 2);
        v.reset(list(2), 91, Some("b"), now);
        let a = v.reset(list(1), 95, None, now);
        assert!(a.wiped);
        assert_eq!(a.wipe_sign, "its epoch disappeared");
        assert_eq!(v.routable().count(), 2);
        // The epoch appearing (a first provider of this crate) is no wipe.
        let a = v.reset(list(2), 96, Some("c"), now);
        assert!(!a.wiped);
    }

    #[test]
    fn without_revision_or_epoch_a_read_that_empties_the_app_is_held() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(2), 0, None, now);
        v.synced = true;
        let a = v.reset(list(1), 0, None, now);
        assert!(!a.wiped, "a read that leaves instances is trusted");
        let a = v.reset(Instances::new(), 0, None, now);
        assert!(a.wiped);
        assert_eq!(v.routable().count(), 1);
        assert_eq!(v.next_release(), Some(now + DEFAULT_WIPE_RECOVERY));
        // An app whose instances all stopped gracefully empties at once.
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(2), 0, None, now);
        v.synced = true;
        let stopping: Vec<_> = list(2)
            .into_values()
            .map(|i| {
                let mut i = (*i).clone();
                i.mark_stopping();
                InstanceChange::Upsert(Arc::new(i))
            })
            .collect();
        v.apply(stopping, now);
        let a = v.reset(Instances::new(), 0, None, now);
        assert!(!a.wiped);
        assert_eq!(v.routable().count(), 0);
    }

    #[test]
    fn deletions_on_a_healthy_store_leave_at_once_whatever_the_app_size() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(list(2), 40, None, now);
        v.synced = true;
        let a = v.reset(list(1), 41, None, now);
        assert!(!a.wiped);
        assert_eq!(v.routable().count(), 1);
        v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert_eq!(v.routable().count(), 0);
        assert!(!v.protection_active());
    }
}
