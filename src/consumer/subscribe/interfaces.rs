//! The interface level of a subscription whose migration step reads it (see
//! [`MigrationStep`](crate::consumer::MigrationStep)): one follow of the interface's
//! provider URLs through the backend's [`InterfaceProviders`](crate::backend::InterfaceProviders),
//! run on a task of its own that hands each whole set to the subscription's task, follows
//! again after a broken watch (exponential backoff with jitter, on tokio's clock), and stops
//! for good on a permanent refusal (a backend without an interface level, credentials).
//!
//! One follow per subscription: interface-level subscriptions are few (a fleet mid-migration,
//! a consumer pinned to the interface level), and their reads are one list per change.
//! The subscription counts the URLs skipped and those it cannot call at each set.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::backend::{Backend, InterfaceKey, ProviderUrls};
use crate::backoff::Backoff;
use crate::consumer::explain::InterfaceFindings;
use crate::consumer::hosts::HostNames;
use crate::consumer::interface_endpoints::{InterfaceSet, interface_key, interface_set};
use crate::consumer::stats::Counters;
use crate::consumer::subscription::Subscription;
use crate::error::Error;
use crate::governance::migration::MigrationStep;
use crate::limits::Limits;
use crate::model::ProviderUrl;

/// First delay before following again after a broken follow.
const RETRY_BASE: Duration = Duration::from_millis(200);
/// Longest delay between follows.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// What the follow hands the subscription.
pub(super) enum InterfaceUpdate {
    /// The whole set, as one read saw it.
    Set(ProviderUrls),
    /// The interface level cannot be read, for good.
    Refused(Arc<Error>),
}

/// The interface level as a subscription holds it.
pub(super) struct InterfaceLevel {
    updates: mpsc::Receiver<InterfaceUpdate>,
    follow: tokio::task::JoinHandle<()>,
    counters: Arc<Counters>,
    /// The URLs of the last set.
    urls: Vec<ProviderUrl>,
    /// How many URLs of the last set did not read.
    skipped: usize,
    /// Whether a set arrived (or the level was refused).
    pub synced: bool,
    /// Why the level cannot be read, when it cannot.
    pub refused: Option<Arc<Error>>,
    /// The set built from the last URLs for the subscription (`None`: build again).
    built: Option<InterfaceSet>,
}

impl InterfaceLevel {
    /// Starts following the interface level of `subscription` on `backend`.
    pub fn start(
        backend: Backend,
        subscription: &Subscription,
        limits: Limits,
        counters: Arc<Counters>,
    ) -> Self {
        let key = interface_key(subscription);
        let (to, updates) = mpsc::channel(4);
        Counters::add(&counters.interface_follows, 1);
        let follow = tokio::spawn(follow(backend, key, limits, to, counters.clone()));
        InterfaceLevel {
            updates,
            follow,
            counters,
            urls: Vec::new(),
            skipped: 0,
            synced: false,
            refused: None,
            built: None,
        }
    }

    /// The next update; pending forever once the follow stopped.
    pub async fn next(&mut self) -> InterfaceUpdate {
        match self.updates.recv().await {
            Some(update) => update,
            None => std::future::pending().await,
        }
    }

    /// Takes an update; returns the refusal when it is one.
    pub fn on_update(&mut self, update: InterfaceUpdate) -> Option<Arc<Error>> {
        self.synced = true;
        match update {
            InterfaceUpdate::Set(set) => {
                Counters::add(
                    &self.counters.skipped_provider_urls,
                    set.skipped.len() as u64,
                );
                for (url, reason) in &set.skipped {
                    tracing::debug!(%url, %reason, "interface-level provider URL skipped");
                }
                self.skipped = set.skipped.len();
                self.urls = set.urls;
                self.built = None;
                None
            }
            InterfaceUpdate::Refused(error) => {
                self.refused = Some(error.clone());
                Some(error)
            }
        }
    }

    /// The set of `subscription`, built once per set read.
    pub fn set(&mut self, subscription: &Subscription, hosts: &HostNames) -> &InterfaceSet {
        let counters = &self.counters;
        let urls = &self.urls;
        self.built.get_or_insert_with(|| {
            let set = interface_set(urls, subscription, hosts);
            Counters::add(&counters.uncallable_provider_urls, set.uncallable as u64);
            set
        })
    }

    /// What the level offers, for an explanation.
    pub fn findings(&self, step: MigrationStep) -> InterfaceFindings {
        let mut findings = match &self.built {
            Some(set) => set.findings(step, self.skipped),
            None => InterfaceFindings {
                step,
                skipped: self.skipped,
                ..InterfaceFindings::default()
            },
        };
        findings.read = self.synced;
        findings.refused = self.refused.as_ref().map(|e| e.to_string());
        findings
    }
}

impl Drop for InterfaceLevel {
    fn drop(&mut self) {
        self.follow.abort();
        Counters::sub(&self.counters.interface_follows, 1);
    }
}

/// Follows `key` until the subscription goes, following again after a broken follow.
async fn follow(
    backend: Backend,
    key: InterfaceKey,
    limits: Limits,
    to: mpsc::Sender<InterfaceUpdate>,
    counters: Arc<Counters>,
) {
    let mut backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    loop {
        let error = match backend.interface_providers().follow(&key, &limits).await {
            Ok(mut follow) => loop {
                match follow.next().await {
                    Ok(set) => {
                        backoff.reset();
                        if to.send(InterfaceUpdate::Set(set)).await.is_err() {
                            return;
                        }
                    }
                    Err(error) => break error,
                }
            },
            Err(error) => error,
        };
        if error.is_permanent() {
            let _ = to.send(InterfaceUpdate::Refused(Arc::new(error))).await;
            return;
        }
        Counters::bump(&counters.watch_restarts);
        tracing::debug!(interface = %key.interface, %error, "interface-level follow ended; following again");
        tokio::select! {
            () = to.closed() => return,
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
}
