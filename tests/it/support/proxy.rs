//! An in-process TCP proxy on loopback that can cut every connection through it and refuse
//! new ones until healed: a network partition between one client and its server, for one
//! client only (a provider's ZooKeeper session, say), while others reach the server.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// See the module docs. Dropping it stops it and cuts every connection.
pub struct Proxy {
    /// Where clients connect.
    pub address: SocketAddr,
    cut: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `target`.
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let address = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (is_cut, kept) = (cut.clone(), connections.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let target = target.clone();
                let relay = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                kept.lock().unwrap().push(relay);
            }
        });
        Proxy {
            address,
            cut,
            connections,
            accepting,
        }
    }

    /// Cuts every connection and refuses new ones until [`heal`](Self::heal).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for relay in self.connections.lock().unwrap().drain(..) {
            relay.abort();
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accepting.abort();
    }
}
