//! An endpoint: what a consumer finally gets.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::{Authority, ServiceInfo};

/// How the revision of an endpoint from an interface-level provider URL starts.
pub(crate) const INTERFACE_REVISION_PREFIX: &str = "url:";

/// Where to call one service on one instance.
///
/// Every part is shared (`Arc`): the app, revision, protocol and service info by all the
/// endpoints of one revision, the host by all the endpoints of one instance. A fleet's
/// endpoints thus cost one small fixed-size record each (88 bytes on 64-bit targets), not
/// O(instances × services × params), and cloning an endpoint copies no string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// The app that serves it.
    pub app: Arc<str>,
    /// The instance's host.
    pub host: Arc<str>,
    /// The port to call: the service's own, else the protocol's, else the instance's.
    pub port: u16,
    /// The port of the instance's record (`{host}:{instance_port}` is its registry key):
    /// a hold by self-preservation sets aside every endpoint of its instance.
    pub instance_port: u16,
    /// The protocol to speak.
    pub protocol: Arc<str>,
    /// The revision of the instance's metadata.
    pub revision: Arc<str>,
    /// The service as exported.
    pub service: Arc<ServiceInfo>,
    /// When the instance started, in ms since the epoch, from its record's `timestamp`
    /// metadata (where Dubbo Java writes it); 0 when unknown. Weights warm up from it.
    pub timestamp: u64,
}

impl Endpoint {
    /// Where calls go: `{host}:{port}`, with an IPv6 host in brackets (`[::1]:50051`), the
    /// key of consumer-side health and of the balanced channel.
    pub fn authority(&self) -> Authority {
        Authority::new(&self.host, self.port)
    }

    /// The authority of the endpoint's instance (its host and instance port), by which a
    /// hold of that instance is known.
    pub fn instance_authority(&self) -> Authority {
        Authority::new(&self.host, self.instance_port)
    }

    /// The dialable address as text: [`Endpoint::authority`]'s. The store's instance keys
    /// keep Dubbo's unbracketed form; this one is what a client connects to.
    pub fn address(&self) -> String {
        self.authority().as_str().to_owned()
    }

    /// Whether it comes from an interface-level provider URL rather than an instance's
    /// metadata: its revision is `url:` and a digest of the URL,
    /// which no instance's revision can be (a `:` is refused in them).
    pub fn is_interface_level(&self) -> bool {
        self.revision.starts_with(INTERFACE_REVISION_PREFIX)
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
            instance_port: 50051,
            protocol: "tri".into(),
            revision: "r".into(),
            service: Arc::new(ServiceInfo::new("a.A")),
            timestamp: 0,
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
