//! A move between discovery levels that a migration rule asks for, applied as Dubbo Java
//! 3.3's `MigrationInvoker` applies it. Pure: no I/O, the caller says when the level is
//! read and what each level holds.
//!
//! | the rule's new step | applied |
//! |---|---|
//! | `APPLICATION_FIRST` | at once |
//! | `FORCE_APPLICATION`, `FORCE_INTERFACE` with `force: true` | at once, whatever the target level holds |
//! | `FORCE_APPLICATION`, `FORCE_INTERFACE` otherwise | after `delay` seconds (if any) and once the target level is read, only if it has an endpoint and the other level has none or at most `target / other >= threshold` (default 0.0); otherwise not at all: the subscription keeps its step, as Java keeps its invoker ("compare failed, will not change state") |
//!
//! So an operator's rule that would move a consumer to a level with no provider yet leaves
//! its calls where they are, unless the rule says `force: true`. A move that was refused
//! is tried again only when the rule changes, as in Java.

use std::time::Duration;

use tokio::time::Instant;

use crate::governance::migration::{MigrationSettings, MigrationStep};

/// A checked move waiting for its target level. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PendingMove {
    /// The step the rule asks for.
    pub step: MigrationStep,
    /// The smallest share of the other level's endpoints the target must hold.
    threshold: f32,
    /// Not decided before this (the rule's `delay`).
    not_before: Instant,
}

/// What a pending move comes to once decided.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Decision {
    /// The subscription moves to the step.
    Apply,
    /// The subscription keeps its step; why.
    Refuse(String),
}

impl PendingMove {
    /// The move from `current` to `step` with the rule's `settings`: `None` when it applies
    /// at once (no check: see the module docs), else the move to decide.
    pub fn of(
        current: MigrationStep,
        step: MigrationStep,
        settings: &MigrationSettings,
        now: Instant,
    ) -> Option<PendingMove> {
        let checked = step != current
            && step != MigrationStep::ApplicationFirst
            && !settings.force.unwrap_or(false);
        let delay = settings
            .delay
            .and_then(|d| u64::try_from(d).ok())
            .map_or(Duration::ZERO, Duration::from_secs);
        checked.then(|| PendingMove {
            step,
            // Java: a threshold below 0 (or none) is the default, 0.0.
            threshold: settings.threshold.filter(|t| *t >= 0.0).unwrap_or(0.0),
            not_before: now + delay,
        })
    }

    /// When the move may be decided (its delay passed).
    pub fn not_before(&self) -> Instant {
        self.not_before
    }

    /// Decides the move from what the target level and the other level hold now
    /// (endpoints for the subscription), as Java's `DefaultMigrationAddressComparator`.
    pub fn decide(&self, target: usize, other: usize) -> Decision {
        let level = |step: MigrationStep| match step {
            MigrationStep::ForceInterface => "interface",
            _ => "application",
        };
        if target == 0 {
            return Decision::Refuse(format!(
                "the {} level has no endpoint (a rule with `force: true` moves anyway)",
                level(self.step)
            ));
        }
        if other == 0 {
            return Decision::Apply;
        }
        #[allow(clippy::cast_precision_loss)] // endpoint counts, far below 2^24
        let share = target as f32 / other as f32;
        if share >= self.threshold {
            Decision::Apply
        } else {
            Decision::Refuse(format!(
                "the {} level has {target} endpoint(s) for {other} on the other: {share:.2} is \
                 below the rule's threshold {}",
                level(self.step),
                self.threshold
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        force: Option<bool>,
        threshold: Option<f32>,
        delay: Option<i32>,
    ) -> MigrationSettings {
        MigrationSettings {
            step: None,
            threshold,
            proportion: None,
            delay,
            force,
        }
    }

    #[test]
    fn application_first_and_forced_moves_apply_at_once() {
        let now = Instant::now();
        let plain = settings(None, None, None);
        use MigrationStep::{ApplicationFirst, ForceApplication, ForceInterface};
        assert_eq!(
            PendingMove::of(ForceInterface, ApplicationFirst, &plain, now),
            None
        );
        assert_eq!(
            PendingMove::of(ForceInterface, ForceInterface, &plain, now),
            None
        );
        let forced = settings(Some(true), None, None);
        assert_eq!(
            PendingMove::of(ForceApplication, ForceInterface, &forced, now),
            None
        );
        let pending = PendingMove::of(ApplicationFirst, ForceApplication, &plain, now).unwrap();
        assert_eq!(pending.step, ForceApplication);
        assert_eq!(pending.not_before(), now);
    }

    #[test]
    fn a_checked_move_needs_an_endpoint_and_the_threshold() {
        let now = Instant::now();
        let step = MigrationStep::ForceInterface;
        let plain = PendingMove::of(
            MigrationStep::ForceApplication,
            step,
            &settings(None, None, None),
            now,
        )
        .unwrap();
        assert!(
            matches!(plain.decide(0, 3), Decision::Refuse(why) if why.contains("interface level has no endpoint"))
        );
        assert_eq!(
            plain.decide(0, 0),
            plain.decide(0, 9),
            "no endpoint, no move"
        );
        assert_eq!(plain.decide(1, 0), Decision::Apply);
        assert_eq!(plain.decide(1, 100), Decision::Apply, "threshold 0.0");
        let half = PendingMove::of(
            MigrationStep::ForceApplication,
            step,
            &settings(Some(false), Some(0.5), Some(3)),
            now,
        )
        .unwrap();
        assert_eq!(half.not_before(), now + Duration::from_secs(3));
        assert_eq!(half.decide(2, 4), Decision::Apply);
        assert!(matches!(half.decide(1, 4), Decision::Refuse(why) if why.contains("0.25")));
        let negative = PendingMove::of(
            MigrationStep::ForceApplication,
            step,
            &settings(None, Some(-1.0), Some(-5)),
            now,
        )
        .unwrap();
        assert_eq!(
            negative.decide(1, 100),
            Decision::Apply,
            "below 0: the default"
        );
        assert_eq!(negative.not_before(), now, "a negative delay is none");
    }
}
