//! The local IP this machine sends outward traffic from: the host a provider on all
//! interfaces registers, and the host a consumer names itself by. Shared by both sides.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// The local IP the system would send outward traffic from: a UDP socket "connected" to a
/// documentation address (RFC 5737 / RFC 3849) picks its source address from the routing
/// table without sending any packet.
pub(crate) fn outward_ip(v6: bool) -> Option<IpAddr> {
    let (bind, probe): (SocketAddr, SocketAddr) = if v6 {
        (
            (Ipv6Addr::UNSPECIFIED, 0).into(),
            (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 9).into(),
        )
    } else {
        (
            (Ipv4Addr::UNSPECIFIED, 0).into(),
            (Ipv4Addr::new(192, 0, 2, 1), 9).into(),
        )
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(probe).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
}

/// The host a consumer names when none is given (in its record, and for the rules that
/// match consumers by host): the IP of the interface that routes outward, else loopback.
pub(crate) fn consumer_host() -> String {
    outward_ip(false).map_or_else(|| "127.0.0.1".to_owned(), |ip| ip.to_string())
}
