//! A TCP proxy on loopback that injects network faults between chosen processes and a
//! registry (or any server): it passes bytes, delays the server's answers, blackholes (takes
//! connections and bytes and forwards nothing until healed, as a partition does: nothing is
//! lost, TCP would retransmit it), or cuts (resets every connection and every new one).
//! Only loopback targets are allowed.
//!
//! Each direction of a proxied connection is copied chunk by chunk: one half reads chunks and
//! stamps each with when it may go on (a delay is latency, not a rate: chunks read 10 ms
//! apart leave 10 ms apart, each late by the delay), the other forwards them in order while
//! the fault allows it. The fault is read for each chunk, so it applies to connections
//! already open as well as to new ones.
//!
//! A proxy can also listen on a second port at a fixed offset from its first, forwarding to
//! the target's port at the same offset, under the same fault: a Nacos client finds the
//! server's gRPC port 1000 above the HTTP port it was given, so both go through the proxy.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, tcp};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

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
    acceptors: Vec<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `target` (a loopback address).
    pub async fn start(target: SocketAddr) -> FaultProxy {
        FaultProxy::start_on(0, target).await
    }

    /// A proxy on loopback port `port` (`0`: any free one) forwarding to `target`.
    pub async fn start_on(port: u16, target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind proxy");
        FaultProxy::serve(vec![(listener, target)])
    }

    /// A proxy on a free loopback port P forwarding to `target`, and on P + `offset`
    /// forwarding to `target`'s port + `offset`, one fault for both (see the module docs).
    pub async fn start_with_offset(target: SocketAddr, offset: u16) -> FaultProxy {
        let mut second_target = target;
        second_target.set_port(target.port() + offset);
        for _ in 0..200 {
            let first = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
            let port = first.local_addr().unwrap().port();
            let Some(second_port) = port.checked_add(offset) else {
                continue;
            };
            if let Ok(second) = TcpListener::bind(("127.0.0.1", second_port)).await {
                return FaultProxy::serve(vec![(first, target), (second, second_target)]);
            }
        }
        panic!("no free pair of loopback ports P, P + {offset} for the proxy");
    }

    /// Accepts on each listener and forwards to its target; the first is [`Self::address`].
    fn serve(listeners: Vec<(TcpListener, SocketAddr)>) -> FaultProxy {
        let address = listeners[0].0.local_addr().unwrap();
        let (fault, _) = watch::channel(Fault::Pass);
        let acceptors = listeners
            .into_iter()
            .map(|(listener, target)| {
                assert!(
                    target.ip().is_loopback(),
                    "the fault proxy only forwards to loopback, not to {target}"
                );
                let faults = fault.clone();
                tokio::spawn(async move {
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
                })
            })
            .collect();
        FaultProxy {
            address,
            fault,
            acceptors,
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
        for acceptor in &self.acceptors {
            acceptor.abort();
        }
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
    faults: watch::Receiver<Fault>,
    answers: bool,
) {
    let (chunks, mut queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = {
        let faults = faults.clone();
        let from = &mut from;
        async move {
            let mut buffer = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = from.read(&mut buffer).await {
                let due = match *faults.borrow() {
                    Fault::Delay(delay) if answers => Instant::now() + delay,
                    _ => Instant::now(),
                };
                if chunks.send((due, buffer[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    };
    let writing = {
        let mut faults = faults.clone();
        let to = &mut to;
        async move {
            while let Some((due, chunk)) = queued.recv().await {
                // Held while blackholed; what holds it then decides.
                wait_for(&mut faults, |f| f != Fault::Blackhole).await;
                tokio::time::sleep_until(due).await;
                if *faults.borrow() == Fault::Cut || to.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            let _ = to.shutdown().await;
        }
    };
    let mut cuts = faults;
    let cut = tokio::select! {
        biased;
        () = wait_for(&mut cuts, |f| f == Fault::Cut) => true,
        _ = async { tokio::join!(reading, writing) } => false,
    };
    if cut {
        let _ = from.as_ref().set_zero_linger();
        let _ = to.as_ref().set_zero_linger();
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
