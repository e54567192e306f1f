//! The server: its builder, the ADS service, and serving it on a listener.

use std::future::Future;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use introspect::consumer::HealthOptions;
use introspect::{Error, Resolver, Result};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::catalog::Catalog;
use crate::nacks::NackCounts;
use crate::node::NodeFacts;
use crate::stream;
use crate::translate::Translation;

/// The most services a server follows unless told otherwise
/// ([`XdsServerBuilder::max_services`]); names past it do not exist for the clients.
pub const DEFAULT_MAX_SERVICES: usize = 10_000;

/// Settings of an [`XdsServer`].
pub struct XdsServerBuilder {
    resolver: Resolver,
    services: Vec<String>,
    max_services: usize,
    outliers: HealthOptions,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
}

impl XdsServerBuilder {
    /// The consumer-side ejection clients are told to apply, as each cluster's outlier
    /// detection (default: [`HealthOptions::default`], the library's own consumers'):
    /// failures in a row (Envoy), the failure rate over a window, the cap on providers
    /// ejected at once. Pass the resolver's options to send what its channels apply.
    pub fn outliers(mut self, options: HealthOptions) -> Self {
        self.outliers = options;
        self
    }

    /// Follows `service` from the start, so that a wildcard subscription (Envoy's CDS)
    /// lists it before any client has asked for it by name. Services asked for by name are
    /// followed on their first request either way.
    pub fn service(mut self, service: impl Into<String>) -> Self {
        self.services.push(service.into());
        self
    }

    /// Follows each of `services` from the start (see [`XdsServerBuilder::service`]).
    pub fn services<I, S>(mut self, services: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.services.extend(services.into_iter().map(Into::into));
        self
    }

    /// The most services followed at once (default [`DEFAULT_MAX_SERVICES`]): every name a
    /// client asks for costs a subscription, so a client cannot make the server follow
    /// names without bound.
    pub fn max_services(mut self, max: usize) -> Self {
        self.max_services = max;
        self
    }

    /// Serves over TLS (with client certificates when the config names a client CA), like
    /// the provider's MetadataService.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: tonic::transport::ServerTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serves over TLS with the PEM certificate chain and key of the server, checking
    /// client certificates against `client_ca` when given (mutual TLS).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls_pem(self, cert: &[u8], key: &[u8], client_ca: Option<&[u8]>) -> Self {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(ca));
        }
        self.tls(tls)
    }

    /// The server.
    pub fn build(self) -> XdsServer {
        let (stop, stopped) = watch::channel(false);
        XdsServer {
            ads: Ads {
                catalog: Arc::new(Catalog::new(
                    self.resolver,
                    self.max_services,
                    self.outliers,
                )),
                stopped,
                nacks: NackCounts::default(),
            },
            services: self.services,
            stop,
            #[cfg(feature = "tls")]
            tls: self.tls,
        }
    }
}

/// An xDS server (ADS, state of the world) over a [`Resolver`]: every gRPC service of the
/// registry as a Listener, a RouteConfiguration, a Cluster and a ClusterLoadAssignment, all
/// named after the service. Read-only: it never writes to the registry.
pub struct XdsServer {
    ads: Ads,
    services: Vec<String>,
    stop: watch::Sender<bool>,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
}

impl XdsServer {
    /// Settings for a server over `resolver` (whose subscribe options, protections
    /// included, decide what the endpoints are).
    pub fn builder(resolver: Resolver) -> XdsServerBuilder {
        XdsServerBuilder {
            resolver,
            services: Vec::new(),
            max_services: DEFAULT_MAX_SERVICES,
            outliers: HealthOptions::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// Follows the services named in the builder now, rather than when serving starts.
    pub async fn follow_configured(&self) {
        for service in &self.services {
            if !self.ads.catalog.follow(service).await {
                tracing::warn!(service, "xDS: cannot follow a configured service");
            }
        }
    }

    /// The responses clients rejected, per node (a handle that keeps counting while the
    /// server serves; also exported as the metric
    /// [`NACKS_METRIC`](crate::NACKS_METRIC)).
    pub fn nack_counts(&self) -> NackCounts {
        self.ads.nacks.clone()
    }

    /// What a client is sent for `service` now, and why: its routes, clusters and weights
    /// with the rules and steps that produced them, and what cannot be expressed
    /// ([`Translation`], whose `Display` says it in words). Follows the service first when
    /// it is not followed yet (waiting for its rules' first answer). `None` for a name
    /// that is no service, or one with no gRPC-callable provider.
    pub async fn explain(&self, service: &str) -> Option<Arc<Translation>> {
        self.explain_for(service, &NodeFacts::default()).await
    }

    /// [`explain`](Self::explain) for a client whose node says `facts` of itself (see
    /// [`NodeFacts`] for the convention): what that client is sent.
    pub async fn explain_for(&self, service: &str, facts: &NodeFacts) -> Option<Arc<Translation>> {
        if !self.ads.catalog.follow(service).await {
            return None;
        }
        self.ads.catalog.view_for(service, facts).await
    }

    /// The ADS service, to add to a tonic router of the caller's. Its streams end when
    /// the server is dropped or [`XdsServer::stop_streams`] is called (a graceful stop of
    /// the router waits for them).
    pub fn service(&self) -> AggregatedDiscoveryServiceServer<Ads> {
        AggregatedDiscoveryServiceServer::new(self.ads.clone())
    }

    /// Ends every open stream (clients reconnect elsewhere or later).
    pub fn stop_streams(&self) {
        self.stop.send_replace(true);
    }

    /// Serves ADS on `listener` until `shutdown` completes; then ends the open streams and
    /// stops.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        self.follow_configured().await;
        let builder = tonic::transport::Server::builder();
        #[cfg(feature = "tls")]
        let builder = match self.tls.clone() {
            Some(tls) => builder
                .tls_config(tls)
                .map_err(|e| Error::config(format!("xDS TLS: {e}")).caused_by(e))?,
            None => builder,
        };
        let mut builder = builder;
        let stop = self.stop.clone();
        let router = builder.add_service(self.service());
        router
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                shutdown.await;
                stop.send_replace(true);
            })
            .await
            .map_err(|e| Error::server(format!("xDS server: {e}")).caused_by(e))
    }
}

impl Drop for XdsServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// The Aggregated Discovery Service: state-of-the-world streams only.
#[derive(Clone)]
pub struct Ads {
    catalog: Arc<Catalog>,
    stopped: watch::Receiver<bool>,
    nacks: NackCounts,
}

type Responses<T> = std::pin::Pin<Box<dyn Stream<Item = std::result::Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Responses<DiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> std::result::Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let (out, responses) = stream::channel();
        // Where the client calls from: its host, unless its node names one.
        let peer = request.remote_addr().map(|a| a.ip());
        tokio::spawn(stream::run(
            self.catalog.clone(),
            request.into_inner(),
            out,
            self.stopped.clone(),
            self.nacks.clone(),
            peer,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(responses))))
    }

    type DeltaAggregatedResourcesStream = Responses<DeltaDiscoveryResponse>;

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> std::result::Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented(
            "incremental (delta) xDS is not served; use state-of-the-world ADS",
        ))
    }
}
