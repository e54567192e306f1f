//! Metadata fetches started while an app's instance list is still being read.
//!
//! A cold resolve of a large app would otherwise read every page of the list, then fetch
//! each revision's metadata: the fetches wait for the whole read. As each page is parsed,
//! [`EarlyFetches::page`] starts the fetch of every revision it can, so the calls overlap
//! the rest of the read. The resolve (or the subscription) that follows asks the metadata
//! source as before and joins the fetch in flight (the source loads each revision once).
//!
//! An early fetch is as strong as a late one:
//!
//! * **Verification**: a revision is fetched early only when one of the members seen so
//!   far declares a known revision rule, since the rule an answer is checked under is
//!   chosen over the members the fetch knows. A revision whose members declare none is
//!   fetched after the read, over all its members, as before.
//! * **Failover**: it waits until it has seen as many members as a load may try, since a
//!   caller that joins a failed load shares its failure.
//! * **Spread**: the member asked is chosen at random among those seen, so consumers
//!   starting together do not all ask the instance of the first record.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use super::source::MetadataSource;
use crate::consumer::endpoints::by_revision;
use crate::model::ServiceInstance;

/// The early fetches of one list of one app.
pub(crate) struct EarlyFetches {
    metadata: Arc<MetadataSource>,
    app: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Revisions started or found cached.
    started: HashSet<String>,
    /// Revisions not started yet: members seen (at most [`KEPT`]) and whether one of all
    /// those seen declares a known rule.
    waiting: HashMap<String, (Vec<Arc<ServiceInstance>>, bool)>,
}

/// Members kept per waiting revision: enough to choose among at random.
const KEPT: usize = 256;

impl EarlyFetches {
    /// Early fetches of `app`'s revisions into `metadata`.
    pub(crate) fn new(metadata: Arc<MetadataSource>, app: &str) -> Self {
        EarlyFetches {
            metadata,
            app: app.to_owned(),
            state: Mutex::default(),
        }
    }

    /// Takes in one page of the list: starts the fetch of each revision that is not
    /// cached or started, once its members seen so far are enough (see the module docs).
    /// A fetch runs on a task of its own, so it finishes, and fills the cache, even when
    /// the list fails or its caller goes away.
    pub(crate) fn page(&self, page: &[&Arc<ServiceInstance>]) {
        let attempts = self.metadata.fetch_attempts();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { started, waiting } = &mut *state;
        for (revision, members) in by_revision(page.iter().copied()) {
            if started.contains(revision) {
                continue;
            }
            if self.metadata.is_cached(&self.app, revision) {
                started.insert(revision.to_owned());
                waiting.remove(revision);
                continue;
            }
            let (mut seen, mut checked) = waiting.remove(revision).unwrap_or_default();
            checked |= members.iter().any(|m| m.declared_rule().rule().is_some());
            let room = KEPT.saturating_sub(seen.len());
            seen.extend(members.into_iter().take(room).cloned());
            if seen.len() < attempts || !checked {
                waiting.insert(revision.to_owned(), (seen, checked));
                continue;
            }
            started.insert(revision.to_owned());
            let (metadata, app, revision) =
                (self.metadata.clone(), self.app.clone(), revision.to_owned());
            tokio::spawn(async move {
                let members: Vec<&Arc<ServiceInstance>> = seen.iter().collect();
                // Its outcome is the cache's: the resolve asks again, and a failure is
                // tried again over every member.
                let _ = metadata.get(&app, &revision, &members).await;
            });
        }
    }
}
