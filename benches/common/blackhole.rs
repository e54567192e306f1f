//! A TCP proxy on loopback that forwards both ways until it is told to hold, then forwards
//! nothing, on open connections and new ones alike, while it still accepts connections
//! and takes bytes: what a stopped process looks like to a client (its kernel still
//! accepts). Nothing is ever released; the proxy lives as long as its runtime.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, tcp};
use tokio::sync::watch;

/// See the module docs.
pub struct Blackhole {
    /// Where clients connect.
    pub address: SocketAddr,
    holding: watch::Sender<bool>,
}

impl Blackhole {
    /// A proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Blackhole {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let address = listener.local_addr().expect("proxy address");
        let (holding, _) = watch::channel(false);
        let held = holding.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut holding = held.subscribe();
                tokio::spawn(async move {
                    // A connection made while holding never reaches the server.
                    open(&mut holding).await;
                    if let Ok(server) = TcpStream::connect(target).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::join!(
                            pump(client_read, server_write, holding.clone()),
                            pump(server_read, client_write, holding),
                        );
                    }
                });
            }
        });
        Blackhole { address, holding }
    }

    /// Stops forwarding, for good.
    pub fn hold(&self) {
        self.holding.send_replace(true);
    }
}

/// Copies `from` to `to` chunk by chunk while not holding; a chunk read when the hold
/// begins is kept, never written.
async fn pump(
    mut from: tcp::OwnedReadHalf,
    mut to: tcp::OwnedWriteHalf,
    mut holding: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        open(&mut holding).await;
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        open(&mut holding).await;
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Returns while not holding; never once the hold began.
async fn open(holding: &mut watch::Receiver<bool>) {
    while *holding.borrow_and_update() {
        if holding.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
