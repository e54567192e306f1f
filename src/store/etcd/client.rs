//! The connection to etcd: connecting, the deadline on each request, and the memo of
//! granted lease TTLs.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::Client;

use super::errors::map_error;
use super::options::{EtcdOptions, parse_endpoint};
use crate::error::{Error, Result};
use crate::store::LeaseId;

/// Granted lease TTLs remembered for [`Store::keep_alive`]; past this the memo is reset.
const MAX_REMEMBERED_LEASES: usize = 10_000;

/// The etcd [`Store`]. Cheap to share behind an `Arc`; every call is one etcd request.
pub struct EtcdStore {
    pub(super) client: Client,
    request_timeout: Duration,
    pub(super) max_response_bytes: usize,
    endpoints: Vec<String>,
    /// TTLs etcd granted to the leases this handle created, so a keep-alive can answer
    /// with the TTL without a second request.
    granted: Mutex<HashMap<LeaseId, Duration>>,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to etcd and checks that an endpoint answers (and, with a user, that the
    /// credentials are accepted).
    ///
    /// Fails with [`Error::Config`] on unusable options, [`Error::StoreUnavailable`] when no
    /// endpoint answers within the connect timeout plus the request timeout, and
    /// [`Error::Unauthenticated`] when etcd refuses the credentials.
    pub async fn connect(options: EtcdOptions) -> Result<EtcdStore> {
        if options.endpoints.is_empty() {
            return Err(Error::Config("no etcd endpoints given".into()));
        }
        for endpoint in &options.endpoints {
            parse_endpoint(endpoint)?;
        }
        let connect_options = options.connect_options()?;
        let deadline = options.connect_timeout + options.request_timeout;
        let endpoints = options.endpoints.clone();
        let unavailable = |reason: String| {
            Error::StoreUnavailable(format!("cannot reach etcd at {endpoints:?}: {reason}"))
        };
        let attempt = async {
            let client = Client::connect(&options.endpoints, Some(connect_options))
                .await
                .map_err(|e| match e {
                    etcd_client::Error::InvalidArgs(reason) => {
                        Error::Config(format!("etcd options: {reason}"))
                    }
                    etcd_client::Error::InvalidUri(e) => {
                        Error::Config(format!("etcd endpoint: {e}"))
                    }
                    // The channel connects lazily: a transport error here is the endpoint or
                    // TLS setup, not the network.
                    etcd_client::Error::TransportError(e) => {
                        Error::Config(format!("etcd endpoint or TLS settings: {e}"))
                    }
                    other => map_error(other, "authenticate to etcd"),
                })?;
            // The channel connects lazily: one cheap request proves an endpoint answers.
            client
                .maintenance_client()
                .status()
                .await
                .map_err(|e| map_error(e, "etcd status"))?;
            Ok::<_, Error>(client)
        };
        let client = match tokio::time::timeout(deadline, attempt).await {
            Ok(Ok(client)) => client,
            Ok(Err(Error::StoreUnavailable(reason))) => return Err(unavailable(reason)),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(unavailable(format!("no answer within {deadline:?}"))),
        };
        Ok(EtcdStore {
            client,
            request_timeout: options.request_timeout,
            max_response_bytes: options.max_response_bytes,
            endpoints: options.endpoints,
            granted: Mutex::new(HashMap::new()),
        })
    }

    /// The endpoints this store was connected with.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Runs one request under the request timeout.
    pub(super) async fn timed<T>(
        &self,
        what: impl FnOnce() -> String,
        request: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.request_timeout, request).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                what: what(),
                after: self.request_timeout,
            }),
        }
    }

    pub(super) fn kv(&self) -> etcd_client::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(self.max_response_bytes)
    }

    pub(super) fn remember_ttl(&self, lease: LeaseId, ttl: Duration) {
        let mut granted = self
            .granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if granted.len() >= MAX_REMEMBERED_LEASES {
            granted.clear();
        }
        granted.insert(lease, ttl);
    }

    pub(super) fn remembered_ttl(&self, lease: LeaseId) -> Option<Duration> {
        self.granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&lease)
            .copied()
    }

    pub(super) fn forget_lease(&self, lease: LeaseId) {
        self.granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&lease);
    }
}
