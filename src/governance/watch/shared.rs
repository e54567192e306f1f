//! Rule keys followed once however many follow them: a table of the keys followed (by name
//! and group), one follow per key in the config centre, its content parsed once per change
//! and each refused content logged once per change, handed to every follower as a
//! [`watch::Receiver`] of the key's state ([`KeyNow`]).
//!
//! A key's follow starts with its first follower. When the last one leaves, the follow goes
//! on for [`RULE_RELEASE_GRACE`] before it stops, so that a provider app that flaps or a
//! channel made again does not churn watches; a follower that comes back meanwhile finds
//! the key's state at once. Joining and the decision to stop happen under one lock, so a
//! join never reaches a follow that is going away. When the last handle of the table goes,
//! every follow stops at once.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::follow::{KeyState, follow_key};
use crate::backend::config::ConfigCentre;
use crate::error::Result;

/// How long a key nobody follows keeps its follow before it stops (as a shared view does).
pub(crate) const RULE_RELEASE_GRACE: Duration = Duration::from_secs(10);

/// States buffered between a key's follow and its task.
const STATE_BUFFER: usize = 16;

/// What is known of one followed key.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KeyNow<R> {
    /// The last good rule, if any (kept while the key's content is refused).
    pub good: Option<R>,
    /// Why the key's current content is refused.
    pub refused: Option<String>,
    /// Whether the config centre has answered for the key at least once.
    pub answered: bool,
}

impl<R> Default for KeyNow<R> {
    fn default() -> Self {
        KeyNow {
            good: None,
            refused: None,
            answered: false,
        }
    }
}

/// The words a table's follows log their changes with (whose rules they are).
pub(crate) struct FollowLogs {
    /// A rule came into force.
    pub in_force: &'static str,
    /// A rule was deleted.
    pub deleted: &'static str,
    /// A key's content was refused, the previous good rule kept.
    pub refused: &'static str,
}

/// The changes of one key's state, its current state first.
pub(crate) type KeyChanges<R> = Pin<Box<dyn Stream<Item = KeyNow<R>> + Send>>;

/// The keys one owner (a resolver, a provider) follows, each once. Cheap to clone; the
/// follows stop when the last clone goes. See the module docs.
pub(crate) struct SharedFollows<R> {
    table: Arc<Table<R>>,
    /// Stops every follow when the last clone is dropped.
    _stop: Arc<DropGuard>,
}

impl<R> Clone for SharedFollows<R> {
    fn clone(&self) -> Self {
        SharedFollows {
            table: self.table.clone(),
            _stop: self._stop.clone(),
        }
    }
}

/// A key's name and group.
type Id = (String, &'static str);

/// One running follow.
struct Slot<R> {
    now: watch::Sender<KeyNow<R>>,
    /// How many followers joined so far: a join during the grace restarts it.
    joins: u64,
}

struct Table<R> {
    config: Arc<dyn ConfigCentre>,
    logs: FollowLogs,
    stop: CancellationToken,
    running: Mutex<HashMap<Id, Slot<R>>>,
}

impl<R: Clone + PartialEq + Send + Sync + 'static> SharedFollows<R> {
    /// No key followed yet in `config`; changes are logged with `logs`.
    pub fn new(config: Arc<dyn ConfigCentre>, logs: FollowLogs) -> Self {
        let stop = CancellationToken::new();
        SharedFollows {
            table: Arc::new(Table {
                config,
                logs,
                stop: stop.clone(),
                running: Mutex::default(),
            }),
            _stop: Arc::new(stop.drop_guard()),
        }
    }

    /// The state of `name` in `group`, following it (its content parsed by `parse`) if
    /// nobody does. The follow goes on while the receiver (or a clone) is kept. Must be
    /// called within a Tokio runtime.
    pub fn subscribe<P>(&self, name: String, group: &'static str, parse: P) -> Receiver<R>
    where
        P: Fn(&str) -> Result<R> + Send + Sync + 'static,
    {
        let mut running = self.table.lock();
        let id = (name, group);
        if let Some(slot) = running.get_mut(&id) {
            slot.joins += 1;
            return slot.now.subscribe();
        }
        let (now, receiver) = watch::channel(KeyNow::default());
        running.insert(
            id.clone(),
            Slot {
                now: now.clone(),
                joins: 1,
            },
        );
        let span = tracing::debug_span!("rule_key", key = %id.0);
        let task = run(self.table.clone(), id, now, parse);
        tokio::spawn(tracing::Instrument::instrument(task, span));
        receiver
    }

    /// The changes of `name` in `group`, its current state first; see [`Self::subscribe`].
    pub fn changes<P>(&self, name: String, group: &'static str, parse: P) -> KeyChanges<R>
    where
        P: Fn(&str) -> Result<R> + Send + Sync + 'static,
    {
        changes(self.subscribe(name, group, parse))
    }

    /// How many keys are followed.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.table.lock().len()
    }
}

/// What [`SharedFollows::subscribe`] hands: one key's state as it changes.
pub(crate) type Receiver<R> = watch::Receiver<KeyNow<R>>;

/// The changes `receiver` sees, its current state first.
pub(crate) fn changes<R: Clone + Send + Sync + 'static>(
    mut receiver: Receiver<R>,
) -> KeyChanges<R> {
    receiver.mark_changed();
    Box::pin(futures::stream::unfold(receiver, async |mut receiver| {
        receiver.changed().await.ok()?;
        let now = receiver.borrow_and_update().clone();
        Some((now, receiver))
    }))
}

impl<R> Table<R> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Id, Slot<R>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many followers joined `id` so far.
    fn joins(&self, id: &Id) -> u64 {
        self.lock().get(id).map_or(0, |slot| slot.joins)
    }

    /// Removes `id` if nobody follows it and nobody joined since `joins`; whether it did.
    fn release(&self, id: &Id, joins: u64) -> bool {
        let mut running = self.lock();
        let idle = running
            .get(id)
            .is_none_or(|slot| slot.now.receiver_count() == 0 && slot.joins == joins);
        if idle {
            running.remove(id);
        }
        idle
    }
}

/// The task of one key: follows it, tells its followers each new state, and stops once
/// released (or when the table's owner goes).
async fn run<R, P>(table: Arc<Table<R>>, id: Id, now: watch::Sender<KeyNow<R>>, parse: P)
where
    R: Clone + PartialEq + Send + Sync + 'static,
    P: Fn(&str) -> Result<R> + Send + Sync + 'static,
{
    let (states_tx, mut states) = mpsc::channel(STATE_BUFFER);
    let follow = follow_key(
        table.config.clone(),
        (),
        id.0.clone(),
        id.1,
        parse,
        states_tx,
    );
    tokio::pin!(follow);
    let mut following = true;
    // Kept across states, so that a key that changes often is released all the same.
    let idle_then = idle(&table, &id, &now);
    tokio::pin!(idle_then);
    loop {
        tokio::select! {
            () = table.stop.cancelled() => break,
            () = &mut follow, if following => following = false,
            Some(((), state)) = states.recv() => apply(&table.logs, &id.0, &now, state),
            joins = &mut idle_then => {
                if table.release(&id, joins) {
                    tracing::debug!("rule key released");
                    return;
                }
                idle_then.set(idle(&table, &id, &now));
            }
        }
    }
    table.lock().remove(&id);
}

/// Waits until nobody has followed the key for [`RULE_RELEASE_GRACE`]; the joins counted
/// when the last follower left.
async fn idle<R>(table: &Table<R>, id: &Id, now: &watch::Sender<KeyNow<R>>) -> u64 {
    now.closed().await;
    let joins = table.joins(id);
    tokio::time::sleep(RULE_RELEASE_GRACE).await;
    joins
}

/// Records a new state of `name` and tells the followers when it changed; logs each change
/// once (a refused content once per reason).
fn apply<R: PartialEq>(
    logs: &FollowLogs,
    name: &str,
    now: &watch::Sender<KeyNow<R>>,
    state: KeyState<R>,
) {
    now.send_if_modified(|now| {
        let first = !std::mem::replace(&mut now.answered, true);
        match state {
            KeyState::Rule(rule) => {
                let cleared = now.refused.take().is_some();
                let new = now.good.as_ref() != Some(&rule);
                if cleared || new {
                    tracing::info!(key = %name, "{}", logs.in_force);
                }
                now.good = Some(rule);
                first || cleared || new
            }
            KeyState::Absent => {
                let deleted = now.good.take().is_some();
                if deleted {
                    tracing::info!(key = %name, "{}", logs.deleted);
                }
                let cleared = now.refused.take().is_some();
                first || deleted || cleared
            }
            KeyState::Refused(reason) => {
                let new = now.refused.as_deref() != Some(reason.as_str());
                if new {
                    let kept = now.good.is_some();
                    tracing::warn!(key = %name, %reason, kept, "{}", logs.refused);
                }
                now.refused = Some(reason);
                first || new
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use async_trait::async_trait;

    use super::*;
    use crate::backend::Follow;
    use crate::backend::config::{ConfigFollow, ConfigItem, ConfigKey, ConfigVersion};
    use crate::backend::config::{ConfigWrite, NoConfig};
    use crate::error::Error;

    /// What feeds one follow of a [`CountingConfig`], by key name.
    type Feeds = Vec<(String, mpsc::Sender<Result<Option<ConfigItem>>>)>;

    /// A config centre whose keys are all absent, counting the follows it starts and
    /// telling which still run.
    #[derive(Default)]
    pub(crate) struct CountingConfig {
        follows: Mutex<Feeds>,
    }

    impl CountingConfig {
        /// How many follows of `name` were started.
        pub(crate) fn started(&self, name: &str) -> usize {
            self.lock().iter().filter(|(n, _)| n == name).count()
        }

        /// How many follows of `name` still run (their follower keeps them).
        pub(crate) fn running(&self, name: &str) -> usize {
            let follows = self.lock();
            let live = follows
                .iter()
                .filter(|(n, tx)| n == name && !tx.is_closed());
            live.count()
        }

        /// Hands every running follow of `name` the content `text`.
        pub(crate) fn write(&self, name: &str, text: &str) {
            for (_, tx) in self.lock().iter().filter(|(n, _)| n == name) {
                let item = ConfigItem {
                    content: text.to_owned(),
                    version: ConfigVersion::new(text),
                };
                let _ = tx.try_send(Ok(Some(item)));
            }
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Feeds> {
            self.follows.lock().unwrap()
        }
    }

    #[async_trait]
    impl ConfigCentre for CountingConfig {
        async fn get(&self, _: &ConfigKey) -> Result<Option<ConfigItem>> {
            Ok(None)
        }

        async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow> {
            let (tx, follow) = Follow::channel();
            let _ = tx.try_send(Ok(None));
            self.lock().push((key.key().to_owned(), tx));
            Ok(follow)
        }

        async fn put(&self, _: &ConfigKey, _: ConfigWrite<'_>) -> Result<ConfigVersion> {
            Err(Error::config("read only"))
        }

        async fn delete(&self, _: &ConfigKey, _: &ConfigVersion) -> Result<()> {
            Err(Error::config("read only"))
        }

        async fn list(&self, _: &str) -> Result<Vec<String>> {
            Ok(Vec::new())
        }
    }

    const LOGS: FollowLogs = FollowLogs {
        in_force: "in force",
        deleted: "deleted",
        refused: "refused",
    };

    fn parse(text: &str) -> Result<String> {
        Ok(text.to_owned())
    }

    /// The next state `changes` yields, within a bound.
    async fn next(changes: &mut KeyChanges<String>) -> KeyNow<String> {
        use futures::StreamExt as _;
        tokio::time::timeout(Duration::from_secs(1), changes.next())
            .await
            .expect("a state in time")
            .expect("the follow runs")
    }

    /// The first answered state `changes` yields.
    async fn answered(changes: &mut KeyChanges<String>) -> KeyNow<String> {
        loop {
            let now = next(changes).await;
            if now.answered {
                return now;
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_follow_per_key_kept_through_the_grace_and_stopped_after_it() {
        let config = Arc::new(CountingConfig::default());
        let follows = SharedFollows::new(config.clone(), LOGS);
        let mut a = follows.changes("k".into(), "dubbo", parse);
        let mut b = follows.changes("k".into(), "dubbo", parse);
        answered(&mut a).await;
        let seen = next(&mut b).await;
        assert!(seen.answered, "a later follower starts from the answer");
        assert_eq!((config.started("k"), follows.len()), (1, 1));
        drop(a);
        drop(b);
        tokio::time::sleep(RULE_RELEASE_GRACE / 2).await;
        // Back within the grace: the same follow, its state at once.
        let mut c = follows.changes("k".into(), "dubbo", parse);
        assert!(next(&mut c).await.answered);
        drop(c);
        tokio::time::sleep(RULE_RELEASE_GRACE * 3 / 4).await;
        assert_eq!(config.running("k"), 1, "the grace restarts with each leave");
        tokio::time::sleep(RULE_RELEASE_GRACE).await;
        assert_eq!((config.started("k"), config.running("k")), (1, 0));
        assert_eq!(follows.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_changes_often_is_released_all_the_same() {
        let config = Arc::new(CountingConfig::default());
        let follows = SharedFollows::new(config.clone(), LOGS);
        let mut a = follows.changes("k".into(), "dubbo", parse);
        answered(&mut a).await;
        drop(a);
        for n in 0..30 {
            config.write("k", &format!("v{n}"));
            tokio::time::sleep(RULE_RELEASE_GRACE / 10).await;
        }
        assert_eq!((config.started("k"), config.running("k")), (1, 0));
        let mut b = follows.changes("k".into(), "dubbo", parse);
        answered(&mut b).await;
        assert_eq!(config.started("k"), 2, "followed again from a fresh read");
    }

    #[tokio::test(start_paused = true)]
    async fn the_follows_stop_with_their_owner() {
        let config = Arc::new(CountingConfig::default());
        let follows = SharedFollows::new(config.clone(), LOGS);
        let mut a = follows.changes("k".into(), "dubbo", parse);
        answered(&mut a).await;
        drop(follows);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(config.running("k"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_cannot_be_read_is_answered_refused() {
        let config = Arc::new(NoConfig { backend: "custom" });
        let follows = SharedFollows::new(config, LOGS);
        let mut a = follows.changes("k".into(), "dubbo", parse);
        let now = answered(&mut a).await;
        assert!(now.good.is_none());
        let reason = now.refused.expect("refused");
        assert!(reason.contains("keeps no config centre"), "{reason}");
    }

    #[test]
    fn each_change_is_told_once() {
        let (now, rx) = watch::channel(KeyNow::<String>::default());
        let mut rx2 = rx.clone();
        rx2.mark_unchanged();
        apply(&LOGS, "k", &now, KeyState::Absent);
        assert!(rx2.has_changed().unwrap(), "the first answer is told");
        rx2.mark_unchanged();
        apply(&LOGS, "k", &now, KeyState::Rule("a".into()));
        apply(&LOGS, "k", &now, KeyState::Refused("bad".into()));
        assert_eq!(
            *rx.borrow(),
            KeyNow {
                good: Some("a".into()),
                refused: Some("bad".into()),
                answered: true
            },
            "a refused content keeps the good rule"
        );
        rx2.mark_unchanged();
        apply(&LOGS, "k", &now, KeyState::Refused("bad".into()));
        assert!(!rx2.has_changed().unwrap(), "the same refusal is no change");
        apply(&LOGS, "k", &now, KeyState::Absent);
        assert_eq!(
            *rx.borrow(),
            KeyNow {
                answered: true,
                ..KeyNow::default()
            }
        );
    }
}
