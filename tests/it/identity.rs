//! The identity check: a registry that lies cannot redirect traffic. Real tonic Greeter
//! servers over TLS on loopback, certificates made here; a rogue that can write the registry
//! registers under `shop-payments`.

use std::sync::Arc;
use std::time::Duration;

use crate::support::certs::{Leaf, TestCa};
use crate::support::greeter::{GreeterNode, serve_greeter_with};
use introspect::consumer::ResolverBuilder;
use introspect::identity::{IdentityCheck, IdentityRule};
use introspect::provider::ProviderBuilder;
use introspect::{MemoryStore, Resolver, Store, Subscription};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The app the rogue impersonates.
const PAYMENTS: &str = "shop-payments";
/// The interface both export.
const GREETER: &str = "helloworld.Greeter";

/// A server's TLS: its certificate and key.
fn tls_of(leaf: &Leaf) -> ServerTlsConfig {
    ServerTlsConfig::new().identity(Identity::from_pem(&leaf.cert_pem, &leaf.key_pem))
}

/// Starts a Greeter of `app` over TLS with `leaf`, its provider's builder changed by
/// `configure`.
async fn start_with(
    store: &Arc<dyn Store>,
    app: &str,
    leaf: &Leaf,
    configure: impl FnOnce(ProviderBuilder) -> ProviderBuilder,
) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let drain = Duration::from_millis(50);
    serve_greeter_with(listener, store, app, drain, Some(tls_of(leaf)), configure).await
}

/// A rogue registered under `shop-payments`, serving with `leaf`.
async fn rogue(store: &Arc<dyn Store>, leaf: &Leaf) -> GreeterNode {
    start_with(store, PAYMENTS, leaf, |b| b).await
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
    assert_eq!(
        resolver.identity_rejections_per_app().get(PAYMENTS),
        Some(&stats.identity_rejections)
    );
    // Plain TLS, trusting the same CA, takes the rogue's word.
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    let plain = Resolver::builder(store.clone()).tls(tls).build();
    let endpoints = plain.resolve(&Subscription::new(GREETER)).await.unwrap();
    assert_eq!(endpoints.len(), 1);
}
