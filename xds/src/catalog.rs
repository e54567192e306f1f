//! The services this server follows: one resolver subscription per service, created when a
//! client first asks for it (or when the server is told to follow it up front), kept while
//! the server runs, with the rules of its channels followed live beside it. Each service's
//! [`Translation`] is made again whenever its endpoints, health's verdicts or its rules
//! change, or a warming provider's weight grows by a step; a changed one bumps the change
//! signal every stream waits on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use introspect::consumer::HealthOptions;
use introspect::governance::{ConsumerIdentity, RuleSet};
use introspect::{Endpoint, Resolver, Subscription, SubscriptionHandle};
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::callable::grpc_callable;
use crate::node::NodeFacts;
use crate::translate::{Input, Translation, translate, until};

/// How long following a service waits for the config centre's first answer on its rules
/// (the rules watcher itself gives up after half a second and routes without them).
const RULES_WAIT: Duration = Duration::from_secs(1);

/// The most per-client translations kept per service (clients saying who they are, by
/// what they say); past it they are made again as asked.
const MAX_NODE_TRANSLATIONS: usize = 256;
/// The most consumer apps whose own rules are followed per service for clients naming
/// them; a client naming another is routed by the server's app's rules.
const MAX_NODE_APPS: usize = 32;

/// What a service's translation was made of, kept for the clients that say who they are.
struct Inputs {
    endpoints: Vec<Endpoint>,
    consumer: ConsumerIdentity,
    rules: Arc<RuleSet>,
    now_ms: i64,
}

/// One followed service.
#[derive(Default)]
struct Entry {
    /// Whether the subscription was made; `false` inside when the store refused it.
    followed: OnceCell<bool>,
    /// The subscription, once made.
    handle: OnceLock<SubscriptionHandle>,
    /// Whether a gRPC-callable endpoint of it was ever seen: from then on the service
    /// exists (its Listener and Cluster are served, its endpoints possibly none).
    seen: AtomicBool,
    /// Its translation now, for the server's consumer.
    translation: Mutex<Option<Arc<Translation>>>,
    /// What that translation was made of.
    inputs: Mutex<Option<Arc<Inputs>>>,
    /// Translations for clients that say who they are, by what they say; cleared when
    /// anything they were made of changes.
    per_node: Mutex<HashMap<NodeFacts, Arc<Translation>>>,
    /// The rules of the consumer apps clients named, followed live.
    app_rules: Mutex<HashMap<String, watch::Receiver<Arc<RuleSet>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
        let _ = entry.handle.set(handle.clone());
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

    /// The translation of `service` for a client that says `facts` of itself: the
    /// server's own ([`view`](Self::view)) unless what it says changes its routing (it
    /// names another consumer app, or the rules read who the consumer is: conditions on
    /// its URL, configurators matching its app or address).
    pub(crate) async fn view_for(
        &self,
        service: &str,
        facts: &NodeFacts,
    ) -> Option<Arc<Translation>> {
        let default = self.view(service)?;
        let entry = lock(&self.entries).get(service).cloned()?;
        let Some(inputs) = lock(&entry.inputs).clone() else {
            return Some(default);
        };
        let other_app = facts
            .app
            .as_ref()
            .filter(|app| **app != inputs.consumer.app);
        let rules = match other_app {
            Some(app) => self.rules_of_app(&entry, app).await,
            None => inputs.rules.clone(),
        };
        let reads_consumer = !rules.reads().consumer.is_empty() || rules.has_configurators();
        if other_app.is_none() && !reads_consumer {
            return Some(default);
        }
        if let Some(found) = lock(&entry.per_node).get(facts) {
            return Some(found.clone());
        }
        let consumer = facts.apply(&inputs.consumer);
        let translation = translate(&Input {
            service,
            endpoints: &inputs.endpoints,
            rules: &rules,
            consumer: &consumer,
            outliers: &self.outliers,
            now_ms: inputs.now_ms,
        });
        let mut per_node = lock(&entry.per_node);
        if per_node.len() >= MAX_NODE_TRANSLATIONS {
            per_node.clear();
        }
        per_node.insert(facts.clone(), translation.clone());
        Some(translation)
    }

    /// The rules of `service` for a consumer of `app`, followed from the first client
    /// naming it (waiting for the config centre's first answer then).
    async fn rules_of_app(&self, entry: &Arc<Entry>, app: &str) -> Arc<RuleSet> {
        if let Some(rules) = lock(&entry.app_rules).get(app) {
            return rules.borrow().clone();
        }
        let server_rules = || {
            lock(&entry.inputs)
                .as_ref()
                .map_or_else(|| Arc::new(RuleSet::none()), |i| i.rules.clone())
        };
        let Some(handle) = entry.handle.get() else {
            return server_rules();
        };
        if lock(&entry.app_rules).len() >= MAX_NODE_APPS {
            tracing::warn!(
                app,
                limit = MAX_NODE_APPS,
                "xDS: a client names a consumer app past the limit: routed by the server's \
                 app's rules"
            );
            return server_rules();
        }
        let mut rules = self.resolver.rules_watch_as(handle, app);
        let _ = tokio::time::timeout(RULES_WAIT, rules.wait_for(|r| r.is_loaded())).await;
        let now = rules.borrow_and_update().clone();
        lock(&entry.app_rules).insert(app.to_owned(), rules.clone());
        // When that app's rules change, its clients' translations are made again.
        let (entry_now, generation) = (entry.clone(), self.generation.clone());
        let forwarder = tokio::spawn(async move {
            while rules.changed().await.is_ok() {
                lock(&entry_now.per_node).clear();
                generation.send_modify(|g| *g = g.wrapping_add(1));
            }
        });
        lock(&self.forwarders).push(forwarder);
        now
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
    consumer: ConsumerIdentity,
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
        let now = now_ms();
        let translation = translate(&Input {
            service: &self.service,
            endpoints: &endpoints,
            rules: &rules,
            consumer: &self.consumer,
            outliers: &self.outliers,
            now_ms: now,
        });
        let next = translation.next_ramp_ms;
        *lock(&self.entry.inputs) = Some(Arc::new(Inputs {
            endpoints,
            consumer: self.consumer.clone(),
            rules,
            now_ms: now,
        }));
        let had_clients = {
            let mut per_node = lock(&self.entry.per_node);
            let had = !per_node.is_empty();
            per_node.clear();
            had
        };
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
        // Clients with translations of their own are told too: theirs are made again.
        if changed || had_clients {
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
