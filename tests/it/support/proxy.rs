//! A TCP proxy on loopback that injects network faults between chosen processes and a
//! registry (or any server): it passes bytes, delays the server's answers, blackholes (takes
//! connections and bytes and forwards nothing until healed, as a partition does: nothing is
//! lost, TCP would retransmit it), or cuts (resets every connection and every new one).
//! Only loopback targets are allowed.
//!
//! Each direction of a proxied connection is copied chunk by chunk by a task that reads the
//! current fault before forwarding each chunk, so a fault applies to connections already
//! open as well as to new ones.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, tcp};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does to traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forwards everything at once.
    Pass,
    /// Forwards the server's answers after this long (requests at once).
    Delay(Duration),
    /// Accepts connections and bytes, forwards nothing until the fault changes (then what
    /// was held goes on, in order).
    Blackhole,
    /// Resets every connection, open or new.
    Cut,
}

/// See the module docs. Stops (closing every connection) when dropped.
pub struct FaultProxy {
    /// Where clients connect.
    pub address: SocketAddr,
    fault: watch::Sender<Fault>,
    acceptor: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `target` (a loopback address).
    pub async fn start(target: SocketAddr) -> FaultProxy {
        FaultProxy::start_on(0, target).await
    }

    /// A proxy on loopback port `port` (`0`: any free one) forwarding to `target`.
    pub async fn start_on(port: u16, target: SocketAddr) -> FaultProxy {
        assert!(
            target.ip().is_loopback(),
            "the fault proxy only forwards to loopback, not to {target}"
        );
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind proxy");
        let address = listener.local_addr().unwrap();
        let (fault, _) = watch::channel(Fault::Pass);
        let faults = fault.clone();
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let now = *faults.borrow();
                if now == Fault::Cut {
                    reset(client);
                    continue;
                }
                let faults = faults.subscribe();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        proxy(client, server, faults).await;
                    }
                });
            }
        });
        FaultProxy {
            address,
            fault,
            acceptor,
        }
    }

    /// The `host:port` clients connect to.
    pub fn endpoint(&self) -> String {
        self.address.to_string()
    }

    /// Changes what the proxy does, for open and new connections alike.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.fault.send_replace(Fault::Cut);
    }
}

/// Closes `stream` with a reset rather than a goodbye.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Copies both directions until either side ends or the fault is a cut.
async fn proxy(client: TcpStream, server: TcpStream, faults: watch::Receiver<Fault>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(pump(client_read, server_write, faults.clone(), false));
    let down = tokio::spawn(pump(server_read, client_write, faults, true));
    let _ = (up.await, down.await);
}

/// Copies `from` to `to` chunk by chunk, applying the fault to each chunk (`answers`: this
/// direction carries the server's answers, which a delay holds back). On a cut both streams
/// are reset.
async fn pump(
    mut from: tcp::OwnedReadHalf,
    mut to: tcp::OwnedWriteHalf,
    mut faults: watch::Receiver<Fault>,
    answers: bool,
) {
    let cut = |from: &tcp::OwnedReadHalf, to: &tcp::OwnedWriteHalf| {
        let _ = from.as_ref().set_zero_linger();
        let _ = to.as_ref().set_zero_linger();
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            () = wait_for(&mut faults, |f| f == Fault::Cut) => return cut(&from, &to),
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Held while blackholed; what holds it then decides.
        wait_for(&mut faults, |f| f != Fault::Blackhole).await;
        let fault = *faults.borrow();
        match fault {
            Fault::Cut => return cut(&from, &to),
            Fault::Delay(delay) if answers => tokio::time::sleep(delay).await,
            _ => {}
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits until the fault satisfies `done` (at once if it does); forever once the proxy is
/// gone, unless a cut is what is waited for.
async fn wait_for(faults: &mut watch::Receiver<Fault>, done: impl Fn(Fault) -> bool) {
    loop {
        if done(*faults.borrow_and_update()) {
            return;
        }
        if faults.changed().await.is_err() {
            if done(Fault::Cut) {
                return;
            }
            std::future::pending::<()>().await;
        }
    }
}
