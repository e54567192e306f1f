//! One exported service and its match key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::names;

/// The protocol a service is exported with when none is given: Dubbo's Triple, which is
/// gRPC-compatible.
pub const DEFAULT_PROTOCOL: &str = "tri";

/// One service an app exports: name, qualifiers, where it listens and its parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceInfo {
    /// Interface name, e.g. `shop.OrderService` (tonic: `NamedService::NAME`).
    pub name: String,
    /// Group; empty for none.
    pub group: String,
    /// Version; empty for none.
    pub version: String,
    /// Protocol, e.g. `tri` or `grpc`; empty for none.
    pub protocol: String,
    /// A port of the service's own; `0` means the instance's port.
    pub port: u16,
    /// Request path; usually the interface name.
    pub path: String,
    /// Service parameters (timeouts, weights, ...); volatile ones never enter the revision.
    pub params: BTreeMap<String, String>,
}

impl ServiceInfo {
    /// A service exported with the default protocol, on the instance's port, with the
    /// interface name as its path.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        ServiceInfo {
            path: name.clone(),
            name,
            protocol: DEFAULT_PROTOCOL.to_owned(),
            ..Default::default()
        }
    }

    /// Sets the group.
    pub fn with_group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Sets the version.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets the protocol.
    pub fn with_protocol(mut self, protocol: impl Into<String>) -> Self {
        self.protocol = protocol.into();
        self
    }

    /// Sets a port of the service's own.
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Sets the request path.
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Adds a parameter.
    pub fn with_param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    /// The match key `{group}/{interface}:{version}:{protocol}` with empty parts left out.
    pub fn match_key(&self) -> String {
        match_key(&self.name, &self.group, &self.version, &self.protocol)
    }

    /// Checks every name that goes into a key or a match key.
    pub fn validate(&self) -> Result<()> {
        names::validate_interface(&self.name)?;
        names::validate_qualifier("group", &self.group)?;
        names::validate_qualifier("version", &self.version)?;
        names::validate_qualifier("protocol", &self.protocol)?;
        Ok(())
    }
}

/// Builds a match key: `{group}/{interface}:{version}:{protocol}`; the `group/` and
/// `:version` parts are left out when empty, `:protocol` when the protocol is empty.
pub fn match_key(interface: &str, group: &str, version: &str, protocol: &str) -> String {
    let mut key =
        String::with_capacity(group.len() + interface.len() + version.len() + protocol.len() + 3);
    if !group.is_empty() {
        key.push_str(group);
        key.push('/');
    }
    key.push_str(interface);
    if !version.is_empty() {
        key.push(':');
        key.push_str(version);
    }
    if !protocol.is_empty() {
        key.push(':');
        key.push_str(protocol);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_key_leaves_out_empty_parts() {
        let s = ServiceInfo::new("shop.OrderService");
        assert_eq!(s.match_key(), "shop.OrderService:tri");
        assert_eq!(
            s.clone().with_group("blue").with_version("1.0").match_key(),
            "blue/shop.OrderService:1.0:tri"
        );
        assert_eq!(
            s.clone().with_version("2.1").match_key(),
            "shop.OrderService:2.1:tri"
        );
        assert_eq!(s.with_protocol("").match_key(), "shop.OrderService");
    }

    #[test]
    fn json_ignores_unknown_and_fills_missing_fields() {
        let s: ServiceInfo = serde_json::from_str(r#"{"name":"a.B","extra":1,"port":7}"#).unwrap();
        assert_eq!(s.name, "a.B");
        assert_eq!(s.port, 7);
        assert!(s.params.is_empty());
    }
}
