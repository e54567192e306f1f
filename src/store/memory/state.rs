//! The memory store's state under its lock: keys, revisions, history, leases and
//! watchers, and the reaper that expires leases as their deadlines pass.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::store::{KeyValue, LeaseId, WatchEvent};

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the reaper when a lease deadline moves earlier or the store is dropped.
    pub(super) reaper_wake: Notify,
    pub(super) reaper_started: AtomicBool,
    pub(super) closed: AtomicBool,
}

pub(super) struct Lease {
    pub(super) ttl: Duration,
    pub(super) deadline: Instant,
    pub(super) keys: BTreeSet<String>,
}

pub(super) struct Watcher {
    pub(super) prefix: String,
    /// The first revision it wants (a watch may start in the future, as in etcd).
    pub(super) from_revision: i64,
    pub(super) events: mpsc::Sender<Result<Vec<WatchEvent>>>,
}

pub(super) struct State {
    pub(super) revision: i64,
    /// The compaction revision, as etcd's: history before it is gone, a watch from it or
    /// later can still be served; `0` before any compaction.
    pub(super) compacted: i64,
    pub(super) kvs: BTreeMap<String, KeyValue>,
    pub(super) leases: HashMap<LeaseId, Lease>,
    pub(super) next_lease: LeaseId,
    /// Changes by revision, oldest first.
    pub(super) history: VecDeque<(i64, Vec<WatchEvent>)>,
    pub(super) history_limit: usize,
    pub(super) watchers: Vec<Watcher>,
}

impl Shared {
    /// Locks the state and expires the leases that are due.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.expire_due(Instant::now());
        state
    }
}

/// Expires leases as their deadlines pass, so watchers see the deletions.
pub(super) async fn reap(shared: Weak<Shared>) {
    loop {
        let (next, wake) = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.closed.load(Ordering::SeqCst) {
                return;
            }
            let next = shared.lock().leases.values().map(|l| l.deadline).min();
            (next, async move { shared.reaper_wake.notified().await })
        };
        match next {
            Some(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = wake => {}
                }
            }
            None => wake.await,
        }
    }
}

impl State {
    pub(super) fn expire_due(&mut self, now: Instant) {
        let due: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.remove_lease(id);
        }
    }

    /// Removes a lease and deletes its keys in one revision, as etcd does.
    pub(super) fn remove_lease(&mut self, id: LeaseId) -> bool {
        let Some(lease) = self.leases.remove(&id) else {
            return false;
        };
        let keys: Vec<String> = lease
            .keys
            .into_iter()
            .filter(|k| self.kvs.contains_key(k))
            .collect();
        if !keys.is_empty() {
            self.revision += 1;
            let revision = self.revision;
            let events = keys
                .into_iter()
                .map(|key| {
                    self.kvs.remove(&key);
                    WatchEvent::Delete {
                        key,
                        mod_revision: revision,
                    }
                })
                .collect();
            self.publish(revision, events);
        }
        true
    }

    pub(super) fn check_lease(&self, lease: Option<LeaseId>) -> Result<()> {
        match lease {
            Some(id) if !self.leases.contains_key(&id) => Err(Error::LeaseNotFound(id)),
            _ => Ok(()),
        }
    }

    pub(super) fn put(&mut self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> i64 {
        self.revision += 1;
        let revision = self.revision;
        let lease = lease.unwrap_or(0);
        let previous = self.kvs.get(key);
        let create_revision = previous.map_or(revision, |kv| kv.create_revision);
        let previous_lease = previous.map_or(0, |kv| kv.lease);
        if previous_lease != 0
            && previous_lease != lease
            && let Some(l) = self.leases.get_mut(&previous_lease)
        {
            l.keys.remove(key);
        }
        if let Some(l) = self.leases.get_mut(&lease) {
            l.keys.insert(key.to_owned());
        }
        let kv = KeyValue {
            key: key.to_owned(),
            value,
            create_revision,
            mod_revision: revision,
            lease,
        };
        self.kvs.insert(key.to_owned(), kv.clone());
        self.publish(revision, vec![WatchEvent::Put(kv)]);
        revision
    }

    pub(super) fn delete(&mut self, key: &str) -> bool {
        let Some(kv) = self.kvs.remove(key) else {
            return false;
        };
        if let Some(l) = self.leases.get_mut(&kv.lease) {
            l.keys.remove(key);
        }
        self.revision += 1;
        let revision = self.revision;
        self.publish(
            revision,
            vec![WatchEvent::Delete {
                key: key.to_owned(),
                mod_revision: revision,
            }],
        );
        true
    }

    /// Records a revision's events and sends each watcher those under its prefix.
    pub(super) fn publish(&mut self, revision: i64, events: Vec<WatchEvent>) {
        self.watchers.retain(|w| {
            if revision < w.from_revision {
                return !w.events.is_closed();
            }
            let mine: Vec<WatchEvent> = events
                .iter()
                .filter(|e| e.key().starts_with(&w.prefix))
                .cloned()
                .collect();
            // A full buffer or a dropped receiver ends the watch; the watcher re-lists.
            mine.is_empty() || w.events.try_send(Ok(mine)).is_ok()
        });
        self.history.push_back((revision, events));
        while self.history.len() > self.history_limit {
            if let Some((old, _)) = self.history.pop_front() {
                self.compacted = old + 1;
            }
        }
    }

    /// Drops the history before `revision`; a watch can still start at `revision`, as in
    /// etcd.
    pub(super) fn compact(&mut self, revision: i64) {
        while self.history.front().is_some_and(|(r, _)| *r < revision) {
            self.history.pop_front();
        }
        self.compacted = self.compacted.max(revision);
    }
}
