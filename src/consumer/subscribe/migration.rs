//! A subscription's migration state, held by its task (`task.rs`): the level(s) it reads
//! and why (its own step, the migration rule's), the levels started, and the move the
//! rule asks for (`migration_move.rs`) or refused. The rule itself is followed in
//! `migration_follow.rs`.

use tokio::sync::watch;

use super::interfaces::InterfaceLevel;
use super::migration_follow::RuleNow;
use super::migration_move::PendingMove;
use crate::governance::migration::{MigrationSettings, MigrationStep};

/// Where a subscription stands between the discovery levels. See the module docs.
pub(super) struct Migration {
    /// Which level(s) it reads: the migration rule's step for it, else `own_step`.
    pub step: MigrationStep,
    /// Its own step: the subscription's, else the resolver's default.
    pub own_step: MigrationStep,
    /// The consumer app's migration rule, when the app is named.
    pub rule: Option<watch::Receiver<RuleNow>>,
    /// Whether the application level is followed (once started, it stays followed).
    pub application_started: bool,
    /// The interface level, when the step reads it.
    pub interface: Option<InterfaceLevel>,
    /// A move the migration rule asks for, waiting for its target level to be read.
    pub pending: Option<PendingMove>,
    /// The step of the rule's last refused move, and why: not tried again until the rule
    /// changes.
    pub refused: Option<(MigrationStep, String)>,
    /// Consumer-side health's changes, followed once the interface level is read (at
    /// `APPLICATION_FIRST` whether the application level can answer decides the level).
    pub health: Option<watch::Receiver<u64>>,
    /// Whether the last set found the application level unable to answer while the
    /// interface level can (`answering.rs`).
    pub set_aside: bool,
}

impl Migration {
    /// A subscription at its own `step`, reading no level yet, before any rule.
    pub fn new(step: MigrationStep) -> Self {
        Migration {
            step,
            own_step: step,
            rule: None,
            application_started: false,
            interface: None,
            pending: None,
            refused: None,
            health: None,
            set_aside: false,
        }
    }

    /// The step the migration rule gives the service `key` provided by `apps` (else the
    /// subscription's own), and the rule's settings for it (none without a rule).
    pub fn chosen(&self, key: &str, apps: Vec<&str>) -> (MigrationStep, MigrationSettings) {
        let Some(rule) = &self.rule else {
            return (self.own_step, MigrationSettings::default());
        };
        let now = rule.borrow();
        let Some(rule) = now.rule() else {
            return (self.own_step, MigrationSettings::default());
        };
        let settings = rule.settings_for(key, apps);
        (settings.step.unwrap_or(self.own_step), settings)
    }
}

/// The next change of consumer-side health; pending forever when it is not followed.
pub(super) async fn next_health(health: &mut Option<watch::Receiver<u64>>) {
    if let Some(health) = health
        && health.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// The next change of the migration rule; pending forever without one.
pub(super) async fn next_rule(rule: &mut Option<watch::Receiver<RuleNow>>) {
    if let Some(rule) = rule
        && rule.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}
