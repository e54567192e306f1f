//! What self-preservation holds takes no call until it answers, whatever the address looks
//! like: the endpoints of a held instance are known by the same address as its hold, for
//! IPv6 hosts and for services on another port than the instance's. And a provider that
//! was set aside, left the registry and came back takes calls again.
//!
//! Real Greeter servers on loopback, registered in the embedded store under short leases;
//! calls counted through the balanced channel.

use std::sync::Arc;
use std::time::Duration;

use crate::support::calls::{Caller, channel_over};
use crate::support::greeter::is_registered;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::killable::{GREETER, Killable, greeter_info};
use crate::support::records::Records;
use crate::support::wait::eventually;
use introspect::consumer::{HealthOptions, ProtectionOptions};
use introspect::{MemoryStore, Resolver, Store, Subscription};

/// The instances' lease TTL.
const TTL: Duration = Duration::from_secs(1);
/// The probe interval of set-aside endpoints.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// The longest hold.
const MAX_HOLD: Duration = Duration::from_secs(4);
const LIMIT: Duration = Duration::from_secs(20);

/// How a fleet's instances are registered.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// On `[::1]`.
    Ipv6,
    /// On `127.0.0.1`, the Greeter on another port than the instance's.
    OwnInstancePort,
}

async fn fleet(records: &Records, shape: Shape, size: usize) -> Vec<Killable> {
    let info = greeter_info("greeter");
    records.publish(&info).await;
    let mut nodes = Vec::new();
    for _ in 0..size {
        nodes.push(match shape {
            Shape::Ipv6 => Killable::register_ipv6(records, &info, TTL).await,
            Shape::OwnInstancePort => {
                Killable::register_with_instance_port(records, &info, TTL).await
            }
        });
    }
    nodes
}

/// Six of eight providers crash while the consumer makes no call; once their removals are
/// held, calls start: none fails, because every endpoint of a held instance is set aside
/// until it answers a probe (and the dead never do). After the hold, nothing stays set
/// aside and probing stops.
async fn a_held_mass_crash_costs_no_call(shape: Shape) {
    if matches!(shape, Shape::Ipv6) && std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("SKIPPED: no IPv6 loopback on this machine");
        return;
    }
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let records = Records::new(store.clone());
    let mut nodes = fleet(&records, shape, 8).await;
    let resolver = Resolver::builder(store.clone())
        .protection(ProtectionOptions::default().max_hold(MAX_HOLD))
        .health(HealthOptions::default().probe_interval(PROBE_INTERVAL))
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 8);
    let channel = channel_over(&resolver, &handle, 8).await;

    for node in &mut nodes[..6] {
        node.kill();
    }
    eventually(LIMIT, "the six expiries held", || async {
        resolver.stats().await.held_removals == 6
    })
    .await;
    eventually(LIMIT, "the hold keeping them listed", || async {
        handle.current().len() == 8
    })
    .await;
    assert!(handle.protection_active());

    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls during the hold", || async {
        caller.ok() >= 100
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{shape:?}: {ok} calls, failures: {errors:?}");
    let answered: u64 = nodes[6..].iter().map(Killable::calls).sum();
    assert_eq!(answered, ok, "every call reached a live provider");

    eventually(LIMIT, "the hold released", || async {
        handle.current().len() == 2
    })
    .await;
    eventually(LIMIT, "nothing left set aside", || async {
        resolver.stats().await.set_aside_addresses == 0
    })
    .await;
    let probes = resolver.stats().await.probes;
    tokio::time::sleep(PROBE_INTERVAL * 4).await;
    assert_eq!(
        resolver.stats().await.probes,
        probes,
        "no probe of the dead after the hold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_mass_crash_of_ipv6_providers_costs_no_call() {
    a_held_mass_crash_costs_no_call(Shape::Ipv6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_mass_crash_of_providers_serving_on_another_port_costs_no_call() {
    a_held_mass_crash_costs_no_call(Shape::OwnInstancePort).await;
}

/// A probe that calls the Greeter, as a gRPC health check would: a paused process accepts
/// connections but answers nothing, so it fails.
async fn greeter_answers(address: String, timeout: Duration) -> bool {
    let call = async {
        let mut client = GreeterClient::connect(format!("http://{address}"))
            .await
            .ok()?;
        let request = HelloRequest {
            name: "probe".into(),
        };
        client.say_hello(request).await.ok()
    };
    matches!(tokio::time::timeout(timeout, call).await, Ok(Some(_)))
}

/// One of four providers stops answering (as a process paused with SIGSTOP) for longer
/// than its lease: its call times out, it is set aside (and its health checks fail), its
/// record expires. When it resumes it registers again and must take calls again within a
/// probe interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_was_set_aside_left_and_came_back_takes_calls_again() {
    /// Long enough for a call to time out before the lease expires.
    const PAUSED_TTL: Duration = Duration::from_secs(3);
    /// Short, so that no probe is in flight once the record is gone: none is started for
    /// an address that left, and the one before ends well before the provider resumes.
    const PROBE_TIMEOUT: Duration = Duration::from_millis(100);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let records = Records::new(store.clone());
    let info = greeter_info("greeter");
    records.publish(&info).await;
    let mut nodes = Vec::new();
    for _ in 0..4 {
        nodes.push(Killable::register(&records, &info, PAUSED_TTL).await);
    }
    let resolver = Resolver::builder(store.clone())
        .health(
            HealthOptions::default()
                .failure_threshold(1)
                .probe_interval(PROBE_INTERVAL)
                .probe_timeout(PROBE_TIMEOUT)
                .probe(greeter_answers),
        )
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let channel = channel_over(&resolver, &handle, 4).await;
    let caller = Caller::start(channel, Duration::from_millis(50));
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 20 }).await;

    nodes[0].pause();
    eventually(LIMIT, "the paused provider set aside", || async {
        resolver.stats().await.set_aside >= 1
    })
    .await;
    let paused = nodes[0].address;
    eventually(LIMIT, "its record expired", || async {
        !is_registered(&store, "greeter", paused).await
            && resolver.instances_per_app().get("greeter") == Some(&3)
    })
    .await;
    tokio::time::sleep(PROBE_TIMEOUT * 3).await;
    let before = nodes[0].calls();
    nodes[0].resume();
    eventually(LIMIT, "it registered again", || async {
        resolver.instances_per_app().get("greeter") == Some(&4)
    })
    .await;
    let back = tokio::time::Instant::now();
    // Its first call comes after the probe that finds it answering (within a probe
    // interval) and its turn among four endpoints (a fifth of a second at this rate); the
    // bound leaves room for a loaded machine, not for waiting on another endpoint to leave.
    eventually(LIMIT, "a call reaching it again", || async {
        nodes[0].calls() > before
    })
    .await;
    let first_call = back.elapsed();
    eventually(LIMIT, "calls reaching it again", || async {
        nodes[0].calls() >= before + 5
    })
    .await;
    let (ok, failed, _) = caller.finish().await;
    assert!(
        first_call < PROBE_INTERVAL * 4,
        "it took its first call {first_call:?} after registering again"
    );
    assert!(
        failed <= 4,
        "at most the calls that hung before it was set aside: {failed} of {ok}"
    );
}
