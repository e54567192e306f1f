//! The store's handle: connecting (now or in the background), the deadline on each
//! request, and the memo of granted lease TTLs.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::Client;

use super::errors::map_error;
use super::members::Members;
use super::options::{EtcdOptions, parse_endpoint};
use super::pages::PageSizes;
use crate::error::{Error, Result};
use crate::store::LeaseId;

/// Granted lease TTLs remembered for [`Store::keep_alive`](crate::Store::keep_alive); past this the memo is reset.
const MAX_REMEMBERED_LEASES: usize = 10_000;

/// The etcd [`Store`](crate::Store). Cheap to share behind an `Arc`; every call is one etcd request,
/// failing over between the cluster's members (see [`EtcdOptions::new`]).
pub struct EtcdStore {
    pub(super) members: Arc<Members>,
    pub(super) request_timeout: Duration,
    /// How long a broken watch keeps trying to resume on a live member.
    pub(super) resume_timeout: Duration,
    pub(super) max_response_bytes: usize,
    /// Keys per range request of a prefix read.
    pub(super) pages: PageSizes,
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
    /// Connects to etcd and checks that a member answers (and, with a user, that the
    /// credentials are accepted).
    ///
    /// Fails with [`Error::Config`] on unusable options, [`Error::Unauthenticated`] when etcd
    /// refuses the credentials, and [`Error::StoreUnavailable`] when no member answers
    /// within the connect timeout plus the request timeout, unless the options say
    /// [`with_connect_in_background`](EtcdOptions::with_connect_in_background): then an
    /// unreachable cluster (and only that) returns the store after one connect timeout, and
    /// its members are connected on first use; requests fail with
    /// [`Error::StoreUnavailable`] until one answers.
    pub async fn connect(options: EtcdOptions) -> Result<EtcdStore> {
        if options.endpoints.is_empty() {
            return Err(Error::config("no etcd endpoints given"));
        }
        for endpoint in &options.endpoints {
            parse_endpoint(endpoint)?;
        }
        let members = Arc::new(Members::new(&options.endpoints, options.connect_options()?));
        let store = EtcdStore {
            members,
            request_timeout: options.request_timeout,
            resume_timeout: options.connect_timeout + options.request_timeout,
            max_response_bytes: options.max_response_bytes,
            pages: PageSizes::new(options.range_page_size, options.max_response_bytes),
            endpoints: options.endpoints.clone(),
            granted: Mutex::new(HashMap::new()),
        };
        let background = options.connect_in_background;
        let budget = if background {
            options.connect_timeout
        } else {
            options.connect_timeout + options.request_timeout
        };
        // Members connect lazily: one cheap request proves that one answers and, with a
        // user, that the credentials are good.
        match store.check(budget).await {
            Ok(()) => Ok(store),
            Err(error) if background && error.is_transient() => {
                tracing::warn!(
                    endpoints = %store.endpoints.join(", "),
                    %error,
                    "etcd unreachable; connecting in the background"
                );
                Ok(store)
            }
            Err(error @ (Error::StoreUnavailable { .. } | Error::Timeout { .. })) => {
                let reason = match &error {
                    Error::StoreUnavailable { reason, .. } => reason.clone(),
                    _ => format!("no answer within {budget:?}"),
                };
                Err(Error::store_unavailable(format!(
                    "cannot reach etcd at {}: {reason}",
                    store.endpoints.join(", ")
                ))
                .caused_by(error))
            }
            Err(error) => Err(error),
        }
    }

    /// One status request within `budget`.
    async fn check(&self, budget: Duration) -> Result<()> {
        self.members
            .run(
                budget,
                || "etcd status".to_owned(),
                |mut client| async move {
                    client
                        .status()
                        .await
                        .map(|_| ())
                        .map_err(|e| map_error(e, "etcd status"))
                },
            )
            .await
            .map(|((), _)| ())
    }

    /// The endpoints this store was connected with.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Runs one request under the request timeout, failing over between members.
    pub(super) async fn timed<T, F, Fut>(&self, what: impl Fn() -> String, request: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (answer, _) = self
            .members
            .run(self.request_timeout, what, request)
            .await?;
        Ok(answer)
    }

    /// A KV client for `client` that accepts responses up to the configured size.
    pub(super) fn kv(&self, client: &Client) -> etcd_client::KvClient {
        client
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
