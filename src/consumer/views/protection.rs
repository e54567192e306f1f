//! Self-preservation: holding mass expiries of one app's instances.
//!
//! A network partition between providers and the store looks, from the store, exactly like
//! a mass crash: leases stop being renewed and the instance records expire. Stripping the
//! cluster then would send all traffic to the few instances left (or to none), while the
//! providers are in fact alive and reachable by consumers. So when more than a share of an
//! app's known instances vanish by expiry within a window, those removals are held: the
//! instances stay in the endpoint set. A held instance is released when it returns (its
//! record is written again) or after a maximum hold.
//!
//! What counts as an expiry is the caller's decision: the deletion of a record last seen
//! `enabled: true`. Graceful removals (the provider writes `enabled: false` first, see
//! [`crate::Provider::shutdown`]) never reach this module. Apps with fewer known instances
//! than a minimum are exempt.
//!
//! The share is checked at each expiry over the expiries of the window, so the expiries
//! before the crossing (applied at the time) are held again retroactively when the share is
//! crossed. That is right for a partition, whose expiries spread over the instances' lease
//! phases, and wrong for a process that really died just before: so every held instance,
//! retroactive or not, is *suspect* to consumer-side health, set aside in balanced channels
//! until a probe (at once, then at the probe interval) answers. The registry view holds
//! it; calls go to it only when it is alive.
//!
//! Pure: events and [`Instant`]s in, decisions out, no I/O.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Instances;
use crate::model::ServiceInstance;

/// How self-preservation behaves. Every part has a default (see each setter, and read it
/// with the `get_` method of the same name).
#[derive(Clone, Debug, PartialEq)]
pub struct ProtectionOptions {
    pub(crate) enabled: bool,
    pub(crate) threshold: f64,
    pub(crate) window: Duration,
    pub(crate) max_hold: Duration,
    pub(crate) min_instances: usize,
    pub(crate) wipe_recovery: Duration,
}

impl Default for ProtectionOptions {
    fn default() -> Self {
        ProtectionOptions {
            enabled: true,
            threshold: 0.5,
            window: Duration::from_secs(15),
            max_hold: Duration::from_secs(5 * 60),
            min_instances: 5,
            wipe_recovery: Duration::from_secs(30),
        }
    }
}

impl ProtectionOptions {
    /// Never holds mass expiries (the recovery after a store wipe is set apart, with
    /// [`ProtectionOptions::wipe_recovery`]).
    pub fn disabled() -> Self {
        ProtectionOptions {
            enabled: false,
            ..Default::default()
        }
    }

    /// Sets the share of an app's known instances (clamped to `0.0..=1.0`) that must
    /// expire within the window, strictly more than it, to hold the removals (default 0.5:
    /// more than half; NaN keeps the default).
    ///
    /// The literature ranges from 15–20% (Eureka's renewal threshold of 85%) to 85%. A low
    /// threshold holds real crashes of a few instances; a consumer then keeps routing to dead
    /// instances until their hold ends (consumer-side health sets them aside meanwhile). Half
    /// is far above what crashes and deploys remove at once (deploys are graceful and never
    /// count) and far below what a partition between a zone and the store removes.
    pub fn threshold(mut self, share: f64) -> Self {
        self.threshold = if share.is_nan() {
            ProtectionOptions::default().threshold
        } else {
            share.clamp(0.0, 1.0)
        };
        self
    }

    /// The share of expiries that holds them, in effect (see
    /// [`threshold`](Self::threshold)).
    pub fn get_threshold(&self) -> f64 {
        self.threshold
    }

    /// Whether mass expiries are held at all (see [`disabled`](Self::disabled)).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    crate::setters::option_accessors! {
        /// Sets the window over which expiries are counted (default 15 s: longer than the
        /// default lease TTL, 10 s, so that the expiries of one partition, spread over the
        /// keep-alive phases of the instances, fall into one window).
        window / get_window => window: Duration;

        /// Sets the longest an expired instance is held (default 5 minutes: enough to ride out a
        /// store failover or a short partition, short enough that a real mass crash is
        /// eventually applied).
        max_hold / get_max_hold => max_hold: Duration;

        /// Sets how long, after a re-list found the registry wiped or replaced (its epoch changed
        /// or went, its revision went backwards, or, on a backend with neither, the app was
        /// found empty), each app keeps the instances that have not re-registered (default
        /// 30 s, three lease TTLs of the default 10 s, time enough for a provider whose keep-alive
        /// finds its lease gone to register again; zero turns this protection off). It applies to
        /// apps of every size. It must cover the backend's re-registration: on ZooKeeper at
        /// least 1.5× the providers' session timeout.
        wipe_recovery / get_wipe_recovery => wipe_recovery: Duration;

        /// Sets the minimum number of known instances for protection to apply; smaller apps
        /// are exempt (default 5: losing 2 of 3 instances is as likely a crash as a partition).
        min_instances / get_min_instances => min_instances: usize;
    }
}

#[derive(Clone, Debug)]
struct Expiry {
    at: Instant,
    address: String,
    instance: Arc<ServiceInstance>,
}

#[derive(Clone, Debug)]
struct Held {
    instance: Arc<ServiceInstance>,
    until: Instant,
}

/// The self-preservation state of one app. See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Protection {
    options: ProtectionOptions,
    /// Expiries within the window, oldest first.
    recent: VecDeque<Expiry>,
    /// Held instances by `{host}:{port}`.
    held: BTreeMap<String, Held>,
}

impl Protection {
    /// No expiries seen, nothing held.
    pub fn new(options: ProtectionOptions) -> Self {
        Protection {
            options,
            recent: VecDeque::new(),
            held: BTreeMap::new(),
        }
    }

    /// An instance last seen enabled vanished at `now` (lease expiry or crash); `remaining`
    /// instances of the app are still registered. Returns the addresses that became held
    /// (this one and, when the share was just crossed, the window's earlier expiries).
    pub fn expired(
        &mut self,
        address: &str,
        instance: Arc<ServiceInstance>,
        remaining: usize,
        now: Instant,
    ) -> Vec<String> {
        if !self.options.enabled {
            return Vec::new();
        }
        self.prune(now);
        self.recent.retain(|e| e.address != address);
        self.recent.push_back(Expiry {
            at: now,
            address: address.to_owned(),
            instance,
        });
        let held_before_window = self
            .held
            .keys()
            .filter(|a| !self.recent.iter().any(|e| &e.address == *a))
            .count();
        let known = remaining + held_before_window + self.recent.len();
        if known < self.options.min_instances
            || self.recent.len() as f64 <= self.options.threshold * known as f64
        {
            return Vec::new();
        }
        let mut newly = Vec::new();
        for e in &self.recent {
            if !self.held.contains_key(&e.address) {
                self.held.insert(
                    e.address.clone(),
                    Held {
                        instance: e.instance.clone(),
                        until: e.at + self.options.max_hold,
                    },
                );
                newly.push(e.address.clone());
            }
        }
        newly
    }

    /// The instance at `address` is registered again. Returns whether it was held.
    pub fn returned(&mut self, address: &str) -> bool {
        self.recent.retain(|e| e.address != address);
        self.held.remove(address).is_some()
    }

    /// Every instance of `present` is registered again, as [`Self::returned`] for each, in
    /// one pass over what is recent and held (a reset lists the whole app). Returns the
    /// addresses that were held.
    pub fn returned_all(&mut self, present: &Instances) -> Vec<String> {
        self.recent.retain(|e| !present.contains_key(&e.address));
        let mut returned = Vec::new();
        self.held.retain(|address, _| {
            let back = present.contains_key(address);
            if back {
                returned.push(address.clone());
            }
            !back
        });
        returned
    }

    /// Releases the instances held for the maximum time at `now`; returns their addresses.
    pub fn release_due(&mut self, now: Instant) -> Vec<String> {
        self.prune(now);
        let due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(a, _)| a.clone())
            .collect();
        for address in &due {
            self.held.remove(address);
            self.recent.retain(|e| &e.address != address);
        }
        due
    }

    /// When the next held instance is due for release.
    pub fn next_release(&self) -> Option<Instant> {
        self.held.values().map(|h| h.until).min()
    }

    /// Whether any removal is held.
    pub fn is_active(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether the instance at `address` is held.
    #[cfg(test)]
    pub fn is_held(&self, address: &str) -> bool {
        self.held.contains_key(address)
    }

    /// The held instance at `address`, if it is held.
    pub fn held_instance(&self, address: &str) -> Option<&Arc<ServiceInstance>> {
        self.held.get(address).map(|h| &h.instance)
    }

    /// The held instances by `{host}:{port}`.
    pub fn held(&self) -> impl Iterator<Item = (&String, &Arc<ServiceInstance>)> {
        self.held.iter().map(|(a, h)| (a, &h.instance))
    }

    /// The held instances by `{host}:{port}`, with when each hold ends.
    pub fn held_until(&self) -> impl Iterator<Item = (&String, &Arc<ServiceInstance>, Instant)> {
        self.held.iter().map(|(a, h)| (a, &h.instance, h.until))
    }

    fn prune(&mut self, now: Instant) {
        while self
            .recent
            .front()
            .is_some_and(|e| e.at + self.options.window <= now)
        {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(i: usize) -> (String, Arc<ServiceInstance>) {
        let instance = ServiceInstance::new("shop", "10.0.0.1", 1000 + i as u16);
        (instance.key_address(), Arc::new(instance))
    }

    /// Expires `count` of `total` instances one by one at `now`; returns how many are held.
    fn expire(p: &mut Protection, total: usize, count: usize, now: Instant) -> usize {
        let mut held = 0;
        for i in 0..count {
            let (address, instance) = instance(i);
            held += p.expired(&address, instance, total - i - 1, now).len();
        }
        held
    }

    #[test]
    fn one_expiry_of_twenty_is_applied() {
        let mut p = Protection::new(ProtectionOptions::default());
        assert_eq!(expire(&mut p, 20, 1, Instant::now()), 0);
        assert!(!p.is_active());
    }

    #[test]
    fn mass_expiry_is_held_including_earlier_expiries_of_the_window() {
        let now = Instant::now();
        let mut p = Protection::new(ProtectionOptions::default());
        assert_eq!(expire(&mut p, 20, 18, now), 18);
        assert!(p.is_active());
        assert_eq!(p.held().count(), 18);
        assert_eq!(
            p.next_release(),
            Some(now + ProtectionOptions::default().max_hold)
        );
    }

    #[test]
    fn held_instances_are_released_on_return_or_after_the_max_hold() {
        let now = Instant::now();
        let mut p = Protection::new(ProtectionOptions::default());
        expire(&mut p, 20, 18, now);
        let (address, _) = instance(3);
        assert!(p.returned(&address));
        assert!(!p.is_held(&address));
        assert!(
            p.release_due(now + ProtectionOptions::default().max_hold / 2)
                .is_empty()
        );
        assert_eq!(
            p.release_due(now + ProtectionOptions::default().max_hold)
                .len(),
            17
        );
        assert!(!p.is_active());
    }

    #[test]
    fn expiries_spread_beyond_the_window_are_applied() {
        let mut now = Instant::now();
        let mut p = Protection::new(ProtectionOptions::default());
        let mut remaining = 20;
        for i in 0..15 {
            let (address, inst) = instance(i);
            remaining -= 1;
            assert!(
                p.expired(&address, inst, remaining, now).is_empty(),
                "expiry {i}"
            );
            now += ProtectionOptions::default().window;
        }
    }

    #[test]
    fn small_apps_are_exempt_and_disabled_never_holds() {
        let now = Instant::now();
        let mut p = Protection::new(ProtectionOptions::default());
        assert_eq!(expire(&mut p, 4, 4, now), 0);
        let mut off = Protection::new(ProtectionOptions::disabled());
        assert_eq!(expire(&mut off, 20, 20, now), 0);
    }

    #[test]
    fn threshold_is_strictly_more_than_the_share() {
        let now = Instant::now();
        let opts = ProtectionOptions::default().threshold(0.5);
        let mut p = Protection::new(opts.clone());
        assert_eq!(expire(&mut p, 20, 10, now), 0, "exactly half is applied");
        let mut p = Protection::new(opts);
        assert_eq!(expire(&mut p, 20, 11, now), 11, "more than half is held");
        assert_eq!(
            ProtectionOptions::default().threshold(f64::NAN).threshold,
            ProtectionOptions::default().threshold
        );
        assert_eq!(ProtectionOptions::default().threshold(7.0).threshold, 1.0);
    }
}
