//! The xDS server over TLS with client certificates, like the MetadataService: a client
//! with a certificate from the configured CA gets answers; one without, or in plaintext,
//! does not.

use std::sync::Arc;
use std::time::Duration;

use crate::support::ads::AdsClient;
use crate::support::certs::TestCa;
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use introspect_xds::types::LISTENER;
use tokio::sync::oneshot;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// Opens a stream to `address` with `tls` and asks for one listener; whether an answer
/// came.
async fn answered(address: &str, tls: Option<ClientTlsConfig>) -> bool {
    let mut endpoint = Endpoint::from_shared(address.to_owned()).unwrap();
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).unwrap();
    }
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    let Ok(mut client) = AdsClient::open(channel).await else {
        return false;
    };
    client.send(LISTENER, &["no.Such"], "", "").await;
    client.next_within(Duration::from_secs(5)).await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates() {
    let ca = TestCa::new("xds-test-ca");
    let server_leaf = ca.leaf(&["localhost"]);
    let client_leaf = ca.leaf(&["xds-client"]);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let server = XdsServer::builder(Resolver::new(store))
        .tls_pem(
            server_leaf.cert_pem.as_bytes(),
            server_leaf.key_pem.as_bytes(),
            Some(ca.pem().as_bytes()),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));

    let trust = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    let https = format!("https://127.0.0.1:{port}");
    let with_cert = trust.clone().identity(Identity::from_pem(
        &client_leaf.cert_pem,
        &client_leaf.key_pem,
    ));
    assert!(
        answered(&https, Some(with_cert)).await,
        "a client with a certificate is served"
    );
    assert!(
        !answered(&https, Some(trust)).await,
        "a client without a certificate is refused"
    );
    assert!(
        !answered(&format!("http://127.0.0.1:{port}"), None).await,
        "a plaintext client is refused"
    );
}
