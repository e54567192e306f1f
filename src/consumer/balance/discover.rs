//! A subscription as a stream of [`tower::discover::Change`]s, for users who build their own
//! balancer (and the base of the balanced channel).
//!
//! Each distinct dialable address of the endpoint set (its [`Authority`]: `host:port`, IPv6
//! hosts in brackets, the key health uses too) is one key: an address that appears is an [`Change::Insert`] carrying its first endpoint
//! (in the set's order), one that goes is a [`Change::Remove`]. Several services (or
//! protocols) on one address are one key, and an address stays inserted while any of them
//! remains. When the instance at an address publishes a new revision (say with another
//! weight or tag) or restarts, the address is inserted again with its new first endpoint:
//! as in `tower::discover`, an insertion of a present key replaces its value. Within one published set, insertions come before removals, so a balancer that
//! follows the stream never goes through an empty state when a set is replaced whole.
//!
//! The stream follows exactly what the subscription publishes, so it inherits its
//! protections (held removals stay, a failed store read never empties it, endpoints set
//! aside by consumer-side health leave and come back). Like a
//! [`SubscriptionHandle`](crate::SubscriptionHandle), the stream keeps the subscription
//! live while it exists.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{self, BoxStream, Stream, StreamExt as _};
use tokio::sync::watch;
pub use tower::discover::Change;

use crate::model::{Authority, Endpoint};

/// The endpoint changes of a subscription, one key per distinct [`Authority`], insertions
/// before removals within one published set.
///
/// A [`Stream`] of `Result<Change<Authority, Endpoint>, Infallible>`, and so a
/// [`tower::discover::Discover`] once its values are turned into services (for example
/// with `StreamExt::map`).
pub struct Discovery {
    inner: BoxStream<'static, Result<Change<Authority, Endpoint>, Infallible>>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery").finish_non_exhaustive()
    }
}

impl Stream for Discovery {
    type Item = Result<Change<Authority, Endpoint>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Discovery {
    /// The changes of the sets `receiver` sees, starting with its current one.
    pub(crate) fn new(receiver: watch::Receiver<Arc<Vec<Endpoint>>>) -> Self {
        let sets = stream::unfold((receiver, true), |(mut receiver, first)| async move {
            if !first {
                receiver.changed().await.ok()?;
            }
            let set = receiver.borrow_and_update().clone();
            Some((set, (receiver, false)))
        });
        let changes = sets
            .scan(BTreeMap::new(), |current, set| {
                let changes = diff(current, &set);
                std::future::ready(Some(stream::iter(changes.into_iter().map(Ok))))
            })
            .flatten();
        Discovery {
            inner: changes.boxed(),
        }
    }
}

/// The changes that turn `current` (address → first endpoint) into the addresses of
/// `next`, insertions first; updates `current`.
fn diff(
    current: &mut BTreeMap<Authority, Endpoint>,
    next: &[Endpoint],
) -> Vec<Change<Authority, Endpoint>> {
    let mut wanted: BTreeMap<Authority, &Endpoint> = BTreeMap::new();
    for endpoint in next {
        wanted.entry(endpoint.authority()).or_insert(endpoint);
    }
    let mut changes = Vec::new();
    for (address, endpoint) in &wanted {
        let changed = current.get(address).is_none_or(|old| {
            old.revision != endpoint.revision || old.timestamp != endpoint.timestamp
        });
        if changed {
            current.insert(address.clone(), (*endpoint).clone());
            changes.push(Change::Insert(address.clone(), (*endpoint).clone()));
        }
    }
    let gone: Vec<Authority> = current
        .keys()
        .filter(|a| !wanted.contains_key(*a))
        .cloned()
        .collect();
    for address in gone {
        current.remove(&address);
        changes.push(Change::Remove(address));
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn endpoint(host: &str, port: u16, service: &str) -> Endpoint {
        Endpoint {
            app: "a".into(),
            host: host.into(),
            port,
            instance_port: port,
            protocol: "tri".into(),
            revision: "r".into(),
            service: Arc::new(ServiceInfo::new(service)),
            timestamp: 0,
        }
    }

    fn keys(changes: &[Change<Authority, Endpoint>]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Insert(k, _) => format!("+{k}"),
                Change::Remove(k) => format!("-{k}"),
            })
            .collect()
    }

    #[test]
    fn one_key_per_address_and_insertions_before_removals() {
        let mut current = BTreeMap::new();
        let first = [
            endpoint("10.0.0.1", 1, "a.A"),
            endpoint("10.0.0.1", 1, "a.B"),
            endpoint("::1", 7, "a.A"),
        ];
        assert_eq!(
            keys(&diff(&mut current, &first)),
            ["+10.0.0.1:1", "+[::1]:7"]
        );
        assert!(diff(&mut current, &first).is_empty(), "nothing changed");
        // One service of an address leaves: the address stays.
        let fewer = [endpoint("10.0.0.1", 1, "a.B"), endpoint("::1", 7, "a.A")];
        assert!(diff(&mut current, &fewer).is_empty());
        // A whole replacement: the newcomer first, then the removals.
        let replaced = [endpoint("10.0.0.2", 1, "a.A")];
        assert_eq!(
            keys(&diff(&mut current, &replaced)),
            ["+10.0.0.2:1", "-10.0.0.1:1", "-[::1]:7"]
        );
        assert_eq!(current.len(), 1);
        // The same address in a new revision: inserted again, with its new endpoint.
        let mut revised = endpoint("10.0.0.2", 1, "a.A");
        revised.revision = "r2".into();
        let changes = diff(&mut current, &[revised]);
        assert_eq!(keys(&changes), ["+10.0.0.2:1"]);
        assert!(matches!(&changes[0], Change::Insert(_, e) if &*e.revision == "r2"));
    }

    #[tokio::test]
    async fn the_stream_starts_with_the_current_set_and_follows_it() {
        let (tx, rx) = watch::channel(Arc::new(vec![endpoint("10.0.0.1", 1, "a.A")]));
        let mut discovery = Discovery::new(rx);
        let first = discovery.next().await.unwrap().unwrap();
        assert!(matches!(first, Change::Insert(ref k, _) if k.as_str() == "10.0.0.1:1"));
        tx.send_replace(Arc::new(vec![endpoint("10.0.0.2", 1, "a.A")]));
        let keys: Vec<String> = [
            discovery.next().await.unwrap().unwrap(),
            discovery.next().await.unwrap().unwrap(),
        ]
        .iter()
        .map(|c| match c {
            Change::Insert(k, _) => format!("+{k}"),
            Change::Remove(k) => format!("-{k}"),
        })
        .collect();
        assert_eq!(keys, ["+10.0.0.2:1", "-10.0.0.1:1"]);
        drop(tx);
        assert!(
            discovery.next().await.is_none(),
            "ends with the subscription"
        );
    }
}
