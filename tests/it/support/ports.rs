//! Loopback ports for the servers the tests start as child processes.

use std::net::TcpListener;

/// Where the test servers' ports are chosen (etcd, ZooKeeper, rnacos, the peers' providers):
/// below Linux's ephemeral range (32768 and up), so that no socket bound to port 0
/// elsewhere (a test's providers bind hundreds) can take one of them between the check that
/// it is free and the server binding it. rnacos's gRPC port, HTTP + 1000, must stay below
/// the range too.
const PORTS: std::ops::Range<u16> = 20_000..30_000;

/// A loopback port in [`PORTS`] that is free now and not in `avoid`, and, with `pair`,
/// whose port + 1000 is too. Tries from a place that differs per process and call, so
/// that servers started side by side do not try the same ports.
pub fn free_low_port(pair: bool, avoid: &[u16]) -> u16 {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let span = u32::from(PORTS.end - PORTS.start);
    let start =
        (nanos ^ std::process::id().wrapping_mul(2_654_435_761) ^ call.wrapping_mul(7_919)) % span;
    for i in 0..span {
        let port = PORTS.start + u16::try_from((start + i * 7) % span).expect("within the range");
        let free =
            |port: u16| !avoid.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(port) && (!pair || free(port + 1000)) {
            return port;
        }
    }
    panic!("no free loopback port in {PORTS:?}");
}

/// Two distinct free loopback ports in [`PORTS`].
pub fn free_ports() -> (u16, u16) {
    let first = free_low_port(false, &[]);
    (first, free_low_port(false, &[first]))
}
