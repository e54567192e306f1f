//! Loopback ports for the servers the tests start as child processes.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Where the test servers' ports are chosen (etcd, ZooKeeper, rnacos, the peers' providers):
/// below Linux's ephemeral range (32768 and up), so that no socket bound to port 0
/// elsewhere (a test's providers bind hundreds) can take one of them between the check that
/// it is free and the server binding it. rnacos's gRPC port, HTTP + 1000, must stay below
/// the range too.
const PORTS: std::ops::Range<u16> = 20_000..30_000;

/// Every port handed out in this process, never handed out again: a port is chosen well
/// before its server binds it (a cluster picks all its members' ports, then starts them), so
/// a check that it is free cannot tell it from one another test was just given. Tests run
/// on parallel threads of one process and use a few hundred ports of the ten thousand.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port in [`PORTS`] that is free now and was never handed out in this process,
/// and, with `pair`, whose port + 1000 is too (both are then handed out). Tries from a
/// place that differs per process and call, so that test binaries run side by side are
/// unlikely to try the same ports.
pub fn free_low_port(pair: bool) -> u16 {
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let span = u32::from(PORTS.end - PORTS.start);
    let start = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % span;
    let free =
        |port: u16| !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok();
    let found = (0..span)
        .map(|i| PORTS.start + u16::try_from((start + i * 7) % span).expect("within the range"))
        .find(|&port| free(port) && (!pair || free(port + 1000)));
    let Some(port) = found else {
        panic!("no free loopback port in {PORTS:?}");
    };
    handed_out.insert(port);
    if pair {
        handed_out.insert(port + 1000);
    }
    port
}

/// Two distinct free loopback ports in [`PORTS`].
pub fn free_ports() -> (u16, u16) {
    (free_low_port(false), free_low_port(false))
}
