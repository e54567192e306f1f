//! An endpoint: what a consumer finally gets.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::ServiceInfo;

/// Where to call one service on one instance.
///
/// The service info and the instance metadata are shared (`Arc`), so a fleet's endpoints
/// cost O(instances) small records, not O(instances × services × params).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// The app that serves it.
    pub app: String,
    /// The instance's host.
    pub host: String,
    /// The port to call: the service's own, else the protocol's, else the instance's.
    pub port: u16,
    /// The protocol to speak.
    pub protocol: String,
    /// The revision of the instance's metadata.
    pub revision: String,
    /// The service as exported.
    pub service: Arc<ServiceInfo>,
}

impl Endpoint {
    /// The dialable address: `{host}:{port}`, with an IPv6 host in brackets
    /// (`[::1]:50051`). The store's instance keys keep Dubbo's unbracketed form; this one
    /// is what a client connects to.
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The service's parameters.
    pub fn params(&self) -> &BTreeMap<String, String> {
        &self.service.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(host: &str) -> Endpoint {
        Endpoint {
            app: "a".into(),
            host: host.into(),
            port: 50051,
            protocol: "tri".into(),
            revision: "r".into(),
            service: Arc::new(ServiceInfo::new("a.A")),
        }
    }

    #[test]
    fn ipv6_hosts_are_bracketed_in_the_dialable_address() {
        assert_eq!(at("10.0.0.1").address(), "10.0.0.1:50051");
        assert_eq!(at("::1").address(), "[::1]:50051");
        assert_eq!(at("fe80::1:2").address(), "[fe80::1:2]:50051");
        assert_eq!(
            at("[::1]").address(),
            "[::1]:50051",
            "never bracketed twice"
        );
        assert_eq!(at("shop.example").address(), "shop.example:50051");
    }
}
