//! The registry-backend conformance suite: the semantics of the seam's three parts
//! (instances, mapping, metadata reports), written once and run on every backend: the
//! memory store, etcd, ZooKeeper and Nacos (each a throwaway server per test; skipped with a loud
//! message when not installed, mandatory when `CI` is set). The lower `Store` has its own
//! suite (`conformance.rs`).
//!
//! Each case is a generic async function over a [`Subject`]: the backend, a raw writer
//! that puts an unreadable record where the backend keeps instances, and a raw writer that
//! puts a config item where Dubbo Java reads it (with the server's own client).

use introspect::backend::{ConfigKey, ConfigWrite};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use introspect::backend::config::DEFAULT_GROUP;
use introspect::backend::{
    Backend, ConfigFollow, ConfigItem, InstanceChange, InstanceEvent, InstanceFollow, InstanceRead,
    RegisterOptions,
};
use introspect::model::{ReportKey, keys};
use introspect::{Error, Limits, MetadataInfo, ServiceInfo, ServiceInstance};

/// How long a case waits for an expected event.
const WAIT: Duration = Duration::from_secs(15);
/// TTL of registrations in the cases.
const TTL: Duration = Duration::from_secs(3);

type Raw = Box<dyn Fn(String, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;
/// Writes `(group, key, bytes)` where Dubbo Java reads a config item, as Java names it.
type RawConfig =
    Box<dyn Fn(String, String, Vec<u8>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What a case runs against.
pub struct Subject {
    pub backend: Backend,
    /// Writes bytes that are no instance record at `(app, address)`.
    pub put_garbage: Raw,
    /// Whether the server enforces compare-and-set (rnacos, the Nacos of the tests, takes
    /// `casMd5` and ignores it: there concurrent mapping writers may lose each other's apps,
    /// and the conflict path is a unit test against a scripted config service).
    pub cas_enforced: bool,
    /// Writes a config item's bytes where Dubbo Java reads it.
    pub put_config_raw: RawConfig,
    /// Whether the raw writer can write bytes that are not UTF-8 (Nacos's API takes text).
    pub raw_bytes: bool,
}

/// The next state of a config follow (an `Err` of the follow included).
async fn next_state(follow: &mut ConfigFollow) -> introspect::Result<Option<ConfigItem>> {
    tokio::time::timeout(WAIT, follow.next())
        .await
        .unwrap_or_else(|_| panic!("no config state within {WAIT:?}"))
}

/// The next state, which must be readable.
async fn next_item(follow: &mut ConfigFollow) -> Option<ConfigItem> {
    next_state(follow)
        .await
        .unwrap_or_else(|e| panic!("the config follow failed: {e}"))
}

fn instance(app: &str, port: u16, revision: &str) -> ServiceInstance {
    let mut i = ServiceInstance::new(app, "127.0.0.1", port);
    i.metadata.insert(keys::REVISION.into(), revision.into());
    i
}

async fn next(follow: &mut InstanceFollow) -> InstanceEvent {
    tokio::time::timeout(WAIT, follow.next())
        .await
        .unwrap_or_else(|_| panic!("no event within {WAIT:?}"))
        .unwrap_or_else(|e| panic!("the follow ended: {e}"))
}

/// Changes until one about `address` that `done` accepts.
async fn changes_until(
    follow: &mut InstanceFollow,
    done: impl Fn(&InstanceChange) -> bool,
) -> Vec<InstanceChange> {
    let mut seen = Vec::new();
    loop {
        match next(follow).await {
            InstanceEvent::Changes(changes) => {
                assert!(!changes.is_empty(), "an empty batch");
                for change in changes {
                    let last = done(&change);
                    seen.push(change);
                    if last {
                        return seen;
                    }
                }
            }
            InstanceEvent::Reset(list) => {
                panic!("an unexpected reset of {} instances", list.instances.len())
            }
        }
    }
}

fn upsert_of(address: &'static str, revision: &'static str) -> impl Fn(&InstanceChange) -> bool {
    move |c| matches!(c, InstanceChange::Upsert(i) if i.key_address() == address && i.revision() == revision)
}

pub mod cases {
    use super::*;

    pub async fn register_list_update_deregister(s: Subject) {
        let limits = Limits::default();
        let read = InstanceRead::new(&limits);
        let instances = s.backend.instances();
        let r = instances
            .register(
                &instance("shop", 1001, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        assert!(!r.id().is_empty());
        assert!(
            r.ttl() > Duration::ZERO && r.ttl() <= TTL * 2,
            "{:?}",
            r.ttl()
        );
        r.keep_alive().await.unwrap();
        let list = instances.list("shop", read).await.unwrap();
        assert_eq!(list.instances.len(), 1);
        assert_eq!(list.instances["127.0.0.1:1001"].revision(), "aa");
        assert!(list.skipped.is_empty());
        assert!(list.epoch.is_some(), "a registration creates the epoch");
        let first_revision = list.revision;
        let mut changed = instance("shop", 1001, "bb");
        changed.mark_stopping();
        r.update(&changed).await.unwrap();
        let list = instances.list("shop", read).await.unwrap();
        let seen = &list.instances["127.0.0.1:1001"];
        assert_eq!(seen.revision(), "bb");
        assert!(seen.is_stopping() && !seen.accepts_calls(), "{seen:?}");
        assert!(
            list.revision >= first_revision,
            "the revision never goes backwards"
        );
        let other = instance("shop", 1002, "bb");
        let refused = r.update(&other).await;
        assert!(
            matches!(refused, Err(Error::Misuse(_))),
            "a registration writes its own record only: {refused:?}"
        );
        let list = instances.list("shop", read).await.unwrap();
        assert_eq!(
            list.instances.len(),
            1,
            "nothing written for the other record"
        );
        r.deregister().await.unwrap();
        let list = instances.list("shop", read).await.unwrap();
        assert!(list.instances.is_empty(), "{:?}", list.instances);
        assert!(list.epoch.is_some(), "the epoch outlives the records");
        assert!(
            instances
                .list("nobody", read)
                .await
                .unwrap()
                .instances
                .is_empty()
        );
    }

    pub async fn the_epoch_is_created_once_and_stays(s: Subject) {
        let limits = Limits::default();
        let read = InstanceRead::new(&limits);
        let instances = s.backend.instances();
        assert_eq!(instances.list("shop", read).await.unwrap().epoch, None);
        let a = instances
            .register(
                &instance("shop", 1001, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let epoch = instances.list("shop", read).await.unwrap().epoch;
        let b = instances
            .register(
                &instance("cart", 1002, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        assert_eq!(instances.list("cart", read).await.unwrap().epoch, epoch);
        a.deregister().await.unwrap();
        b.deregister().await.unwrap();
    }

    pub async fn a_follow_starts_with_a_reset_then_changes_in_order(s: Subject) {
        let limits = Limits::default();
        let instances = s.backend.instances();
        let before = instances
            .register(
                &instance("shop", 1001, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let mut follow = instances
            .follow("shop", InstanceRead::new(&limits))
            .await
            .unwrap();
        match next(&mut follow).await {
            InstanceEvent::Reset(list) => {
                assert_eq!(
                    list.instances.keys().collect::<Vec<_>>(),
                    ["127.0.0.1:1001"]
                )
            }
            InstanceEvent::Changes(c) => panic!("changes before the reset: {c:?}"),
        }
        let r = instances
            .register(
                &instance("shop", 1002, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        changes_until(&mut follow, upsert_of("127.0.0.1:1002", "aa")).await;
        r.update(&instance("shop", 1002, "bb")).await.unwrap();
        changes_until(&mut follow, upsert_of("127.0.0.1:1002", "bb")).await;
        r.deregister().await.unwrap();
        changes_until(
            &mut follow,
            |c| matches!(c, InstanceChange::Removed(a) if a == "127.0.0.1:1002"),
        )
        .await;
        before.deregister().await.unwrap();
        changes_until(
            &mut follow,
            |c| matches!(c, InstanceChange::Removed(a) if a == "127.0.0.1:1001"),
        )
        .await;
    }

    pub async fn an_unreadable_record_is_skipped_and_never_fails_the_app(s: Subject) {
        let limits = Limits::default();
        let read = InstanceRead::new(&limits);
        let instances = s.backend.instances();
        let good = instances
            .register(
                &instance("shop", 1001, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let mut follow = instances.follow("shop", read).await.unwrap();
        let _reset = next(&mut follow).await;
        (s.put_garbage)("shop".into(), "127.0.0.1:1002".into()).await;
        changes_until(
            &mut follow,
            |c| matches!(c, InstanceChange::Skipped { address, .. } if address == "127.0.0.1:1002"),
        )
        .await;
        let list = instances.list("shop", read).await.unwrap();
        assert_eq!(list.instances.len(), 1);
        assert_eq!(list.skipped.len(), 1, "{:?}", list.skipped);
        assert_eq!(list.skipped[0].0, "127.0.0.1:1002");
        let apps = instances.list_apps(&limits).await.unwrap();
        assert_eq!(apps["shop"].instances.len(), 1);
        good.deregister().await.unwrap();
    }

    pub async fn apps_are_listed_with_their_instances(s: Subject) {
        let limits = Limits::default();
        let instances = s.backend.instances();
        let a = instances
            .register(
                &instance("shop", 1001, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let b = instances
            .register(
                &instance("shop", 1002, "aa"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let c = instances
            .register(
                &instance("cart", 1003, "cc"),
                &RegisterOptions::new(TTL, &limits),
            )
            .await
            .unwrap();
        let apps = instances.list_apps(&limits).await.unwrap();
        assert_eq!(apps.keys().collect::<Vec<_>>(), ["cart", "shop"]);
        assert_eq!(apps["shop"].instances.len(), 2);
        for r in [a, b, c] {
            r.deregister().await.unwrap();
        }
    }

    pub async fn names_that_break_the_layout_are_refused(s: Subject) {
        let limits = Limits::default();
        let read = InstanceRead::new(&limits);
        let instances = s.backend.instances();
        for bad in ["a/b", "", "..", "a b"] {
            assert!(
                matches!(
                    instances.list(bad, read).await,
                    Err(Error::InvalidName { .. })
                ),
                "{bad:?}"
            );
            assert!(instances.follow(bad, read).await.is_err(), "{bad:?}");
            assert!(
                s.backend
                    .mapping()
                    .add("shop.Orders", bad, &limits)
                    .await
                    .is_err(),
                "{bad:?}"
            );
        }
        let bad = instance("a/b", 1, "aa");
        assert!(
            instances
                .register(&bad, &RegisterOptions::new(TTL, &limits))
                .await
                .is_err()
        );
        assert!(
            s.backend
                .mapping()
                .get("bad/interface", &limits)
                .await
                .is_err()
        );
    }

    pub async fn the_mapping_only_grows_by_compare_and_set(s: Subject) {
        let limits = Limits::default();
        let mapping = s.backend.mapping();
        assert!(
            mapping
                .get("shop.Orders", &limits)
                .await
                .unwrap()
                .is_empty()
        );
        let mut follow = mapping.follow("shop.Orders", &limits).await.unwrap();
        assert!(follow.next().await.unwrap().is_empty());
        mapping.add("shop.Orders", "shop", &limits).await.unwrap();
        let seen = tokio::time::timeout(WAIT, follow.next())
            .await
            .expect("a new value")
            .unwrap();
        assert_eq!(seen, BTreeSet::from(["shop".to_owned()]));
        if !s.cas_enforced {
            for i in 0..6 {
                mapping
                    .add("shop.Orders", &format!("app-{i}"), &limits)
                    .await
                    .unwrap();
            }
            mapping.add("shop.Orders", "shop", &limits).await.unwrap();
            assert_eq!(mapping.get("shop.Orders", &limits).await.unwrap().len(), 7);
            return;
        }
        // Concurrent writers never remove each other.
        let adds = (0..6).map(|i| {
            let mapping = mapping.clone();
            let limits = limits.clone();
            async move {
                mapping
                    .add("shop.Orders", &format!("app-{i}"), &limits)
                    .await
            }
        });
        for added in futures::future::join_all(adds).await {
            added.unwrap();
        }
        mapping.add("shop.Orders", "shop", &limits).await.unwrap();
        let apps = mapping.get("shop.Orders", &limits).await.unwrap();
        assert_eq!(apps.len(), 7, "{apps:?}");
        assert!(apps.contains("shop"));
    }

    /// A tag rule as dubbo-admin writes it.
    const TAG_RULE: &str = "configVersion: v3.0\nforce: false\nenabled: true\nkey: shop\ntags:\n  - name: gray\n    match:\n      - key: env\n        value:\n          exact: gray\n";
    /// A condition rule as Dubbo's docs write it.
    const CONDITION_RULE: &str = "configVersion: v3.0\nscope: service\nforce: true\nruntime: true\nenabled: true\nkey: org.apache.dubbo.samples.CommentService\nconditions:\n  - method=getComment => region=Hangzhou\n";

    pub async fn config_items_are_read_and_written_by_compare_and_set(s: Subject) {
        let config = s.backend.config();
        let key = ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap();
        assert_eq!(config.get(&key).await.unwrap(), None);
        let v1 = config
            .put(&key, ConfigWrite::create(TAG_RULE))
            .await
            .unwrap();
        let read = config.get(&key).await.unwrap().unwrap();
        assert_eq!(read.content, TAG_RULE);
        assert_eq!(read.version, v1);
        // Put if absent: it is not.
        match config.put(&key, ConfigWrite::create("x: 1")).await {
            Err(Error::Conflict {
                key: named,
                current,
            }) => {
                assert_eq!(named, "dubbo/shop.tag-router");
                assert_eq!(current, Some(read.clone()));
            }
            other => panic!("a create over an item: {other:?}"),
        }
        let changed = TAG_RULE.replace("force: false", "force: true");
        let v2 = config
            .put(&key, ConfigWrite::replace(&changed, &v1))
            .await
            .unwrap();
        assert_ne!(v1, v2);
        // A writer holding the stale version loses, and sees what is there now.
        let err = config
            .put(&key, ConfigWrite::replace("x: 2", &v1))
            .await
            .unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("dubbo/shop.tag-router"), "{shown}");
        assert!(shown.contains(v2.as_str()), "{shown}");
        match err {
            Error::Conflict {
                current: Some(now), ..
            } => {
                assert_eq!(now.content, changed);
                assert_eq!(now.version, v2);
            }
            other => panic!("a stale write: {other:?}"),
        }
        assert!(matches!(
            config.delete(&key, &v1).await,
            Err(Error::Conflict { .. })
        ));
        config.delete(&key, &v2).await.unwrap();
        assert_eq!(config.get(&key).await.unwrap(), None);
        match config.put(&key, ConfigWrite::replace("x: 3", &v2)).await {
            Err(Error::Conflict { current: None, .. }) => {}
            other => panic!("a write against a deleted item: {other:?}"),
        }
        // Service-scoped keys, as Dubbo names them.
        for key in [
            "org.apache.dubbo.samples.CommentService::.condition-router",
            "org.Outer$Inner:1.0:grp.configurators",
        ] {
            let key = ConfigKey::new(key, DEFAULT_GROUP).unwrap();
            let v = config
                .put(&key, ConfigWrite::create(CONDITION_RULE))
                .await
                .unwrap();
            let read = config.get(&key).await.unwrap().unwrap();
            assert_eq!((read.content.as_str(), &read.version), (CONDITION_RULE, &v));
        }
        // Names that could reach outside the group are refused before any request.
        for (key, group) in [("a/b", DEFAULT_GROUP), ("", DEFAULT_GROUP), ("k", "a/b")] {
            assert!(
                matches!(ConfigKey::new(key, group), Err(Error::InvalidName { .. })),
                "{key:?} in {group:?}"
            );
        }
        let huge = "a".repeat(introspect::governance::MAX_RULE_BYTES + 1);
        for content in ["", huge.as_str()] {
            match config
                .put(
                    &ConfigKey::new("big.tag-router", DEFAULT_GROUP).unwrap(),
                    ConfigWrite::create(content),
                )
                .await
            {
                Err(Error::Rule { key, .. }) => assert_eq!(key, "dubbo/big.tag-router"),
                other => panic!("{} bytes written: {other:?}", content.len()),
            }
        }
    }

    pub async fn a_config_follow_sees_each_state_in_order(s: Subject) {
        let config = s.backend.config();
        let key = ConfigKey::new("shop.condition-router", DEFAULT_GROUP).unwrap();
        let v1 = config
            .put(&key, ConfigWrite::create(CONDITION_RULE))
            .await
            .unwrap();
        let mut follow = config.follow(&key).await.unwrap();
        let first = next_item(&mut follow).await.expect("the current item");
        assert_eq!(
            (first.content.as_str(), &first.version),
            (CONDITION_RULE, &v1)
        );
        let updated = CONDITION_RULE.replace("Hangzhou", "Beijing");
        let v2 = config
            .put(&key, ConfigWrite::replace(&updated, &v1))
            .await
            .unwrap();
        let seen = next_item(&mut follow).await.expect("the update");
        assert_eq!(
            (seen.content.as_str(), &seen.version),
            (updated.as_str(), &v2)
        );
        config.delete(&key, &v2).await.unwrap();
        assert_eq!(next_item(&mut follow).await, None, "the delete");
        let recreated = CONDITION_RULE.replace("Hangzhou", "Shanghai");
        let v3 = config
            .put(&key, ConfigWrite::create(&recreated))
            .await
            .unwrap();
        let seen = next_item(&mut follow).await.expect("the re-create");
        assert_eq!(
            (seen.content.as_str(), &seen.version),
            (recreated.as_str(), &v3)
        );
        // Another key's changes are not this follow's.
        config
            .put(
                &ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap(),
                ConfigWrite::create(TAG_RULE),
            )
            .await
            .unwrap();
        config
            .put(
                &ConfigKey::new("shop.condition-router2", DEFAULT_GROUP).unwrap(),
                ConfigWrite::create(TAG_RULE),
            )
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(3), follow.next())
                .await
                .is_err(),
            "a state of another key"
        );
    }

    pub async fn unreadable_config_content_is_refused_and_the_follow_goes_on(s: Subject) {
        let config = s.backend.config();
        let key = ConfigKey::new("shop.configurators", DEFAULT_GROUP).unwrap();
        let mut follow = config.follow(&key).await.unwrap();
        assert_eq!(next_item(&mut follow).await, None);
        let huge = vec![b'a'; introspect::governance::MAX_RULE_BYTES + 1];
        (s.put_config_raw)(DEFAULT_GROUP.into(), key.key().into(), huge).await;
        for read in [next_state(&mut follow).await, config.get(&key).await] {
            match read {
                Err(Error::Rule { key, reason, .. }) => {
                    assert_eq!(key, "dubbo/shop.configurators");
                    assert!(reason.contains("over the limit"), "{reason}");
                }
                other => panic!("oversized content read: {other:?}"),
            }
        }
        if s.raw_bytes {
            (s.put_config_raw)(
                DEFAULT_GROUP.into(),
                key.key().into(),
                vec![b'a', 0xff, 0xfe],
            )
            .await;
            for read in [next_state(&mut follow).await, config.get(&key).await] {
                match read {
                    Err(Error::Rule { reason, .. }) => {
                        assert!(reason.contains("not UTF-8"), "{reason}")
                    }
                    other => panic!("non-UTF-8 content read: {other:?}"),
                }
            }
        }
        let good = "configVersion: v3.0\nscope: application\nkey: shop\nenabled: true\nconfigs:\n  - side: consumer\n    parameters:\n      timeout: 6000\n";
        (s.put_config_raw)(
            DEFAULT_GROUP.into(),
            key.key().into(),
            good.as_bytes().to_vec(),
        )
        .await;
        let seen = next_item(&mut follow).await.expect("good content again");
        assert_eq!(seen.content, good);
        assert_eq!(config.get(&key).await.unwrap(), Some(seen));
    }

    pub async fn a_rule_written_where_java_reads_it_is_read(s: Subject) {
        let config = s.backend.config();
        for key in [
            "greeter.tag-router",
            "org.Outer$Inner:1.0:grp.configurators",
        ] {
            (s.put_config_raw)(
                DEFAULT_GROUP.into(),
                key.into(),
                TAG_RULE.as_bytes().to_vec(),
            )
            .await;
            let read = config
                .get(&ConfigKey::new(key, DEFAULT_GROUP).unwrap())
                .await
                .unwrap();
            assert_eq!(read.map(|i| i.content).as_deref(), Some(TAG_RULE), "{key}");
        }
    }

    pub async fn config_keys_are_listed_per_group(s: Subject) {
        let config = s.backend.config();
        config
            .put(
                &ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap(),
                ConfigWrite::create(TAG_RULE),
            )
            .await
            .unwrap();
        config
            .put(
                &ConfigKey::new("shop.migration", "DUBBO_SERVICEDISCOVERY_MIGRATION").unwrap(),
                ConfigWrite::create("step: APPLICATION_FIRST"),
            )
            .await
            .unwrap();
        // One written where Java writes it, not through the backend.
        (s.put_config_raw)(
            DEFAULT_GROUP.into(),
            "com.foo.Svc::.condition-router".into(),
            CONDITION_RULE.as_bytes().to_vec(),
        )
        .await;
        let listed = config.list(DEFAULT_GROUP).await;
        if s.backend.name() == "nacos" {
            let err = listed.expect_err("Nacos cannot list").to_string();
            assert!(err.contains("not supported on Nacos"), "{err}");
            return;
        }
        assert_eq!(
            listed.unwrap(),
            ["com.foo.Svc::.condition-router", "shop.tag-router"]
        );
        assert_eq!(
            config
                .list("DUBBO_SERVICEDISCOVERY_MIGRATION")
                .await
                .unwrap(),
            ["shop.migration"]
        );
        assert!(config.list("nobody").await.unwrap().is_empty());
        assert!(matches!(
            config.list("a/b").await,
            Err(Error::InvalidName { .. })
        ));
        let item = config
            .get(&ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap())
            .await
            .unwrap()
            .unwrap();
        config
            .delete(
                &ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap(),
                &item.version,
            )
            .await
            .unwrap();
        assert_eq!(
            config.list(DEFAULT_GROUP).await.unwrap(),
            ["com.foo.Svc::.condition-router"]
        );
    }

    pub async fn a_report_is_written_once_read_listed_and_removed(s: Subject) {
        let limits = Limits::default();
        let reports = s.backend.reports();
        let info = MetadataInfo::new("shop", vec![ServiceInfo::new("shop.Orders")]).unwrap();
        let key = ReportKey::new("shop", info.revision.as_str()).unwrap();
        assert!(reports.get(&key, &limits).await.unwrap().is_none());
        assert!(reports.put_if_absent(&info, &limits).await.unwrap());
        assert!(
            !reports.put_if_absent(&info, &limits).await.unwrap(),
            "never overwritten"
        );
        let read = reports.get(&key, &limits).await.unwrap().unwrap();
        assert_eq!(read, info);
        assert_eq!(
            reports.revisions("shop").await.unwrap(),
            vec![info.revision.clone()]
        );
        assert!(reports.remove(&key).await.unwrap());
        assert!(!reports.remove(&key).await.unwrap());
        assert!(reports.get(&key, &limits).await.unwrap().is_none());
    }
}

macro_rules! backend_conformance {
    ($($case:ident),* $(,)?) => {
        mod memory {
            use super::*;
            use std::sync::Arc;
            use introspect::store::{MemoryStore, Store};

            $(
                #[tokio::test]
                async fn $case() {
                    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                    let raw = store.clone();
                    let put_garbage: Raw = Box::new(move |app, address| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            raw.put(&format!("/services/{app}/{address}"), b"{oops".to_vec(), None).await.unwrap();
                        })
                    });
                    let raw = store.clone();
                    let put_config_raw: RawConfig = Box::new(move |group, key, bytes| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            raw.put(&format!("/dubbo/config/{group}/{key}"), bytes, None).await.unwrap();
                        })
                    });
                    cases::$case(Subject {
                        backend: Backend::from(store),
                        put_garbage,
                        cas_enforced: true,
                        put_config_raw,
                        raw_bytes: true,
                    })
                    .await;
                }
            )*
        }

        mod etcd {
            use super::*;
            use crate::support::etcd::EtcdServer;
            use introspect::store::Store;

            $(
                #[tokio::test]
                async fn $case() {
                    let Some(server) = EtcdServer::start().await else {
                        return;
                    };
                    let store = server.store().await;
                    let raw = store.clone();
                    let put_garbage: Raw = Box::new(move |app, address| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            raw.put(&format!("/services/{app}/{address}"), b"{oops".to_vec(), None).await.unwrap();
                        })
                    });
                    let raw = store.clone();
                    let put_config_raw: RawConfig = Box::new(move |group, key, bytes| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            raw.put(&format!("/dubbo/config/{group}/{key}"), bytes, None).await.unwrap();
                        })
                    });
                    let backend = Backend::from(store);
                    assert_eq!(backend.name(), "etcd");
                    cases::$case(Subject {
                        backend,
                        put_garbage,
                        cas_enforced: true,
                        put_config_raw,
                        raw_bytes: true,
                    })
                    .await;
                }
            )*
        }

        #[cfg(feature = "zookeeper")]
        mod zookeeper {
            use super::*;
            use crate::support::zookeeper::ZooKeeperServer;

            $(
                #[tokio::test]
                async fn $case() {
                    let Some(server) = ZooKeeperServer::start().await else {
                        return;
                    };
                    let backend = server.backend().await;
                    assert_eq!(backend.name(), "zookeeper");
                    let raw = crate::support::zookeeper::raw_client(&server).await;
                    let put_garbage: Raw = Box::new(move |app, address| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            crate::support::zookeeper::create_with_parents(
                                &raw,
                                &format!("/services/{app}/{address}"),
                                b"{oops",
                            )
                            .await;
                        })
                    });
                    let raw = crate::support::zookeeper::raw_client(&server).await;
                    let put_config_raw: RawConfig = Box::new(move |group, key, bytes| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            // Where ZookeeperDynamicConfiguration reads: /dubbo/config/{group}/{key}.
                            let path = format!("/dubbo/config/{group}/{key}");
                            match raw.set_data(&path, &bytes, None).await {
                                Ok(_) => {}
                                Err(zookeeper_client::Error::NoNode) => {
                                    crate::support::zookeeper::create_with_parents(&raw, &path, &bytes)
                                        .await
                                }
                                Err(e) => panic!("raw write of {path}: {e}"),
                            }
                        })
                    });
                    cases::$case(Subject {
                        backend,
                        put_garbage,
                        cas_enforced: true,
                        put_config_raw,
                        raw_bytes: true,
                    })
                    .await;
                }
            )*
        }

        #[cfg(feature = "nacos")]
        mod nacos {
            use super::*;
            use crate::support::nacos::NacosServer;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(server) = NacosServer::start().await else {
                        return;
                    };
                    let backend = server.backend().await;
                    assert_eq!(backend.name(), "nacos");
                    let raw = std::sync::Arc::new(crate::support::nacos::raw_naming(&server).await);
                    let put_garbage: Raw = Box::new(move |app, address| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            let (ip, port) = address.rsplit_once(':').unwrap();
                            crate::support::nacos::register_raw(
                                &raw,
                                "DEFAULT_GROUP",
                                &app,
                                ip,
                                port.parse().unwrap(),
                                &[(keys::REVISION, "not/a/revision")],
                            )
                            .await;
                        })
                    });
                    let server = std::sync::Arc::new(server);
                    let raw = server.clone();
                    let put_config_raw: RawConfig = Box::new(move |group, key, bytes| {
                        let raw = raw.clone();
                        Box::pin(async move {
                            // As NacosConfigServiceWrapper names it: `$` as `___`, `/` as `-`.
                            let name = |s: &str| s.replace('$', "___").replace('/', "-");
                            let content = String::from_utf8(bytes).expect("Nacos takes text");
                            raw.put_config_http(&name(&key), &name(&group), &content).await;
                        })
                    });
                    cases::$case(Subject {
                        backend,
                        put_garbage,
                        cas_enforced: false,
                        put_config_raw,
                        raw_bytes: false,
                    })
                    .await;
                    drop(server);
                }
            )*
        }
    };
}

backend_conformance!(
    register_list_update_deregister,
    the_epoch_is_created_once_and_stays,
    a_follow_starts_with_a_reset_then_changes_in_order,
    an_unreadable_record_is_skipped_and_never_fails_the_app,
    apps_are_listed_with_their_instances,
    names_that_break_the_layout_are_refused,
    the_mapping_only_grows_by_compare_and_set,
    a_report_is_written_once_read_listed_and_removed,
    config_items_are_read_and_written_by_compare_and_set,
    a_config_follow_sees_each_state_in_order,
    unreadable_config_content_is_refused_and_the_follow_goes_on,
    a_rule_written_where_java_reads_it_is_read,
    config_keys_are_listed_per_group,
);
