//! Mixed Dubbo fleets: records and MetadataServices shaped exactly like Dubbo Java's and
//! dubbo-go's, resolved by this crate's resolver on the memory store, with real tonic
//! MetadataServiceV2 servers on loopback ports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::hostile::{FixedAnswer, serve_fixed};
use introspect::model::{RevisionRule, keys};
use introspect::rpc::MetadataServiceV2Server;
use introspect::rpc::pb::{MetadataInfoV2, ServiceInfoV2};
use introspect::rpc::to_wire;
use introspect::{
    Error, Limits, MemoryStore, MetadataInfo, Resolver, ServiceInfo, ServiceInstance, Store,
    Subscription,
};

const ORDERS: &str = "shop.OrderService";

/// A record as dubbo-go 3.x's etcd service discovery writes it: `jsonutil.EncodeJSON` of a
/// `registry.DefaultServiceInstance`, a struct without JSON tags, so the keys are the Go field
/// names, nil maps and pointers are `null`, and the encoder ends the value with a newline.
/// Sources (apache/dubbo-go): registry/service_instance.go (the struct),
/// registry/etcdv3/service_discovery.go (`Register`: the key `/services/{name}/{host}:{port}`
/// and the encoding), registry/servicediscovery/customizer/*.go (the metadata entries:
/// `dubbo.endpoints`, `dubbo.metadata-service.url-params` with string values, and `meta-v`,
/// `2.0.0` when the MetadataService protocol is `tri`).
fn go_record(app: &str, port: u16, revision: &str, service_metadata: &str) -> String {
    let endpoints = format!(r#"[{{\"port\":{port},\"protocol\":\"tri\"}}]"#);
    let url_params = format!(
        r#"{{\"group\":\"{app}\",\"port\":\"{port}\",\"protocol\":\"tri\",\"serialization\":\"hessian2\",\"version\":\"1.0.0\"}}"#
    );
    format!(
        r#"{{"ID":"127.0.0.1:{port}","ServiceName":"{app}","Host":"127.0.0.1","Port":{port},"Weight":0,"Enable":true,"Healthy":true,"Metadata":{{"dubbo.endpoints":"{endpoints}","dubbo.metadata-service.url-params":"{url_params}","dubbo.metadata.revision":"{revision}","dubbo.metadata.storage-type":"local","meta-v":"2.0.0","timestamp":"1732953600000"}},"ServiceMetadata":{service_metadata},"Address":"127.0.0.1:{port}","GroupName":"","Tag":""}}
"#
    )
}

/// What a dubbo-go provider's MetadataServiceV2 answers: services keyed by match key, with
/// the params dubbo-go copies from the service URL, `methods` among them (apache/dubbo-go,
/// metadata/info/metadata_info.go, `NewServiceInfoWithURL`), and port 0 in every service
/// (as the real dubbo-go 3.3.2 answers in the `dubbo_go` tests: the port comes from the
/// record's `dubbo.endpoints`).
fn go_answer(app: &str, revision: &str) -> MetadataInfoV2 {
    let params: HashMap<String, String> = [
        ("application", app),
        ("methods", "GetOrder,ListOrders"),
        ("serialization", "protobuf"),
        ("timeout", "3000"),
        ("release", "3.3.0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    MetadataInfoV2 {
        app: app.to_owned(),
        version: revision.to_owned(),
        services: [(
            format!("{ORDERS}:tri"),
            ServiceInfoV2 {
                name: ORDERS.into(),
                group: String::new(),
                version: String::new(),
                protocol: "tri".into(),
                port: 0,
                path: ORDERS.into(),
                params,
            },
        )]
        .into(),
    }
}

/// Serves `answer` as a MetadataServiceV2 on `listener` until the test ends.
fn serve_on(listener: tokio::net::TcpListener, answer: MetadataInfoV2) {
    let service = MetadataServiceV2Server::new(FixedAnswer(answer));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
}

async fn put(store: &Arc<dyn Store>, key: &str, value: impl Into<Vec<u8>>) {
    store.put(key, value.into(), None).await.unwrap();
}

#[tokio::test]
async fn dubbo_go_record_shapes_parse() {
    // The shape of dubbo-go's own etcd test instance: `Metadata: nil` marshals to null
    // (apache/dubbo-go, registry/etcdv3/service_discovery_test.go).
    let nil_metadata = r#"{"ID":"testID","ServiceName":"go-orders","Host":"127.0.0.1","Port":2233,"Weight":0,"Enable":true,"Healthy":true,"Metadata":null,"ServiceMetadata":null,"Address":"","GroupName":"","Tag":""}
"#;
    let i = ServiceInstance::from_json(nil_metadata.as_bytes(), &Limits::default()).unwrap();
    assert_eq!((i.service_name.as_str(), i.port), ("go-orders", 2233));
    assert!(i.enabled && i.healthy && i.metadata.is_empty());
    assert_eq!(i.revision(), "0");

    // A draining dubbo-go instance (`Enable: false`) with its ServiceMetadata embedded.
    let record = go_record("go-orders", 20000, "f00d", r#"{"app":"go-orders","revision":"f00d","services":{"shop.OrderService:tri":{"name":"shop.OrderService","protocol":"tri","port":20000,"path":"shop.OrderService","params":{"methods":"GetOrder"}}}}"#)
        .replace(r#""Enable":true"#, r#""Enable":false"#);
    let i = ServiceInstance::from_json(record.as_bytes(), &Limits::default()).unwrap();
    assert!(!i.enabled && i.healthy);
    assert_eq!(i.revision(), "f00d");
    assert_eq!(i.port_for_protocol("tri"), 20000);
    assert_eq!(i.metadata_service_target().unwrap(), 20000);

    // Dubbo Java 3.x's form (apache/dubbo, dubbo-registry/dubbo-registry-api/src/main/java/
    // org/apache/dubbo/registry/client/DefaultServiceInstance.java): camel-case names.
    let java = r#"{"serviceName":"java-orders","host":"10.0.0.7","port":20880,"enabled":true,
        "healthy":true,"registryCluster":"default","address":"10.0.0.7:20880",
        "metadata":{"dubbo.metadata.revision":"a888753e8f528e081833a0082c659444"}}"#;
    let i = ServiceInstance::from_json(java.as_bytes(), &Limits::default()).unwrap();
    assert_eq!(i.revision(), "a888753e8f528e081833a0082c659444");

    // Still malformed: a Go port outside u16, or no name at all. Skipped with the reason.
    for bad in [
        r#"{"ServiceName":"go-orders","Host":"127.0.0.1","Port":-1,"Metadata":null}"#,
        r#"{"ServiceName":"go-orders","Host":"127.0.0.1","Port":70000,"Metadata":null}"#,
        r#"{"Host":"127.0.0.1","Port":1,"Metadata":null}"#,
    ] {
        let e = ServiceInstance::from_json(bad.as_bytes(), &Limits::default()).unwrap_err();
        assert!(matches!(e, Error::Malformed { .. }), "{e}");
    }
}

#[tokio::test]
async fn a_dubbo_go_provider_resolves_end_to_end() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // dubbo-go's revision is its own rule's: opaque here.
    let revision = "3b1e6f0c5d2a4e8f9b7c1d0e2f3a4b5c";
    // Here the MetadataService and the services share one tri port (dubbo-go's default is
    // another port, given in the url-params); the answer names no port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    serve_on(listener, go_answer("go-orders", revision));
    put(
        &store,
        &format!("/services/go-orders/127.0.0.1:{port}"),
        go_record("go-orders", port, revision, "null"),
    )
    .await;
    put(&store, &format!("/dubbo/mapping/{ORDERS}"), "go-orders").await;

    let resolver = Resolver::new(store.clone());
    let endpoints = resolver.resolve(&Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    let e = &endpoints[0];
    assert_eq!((&*e.app, &*e.host), ("go-orders", "127.0.0.1"));
    assert_eq!((e.port, &*e.protocol), (port, "tri"));
    assert_eq!(e.params()["methods"], "GetOrder,ListOrders");
    let stats = resolver.stats().await;
    assert_eq!(stats.skipped_records, 0);
    assert_eq!(stats.metadata_fetches, 1);
    // No rule declared, and not Java's: used, counted as unverifiable.
    assert_eq!(stats.revision_checks.java_md5.unverifiable, 1);
}

/// A Dubbo Java provider with default settings serves its MetadataService over `dubbo`
/// (V1, Hessian); `meta-v` is absent or `1.0.0` (apache/dubbo, dubbo-registry-api,
/// MetadataUtils#referMetadataService chooses V2 only when `meta-v` is `2.0.0`).
fn java_v1_record(app: &str, host_port: u16, revision: &str) -> ServiceInstance {
    let mut i = ServiceInstance::new(app, "127.0.0.1", host_port);
    i.metadata.insert(keys::REVISION.into(), revision.into());
    i.metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        format!(r#"{{"connections":"1","version":"1.0.0","dubbo":"2.0.2","release":"3.2.10","side":"provider","port":"{host_port}","protocol":"dubbo"}}"#),
    );
    i.metadata.insert(
        keys::ENDPOINTS.into(),
        format!(r#"[{{"port":{host_port},"protocol":"dubbo"}}]"#),
    );
    i
}

#[tokio::test]
async fn a_v1_metadata_service_fails_in_words_while_a_v2_peer_answers() {
    let info = MetadataInfo::new("java-orders", [ServiceInfo::new(ORDERS)]).unwrap();
    let revision = info.computed_revision_under(RevisionRule::JavaMd5);
    let answer = MetadataInfo {
        revision: revision.clone(),
        ..info.clone()
    };
    let v2_port = serve_fixed(to_wire(&answer)).await;
    // The V1 instance's port answers nothing at all: it must not even be dialled.
    let v1 = Arc::new(java_v1_record("java-orders", 1, &revision));
    let mut v2 = ServiceInstance::new("java-orders", "127.0.0.1", v2_port);
    v2.metadata.insert(keys::REVISION.into(), revision.clone());
    v2.metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        format!(r#"{{"version":"1.0.0","port":"{v2_port}","protocol":"tri"}}"#),
    );
    v2.metadata.insert(keys::META_V.into(), "2.0.0".into());
    let v2 = Arc::new(v2);

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let resolver = Resolver::builder(store)
        .fetch_timeout(Duration::from_secs(2))
        .build();
    let e = resolver
        .metadata("java-orders", &revision, &[&v1])
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("MetadataService over dubbo (V1) is not supported; need tri"),
        "{e}"
    );
    let stats = resolver.stats().await;
    assert_eq!(
        (stats.unsupported_metadata_services, stats.metadata_fetches),
        (1, 0)
    );

    let got = resolver
        .metadata("java-orders", &revision, &[&v1, &v2])
        .await
        .unwrap();
    assert_eq!(got.services, info.services);
    let stats = resolver.stats().await;
    // The V1 instance is met (and counted) again only when the random order puts it first.
    assert!(
        (1..=2).contains(&stats.unsupported_metadata_services),
        "{stats:?}"
    );
    assert_eq!(stats.metadata_fetches, 1, "only the V2 instance was called");
    assert_eq!(stats.revision_checks.java_md5.verified, 1);
}

/// An instance record of `app` at `127.0.0.1:{port}` claiming `revision`, with
/// MetadataServiceV2 over tri on the same port, declaring `rule` if any.
fn v2_instance(app: &str, port: u16, revision: &str, rule: Option<&str>) -> Arc<ServiceInstance> {
    let mut i = ServiceInstance::new(app, "127.0.0.1", port);
    i.metadata.insert(keys::REVISION.into(), revision.into());
    i.metadata.insert(keys::META_V.into(), "2.0.0".into());
    if let Some(rule) = rule {
        i.metadata.insert(keys::REVISION_RULE.into(), rule.into());
    }
    Arc::new(i)
}

#[tokio::test]
async fn revisions_are_verified_by_rule_and_only_a_declared_rule_rejects() {
    let honest = MetadataInfo::new("shop", [ServiceInfo::new(ORDERS)]).unwrap();
    let forged_content = MetadataInfo::new(
        "shop",
        [ServiceInfo::new(ORDERS)
            .with_port(6666)
            .with_param("weight", "9999")],
    )
    .unwrap();
    let claim = |info: &MetadataInfo, revision: &str| MetadataInfo {
        revision: revision.to_owned(),
        ..info.clone()
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let resolver = Resolver::new(store);

    // A provider of this crate declaring sha256-v2 (`PROVIDER_REVISION_RULE`): verified.
    let v2_info =
        MetadataInfo::new_with_rule("shop", [ServiceInfo::new(ORDERS)], RevisionRule::Sha256V2)
            .unwrap();
    let v2 = v2_info.revision.clone();
    let port = serve_fixed(to_wire(&v2_info)).await;
    resolver
        .metadata(
            "shop",
            &v2,
            &[&v2_instance("shop", port, &v2, Some("sha256-v2"))],
        )
        .await
        .unwrap();
    resolver.clear_cache().await;

    // A Java 3.2+ provider (no rule declared) whose MD5 revision matches its content.
    let md5 = honest.computed_revision_under(RevisionRule::JavaMd5);
    let port = serve_fixed(to_wire(&claim(&honest, &md5))).await;
    resolver
        .metadata("shop", &md5, &[&v2_instance("shop", port, &md5, None)])
        .await
        .unwrap();

    // A forged answer under a declared sha256-v2 claim: rejected, nothing cached.
    let port = serve_fixed(to_wire(&claim(&forged_content, &v2))).await;
    let e = resolver
        .metadata(
            "shop",
            &v2,
            &[&v2_instance("shop", port, &v2, Some("sha256-v2"))],
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("hashes to"), "{e}");

    // The same forged answer from an instance declaring nothing: cannot be checked, so it
    // is counted as unverifiable and used (another implementation's rule, e.g. dubbo-go's).
    let opaque = "0123456789abcdef0123456789abcdef";
    let port = serve_fixed(to_wire(&claim(&forged_content, opaque))).await;
    let used = resolver
        .metadata("shop", opaque, &[&v2_instance("shop", port, opaque, None)])
        .await
        .unwrap();
    assert_eq!(used.services, forged_content.services);

    let stats = resolver.stats().await;
    assert_eq!(stats.revision_checks.java_md5.verified, 1);
    assert_eq!(stats.revision_checks.java_md5.unverifiable, 1);
    assert_eq!(stats.revision_checks.java_md5.rejected, 0);
    assert_eq!(stats.revision_checks.sha256_v2.verified, 1);
    assert_eq!(stats.revision_checks.sha256_v2.rejected, 1);
    assert_eq!(stats.revision_mismatches, 1);
    assert_eq!(
        stats.revisions_known, 2,
        "the verified and the unverifiable"
    );
}

#[tokio::test]
async fn an_undeclared_instance_cannot_poison_a_revision_others_declare() {
    let honest = MetadataInfo::new("shop", [ServiceInfo::new(ORDERS)]).unwrap();
    let revision = honest.revision.clone();
    let mut poisoned = MetadataInfo::new(
        "shop",
        [ServiceInfo::new(ORDERS)
            .with_port(6666)
            .with_param("weight", "9999")],
    )
    .unwrap();
    poisoned.revision = revision.clone();
    let poison_port = serve_fixed(to_wire(&poisoned)).await;
    let honest_port = serve_fixed(to_wire(&honest)).await;

    // Same (app, revision): one instance declares sha256-v1, the poisoner declares nothing
    // (or a rule nobody knows).
    let declared = v2_instance("shop", honest_port, &revision, Some("sha256-v1"));
    let undeclared = v2_instance("shop", poison_port, &revision, None);
    let unknown = v2_instance("shop", poison_port, &revision, Some("crc32-sum"));
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let resolver = Resolver::new(store);

    // Asked alone among its declared peers (here: the poisoner only answers), the
    // poisoned answer is checked under sha256-v1 and rejected; nothing enters the cache.
    let dead_declared = v2_instance("shop", 1, &revision, Some("sha256-v1"));
    for poisoner in [&undeclared, &unknown] {
        let e = resolver
            .metadata("shop", &revision, &[&dead_declared, poisoner])
            .await
            .unwrap_err();
        assert!(matches!(e, Error::MetadataUnavailable { .. }), "{e}");
    }
    let stats = resolver.stats().await;
    assert_eq!(stats.revision_checks.sha256_v1.rejected, 2);
    assert_eq!(stats.revisions_known, 0, "nothing poisoned is cached");

    // With the honest instance reachable, whichever is asked first, the honest content wins.
    for _ in 0..16 {
        resolver.clear_cache().await;
        let got = resolver
            .metadata("shop", &revision, &[&undeclared, &declared])
            .await
            .unwrap();
        assert_eq!(got.services, honest.services);
    }
    // Every load ends with the honest answer verified once.
    assert_eq!(
        resolver.stats().await.revision_checks.sha256_v1.verified,
        16
    );
}
