//! The etcd store: the same semantics across machines, via `etcd-client`.

use std::time::Duration;

/// Connection options for [`EtcdStore`].
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// Endpoints, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Timeout for connecting.
    pub connect_timeout: Duration,
    /// Timeout for each request.
    pub request_timeout: Duration,
}

/// The etcd [`super::Store`].
pub struct EtcdStore {
    _options: EtcdOptions,
}
