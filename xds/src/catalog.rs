//! The services this server follows: one resolver subscription per service, created when a
//! client first asks for it (or when the server is told to follow it up front), kept while
//! the server runs, with the rules of its channels followed live beside it. Each service's
//! [`Translation`] is made again whenever its endpoints, health's verdicts or its rules
//! change, or a warming provider's weight grows by a step; a changed one bumps the change
//! signal every stream waits on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use introspect::consumer::HealthOptions;
use introspect::governance::RuleSet;
use introspect::{Endpoint, Resolver, Subscription, SubscriptionHandle};
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::callable::grpc_callable;
use crate::translate::{Input, Translation, translate, until};

/// How long following a service waits for the config centre's first answer on its rules
/// (the rules watcher itself gives up after half a second and routes without them).
const RULES_WAIT: Duration = Duration::from_secs(1);

/// One followed service.
#[derive(Default)]
struct Entry {
    /// Whether the subscription was made; `false` inside when the store refused it.
    followed: OnceCell<bool>,
    /// Whether a gRPC-callable endpoint of it was ever seen: from then on the service
    /// exists (its Listener and Cluster are served, its endpoints possibly none).
    seen: AtomicBool,
    /// Its translation now.
    translation: Mutex<Option<Arc<Translation>>>,
}

/// The followed services and a generation counter bumped on every change of any of them.
pub(crate) struct Catalog {
    resolver: Resolver,
    outliers: HealthOptions,
    max_services: usize,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    generation: watch::Sender<u64>,
    forwarders: Mutex<Vec<JoinHandle<()>>>,
}

impl Catalog {
    /// A catalog over `resolver`, following at most `max_services` names, sending
    /// `outliers` as each cluster's outlier detection.
    pub(crate) fn new(resolver: Resolver, max_services: usize, outliers: HealthOptions) -> Self {
        Catalog {
            resolver,
            outliers,
            max_services,
            entries: Mutex::default(),
            generation: watch::Sender::new(0),
            forwarders: Mutex::default(),
        }
    }

    /// A receiver that changes whenever the translation of a followed service changes.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Follows `service` (no-op when followed already). Returns false when it cannot be
    /// followed: an invalid name, or the limit on followed services reached.
    pub(crate) async fn follow(&self, service: &str) -> bool {
        // Checked before the name takes a place: names that are no service must not use up
        // the limit and shut out real ones.
        if let Err(e) = Subscription::new(service).validate() {
            tracing::debug!(service, error = %e, "xDS: a name that is no service");
            return false;
        }
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            match entries.get(service) {
                Some(entry) => entry.clone(),
                None if entries.len() >= self.max_services => {
                    tracing::warn!(
                        service,
                        limit = self.max_services,
                        "xDS: not following another service: the limit is reached"
                    );
                    return false;
                }
                None => entries.entry(service.to_owned()).or_default().clone(),
            }
        };
        *entry
            .followed
            .get_or_init(|| self.subscribe(service, entry.clone()))
            .await
    }

    async fn subscribe(&self, service: &str, entry: Arc<Entry>) -> bool {
        let handle = match self.resolver.subscribe(Subscription::new(service)).await {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(service, error = %e, "xDS: cannot follow the service");
                return false;
            }
        };
        let mut rules = self.resolver.rules_watch(&handle);
        let _ = tokio::time::timeout(RULES_WAIT, rules.wait_for(|r| r.is_loaded())).await;
        let mut follower = Follower {
            service: service.to_owned(),
            consumer: self.resolver.consumer_for(&handle),
            outliers: self.outliers.clone(),
            handle,
            rules,
            entry,
            generation: self.generation.clone(),
        };
        // The first translation is in place before the first response is built.
        let mut next_ramp = follower.translate();
        let forwarder = tokio::spawn(async move {
            let mut endpoints = follower.handle.clone();
            let mut health = follower.handle.health_watch();
            loop {
                let ramp = async {
                    match next_ramp {
                        Some(at) => tokio::time::sleep(until(at, now_ms())).await,
                        None => std::future::pending().await,
                    }
                };
                // A client is told again when the set changes, when health sets an
                // endpoint aside or brings one back, when a rule changes, and as a warming
                // provider's weight grows.
                tokio::select! {
                    changed = endpoints.changed() => if changed.is_err() {
                        return;
                    },
                    Ok(()) = health.changed() => {}
                    changed = follower.rules.changed() => if changed.is_err() {
                        return;
                    },
                    () = ramp => {}
                }
                next_ramp = follower.translate();
            }
        });
        self.forwarders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(forwarder);
        true
    }

    /// The translation of `service` if it exists (a callable endpoint was seen since it
    /// is followed), else `None`: an unknown or never-callable service does not exist.
    pub(crate) fn view(&self, service: &str) -> Option<Arc<Translation>> {
        let entry = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(service)
            .cloned()?;
        if !entry.seen.load(Ordering::Relaxed) {
            return None;
        }
        entry
            .translation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every followed service that exists, sorted (what a wildcard subscription gets).
    pub(crate) fn existing(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, e)| e.seen.load(Ordering::Relaxed))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }
}

/// What follows one service: its subscription, its rules, and where its translation goes.
struct Follower {
    service: String,
    consumer: introspect::governance::ConsumerIdentity,
    outliers: HealthOptions,
    handle: SubscriptionHandle,
    rules: watch::Receiver<Arc<RuleSet>>,
    entry: Arc<Entry>,
    generation: watch::Sender<u64>,
}

impl Follower {
    /// Translates the service as it stands, stores the translation and tells the streams
    /// when it changed; when it is due again for a warming provider.
    fn translate(&mut self) -> Option<i64> {
        let endpoints: Vec<Endpoint> = self
            .handle
            .healthy()
            .into_iter()
            .filter(grpc_callable)
            .collect();
        if !endpoints.is_empty() {
            self.entry.seen.store(true, Ordering::Relaxed);
        }
        let rules = self.rules.borrow_and_update().clone();
        let translation = translate(&Input {
            service: &self.service,
            endpoints: &endpoints,
            rules: &rules,
            consumer: &self.consumer,
            outliers: &self.outliers,
            now_ms: now_ms(),
        });
        let next = translation.next_ramp_ms;
        let changed = {
            let mut current = self
                .entry
                .translation
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let changed = current.as_deref() != Some(&*translation);
            if changed {
                *current = Some(translation);
            }
            changed
        };
        if changed {
            self.generation.send_modify(|g| *g = g.wrapping_add(1));
        }
        next
    }
}

impl Drop for Catalog {
    fn drop(&mut self) {
        for forwarder in self
            .forwarders
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            forwarder.abort();
        }
    }
}

/// The wall clock in ms since the epoch, as providers write their start time.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use introspect::consumer::HealthOptions;
    use introspect::{MemoryStore, Resolver};

    use super::Catalog;

    #[tokio::test]
    async fn names_that_are_no_service_do_not_use_up_the_limit() {
        let resolver = Resolver::new(Arc::new(MemoryStore::new()));
        let catalog = Catalog::new(resolver, 1, HealthOptions::default());
        for junk in ["", "has space", "a/b", &"x".repeat(100_000)] {
            assert!(!catalog.follow(junk).await, "{junk:.20} is followed");
        }
        assert!(catalog.follow("helloworld.Greeter").await);
        assert!(!catalog.follow("helloworld.Other").await, "over the limit");
    }
}
