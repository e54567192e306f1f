//! The one address type of the data plane: where a call goes.
//!
//! An [`Authority`] is a dialable `host:port` with an IPv6 literal host in brackets
//! (`[::1]:50051`), as an HTTP/2 `:authority` writes it. Consumer-side health and the
//! balanced channel key endpoints by it, and a held instance is known by the authority of
//! its record (its host and instance port), so no two spellings of one address can meet.
//! Registry keys keep Dubbo's unbracketed `{host}:{port}` (see
//! [`super::ServiceInstance::key_address`]); that form never reaches health or the balancer.

use std::fmt;
use std::sync::Arc;

/// A dialable `host:port`, IPv6 hosts in brackets. Cheap to clone. See the module docs.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Authority(Arc<str>);

impl Authority {
    /// The authority of `host` (bracketed when it is an IPv6 literal, never twice) and
    /// `port`.
    pub fn new(host: &str, port: u16) -> Self {
        let text = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Authority(text.into())
    }

    /// The text form, e.g. `10.0.0.7:50051` or `[::1]:50051`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for Authority {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_hosts_are_bracketed_once() {
        assert_eq!(Authority::new("10.0.0.1", 1).as_str(), "10.0.0.1:1");
        assert_eq!(Authority::new("::1", 7).as_str(), "[::1]:7");
        assert_eq!(Authority::new("[::1]", 7).as_str(), "[::1]:7");
        assert_eq!(Authority::new("fe80::1:2", 9).as_str(), "[fe80::1:2]:9");
        assert_eq!(
            Authority::new("shop.example", 80).as_str(),
            "shop.example:80"
        );
        assert_eq!(Authority::new("::1", 7), Authority::new("[::1]", 7));
    }
}
