//! Health and self-preservation once per resolver: many subscriptions of one app share
//! one hold and one probe per instance. Paused clock, injected probe, no sockets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::records::{HOUR, ORDERS, Records, orders};
use crate::support::wait::settle;
use introspect::consumer::HealthOptions;
use introspect::{MemoryStore, Resolver, Subscription};

const PROBE_INTERVAL: Duration = Duration::from_secs(5);
const SUBSCRIPTIONS: usize = 50;

/// A probe that never gets an answer, counting its calls per address.
#[derive(Clone, Default)]
struct CountingProbe {
    calls: Arc<Mutex<HashMap<String, u64>>>,
}

impl CountingProbe {
    fn options(&self) -> HealthOptions {
        let probe = self.clone();
        HealthOptions::default()
            .probe_interval(PROBE_INTERVAL)
            .probe(move |address: String, _timeout: Duration| {
                *probe.calls.lock().unwrap().entry(address).or_default() += 1;
                async { false }
            })
    }

    /// (addresses probed, the most probes of one address).
    fn counts(&self) -> (usize, u64) {
        let calls = self.calls.lock().unwrap();
        (calls.len(), calls.values().copied().max().unwrap_or(0))
    }
}

#[tokio::test(start_paused = true)]
async fn fifty_subscriptions_of_one_app_hold_once_and_probe_each_held_instance_once() {
    let records = Records::new(Arc::new(MemoryStore::new()));
    let leases = records.fleet(&orders("shop-a"), 1000, 20, HOUR).await;
    let probe = CountingProbe::default();
    let resolver = Resolver::builder(records.store.clone())
        .health(probe.options())
        .build();
    let mut handles = Vec::new();
    for _ in 0..SUBSCRIPTIONS {
        handles.push(resolver.subscribe(Subscription::new(ORDERS)).await.unwrap());
    }
    // A partition, as the store sees it: 15 of 20 leases go.
    for lease in &leases[..15] {
        records.store.revoke_lease(*lease).await.unwrap();
    }
    settle().await;
    let stats = resolver.stats().await;
    assert_eq!(
        stats.held_removals, 15,
        "one hold per app, not per subscription"
    );
    assert_eq!(stats.protected_apps, 1);
    for handle in &handles {
        assert!(handle.protection_active());
        assert_eq!(handle.current().len(), 20, "the view keeps listing them");
        let aside = handle
            .current()
            .iter()
            .filter(|e| handle.is_set_aside(e))
            .count();
        assert_eq!(aside, 15, "held and unanswered: marked, out of channels");
    }
    // Probed at once, once each, whatever the number of subscriptions.
    assert_eq!(probe.counts(), (15, 1));
    tokio::time::advance(PROBE_INTERVAL).await;
    settle().await;
    assert_eq!(probe.counts(), (15, 2), "then once per interval");
}
