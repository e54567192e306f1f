//! One app's instances as the resolver's shared view of the app holds them: what the
//! registry says, updated as a reset (after a list) or as upserts and removals (from a
//! watch), with self-preservation deciding which removals are held and the recovery after
//! a registry wipe keeping what a wiped registry forgot. Pure: no I/O.
//!
//! A wipe is seen on a re-list, by whichever signal the backend gives: the registry's
//! epoch changed or disappeared; or its revision went backwards; or, where the backend has
//! neither, the re-list found the app empty while it had instances. The instances the
//! re-list misses are then kept, in apps of any size, until they re-register or the
//! recovery bound ([`super::ProtectionOptions::wipe_recovery`]) passes. Graceful stops and
//! deletions on a healthy registry are not affected: they leave at once.
//!
//! The same bound keeps an app from being emptied by expiries: when a read or a batch of
//! changes removes, other than by a graceful stop, the last instances of an app that took
//! calls, those are kept (probed, as held instances are) until they re-register or the
//! bound passes. A registry that restarts on its own data (a Nacos restart, whose pushes
//! come back empty before the providers re-register, with no other sign) then never
//! publishes an app empty, however small; a single provider that really crashed costs the
//! bound in a set that could not take calls anyway.

use std::sync::Arc;

use tokio::time::Instant;

use super::protection::{Protection, ProtectionOptions};
use super::snapshot::{Hold, HoldCause};
use crate::backend::{InstanceChange, InstanceList, Instances};
use crate::model::ServiceInstance;

/// What applying an update did to the holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Instances newly held by self-preservation or kept by a wipe recovery.
    pub newly_held: Vec<Arc<ServiceInstance>>,
    /// Held instances whose record was written again (their hold ended), as written now.
    pub returned: Vec<Arc<ServiceInstance>>,
    /// Records skipped as unusable.
    pub skipped: usize,
    /// Whether this update found the registry wiped or replaced.
    pub wiped: bool,
    /// The sign it was seen by, for the log (empty unless [`Applied::wiped`]).
    pub wipe_sign: &'static str,
    /// Whether this update would have emptied the app by expiries, and its last instances
    /// are kept for the recovery bound instead.
    pub emptied: bool,
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
    /// Instances the wiped registry forgot that have not re-registered.
    kept: Instances,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct AppView {
    /// The registered instances by `{host}:{port}`, enabled or not. Shared with the
    /// routable set published when that is all of them (see [`AppView::routable_map`]):
    /// copied on the first change after.
    instances: Arc<Instances>,
    protection: Protection,
    wipe_recovery: std::time::Duration,
    recovery: Option<Recovery>,
    /// The highest registry revision a list was read at (0: none seen).
    last_revision: i64,
    /// The epoch the last list read.
    last_epoch: Option<String>,
    /// Whether the registry has been listed since the view started.
    synced: bool,
}

impl AppView {
    pub fn new(options: ProtectionOptions) -> Self {
        AppView {
            instances: Arc::default(),
            wipe_recovery: options.wipe_recovery,
            protection: Protection::new(options),
            recovery: None,
            last_revision: 0,
            last_epoch: None,
            synced: false,
        }
    }

    /// Takes `instances`, a subscription's snapshot of the app, as the last known set while
    /// the registry has not been listed: a first list that misses them then counts as
    /// their expiry, so an empty one (a registry restarted on no data, before its
    /// providers register again) keeps them for the recovery bound instead of emptying an
    /// app that took calls from the snapshot. Ignored once the view has listed.
    pub fn seed(&mut self, instances: Instances) {
        if !self.synced && self.instances.is_empty() {
            self.instances = Arc::new(instances);
        }
    }

    /// The highest registry revision a list was read at since the last wipe (`0`: none).
    pub fn last_revision(&self) -> i64 {
        self.last_revision
    }

    /// Whether the registry has been listed since the view started.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The sign by which a fresh `list` shows the registry wiped or replaced since the last
    /// one, if it does. A revision of `0` is unknown and never compared.
    fn wipe_sign(&self, list: &InstanceList) -> Option<&'static str> {
        if !self.synced || self.wipe_recovery.is_zero() {
            return None;
        }
        if list.revision > 0 && list.revision < self.last_revision {
            return Some("its revision went backwards");
        }
        match (&self.last_epoch, &list.epoch) {
            (Some(before), Some(now)) if before != now => Some("its epoch changed"),
            (Some(_), None) => Some("its epoch disappeared"),
            _ => None,
        }
    }

    /// Replaces the registered instances with a fresh list (after a list or a re-list).
    /// Instances missing from it are removals, those last seen enabled expiries, unless the
    /// list shows a wiped registry: then they are kept until they re-register or the
    /// recovery bound passes.
    pub fn reset(&mut self, list: InstanceList, now: Instant) -> Applied {
        let mut applied = Applied {
            skipped: list.skipped.len(),
            ..Applied::default()
        };
        let sign = self.wipe_sign(&list);
        let wiped = sign.is_some();
        self.last_revision = if wiped {
            list.revision
        } else {
            self.last_revision.max(list.revision)
        };
        self.last_epoch = list.epoch;
        self.synced = true;
        let took_calls = self.routable_entries().next().is_some();
        let old = std::mem::replace(&mut self.instances, Arc::new(list.instances));
        let gone: Vec<(String, Arc<ServiceInstance>)> = old
            .iter()
            .filter(|(address, _)| !self.instances.contains_key(*address))
            .map(|(address, instance)| (address.clone(), instance.clone()))
            .collect();
        self.returned_all(&mut applied);
        if let Some(sign) = sign {
            applied.wiped = true;
            applied.wipe_sign = sign;
            let recovery = self.recovery.get_or_insert_with(|| Recovery {
                until: now + self.wipe_recovery,
                kept: Instances::new(),
            });
            for (address, previous) in gone.into_iter().filter(|(_, i)| i.accepts_calls()) {
                recovery.kept.insert(address, previous.clone());
                applied.newly_held.push(previous);
            }
            if recovery.kept.is_empty() {
                self.recovery = None;
            }
            return applied;
        }
        let remaining = self.instances.len();
        let mut expired = Vec::new();
        for (address, previous) in gone {
            let held = self.removed(&address, previous.clone(), remaining, now);
            if held.is_empty() && previous.accepts_calls() {
                expired.push((address, previous));
            }
            applied.newly_held.extend(held);
        }
        self.keep_if_emptied(took_calls, expired, now, &mut applied);
        applied
    }

    /// Applies a batch of changes from a watch.
    pub fn apply(&mut self, changes: Vec<InstanceChange>, now: Instant) -> Applied {
        let mut applied = Applied::default();
        let took_calls = self.routable_entries().next().is_some();
        let mut expired = Vec::new();
        for change in changes {
            let gone = match change {
                InstanceChange::Upsert(instance) => {
                    self.returned(instance.clone(), &mut applied);
                    Arc::make_mut(&mut self.instances).insert(instance.key_address(), instance);
                    continue;
                }
                InstanceChange::Removed(address) => {
                    self.forget_kept(&address);
                    address
                }
                InstanceChange::Skipped { address, reason } => {
                    // An unusable record counts as absent, like a removal.
                    tracing::warn!(%address, %reason, "instance record skipped");
                    applied.skipped += 1;
                    address
                }
            };
            // Copied (when shared with a published set) only if there is something to remove.
            let present = self.instances.contains_key(&gone);
            let removed = present.then(|| Arc::make_mut(&mut self.instances).remove(&gone));
            if let Some(previous) = removed.flatten() {
                let remaining = self.instances.len();
                let held = self.removed(&gone, previous.clone(), remaining, now);
                if held.is_empty() && previous.accepts_calls() {
                    expired.push((gone, previous));
                }
                applied.newly_held.extend(held);
            }
        }
        expired.retain(|(address, _)| !self.instances.contains_key(address));
        self.keep_if_emptied(took_calls, expired, now, &mut applied);
        applied
    }

    /// Keeps `expired` (instances that took calls and went, unheld) for the recovery bound
    /// when the app took calls before the update and would take none after it.
    fn keep_if_emptied(
        &mut self,
        took_calls: bool,
        expired: Vec<(String, Arc<ServiceInstance>)>,
        now: Instant,
        applied: &mut Applied,
    ) {
        if !took_calls
            || expired.is_empty()
            || self.wipe_recovery.is_zero()
            || self.routable_entries().next().is_some()
        {
            return;
        }
        applied.emptied = true;
        let recovery = self.recovery.get_or_insert_with(|| Recovery {
            until: now + self.wipe_recovery,
            kept: Instances::new(),
        });
        for (address, previous) in expired {
            recovery.kept.insert(address, previous.clone());
            applied.newly_held.push(previous);
        }
    }

    /// `instance`'s record was written again: its hold, if any, ends.
    fn returned(&mut self, instance: Arc<ServiceInstance>, applied: &mut Applied) {
        let address = instance.key_address();
        let kept = self.forget_kept(&address);
        if self.protection.returned(&address) || kept {
            applied.returned.push(instance);
        }
    }

    /// Every registered record was written again (a reset): the holds and wipe-recovery
    /// keeps of those addresses end, in one pass over what is held and kept.
    fn returned_all(&mut self, applied: &mut Applied) {
        let mut back = self.protection.returned_all(&self.instances);
        if let Some(recovery) = &mut self.recovery {
            recovery.kept.retain(|address, _| {
                let kept = self.instances.contains_key(address);
                if kept {
                    back.push(address.clone());
                }
                !kept
            });
            if recovery.kept.is_empty() {
                self.recovery = None;
            }
        }
        back.sort_unstable();
        back.dedup();
        applied
            .returned
            .extend(back.iter().map(|address| self.instances[address].clone()));
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
    /// otherwise (disabled, or marked as stopping). Returns the instances that became held.
    fn removed(
        &mut self,
        address: &str,
        previous: Arc<ServiceInstance>,
        remaining: usize,
        now: Instant,
    ) -> Vec<Arc<ServiceInstance>> {
        if !previous.accepts_calls() {
            return Vec::new();
        }
        let held = self.protection.expired(address, previous, remaining, now);
        held.iter()
            .filter_map(|a| self.protection.held_instance(a).cloned())
            .collect()
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

    /// Every registered instance by `{host}:{port}`, enabled or not (held and kept ones,
    /// whose records are gone, are not among them: see [`AppView::holds`]).
    pub fn registered(&self) -> &Instances {
        &self.instances
    }

    /// The instances routed to though their records are gone, with when each hold ends and
    /// why it holds, by address.
    pub fn holds(&self) -> Vec<Hold> {
        let held = self
            .protection
            .held_until()
            .filter(|(a, _, _)| !self.instances.contains_key(*a))
            .map(|(address, instance, until)| Hold {
                address: address.clone(),
                instance: instance.clone(),
                until,
                cause: HoldCause::SelfPreservation,
            });
        let kept = self.recovery.iter().flat_map(|r| {
            r.kept
                .iter()
                .filter(|(a, _)| !self.instances.contains_key(*a))
                .map(|(address, instance)| Hold {
                    address: address.clone(),
                    instance: instance.clone(),
                    until: r.until,
                    cause: HoldCause::Recovery,
                })
        });
        held.chain(kept).collect()
    }

    /// The instances to route to, with their addresses (`{host}:{port}`): registered and
    /// accepting calls (enabled, not stopping), plus the held and kept ones.
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

    /// The instances to route to, as a map: the registered ones themselves, shared, when
    /// they are all routable and nothing is held or kept (a cold list's case, where a copy
    /// would cost a string per instance).
    pub fn routable_map(&self) -> Arc<Instances> {
        let nothing_added = self.protection.held().next().is_none()
            && self.recovery.as_ref().is_none_or(|r| r.kept.is_empty());
        if nothing_added && self.instances.values().all(|i| i.accepts_calls()) {
            return Arc::clone(&self.instances);
        }
        let routable = self.routable_entries().map(|(a, i)| (a.clone(), i.clone()));
        Arc::new(routable.collect())
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

    fn instances(n: u16) -> Instances {
        (0..n)
            .map(|p| {
                let i = instance(1000 + p, true);
                (i.key_address(), i)
            })
            .collect()
    }

    fn list(n: u16, revision: i64, epoch: Option<&str>) -> InstanceList {
        InstanceList {
            instances: instances(n),
            revision,
            epoch: epoch.map(str::to_owned),
            ..InstanceList::default()
        }
    }

    /// A view under the default protection that read `first` at `now`.
    fn listed(first: InstanceList, now: Instant) -> AppView {
        let mut v = AppView::new(ProtectionOptions::default());
        v.reset(first, now);
        v
    }

    fn routable(v: &AppView) -> usize {
        v.routable_entries().count()
    }

    #[test]
    fn graceful_removal_is_never_held_and_disabled_leaves_at_once() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default().min_instances(1).threshold(0.0));
        v.reset(list(20, 1, None), now);
        v.apply(vec![InstanceChange::Upsert(instance(1000, false))], now);
        assert_eq!(routable(&v), 19, "disabled leaves at once");
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert!(a.newly_held.is_empty());
        assert!(!v.protection_active());
        assert_eq!(routable(&v), 19);
    }

    #[test]
    fn a_reset_missing_most_instances_is_held() {
        let now = Instant::now();
        let mut v = listed(list(20, 1, None), now);
        let a = v.reset(list(2, 2, None), now);
        assert_eq!(a.newly_held.len(), 18);
        assert_eq!(routable(&v), 20);
        // They come back with the next list.
        let a = v.reset(list(20, 3, None), now);
        assert_eq!(a.returned.len(), 18);
        assert!(!v.protection_active());
        assert_eq!(routable(&v), 20);
    }

    #[test]
    fn a_wiped_store_keeps_a_small_app_until_it_re_registers_or_the_bound() {
        let now = Instant::now();
        let mut v = listed(list(2, 40, Some("e1")), now);
        // The store restarted empty: a re-list at a lower revision finds nothing.
        let a = v.reset(list(0, 1, None), now);
        assert!(a.wiped);
        assert_eq!(a.newly_held.len(), 2);
        assert_eq!(routable(&v), 2, "an app of 2 is not emptied");
        assert!(v.protection_active());
        // One re-registers; the other is kept.
        let one = instances(1);
        let a = v.apply(
            vec![InstanceChange::Upsert(one["10.0.0.1:1000"].clone())],
            now,
        );
        assert_eq!(a.returned, [one["10.0.0.1:1000"].clone()]);
        assert_eq!(routable(&v), 2);
        assert_eq!(
            v.next_release(),
            Some(now + ProtectionOptions::default().wipe_recovery)
        );
        let released = v.release_due(now + ProtectionOptions::default().wipe_recovery);
        assert_eq!(released.kept, ["10.0.0.1:1001"]);
        assert_eq!(routable(&v), 1);
        assert!(!v.protection_active());
    }

    #[test]
    fn a_changed_or_vanished_epoch_is_a_wipe_whatever_the_revision() {
        let now = Instant::now();
        for epoch in [None, Some("e2")] {
            let mut v = listed(list(2, 5, Some("e1")), now);
            // The registry came back with a higher revision (providers re-registered
            // before the re-list), but its epoch is not the one seen.
            let a = v.reset(list(1, 9, epoch), now);
            assert!(a.wiped, "epoch {epoch:?}");
            assert_eq!(routable(&v), 2);
        }
        // An epoch that appears where there was none is no wipe.
        let mut v = listed(list(2, 5, None), now);
        assert!(!v.reset(list(1, 6, Some("e1")), now).wiped);
        assert_eq!(routable(&v), 1);
    }

    #[test]
    fn an_app_is_never_emptied_by_expiries_before_the_bound() {
        let now = Instant::now();
        let mut v = listed(list(2, 0, None), now);
        let a = v.reset(list(1, 0, None), now);
        assert!(!a.emptied, "a read that leaves some is a plain removal");
        assert_eq!(routable(&v), 1);
        let a = v.reset(list(0, 0, None), now);
        assert!(a.emptied && !a.wiped, "a read that empties the app is held");
        assert_eq!(a.newly_held.len(), 1);
        assert_eq!(routable(&v), 1);
        v.release_due(now + ProtectionOptions::default().wipe_recovery);
        assert_eq!(routable(&v), 0);
        // The same for a batch of changes (a push that lost the last instances), which a
        // new record of the instance ends.
        v.reset(list(2, 0, Some("e1")), now);
        let gone = vec![
            InstanceChange::Removed("10.0.0.1:1000".into()),
            InstanceChange::Removed("10.0.0.1:1001".into()),
        ];
        let a = v.apply(gone, now);
        assert!(a.emptied);
        assert_eq!(routable(&v), 2);
        let back = instances(1)["10.0.0.1:1000"].clone();
        v.apply(vec![InstanceChange::Upsert(back)], now);
        assert_eq!(routable(&v), 2, "one back, the other still kept");
        // A graceful stop of the last instance empties it at once.
        let mut v = listed(list(1, 0, None), now);
        let mut stopping = (*instance(1000, true)).clone();
        stopping.mark_stopping();
        v.apply(vec![InstanceChange::Upsert(Arc::new(stopping))], now);
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert!(!a.emptied);
        assert_eq!(routable(&v), 0);
    }

    #[test]
    fn a_snapshot_seed_is_kept_when_the_first_list_is_empty() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default());
        v.seed(instances(2));
        assert!(!v.is_synced(), "a seed is not a list");
        let a = v.reset(list(0, 0, None), now);
        assert!(a.emptied, "an empty first list keeps the seeded set");
        assert_eq!(routable(&v), 2);
        assert!(v.registered().is_empty(), "kept, not registered");
        let a = v.reset(list(2, 0, None), now);
        assert_eq!(a.returned.len(), 2, "both registered again");
        assert!(!v.protection_active());
        // Without a seed the same empty first list empties nothing and keeps nothing.
        let mut cold = AppView::new(ProtectionOptions::default());
        assert!(!cold.reset(list(0, 0, None), now).emptied);
        assert_eq!(routable(&cold), 0);
        // Once listed, a seed changes nothing.
        cold.seed(instances(3));
        assert_eq!(routable(&cold), 0);
        // The seeded set that never comes back leaves at the bound.
        let mut v = AppView::new(ProtectionOptions::default());
        v.seed(instances(1));
        v.reset(list(0, 0, None), now);
        v.release_due(now + ProtectionOptions::default().wipe_recovery);
        assert_eq!(routable(&v), 0);
    }

    #[test]
    fn a_stopping_record_leaves_at_once_and_its_removal_is_never_held() {
        let now = Instant::now();
        let mut v = AppView::new(ProtectionOptions::default().min_instances(1).threshold(0.0));
        v.reset(list(3, 1, Some("e1")), now);
        let mut stopping = (*instance(1000, true)).clone();
        stopping.mark_stopping();
        v.apply(vec![InstanceChange::Upsert(Arc::new(stopping))], now);
        assert_eq!(routable(&v), 2, "a stopping instance takes no new call");
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert!(a.newly_held.is_empty(), "a graceful stop, not an expiry");
    }

    #[test]
    fn deletions_on_a_healthy_store_leave_at_once_but_the_last_waits_the_bound() {
        let now = Instant::now();
        let mut v = listed(list(2, 40, Some("e1")), now);
        let a = v.reset(list(1, 41, Some("e1")), now);
        assert!(!a.wiped && !a.emptied);
        assert_eq!(routable(&v), 1);
        let a = v.apply(vec![InstanceChange::Removed("10.0.0.1:1000".into())], now);
        assert!(a.emptied, "the last one is kept");
        assert_eq!(routable(&v), 1);
        v.release_due(now + ProtectionOptions::default().wipe_recovery);
        assert_eq!(routable(&v), 0);
        assert!(!v.protection_active());
    }
}
