//! `Resolver::follow_app`, on the embedded store and the paused clock: every registered
//! record, enabled or not, the instances self-preservation holds with when each hold ends,
//! health's verdict on them, and the holds' release.

use std::time::Duration;

use crate::support::records::{HOUR, memory, orders};
use introspect::Resolver;
use introspect::consumer::{AppFollow, AppSnapshot, HoldCause};

/// `ProtectionOptions`' longest hold of an expired instance (the default).
fn max_hold() -> Duration {
    introspect::consumer::ProtectionOptions::default().get_max_hold()
}

/// Waits, through the follow's changes, until its snapshot satisfies `check`.
async fn until(follow: &mut AppFollow, what: &str, check: impl Fn(&AppSnapshot) -> bool) {
    for _ in 0..200 {
        if check(&follow.current()) {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), follow.changed()).await;
    }
    panic!("the follow never showed {what}: {:?}", follow.current());
}

#[tokio::test(start_paused = true)]
async fn a_follow_shows_records_holds_and_their_release() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    let leases = records.fleet(&info, 1000, 6, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    assert!(resolver.follow_app("a/b").is_err(), "an invalid app name");
    let apps = resolver.list_apps().await.unwrap();
    assert_eq!(apps["shop-a"].instances.len(), 6);

    let mut follow = resolver.follow_app("shop-a").unwrap();
    assert_eq!(follow.app(), "shop-a");
    until(&mut follow, "the first list", |s| s.synced).await;
    let snapshot = follow.current();
    assert_eq!(snapshot.registered.len(), 6);
    assert!(snapshot.holds.is_empty() && !snapshot.protection_active);

    // A disabled record stays listed (subscriptions no longer route to it).
    let mut disabled = crate::support::records::Records::instance(&info, 1000);
    disabled.enabled = false;
    records.register(&disabled, Some(leases[0])).await;
    until(&mut follow, "the disabled record", |s| {
        s.registered
            .get("127.0.0.1:1000")
            .is_some_and(|i| !i.enabled)
    })
    .await;
    assert_eq!(follow.current().registered.len(), 6);

    // Four of the five enabled ones vanish at once: self-preservation holds them.
    for lease in &leases[1..5] {
        records.store.revoke_lease(*lease).await.unwrap();
    }
    until(&mut follow, "four holds", |s| s.holds.len() == 4).await;
    let snapshot = follow.current();
    assert!(snapshot.protection_active);
    assert_eq!(
        snapshot.registered.len(),
        2,
        "the disabled one and the survivor"
    );
    for hold in &snapshot.holds {
        assert_eq!(hold.cause, HoldCause::SelfPreservation);
        assert!(hold.time_left() <= max_hold());
        assert!(hold.time_left() > max_hold() - Duration::from_secs(30));
        assert!(
            follow.is_set_aside(&hold.instance),
            "held and not probed yet: aside"
        );
    }
    assert!(!follow.is_set_aside(&snapshot.registered["127.0.0.1:1005"]));

    // The holds end after the maximum hold.
    tokio::time::advance(max_hold()).await;
    until(&mut follow, "the holds released", |s| s.holds.is_empty()).await;
    assert!(!follow.current().protection_active);
}
