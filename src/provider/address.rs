//! The host a provider registers: checked when given, chosen when not.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::error::{Error, Result};
use crate::model::names;

/// The host registered by [`super::Provider::start`] inside the user's own server when none
/// is given: reachable from this machine only.
pub(super) const LOOPBACK: &str = "127.0.0.1";

/// Checks a host given by the user: a valid name, and not an unspecified address, which
/// nobody can connect to.
pub(super) fn check_host(host: &str) -> Result<()> {
    names::validate_host(host)?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() => Err(Error::InvalidName {
            kind: "host",
            value: Error::shorten(host),
            reason: "is the unspecified address, which nobody can connect to: give the \
                     address consumers reach this instance at",
        }),
        _ => Ok(()),
    }
}

/// The host to register for a server listening at `local` when none was given: its IP, or
/// for a listener on all interfaces the IP of the interface that routes outward (loopback
/// when there is none).
pub(super) fn default_host(local: SocketAddr) -> String {
    let ip = local.ip();
    if !ip.is_unspecified() {
        return ip.to_string();
    }
    match crate::outward_ip::outward_ip(ip.is_ipv6()) {
        Some(ip) => ip.to_string(),
        None => {
            let loopback: IpAddr = if ip.is_ipv6() {
                Ipv6Addr::LOCALHOST.into()
            } else {
                Ipv4Addr::LOCALHOST.into()
            };
            tracing::warn!(
                %loopback,
                "listening on all interfaces and no interface routes outward: registering \
                 loopback; set the provider's host for consumers on other machines"
            );
            loopback.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_hosts_are_refused_and_others_pass() {
        for bad in ["0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0"] {
            let err = check_host(bad).unwrap_err();
            assert!(err.to_string().contains("unspecified"), "{bad}: {err}");
        }
        for good in [
            "127.0.0.1",
            "10.0.0.7",
            "::1",
            "[::1]",
            "shop.example",
            "fe80::1",
        ] {
            check_host(good).unwrap();
        }
    }

    #[test]
    fn a_listener_on_one_address_registers_that_address() {
        assert_eq!(default_host("10.1.2.3:50051".parse().unwrap()), "10.1.2.3");
        assert_eq!(default_host("[::1]:50051".parse().unwrap()), "::1");
        let any = default_host("0.0.0.0:50051".parse().unwrap());
        let ip: IpAddr = any.parse().unwrap();
        assert!(!ip.is_unspecified(), "{any}");
    }
}
