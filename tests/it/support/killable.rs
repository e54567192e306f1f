//! Greeter servers that can be killed as a crash kills them: the listener closes (new
//! connections are refused), open connections are shut down under their clients, and the
//! lease keep-alive stops, so the instance record expires with its lease. They can also be
//! paused as SIGSTOP pauses a process (calls hang, keep-alives stop) and resumed (a lost
//! lease is replaced and the record written again, as a provider does).
//!
//! The instances are written with [`Records`] (storage type `remote`, metadata from the
//! report), so only the Greeter itself is served.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use introspect::model::keys;
use introspect::{Error, MetadataInfo, ServiceInfo, ServiceInstance};
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
    /// Where the Greeter listens.
    pub address: SocketAddr,
    greeter: CountingGreeter,
    connections: Arc<Mutex<Vec<std::net::TcpStream>>>,
    tasks: Vec<JoinHandle<()>>,
    keep_alive: Option<JoinHandle<()>>,
}

impl Killable {
    /// Serves a Greeter on `127.0.0.1:port` (`0`: any free port).
    pub async fn serve(port: u16) -> Killable {
        Killable::serve_on(IpAddr::V4(Ipv4Addr::LOCALHOST), port).await
    }

    /// Serves a Greeter on `ip:port` (`0`: any free port).
    pub async fn serve_on(ip: IpAddr, port: u16) -> Killable {
        let listener = TcpListener::bind((ip, port)).await.expect("bind");
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
        let greeter = CountingGreeter::new(address);
        let router = greeter_router(greeter.clone());
        let server = tokio::spawn(async move {
            let _ = router.serve_with_incoming(incoming).await;
        });
        Killable {
            address,
            greeter,
            connections,
            tasks: vec![server],
            keep_alive: None,
        }
    }

    /// Serves a Greeter on a free port of `127.0.0.1` and registers it as an instance of
    /// `info` under a lease of `ttl`, kept alive until [`kill`](Self::kill).
    pub async fn register(records: &Records, info: &MetadataInfo, ttl: Duration) -> Killable {
        let mut node = Killable::serve(0).await;
        let instance = Records::instance(info, node.port());
        node.keep_registered(records, instance, ttl).await;
        node
    }

    /// Like [`register`](Self::register), on `[::1]`: the record's host is `::1`.
    pub async fn register_ipv6(records: &Records, info: &MetadataInfo, ttl: Duration) -> Killable {
        let mut node = Killable::serve_on(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), 0).await;
        let mut instance = Records::instance(info, node.port());
        instance.host = "::1".into();
        node.keep_registered(records, instance, ttl).await;
        node
    }

    /// Like [`register`](Self::register), with an instance port of its own: the record's
    /// port is another listener of the node (which accepts connections, as a process's main
    /// port does), and `dubbo.endpoints` sends `tri` calls to the Greeter's port.
    pub async fn register_with_instance_port(
        records: &Records,
        info: &MetadataInfo,
        ttl: Duration,
    ) -> Killable {
        let mut node = Killable::serve(0).await;
        let main = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let main_port = main.local_addr().unwrap().port();
        let kept = node.connections.clone();
        node.tasks.push(tokio::spawn(async move {
            while let Ok((stream, _)) = main.accept().await {
                if let Ok(std) = stream.into_std() {
                    kept.lock().unwrap().push(std);
                }
            }
        }));
        let mut instance = Records::instance(info, main_port);
        let endpoints = format!(r#"[{{"port":{},"protocol":"tri"}}]"#, node.port());
        instance.metadata.insert(keys::ENDPOINTS.into(), endpoints);
        node.keep_registered(records, instance, ttl).await;
        node
    }

    /// Registers `instance` under a lease of `ttl` and keeps it alive (replacing a lost
    /// lease and writing the record again) while not paused.
    async fn keep_registered(
        &mut self,
        records: &Records,
        instance: ServiceInstance,
        ttl: Duration,
    ) {
        let store = records.store.clone();
        let mut lease = store.grant_lease(ttl).await.expect("lease");
        records.register(&instance, Some(lease)).await;
        let records = records.clone();
        let greeter = self.greeter.clone();
        self.keep_alive = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 4).await;
                if greeter.is_paused() {
                    continue;
                }
                if let Err(Error::LeaseNotFound(_)) = store.keep_alive(lease).await
                    && let Ok(fresh) = store.grant_lease(ttl).await
                {
                    lease = fresh;
                    let _ = records.registry.register(&instance, Some(lease)).await;
                }
            }
        }));
    }

    /// The port the Greeter listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Calls the Greeter answered.
    pub fn calls(&self) -> u64 {
        self.greeter.calls()
    }

    /// Pauses it: calls hang, its lease is no longer renewed.
    pub fn pause(&self) {
        self.greeter.pause();
    }

    /// Resumes it: waiting calls are answered, and the lease renewed, or replaced (with the
    /// record written again) if it expired meanwhile.
    pub fn resume(&self) {
        self.greeter.resume();
    }

    /// Kills it: no goodbye, no deregistration.
    pub fn kill(&mut self) {
        if let Some(keep_alive) = self.keep_alive.take() {
            keep_alive.abort();
        }
        for task in self.tasks.drain(..) {
            task.abort();
        }
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
