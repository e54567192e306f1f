//! The provider's own rules, watched live: the `side: provider` configurators of its app
//! and of each exported service (see `overrides`), followed in the config centre; a change
//! republishes the exports (and so the revision and the instance record) once the publish
//! delay passes, several changes in one delay making one revision, as Dubbo Java's
//! `dubbo.application.metadata.publish.delay` does. Removing a rule restores the declared
//! parameters and, the revision being a hash, the declared revision.
//!
//! A rule that cannot be read or parsed never stops the provider: the last good document
//! under its key stays in force, and the reason is logged once per change and shown by
//! [`Provider::rules`](super::Provider::rules).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_stream::StreamMap;

use super::Shared;
use super::overrides::rule_keys;
use crate::backend::config::DEFAULT_GROUP;
use crate::governance::watch::shared::{FollowLogs, KeyChanges, KeyNow, SharedFollows};
use crate::governance::{Configurators, RuleProblem};

/// How long a starting provider waits for the config centre's first answers before it
/// registers without the rules still missing (said in a warning): a registry that answers
/// does so in milliseconds, and one that does not must not hold the start.
const FIRST_RULES_WAIT: Duration = Duration::from_millis(500);

/// The rules a provider applies to itself, and those it refuses. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderRules {
    /// The keys whose document is in force (present and good, or the last good one).
    pub in_force: Vec<String>,
    /// The keys whose current content is refused, and why.
    pub refused: Vec<RuleProblem>,
}

/// What the provider knows of one key.
type KeyEntry = KeyNow<Arc<Configurators>>;

/// How the provider's rule follows log their changes.
const LOGS: FollowLogs = FollowLogs {
    in_force: "provider rule in force",
    deleted: "provider rule deleted: it no longer applies",
    refused: "provider rule refused: the previous good rule under its key stays in force; \
              the provider keeps serving",
};

/// The provider's rules by key: what the watcher keeps, what publishing reads.
#[derive(Default)]
pub(super) struct OwnRules {
    entries: BTreeMap<String, KeyEntry>,
}

impl OwnRules {
    /// The documents in force, by key.
    pub fn documents(&self) -> BTreeMap<String, &Configurators> {
        self.entries
            .iter()
            .filter_map(|(key, e)| Some((key.clone(), &**e.good.as_ref()?)))
            .collect()
    }

    /// What [`Provider::rules`](super::Provider::rules) shows.
    pub fn report(&self) -> ProviderRules {
        ProviderRules {
            in_force: self
                .entries
                .iter()
                .filter(|(_, e)| e.good.is_some())
                .map(|(k, _)| k.clone())
                .collect(),
            refused: self
                .entries
                .iter()
                .filter_map(|(key, e)| {
                    Some(RuleProblem {
                        key: key.clone(),
                        reason: e.refused.clone()?,
                    })
                })
                .collect(),
        }
    }

    /// Records one key's new state (logged by its follow); whether the documents in force
    /// changed.
    fn record(&mut self, key: &str, now: KeyEntry) -> bool {
        let Some(entry) = self.entries.get_mut(key) else {
            return false; // no longer followed
        };
        let changed = entry.good != now.good;
        *entry = now;
        changed
    }
}

/// The watcher's own state: the provider's rule follows, and the changes of each key it
/// follows.
struct Watch {
    shared: Arc<Shared>,
    follows: SharedFollows<Arc<Configurators>>,
    keys: StreamMap<String, KeyChanges<Arc<Configurators>>>,
}

impl Shared {
    /// Follows the provider's rules until the provider stops; `loaded` is told once the
    /// first answers came (or [`FIRST_RULES_WAIT`] passed) and the exports they make are
    /// published.
    pub(super) async fn rules_loop(self: Arc<Self>, delay: Duration, loaded: oneshot::Sender<()>) {
        let mut watch = Watch {
            follows: SharedFollows::new(self.backend.config().clone(), LOGS),
            shared: self.clone(),
            keys: StreamMap::new(),
        };
        watch.follow_keys();
        let first_wait = tokio::time::sleep(FIRST_RULES_WAIT);
        tokio::pin!(first_wait);
        let mut loaded = Some(loaded);
        let mut publish_at: Option<Instant> = None;
        loop {
            if loaded.is_some() && self.all_answered() {
                self.publish_logged().await;
                let _ = loaded.take().map(|l| l.send(()));
            }
            tokio::select! {
                () = self.cancel.cancelled() => break,
                () = &mut first_wait, if loaded.is_some() => {
                    let missing = self.unanswered();
                    tracing::warn!(
                        ?missing,
                        "the config centre has not answered for every provider rule key: \
                         registering without the missing rules until it does"
                    );
                    self.publish_logged().await;
                    let _ = loaded.take().map(|l| l.send(()));
                }
                () = self.exports_changed.notified() => {
                    // `set_services` published with the rules in force; follow its keys.
                    if watch.follow_keys() {
                        publish_at.get_or_insert_with(|| Instant::now() + delay);
                    }
                }
                Some((key, now)) = watch.keys.next() => {
                    let mut changed = self.record(&key, now);
                    while let Some(Some((key, now))) = watch.keys.next().now_or_never() {
                        changed |= self.record(&key, now);
                    }
                    // Before the first publish, that publish takes the change in.
                    if changed && loaded.is_none() {
                        publish_at.get_or_insert_with(|| Instant::now() + delay);
                    }
                }
                () = sleep_until(publish_at), if publish_at.is_some() => {
                    publish_at = None;
                    self.publish_logged().await;
                }
            }
        }
    }

    fn record(&self, key: &str, now: KeyEntry) -> bool {
        lock(&self.rules).record(key, now)
    }

    fn all_answered(&self) -> bool {
        lock(&self.rules).entries.values().all(|e| e.answered)
    }

    fn unanswered(&self) -> Vec<String> {
        lock(&self.rules)
            .entries
            .iter()
            .filter(|(_, e)| !e.answered)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Publishes the exports the rules make; a registry that fails is retried by the next
    /// change or the lease's recovery, the exports already answerable.
    async fn publish_logged(&self) {
        if let Err(error) = self.publish_exports().await {
            tracing::warn!(%error, "cannot publish the exports the provider rules make");
        }
    }
}

impl Watch {
    /// Follows the keys of the declared services, stops following the others; whether a
    /// key that held a rule stopped being followed (its rule no longer applies).
    fn follow_keys(&mut self) -> bool {
        let app = self.shared.exported.current().app.clone();
        let keys = rule_keys(&app, lock(&self.shared.declared).iter());
        let mut rules = lock(&self.shared.rules);
        let mut dropped_rule = false;
        let gone: Vec<String> = rules
            .entries
            .keys()
            .filter(|key| !keys.contains(*key))
            .cloned()
            .collect();
        for key in gone {
            self.keys.remove(&key);
            let entry = rules.entries.remove(&key);
            dropped_rule |= entry.is_some_and(|e| e.good.is_some());
        }
        for key in keys {
            if rules.entries.contains_key(&key) {
                continue;
            }
            rules.entries.insert(key.clone(), KeyEntry::default());
            let parse_as = key.clone();
            let changes = self
                .follows
                .changes(key.clone(), DEFAULT_GROUP, move |text| {
                    Configurators::parse(&parse_as, text).map(Arc::new)
                });
            self.keys.insert(key, changes);
        }
        dropped_rule
    }
}

/// Sleeps until `at` (never called without one).
async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked.
pub(super) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
