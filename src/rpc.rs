//! MetadataService (Dubbo's `MetadataServiceV2`): the server every provider runs and the
//! client consumers call it with.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint as TonicEndpoint};
use tonic::{Request, Response, Status};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ServiceInfo};

/// Code generated from `proto/metadata_service_v2.proto`, checked in so that building the
/// library needs no `protoc` (the test `generated_code` checks it is up to date).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    include!("rpc/generated.rs");

    /// The encoded file descriptor set of the contract, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("rpc/metadata_descriptor.bin");
}

pub use pb::metadata_service_v2_server::MetadataServiceV2Server;

mod deadline;

/// The Triple header naming the group of the service a request is for (Dubbo exports
/// MetadataServiceV2 in the group of its app).
pub const TRI_SERVICE_GROUP: &str = "tri-service-group";
/// The Triple header naming the version of the service a request is for.
pub const TRI_SERVICE_VERSION: &str = "tri-service-version";

/// The gRPC path of `GetMetadataInfo`.
pub const GET_METADATA_INFO_PATH: &str =
    "/org.apache.dubbo.metadata.MetadataServiceV2/GetMetadataInfo";

/// The metadata a provider answers with: its current revision and, for a grace period, the
/// revisions it exported before.
pub struct ExportedMetadata {
    current: RwLock<Arc<MetadataInfo>>,
    previous: Mutex<VecDeque<(Arc<MetadataInfo>, Instant)>>,
    grace: Duration,
    served: AtomicU64,
}

impl ExportedMetadata {
    /// How many earlier revisions are kept answerable at most.
    const MAX_PREVIOUS: usize = 16;

    /// Answers with `current`; revisions replaced later stay answerable for `grace`.
    pub fn new(current: MetadataInfo, grace: Duration) -> Self {
        ExportedMetadata {
            current: RwLock::new(Arc::new(current)),
            previous: Mutex::new(VecDeque::new()),
            grace,
            served: AtomicU64::new(0),
        }
    }

    /// The current metadata.
    pub fn current(&self) -> Arc<MetadataInfo> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the current metadata, keeping the old one answerable for the grace period.
    pub(crate) fn replace(&self, next: MetadataInfo) {
        let old = std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|p| p.into_inner()),
            Arc::new(next),
        );
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        previous.push_back((old, Instant::now() + self.grace));
        while previous.len() > Self::MAX_PREVIOUS {
            previous.pop_front();
        }
    }

    /// The metadata of `revision` (empty: current), if still held.
    pub fn lookup(&self, revision: &str) -> Option<Arc<MetadataInfo>> {
        let current = self.current();
        if revision.is_empty() || current.revision == revision {
            return Some(current);
        }
        let now = Instant::now();
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        previous.retain(|(_, until)| *until > now);
        previous
            .iter()
            .rev()
            .find(|(info, _)| info.revision == revision)
            .map(|(info, _)| info.clone())
    }

    /// The revisions answered now: the current one first, then the earlier ones still in
    /// their grace period, newest first, each once.
    pub fn revisions(&self) -> Vec<String> {
        let mut revisions = vec![self.current().revision.clone()];
        let now = Instant::now();
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        previous.retain(|(_, until)| *until > now);
        for (info, _) in previous.iter().rev() {
            if !revisions.contains(&info.revision) {
                revisions.push(info.revision.clone());
            }
        }
        revisions
    }

    /// How many `GetMetadataInfo` requests were answered (found or not).
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

/// The tonic service answering `GetMetadataInfo` from an [`ExportedMetadata`].
#[derive(Clone)]
pub struct MetadataServer {
    exported: Arc<ExportedMetadata>,
}

impl MetadataServer {
    /// A server answering from `exported`.
    pub fn new(exported: Arc<ExportedMetadata>) -> Self {
        MetadataServer { exported }
    }

    /// The service to add to a tonic router, with message size limits.
    pub fn into_service(self, limits: &Limits) -> MetadataServiceV2Server<Self> {
        MetadataServiceV2Server::new(self)
            .max_decoding_message_size(64 * 1024)
            .max_encoding_message_size(limits.max_metadata_bytes)
    }
}

#[tonic::async_trait]
impl pb::metadata_service_v2_server::MetadataServiceV2 for MetadataServer {
    async fn get_metadata_info(
        &self,
        request: Request<pb::MetadataRequest>,
    ) -> std::result::Result<Response<pb::MetadataInfoV2>, Status> {
        self.exported.served.fetch_add(1, Ordering::Relaxed);
        let revision = request.into_inner().revision;
        match self.exported.lookup(&revision) {
            Some(info) => Ok(Response::new(to_wire(&info))),
            None => Err(Status::not_found(format!(
                "revision {} is not held here",
                Error::shorten(&revision)
            ))),
        }
    }
}

/// The wire form of `info`, as a MetadataService answers it (`version` carries the
/// revision): for serving metadata from a server of one's own.
pub fn to_wire(info: &MetadataInfo) -> pb::MetadataInfoV2 {
    pb::MetadataInfoV2 {
        app: info.app.clone(),
        version: info.revision.clone(),
        services: info
            .services
            .iter()
            .map(|(key, s)| {
                let wire = pb::ServiceInfoV2 {
                    name: s.name.clone(),
                    group: s.group.clone(),
                    version: s.version.clone(),
                    protocol: s.protocol.clone(),
                    port: i32::from(s.port),
                    path: s.path.clone(),
                    params: s.params.clone().into_iter().collect(),
                };
                (key.clone(), wire)
            })
            .collect(),
    }
}

/// The metadata info in a MetadataService answer, checked as a consumer checks it: within
/// `limits`, with valid names and keys; an answer that is not gets a clear error.
pub fn from_wire(wire: pb::MetadataInfoV2, limits: &Limits) -> Result<MetadataInfo> {
    if wire.services.len() > limits.max_services {
        return Err(Error::TooLarge {
            what: "metadata info service count",
            size: wire.services.len(),
            limit: limits.max_services,
        });
    }
    let mut services = std::collections::BTreeMap::new();
    for (key, s) in wire.services {
        let port = u16::try_from(s.port).map_err(|_| {
            Error::malformed(
                "metadata info",
                format!("service port {} out of range", s.port),
            )
        })?;
        if s.params.len() > limits.max_params {
            return Err(Error::TooLarge {
                what: "service parameter count",
                size: s.params.len(),
                limit: limits.max_params,
            });
        }
        let info = ServiceInfo {
            name: s.name,
            group: s.group,
            version: s.version,
            protocol: s.protocol,
            port,
            path: s.path,
            params: s.params.into_iter().collect(),
        };
        services.insert(key, Arc::new(info));
    }
    let info = MetadataInfo {
        app: wire.app,
        revision: wire.version,
        services,
    };
    info.validate(limits)?;
    Ok(info)
}

/// Calls providers' MetadataService with deadlines and size limits.
///
/// A deadline (the connect's, the call's) counts the time the process could run the call,
/// not the time the call waited behind the process's own work: a consumer busy with many
/// resolvers at once does not give up on a peer that answered in time.
#[derive(Clone, Debug)]
pub struct MetadataClient {
    timeout: Duration,
    connect_timeout: Duration,
    limits: Limits,
    tls: Option<crate::tls::ClientTlsConfig>,
    identity: Option<crate::tls::IdentityCheck>,
}

impl MetadataClient {
    /// A plaintext client whose calls each take at most `timeout` to connect and as much to
    /// answer (of the time the process could run them: see the type's docs).
    pub fn new(timeout: Duration, limits: Limits) -> Self {
        MetadataClient {
            timeout,
            connect_timeout: timeout,
            limits,
            tls: None,
            identity: None,
        }
    }

    /// Speaks TLS with this configuration (CA, optional client identity, domain name).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn with_tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks that each server's certificate names the app it is called for (see
    /// [`crate::identity`]), over TLS with the configuration of [`Self::with_tls`] (which
    /// then names no CA: the check's are used) or, without one, the default. Only
    /// [`fetch_for_app`](Self::fetch_for_app) knows the app: [`fetch`](Self::fetch) then
    /// fails with [`Error::Config`]. A refused server fails the call with
    /// [`Error::IdentityRejected`].
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn with_identity(mut self, identity: crate::identity::IdentityCheck) -> Self {
        self.tls
            .get_or_insert_with(tonic::transport::ClientTlsConfig::new);
        self.identity = Some(identity);
        self
    }

    /// Fetches the metadata of `revision` (empty: current) from the MetadataService at
    /// `host:port`, checking that the answer is the revision asked for.
    ///
    /// Sends no service group: a Rust or Dubbo Java provider answers, but dubbo-go's
    /// MetadataServiceV2 is found only under its app's group, so a consumer that knows the
    /// app calls [`fetch_for_app`](Self::fetch_for_app).
    pub async fn fetch(&self, host: &str, port: u16, revision: &str) -> Result<MetadataInfo> {
        self.fetch_with(None, host, port, revision).await
    }

    /// Like [`fetch`](Self::fetch), for an instance of `app`: the request names the service
    /// the way Dubbo exports it, in the Triple headers `tri-service-group: {app}` and
    /// `tri-service-version: 2.0.0`. dubbo-go answers `UNIMPLEMENTED` without them; Dubbo Java
    /// and tonic servers accept them.
    pub async fn fetch_for_app(
        &self,
        app: &str,
        host: &str,
        port: u16,
        revision: &str,
    ) -> Result<MetadataInfo> {
        self.fetch_with(Some(app), host, port, revision).await
    }

    async fn fetch_with(
        &self,
        app: Option<&str>,
        host: &str,
        port: u16,
        revision: &str,
    ) -> Result<MetadataInfo> {
        let address = authority(host, port);
        let channel = self.connect(&address, app).await?;
        let mut client = pb::metadata_service_v2_client::MetadataServiceV2Client::new(channel)
            .max_decoding_message_size(self.limits.max_metadata_bytes);
        let mut request = Request::new(pb::MetadataRequest {
            revision: revision.to_owned(),
        });
        // No `grpc-timeout`: tonic enforces it on this side by the wall clock, from the
        // moment the request leaves its queue, backlog included. The deadline below counts.
        // An app name that is no header value (it is validated before it gets here) sends
        // no group; the call then fails at a dubbo-go provider as it would have anyway.
        if let Some(group) = app.and_then(|app| app.parse().ok()) {
            let headers = request.metadata_mut();
            headers.insert(TRI_SERVICE_GROUP, group);
            headers.insert(
                TRI_SERVICE_VERSION,
                tonic::metadata::MetadataValue::from_static(crate::model::keys::META_V_2),
            );
        }
        let call = client.get_metadata_info(request);
        let answer = match deadline::within(self.timeout, call).await {
            None => {
                return Err(Error::Timeout {
                    what: format!("GetMetadataInfo at {address}"),
                    after: self.timeout,
                });
            }
            Some(Err(status)) => return Err(Error::Rpc { address, status }),
            Some(Ok(answer)) => answer.into_inner(),
        };
        let info = from_wire(answer, &self.limits)?;
        if !revision.is_empty() && info.revision != revision {
            return Err(Error::malformed(
                "metadata answer",
                format!(
                    "asked for revision {revision}, got {}",
                    Error::shorten(&info.revision)
                ),
            ));
        }
        Ok(info)
    }

    async fn connect(&self, address: &str, app: Option<&str>) -> Result<Channel> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let connect_error = |reason: String| Error::Connect {
            address: address.to_owned(),
            reason,
            source: None,
        };
        let mut endpoint = TonicEndpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| connect_error(e.to_string()).caused_by(e))?;
        // No `connect_timeout` or `timeout` on the endpoint: tonic counts them by the wall
        // clock. The connect and the call are bounded by `deadline::within` instead.
        let mut refused = None;
        match (&self.tls, &self.identity) {
            (Some(tls), Some(identity)) => {
                let app = app.ok_or_else(|| {
                    Error::Misuse(
                        "an identity check needs the app the server is called for: \
                         use `fetch_for_app`"
                            .into(),
                    )
                })?;
                let (refusals, last) = crate::tls::Refusals::kept(|| {});
                endpoint =
                    crate::tls::apply_identity(endpoint, tls, identity, app, address, refusals)
                        .map_err(|e| connect_error(e.to_string()).caused_by(e))?;
                refused = Some(last);
            }
            (Some(tls), None) => {
                endpoint = crate::tls::apply(endpoint, tls)
                    .map_err(|e| connect_error(e.to_string()).caused_by(e))?;
            }
            (None, _) => {}
        }
        let connected = deadline::within(self.connect_timeout, endpoint.connect()).await;
        if let Some(refusal) = refused.and_then(|last| last.take())
            && !matches!(connected, Some(Ok(_)))
        {
            return Err(refusal);
        }
        match connected {
            None => Err(Error::Timeout {
                what: format!("connect to {address}"),
                after: self.connect_timeout,
            }),
            Some(Err(e)) => {
                let chain = error_chain(&e);
                Err(Error::Connect {
                    address: address.to_owned(),
                    reason: match self.tls {
                        Some(_) => format!(
                            "TLS handshake failed (does the provider serve TLS with a certificate \
                             of the configured CA?): {chain}"
                        ),
                        None => chain,
                    },
                    source: Some(e.into()),
                })
            }
            Some(Ok(channel)) => Ok(channel),
        }
    }
}

/// `host:port`, with IPv6 literals in brackets.
pub(crate) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An error with its sources, on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}
