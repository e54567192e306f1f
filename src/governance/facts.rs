//! What rules match against: one provider (its address and service parameters) and one
//! call (its consumer, method, attachments and tag). Borrowed views, built by the balancer
//! once per distinct call input, so matching allocates nothing per provider.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::tag::CallTag;
use crate::model::Endpoint;

mod consumer;

pub use consumer::ConsumerIdentity;

pub use crate::config_item::MAX_RULE_BYTES;

/// One provider as rules see it: where it is and what its service publishes (after
/// configurators, when those have applied).
#[derive(Clone, Copy, Debug)]
pub struct ProviderFacts<'a> {
    /// The provider's host, unbracketed (`10.0.0.7`, `::1`).
    pub host: &'a str,
    /// The port calls go to.
    pub port: u16,
    /// The protocol spoken (`tri`).
    pub protocol: &'a str,
    /// The provider's application.
    pub app: &'a str,
    /// The interface (`helloworld.Greeter`).
    pub interface: &'a str,
    /// The service's parameters as published (`ServiceInfo.params`).
    pub params: &'a BTreeMap<String, String>,
}

impl<'a> ProviderFacts<'a> {
    /// What rules see of `endpoint` when its service parameters read `params` (its own,
    /// or as configurators override them).
    pub fn of(endpoint: &'a Endpoint, params: &'a BTreeMap<String, String>) -> Self {
        ProviderFacts {
            host: &endpoint.host,
            port: endpoint.port,
            protocol: &endpoint.protocol,
            app: &endpoint.app,
            interface: &endpoint.service.name,
            params,
        }
    }

    /// The value a rule's key reads on this provider, as Java reads a provider URL:
    /// `host`, `port`, `address` (`host:port`), `protocol`, `application` (also
    /// `remote.application`), `interface` (also `path`), else the service parameter.
    pub fn get(&self, key: &str) -> Option<Cow<'a, str>> {
        match key {
            "host" => Some(Cow::Borrowed(self.host)),
            "port" => Some(Cow::Owned(self.port.to_string())),
            "address" => Some(Cow::Owned(self.address())),
            "protocol" => Some(Cow::Borrowed(self.protocol)),
            "application" | "remote.application" => Some(Cow::Borrowed(self.app)),
            "interface" | "path" => Some(Cow::Borrowed(self.interface)),
            _ => self.params.get(key).map(|v| Cow::Borrowed(v.as_str())),
        }
    }

    /// `host:port` as Dubbo writes an address (an IPv6 host unbracketed, as Java's
    /// `URL.getAddress`).
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One call as rules see it: the consumer making it and what the call carries.
#[derive(Clone, Copy, Debug)]
pub struct CallFacts<'a> {
    /// The consumer's application.
    pub consumer_app: &'a str,
    /// The consumer's own host (what `addresses` of a consumer-side item match).
    pub consumer_host: &'a str,
    /// The consumer's own parameters (its reference's: `application`, `dubbo.tag`, ...).
    pub consumer_params: &'a BTreeMap<String, String>,
    /// The method called, from the gRPC path; `None` when the rule is evaluated for no
    /// call in particular (a view, `explain` without `--method`).
    pub method: Option<&'a str>,
    /// The call's attachments (request headers, lower-case names).
    pub attachments: &'a BTreeMap<String, String>,
    /// The call's tag (its own, else the consumer's).
    pub tag: &'a CallTag,
}

impl<'a> CallFacts<'a> {
    /// The value a rule's `when` key reads for this call, as Java reads the consumer URL
    /// and invocation: `method` (also `methods`) is the call's method, `address` the
    /// consumer's host (its URL has no port), anything else [`consumer`](Self::consumer)
    /// (so `dubbo.tag` is the consumer's own tag, not the request's, as in Java).
    /// Attachments (`attachments[k]`) are read with [`attachment`](Self::attachment).
    pub fn get(&self, key: &str) -> Option<Cow<'a, str>> {
        match key {
            "method" | "methods" => self.method.map(Cow::Borrowed),
            "address" => Some(Cow::Borrowed(self.consumer_host)),
            _ => self.consumer(key),
        }
    }

    /// The consumer URL's parameter `name`, as Java's `URL.getRawParameter` reads it (what
    /// a `then` pattern `$name` stands for): `host` is the consumer's host, `application`
    /// its app, anything else its parameter (`interface`, `version`, `group`, `side`,
    /// `protocol`, `dubbo.tag`, the embedder's own, ...).
    pub fn consumer(&self, name: &str) -> Option<Cow<'a, str>> {
        match name {
            "host" => Some(Cow::Borrowed(self.consumer_host)),
            "application" => Some(Cow::Borrowed(
                self.consumer_params
                    .get(name)
                    .map_or(self.consumer_app, String::as_str),
            )),
            _ => self
                .consumer_params
                .get(name)
                .map(|v| Cow::Borrowed(v.as_str())),
        }
    }

    /// The call's attachment `name` (case-insensitive, as HTTP/2 headers are lower-case).
    pub fn attachment(&self, name: &str) -> Option<&'a str> {
        match self.attachments.get(name) {
            Some(v) => Some(v.as_str()),
            None => self
                .attachments
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_keys_read_the_address_parts_before_the_parameters() {
        let params = BTreeMap::from([
            ("host".to_owned(), "spoofed".to_owned()),
            ("region".to_owned(), "hz".to_owned()),
        ]);
        let provider = ProviderFacts {
            host: "10.0.0.7",
            port: 50051,
            protocol: "tri",
            app: "greeter",
            interface: "helloworld.Greeter",
            params: &params,
        };
        assert_eq!(provider.get("host").as_deref(), Some("10.0.0.7"));
        assert_eq!(provider.get("address").as_deref(), Some("10.0.0.7:50051"));
        assert_eq!(provider.get("port").as_deref(), Some("50051"));
        assert_eq!(provider.get("region").as_deref(), Some("hz"));
        assert_eq!(provider.get("zone"), None);
    }

    #[test]
    fn call_keys_read_the_method_tag_and_attachments() {
        let params = BTreeMap::from([("dubbo.tag".to_owned(), "blue".to_owned())]);
        let attachments = BTreeMap::from([("x-user".to_owned(), "42".to_owned())]);
        let tag = CallTag::new("gray", false);
        let call = CallFacts {
            consumer_app: "shop",
            consumer_host: "10.0.0.9",
            consumer_params: &params,
            method: Some("SayHello"),
            attachments: &attachments,
            tag: &tag,
        };
        assert_eq!(call.get("method").as_deref(), Some("SayHello"));
        assert_eq!(call.get("application").as_deref(), Some("shop"));
        assert_eq!(
            call.get("dubbo.tag").as_deref(),
            Some("blue"),
            "the consumer's own tag, not the call's"
        );
        assert_eq!(call.get("address").as_deref(), Some("10.0.0.9"));
        assert_eq!(call.consumer("host").as_deref(), Some("10.0.0.9"));
        assert_eq!(call.attachment("X-User"), Some("42"));
        assert_eq!(call.attachment("x-other"), None);
    }
}
