//! The etcd store: the same semantics across machines, via `etcd-client`.
//!
//! Each [`Store`] call is one etcd request (a compare-and-swap is one transaction) under a
//! deadline, so a stalled cluster shows up as [`Error::Timeout`] rather than a hang. Errors
//! are sorted for the layers above: a lost or refused connection, a missing leader or a
//! stalled request are transient ([`Error::StoreUnavailable`], [`Error::Timeout`]); refused
//! credentials and permissions are not (an [`Error::Store`] that says so).
//!
//! A watch is one etcd watch stream. A task forwards its batches to the [`Watch`]; it ends
//! the watch with [`Error::Compacted`] when etcd reports that the history asked for is gone,
//! with [`Error::WatchEnded`] when the stream fails or etcd cancels it, and cancels the etcd
//! watcher as soon as the [`Watch`] is dropped.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::proto::{PbEvent, PbKeyValue, PbTxnOpResponse};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetOptions, Identity, PutOptions,
    TlsOptions, Txn, TxnOp, WatchOptions, WatchResponseStream,
};
use tokio::sync::mpsc;
use tonic::Code;

use super::{CasOutcome, KeyValue, LeaseId, Range, Store, Watch, WatchEvent, prefix_end};
use crate::error::{Error, Result};

/// Default deadline for connecting to an endpoint.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default deadline for each request.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default HTTP/2 ping interval while streams (watches) are open. etcd refuses pings more
/// frequent than every 5 s by default.
const DEFAULT_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Default time to wait for a ping's answer before the connection is declared dead.
const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default largest response accepted from etcd (a listing or a watch batch).
const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Granted lease TTLs remembered for [`Store::keep_alive`]; past this the memo is reset.
const MAX_REMEMBERED_LEASES: usize = 10_000;

/// etcd's watch event type for a deletion (`mvccpb.Event.EventType.DELETE`).
const EVENT_DELETE: i32 = 1;
/// etcd's watch event type for a put (`mvccpb.Event.EventType.PUT`).
const EVENT_PUT: i32 = 0;

/// TLS settings for [`EtcdOptions::with_tls`]: the CA that signs the servers' certificates
/// and optionally a client certificate.
#[derive(Clone)]
struct TlsSettings {
    ca_pem: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

/// Connection options for [`EtcdStore`], built like `etcd-client`'s own options:
///
/// ```
/// use std::time::Duration;
/// use introspect::store::EtcdOptions;
///
/// let options = EtcdOptions::new(EtcdOptions::parse_endpoints("http://10.0.0.1:2379,http://10.0.0.2:2379")?)
///     .with_user("registry", "secret")
///     .with_request_timeout(Duration::from_secs(3));
/// assert_eq!(options.endpoints().len(), 2);
/// # Ok::<(), introspect::Error>(())
/// ```
///
/// Defaults: connect timeout 5 s, request timeout 5 s, HTTP/2 keep-alive every 10 s with a
/// 5 s deadline while watches are open, responses up to 64 MiB, no authentication, no TLS.
#[derive(Clone)]
pub struct EtcdOptions {
    endpoints: Vec<String>,
    user: Option<(String, String)>,
    tls: Option<TlsSettings>,
    connect_timeout: Duration,
    request_timeout: Duration,
    keep_alive: Option<(Duration, Duration)>,
    max_response_bytes: usize,
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("tls", &self.tls.is_some())
            .field(
                "client_certificate",
                &self.tls.as_ref().is_some_and(|t| t.identity.is_some()),
            )
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl EtcdOptions {
    /// Options for the given endpoints (`http://host:port` or `https://host:port`), with the
    /// defaults listed on [`EtcdOptions`].
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            user: None,
            tls: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            keep_alive: Some((DEFAULT_KEEP_ALIVE_INTERVAL, DEFAULT_KEEP_ALIVE_TIMEOUT)),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Parses a comma-separated list of endpoint URLs such as
    /// `http://10.0.0.1:2379,http://10.0.0.2:2379` (spaces around commas are ignored).
    ///
    /// Each endpoint is `http://` or `https://`, a host (a name, an IPv4 address or a
    /// bracketed IPv6 address) and an optional port; a bare `host:port` is taken as `http`.
    /// Fails with [`Error::Config`] on an empty list, an empty entry or anything else.
    pub fn parse_endpoints(list: &str) -> Result<Vec<String>> {
        if list.trim().is_empty() {
            return Err(Error::Config("no etcd endpoints given".into()));
        }
        list.split(',').map(parse_endpoint).collect()
    }

    /// Authenticates as `name` with `password` (etcd's user authentication). The token is
    /// refreshed automatically when it expires.
    pub fn with_user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((name.into(), password.into()));
        self
    }

    /// Uses TLS: `ca_pem` is the PEM of the CA that signed the servers' certificates, and
    /// `client` optionally the PEM certificate and PEM private key this client presents.
    /// The endpoints must then be `https://` URLs.
    pub fn with_tls(
        mut self,
        ca_pem: impl Into<Vec<u8>>,
        client: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Self {
        let domain = self.tls.take().and_then(|t| t.domain);
        self.tls = Some(TlsSettings {
            ca_pem: ca_pem.into(),
            identity: client,
            domain,
        });
        self
    }

    /// The name expected in the servers' certificates, when it is not the endpoints' host.
    /// Only used together with [`with_tls`](Self::with_tls).
    pub fn with_tls_domain(mut self, domain: impl Into<String>) -> Self {
        if let Some(tls) = &mut self.tls {
            tls.domain = Some(domain.into());
        } else {
            self.tls = Some(TlsSettings {
                ca_pem: Vec::new(),
                identity: None,
                domain: Some(domain.into()),
            });
        }
        self
    }

    /// The deadline for opening a connection (and, added to the request timeout, for
    /// [`EtcdStore::connect`] as a whole). Zero is replaced by the default.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = nonzero_or(timeout, DEFAULT_CONNECT_TIMEOUT);
        self
    }

    /// The deadline for each request, and for opening a watch. Zero is replaced by the
    /// default.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = nonzero_or(timeout, DEFAULT_REQUEST_TIMEOUT);
        self
    }

    /// HTTP/2 keep-alive while streams are open: a ping every `interval`, the connection
    /// declared dead when one is unanswered for `timeout` (so a watch on a silently lost
    /// connection ends). `None` turns it off. etcd refuses pings more often than every 5 s.
    pub fn with_keep_alive(mut self, keep_alive: Option<(Duration, Duration)>) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The largest response accepted from etcd, in bytes (a listing, a watch batch).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes.max(4096);
        self
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The options for `etcd-client`.
    fn connect_options(&self) -> Result<ConnectOptions> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout)
            .with_require_leader(true)
            // etcd does not permit pings without open streams; see `with_keep_alive`.
            .with_keep_alive_while_idle(false);
        if let Some((interval, timeout)) = self.keep_alive {
            options = options.with_keep_alive(interval, timeout);
        }
        if let Some((name, password)) = &self.user {
            options = options
                .with_user(name.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        if let Some(tls) = &self.tls {
            if tls.ca_pem.is_empty() {
                return Err(Error::Config(
                    "etcd TLS domain given without a CA certificate (use with_tls)".into(),
                ));
            }
            let mut config = TlsOptions::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
            if let Some((cert, key)) = &tls.identity {
                config = config.identity(Identity::from_pem(cert, key));
            }
            if let Some(domain) = &tls.domain {
                config = config.domain_name(domain.clone());
            }
            options = options.with_tls(config);
        }
        Ok(options)
    }
}

fn nonzero_or(value: Duration, default: Duration) -> Duration {
    if value.is_zero() { default } else { value }
}

/// Checks one endpoint of a list; see [`EtcdOptions::parse_endpoints`].
fn parse_endpoint(raw: &str) -> Result<String> {
    let endpoint = raw.trim();
    let bad = |reason: &str| {
        Err(Error::Config(format!(
            "invalid etcd endpoint {:?}: {reason}",
            Error::shorten(endpoint)
        )))
    };
    if endpoint.is_empty() {
        return bad("empty entry in the endpoint list");
    }
    let (scheme, rest) = match endpoint.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("http".to_owned(), endpoint),
    };
    if scheme != "http" && scheme != "https" {
        return bad("the scheme must be http:// or https://");
    }
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return bad("no host");
    }
    if authority
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "/?#@,".contains(c))
    {
        return bad("expected scheme://host:port and nothing else");
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((ip, after)) if !ip.is_empty() => match after {
                "" => (ip, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (ip, Some(port)),
                    None => return bad("garbage after the IPv6 address"),
                },
            },
            _ => return bad("unterminated IPv6 address"),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return bad("no host");
    }
    if !authority.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    {
        return bad("the host has characters a host name cannot have");
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return bad("the port must be a number in 1..=65535"),
        }
    }
    Ok(format!("{scheme}://{authority}"))
}

/// The etcd [`Store`]. Cheap to share behind an `Arc`; every call is one etcd request.
pub struct EtcdStore {
    client: Client,
    request_timeout: Duration,
    max_response_bytes: usize,
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
    /// [`Error::Store`] saying "authentication failed" when etcd refuses the credentials.
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
    async fn timed<T>(
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

    fn kv(&self) -> etcd_client::KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(self.max_response_bytes)
    }

    fn remember_ttl(&self, lease: LeaseId, ttl: Duration) {
        let mut granted = self
            .granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if granted.len() >= MAX_REMEMBERED_LEASES {
            granted.clear();
        }
        granted.insert(lease, ttl);
    }

    fn remembered_ttl(&self, lease: LeaseId) -> Option<Duration> {
        self.granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&lease)
            .copied()
    }

    fn forget_lease(&self, lease: LeaseId) {
        self.granted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&lease);
    }
}

/// The key range `[key, range_end)` of everything starting with `prefix`.
fn prefix_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    if prefix.is_empty() {
        // etcd refuses an empty key; `\0` to `\0` means every key.
        (vec![0], vec![0])
    } else {
        (prefix.as_bytes().to_vec(), prefix_end(prefix))
    }
}

/// A key-value from etcd, or `None` (with a warning) when its key is not UTF-8: such a key
/// was not written by Introspect and must not spoil a whole listing.
fn convert_kv(kv: PbKeyValue) -> Option<KeyValue> {
    match String::from_utf8(kv.key) {
        Ok(key) => Some(KeyValue {
            key,
            value: kv.value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            lease: kv.lease,
        }),
        Err(e) => {
            tracing::warn!(
                key = %String::from_utf8_lossy(e.as_bytes()),
                "skipping an etcd key that is not UTF-8"
            );
            None
        }
    }
}

/// A watch event from etcd; `None` for a key that is not UTF-8 or an unknown event type.
fn convert_event(event: PbEvent) -> Option<WatchEvent> {
    let kv = convert_kv(event.kv?)?;
    match event.r#type {
        EVENT_PUT => Some(WatchEvent::Put(kv)),
        EVENT_DELETE => Some(WatchEvent::Delete {
            key: kv.key,
            mod_revision: kv.mod_revision,
        }),
        other => {
            tracing::warn!(event_type = other, "skipping an unknown etcd event type");
            None
        }
    }
}

/// Sorts an `etcd-client` error for the layers above; `what` says what was being done.
fn map_error(error: etcd_client::Error, what: &str) -> Error {
    use etcd_client::Error as E;
    match error {
        E::GRpcStatus(status) => map_status(&status, what),
        E::TransportError(e) => Error::StoreUnavailable(format!("{what}: {e}")),
        E::IoError(e) => Error::StoreUnavailable(format!("{what}: {e}")),
        E::WatchError(e) => Error::WatchEnded(format!("{what}: {e}")),
        E::InvalidArgs(e) => Error::Store(format!("{what}: invalid arguments: {e}")),
        other => Error::Store(format!("{what}: {other}")),
    }
}

/// Sorts a gRPC status from etcd; see [`map_error`].
fn map_status(status: &tonic::Status, what: &str) -> Error {
    let message = status.message();
    let auth_failure = message.contains("authentication failed")
        || message.contains("user name is empty")
        || message.contains("authentication is not enabled")
        || message.contains("invalid auth token")
        || message.contains("user name not found");
    match status.code() {
        _ if auth_failure => Error::Store(format!("{what}: authentication failed: {message}")),
        Code::Unauthenticated => Error::Store(format!("{what}: authentication failed: {message}")),
        Code::PermissionDenied => Error::Store(format!("{what}: permission denied: {message}")),
        // No leader, leader changed, request timed out inside etcd, connection refused or
        // lost, the request canceled under us: all worth retrying.
        Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded | Code::Aborted => {
            Error::StoreUnavailable(format!("{what}: {message}"))
        }
        // Transport failures that tonic could not classify.
        Code::Unknown | Code::Internal
            if message.contains("transport")
                || message.contains("connection")
                || message.contains("h2 protocol error")
                || message.contains("broken pipe") =>
        {
            Error::StoreUnavailable(format!("{what}: {message}"))
        }
        code => Error::Store(format!("{what}: {message} ({code:?})")),
    }
}

/// Whether etcd said that a lease does not exist.
fn is_lease_not_found(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == Code::NotFound && status.message().contains("lease not found")
        }
        // `LeaseClient::keep_alive` reports a TTL of 0 (lease gone) this way.
        etcd_client::Error::LeaseKeepAliveError(_) => true,
        _ => false,
    }
}

/// Whether etcd said that a revision is compacted.
fn is_compacted(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == Code::OutOfRange && status.message().contains("compacted"))
}

fn header_revision(header: Option<&etcd_client::ResponseHeader>, what: &str) -> Result<i64> {
    header
        .map(|h| h.revision())
        .ok_or_else(|| Error::Malformed {
            what: "etcd response",
            reason: format!("{what}: no header"),
        })
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let what = || format!("etcd get {}", Error::shorten(key));
        self.timed(what, async {
            let mut response = self
                .kv()
                .get(key, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            Ok(response
                .take_kvs()
                .into_iter()
                .map(|kv| kv.0)
                .find(|kv| kv.key == key.as_bytes())
                .and_then(convert_kv))
        })
        .await
    }

    async fn get_prefix(&self, prefix: &str) -> Result<Range> {
        let what = || format!("etcd get prefix {}", Error::shorten(prefix));
        self.timed(what, async {
            let (key, end) = prefix_range(prefix);
            let mut response = self
                .kv()
                .get(key, Some(GetOptions::new().with_range(end)))
                .await
                .map_err(|e| map_error(e, &what()))?;
            let revision = header_revision(response.header(), &what())?;
            let kvs = response
                .take_kvs()
                .into_iter()
                .filter_map(|kv| convert_kv(kv.0))
                .collect();
            Ok(Range { kvs, revision })
        })
        .await
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64> {
        let what = || format!("etcd put {}", Error::shorten(key));
        self.timed(what, async {
            let options = lease.map(|id| PutOptions::new().with_lease(id));
            let response = self.kv().put(key, value, options).await.map_err(|e| {
                match (lease, is_lease_not_found(&e)) {
                    (Some(id), true) => Error::LeaseNotFound(id),
                    _ => map_error(e, &what()),
                }
            })?;
            header_revision(response.header(), &what())
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool> {
        let what = || format!("etcd delete {}", Error::shorten(key));
        self.timed(what, async {
            let response = self
                .kv()
                .delete(key, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            Ok(response.deleted() > 0)
        })
        .await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected_mod_revision: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome> {
        let what = || format!("etcd compare-and-swap {}", Error::shorten(key));
        self.timed(what, async {
            let put = TxnOp::put(key, value, lease.map(|id| PutOptions::new().with_lease(id)));
            // A key's mod_revision compares as 0 when the key is absent.
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    key,
                    CompareOp::Equal,
                    expected_mod_revision,
                )])
                .and_then([put])
                .or_else([TxnOp::get(key, None)]);
            let response =
                self.kv()
                    .txn(txn)
                    .await
                    .map_err(|e| match (lease, is_lease_not_found(&e)) {
                        (Some(id), true) => Error::LeaseNotFound(id),
                        _ => map_error(e, &what()),
                    })?;
            let revision = header_revision(response.header(), &what())?;
            if response.succeeded() {
                return Ok(CasOutcome::Written { revision });
            }
            let mut current = None;
            for op in response.0.responses {
                if let Some(PbTxnOpResponse::ResponseRange(range)) = op.response {
                    current = range
                        .kvs
                        .into_iter()
                        .find(|kv| kv.key == key.as_bytes())
                        .and_then(convert_kv);
                }
            }
            Ok(CasOutcome::Conflict { current })
        })
        .await
    }

    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch> {
        let what = || format!("etcd watch {}", Error::shorten(prefix));
        let (key, end) = prefix_range(prefix);
        let mut options = WatchOptions::new().with_range(end);
        if from_revision > 0 {
            options = options.with_start_revision(from_revision);
        }
        let mut client = self
            .client
            .watch_client()
            .max_decoding_message_size(self.max_response_bytes);
        let (mut requests, mut responses, watch_id, start) = self
            .timed(what, async {
                let stream = client
                    .watch(key, Some(options))
                    .await
                    .map_err(|e| map_error(e, &what()))?;
                let (requests, mut responses) = stream.split();
                // etcd answers a create request with a "created" response before any event.
                let created = responses
                    .message()
                    .await
                    .map_err(|e| map_error(e, &what()))?
                    .ok_or_else(|| {
                        Error::WatchEnded(format!("{}: etcd closed the stream", what()))
                    })?;
                if created.canceled() {
                    let reason = created.cancel_reason();
                    return Err(if created.compact_revision() > 0 {
                        Error::Compacted {
                            requested: from_revision,
                            compacted: created.compact_revision(),
                        }
                    } else if reason.contains("permission denied") {
                        Error::Store(format!("{}: permission denied: {reason}", what()))
                    } else {
                        Error::WatchEnded(format!("{}: canceled by etcd: {reason}", what()))
                    });
                }
                if !created.created() {
                    return Err(Error::Malformed {
                        what: "etcd watch response",
                        reason: format!("{}: the first response is not \"created\"", what()),
                    });
                }
                // Where the watch starts, for the compaction error: from "now" is the revision
                // after the one the watch was created at.
                let start = match from_revision {
                    0 => created.header().map_or(0, |h| h.revision() + 1),
                    from => from,
                };
                Ok((requests, responses, created.watch_id(), start))
            })
            .await?;
        let (tx, rx) = mpsc::channel(Watch::BUFFER);
        let prefix = prefix.to_owned();
        tokio::spawn(async move {
            forward(&mut responses, &tx, &prefix, start).await;
            // The watch is over (or the `Watch` dropped): tell etcd, then close the stream.
            let _ = requests.cancel(watch_id).await;
        });
        Ok(Watch::new(rx))
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId> {
        if ttl.is_zero() {
            return Err(Error::Config("lease TTL must be positive".into()));
        }
        // etcd counts in whole seconds: round up, so a lease never lives shorter than asked.
        let seconds = i64::try_from(ttl.as_secs())
            .unwrap_or(i64::MAX - 1)
            .saturating_add(i64::from(ttl.subsec_nanos() > 0))
            .max(1);
        let what = || format!("etcd grant lease of {seconds}s");
        let response = self
            .timed(what, async {
                self.client
                    .lease_client()
                    .grant(seconds, None)
                    .await
                    .map_err(|e| map_error(e, &what()))
            })
            .await?;
        if !response.error().is_empty() {
            return Err(Error::Store(format!("{}: {}", what(), response.error())));
        }
        let granted = u64::try_from(response.ttl()).unwrap_or(0).max(1);
        self.remember_ttl(response.id(), Duration::from_secs(granted));
        Ok(response.id())
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration> {
        let what = || format!("etcd keep-alive of lease {lease}");
        self.timed(what, async {
            // One keep-alive request on a fresh stream; etcd answers TTL 0 for a lease that
            // is gone, which `etcd-client` reports as an error.
            match self.client.lease_client().keep_alive(lease).await {
                Ok(_) => {}
                Err(e) if is_lease_not_found(&e) => {
                    self.forget_lease(lease);
                    return Err(Error::LeaseNotFound(lease));
                }
                // The keep-alive stream ended before answering.
                Err(etcd_client::Error::WatchError(reason)) => {
                    return Err(Error::StoreUnavailable(format!("{}: {reason}", what())));
                }
                Err(e) => return Err(map_error(e, &what())),
            }
            if let Some(ttl) = self.remembered_ttl(lease) {
                return Ok(ttl);
            }
            // A lease granted elsewhere: ask etcd for its TTL.
            let info = self
                .client
                .lease_client()
                .time_to_live(lease, None)
                .await
                .map_err(|e| map_error(e, &what()))?;
            if info.ttl() < 0 {
                return Err(Error::LeaseNotFound(lease));
            }
            let ttl = Duration::from_secs(u64::try_from(info.granted_ttl()).unwrap_or(0).max(1));
            self.remember_ttl(lease, ttl);
            Ok(ttl)
        })
        .await
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<()> {
        let what = || format!("etcd revoke lease {lease}");
        let result = self
            .timed(what, async {
                match self.client.lease_client().revoke(lease).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_lease_not_found(&e) => Err(Error::LeaseNotFound(lease)),
                    Err(e) => Err(map_error(e, &what())),
                }
            })
            .await;
        if matches!(result, Ok(()) | Err(Error::LeaseNotFound(_))) {
            self.forget_lease(lease);
        }
        result
    }

    async fn compact(&self, revision: i64) -> Result<()> {
        let what = || format!("etcd compact to revision {revision}");
        self.timed(what, async {
            match self.kv().compact(revision, None).await {
                Ok(_) => Ok(()),
                // Already compacted at or past it: the history is gone, as asked.
                Err(e) if is_compacted(&e) => Ok(()),
                Err(e) => Err(map_error(e, &what())),
            }
        })
        .await
    }

    fn backend(&self) -> &'static str {
        "etcd"
    }
}

/// Forwards a watch stream's batches to `tx` until the stream ends, fails, is canceled, or
/// the [`Watch`] is dropped. The error that ends the watch is sent as its last item.
async fn forward(
    responses: &mut WatchResponseStream,
    tx: &mpsc::Sender<Result<Vec<WatchEvent>>>,
    prefix: &str,
    start_revision: i64,
) {
    // The first revision the watcher still needs, for the compaction error.
    let mut next_revision = start_revision;
    let end = loop {
        let message = tokio::select! {
            _ = tx.closed() => return,
            message = responses.message() => message,
        };
        let response = match message {
            Ok(Some(response)) => response,
            Ok(None) => break Error::WatchEnded(format!("etcd closed the watch of {prefix:?}")),
            Err(e) => break map_watch_error(e, prefix),
        };
        if response.compact_revision() > 0 {
            break Error::Compacted {
                requested: next_revision,
                compacted: response.compact_revision(),
            };
        }
        if response.canceled() {
            break Error::WatchEnded(format!(
                "etcd canceled the watch of {prefix:?}: {}",
                response.cancel_reason()
            ));
        }
        let batch: Vec<WatchEvent> = response
            .0
            .events
            .into_iter()
            .filter_map(convert_event)
            .collect();
        let Some(last) = batch.last() else {
            continue; // progress notification or an empty answer
        };
        next_revision = last.mod_revision() + 1;
        match tx.try_send(Ok(batch)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // The watcher is too slow: end the watch, it re-lists (as the memory store).
                tracing::warn!(prefix, "watch buffer full; ending the watch");
                return;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    };
    let _ = tx.try_send(Err(end));
}

fn map_watch_error(error: etcd_client::Error, prefix: &str) -> Error {
    match map_error(error, &format!("etcd watch of {prefix:?}")) {
        // Every failure of an established stream ends the watch the same way: re-list.
        Error::StoreUnavailable(reason) | Error::Store(reason) => Error::WatchEnded(reason),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoint_lists() {
        assert_eq!(
            EtcdOptions::parse_endpoints("http://a:2379, https://10.0.0.2:2379/,b:1").unwrap(),
            vec!["http://a:2379", "https://10.0.0.2:2379", "http://b:1"]
        );
        assert_eq!(
            EtcdOptions::parse_endpoints("http://[::1]:2379").unwrap(),
            vec!["http://[::1]:2379"]
        );
        assert_eq!(
            EtcdOptions::parse_endpoints("HTTP://etcd.example").unwrap(),
            vec!["http://etcd.example"]
        );
    }

    #[test]
    fn rejects_garbage_endpoints() {
        for bad in [
            "",
            "  ",
            "http://a:2379,",
            ",http://a:2379",
            "ftp://a:2379",
            "http://",
            "http://:2379",
            "http://a:port",
            "http://a:0",
            "http://a:70000",
            "http://a:2379/path",
            "http://user@a:2379",
            "http://a b:2379",
            "http://[::1",
            "http://[::1]x",
            "not a url at all",
        ] {
            let err = EtcdOptions::parse_endpoints(bad).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{bad:?}: {err}");
        }
    }

    #[test]
    fn options_have_finite_defaults_and_hide_secrets() {
        let options = EtcdOptions::new(["http://a:2379"])
            .with_user("me", "hunter2")
            .with_request_timeout(Duration::ZERO);
        assert_eq!(options.connect_timeout(), Duration::from_secs(5));
        assert_eq!(options.request_timeout(), Duration::from_secs(5));
        let shown = format!("{options:?}");
        assert!(
            shown.contains("me") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn prefix_ranges() {
        assert_eq!(prefix_range(""), (vec![0], vec![0]));
        assert_eq!(prefix_range("/a/"), (b"/a/".to_vec(), b"/a0".to_vec()));
    }

    #[test]
    fn sorts_statuses() {
        let unavailable = map_status(&tonic::Status::unavailable("etcdserver: no leader"), "x");
        assert!(matches!(unavailable, Error::StoreUnavailable(_)));
        let auth = map_status(
            &tonic::Status::invalid_argument(
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            "x",
        );
        assert!(
            matches!(&auth, Error::Store(m) if m.contains("authentication failed")),
            "{auth}"
        );
        assert!(!auth.is_transient());
        let other = map_status(&tonic::Status::invalid_argument("etcdserver: bad"), "x");
        assert!(matches!(other, Error::Store(_)));
    }
}
