//! The Store conformance suite: the semantics of [`Store`], written once and run against
//! every implementation.
//!
//! Each case in [`cases`] is a generic async function over `&dyn Store`; the `conformance!`
//! macro instantiates all of them for the memory store (tokio's clock paused, so lease
//! expiry costs no real time) and for etcd (a throwaway server per test, real time; skipped
//! with a loud message when etcd is not installed, mandatory when `CI` is set).
//!
//! Tests never wait for "nothing happens": to check that a watch saw no extra event, a case
//! writes a sentinel key and checks that the sentinel is the next event.

use std::sync::Arc;
use std::time::Duration;

use introspect::Error;
use introspect::store::{CasOutcome, KeyValue, Store, Watch, WatchEvent};

/// How long a case waits for an expected event before failing. Under the paused clock of
/// the memory tests it passes instantly when nothing is coming.
const WAIT: Duration = Duration::from_secs(10);
/// TTL of leases that must not expire during a case.
const LONG_TTL: Duration = Duration::from_secs(60);
/// TTL of leases whose expiry a case waits for (etcd's minimum is 1-2 s depending on its
/// heartbeat settings; the harness makes it 1 s).
const SHORT_TTL: Duration = Duration::from_secs(2);

/// The next batch of a watch, failing the test after [`WAIT`].
async fn next_batch(watch: &mut Watch) -> Result<Vec<WatchEvent>, Error> {
    tokio::time::timeout(WAIT, watch.next())
        .await
        .unwrap_or_else(|_| panic!("no watch event within {WAIT:?}"))
}

/// Events of a watch up to and including the first one on `sentinel`, batches flattened.
async fn events_until(watch: &mut Watch, sentinel: &str) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    loop {
        let batch = next_batch(watch)
            .await
            .unwrap_or_else(|e| panic!("watch failed while waiting for {sentinel}: {e}"));
        assert!(!batch.is_empty(), "a watch delivered an empty batch");
        for event in batch {
            let done = event.key() == sentinel;
            events.push(event);
            if done {
                return events;
            }
        }
    }
}

/// Events as `("put"|"delete", key)` pairs, for compact assertions.
fn shape(events: &[WatchEvent]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .map(|e| match e {
            WatchEvent::Put(kv) => ("put", kv.key.clone()),
            WatchEvent::Delete { key, .. } => ("delete", key.clone()),
        })
        .collect()
}

fn shaped(items: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    items.iter().map(|(op, k)| (*op, (*k).to_owned())).collect()
}

fn assert_increasing(events: &[WatchEvent]) {
    for pair in events.windows(2) {
        assert!(
            pair[0].mod_revision() < pair[1].mod_revision()
                || (pair[0].mod_revision() == pair[1].mod_revision()
                    && matches!(pair[0], WatchEvent::Delete { .. })
                    && matches!(pair[1], WatchEvent::Delete { .. })),
            "mod revisions not increasing: {pair:?}"
        );
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|kv| kv.key.as_str()).collect()
}

/// The error a watch from `from` fails with, whether `watch_prefix` returns it or the watch
/// delivers it as its first item.
async fn watch_error(store: &dyn Store, prefix: &str, from: i64) -> Error {
    match store.watch_prefix(prefix, from).await {
        Err(e) => e,
        Ok(mut watch) => match next_batch(&mut watch).await {
            Err(e) => e,
            Ok(batch) => panic!("expected the watch from {from} to fail, got {batch:?}"),
        },
    }
}

async fn put(store: &dyn Store, key: &str, value: &str) -> i64 {
    store
        .put(key, value.as_bytes().to_vec(), None)
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"))
}

/// The cases; each takes a fresh, empty store.
mod cases {
    use super::*;

    pub async fn put_get_and_prefix_order(s: &dyn Store) {
        let r1 = put(s, "/a/2", "two").await;
        let r2 = put(s, "/a/1", "one").await;
        let r3 = put(s, "/ab/x", "x").await;
        let r4 = put(s, "/a/3", "three").await;
        let r5 = put(s, "/a/ключ", "key").await;
        assert!(
            r1 < r2 && r2 < r3 && r3 < r4 && r4 < r5,
            "{r1} {r2} {r3} {r4} {r5}"
        );

        let kv = s.get("/a/1").await.unwrap().expect("/a/1 exists");
        assert_eq!(kv.value, b"one");
        assert_eq!((kv.create_revision, kv.mod_revision, kv.lease), (r2, r2, 0));
        assert_eq!(s.get("/a/").await.unwrap(), None);
        assert_eq!(s.get("/a").await.unwrap(), None);
        assert_eq!(s.get("/nothing").await.unwrap(), None);

        let range = s.get_prefix("/a/").await.unwrap();
        assert_eq!(keys(&range.kvs), ["/a/1", "/a/2", "/a/3", "/a/ключ"]);
        assert_eq!(range.revision, r5);
        assert_eq!(range.kvs[0], kv);

        // A prefix ending in `/` never matches a longer sibling.
        assert_eq!(keys(&s.get_prefix("/ab/").await.unwrap().kvs), ["/ab/x"]);
        // The empty prefix is everything.
        assert_eq!(s.get_prefix("").await.unwrap().kvs.len(), 5);

        // A re-put keeps the create revision and moves the mod revision.
        let r6 = put(s, "/a/1", "uno").await;
        let kv = s.get("/a/1").await.unwrap().expect("/a/1 exists");
        assert_eq!(
            (kv.value.as_slice(), kv.create_revision, kv.mod_revision),
            (&b"uno"[..], r2, r6)
        );

        let empty = s.get_prefix("/nothing/").await.unwrap();
        assert!(empty.kvs.is_empty());
        assert_eq!(empty.revision, r6);
    }

    pub async fn delete_reports_existence(s: &dyn Store) {
        put(s, "/d/1", "x").await;
        assert!(s.delete("/d/1").await.unwrap());
        assert_eq!(s.get("/d/1").await.unwrap(), None);
        let before = s.get_prefix("/d/").await.unwrap().revision;
        assert!(!s.delete("/d/1").await.unwrap());
        assert!(!s.delete("/d/never").await.unwrap());
        // Deleting nothing is no change: the revision stays.
        assert_eq!(s.get_prefix("/d/").await.unwrap().revision, before);
        // A key created again starts a new life.
        let r = put(s, "/d/1", "y").await;
        let kv = s.get("/d/1").await.unwrap().expect("/d/1 exists");
        assert_eq!((kv.create_revision, kv.mod_revision), (r, r));
    }

    pub async fn list_then_watch_has_no_gap_and_no_duplicate(s: &dyn Store) {
        put(s, "/w/1", "a").await;
        put(s, "/w/2", "b").await;
        let listed = s.get_prefix("/w/").await.unwrap();
        assert_eq!(keys(&listed.kvs), ["/w/1", "/w/2"]);
        // Changes between the list and the watch must not be lost...
        put(s, "/w/3", "c").await;
        put(s, "/wx/1", "other prefix").await;
        let mut watch = s.watch_prefix("/w/", listed.revision + 1).await.unwrap();
        put(s, "/w/4", "d").await;
        s.delete("/w/1").await.unwrap();
        put(s, "/wx/2", "other prefix").await;
        put(s, "/w/sentinel", "").await;
        let events = events_until(&mut watch, "/w/sentinel").await;
        // ...and nothing already listed comes again.
        assert_eq!(
            shape(&events),
            shaped(&[
                ("put", "/w/3"),
                ("put", "/w/4"),
                ("delete", "/w/1"),
                ("put", "/w/sentinel")
            ])
        );
        assert!(events.iter().all(|e| e.mod_revision() > listed.revision));
        assert_increasing(&events);
    }

    pub async fn watch_from_now_sees_only_later_changes(s: &dyn Store) {
        put(s, "/n/old", "before").await;
        let mut watch = s.watch_prefix("/n/", 0).await.unwrap();
        put(s, "/n/new", "after").await;
        let events = events_until(&mut watch, "/n/new").await;
        assert_eq!(shape(&events), shaped(&[("put", "/n/new")]));
    }

    pub async fn watch_from_old_revision_replays_history(s: &dyn Store) {
        let first = put(s, "/h/a", "1").await;
        put(s, "/h/b", "2").await;
        s.delete("/h/a").await.unwrap();
        put(s, "/h/a", "3").await;
        let mut watch = s.watch_prefix("/h/", first).await.unwrap();
        put(s, "/h/sentinel", "").await;
        let events = events_until(&mut watch, "/h/sentinel").await;
        assert_eq!(
            shape(&events),
            shaped(&[
                ("put", "/h/a"),
                ("put", "/h/b"),
                ("delete", "/h/a"),
                ("put", "/h/a"),
                ("put", "/h/sentinel")
            ])
        );
        assert_eq!(events[0].mod_revision(), first);
        assert_increasing(&events);
        // Replayed puts carry their values as they were then.
        let values: Vec<&[u8]> = events
            .iter()
            .filter_map(|e| match e {
                WatchEvent::Put(kv) => Some(kv.value.as_slice()),
                WatchEvent::Delete { .. } => None,
            })
            .collect();
        assert_eq!(values, [&b"1"[..], b"2", b"3", b""]);
    }

    pub async fn watch_from_future_revision_starts_there(s: &dyn Store) {
        let now = s.get_prefix("/f/").await.unwrap().revision;
        let mut watch = s.watch_prefix("/f/", now + 3).await.unwrap();
        put(s, "/f/1", "skipped").await;
        put(s, "/f/2", "skipped").await;
        let third = put(s, "/f/3", "seen").await;
        assert_eq!(third, now + 3);
        let events = events_until(&mut watch, "/f/3").await;
        assert_eq!(shape(&events), shaped(&[("put", "/f/3")]));
    }

    pub async fn put_and_delete_events_carry_keys_and_revisions(s: &dyn Store) {
        let mut watch = s.watch_prefix("/e/", 0).await.unwrap();
        let r1 = put(s, "/e/k", "v1").await;
        let r2 = put(s, "/e/k", "v2").await;
        assert!(s.delete("/e/k").await.unwrap());
        let r3 = s.get_prefix("/e/").await.unwrap().revision;
        put(s, "/e/sentinel", "").await;
        let events = events_until(&mut watch, "/e/sentinel").await;
        assert_eq!(events.len(), 4, "{events:?}");
        let WatchEvent::Put(first) = &events[0] else {
            panic!("expected a put, got {:?}", events[0]);
        };
        assert_eq!(
            (first.key.as_str(), first.value.as_slice()),
            ("/e/k", &b"v1"[..])
        );
        assert_eq!(
            (first.create_revision, first.mod_revision, first.lease),
            (r1, r1, 0)
        );
        let WatchEvent::Put(second) = &events[1] else {
            panic!("expected a put, got {:?}", events[1]);
        };
        assert_eq!(
            (
                second.value.as_slice(),
                second.create_revision,
                second.mod_revision
            ),
            (&b"v2"[..], r1, r2)
        );
        assert_eq!(
            events[2],
            WatchEvent::Delete {
                key: "/e/k".into(),
                mod_revision: r3
            }
        );
        assert_increasing(&events);
    }

    pub async fn cas_on_absent_key_succeeds_once(s: &dyn Store) {
        let outcome = s
            .compare_and_swap("/cas/k", 0, b"first".to_vec(), None)
            .await
            .unwrap();
        let CasOutcome::Written { revision } = outcome else {
            panic!("expected a write, got {outcome:?}");
        };
        let current = s.get("/cas/k").await.unwrap().expect("written");
        assert_eq!(
            (current.mod_revision, current.value.as_slice()),
            (revision, &b"first"[..])
        );

        let outcome = s
            .compare_and_swap("/cas/k", 0, b"second".to_vec(), None)
            .await
            .unwrap();
        assert_eq!(
            outcome,
            CasOutcome::Conflict {
                current: Some(current.clone())
            }
        );
        assert_eq!(s.get("/cas/k").await.unwrap(), Some(current));
    }

    pub async fn cas_with_stale_revision_conflicts(s: &dyn Store) {
        let r1 = put(s, "/cas/k", "v1").await;
        let outcome = s
            .compare_and_swap("/cas/k", r1, b"v2".to_vec(), None)
            .await
            .unwrap();
        let CasOutcome::Written { revision: r2 } = outcome else {
            panic!("expected a write, got {outcome:?}");
        };
        assert!(r2 > r1);
        let kv = s.get("/cas/k").await.unwrap().expect("exists");
        assert_eq!(
            (kv.value.as_slice(), kv.mod_revision, kv.create_revision),
            (&b"v2"[..], r2, r1)
        );

        // The token from before the last write is stale.
        let outcome = s
            .compare_and_swap("/cas/k", r1, b"v3".to_vec(), None)
            .await
            .unwrap();
        assert_eq!(outcome, CasOutcome::Conflict { current: Some(kv) });

        // A deleted key conflicts as absent, and can then be created with 0.
        s.delete("/cas/k").await.unwrap();
        let outcome = s
            .compare_and_swap("/cas/k", r2, b"v4".to_vec(), None)
            .await
            .unwrap();
        assert_eq!(outcome, CasOutcome::Conflict { current: None });
        let outcome = s
            .compare_and_swap("/cas/k", 0, b"v5".to_vec(), None)
            .await
            .unwrap();
        assert!(matches!(outcome, CasOutcome::Written { .. }), "{outcome:?}");
    }

    pub async fn unknown_lease_is_refused(s: &dyn Store) {
        let lease = s.grant_lease(LONG_TTL).await.unwrap();
        s.revoke_lease(lease).await.unwrap();
        match s.put("/ul/k", b"v".to_vec(), Some(lease)).await {
            Err(Error::LeaseNotFound(id)) => assert_eq!(id, lease),
            other => panic!("expected LeaseNotFound, got {other:?}"),
        }
        match s
            .compare_and_swap("/ul/k", 0, b"v".to_vec(), Some(lease))
            .await
        {
            Err(Error::LeaseNotFound(id)) => assert_eq!(id, lease),
            other => panic!("expected LeaseNotFound, got {other:?}"),
        }
        assert_eq!(s.get("/ul/k").await.unwrap(), None);
        // The comparison comes first: a conflicting CAS reports the conflict.
        put(s, "/ul/k", "v").await;
        let outcome = s
            .compare_and_swap("/ul/k", 0, b"w".to_vec(), Some(lease))
            .await
            .unwrap();
        assert!(
            matches!(outcome, CasOutcome::Conflict { current: Some(_) }),
            "{outcome:?}"
        );
        assert!(matches!(
            s.revoke_lease(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        assert!(matches!(
            s.keep_alive(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
    }

    pub async fn revoke_deletes_bound_keys(s: &dyn Store) {
        let lease = s.grant_lease(LONG_TTL).await.unwrap();
        let r1 = s.put("/l/1", b"a".to_vec(), Some(lease)).await.unwrap();
        let outcome = s
            .compare_and_swap("/l/2", 0, b"b".to_vec(), Some(lease))
            .await
            .unwrap();
        assert!(matches!(outcome, CasOutcome::Written { .. }), "{outcome:?}");
        put(s, "/l/3", "no lease").await;
        assert_eq!(s.get("/l/1").await.unwrap().expect("exists").lease, lease);
        assert_eq!(
            s.get("/l/1").await.unwrap().expect("exists").mod_revision,
            r1
        );

        let mut watch = s.watch_prefix("/l/", 0).await.unwrap();
        s.revoke_lease(lease).await.unwrap();
        put(s, "/l/sentinel", "").await;
        let events = events_until(&mut watch, "/l/sentinel").await;
        assert_eq!(
            shape(&events),
            shaped(&[
                ("delete", "/l/1"),
                ("delete", "/l/2"),
                ("put", "/l/sentinel")
            ])
        );
        // One revocation, one revision.
        assert_eq!(events[0].mod_revision(), events[1].mod_revision());
        let left = s.get_prefix("/l/").await.unwrap();
        assert_eq!(keys(&left.kvs), ["/l/3", "/l/sentinel"]);
        assert!(matches!(
            s.keep_alive(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        assert!(matches!(
            s.revoke_lease(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
    }

    pub async fn lease_expiry_deletes_bound_keys(s: &dyn Store) {
        let lease = s.grant_lease(SHORT_TTL).await.unwrap();
        s.put("/x/1", b"a".to_vec(), Some(lease)).await.unwrap();
        s.put("/x/2", b"b".to_vec(), Some(lease)).await.unwrap();
        put(s, "/x/3", "no lease").await;
        let mut watch = s.watch_prefix("/x/", 0).await.unwrap();
        // No keep-alive: the lease runs out and takes its keys along.
        let deleted = next_batch(&mut watch).await.unwrap();
        let mut deleted = shape(&deleted);
        if deleted.len() == 1 {
            deleted.extend(shape(&next_batch(&mut watch).await.unwrap()));
        }
        assert_eq!(deleted, shaped(&[("delete", "/x/1"), ("delete", "/x/2")]));
        assert_eq!(keys(&s.get_prefix("/x/").await.unwrap().kvs), ["/x/3"]);
        assert!(matches!(
            s.keep_alive(lease).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
        assert!(matches!(
            s.put("/x/4", b"late".to_vec(), Some(lease)).await,
            Err(Error::LeaseNotFound(id)) if id == lease
        ));
    }

    pub async fn keep_alive_extends_the_lease(s: &dyn Store) {
        let lease = s.grant_lease(SHORT_TTL).await.unwrap();
        s.put("/ka/1", b"a".to_vec(), Some(lease)).await.unwrap();
        let step = SHORT_TTL * 3 / 5;
        tokio::time::sleep(step).await;
        let ttl = s.keep_alive(lease).await.unwrap();
        assert!(ttl >= SHORT_TTL, "keep-alive answered TTL {ttl:?}");
        tokio::time::sleep(step).await;
        // Past the first TTL, alive thanks to the keep-alive.
        assert!(
            s.get("/ka/1").await.unwrap().is_some(),
            "the key expired despite a keep-alive"
        );
        assert!(s.keep_alive(lease).await.is_ok());
        // Without more keep-alives it expires.
        let mut watch = s.watch_prefix("/ka/", 0).await.unwrap();
        let events = next_batch(&mut watch).await.unwrap();
        assert_eq!(shape(&events), shaped(&[("delete", "/ka/1")]));
    }

    pub async fn rebinding_a_key_detaches_it_from_the_old_lease(s: &dyn Store) {
        let old = s.grant_lease(LONG_TTL).await.unwrap();
        let new = s.grant_lease(LONG_TTL).await.unwrap();
        s.put("/rb/1", b"a".to_vec(), Some(old)).await.unwrap();
        s.put("/rb/2", b"b".to_vec(), Some(old)).await.unwrap();
        s.put("/rb/3", b"c".to_vec(), Some(old)).await.unwrap();
        s.put("/rb/1", b"a2".to_vec(), Some(new)).await.unwrap();
        s.put("/rb/2", b"b2".to_vec(), None).await.unwrap();
        let outcome = s
            .compare_and_swap("/rb/3", 0, b"c2".to_vec(), None)
            .await
            .unwrap();
        let current = match outcome {
            CasOutcome::Conflict { current: Some(kv) } => kv,
            other => panic!("expected a conflict, got {other:?}"),
        };
        let outcome = s
            .compare_and_swap("/rb/3", current.mod_revision, b"c2".to_vec(), None)
            .await
            .unwrap();
        assert!(matches!(outcome, CasOutcome::Written { .. }), "{outcome:?}");
        assert_eq!(s.get("/rb/1").await.unwrap().expect("exists").lease, new);
        assert_eq!(s.get("/rb/2").await.unwrap().expect("exists").lease, 0);
        assert_eq!(s.get("/rb/3").await.unwrap().expect("exists").lease, 0);

        let mut watch = s.watch_prefix("/rb/", 0).await.unwrap();
        s.revoke_lease(old).await.unwrap();
        put(s, "/rb/sentinel", "").await;
        let events = events_until(&mut watch, "/rb/sentinel").await;
        assert_eq!(shape(&events), shaped(&[("put", "/rb/sentinel")]));
        assert_eq!(s.get_prefix("/rb/").await.unwrap().kvs.len(), 4);

        s.revoke_lease(new).await.unwrap();
        put(s, "/rb/sentinel2", "").await;
        let events = events_until(&mut watch, "/rb/sentinel2").await;
        assert_eq!(
            shape(&events),
            shaped(&[("delete", "/rb/1"), ("put", "/rb/sentinel2")])
        );
    }

    pub async fn watch_from_compacted_revision_fails(s: &dyn Store) {
        let r1 = put(s, "/c/1", "a").await;
        let r2 = put(s, "/c/2", "b").await;
        let r3 = put(s, "/c/3", "c").await;
        let r4 = put(s, "/c/4", "d").await;
        s.compact(r3).await.unwrap();
        match watch_error(s, "/c/", r1).await {
            Error::Compacted {
                requested,
                compacted,
            } => assert_eq!((requested, compacted), (r1, r3)),
            other => panic!("expected Compacted, got {other:?}"),
        }
        // The compaction revision itself is still there (as in etcd).
        let mut watch = s.watch_prefix("/c/", r3).await.unwrap();
        let events = events_until(&mut watch, "/c/4").await;
        assert_eq!(shape(&events), shaped(&[("put", "/c/3"), ("put", "/c/4")]));
        assert_eq!(events[1].mod_revision(), r4);
        // Compacting to an older revision again is harmless; to the future, an error.
        s.compact(r2).await.unwrap();
        assert!(s.compact(r4 + 100).await.is_err());
        // Compaction drops history, never current values.
        assert_eq!(s.get_prefix("/c/").await.unwrap().kvs.len(), 4);
        // The live watch keeps going.
        put(s, "/c/5", "e").await;
        assert_eq!(
            shape(&events_until(&mut watch, "/c/5").await),
            shaped(&[("put", "/c/5")])
        );
    }

    /// A watcher that stops reading costs at most [`Watch::BUFFER`] batches: past that the
    /// store ends the watch (the watcher re-lists) instead of buffering without bound, and
    /// never waits for it. The watcher first gets what was buffered, in order, then an
    /// error that says to re-list.
    pub async fn a_watcher_that_falls_behind_is_ended_not_buffered(s: &dyn Store) {
        let mut slow = s.watch_prefix("/slow/", 0).await.unwrap();
        let mut keeping_up = s.watch_prefix("/slow/", 0).await.unwrap();
        let total = Watch::BUFFER + 64;
        let mut last = 0;
        for i in 0..total {
            last = put(s, &format!("/slow/{i:05}"), "v").await;
            // The other watcher keeps up, so it alone proves the store went on.
            let batch = next_batch(&mut keeping_up).await.unwrap();
            assert_eq!(batch.last().map(WatchEvent::mod_revision), Some(last));
        }
        let mut received = 0;
        let mut batches = 0;
        let mut previous = 0;
        let end = loop {
            match next_batch(&mut slow).await {
                Ok(batch) => {
                    batches += 1;
                    for event in batch {
                        assert!(event.mod_revision() > previous, "out of order");
                        previous = event.mod_revision();
                        received += 1;
                    }
                    if previous == last {
                        break None;
                    }
                }
                Err(end) => break Some(end),
            }
        };
        assert!(batches <= Watch::BUFFER, "{batches} batches buffered");
        match end {
            // Ended: what came before the end is a gap-free prefix of the changes.
            Some(end) => {
                assert!(matches!(end, Error::WatchEnded { .. }), "{end}");
                assert!(received < total, "ended after everything arrived");
            }
            // etcd may pack several revisions into one batch, so the buffer need not fill.
            None => assert_eq!(received, total),
        }
        // The re-list the watcher does next sees everything.
        assert_eq!(s.get_prefix("/slow/").await.unwrap().kvs.len(), total);
    }

    pub async fn dropping_a_watch_leaves_others_alone(s: &dyn Store) {
        let first = s.watch_prefix("/dw/", 0).await.unwrap();
        let mut second = s.watch_prefix("/dw/", 0).await.unwrap();
        drop(first);
        put(s, "/dw/1", "a").await;
        assert_eq!(
            shape(&events_until(&mut second, "/dw/1").await),
            shaped(&[("put", "/dw/1")])
        );
        let mut third = s.watch_prefix("/dw/", 0).await.unwrap();
        put(s, "/dw/2", "b").await;
        for watch in [&mut second, &mut third] {
            assert_eq!(
                shape(&events_until(watch, "/dw/2").await),
                shaped(&[("put", "/dw/2")])
            );
        }
    }
}

/// Instantiates every case for each store.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod memory {
            use super::*;
            use introspect::store::MemoryStore;

            $(
                #[tokio::test(start_paused = true)]
                async fn $case() {
                    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                    cases::$case(store.as_ref()).await;
                }
            )*
        }

        mod etcd {
            use super::*;
            use crate::support::etcd::EtcdServer;

            $(
                #[tokio::test]
                async fn $case() {
                    let Some(server) = EtcdServer::start().await else {
                        return;
                    };
                    let store: Arc<dyn Store> = server.store().await;
                    assert_eq!(store.backend(), "etcd");
                    cases::$case(store.as_ref()).await;
                }
            )*
        }
    };
}

conformance!(
    put_get_and_prefix_order,
    delete_reports_existence,
    list_then_watch_has_no_gap_and_no_duplicate,
    watch_from_now_sees_only_later_changes,
    watch_from_old_revision_replays_history,
    watch_from_future_revision_starts_there,
    put_and_delete_events_carry_keys_and_revisions,
    cas_on_absent_key_succeeds_once,
    cas_with_stale_revision_conflicts,
    unknown_lease_is_refused,
    revoke_deletes_bound_keys,
    lease_expiry_deletes_bound_keys,
    keep_alive_extends_the_lease,
    rebinding_a_key_detaches_it_from_the_old_lease,
    watch_from_compacted_revision_fails,
    dropping_a_watch_leaves_others_alone,
    a_watcher_that_falls_behind_is_ended_not_buffered,
);

/// What only the memory store shows exactly: one batch per revision, so the bound is hit.
mod memory_only {
    use super::*;
    use introspect::store::MemoryStore;

    #[tokio::test(start_paused = true)]
    async fn a_slow_watcher_is_dropped_at_the_bound_and_replay_fits() {
        let store = MemoryStore::new();
        let mut slow = store.watch_prefix("/slow/", 0).await.unwrap();
        let first = store.revision() + 1;
        for i in 0..Watch::BUFFER + 1 {
            put(&store, &format!("/slow/{i:05}"), "v").await;
        }
        // The store let go of the watcher (no memory held for it) ...
        assert_eq!(store.watch_count(), 0);
        // ... which gets exactly the buffered batches, then an end that says to re-list.
        for _ in 0..Watch::BUFFER {
            assert_eq!(next_batch(&mut slow).await.unwrap().len(), 1);
        }
        let end = next_batch(&mut slow).await.unwrap_err();
        assert!(matches!(end, Error::WatchEnded { .. }), "{end}");

        // Replaying more revisions than the buffer holds still works: history is packed.
        let mut replay = store.watch_prefix("/slow/", first).await.unwrap();
        let events = events_until(&mut replay, &format!("/slow/{:05}", Watch::BUFFER)).await;
        assert_eq!(events.len(), Watch::BUFFER + 1);
        assert_increasing(&events);
    }
}

/// What only etcd has: connecting, credentials, a server that goes away.
mod etcd_only {
    use super::*;
    use crate::support::etcd::EtcdServer;
    use introspect::store::{EtcdOptions, EtcdStore};
    use std::time::Instant;

    #[tokio::test]
    async fn connecting_to_nothing_is_unavailable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let started = Instant::now();
        let result = EtcdStore::connect(
            EtcdOptions::new([format!("http://127.0.0.1:{port}")])
                .with_connect_timeout(Duration::from_millis(500))
                .with_request_timeout(Duration::from_millis(500)),
        )
        .await;
        match result {
            Err(e @ Error::StoreUnavailable { .. }) => assert!(e.is_transient()),
            other => panic!("expected StoreUnavailable, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn bad_options_are_config_errors() {
        for options in [
            EtcdOptions::new(Vec::<String>::new()),
            EtcdOptions::new(["ftp://127.0.0.1:2379"]),
            EtcdOptions::new(["http://127.0.0.1:2379"]).with_tls(b"not a pem".to_vec(), None),
        ] {
            match EtcdStore::connect(options.clone()).await {
                Err(Error::Config { .. }) => {}
                Err(other) => panic!("{options:?}: expected a config error, got {other}"),
                Ok(_) => panic!("{options:?}: expected a config error, connected"),
            }
        }
    }

    #[tokio::test]
    async fn refused_credentials_say_so() {
        let Some(server) = EtcdServer::start().await else {
            return;
        };
        let mut admin = etcd_client::Client::connect([server.endpoint()], None)
            .await
            .unwrap();
        admin.user_add("root", "rootpw", None).await.unwrap();
        admin.user_grant_role("root", "root").await.unwrap();
        admin.auth_enable().await.unwrap();

        match EtcdStore::connect(server.options().with_user("root", "not-the-pw-x7")).await {
            Err(error @ Error::Unauthenticated { .. }) => {
                assert!(error.is_permanent() && !error.is_transient(), "{error}");
                assert!(!error.to_string().contains("not-the-pw-x7"), "{error}");
            }
            Err(other) => panic!("expected an authentication error, got {other}"),
            Ok(_) => panic!("connected with a wrong password"),
        }

        // No credentials at all: refused at the first request, not hanging, not transient.
        let anonymous = EtcdStore::connect(server.options()).await;
        let error = match anonymous {
            Err(e) => e,
            Ok(store) => store.get("/k").await.unwrap_err(),
        };
        assert!(matches!(&error, Error::Unauthenticated { .. }), "{error}");
        assert!(error.is_permanent() && !error.is_transient());

        let store = EtcdStore::connect(server.options().with_user("root", "rootpw"))
            .await
            .unwrap();
        store.put("/k", b"v".to_vec(), None).await.unwrap();
        assert_eq!(store.get("/k").await.unwrap().unwrap().value, b"v");
    }

    #[tokio::test]
    async fn tls_with_a_client_certificate() {
        let Some(server) = EtcdServer::start_tls().await else {
            return;
        };
        let store = server.store().await;
        let mut watch = store.watch_prefix("/t/", 0).await.unwrap();
        store.put("/t/k", b"v".to_vec(), None).await.unwrap();
        assert_eq!(
            shape(&events_until(&mut watch, "/t/k").await),
            shaped(&[("put", "/t/k")])
        );

        // Without the client certificate, or without TLS, the server does not answer.
        let tls = server.tls().expect("a TLS server");
        let no_client_cert = server.options().with_tls(tls.ca_pem.clone(), None);
        assert!(EtcdStore::connect(no_client_cert).await.is_err());
        let plain = EtcdOptions::new([server.endpoint().replace("https://", "http://")])
            .with_connect_timeout(Duration::from_millis(500))
            .with_request_timeout(Duration::from_millis(500));
        assert!(EtcdStore::connect(plain).await.is_err());
    }

    #[tokio::test]
    async fn a_killed_server_is_transient_and_a_restart_recovers() {
        let Some(mut server) = EtcdServer::start().await else {
            return;
        };
        let store = server.store().await;
        let written = store.put("/k", b"v".to_vec(), None).await.unwrap();
        let mut watch = store.watch_prefix("/", 0).await.unwrap();

        server.kill();
        let ended = next_batch(&mut watch).await.unwrap_err();
        assert!(ended.is_transient(), "{ended}");
        let down = store.get("/k").await.unwrap_err();
        assert!(down.is_transient(), "{down}");

        server.restart().await;
        let kv = retry(|| store.get("/k"))
            .await
            .expect("kept across a restart");
        assert_eq!(kv.mod_revision, written);

        server.restart_empty().await;
        assert_eq!(retry(|| store.get("/k")).await, None);
    }

    #[tokio::test]
    async fn a_paused_server_times_out_and_recovers() {
        let Some(mut server) = EtcdServer::start().await else {
            return;
        };
        let timeout = Duration::from_millis(500);
        let store = EtcdStore::connect(server.options().with_request_timeout(timeout))
            .await
            .unwrap();
        store.put("/k", b"v".to_vec(), None).await.unwrap();

        server.pause();
        let started = Instant::now();
        match store.get("/k").await {
            Err(e @ Error::Timeout { .. }) => assert!(e.is_transient()),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(started.elapsed() < timeout * 4, "{:?}", started.elapsed());

        server.resume();
        let kv = retry(|| store.get("/k")).await.expect("still there");
        assert_eq!(kv.value, b"v");
    }

    /// Retries a call while it fails transiently (the client reconnects), for a few seconds.
    async fn retry<T, F, Fut>(mut call: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match call().await {
                Ok(value) => return value,
                Err(e) if e.is_transient() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("still failing: {e}"),
            }
        }
    }
}
