//! Greeter servers that can be killed as a crash kills them: the listener closes (new
//! connections are refused), open connections are shut down under their clients, and the
//! lease keep-alive stops, so the instance record expires with its lease.
//!
//! The instances are written with [`Records`] (storage type `remote`, metadata from the
//! report), so only the Greeter itself is served.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use introspect::{MetadataInfo, ServiceInfo};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::greeter::{CountingGreeter, greeter_router};
use super::records::Records;

/// The Greeter's interface.
pub const GREETER: &str = "helloworld.Greeter";

/// The metadata of `app` exporting the Greeter.
pub fn greeter_info(app: &str) -> MetadataInfo {
    Records::metadata(app, &[ServiceInfo::new(GREETER)])
}

/// A Greeter server on loopback; see the module docs.
pub struct Killable {
    /// Where it listens.
    pub address: SocketAddr,
    connections: Arc<Mutex<Vec<std::net::TcpStream>>>,
    server: JoinHandle<()>,
    keep_alive: Option<JoinHandle<()>>,
}

impl Killable {
    /// Serves a Greeter on `127.0.0.1:port` (`0`: any free port).
    pub async fn serve(port: u16) -> Killable {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        let address = listener.local_addr().unwrap();
        let connections: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let kept = connections.clone();
        let incoming = futures::stream::unfold(listener, move |listener| {
            let kept = kept.clone();
            async move {
                let accepted = listener.accept().await.and_then(|(stream, _)| {
                    let std = stream.into_std()?;
                    kept.lock().unwrap().push(std.try_clone()?);
                    TcpStream::from_std(std)
                });
                Some((accepted, listener))
            }
        });
        let router = greeter_router(CountingGreeter::new(address));
        let server = tokio::spawn(async move {
            let _ = router.serve_with_incoming(incoming).await;
        });
        Killable {
            address,
            connections,
            server,
            keep_alive: None,
        }
    }

    /// Serves a Greeter on a free port and registers it as an instance of `info` under a
    /// lease of `ttl`, kept alive until [`kill`](Self::kill).
    pub async fn register(records: &Records, info: &MetadataInfo, ttl: Duration) -> Killable {
        let mut node = Killable::serve(0).await;
        let lease = records.store.grant_lease(ttl).await.expect("lease");
        records
            .register(&Records::instance(info, node.address.port()), Some(lease))
            .await;
        let store = records.store.clone();
        node.keep_alive = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 4).await;
                let _ = store.keep_alive(lease).await;
            }
        }));
        node
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Kills it: no goodbye, no deregistration.
    pub fn kill(&mut self) {
        if let Some(keep_alive) = self.keep_alive.take() {
            keep_alive.abort();
        }
        self.server.abort();
        for connection in self.connections.lock().unwrap().drain(..) {
            let _ = connection.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Killable {
    fn drop(&mut self) {
        self.kill();
    }
}
