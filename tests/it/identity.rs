//! The identity check: a registry that lies cannot redirect traffic. Real tonic Greeter
//! servers over TLS on loopback, certificates made here; a rogue that can write the registry
//! registers under `shop-payments` and must get no call, and no call may fail for it. Nor
//! can a rule in the config centre send calls to it
//! (`a_rule_routing_every_call_to_a_rogue_sends_it_none`): routing chooses among the
//! endpoints the check admitted, whatever a rule names (measured, three runs: the unforced
//! rule written over the forced one was obeyed 4 to 8 ms after its write on the memory store;
//! the test takes 0.7 s).

use introspect::backend::{ConfigKey, ConfigWrite};
use std::sync::Arc;
use std::time::Duration;

use crate::support::calls::{Caller, channel_over};
use crate::support::certs::{Leaf, TestCa};
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::GreeterServer;
use crate::support::greeter::{CountingGreeter, GreeterNode, serve_greeter_with};
use crate::support::logs::capture_warnings;
use crate::support::wait::eventually;
use introspect::backend::Backend;
use introspect::backend::config::DEFAULT_GROUP;
use introspect::consumer::{BalancedChannel, ChannelHandle, HealthOptions, ResolverBuilder};
use introspect::identity::{IdentityCheck, IdentityRule, ServerIdentity};
use introspect::model::StorageType;
use introspect::provider::ProviderBuilder;
use introspect::{
    Error, MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription, SubscriptionHandle,
};
use tokio::sync::oneshot;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The app the rogue impersonates.
const PAYMENTS: &str = "shop-payments";
/// The interface both export.
const GREETER: &str = "helloworld.Greeter";
/// Calls each scenario makes.
const CALLS: u64 = 300;
/// The message of the crate's line for a refused server.
const REFUSED_LINE: &str =
    "server refused: its certificate does not pass the identity check of its app";

/// A server's TLS: its certificate and key.
fn tls_of(leaf: &Leaf) -> ServerTlsConfig {
    ServerTlsConfig::new().identity(Identity::from_pem(&leaf.cert_pem, &leaf.key_pem))
}

/// An honest provider's certificate: it names its app (and `localhost`, which a consumer
/// without the check verifies).
fn honest_leaf(ca: &TestCa) -> Leaf {
    ca.leaf(&[PAYMENTS, "localhost"])
}

/// Starts a Greeter of `app` over TLS with `leaf`, its provider's builder changed by
/// `configure`; an honest one declares its certificate's identity under `rule` to its
/// provider, which checks it at `serve`.
async fn start_with(
    store: &Arc<dyn Store>,
    app: &str,
    leaf: &Leaf,
    rule: Option<IdentityRule>,
    configure: impl FnOnce(ProviderBuilder) -> ProviderBuilder,
) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let drain = Duration::from_millis(50);
    let identity =
        rule.map(|rule| ServerIdentity::from_pem(&leaf.cert_pem, &leaf.key_pem, rule).unwrap());
    let tls = match &identity {
        Some(identity) => identity.tls_config(),
        None => tls_of(leaf),
    };
    serve_greeter_with(listener, store, app, drain, Some(tls), |builder| {
        let builder = configure(builder);
        match identity {
            Some(identity) => builder.identity(identity),
            None => builder,
        }
    })
    .await
}

/// An honest Greeter of `shop-payments` (its certificate names it by the DNS rule).
async fn honest(store: &Arc<dyn Store>, ca: &TestCa) -> GreeterNode {
    let rule = Some(IdentityRule::dns());
    start_with(store, PAYMENTS, &honest_leaf(ca), rule, |b| b).await
}

/// A rogue registered under `shop-payments`, serving with `leaf`.
async fn rogue(store: &Arc<dyn Store>, leaf: &Leaf) -> GreeterNode {
    start_with(store, PAYMENTS, leaf, None, |b| b).await
}

/// A consumer checking identity by the DNS rule against `ca`.
fn checking_resolver(store: &Arc<dyn Store>, ca: &TestCa) -> Resolver {
    let check = IdentityCheck::new(IdentityRule::dns(), ca.pem()).unwrap();
    checking_resolver_with(store, check, |b| b)
}

/// A consumer with `check`, its builder changed by `configure`.
fn checking_resolver_with(
    store: &Arc<dyn Store>,
    check: IdentityCheck,
    configure: impl FnOnce(ResolverBuilder) -> ResolverBuilder,
) -> Resolver {
    let builder = Resolver::builder(store.clone())
        .fetch_timeout(Duration::from_secs(2))
        .identity(check);
    configure(builder).build()
}

/// Subscribes to the Greeter and waits until `n` endpoints resolve (the registry lists a
/// rogue like any other instance: the check is the channel's).
async fn subscribed(resolver: &Resolver, n: usize) -> SubscriptionHandle {
    let subscription = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    eventually(
        Duration::from_secs(20),
        "the endpoints to resolve",
        || async { subscription.current().len() == n },
    )
    .await;
    subscription
}

/// Makes `n` calls through `channel`, one at a time: (succeeded, the failures' statuses).
async fn call(channel: &BalancedChannel, n: u64) -> (u64, Vec<tonic::Status>) {
    let mut client = GreeterClient::new(channel.clone());
    let (mut ok, mut failed) = (0, Vec::new());
    for _ in 0..n {
        let mut request = tonic::Request::new(HelloRequest {
            name: "consumer".into(),
        });
        request.set_timeout(Duration::from_secs(2));
        match client.say_hello(request).await {
            Ok(_) => ok += 1,
            Err(status) => failed.push(status),
        }
    }
    (ok, failed)
}

/// Waits until the channel has handed `admitted` addresses to its balancer and the check
/// refused `refused`.
async fn settled(handle: &ChannelHandle, admitted: usize, refused: usize) {
    let what = format!("{admitted} endpoints admitted and {refused} refused");
    eventually(Duration::from_secs(20), &what, || async {
        handle.addresses().len() == admitted && handle.refused().len() == refused
    })
    .await;
}

/// Three honest providers of `shop-payments` and a rogue registered under it with the
/// certificate `rogue_leaf` makes (given the CA the consumer trusts): the consumer checking
/// identity makes [`CALLS`] calls, none reaches the rogue, none fails, and the rejection is
/// counted and logged once, with `cause` and `presented`.
async fn rogue_gets_no_call(
    rogue_leaf: impl FnOnce(&TestCa) -> Leaf,
    cause: &str,
    presented: &str,
) {
    let logs = capture_warnings();
    let ca = TestCa::new("introspect test CA");
    let rogue_leaf = rogue_leaf(&ca);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut fleet = Vec::new();
    for _ in 0..3 {
        fleet.push(honest(&store, &ca).await);
    }
    let rogue = rogue(&store, &rogue_leaf).await;
    let resolver = checking_resolver(&store, &ca);
    let subscription = subscribed(&resolver, 4).await;
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    settled(&handle, 3, 1).await;
    let rogue_address = rogue.address.to_string();
    assert!(handle.refused().keys().any(|a| a.as_str() == rogue_address));

    let (ok, failed) = call(&channel, CALLS).await;
    assert_eq!(rogue.calls(), 0, "the rogue got calls");
    assert!(failed.is_empty(), "calls failed: {failed:?}");
    assert_eq!(ok, CALLS);
    assert_eq!(fleet.iter().map(GreeterNode::calls).sum::<u64>(), CALLS);

    let stats = resolver.stats().await;
    assert!(stats.identity_rejections >= 1, "{stats:?}");
    assert_eq!(stats.panic_routes, 0);
    let per_app = resolver.identity_rejections_per_app();
    assert_eq!(per_app.get(PAYMENTS), Some(&stats.identity_rejections));
    let lines = logs.captured.lines(REFUSED_LINE);
    assert_eq!(lines.len(), 1, "one line for the rogue: {lines:?}");
    let fields = &lines[0].fields;
    assert!(
        fields.contains(&format!("app={PAYMENTS}"))
            && fields.contains(&format!("expected=DNS:{PAYMENTS}"))
            && fields.contains(&format!("cause={cause}"))
            && fields.contains(&format!("presented={presented}"))
            && !fields.contains("PRIVATE"),
        "{fields}"
    );
    for node in fleet {
        node.shutdown().await;
    }
    rogue.shutdown().await;
}

#[tokio::test]
async fn a_rogue_with_a_valid_certificate_for_another_app_gets_no_call() {
    // Valid, from the consumer's own CA, for another app (and `localhost`, which plain TLS
    // would accept).
    rogue_gets_no_call(
        |ca| ca.leaf(&["shop-orders", "localhost"]),
        "does not name the app",
        "DNS:shop-orders, DNS:localhost",
    )
    .await;
}

/// The v3.0 condition rule of the Greeter sending every call to `port`, `force` as given.
fn every_call_to(port: u16, force: bool) -> String {
    format!(
        "configVersion: v3.0\nscope: service\nkey: {GREETER}\nenabled: true\nruntime: true\nforce: {force}\nconditions:\n  - \"=> port = {port}\"\n"
    )
}

/// An attacker who can write the registry and the config centre: a rogue registered under
/// `shop-payments` with a certificate that does not name it, and a condition rule
/// (`=> port = ROGUE`) where the consumer reads its rules. The check refused the rogue before
/// any call, so routing never sees it: the rule leaves none of the admitted providers, and
/// forced, every call fails at once saying which rule left none; not forced, the rule is set
/// aside (as Java sets aside a rule that matches no provider) and the honest provider takes
/// every call. The rogue gets none, counted on its server.
#[tokio::test]
async fn a_rule_routing_every_call_to_a_rogue_sends_it_none() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let honest = honest(&store, &ca).await;
    let rogue = rogue(&store, &ca.leaf(&["shop-orders", "localhost"])).await;
    let rogue_port = rogue.address.port();
    let backend = Backend::from(store.clone());
    let config = backend.config();
    let key = format!("{GREETER}::.condition-router");
    let forced = config
        .put(
            &ConfigKey::new(&key, DEFAULT_GROUP).unwrap(),
            ConfigWrite::create(&every_call_to(rogue_port, true)),
        )
        .await
        .unwrap();
    let resolver = checking_resolver(&store, &ca);
    let subscription = subscribed(&resolver, 2).await;
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    settled(&handle, 1, 1).await;

    let (ok, failed) = call(&channel, CALLS).await;
    assert_eq!(
        ok, 0,
        "a forced rule naming only the rogue leaves no provider"
    );
    for status in &failed {
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        let message = status.message();
        assert!(
            message.contains("no provider routed") && message.contains(&key),
            "{message}"
        );
    }
    assert_eq!((rogue.calls(), honest.calls()), (0, 0));

    // Not forced: the rule leaves nothing and is set aside.
    let written = std::time::Instant::now();
    config
        .put(
            &ConfigKey::new(&key, DEFAULT_GROUP).unwrap(),
            ConfigWrite::replace(&every_call_to(rogue_port, false), &forced),
        )
        .await
        .unwrap();
    // A call a millisecond until one is answered: failed calls fail at once.
    let obeyed = loop {
        if call(&channel, 1).await.0 == 1 {
            break written.elapsed();
        }
        assert!(
            written.elapsed() < Duration::from_secs(10),
            "the unforced rule not in force 10 s after its write"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    eprintln!("the unforced rule was obeyed {obeyed:?} after its write");
    let (ok, failed) = call(&channel, CALLS).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(ok, CALLS);
    assert_eq!(rogue.calls(), 0, "the rogue got calls");
    assert!(
        honest.calls() > CALLS,
        "the honest provider took every call"
    );
    honest.shutdown().await;
    rogue.shutdown().await;
}

#[tokio::test]
async fn a_rogue_with_a_certificate_of_another_ca_gets_no_call() {
    rogue_gets_no_call(
        |_| TestCa::new("someone else's CA").leaf(&[PAYMENTS, "localhost"]),
        "is not issued by a trusted CA",
        "DNS:shop-payments, DNS:localhost",
    )
    .await;
}

#[tokio::test]
async fn a_rogue_whose_certificate_has_no_san_gets_no_call() {
    rogue_gets_no_call(
        |ca| ca.leaf_without_san(PAYMENTS),
        "does not name the app",
        "no subject alternative name (subject CN=shop-payments)",
    )
    .await;
}

#[tokio::test]
async fn when_every_provider_is_refused_calls_fail_at_once_saying_why() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // Their metadata comes from the report, so the endpoints resolve and the channel is
    // left to refuse them.
    let leaf = ca.leaf(&["shop-orders", "localhost"]);
    let remote = |b: ProviderBuilder| b.storage_type(StorageType::Remote);
    let rogues = [
        start_with(&store, PAYMENTS, &leaf, None, remote).await,
        start_with(&store, PAYMENTS, &leaf, None, remote).await,
    ];
    let resolver = checking_resolver(&store, &ca);
    let subscription = subscribed(&resolver, 2).await;
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    settled(&handle, 0, 2).await;
    let (ok, failed) = call(&channel, 5).await;
    assert_eq!(ok, 0);
    for status in &failed {
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        let message = status.message();
        assert!(
            message.contains("refused by the identity check")
                && message.contains("\"shop-payments\"")
                && message.contains("presented DNS:shop-orders"),
            "{message}"
        );
    }
    assert!(rogues.iter().all(|r| r.calls() == 0));
    assert_eq!(
        resolver.stats().await.panic_routes,
        0,
        "no panic mode to a rogue"
    );
}

#[tokio::test]
async fn metadata_calls_check_the_identity_too() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _rogue = rogue(&store, &ca.leaf(&["shop-orders", "localhost"])).await;
    let resolver = checking_resolver(&store, &ca);
    let error = resolver
        .resolve(&Subscription::new(GREETER))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("refused as app \"shop-payments\"") && text.contains("DNS:shop-orders"),
        "{text}"
    );
    let stats = resolver.stats().await;
    assert_eq!(stats.revisions_known, 0);
    assert!(stats.identity_rejections >= 1, "{stats:?}");
    // Plain TLS, trusting the same CA, takes the rogue's word.
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    let plain = Resolver::builder(store.clone()).tls(tls).build();
    assert_eq!(
        plain
            .resolve(&Subscription::new(GREETER))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn without_the_check_a_rogue_takes_calls_as_before() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut fleet = Vec::new();
    for _ in 0..3 {
        fleet.push(honest(&store, &ca).await);
    }
    let rogue = rogue(&store, &ca.leaf(&["shop-orders", "localhost"])).await;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    let resolver = Resolver::builder(store.clone()).tls(tls).build();
    let subscription = subscribed(&resolver, 4).await;
    let channel = channel_over(&resolver, &subscription, 4).await;
    let (ok, failed) = call(&channel, CALLS).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(ok, CALLS);
    assert!(rogue.calls() > 0, "TLS alone lets the rogue in");
    assert_eq!(resolver.stats().await.identity_rejections, 0);
}

#[tokio::test]
async fn a_spiffe_rule_reads_the_uri_sans() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rule = IdentityRule::spiffe("example.org").unwrap();
    let leaf = ca.leaf_for_uris(&["spiffe://example.org/app/shop-payments"]);
    let honest = start_with(&store, PAYMENTS, &leaf, Some(rule.clone()), |b| b).await;
    let rogue = rogue(
        &store,
        &ca.leaf_for_uris(&["spiffe://example.org/app/shop-orders"]),
    )
    .await;
    let check = IdentityCheck::new(rule, ca.pem()).unwrap();
    let resolver = checking_resolver_with(&store, check, |b| b);
    let subscription = subscribed(&resolver, 2).await;
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    settled(&handle, 1, 1).await;
    let why = handle.refused().values().next().unwrap().to_string();
    assert!(
        why.contains("presented URI:spiffe://example.org/app/shop-orders"),
        "{why}"
    );
    let (ok, failed) = call(&channel, 50).await;
    assert_eq!((ok, failed.len()), (50, 0));
    assert_eq!((honest.calls(), rogue.calls()), (50, 0));
}

#[tokio::test]
async fn a_provider_whose_certificate_names_another_app_fails_at_start() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let leaf = ca.leaf(&["shop-orders"]);
    let identity =
        ServerIdentity::from_pem(&leaf.cert_pem, &leaf.key_pem, IdentityRule::dns()).unwrap();
    let says_why = |error: Error| {
        let text = error.to_string();
        assert!(matches!(error, Error::IdentityMismatch { .. }), "{text}");
        assert!(
            text.contains("\"shop-payments\" does not name it")
                && text.contains("asks for DNS:shop-payments")
                && text.contains("presents DNS:shop-orders"),
            "{text}"
        );
    };
    let started = Provider::builder(PAYMENTS, store.clone())
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .identity(identity.clone())
        .export(ServiceInfo::new(GREETER))
        .start()
        .await;
    says_why(started.unwrap_err());
    let provider = Provider::builder(PAYMENTS, store.clone())
        .identity(identity)
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(GreeterServer::new(CountingGreeter::new(address)));
    let served = provider
        .serve(router, listener, std::future::pending())
        .await;
    says_why(served.unwrap_err());
    let registered = store.get_prefix("/services/").await.unwrap();
    assert!(registered.kvs.is_empty(), "nothing registered");
}

/// A raw Greeter server over TLS with `leaf` on `listener`, until `stop` is sent.
fn raw_greeter(
    listener: tokio::net::TcpListener,
    leaf: &Leaf,
) -> (
    CountingGreeter,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let greeter = CountingGreeter::new(listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let router = tonic::transport::Server::builder()
        .tls_config(tls_of(leaf))
        .unwrap()
        .add_service(GreeterServer::new(greeter.clone()));
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let serving = tokio::spawn(async move {
        let _ = router
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    (greeter, stop, serving)
}

#[tokio::test]
async fn a_refused_endpoint_rejoins_only_once_a_tls_recheck_passes() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let honest_node = honest(&store, &ca).await;
    // An instance record at an address where a rogue answers, its metadata in the report.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (rogue, stop_rogue, rogue_serving) =
        raw_greeter(listener, &ca.leaf(&["shop-orders", "localhost"]));
    let record = Provider::builder(PAYMENTS, store.clone())
        .host("127.0.0.1")
        .port(address.port())
        .storage_type(StorageType::Remote)
        .export_service::<GreeterServer<CountingGreeter>>()
        .start()
        .await
        .unwrap();
    let recheck = Duration::from_millis(200);
    let health = HealthOptions::default()
        .failure_threshold(1)
        .probe_interval(Duration::from_millis(100));
    let check = IdentityCheck::new(IdentityRule::dns(), ca.pem())
        .unwrap()
        .recheck_interval(recheck);
    let resolver = checking_resolver_with(&store, check, |b| b.health(health));
    let subscription = subscribed(&resolver, 2).await;
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    settled(&handle, 1, 1).await;

    // Rechecks and a health probe (which the rogue answers: it is alive, whoever it is) do
    // not bring it back, while calls keep flowing to the honest one.
    let caller = Caller::start(channel.clone(), Duration::from_millis(5));
    let endpoint = subscription
        .current()
        .iter()
        .find(|e| e.port == address.port())
        .cloned()
        .unwrap();
    subscription.report_failure(&endpoint);
    eventually(
        Duration::from_secs(10),
        "a TCP probe of the rogue",
        || async { resolver.stats().await.probes > 0 },
    )
    .await;
    tokio::time::sleep(recheck * 5).await;
    settled(&handle, 1, 1).await;
    let (ok, failed, errors) = caller.finish().await;
    assert!(
        ok > 0 && failed == 0,
        "{ok} ok, {failed} failed: {errors:?}"
    );
    assert_eq!(rogue.calls(), 0);

    // The rogue goes; an honest server takes its address: the next recheck passes.
    stop_rogue.send(()).unwrap();
    rogue_serving.await.unwrap();
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let (fixed, _stop_fixed, _fixed_serving) = raw_greeter(listener, &honest_leaf(&ca));
    settled(&handle, 2, 0).await;
    let (ok, failed) = call(&channel, 100).await;
    assert_eq!((ok, failed.len()), (100, 0));
    assert!(fixed.calls() > 0 && honest_node.calls() > 0);
    assert_eq!(rogue.calls(), 0);
    record.abort();
}
