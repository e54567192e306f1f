//! The fault proxy the fault tests put between processes and a registry does what it says:
//! passes, delays answers, blackholes (and delivers what it held once healed), and cuts.

use std::time::{Duration, Instant};

use crate::support::proxy::{Fault, FaultProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo server on loopback.
async fn echo() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

/// Sends `text` and reads its echo, within `limit`.
async fn round_trip(stream: &mut TcpStream, text: &[u8], limit: Duration) -> Option<Vec<u8>> {
    stream.write_all(text).await.ok()?;
    let mut back = vec![0u8; text.len()];
    match tokio::time::timeout(limit, stream.read_exact(&mut back)).await {
        Ok(Ok(_)) => Some(back),
        _ => None,
    }
}

#[tokio::test]
async fn the_proxy_passes_delays_blackholes_and_cuts() {
    let proxy = FaultProxy::start(echo().await).await;
    let mut stream = TcpStream::connect(proxy.address).await.unwrap();
    let second = Duration::from_secs(1);
    assert_eq!(
        round_trip(&mut stream, b"a", second).await.as_deref(),
        Some(&b"a"[..])
    );

    proxy.set(Fault::Delay(Duration::from_millis(300)));
    let started = Instant::now();
    assert!(round_trip(&mut stream, b"b", second * 3).await.is_some());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "answers delayed"
    );

    proxy.set(Fault::Blackhole);
    assert_eq!(
        round_trip(&mut stream, b"c", Duration::from_millis(300)).await,
        None
    );
    let mut fresh = TcpStream::connect(proxy.address)
        .await
        .expect("accepted while blackholed");
    assert_eq!(
        round_trip(&mut fresh, b"d", Duration::from_millis(300)).await,
        None
    );
    proxy.set(Fault::Pass);
    let mut held = [0u8; 1];
    tokio::time::timeout(second, stream.read_exact(&mut held))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&held, b"c", "what was held is delivered once healed");

    proxy.set(Fault::Cut);
    let mut rest = [0u8; 1];
    let cut = tokio::time::timeout(second, stream.read(&mut rest))
        .await
        .unwrap();
    assert!(
        matches!(cut, Ok(0) | Err(_)),
        "an open connection is cut: {cut:?}"
    );
    let mut after = TcpStream::connect(proxy.address).await.unwrap();
    let refused = tokio::time::timeout(second, after.read(&mut rest))
        .await
        .unwrap();
    assert!(
        matches!(refused, Ok(0) | Err(_)),
        "a new one too: {refused:?}"
    );
}
