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
    /// `{host}:{port}`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The service's parameters.
    pub fn params(&self) -> &BTreeMap<String, String> {
        &self.service.params
    }
}
