//! The task's migration between discovery levels: which step it is at (its own, the
//! migration rule's), the moves a rule asks for (`migration_move.rs`), the levels it
//! follows, and at `APPLICATION_FIRST` which level the set comes from, decided again on
//! every change of the sets, the rule or health (see `answering.rs`), and shown as a
//! [`LevelChoice`].

use std::sync::Arc;

use tokio::time::Instant;

use super::Task;
use crate::consumer::subscribe::answering;
use crate::consumer::subscribe::interfaces::{InterfaceLevel, InterfaceUpdate};
use crate::consumer::subscribe::migration_move::{Decision, PendingMove};
use crate::governance::migration::{
    Level, LevelChoice, MigrationSettings, MigrationStep, StepSource, display_service_key,
};
use crate::warnings::aggregated;

impl Task {
    /// The step the migration rule gives this subscription, else its own.
    pub(super) fn chosen_step(&self) -> MigrationStep {
        self.chosen().0
    }

    /// The step the migration rule gives this subscription (else its own) and the rule's
    /// settings for it (none without a rule).
    pub(super) fn chosen(&self) -> (MigrationStep, MigrationSettings) {
        let key = display_service_key(
            &self.subscription.interface,
            self.subscription.version.as_deref(),
        );
        let apps: Vec<&str> = if self.subscription.provided_by.is_empty() {
            self.following.apps.keys().map(String::as_str).collect()
        } else {
            self.subscription
                .provided_by
                .iter()
                .map(String::as_str)
                .collect()
        };
        self.migration.chosen(&key, apps)
    }

    /// Chooses the step again (the rule or the provider apps changed). A move the rule's
    /// settings check (`migration_move.rs`) waits for its target level, which starts being
    /// followed; any other applies at once. A refused move is not tried again until the
    /// rule changes, nor a pending one started again.
    pub(super) fn choose_again(&mut self, now: Instant) {
        let (step, settings) = self.chosen();
        let refused = self
            .migration
            .refused
            .as_ref()
            .is_some_and(|(s, _)| *s == step);
        if refused
            || self
                .migration
                .pending
                .as_ref()
                .is_some_and(|p| p.step == step)
        {
            return;
        }
        self.migration.pending = PendingMove::of(self.migration.step, step, &settings, now);
        if self.migration.pending.is_some() {
            self.start_levels_of(step);
            self.dirty = true;
        } else {
            self.move_to(step);
        }
    }

    /// Decides the pending move once its delay passed and its target level is read,
    /// comparing what the two levels hold for the subscription.
    pub(super) fn decide_move(&mut self, now: Instant) {
        let Some(pending) = &self.migration.pending else {
            return;
        };
        if now < pending.not_before() || !self.level_read(pending.step) {
            return;
        }
        let application = if self.migration.application_started {
            let parts = &self.parts;
            let set = self.assembly.compute(
                &self.following.apps,
                &self.fetching.metadata,
                &self.subscription,
                &parts.hosts,
            );
            set.len()
        } else {
            0
        };
        let interface = match &mut self.migration.interface {
            Some(level) => level
                .set(&self.subscription, &self.parts.hosts)
                .endpoints
                .len(),
            None => 0,
        };
        let Some(pending) = self.migration.pending.take() else {
            return;
        };
        let (target, other) = match pending.step {
            MigrationStep::ForceInterface => (interface, application),
            _ => (application, interface),
        };
        match pending.decide(target, other) {
            Decision::Apply => self.move_to(pending.step),
            Decision::Refuse(why) => {
                tracing::warn!(interface = %self.subscription.interface, step = %self.migration.step,
                    refused = %pending.step, %why,
                    "the migration rule's step is not applied; the subscription keeps its step");
                self.migration.refused = Some((pending.step, why));
                self.dirty = true;
            }
        }
    }

    /// Whether the level(s) `step` reads have been read for a comparison: the interface
    /// level's first set, or the apps and the first metadata of the application level.
    pub(super) fn level_read(&self, step: MigrationStep) -> bool {
        let interface = self
            .migration
            .interface
            .as_ref()
            .is_some_and(|level| level.synced);
        let application = self.migration.application_started
            && self.following.store_read()
            && !self.fetching.first_fetches_pending();
        (!step.reads_interface() || interface) && (!step.reads_application() || application)
    }

    /// Moves the subscription to `step`: the levels it reads start being followed, the set
    /// is computed again.
    pub(super) fn move_to(&mut self, step: MigrationStep) {
        if step == self.migration.step {
            return;
        }
        tracing::info!(interface = %self.subscription.interface, from = %self.migration.step, to = %step,
            "migration rule changed the subscription's step");
        self.migration.step = step;
        self.start_levels_of(step);
        self.dirty = true;
    }

    /// Starts following the levels the subscription's step reads.
    pub(super) fn start_levels(&mut self) {
        self.start_levels_of(self.migration.step);
    }

    /// Starts following the levels `step` reads that are not followed yet. A level no
    /// longer read stays followed (unused) until the subscription ends, so a rule that
    /// switches back finds it read.
    pub(super) fn start_levels_of(&mut self, step: MigrationStep) {
        if step.reads_interface() && self.migration.health.is_none() {
            self.migration.health = Some(self.parts.health.changes());
        }
        if step.reads_interface() && self.migration.interface.is_none() {
            self.migration.interface = Some(InterfaceLevel::start(
                self.parts.backend.clone(),
                &self.subscription,
                self.parts.limits.clone(),
                self.parts.counters.clone(),
            ));
        }
        if step.reads_application() && !self.migration.application_started {
            self.migration.application_started = true;
            if self.subscription.provided_by.is_empty() {
                self.following.follow_mapping(&self.subscription.interface);
            } else {
                self.following.follow_apps(&self.subscription.provided_by);
            }
        }
    }

    /// A set (or the refusal) of the interface level.
    pub(super) fn on_interface(&mut self, update: InterfaceUpdate) {
        let Some(level) = &mut self.migration.interface else {
            return;
        };
        self.dirty = true;
        let Some(error) = level.on_update(update) else {
            return;
        };
        if self.migration.step == MigrationStep::ForceInterface
            && self.migration.own_step == self.migration.step
        {
            // Asked for by the consumer itself (a rule's step is the operator's, and a
            // rule can change again): the subscription cannot be served.
            self.fail(error);
        } else {
            let interface = &self.subscription.interface;
            aggregated!(warn, self.parts.warnings,
                "the interface level cannot be read; the application level alone is read",
                interface, %interface, %error);
        }
    }

    /// `APPLICATION_FIRST`'s inputs beside the application level's set: the interface
    /// level's endpoints (none when it is not read, or not yet), and whether the
    /// application level cannot answer while the interface level can (see `answering.rs`).
    pub(super) fn application_first_inputs(
        &mut self,
        application: &[crate::model::Endpoint],
    ) -> (usize, bool) {
        let interface = match &mut self.migration.interface {
            Some(level) if level.synced => {
                &level.set(&self.subscription, &self.parts.hosts).endpoints
            }
            _ => return (0, false),
        };
        // Health is asked only mid-migration (an interface level with an endpoint), the
        // interface level's few endpoints first: most subscriptions pay nothing.
        if interface.is_empty() {
            return (0, false);
        }
        let health = &self.parts.health;
        let set_aside = answering::answering(interface, health) > 0
            && answering::cannot_answer(application, &self.following.apps, health);
        (interface.len(), set_aside)
    }

    /// Whether the interface level has been read and has an endpoint.
    pub(super) fn interface_has_endpoints(&mut self) -> bool {
        match &mut self.migration.interface {
            Some(level) if level.synced => !level
                .set(&self.subscription, &self.parts.hosts)
                .endpoints
                .is_empty(),
            _ => false,
        }
    }

    /// Health changed: at `APPLICATION_FIRST`, the set is computed again when whether the
    /// application level can answer changed.
    pub(super) fn on_health(&mut self) {
        if self.migration.step != MigrationStep::ApplicationFirst
            || !(self.interface_has_endpoints() || self.migration.set_aside)
        {
            return;
        }
        let application = self.assembly.compute(
            &self.following.apps,
            &self.fetching.metadata,
            &self.subscription,
            &self.parts.hosts,
        );
        let (_, set_aside) = self.application_first_inputs(&application);
        if set_aside != self.migration.set_aside {
            self.dirty = true;
        }
    }

    /// The migration rule's `threshold` for `APPLICATION_FIRST` (Java: below 0 or none is
    /// 0.0) and its `proportion` when below 100, which is not applied: every call goes to
    /// the level chosen (Java sends `100 - proportion` % of calls to the interface level).
    pub(super) fn application_first_settings(&self) -> (f32, Option<i32>) {
        let (_, settings) = self.chosen();
        let threshold = settings.threshold.filter(|t| *t >= 0.0).unwrap_or(0.0);
        (threshold, settings.proportion.filter(|p| *p < 100))
    }

    /// Publishes which level the set comes from (see [`LevelChoice`]) when that changed:
    /// `from_interface`, with `application` the application level's set.
    pub(super) fn show_level(
        &mut self,
        from_interface: bool,
        application: &[crate::model::Endpoint],
    ) {
        let reads_interface = self.migration.step.reads_interface();
        let interface = match &mut self.migration.interface {
            Some(level) if reads_interface && level.synced => Some(
                level
                    .set(&self.subscription, &self.parts.hosts)
                    .endpoints
                    .len(),
            ),
            _ => None,
        };
        // The rule's when it differs from the consumer's own, or the rule names it too.
        let from_rule = self.migration.step != self.migration.own_step
            || self.chosen().1.step == Some(self.migration.step);
        let source = match &self.parts.migration {
            Some(rule) if from_rule => StepSource::Rule(rule.key()),
            _ => StepSource::Own,
        };
        let application_first = self.migration.step == MigrationStep::ApplicationFirst;
        let (threshold, proportion) = if application_first {
            self.application_first_settings()
        } else {
            (0.0, None)
        };
        let choice = LevelChoice {
            step: self.migration.step,
            source,
            level: if from_interface {
                Level::Interface
            } else {
                Level::Application
            },
            application: self
                .migration
                .step
                .reads_application()
                .then_some(application.len()),
            interface,
            pending: self.migration.pending.as_ref().map(|p| p.step),
            refused: self.migration.refused.clone(),
            application_set_aside: application_first && self.migration.set_aside,
            threshold,
            proportion_not_applied: proportion,
        };
        if let Some(proportion) = proportion
            && self.publisher.shared.level.borrow().proportion_not_applied != Some(proportion)
        {
            let interface = &self.subscription.interface;
            aggregated!(warn, self.parts.warnings,
                "the migration rule's proportion is not applied; every call goes to the level chosen",
                interface, %interface, proportion);
        }
        self.publisher.shared.level.send_if_modified(|known| {
            let changed = **known != choice;
            if changed {
                *known = Arc::new(choice);
            }
            changed
        });
    }
}
