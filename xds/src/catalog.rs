//! The services this server follows: one resolver subscription per service, created when a
//! client first asks for it (or when the server is told to follow it up front), kept while
//! the server runs. The subscriptions share the resolver's per-app views and protections,
//! so what a client is told is what the resolver itself holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use introspect::{Endpoint, Resolver, Subscription, SubscriptionHandle};
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::resources::grpc_callable;

/// One followed service.
#[derive(Default)]
struct Entry {
    /// The subscription, once made; `None` inside when the store refused it.
    handle: OnceCell<Option<SubscriptionHandle>>,
    /// Whether a gRPC-callable endpoint of it was ever seen: from then on the service
    /// exists (its Listener and Cluster are served, its endpoints possibly none).
    seen: Arc<AtomicBool>,
}

/// The followed services and a generation counter bumped on every change of any of them.
pub(crate) struct Catalog {
    resolver: Resolver,
    max_services: usize,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    generation: watch::Sender<u64>,
    forwarders: Mutex<Vec<JoinHandle<()>>>,
}

impl Catalog {
    /// A catalog over `resolver`, following at most `max_services` names.
    pub(crate) fn new(resolver: Resolver, max_services: usize) -> Self {
        Catalog {
            resolver,
            max_services,
            entries: Mutex::default(),
            generation: watch::Sender::new(0),
            forwarders: Mutex::default(),
        }
    }

    /// A receiver that changes whenever the endpoints of a followed service change.
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
        let handle = entry
            .handle
            .get_or_init(|| self.subscribe(service, entry.seen.clone()))
            .await;
        handle.is_some()
    }

    async fn subscribe(&self, service: &str, seen: Arc<AtomicBool>) -> Option<SubscriptionHandle> {
        let handle = match self.resolver.subscribe(Subscription::new(service)).await {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(service, error = %e, "xDS: cannot follow the service");
                return None;
            }
        };
        mark_seen(&seen, &handle.current());
        let mut watching = handle.clone();
        let mut health = handle.health_watch();
        let generation = self.generation.clone();
        // A client is told again when the set changes and when health sets an endpoint
        // aside or brings one back.
        let forwarder = tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = watching.changed() => match changed {
                        Ok(endpoints) => mark_seen(&seen, &endpoints),
                        Err(_) => return,
                    },
                    Ok(()) = health.changed() => {}
                }
                generation.send_modify(|g| *g = g.wrapping_add(1));
            }
        });
        self.forwarders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(forwarder);
        // Whoever waits on the generation now sees the new service's endpoints too.
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
        Some(handle)
    }

    /// The gRPC-callable endpoints of `service` as health leaves them (see
    /// [`SubscriptionHandle::healthy`]) if it exists (a callable endpoint was seen since it
    /// is followed), else `None`: an unknown or never-callable service does not exist.
    pub(crate) fn view(&self, service: &str) -> Option<Vec<Endpoint>> {
        let entry = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(service)
            .cloned()?;
        let handle = entry.handle.get()?.as_ref()?;
        let endpoints: Vec<Endpoint> = handle.healthy().into_iter().filter(grpc_callable).collect();
        if !endpoints.is_empty() {
            entry.seen.store(true, Ordering::Relaxed);
        }
        entry.seen.load(Ordering::Relaxed).then_some(endpoints)
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

fn mark_seen(seen: &AtomicBool, endpoints: &[Endpoint]) {
    if endpoints.iter().any(grpc_callable) {
        seen.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use introspect::{MemoryStore, Resolver};

    use super::Catalog;

    #[tokio::test]
    async fn names_that_are_no_service_do_not_use_up_the_limit() {
        let catalog = Catalog::new(Resolver::new(Arc::new(MemoryStore::new())), 1);
        for junk in ["", "has space", "a/b", &"x".repeat(100_000)] {
            assert!(!catalog.follow(junk).await, "{junk:.20} is followed");
        }
        assert!(catalog.follow("helloworld.Greeter").await);
        assert!(!catalog.follow("helloworld.Other").await, "over the limit");
    }
}
