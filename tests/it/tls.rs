//! MetadataService over TLS, with certificates generated at test time.

use std::sync::Arc;
use std::time::Duration;

use crate::support::certs::TestCa;
use crate::support::fleet::start_provider_with;
use introspect::{Error, MemoryStore, Resolver, ServiceInfo, Store, Subscription};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

fn server_tls(ca: &TestCa) -> ServerTlsConfig {
    let leaf = ca.leaf(&["localhost", "127.0.0.1"]);
    ServerTlsConfig::new().identity(Identity::from_pem(leaf.cert_pem, leaf.key_pem))
}

fn client_tls(ca: &TestCa) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost")
}

fn resolver(store: &Arc<dyn Store>, tls: Option<ClientTlsConfig>) -> Resolver {
    let mut builder = Resolver::builder(store.clone()).fetch_timeout(Duration::from_secs(2));
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    builder.build()
}

fn order_service() -> Vec<ServiceInfo> {
    vec![ServiceInfo::new("shop.OrderService")]
}

#[tokio::test]
async fn tls_consumer_resolves_tls_provider() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _p = start_provider_with(&store, "shop-orders", order_service(), |b| {
        b.tls(server_tls(&ca))
    })
    .await;
    let endpoints = resolver(&store, Some(client_tls(&ca)))
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1);
}

async fn refused(store: &Arc<dyn Store>, resolver: Resolver) -> Error {
    let err = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap_err();
    assert_eq!(resolver.stats().await.revisions_known, 0);
    let _ = store;
    eprintln!("refused with: {err}");
    err
}

#[tokio::test]
async fn tls_consumer_refuses_plaintext_provider() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _p = start_provider_with(&store, "shop-orders", order_service(), |b| b).await;
    let err = refused(&store, resolver(&store, Some(client_tls(&ca)))).await;
    assert!(matches!(err, Error::MetadataUnavailable { .. }), "{err}");
}

#[tokio::test]
async fn tls_consumer_refuses_provider_of_another_ca() {
    let ours = TestCa::new("our CA");
    let theirs = TestCa::new("someone else's CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _p = start_provider_with(&store, "shop-orders", order_service(), |b| {
        b.tls(server_tls(&theirs))
    })
    .await;
    let err = refused(&store, resolver(&store, Some(client_tls(&ours)))).await;
    let text = err.to_string();
    assert!(
        text.contains("certificate") || text.contains("Unknown") || text.contains("tls"),
        "unclear error: {text}"
    );
}

#[tokio::test]
async fn plaintext_consumer_cannot_read_tls_provider() {
    let ca = TestCa::new("introspect test CA");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _p = start_provider_with(&store, "shop-orders", order_service(), |b| {
        b.tls(server_tls(&ca))
    })
    .await;
    let err = refused(&store, resolver(&store, None)).await;
    assert!(matches!(err, Error::MetadataUnavailable { .. }), "{err}");
}
