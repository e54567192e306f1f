//! Background metadata fetches of the revisions a subscription uses: first tries, and
//! retries of failures with exponential backoff and jitter, never blocking other revisions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::source::{MetadataSource, Unfetched};
use crate::backoff::Backoff;
use crate::consumer::stats::Counters;
use crate::error::Error;
use crate::model::{MetadataInfo, ServiceInstance};
use crate::warnings::{Aggregator, aggregated};

/// (app, revision).
pub(crate) type Key = (String, String);

/// What fetching needs of an app a subscription follows.
pub(crate) trait AppRevisions {
    /// The revisions of its routable instances (`0` left out).
    fn revisions(&self) -> impl Iterator<Item = &str>;

    /// The revisions for which `due` holds, each with its routable instances (the
    /// members a fetch may ask).
    fn members_of_due(
        &mut self,
        due: impl Fn(&str) -> bool,
    ) -> Vec<(String, Vec<Arc<ServiceInstance>>)>;
}

/// What a fetch ends with.
type Answer = std::result::Result<Arc<MetadataInfo>, Unfetched>;

/// What a background metadata fetch task ends with.
pub(crate) type Joined =
    std::result::Result<(tokio::task::Id, (Key, Answer)), tokio::task::JoinError>;

/// What the end of a fetch changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The revision's metadata became known.
    Known,
    /// It failed, and whether a retry may mend it changed: the explanation of an empty set
    /// changes with it.
    Outlook,
    /// Nothing the set or its explanation is made of.
    Unchanged,
}

/// The fetch state of a revision whose metadata is not known.
struct Fetch {
    in_flight: bool,
    next_try: Instant,
    /// Its attempts count the failures so far.
    backoff: Backoff,
    /// Whether its last try failed in a way no retry mends (kept while a retry runs).
    lasting: bool,
}

/// The metadata of the revisions a subscription uses, known or being fetched.
pub(crate) struct Fetching {
    source: Arc<MetadataSource>,
    /// The first and the longest delay between retries.
    retry: (Duration, Duration),
    /// The metadata of the revisions in use.
    pub metadata: HashMap<Key, Arc<MetadataInfo>>,
    /// Revisions in use whose metadata is not known yet.
    fetches: HashMap<Key, Fetch>,
    tasks: JoinSet<(Key, Answer)>,
    ids: HashMap<tokio::task::Id, Key>,
}

impl Fetching {
    /// Nothing known; fetches from `source`, retrying after `retry.0` up to `retry.1`.
    pub fn new(source: Arc<MetadataSource>, retry: (Duration, Duration)) -> Self {
        Fetching {
            source,
            retry,
            metadata: HashMap::new(),
            fetches: HashMap::new(),
            tasks: JoinSet::new(),
            ids: HashMap::new(),
        }
    }

    /// The next fetch that ended (pending while none runs).
    pub async fn next(&mut self) -> Joined {
        if self.tasks.is_empty() {
            return std::future::pending().await;
        }
        match self.tasks.join_next_with_id().await {
            Some(joined) => joined,
            None => std::future::pending().await,
        }
    }

    /// Takes the end of a fetch; says what it changed.
    pub fn on_fetched(&mut self, joined: Joined, now: Instant, warnings: &Aggregator) -> Ended {
        let (key, result) = match joined {
            Ok((id, (key, result))) => {
                self.ids.remove(&id);
                (key, result)
            }
            Err(e) => match self.ids.remove(&e.id()) {
                Some(key) => {
                    let error = Error::from(std::io::Error::other(e));
                    let lasting = false;
                    (key, Err(Unfetched { error, lasting }))
                }
                None => return Ended::Unchanged,
            },
        };
        match result {
            Ok(info) => {
                self.fetches.remove(&key);
                self.metadata.insert(key, info);
                Ended::Known
            }
            Err(Unfetched { error, lasting }) => {
                let Some(fetch) = self.fetches.get_mut(&key) else {
                    return Ended::Unchanged;
                };
                fetch.in_flight = false;
                let retry_in = fetch.backoff.next_delay();
                fetch.next_try = now + retry_in;
                let subject = format!("{} {}", key.0, key.1);
                aggregated!(warn, warnings,
                    "metadata unavailable; retrying in the background", &subject,
                    app = %key.0, revision = %key.1, %error, ?retry_in);
                let changed = fetch.lasting != lasting;
                fetch.lasting = lasting;
                if changed {
                    Ended::Outlook
                } else {
                    Ended::Unchanged
                }
            }
        }
    }

    /// Whether the metadata of `key`, unknown, is on its way: its fetch is about to start,
    /// runs, or failed in a way a retry may mend. Not while its last try failed for good
    /// (an answer that does not hash to the revision, say).
    pub fn on_its_way(&self, key: &Key) -> bool {
        !self.metadata.contains_key(key) && self.fetches.get(key).is_none_or(|f| !f.lasting)
    }

    /// Starts the fetches of revisions in use whose metadata is unknown (first tries and
    /// retries that are due) and forgets revisions no longer in use.
    ///
    /// Runs at every wake. An app whose set changed has its revisions worked out, and the
    /// members of the revisions whose fetches start collected, in one walk over its
    /// instances; an app whose set is as before is walked only for a retry that is due.
    pub fn ensure(
        &mut self,
        apps: &mut BTreeMap<String, impl AppRevisions>,
        now: Instant,
        counters: &Counters,
    ) {
        let mut starting = Vec::new();
        for (app, view) in apps.iter_mut() {
            let due = |revision: &str| self.due(app, revision, now);
            for (revision, members) in view.members_of_due(due) {
                starting.push(((app.clone(), revision), members));
            }
        }
        let in_use: BTreeSet<(&str, &str)> = apps
            .iter()
            .flat_map(|(app, view)| view.revisions().map(|revision| (app.as_str(), revision)))
            .collect();
        let used = |key: &Key| in_use.contains(&(key.0.as_str(), key.1.as_str()));
        self.metadata.retain(|key, _| used(key));
        self.fetches.retain(|key, _| used(key));
        for (key, members) in starting {
            let (base, max) = self.retry;
            let fetch = self.fetches.entry(key.clone()).or_insert_with(|| Fetch {
                in_flight: false,
                next_try: now,
                backoff: Backoff::new(base, max),
                lasting: false,
            });
            if fetch.backoff.attempts() > 0 {
                Counters::bump(&counters.metadata_retries);
            }
            fetch.in_flight = true;
            let source = self.source.clone();
            let task_key = key.clone();
            let handle = self.tasks.spawn(async move {
                let refs: Vec<&Arc<ServiceInstance>> = members.iter().collect();
                let result = source.fetch(&task_key.0, &task_key.1, &refs).await;
                (task_key, result)
            });
            self.ids.insert(handle.id(), key);
        }
    }

    /// Whether a fetch of `app`'s `revision` starts now: its metadata is unknown, and no
    /// fetch of it runs or waits for a later retry.
    fn due(&self, app: &str, revision: &str, now: Instant) -> bool {
        let key = (app.to_owned(), revision.to_owned());
        !self.metadata.contains_key(&key)
            && self
                .fetches
                .get(&key)
                .is_none_or(|fetch| !fetch.in_flight && fetch.next_try <= now)
    }

    /// Whether a revision is on its first fetch.
    pub fn first_fetches_pending(&self) -> bool {
        self.fetches
            .values()
            .any(|f| f.in_flight && f.backoff.attempts() == 0)
    }

    /// When the next retry is due.
    pub fn next_try(&self) -> Option<Instant> {
        self.fetches
            .values()
            .filter(|f| !f.in_flight)
            .map(|f| f.next_try)
            .min()
    }

    /// Takes metadata known from elsewhere (the snapshot), unless known already.
    pub fn restore(&mut self, info: MetadataInfo) {
        self.metadata
            .entry((info.app.clone(), info.revision.clone()))
            .or_insert_with(|| Arc::new(info));
    }
}
