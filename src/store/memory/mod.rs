//! The embedded in-memory store: one process, zero setup, etcd semantics.
//!
//! A store-wide revision counter, a bounded history of changes for watches that start in
//! the past, and leases whose expiry is driven by tokio's clock (so tests can pause and
//! advance it). Every operation first expires the leases that are due, so results never
//! depend on when the background reaper last ran; the reaper only makes expiry visible to
//! watchers when nothing else happens.
//!
//! This file holds the handle and the [`Store`] calls; `state` holds the state under the
//! lock (keys, history, leases, watchers) and the lease reaper.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

mod state;

use state::{Lease, Shared, State, Watcher, reap};

use super::{CasOutcome, KeyValue, LeaseId, Range, Store, Watch, WatchEvent};
use crate::error::{Error, Result};

/// Store revisions of history kept for watches by default.
const DEFAULT_HISTORY: usize = 100_000;
/// Events per batch when a watch replays history (whole revisions, so a batch may hold a
/// few more).
const REPLAY_BATCH_EVENTS: usize = 4096;

/// The embedded in-memory [`Store`]. Cheap to create; lives as long as its handle.
pub struct MemoryStore {
    shared: Arc<Shared>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store keeping the default amount of watch history.
    pub fn new() -> Self {
        Self::with_history(DEFAULT_HISTORY)
    }

    /// An empty store keeping `revisions` revisions of watch history (at least one).
    pub fn with_history(revisions: usize) -> Self {
        MemoryStore {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    revision: 1,
                    compacted: 0,
                    kvs: BTreeMap::new(),
                    leases: HashMap::new(),
                    next_lease: 1,
                    history: VecDeque::new(),
                    history_limit: revisions.max(1),
                    watchers: Vec::new(),
                }),
                reaper_wake: Notify::new(),
                reaper_started: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The current store revision.
    pub fn revision(&self) -> i64 {
        self.shared.lock().revision
    }

    /// How many watches are open (watches whose receiver was dropped are not counted).
    pub fn watch_count(&self) -> usize {
        let mut state = self.shared.lock();
        state.watchers.retain(|w| !w.events.is_closed());
        state.watchers.len()
    }

    /// Ends every open watch with [`Error::WatchEnded`], as a lost connection would; the
    /// watchers re-list. For fault tests.
    pub fn cancel_watches(&self) {
        let mut state = self.shared.lock();
        for w in state.watchers.drain(..) {
            let _ = w
                .events
                .try_send(Err(Error::watch_ended("canceled by the store")));
        }
    }

    fn start_reaper(&self) {
        if !self.shared.reaper_started.swap(true, Ordering::SeqCst) {
            tokio::spawn(reap(Arc::downgrade(&self.shared)));
        }
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.reaper_wake.notify_one();
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.shared.lock().kvs.get(key).cloned())
    }

    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        let state = self.shared.lock();
        let kvs = state
            .kvs
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv.clone())
            .collect();
        Ok(Range {
            kvs,
            revision: state.revision,
        })
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        let mut state = self.shared.lock();
        state.check_lease(lease)?;
        Ok(state.put(key, value, lease))
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        Ok(self.shared.lock().delete(key))
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected_mod_revision: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        let mut state = self.shared.lock();
        let current = state.kvs.get(key);
        if current.map_or(0, |kv| kv.mod_revision) != expected_mod_revision {
            return Ok(CasOutcome::Conflict {
                current: current.cloned(),
            });
        }
        state.check_lease(lease)?;
        Ok(CasOutcome::Written {
            revision: state.put(key, value, lease),
        })
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected_mod_revision: i64,
    ) -> Result<CasOutcome> {
        let mut state = self.shared.lock();
        let current = state.kvs.get(key);
        match current {
            Some(kv) if expected_mod_revision > 0 && kv.mod_revision == expected_mod_revision => {
                state.delete(key);
                Ok(CasOutcome::Written {
                    revision: state.revision,
                })
            }
            _ => Ok(CasOutcome::Conflict {
                current: current.cloned(),
            }),
        }
    }

    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        let mut state = self.shared.lock();
        let (tx, watch) = Watch::channel();
        if from_revision > 0 && from_revision <= state.revision {
            if from_revision < state.compacted {
                return Err(Error::Compacted {
                    requested: from_revision,
                    compacted: state.compacted,
                });
            }
            // The history is replayed in batches of whole revisions, a few thousand events
            // each, so a long replay fits the watch buffer.
            let mut batch: Vec<WatchEvent> = Vec::new();
            let replay = state
                .history
                .iter()
                .filter(|(revision, _)| *revision >= from_revision);
            for (_, events) in replay {
                batch.extend(
                    events
                        .iter()
                        .filter(|e| e.key().starts_with(prefix))
                        .cloned(),
                );
                if batch.len() >= REPLAY_BATCH_EVENTS
                    && tx.try_send(Ok(batch.split_off(0))).is_err()
                {
                    return Err(Error::watch_ended(
                        "history to replay exceeds the watch buffer",
                    ));
                }
            }
            if !batch.is_empty() && tx.try_send(Ok(batch)).is_err() {
                return Err(Error::watch_ended(
                    "history to replay exceeds the watch buffer",
                ));
            }
        }
        state.watchers.push(Watcher {
            prefix: prefix.to_owned(),
            from_revision,
            events: tx,
        });
        Ok(watch)
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        if ttl.is_zero() {
            return Err(Error::config("lease TTL must be positive"));
        }
        self.start_reaper();
        let id = {
            let mut state = self.shared.lock();
            let id = state.next_lease;
            state.next_lease += 1;
            state.leases.insert(
                id,
                Lease {
                    ttl,
                    deadline: Instant::now() + ttl,
                    keys: BTreeSet::new(),
                },
            );
            id
        };
        self.shared.reaper_wake.notify_one();
        Ok(id)
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        let mut state = self.shared.lock();
        let l = state
            .leases
            .get_mut(&lease)
            .ok_or(Error::LeaseNotFound(lease))?;
        l.deadline = Instant::now() + l.ttl;
        Ok(l.ttl)
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        if self.shared.lock().remove_lease(lease) {
            Ok(())
        } else {
            Err(Error::LeaseNotFound(lease))
        }
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        let mut state = self.shared.lock();
        if revision > state.revision {
            return Err(Error::store(format!(
                "cannot compact to future revision {revision}"
            )));
        }
        state.compact(revision);
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}
