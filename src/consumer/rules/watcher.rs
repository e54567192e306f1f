//! The rules watcher of one balanced channel: follows each rule key through the resolver's
//! shared follows ([`SharedRules`]: each key followed once for every channel), and
//! publishes the [`RuleSet`] in force whenever one changes. The keys follow the channel's
//! providers: a provider app that appears brings its tag and condition rules, one that
//! leaves takes them away.
//!
//! A rule that cannot be read or parsed is refused with its key and reason (logged once per
//! change by the shared follow), and the previous good rule under the key stays in force;
//! a deleted key stops applying. A key whose follow fails is followed again after a
//! backoff, its rule kept meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::watch;
use tokio_stream::StreamMap;
use tokio_util::sync::CancellationToken;

use crate::backend::config::{ConfigCentre, DEFAULT_GROUP};
use crate::consumer::rules::RulesReport;
use crate::governance::watch::shared::{FollowLogs, KeyChanges, KeyNow, SharedFollows};
use crate::governance::{Rule, RuleProblem, RuleSet};
use crate::governance::{RuleKey, rule_keys};
use crate::model::Endpoint;

/// How long a new channel's calls wait for the config centre's first answers before they
/// are routed without the rules still missing (said in a warning): long enough for a
/// registry that answers (milliseconds), short enough that a slow or unreachable one does
/// not fail calls with deadlines of a second.
pub(crate) const FIRST_RULES_WAIT: Duration = Duration::from_millis(500);

/// The rule keys a resolver follows, each once for all its channels.
pub(crate) type SharedRules = SharedFollows<Rule>;

/// The shared rule follows of a resolver reading `config`.
pub(crate) fn shared_rules(config: Arc<dyn ConfigCentre>) -> SharedRules {
    SharedFollows::new(
        config,
        FollowLogs {
            in_force: "rule in force",
            deleted: "rule deleted: it no longer applies",
            refused: "rule refused: the previous good rule under its key stays in force",
        },
    )
}

/// What the watcher needs to know of its channel.
pub(crate) struct RulesScope {
    /// The consumer's app (empty: unknown).
    pub consumer_app: String,
    /// The service key (`helloworld.Greeter::`).
    pub service: String,
    /// The providers' apps named by the subscription (`provided_by`), read at once.
    pub provided_by: Vec<String>,
}

impl RulesScope {
    /// The scope of the channels of `subscription` in a consumer of `consumer_app`.
    pub(crate) fn of(consumer_app: &str, subscription: &crate::consumer::Subscription) -> Self {
        RulesScope {
            consumer_app: consumer_app.to_owned(),
            service: crate::governance::service_key(
                &subscription.interface,
                subscription.version.as_deref(),
                subscription.group.as_deref(),
            ),
            provided_by: subscription.provided_by.clone(),
        }
    }
}

/// Starts watching the rules of `scope` through `follows`, the provider apps following
/// `endpoints`, until every receiver is dropped, the subscription ends or `cancel`. The
/// receiver holds [`RuleSet::pending`] until the first answers, or [`FIRST_RULES_WAIT`].
/// Each set published is told to `report` (the consumer record's entry of the
/// subscription), when there is one.
pub(crate) fn watch_rules(
    follows: SharedRules,
    scope: RulesScope,
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    report: Option<Arc<RulesReport>>,
    cancel: CancellationToken,
) -> watch::Receiver<Arc<RuleSet>> {
    let (publish, rules) = watch::channel(Arc::new(RuleSet::pending()));
    let watcher = Watcher {
        follows,
        scope,
        endpoints,
        publish,
        report,
        keys: StreamMap::new(),
        entries: BTreeMap::new(),
        loaded: false,
    };
    tokio::spawn(watcher.run(cancel));
    rules
}

struct Watcher {
    follows: SharedRules,
    scope: RulesScope,
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    publish: watch::Sender<Arc<RuleSet>>,
    /// Where the sets published are reported, for the consumer record.
    report: Option<Arc<RulesReport>>,
    /// The changes of each key followed.
    keys: StreamMap<RuleKey, KeyChanges<Rule>>,
    /// What the watcher knows of each key followed.
    entries: BTreeMap<RuleKey, KeyNow<Rule>>,
    /// Whether every key first followed has answered (or the first wait passed).
    loaded: bool,
}

impl Watcher {
    async fn run(mut self, cancel: CancellationToken) {
        self.follow_keys();
        let publish = self.publish.clone();
        let first_wait = tokio::time::sleep(FIRST_RULES_WAIT);
        tokio::pin!(first_wait);
        loop {
            tokio::select! {
                () = publish.closed() => break,
                () = cancel.cancelled() => break,
                () = &mut first_wait, if !self.loaded => {
                    self.loaded = true;
                    let missing: Vec<String> = self
                        .entries
                        .iter()
                        .filter(|(_, e)| !e.answered)
                        .map(|(k, _)| k.key())
                        .collect();
                    tracing::warn!(
                        ?missing,
                        "the config centre has not answered for every rule key: calls are \
                         routed without the missing rules until it does"
                    );
                    self.publish();
                }
                changed = self.endpoints.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    if self.follow_keys() {
                        self.publish();
                    }
                }
                Some((key, now)) = self.keys.next() => {
                    self.entries.insert(key, now);
                    while let Some(Some((key, now))) = self.keys.next().now_or_never() {
                        self.entries.insert(key, now);
                    }
                    if !self.loaded && self.entries.values().all(|e| e.answered) {
                        self.loaded = true;
                    }
                    self.publish();
                }
            }
        }
    }

    /// Follows the keys of the current provider apps, stops following the others; whether
    /// any key stopped (its rule no longer applies).
    fn follow_keys(&mut self) -> bool {
        let apps: BTreeSet<String> = self
            .endpoints
            .borrow()
            .iter()
            .map(|e| e.app.to_string())
            .chain(self.scope.provided_by.iter().cloned())
            .collect();
        let keys: BTreeSet<RuleKey> = rule_keys(
            &self.scope.consumer_app,
            &self.scope.service,
            apps.iter().map(String::as_str),
        )
        .into_iter()
        .collect();
        let gone: Vec<RuleKey> = self
            .entries
            .keys()
            .filter(|k| !keys.contains(k))
            .cloned()
            .collect();
        for key in &gone {
            self.keys.remove(key);
            self.entries.remove(key);
        }
        for key in keys {
            if self.entries.contains_key(&key) {
                continue;
            }
            self.entries.insert(key.clone(), KeyNow::default());
            let parse_as = key.clone();
            let changes = self.follows.changes(key.key(), DEFAULT_GROUP, move |text| {
                Rule::parse(&parse_as, text)
            });
            self.keys.insert(key, changes);
        }
        !gone.is_empty()
    }

    fn publish(&self) {
        if !self.loaded {
            return;
        }
        let mut problems = Vec::new();
        let mut rules = Vec::new();
        for (key, entry) in &self.entries {
            if let Some(reason) = &entry.refused {
                problems.push(RuleProblem {
                    key: key.key(),
                    reason: reason.clone(),
                });
            }
            if let Some(rule) = &entry.good {
                rules.push((key.clone(), rule.clone()));
            }
        }
        let set = Arc::new(RuleSet::new(rules, problems));
        let published = self.publish.send_if_modified(|current| {
            if **current == *set {
                return false;
            }
            *current = set.clone();
            true
        });
        if published && let Some(report) = &self.report {
            report.report(&set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::config::NoConfig;
    use crate::governance::watch::shared::RULE_RELEASE_GRACE;
    use crate::governance::watch::shared::tests::CountingConfig;

    #[tokio::test(start_paused = true)]
    async fn a_backend_without_a_config_centre_loads_at_once_and_says_why_per_key() {
        let config: Arc<dyn ConfigCentre> = Arc::new(NoConfig { backend: "custom" });
        let (_endpoints, watched) = watch::channel(Arc::new(Vec::new()));
        let scope = RulesScope {
            consumer_app: "shop".into(),
            service: "helloworld.Greeter::".into(),
            provided_by: vec!["greeter".into()],
        };
        let follows = shared_rules(config);
        let mut rules = watch_rules(follows, scope, watched, None, CancellationToken::new());
        tokio::time::timeout(FIRST_RULES_WAIT / 5, loaded(&mut rules))
            .await
            .expect("loaded without waiting for the first-answer bound");
        let set = rules.borrow().clone();
        let keys = rule_keys("shop", "helloworld.Greeter::", ["greeter"]);
        assert_eq!(set.problems().len(), keys.len(), "{:?}", set.problems());
        assert!(
            set.problems()
                .iter()
                .all(|p| p.reason.contains("keeps no config centre")),
            "{:?}",
            set.problems()
        );
        assert_eq!(set.in_force().count(), 0);
    }

    /// Waits until `rules` is loaded.
    async fn loaded(rules: &mut watch::Receiver<Arc<RuleSet>>) {
        while !rules.borrow_and_update().is_loaded() {
            rules.changed().await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn channels_of_one_resolver_follow_each_key_once_until_the_last_leaves() {
        let config = Arc::new(CountingConfig::default());
        let follows = shared_rules(config.clone());
        let scope = || RulesScope {
            consumer_app: "shop".into(),
            service: "helloworld.Greeter::".into(),
            provided_by: vec!["greeter".into()],
        };
        let (_endpoints, watched) = watch::channel(Arc::new(Vec::new()));
        let cancel = CancellationToken::new();
        let mut one = watch_rules(
            follows.clone(),
            scope(),
            watched.clone(),
            None,
            cancel.clone(),
        );
        let mut two = watch_rules(
            follows.clone(),
            scope(),
            watched,
            None,
            CancellationToken::new(),
        );
        loaded(&mut one).await;
        loaded(&mut two).await;
        assert_eq!(**one.borrow(), **two.borrow());
        let keys = rule_keys("shop", "helloworld.Greeter::", ["greeter"]);
        let tag = RuleKey::TagRule("greeter".into()).key();
        assert!(keys.iter().any(|k| k.key() == tag));
        for key in &keys {
            let name = key.key();
            assert_eq!(
                config.started(&name),
                1,
                "{name}: one follow for two channels"
            );
        }
        // The first channel stops: the second keeps every follow.
        cancel.cancel();
        drop(one);
        tokio::time::sleep(RULE_RELEASE_GRACE * 2).await;
        assert_eq!((config.started(&tag), config.running(&tag)), (1, 1));
        // The last one leaves: the follows stop once the grace has passed.
        drop(two);
        tokio::time::sleep(RULE_RELEASE_GRACE / 2).await;
        assert_eq!(config.running(&tag), 1, "kept through the grace");
        tokio::time::sleep(RULE_RELEASE_GRACE).await;
        for key in &keys {
            let name = key.key();
            assert_eq!(
                (config.started(&name), config.running(&name)),
                (1, 0),
                "{name}"
            );
        }
    }
}
