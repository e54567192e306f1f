//! Consumer records say which rules each balanced channel routes by: a consumer that follows
//! the config centre takes a rule written there into its record's rules digest, the same
//! digest a reader computes from one read of the config centre; a consumer that reads no
//! rules keeps the digest of none, and so shows as routing by an older rule set.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::greeter::{greeter_service, start_greeter_exporting};
use crate::support::wait::eventually;
use introspect::governance::{RuleSet, rules_digest};
use introspect::model::{ConsumedService, ConsumerRecord};
use introspect::{Backend, MemoryStore, Resolver, Subscription};

const INTERFACE: &str = "helloworld.Greeter";
const KEY: &str = "helloworld.Greeter::.condition-router";
const CONSUMER: &str = "shop";
const REFRESH: Duration = Duration::from_millis(200);
const LIMIT: Duration = Duration::from_secs(15);

/// A consumer of [`CONSUMER`] registering its record, reading rules or not.
fn consumer(backend: &Backend, rules: bool) -> Resolver {
    Resolver::builder(backend.clone())
        .register_consumer(CONSUMER)
        .consumer_refresh(REFRESH)
        .rules(rules)
        .build()
}

/// Consumer `id`'s entry of [`INTERFACE`], as a reader lists it.
async fn entry_of(reader: &Resolver, id: &str) -> Option<ConsumedService> {
    let list = reader.consumers().await.expect("consumers listed");
    let record: ConsumerRecord = list.records.into_iter().find(|r| r.id == id)?;
    record
        .subscriptions
        .into_iter()
        .find(|s| s.interface == INTERFACE && s.protocol.is_empty())
}

/// The rules a channel of [`CONSUMER`] would route by now, as a reader reads them.
async fn rules_now(reader: &Resolver) -> RuleSet {
    let subscription = Subscription::new(INTERFACE);
    let apps: BTreeSet<String> = reader
        .resolve(&subscription)
        .await
        .unwrap()
        .iter()
        .map(|e| e.app.to_string())
        .collect();
    reader
        .rules_now(CONSUMER, &subscription, apps.iter().map(String::as_str))
        .await
        .expect("rules read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_record_follows_the_rules_its_channel_routes_by() {
    let store = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let _node = start_greeter_exporting(
        backend.clone(),
        "ruled-greeter",
        Duration::from_secs(4),
        Duration::from_millis(100),
        listener,
        None,
        greeter_service(),
    )
    .await;
    let reader = Resolver::new(backend.clone());
    let none = rules_digest([]);
    assert_eq!(rules_now(&reader).await.digest(), none);

    let following = consumer(&backend, true);
    let deaf = consumer(&backend, false);
    let mut held = Vec::new();
    let mut ids = Vec::new();
    for resolver in [&following, &deaf] {
        ids.push(resolver.consumer_id().unwrap().1.to_owned());
        let subscription = resolver
            .subscribe(Subscription::new(INTERFACE))
            .await
            .unwrap();
        let channel = resolver.balanced_channel(&subscription).unwrap();
        held.push((subscription, channel));
    }
    // A subscription without a channel says nothing of rules.
    let bare = following
        .subscribe(Subscription::new(INTERFACE).protocol("tri"))
        .await
        .unwrap();
    for id in &ids {
        eventually(LIMIT, "the digest of no rules in the record", || async {
            entry_of(&reader, id)
                .await
                .is_some_and(|e| e.rules_digest.as_deref() == Some(none.as_str()))
        })
        .await;
    }
    let list = reader.consumers().await.unwrap();
    let bare_entry = list
        .records
        .iter()
        .flat_map(|r| &r.subscriptions)
        .find(|s| s.protocol == "tri")
        .expect("the bare subscription is listed");
    assert_eq!(bare_entry.rules_digest, None);
    assert!(bare_entry.rules.is_empty());

    // A rule is written: the consumer that follows the config centre routes by it, and
    // its record says so with the reader's own digest.
    let rule = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                force: false\nconditions:\n  - 'method = Cancel => port != 1'\n";
    backend
        .config()
        .put(
            &ConfigKey::new(KEY, "dubbo").unwrap(),
            ConfigWrite::create(rule),
        )
        .await
        .unwrap();
    let written = rules_now(&reader).await;
    assert_ne!(written.digest(), none);
    assert_eq!(written.in_force().collect::<Vec<_>>(), [KEY]);
    eventually(LIMIT, "the record to name the rule written", || async {
        entry_of(&reader, &ids[0])
            .await
            .is_some_and(|e| e.rules_digest == Some(written.digest()))
    })
    .await;
    let entry = entry_of(&reader, &ids[0]).await.unwrap();
    assert_eq!(entry.rules, [KEY]);

    // The consumer that reads no rules still routes by none: an older rule set.
    let deaf_entry = entry_of(&reader, &ids[1]).await.unwrap();
    assert_eq!(deaf_entry.rules_digest.as_deref(), Some(none.as_str()));
    assert!(deaf_entry.rules.is_empty());
    assert_ne!(deaf_entry.rules_digest, Some(written.digest()));

    // The channel goes: its subscription no longer says it routes by anything.
    let (subscription, channel) = held.remove(0);
    drop(channel);
    eventually(LIMIT, "the rules to leave with the channel", || async {
        entry_of(&reader, &ids[0])
            .await
            .is_some_and(|e| e.rules_digest.is_none())
    })
    .await;
    drop((subscription, bare, held));
    following.deregister_consumer().await;
    deaf.deregister_consumer().await;
}
