//! Background metadata fetches of the revisions a subscription uses: first tries, and
//! retries of failures with exponential backoff and jitter, never blocking other revisions.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::task::Task;
use crate::backoff::Backoff;
use crate::consumer::stats::Counters;
use crate::error::{Error, Result};
use crate::model::{EMPTY_REVISION, MetadataInfo, ServiceInstance};

/// (app, revision).
pub(super) type Key = (String, String);

/// What a background metadata fetch task ends with.
pub(super) type Joined = std::result::Result<
    (tokio::task::Id, (Key, Result<Arc<MetadataInfo>>)),
    tokio::task::JoinError,
>;

/// The fetch state of a revision whose metadata is not known.
pub(super) struct Fetch {
    pub(super) in_flight: bool,
    pub(super) next_try: Instant,
    /// Its attempts count the failures so far.
    backoff: Backoff,
}

impl Fetch {
    pub(super) fn failures(&self) -> u32 {
        self.backoff.attempts()
    }
}

impl Task {
    pub(super) fn on_fetched(&mut self, joined: Joined, now: Instant) {
        let (key, result) = match joined {
            Ok((id, (key, result))) => {
                self.fetch_ids.remove(&id);
                (key, result)
            }
            Err(e) => match self.fetch_ids.remove(&e.id()) {
                Some(key) => (key, Err(Error::Io(std::io::Error::other(e.to_string())))),
                None => return,
            },
        };
        match result {
            Ok(info) => {
                self.fetches.remove(&key);
                self.metadata.insert(key, info);
                self.dirty = true;
            }
            Err(e) => {
                if let Some(fetch) = self.fetches.get_mut(&key) {
                    fetch.in_flight = false;
                    let delay = fetch.backoff.next_delay();
                    fetch.next_try = now + delay;
                    let cause = format!("metadata unavailable: {} {}", key.0, key.1);
                    if let Some(suppressed) = self.context.warnings.allow(&cause, now) {
                        tracing::warn!(
                            app = %key.0, revision = %key.1, error = %e, retry_in = ?delay,
                            suppressed, "metadata unavailable; retrying in the background"
                        );
                    }
                }
            }
        }
    }

    /// Starts the fetches of revisions in use whose metadata is unknown (first tries and
    /// retries that are due) and forgets revisions no longer in use.
    ///
    /// Runs at every wake: the revisions in use are collected borrowed (no allocation per
    /// instance), and the members of a revision only when its fetch starts.
    pub(super) fn ensure_fetches(&mut self, now: Instant) {
        let mut in_use: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (app, view) in &self.apps {
            for instance in view.routable() {
                let revision = instance.revision();
                if revision != EMPTY_REVISION {
                    in_use.insert((app.as_str(), revision));
                }
            }
        }
        let used = |key: &Key| in_use.contains(&(key.0.as_str(), key.1.as_str()));
        self.metadata.retain(|key, _| used(key));
        self.fetches.retain(|key, _| used(key));
        for (app, revision) in in_use {
            let key = (app.to_owned(), revision.to_owned());
            if self.metadata.contains_key(&key) {
                continue;
            }
            let (base, max) = (self.options.fetch_retry_base, self.options.fetch_retry_max);
            let fetch = self.fetches.entry(key.clone()).or_insert_with(|| Fetch {
                in_flight: false,
                next_try: now,
                backoff: Backoff::new(base, max),
            });
            if fetch.in_flight || fetch.next_try > now {
                continue;
            }
            if fetch.failures() > 0 {
                Counters::bump(&self.context.counters.metadata_retries);
            }
            fetch.in_flight = true;
            let members: Vec<Arc<ServiceInstance>> = self.apps[app]
                .routable()
                .filter(|i| i.revision() == revision)
                .cloned()
                .collect();
            let context = self.context.clone();
            let task_key = key.clone();
            let handle = self.fetch_tasks.spawn(async move {
                let refs: Vec<&Arc<ServiceInstance>> = members.iter().collect();
                let result = context
                    .metadata
                    .get(&context.counters, &task_key.0, &task_key.1, &refs)
                    .await;
                (task_key, result)
            });
            self.fetch_ids.insert(handle.id(), key);
        }
    }
}
