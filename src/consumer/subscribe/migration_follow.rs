//! The consumer app's migration rule, followed live for every subscription of a resolver:
//! one follow of `{app}.migration` in group `DUBBO_SERVICEDISCOVERY_MIGRATION`, started by
//! the first subscription, ended with the resolver. A refused rule keeps the last good one;
//! a deleted one returns every subscription to its own step.

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, watch};

use crate::backend::config::ConfigCentre;
use crate::governance::migration::{MIGRATION_GROUP, MIGRATION_SUFFIX, MigrationRule};
use crate::governance::watch::follow::{KeyState, follow_key};

/// What is known of the rule.
#[derive(Clone, Debug, Default)]
pub(crate) enum RuleNow {
    /// Not answered yet.
    #[default]
    Unknown,
    /// Answered: the rule in force, if any.
    Known(Option<Arc<MigrationRule>>),
}

impl RuleNow {
    /// The rule in force, once answered.
    pub(crate) fn rule(&self) -> Option<&MigrationRule> {
        match self {
            RuleNow::Known(Some(rule)) => Some(rule),
            _ => None,
        }
    }
}

/// The follow of one consumer app's rule, started on first use.
pub(crate) struct MigrationFollow {
    config: Arc<dyn ConfigCentre>,
    app: String,
    now: OnceLock<watch::Receiver<RuleNow>>,
}

impl MigrationFollow {
    /// A follow of `app`'s rule in `config`, not started.
    pub(crate) fn new(config: Arc<dyn ConfigCentre>, app: String) -> Self {
        MigrationFollow {
            config,
            app,
            now: OnceLock::new(),
        }
    }

    /// The rule's key in the config centre: `{app}.migration`.
    pub(crate) fn key(&self) -> String {
        format!("{}{MIGRATION_SUFFIX}", self.app)
    }

    /// The rule as it changes; starts the follow on the first call (inside the runtime).
    /// The follow ends once every receiver is dropped.
    pub(crate) fn subscribe(&self) -> watch::Receiver<RuleNow> {
        self.now
            .get_or_init(|| {
                let (tx, rx) = watch::channel(RuleNow::Unknown);
                tokio::spawn(run(self.config.clone(), self.key(), tx));
                rx
            })
            .clone()
    }
}

async fn run(config: Arc<dyn ConfigCentre>, key: String, tx: watch::Sender<RuleNow>) {
    let (states_tx, mut states) = mpsc::channel(4);
    let parse_as = key.clone();
    let follower = tokio::spawn(follow_key(
        config,
        (),
        key.clone(),
        MIGRATION_GROUP,
        move |text| MigrationRule::parse(&parse_as, text).map(Arc::new),
        states_tx,
    ));
    loop {
        let state = tokio::select! {
            () = tx.closed() => break,
            state = states.recv() => state,
        };
        let Some(((), state)) = state else {
            // The follow gave up for good (reported refused first): the last state stays.
            tx.closed().await;
            break;
        };
        let next = match state {
            KeyState::Rule(rule) => Some(rule),
            KeyState::Absent => None,
            KeyState::Refused(reason) => {
                tracing::warn!(%key, %reason, "migration rule refused; the last good one stays");
                match &*tx.borrow() {
                    RuleNow::Known(last) => last.clone(),
                    RuleNow::Unknown => None,
                }
            }
        };
        tx.send_replace(RuleNow::Known(next));
    }
    follower.abort();
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Backend;
    use crate::backend::config::{ConfigKey, ConfigWrite};
    use crate::governance::migration::MigrationStep;

    const KEY: &str = "shop.migration";

    /// The next state after the one seen, within a bound.
    async fn next(rx: &mut watch::Receiver<RuleNow>) -> Option<MigrationStep> {
        tokio::time::timeout(Duration::from_secs(10), rx.changed())
            .await
            .expect("a state in time")
            .expect("the follow runs");
        let now = rx.borrow_and_update();
        assert!(matches!(*now, RuleNow::Known(_)), "{:?}", *now);
        now.rule().and_then(|rule| rule.settings.step)
    }

    #[tokio::test]
    async fn the_rule_is_followed_a_refused_one_keeps_the_last_and_a_delete_clears_it() {
        let backend = Backend::memory();
        let config = backend.config().clone();
        let follow = MigrationFollow::new(config.clone(), "shop".to_owned());
        let mut rx = follow.subscribe();
        assert_eq!(next(&mut rx).await, None, "no rule yet");
        let put = |text: &'static str| {
            let config = config.clone();
            async move {
                let current = config
                    .get(&ConfigKey::new(KEY, MIGRATION_GROUP).unwrap())
                    .await
                    .unwrap();
                config
                    .put(
                        &ConfigKey::new(KEY, MIGRATION_GROUP).unwrap(),
                        ConfigWrite::new(text, current.as_ref().map(|c| &c.version)),
                    )
                    .await
                    .unwrap();
            }
        };
        put("step: FORCE_INTERFACE").await;
        assert_eq!(next(&mut rx).await, Some(MigrationStep::ForceInterface));
        put("step: NOW_AND_THEN").await;
        assert_eq!(
            next(&mut rx).await,
            Some(MigrationStep::ForceInterface),
            "a refused rule keeps the last good one"
        );
        // The same key in another group is no migration rule.
        config
            .put(
                &ConfigKey::new(KEY, "dubbo").unwrap(),
                ConfigWrite::create("step: FORCE_APPLICATION"),
            )
            .await
            .unwrap();
        put("step: APPLICATION_FIRST").await;
        assert_eq!(next(&mut rx).await, Some(MigrationStep::ApplicationFirst));
        let current = config
            .get(&ConfigKey::new(KEY, MIGRATION_GROUP).unwrap())
            .await
            .unwrap()
            .unwrap();
        config
            .delete(
                &ConfigKey::new(KEY, MIGRATION_GROUP).unwrap(),
                &current.version,
            )
            .await
            .unwrap();
        assert_eq!(
            next(&mut rx).await,
            None,
            "deleted: the consumer's own step"
        );
    }
}
