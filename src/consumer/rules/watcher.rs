//! The rules watcher of one balanced channel: follows each rule key in the config centre,
//! keeps the last good rule of each, and publishes the [`RuleSet`] in force whenever one
//! changes. The keys follow the channel's providers: a provider app that appears brings
//! its tag and condition rules, one that leaves takes them away.
//!
//! A rule that cannot be read or parsed is refused with its key and reason, logged once
//! per change, and the previous good rule under the key stays in force; a deleted key
//! stops applying. A key whose follow fails is followed again after a backoff, its rule
//! kept meanwhile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::backend::config::{ConfigCentre, DEFAULT_GROUP};
use crate::consumer::rules::RulesReport;
use crate::governance::watch::follow::{KeyState, follow_key};
use crate::governance::{Rule, RuleProblem, RuleSet};
use crate::governance::{RuleKey, rule_keys};
use crate::model::Endpoint;

/// How long a new channel's calls wait for the config centre's first answers before they
/// are routed without the rules still missing (said in a warning): long enough for a
/// registry that answers (milliseconds), short enough that a slow or unreachable one does
/// not fail calls with deadlines of a second.
pub(crate) const FIRST_RULES_WAIT: Duration = Duration::from_millis(500);

/// What the watcher knows of one key.
#[derive(Default)]
struct Entry {
    /// The last good rule, if any.
    good: Option<Rule>,
    /// Why the key's current content is refused.
    refused: Option<String>,
    /// Whether the key has answered at least once.
    answered: bool,
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

/// Starts watching the rules of `scope` in `config`, the provider apps following
/// `endpoints`, until every receiver is dropped, the subscription ends or `cancel`. The
/// receiver holds [`RuleSet::pending`] until the first answers, or [`FIRST_RULES_WAIT`].
/// Each set published is told to `report` (the consumer record's entry of the
/// subscription), when there is one.
pub(crate) fn watch_rules(
    config: Arc<dyn ConfigCentre>,
    scope: RulesScope,
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    report: Option<Arc<RulesReport>>,
    cancel: CancellationToken,
) -> watch::Receiver<Arc<RuleSet>> {
    let (publish, rules) = watch::channel(Arc::new(RuleSet::pending()));
    let (states, reports) = mpsc::channel(256);
    let watcher = Watcher {
        config,
        scope,
        endpoints,
        publish,
        report,
        states,
        followers: HashMap::new(),
        entries: BTreeMap::new(),
        loaded: false,
    };
    tokio::spawn(watcher.run(reports, cancel));
    rules
}

struct Watcher {
    config: Arc<dyn ConfigCentre>,
    scope: RulesScope,
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    publish: watch::Sender<Arc<RuleSet>>,
    /// Where the sets published are reported, for the consumer record.
    report: Option<Arc<RulesReport>>,
    states: mpsc::Sender<(RuleKey, KeyState<Rule>)>,
    followers: HashMap<RuleKey, JoinHandle<()>>,
    entries: BTreeMap<RuleKey, Entry>,
    /// Whether every key first followed has answered (or the first wait passed).
    loaded: bool,
}

impl Watcher {
    async fn run(
        mut self,
        mut reports: mpsc::Receiver<(RuleKey, KeyState<Rule>)>,
        cancel: CancellationToken,
    ) {
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
                Some((key, state)) = reports.recv() => {
                    self.record(key, state);
                    while let Ok((key, state)) = reports.try_recv() {
                        self.record(key, state);
                    }
                    if !self.loaded && self.entries.values().all(|e| e.answered) {
                        self.loaded = true;
                    }
                    self.publish();
                }
            }
        }
        for (_, follower) in self.followers.drain() {
            follower.abort();
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
            .followers
            .keys()
            .filter(|k| !keys.contains(k))
            .cloned()
            .collect();
        for key in &gone {
            if let Some(follower) = self.followers.remove(key) {
                follower.abort();
            }
            self.entries.remove(key);
        }
        for key in keys {
            if self.followers.contains_key(&key) {
                continue;
            }
            self.entries.entry(key.clone()).or_default();
            let parse_as = key.clone();
            let follower = tokio::spawn(follow_key(
                self.config.clone(),
                key.clone(),
                key.key(),
                DEFAULT_GROUP,
                move |text| Rule::parse(&parse_as, text),
                self.states.clone(),
            ));
            self.followers.insert(key, follower);
        }
        !gone.is_empty()
    }

    fn record(&mut self, key: RuleKey, state: KeyState<Rule>) {
        let Some(entry) = self.entries.get_mut(&key) else {
            return; // no longer followed
        };
        entry.answered = true;
        match state {
            KeyState::Rule(rule) => {
                if entry.refused.take().is_some() || entry.good.is_none() {
                    tracing::info!(key = %key.key(), "rule in force");
                }
                entry.good = Some(rule);
            }
            KeyState::Absent => {
                if entry.good.take().is_some() {
                    tracing::info!(key = %key.key(), "rule deleted: it no longer applies");
                }
                entry.refused = None;
            }
            KeyState::Refused(reason) => {
                if entry.refused.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(
                        key = %key.key(),
                        %reason,
                        kept = entry.good.is_some(),
                        "rule refused: the previous good rule under its key stays in force"
                    );
                }
                entry.refused = Some(reason);
            }
        }
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

    #[tokio::test(start_paused = true)]
    async fn a_backend_without_a_config_centre_loads_at_once_and_says_why_per_key() {
        let config: Arc<dyn ConfigCentre> = Arc::new(NoConfig { backend: "custom" });
        let (_endpoints, watched) = watch::channel(Arc::new(Vec::new()));
        let scope = RulesScope {
            consumer_app: "shop".into(),
            service: "helloworld.Greeter::".into(),
            provided_by: vec!["greeter".into()],
        };
        let mut rules = watch_rules(config, scope, watched, None, CancellationToken::new());
        let loaded = async {
            while !rules.borrow_and_update().is_loaded() {
                rules.changed().await.unwrap();
            }
        };
        tokio::time::timeout(FIRST_RULES_WAIT / 5, loaded)
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
}
