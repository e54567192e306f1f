//! Java's `roundrobin`: smooth weighted round robin, one rotation per method.
//!
//! Each endpoint has a current weight. At every call each current grows by its endpoint's
//! weight, the largest is taken (the first on a tie) and lowered by the sum of the weights.
//! With weights [5, 1, 1] that calls a, a, b, a, c, a, a: every endpoint its share in each
//! cycle, spread out rather than in bursts; with equal weights, a strict rotation.
//!
//! As Java, the state is kept per method (Java keys by service and method; a channel is one
//! service) and per address; calls without a method share one rotation; an endpoint's
//! current restarts from 0 when its weight changes; and when the candidates no longer match
//! the state, entries not called for 60 s are dropped. Unlike Java the methods kept are
//! bounded ([`MAX_METHODS`]), the least recently called dropped first.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::Candidate;

/// How long an address's entry outlives its last call when the set has changed (Java's
/// `RECYCLE_PERIOD`).
pub(super) const RECYCLE_PERIOD: Duration = Duration::from_secs(60);

/// The most methods whose rotation a channel keeps (far more than a service has).
pub(super) const MAX_METHODS: usize = 1024;

/// A channel's round-robin state: one rotation per method.
#[derive(Debug, Default)]
pub(super) struct RoundRobin {
    /// The rotation of calls with no method.
    unnamed: Rotation,
    /// The rotation of each method called.
    methods: HashMap<Box<str>, Rotation>,
}

/// One method's rotation: the current weight of each address.
#[derive(Debug, Default)]
struct Rotation {
    /// Each address's entry.
    entries: HashMap<Box<str>, Entry>,
    /// When the method was last called (for [`MAX_METHODS`]).
    last_used: Option<Instant>,
}

/// One address's place in a rotation.
#[derive(Debug)]
struct Entry {
    /// The weight the current was grown by; a different one restarts it.
    weight: u32,
    /// The current weight.
    current: i64,
    /// The last call that considered it (for [`RECYCLE_PERIOD`]).
    last_update: Instant,
}

impl RoundRobin {
    /// The index of the endpoint `roundrobin` calls among `candidates` (non-empty) for a
    /// call of `method` at `now`.
    pub(super) fn select(
        &mut self,
        candidates: &[Candidate<'_>],
        method: Option<&str>,
        now: Instant,
    ) -> usize {
        let rotation = match method {
            None => &mut self.unnamed,
            Some(method) => {
                // Looked up by `&str` first: a method's name is copied only once.
                if !self.methods.contains_key(method) {
                    self.make_room();
                    self.methods.insert(method.into(), Rotation::default());
                }
                let Some(rotation) = self.methods.get_mut(method) else {
                    return 0;
                };
                rotation
            }
        };
        rotation.select(candidates, now)
    }

    /// Drops the least recently called method if [`MAX_METHODS`] are kept.
    fn make_room(&mut self) {
        if self.methods.len() < MAX_METHODS {
            return;
        }
        let oldest = self
            .methods
            .iter()
            .min_by_key(|(_, rotation)| rotation.last_used)
            .map(|(method, _)| method.clone());
        if let Some(oldest) = oldest {
            self.methods.remove(&oldest);
        }
    }
}

impl Rotation {
    /// One step of the rotation over `candidates` at `now`.
    fn select(&mut self, candidates: &[Candidate<'_>], now: Instant) -> usize {
        self.last_used = Some(now);
        let mut total = 0i64;
        let mut chosen: Option<(usize, i64)> = None;
        for (i, c) in candidates.iter().enumerate() {
            if !self.entries.contains_key(c.address) {
                let entry = Entry {
                    weight: c.weight,
                    current: 0,
                    last_update: now,
                };
                self.entries.insert(c.address.into(), entry);
            }
            let Some(entry) = self.entries.get_mut(c.address) else {
                continue;
            };
            if entry.weight != c.weight {
                entry.weight = c.weight;
                entry.current = 0;
            }
            entry.current += i64::from(c.weight);
            entry.last_update = now;
            if chosen.is_none_or(|(_, max)| entry.current > max) {
                chosen = Some((i, entry.current));
            }
            total += i64::from(c.weight);
        }
        if candidates.len() != self.entries.len() {
            self.entries
                .retain(|_, e| now.saturating_duration_since(e.last_update) <= RECYCLE_PERIOD);
        }
        let Some((chosen, _)) = chosen else {
            return 0;
        };
        if let Some(entry) = self.entries.get_mut(candidates[chosen].address) {
            entry.current -= total;
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::idle;
    use super::*;

    /// `picks` calls of `method` over `candidates` at `now`, as letters a, b, c, ...
    fn order(
        rr: &mut RoundRobin,
        candidates: &[Candidate<'_>],
        method: Option<&str>,
        now: Instant,
        picks: usize,
    ) -> String {
        (0..picks)
            .map(|_| char::from(b'a' + rr.select(candidates, method, now) as u8))
            .collect()
    }

    /// `picks` calls of `method` by a new round robin over idle endpoints of `weights`.
    fn fresh_order(weights: &[u32], method: Option<&str>, picks: usize) -> String {
        let mut rr = RoundRobin::default();
        order(&mut rr, &idle(weights), method, Instant::now(), picks)
    }

    #[test]
    fn equal_weights_rotate_strictly() {
        assert_eq!(fresh_order(&[1, 1, 1, 1], None, 12), "abcdabcdabcd");
        let picks = fresh_order(&[100; 4], Some("SayHello"), 400);
        for window in picks.as_bytes().windows(4) {
            let mut seen = window.to_vec();
            seen.sort_unstable();
            assert_eq!(
                seen, b"abcd",
                "each once in every 4 consecutive picks: {picks}"
            );
        }
    }

    #[test]
    fn javas_smooth_order() {
        assert_eq!(fresh_order(&[5, 1, 1], None, 14), "aabacaaaabacaa");
        assert_eq!(
            fresh_order(&[3, 2, 0], None, 10),
            "ababaababa",
            "weight 0 idle"
        );
    }

    #[test]
    fn each_method_has_its_own_rotation() {
        let candidates = idle(&[1, 1, 1]);
        let mut rr = RoundRobin::default();
        let now = Instant::now();
        assert_eq!(order(&mut rr, &candidates, Some("A"), now, 2), "ab");
        assert_eq!(order(&mut rr, &candidates, Some("B"), now, 1), "a");
        assert_eq!(order(&mut rr, &candidates, None, now, 1), "a");
        assert_eq!(order(&mut rr, &candidates, Some("A"), now, 1), "c");
        assert_eq!(order(&mut rr, &candidates, None, now, 2), "bc");
    }

    #[test]
    fn a_weight_change_restarts_that_entry() {
        let now = Instant::now();
        let mut rr = RoundRobin::default();
        // [1, 1] for three calls: a b a, currents then a -1, b 1.
        assert_eq!(order(&mut rr, &idle(&[1, 1]), None, now, 3), "aba");
        // b goes to weight 3 (its current restarts from 0), a stays at -1: b b a b.
        assert_eq!(order(&mut rr, &idle(&[1, 3]), None, now, 4), "bbab");
    }

    #[test]
    fn idle_entries_are_recycled_after_sixty_seconds() {
        let t0 = Instant::now();
        let mut rr = RoundRobin::default();
        let three = idle(&[1, 1, 1]);
        assert_eq!(order(&mut rr, &three, None, t0, 1), "a");
        // c leaves; while the set differs from the state, entries idle over 60 s go.
        let two = &three[..2];
        assert_eq!(order(&mut rr, two, None, t0 + RECYCLE_PERIOD, 1), "b");
        assert_eq!(rr.unnamed.entries.len(), 3, "c called 60 s ago: kept");
        let later = t0 + RECYCLE_PERIOD + Duration::from_millis(1);
        assert_eq!(order(&mut rr, two, None, later, 1), "b");
        assert_eq!(rr.unnamed.entries.len(), 2, "c idle over 60 s: recycled");
        assert!(!rr.unnamed.entries.contains_key(three[2].address));
        // c returns with a fresh entry (current 0) and takes its share at once.
        assert_eq!(order(&mut rr, &three, None, later, 6), "acbacb");
    }

    #[test]
    fn methods_kept_are_bounded() {
        let candidates = idle(&[1, 1]);
        let mut rr = RoundRobin::default();
        let t0 = Instant::now();
        for i in 0..MAX_METHODS + 10 {
            let at = t0 + Duration::from_millis(i as u64);
            rr.select(&candidates, Some(&format!("M{i}")), at);
        }
        assert_eq!(rr.methods.len(), MAX_METHODS);
        assert!(
            !rr.methods.contains_key("M0"),
            "the least recently called went"
        );
        assert!(
            rr.methods
                .contains_key(format!("M{}", MAX_METHODS + 9).as_str())
        );
    }
}
