//! The health of endpoints by [`Authority`]: failures counted, addresses set aside and
//! probed, holds kept as suspects. Pure: events and instants in, decisions out.
//!
//! Every entry may name the instance it belongs to (the authority of the instance's record),
//! so that what happens to an instance reaches every endpoint of it: its hold sets them
//! aside, its disappearance forgets them (after a grace), and its registration again probes
//! them at once.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::options::HealthOptions;
use crate::model::Authority;

/// How long a set-aside address that is no endpoint any more stays set aside (unprobed)
/// before it is forgotten: longer than a subscription and its channels take to drop it.
pub(super) const FORGET_GRACE: Duration = Duration::from_secs(10);

/// The outcome of one call, as health sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The call got an answer (any status but UNAVAILABLE or DEADLINE_EXCEEDED).
    Success,
    /// A transport error, UNAVAILABLE or DEADLINE_EXCEEDED.
    Failure,
    /// The connection was refused: nothing listens at the address.
    Refused,
}

#[derive(Clone, Debug, Default)]
struct State {
    failures: u32,
    set_aside: bool,
    /// Set aside as suspect (its instance is held by self-preservation), not for failed
    /// calls.
    suspect: bool,
    /// The instance the address belongs to, once known.
    instance: Option<Authority>,
    /// Since when its instance is no endpoint any more (it stays set aside, unprobed, for
    /// [`FORGET_GRACE`], so that channels still holding it do not call it meanwhile).
    gone_since: Option<Instant>,
    next_probe: Option<Instant>,
    probing: bool,
}

/// See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct HealthTracker {
    options: HealthOptions,
    by_address: HashMap<Authority, State>,
}

impl HealthTracker {
    /// Nothing reported yet.
    pub fn new(options: HealthOptions) -> Self {
        HealthTracker {
            options,
            by_address: HashMap::new(),
        }
    }

    /// Records one call's outcome for `address`, an endpoint of `instance`, at `now`.
    /// Returns whether that changed whether `address` is set aside.
    pub fn record(
        &mut self,
        address: &Authority,
        instance: &Authority,
        outcome: Outcome,
        now: Instant,
    ) -> bool {
        if outcome == Outcome::Success {
            return self
                .by_address
                .remove(address)
                .is_some_and(|state| state.set_aside);
        }
        if !self.options.enabled {
            return false;
        }
        let threshold = match outcome {
            Outcome::Refused if self.options.refused_at_once => 1,
            _ => self.options.failure_threshold,
        };
        let state = self.by_address.entry(address.clone()).or_default();
        state.instance.get_or_insert_with(|| instance.clone());
        state.failures = state.failures.saturating_add(1);
        state.gone_since = None;
        if state.suspect && state.failures >= threshold {
            // A suspect that fails calls (panic mode routed to it) is failing.
            state.suspect = false;
            return true;
        }
        if !state.set_aside && state.failures >= threshold {
            state.set_aside = true;
            state.next_probe = Some(now + self.options.probe_interval);
            return true;
        }
        false
    }

    /// `instance` is held by self-preservation: its record's address is set aside as
    /// suspect, with every endpoint of it, until a probe (due at once) answers. Returns
    /// whether it was not set aside before.
    pub fn suspect(&mut self, instance: &Authority, now: Instant) -> bool {
        if !self.options.enabled {
            return false;
        }
        let state = self.by_address.entry(instance.clone()).or_default();
        state.instance = Some(instance.clone());
        state.gone_since = None;
        let newly = !state.set_aside;
        if newly {
            state.set_aside = true;
            state.suspect = true;
        }
        if !state.probing {
            state.next_probe = Some(now);
        }
        newly
    }

    /// `instance`'s record was written (again): its set-aside addresses are no longer
    /// gone and are probed at once, so one that answers rejoins within a probe.
    pub fn registered(&mut self, instance: &Authority, now: Instant) {
        for (address, state) in &mut self.by_address {
            let of_instance = address == instance || state.instance.as_ref() == Some(instance);
            if of_instance && state.set_aside {
                state.gone_since = None;
                if !state.probing {
                    state.next_probe = Some(now);
                }
            }
        }
    }

    /// `instance` is no endpoint any more at `now`: its addresses are forgotten at once when
    /// they are not set aside, else after a grace, unprobed meanwhile. Also forgets the
    /// addresses whose grace ended. Returns whether a set-aside address was forgotten.
    pub fn forget(&mut self, instance: &Authority, now: Instant) -> bool {
        self.by_address.retain(|address, state| {
            let of_instance = address == instance || state.instance.as_ref() == Some(instance);
            if of_instance && state.set_aside {
                state.gone_since.get_or_insert(now);
            }
            !of_instance || state.set_aside
        });
        self.sweep(now)
    }

    /// Forgets the set-aside addresses whose grace ended at `now`; returns whether there
    /// was one.
    pub fn sweep(&mut self, now: Instant) -> bool {
        let before = self.by_address.len();
        self.by_address
            .retain(|_, s| s.gone_since.is_none_or(|t| now < t + FORGET_GRACE));
        self.by_address.len() != before
    }

    /// The set-aside addresses due for a probe at `now`; they are marked as being probed.
    pub fn due_probes(&mut self, now: Instant) -> Vec<Authority> {
        let mut due = Vec::new();
        for (address, state) in &mut self.by_address {
            if state.set_aside
                && !state.probing
                && state.gone_since.is_none()
                && state.next_probe.is_some_and(|t| t <= now)
            {
                state.probing = true;
                due.push(address.clone());
            }
        }
        due
    }

    /// A probe of `address` finished at `now`. Returns whether it brought it back.
    pub fn probed(&mut self, address: &Authority, answered: bool, now: Instant) -> bool {
        if answered {
            return self
                .by_address
                .remove(address)
                .is_some_and(|state| state.set_aside);
        }
        if let Some(state) = self.by_address.get_mut(address) {
            state.probing = false;
            state.next_probe = Some(now + self.options.probe_interval);
        }
        false
    }

    /// When something is next due: a probe, or the end of a forget grace.
    pub fn next_due(&self) -> Option<Instant> {
        self.by_address
            .values()
            .filter_map(|s| match s.gone_since {
                Some(gone) => Some(gone + FORGET_GRACE),
                None if s.set_aside && !s.probing => s.next_probe,
                None => None,
            })
            .min()
    }

    /// Whether `address` is set aside (failing, or suspect until a probe answers).
    pub fn is_set_aside(&self, address: &Authority) -> bool {
        self.by_address.get(address).is_some_and(|s| s.set_aside)
    }

    /// Whether an endpoint at `address` of `instance` may take no call: its address is set
    /// aside, or its instance is held and has not answered a probe yet.
    pub fn is_endpoint_aside(&self, address: &Authority, instance: &Authority) -> bool {
        self.is_set_aside(address)
            || self
                .by_address
                .get(instance)
                .is_some_and(|s| s.set_aside && s.suspect)
    }

    /// How many addresses are set aside.
    pub fn set_aside_count(&self) -> usize {
        self.by_address.values().filter(|s| s.set_aside).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a() -> Authority {
        Authority::new("10.0.0.1", 50051)
    }

    fn failure(h: &mut HealthTracker, address: &Authority, now: Instant) -> bool {
        h.record(address, address, Outcome::Failure, now)
    }

    #[test]
    fn consecutive_failures_set_aside_and_a_success_resets() {
        let now = Instant::now();
        let a = a();
        let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(3));
        assert!(!failure(&mut h, &a, now));
        assert!(!failure(&mut h, &a, now));
        assert!(!h.record(&a, &a, Outcome::Success, now), "not aside yet");
        assert!(!failure(&mut h, &a, now));
        assert!(!failure(&mut h, &a, now));
        assert!(failure(&mut h, &a, now), "third consecutive failure");
        assert!(h.is_set_aside(&a));
        assert!(!failure(&mut h, &a, now), "already aside");
    }

    #[test]
    fn set_aside_endpoints_are_probed_until_they_answer() {
        let now = Instant::now();
        let a = a();
        let interval = Duration::from_secs(5);
        let mut h = HealthTracker::new(
            HealthOptions::default()
                .failure_threshold(1)
                .probe_interval(interval),
        );
        failure(&mut h, &a, now);
        assert_eq!(h.next_due(), Some(now + interval));
        assert!(h.due_probes(now).is_empty());
        assert_eq!(h.due_probes(now + interval), vec![a.clone()]);
        assert!(
            h.due_probes(now + interval).is_empty(),
            "one probe at a time"
        );
        assert!(!h.probed(&a, false, now + interval));
        assert_eq!(h.next_due(), Some(now + interval * 2));
        assert_eq!(h.due_probes(now + interval * 2).len(), 1);
        assert!(h.probed(&a, true, now + interval * 2));
        assert!(!h.is_set_aside(&a));
        assert_eq!(h.next_due(), None);
    }

    #[test]
    fn a_refused_connection_sets_aside_at_once_unless_told_otherwise() {
        let now = Instant::now();
        let a = a();
        let mut h = HealthTracker::new(HealthOptions::default());
        assert!(h.record(&a, &a, Outcome::Refused, now));
        assert!(h.is_set_aside(&a));
        assert!(
            h.record(&a, &a, Outcome::Success, now),
            "a success brings it back"
        );
        let mut h = HealthTracker::new(HealthOptions::default().refused_at_once(false));
        assert!(!h.record(&a, &a, Outcome::Refused, now));
        assert!(!h.is_set_aside(&a));
    }

    #[test]
    fn a_held_instance_sets_aside_every_endpoint_of_it_until_a_probe_answers() {
        let now = Instant::now();
        let instance = Authority::new("::1", 7000);
        let service = Authority::new("::1", 7001);
        let mut h = HealthTracker::new(HealthOptions::default());
        assert!(h.suspect(&instance, now));
        assert!(h.is_endpoint_aside(&instance, &instance));
        assert!(
            h.is_endpoint_aside(&service, &instance),
            "the service port too"
        );
        assert!(!h.is_set_aside(&service), "its own address is not failing");
        assert!(!h.suspect(&instance, now), "already aside");
        assert_eq!(h.due_probes(now), vec![instance.clone()]);
        assert!(!h.probed(&instance, false, now));
        assert!(
            h.is_endpoint_aside(&service, &instance),
            "a refusing one stays aside"
        );
        assert!(h.probed(&instance, true, now + DEFAULT_INTERVAL));
        assert!(!h.is_endpoint_aside(&service, &instance));
        assert_eq!(h.set_aside_count(), 0);
    }

    const DEFAULT_INTERVAL: Duration = HealthOptions::DEFAULT_PROBE_INTERVAL;

    #[test]
    fn forgetting_an_instance_reaches_every_endpoint_of_it_after_the_grace() {
        let now = Instant::now();
        let instance = Authority::new("::1", 7000);
        let service = Authority::new("::1", 7001);
        let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(1));
        h.record(&service, &instance, Outcome::Failure, now);
        h.suspect(&instance, now);
        assert_eq!(h.set_aside_count(), 2);
        assert!(!h.forget(&instance, now), "kept aside for a grace");
        assert_eq!(h.set_aside_count(), 2);
        assert!(
            h.due_probes(now + DEFAULT_INTERVAL).is_empty(),
            "gone: unprobed"
        );
        assert_eq!(h.next_due(), Some(now + FORGET_GRACE));
        assert!(h.sweep(now + FORGET_GRACE));
        assert_eq!(h.set_aside_count(), 0, "nothing left to probe");
        assert_eq!(h.next_due(), None);
    }

    #[test]
    fn an_instance_that_left_aside_and_registers_again_is_probed_at_once() {
        let now = Instant::now();
        let instance = Authority::new("10.0.0.1", 7000);
        let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(1));
        h.record(&instance, &instance, Outcome::Failure, now);
        h.forget(&instance, now);
        assert!(h.due_probes(now + DEFAULT_INTERVAL).is_empty());
        let back = now + Duration::from_secs(3);
        h.registered(&instance, back);
        assert_eq!(h.next_due(), Some(back));
        assert_eq!(h.due_probes(back), vec![instance.clone()]);
        assert!(h.probed(&instance, true, back));
        assert!(!h.is_set_aside(&instance));
    }

    #[test]
    fn disabled_never_sets_aside() {
        let a = a();
        let mut h = HealthTracker::new(HealthOptions::disabled());
        for _ in 0..100 {
            assert!(!failure(&mut h, &a, Instant::now()));
        }
        assert!(!h.suspect(&a, Instant::now()));
    }
}
