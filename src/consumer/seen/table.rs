//! What the live subscriptions of one resolver see, as its consumer record lists them:
//! each subscription's task writes its entry after a push, the record task reads them all.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::consumer::subscription::Subscription;
use crate::model::ConsumedService;

/// See the module docs. Its version moves on every change that the record shows.
pub(crate) struct Seen {
    entries: Mutex<BTreeMap<u64, ConsumedService>>,
    version: watch::Sender<u64>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            entries: Mutex::new(BTreeMap::new()),
            version: watch::channel(0).0,
        }
    }
}

impl Seen {
    /// Sets what subscription `id` holds: its endpoint digest, their number and the
    /// registry position it has seen, at wall-clock `now_ms`. The digest's time moves only
    /// when the digest changes; the version only when something the record shows changed.
    pub fn update(
        &self,
        id: u64,
        subscription: &Subscription,
        digest: String,
        endpoints: u64,
        position: i64,
        now_ms: u64,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let changed = match entries.get_mut(&id) {
            Some(known) => {
                let changed = known.digest != digest
                    || known.endpoints != endpoints
                    || known.position != position;
                if known.digest != digest {
                    known.changed_ms = now_ms;
                }
                known.digest = digest;
                known.endpoints = endpoints;
                known.position = position;
                changed
            }
            None => {
                let qualifier = |q: &Option<String>| q.clone().unwrap_or_default();
                entries.insert(
                    id,
                    ConsumedService {
                        interface: subscription.interface.clone(),
                        group: qualifier(&subscription.group),
                        version: qualifier(&subscription.version),
                        protocol: qualifier(&subscription.protocol),
                        digest,
                        endpoints,
                        position,
                        changed_ms: now_ms,
                    },
                );
                true
            }
        };
        drop(entries);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Subscription `id` ended.
    pub fn remove(&self, id: u64) {
        let removed = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
            .is_some();
        if removed {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Every live subscription's entry, by interface, group, version and protocol.
    pub fn services(&self) -> Vec<ConsumedService> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut services: Vec<ConsumedService> = entries.values().cloned().collect();
        services.sort_by(|a, b| {
            (&a.interface, &a.group, &a.version, &a.protocol, &a.digest).cmp(&(
                &b.interface,
                &b.group,
                &b.version,
                &b.protocol,
                &b.digest,
            ))
        });
        services
    }

    /// A receiver that sees every change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_record_shows_counts_as_a_change() {
        let seen = Seen::default();
        let mut changes = seen.changes();
        let s = Subscription::new("shop.OrderService").version("1.0");
        seen.update(1, &s, "aa".into(), 1, 5, 100);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        seen.update(1, &s, "aa".into(), 1, 5, 200);
        assert!(!changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].changed_ms, 100);
        // A new position alone is a change, but the digest's time stays.
        seen.update(1, &s, "aa".into(), 1, 6, 300);
        assert!(changes.has_changed().unwrap());
        assert_eq!(seen.services()[0].changed_ms, 100);
        seen.update(1, &s, "bb".into(), 2, 6, 400);
        let services = seen.services();
        assert_eq!((services[0].changed_ms, services[0].endpoints), (400, 2));
        assert_eq!(services[0].version, "1.0");
        assert_eq!(services[0].group, "");
        changes.borrow_and_update();
        seen.remove(1);
        assert!(changes.has_changed().unwrap());
        assert!(seen.services().is_empty());
    }
}
