//! The health of endpoints by [`Authority`]: failures counted, outliers judged, addresses
//! ejected and probed, holds kept as suspects. Pure: events and instants in, decisions out.
//!
//! An address is ejected for one [`EjectionReason`]: it cannot be reached (refused, hung,
//! failing every call, held by self-preservation) or it is an outlier (a failure rate over
//! its last calls). A method can also be slow at one address alone, which ejects the address
//! for that method only. Every entry may name the instance it belongs to (the authority of
//! the instance's record), so that what happens to an instance reaches every endpoint of
//! it: its hold sets them aside, its disappearance forgets them (after a grace), and its
//! registration again probes them at once.
//!
//! An ejected address comes back when a probe proves an answer, after an interval that
//! grows with each ejection soon after the last (one more probe interval each, up to the
//! maximum); a slow method comes back on trial after the same wait, judged afresh.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::ejection::{EjectionReason, Standing};
use super::options::HealthOptions;
use super::outlier::{FailureWindow, Latency, SlowEjection, is_slow, lower_median, rate_ejects};
use crate::model::Authority;

/// How long a set-aside address that is no endpoint any more stays set aside (unprobed)
/// before it is forgotten: longer than a subscription and its channels take to drop it.
pub(super) const FORGET_GRACE: Duration = Duration::from_secs(10);

/// How long after a readmission a new ejection counts as "soon after", and backs off.
const BACKOFF_MEMORY: Duration = Duration::from_secs(300);

/// Methods kept per address (a bound on what callers' paths can grow).
const MAX_METHODS: usize = 64;

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

/// Why and since when an address is ejected.
#[derive(Clone, Debug, PartialEq)]
struct Ejected {
    reason: EjectionReason,
    since: Instant,
}

#[derive(Clone, Debug, Default)]
struct State {
    /// Consecutive failures.
    failures: u32,
    ejected: Option<Ejected>,
    /// The instance the address belongs to, once known.
    instance: Option<Authority>,
    /// Since when its instance is no endpoint any more (it stays set aside, unprobed, for
    /// [`FORGET_GRACE`], so that channels still holding it do not call it meanwhile).
    gone_since: Option<Instant>,
    next_probe: Option<Instant>,
    probing: bool,
    /// Its last calls, failed or not.
    rate: FailureWindow,
    /// Per method, how fast it answered lately.
    latencies: Vec<Latency>,
    /// Ejections soon after one another, for the backoff.
    ejections: u32,
    /// When it last came back.
    readmitted: Option<Instant>,
    /// When the last liveness check of a waiting call started, and whether it runs.
    checked: Option<Instant>,
    checking: bool,
}

impl State {
    fn is_ejected(&self) -> bool {
        self.ejected.is_some()
    }

    fn is_suspect(&self) -> bool {
        matches!(
            self.ejected,
            Some(Ejected {
                reason: EjectionReason::Held,
                ..
            })
        )
    }

    fn latency(&mut self, path: &str, now: Instant) -> &mut Latency {
        let found = self.latencies.iter().position(|l| &*l.path == path);
        let i = found.unwrap_or_else(|| {
            if self.latencies.len() >= MAX_METHODS {
                self.latencies.clear();
            }
            self.latencies.push(Latency::new(path, now));
            self.latencies.len() - 1
        });
        &mut self.latencies[i]
    }
}

/// See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct HealthTracker {
    options: HealthOptions,
    by_address: HashMap<Authority, State>,
    /// When each method's latencies are judged next (a list: a service has few methods,
    /// and a search beats hashing the path on every call).
    judged: Vec<(Box<str>, Instant)>,
}

impl HealthTracker {
    /// Nothing reported yet.
    pub fn new(options: HealthOptions) -> Self {
        HealthTracker {
            options,
            by_address: HashMap::new(),
            judged: Vec::new(),
        }
    }

    /// Records one call's outcome for `address`, an endpoint of `instance`, at `now`, with
    /// the method's path and its time to an answer when it got one. Returns whether that
    /// changed whether `address` (or one of its methods) is ejected.
    pub fn record(
        &mut self,
        address: &Authority,
        instance: &Authority,
        outcome: Outcome,
        answered: Option<(&str, Duration)>,
        now: Instant,
    ) -> bool {
        if !self.options.enabled {
            return false;
        }
        let window = self.options.window;
        let state = match self.by_address.get_mut(address) {
            Some(state) => state,
            None => self.by_address.entry(address.clone()).or_default(),
        };
        if state.instance.is_none() {
            state.instance = Some(instance.clone());
        }
        state.gone_since = None;
        let failed = outcome != Outcome::Success;
        state.rate.record(failed, window, now);
        if !failed {
            state.failures = 0;
            let mut changed = false;
            // An answer proves a refused, hung or failing address reachable again; a
            // failure rate is not undone by one success.
            if state
                .ejected
                .as_ref()
                .is_some_and(|e| e.reason.undone_by_an_answer())
            {
                readmit(state, now);
                changed = true;
            }
            if let Some((path, elapsed)) = answered {
                state.latency(path, now).record(elapsed, now);
                changed |= self.judge_latency(path, now);
            }
            return changed;
        }
        state.failures = state.failures.saturating_add(1);
        let threshold = match outcome {
            Outcome::Refused if self.options.refused_at_once => 1,
            _ => self.options.failure_threshold,
        };
        let reason = if state.failures >= threshold {
            if outcome == Outcome::Refused && threshold == 1 {
                EjectionReason::Refused
            } else {
                EjectionReason::Failing {
                    consecutive: state.failures,
                }
            }
        } else {
            let counts = state.rate.counts(window, now);
            let options = &self.options;
            if !rate_ejects(counts, options.failure_rate, options.failure_rate_min_calls) {
                return false;
            }
            EjectionReason::FailureRate {
                failures: counts.failures,
                calls: counts.calls,
            }
        };
        match &mut state.ejected {
            // A suspect or an outlier that fails calls no answer would undo (panic mode or
            // the cap routed to it) cannot be reached: it says so, and is capped no more.
            Some(e)
                if (e.reason == EjectionReason::Held || !e.reason.is_unreachable())
                    && reason.is_unreachable() =>
            {
                e.reason = reason;
                true
            }
            Some(_) => false,
            None => {
                eject(state, reason, now, &self.options);
                true
            }
        }
    }

    /// Judges the latencies of `path` across addresses, when due; returns whether an
    /// address was ejected for it.
    fn judge_latency(&mut self, path: &str, now: Instant) -> bool {
        let options = &self.options;
        let next = now + judge_interval(options);
        match self.judged.iter_mut().find(|(p, _)| &**p == path) {
            Some((_, at)) if *at > now => return false,
            Some((_, at)) => *at = next,
            None => {
                if self.judged.len() >= MAX_METHODS {
                    self.judged.clear();
                }
                self.judged.push((path.into(), next));
            }
        }
        let (min, window) = (options.latency_min_calls, options.window);
        let mut recent: Vec<f64> = self
            .by_address
            .values()
            .filter(|s| !s.is_ejected())
            .flat_map(|s| s.latencies.iter())
            .filter(|l| &*l.path == path && l.judgeable(min, window, now))
            .map(Latency::recent_us)
            .collect();
        let Some(median) = lower_median(&mut recent) else {
            return false;
        };
        let mut ejected = false;
        for state in self.by_address.values_mut().filter(|s| !s.is_ejected()) {
            let wait = backoff(state, now, options);
            let Some(latency) = state.latencies.iter_mut().find(|l| &*l.path == path) else {
                continue;
            };
            if latency.judgeable(min, window, now)
                && is_slow(
                    latency.recent_us(),
                    median,
                    options.latency_multiple,
                    options.latency_floor,
                )
            {
                latency.ejected = Some(SlowEjection {
                    since: now,
                    until: now + wait,
                    latency: latency.recent(),
                    median: Duration::from_secs_f64(median / 1e6),
                });
                state.ejections = state.ejections.saturating_add(1);
                ejected = true;
            }
        }
        ejected
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
        let newly = !state.is_ejected();
        if newly {
            state.ejected = Some(Ejected {
                reason: EjectionReason::Held,
                since: now,
            });
        }
        if !state.probing {
            state.next_probe = Some(now);
        }
        newly
    }

    /// A call to `address` has waited past the bound, or lost its connection: whether to
    /// check it is alive now (not while one check runs, nor within the bound of the last
    /// one, nor when it is ejected already). Marks the check as started.
    pub fn check_alive(&mut self, address: &Authority, now: Instant) -> bool {
        let Some(after) = self.options.hung_after.filter(|_| self.options.enabled) else {
            return false;
        };
        let state = self.by_address.entry(address.clone()).or_default();
        let recent = state.checked.is_some_and(|at| now < at + after);
        if state.checking || recent || state.is_ejected() {
            return false;
        }
        state.checking = true;
        state.checked = Some(now);
        true
    }

    /// The liveness check of `address` finished at `now`; returns whether it ejected it
    /// (no answer) for `reason` ([`EjectionReason::Hung`] or [`EjectionReason::Lost`]).
    pub fn checked(
        &mut self,
        address: &Authority,
        answered: bool,
        reason: EjectionReason,
        now: Instant,
    ) -> bool {
        let Some(state) = self.by_address.get_mut(address) else {
            return false;
        };
        state.checking = false;
        if answered || state.is_ejected() {
            return false;
        }
        eject(state, reason, now, &self.options);
        true
    }

    /// Whether `address` is ejected for not answering a liveness check (hung or lost): no
    /// answer will come to the calls waiting on it.
    pub fn is_hung(&self, address: &Authority) -> bool {
        self.by_address.get(address).is_some_and(|s| {
            matches!(
                s.ejected,
                Some(Ejected {
                    reason: EjectionReason::Hung | EjectionReason::Lost,
                    ..
                })
            )
        })
    }

    /// `instance`'s record was written (again): its set-aside addresses are no longer
    /// gone and are probed at once, so one that answers rejoins within a probe.
    ///
    /// An outlier that never left keeps its wait: a registry re-listing its record (a
    /// session that reconnected, say) proves nothing of its failure rate.
    pub fn registered(&mut self, instance: &Authority, now: Instant) {
        for (address, state) in &mut self.by_address {
            let of_instance = address == instance || state.instance.as_ref() == Some(instance);
            let Some(ejected) = state.ejected.as_ref().filter(|_| of_instance) else {
                continue;
            };
            let came_back = state.gone_since.take().is_some();
            if (came_back || ejected.reason.is_unreachable()) && !state.probing {
                state.next_probe = Some(now);
            }
        }
    }

    /// `instance` is no endpoint any more at `now`: its addresses are forgotten at once when
    /// they are not set aside, else after a grace, unprobed meanwhile. Also forgets the
    /// addresses whose grace ended. Returns whether a set-aside address was forgotten.
    pub fn forget(&mut self, instance: &Authority, now: Instant) -> bool {
        self.by_address.retain(|address, state| {
            let of_instance = address == instance || state.instance.as_ref() == Some(instance);
            if of_instance && state.is_ejected() {
                state.gone_since.get_or_insert(now);
            }
            !of_instance || state.is_ejected()
        });
        self.sweep(now)
    }

    /// Forgets the set-aside addresses whose grace ended at `now`, and brings slow methods
    /// back on trial when their wait is over; returns whether there was one.
    pub fn sweep(&mut self, now: Instant) -> bool {
        let before = self.by_address.len();
        self.by_address
            .retain(|_, s| s.gone_since.is_none_or(|t| now < t + FORGET_GRACE));
        let mut changed = self.by_address.len() != before;
        for state in self.by_address.values_mut() {
            for latency in &mut state.latencies {
                if latency.ejected.is_some_and(|e| e.until <= now) {
                    latency.ejected = None;
                    latency.clear();
                    state.readmitted = Some(now);
                    changed = true;
                }
            }
        }
        changed
    }

    /// The set-aside addresses due for a probe at `now`; they are marked as being probed.
    pub fn due_probes(&mut self, now: Instant) -> Vec<Authority> {
        let mut due = Vec::new();
        for (address, state) in &mut self.by_address {
            if state.is_ejected()
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
        let Some(state) = self.by_address.get_mut(address) else {
            return false;
        };
        state.probing = false;
        if answered {
            let was = state.is_ejected();
            readmit(state, now);
            return was;
        }
        state.next_probe = Some(now + self.options.probe_interval);
        false
    }

    /// When something is next due: a probe, the end of a forget grace, a slow method's
    /// trial.
    pub fn next_due(&self) -> Option<Instant> {
        self.by_address
            .values()
            .filter_map(|s| {
                let own = match s.gone_since {
                    Some(gone) => Some(gone + FORGET_GRACE),
                    None if s.is_ejected() && !s.probing => s.next_probe,
                    None => None,
                };
                let slow = s
                    .latencies
                    .iter()
                    .filter_map(|l| l.ejected)
                    .map(|e| e.until);
                own.into_iter().chain(slow).min()
            })
            .min()
    }

    /// Whether `address` is set aside (ejected, or suspect until a probe answers).
    pub fn is_set_aside(&self, address: &Authority) -> bool {
        self.by_address.get(address).is_some_and(State::is_ejected)
    }

    /// Whether an endpoint at `address` of `instance` may take no call: its address is set
    /// aside, or its instance is held and has not answered a probe yet.
    pub fn is_endpoint_aside(&self, address: &Authority, instance: &Authority) -> bool {
        self.is_set_aside(address) || self.by_address.get(instance).is_some_and(State::is_suspect)
    }

    /// Where an endpoint at `address` of `instance` stands: in, out (unreachable or held),
    /// an outlier (capped), or slow at some methods (capped, per method).
    pub fn standing(&self, address: &Authority, instance: &Authority) -> Standing {
        if self.by_address.get(instance).is_some_and(State::is_suspect) && address != instance {
            return Standing::Out;
        }
        let Some(state) = self.by_address.get(address) else {
            return Standing::In;
        };
        match &state.ejected {
            Some(e) if e.reason.is_unreachable() => return Standing::Out,
            Some(e) => return Standing::Outlier(e.since),
            None => {}
        }
        let slow: Vec<(Box<str>, Instant)> = state
            .latencies
            .iter()
            .filter_map(|l| l.ejected.map(|e| (l.path.clone(), e.since)))
            .collect();
        if slow.is_empty() {
            Standing::In
        } else {
            Standing::Slow(Arc::from(slow))
        }
    }

    /// What is ejected at `now`: per address (and method, when slow), why, since when,
    /// and when it is tried again.
    pub fn ejections(&self, now: Instant) -> Vec<super::ejection::Ejection> {
        use super::ejection::Ejection;
        let mut out = Vec::new();
        for (address, state) in &self.by_address {
            if let Some(e) = &state.ejected {
                out.push(Ejection {
                    address: address.to_string(),
                    method: None,
                    reason: e.reason.clone(),
                    ejected_for: now.saturating_duration_since(e.since),
                    next_try_in: state
                        .next_probe
                        .filter(|_| state.gone_since.is_none())
                        .map(|t| t.saturating_duration_since(now)),
                });
            }
            for latency in &state.latencies {
                if let Some(slow) = latency.ejected {
                    out.push(Ejection {
                        address: address.to_string(),
                        method: Some(latency.path.to_string()),
                        reason: EjectionReason::Slow {
                            latency: slow.latency,
                            median: slow.median,
                        },
                        ejected_for: now.saturating_duration_since(slow.since),
                        next_try_in: Some(slow.until.saturating_duration_since(now)),
                    });
                }
            }
        }
        out.sort_by(|a, b| (&a.address, &a.method).cmp(&(&b.address, &b.method)));
        out
    }

    /// How many addresses are set aside.
    pub fn set_aside_count(&self) -> usize {
        self.by_address.values().filter(|s| s.is_ejected()).count()
    }
}

/// How often a method's latencies are judged: often enough to eject within a second or
/// two, rarely enough that judging costs nothing per call.
fn judge_interval(options: &HealthOptions) -> Duration {
    (options.window / 40).clamp(Duration::from_millis(10), Duration::from_millis(250))
}

/// How long an ejection of `state` at `now` lasts before it is tried again: one probe
/// interval per ejection soon after the last, up to the maximum.
fn backoff(state: &mut State, now: Instant, options: &HealthOptions) -> Duration {
    if state
        .readmitted
        .is_some_and(|at| now.saturating_duration_since(at) > BACKOFF_MEMORY)
    {
        state.ejections = 0;
    }
    let times = state.ejections.saturating_add(1);
    (options.probe_interval * times)
        .min(options.max_probe_interval)
        .max(options.probe_interval.min(options.max_probe_interval))
}

/// Ejects `state` at `now` for `reason`; its probe is due after its backoff.
fn eject(state: &mut State, reason: EjectionReason, now: Instant, options: &HealthOptions) {
    let wait = backoff(state, now, options);
    state.ejections = state.ejections.saturating_add(1);
    state.ejected = Some(Ejected { reason, since: now });
    state.next_probe = Some(now + wait);
}

/// Brings `state` back at `now`, judged afresh.
fn readmit(state: &mut State, now: Instant) {
    if state.ejected.take().is_some() {
        state.readmitted = Some(now);
    }
    state.failures = 0;
    state.rate.clear();
    state.next_probe = None;
    state.checking = false;
    for latency in &mut state.latencies {
        latency.clear();
    }
}

#[cfg(test)]
mod tests;
