//! [`Provider::serve`]: the user's tonic router served with MetadataService added, the
//! instance registered once the server runs and withdrawn gracefully before it stops.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::codegen::{Bytes, Service, StdError};
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::{Router, TcpIncoming};
use tower_layer::Layer;
use tracing::Instrument as _;

use super::reflection::add_reflection;
use super::routes::add_once;
use super::{MetadataServing, Provider, address};
use crate::error::{Error, Result};
use crate::rpc::MetadataServiceV2Server;

impl Provider {
    /// Runs `router` on `listener` with MetadataService (and gRPC reflection, see
    /// [`super::ProviderBuilder::reflection`]) added, until `signal` completes.
    ///
    /// Once the server runs, the provider registers (as [`Provider::start`] does); when
    /// `signal` completes (it is polled from the start, so a signal handler it installs is
    /// in place before the record is written; one that comes while registering takes effect
    /// once registered) it stops gracefully, while the server still answers: the instance
    /// is marked disabled, the drain period passes (the lease kept alive), the record is
    /// deleted and the lease revoked; the server answers a little longer (the drain, at most
    /// half a second), for consumers that learn of the stop only from the deletion (Dubbo
    /// Java, dubbo-go); only then does it stop, letting calls in flight finish. Returns when
    /// the server has stopped.
    ///
    /// The port is the listener's (bind port 0 for any free one) unless
    /// [`super::ProviderBuilder::port`] says consumers reach it at another; the host is the
    /// listener's IP unless [`super::ProviderBuilder::host`] is given (see there for a
    /// listener on all interfaces). A provider of a tonic service is then:
    ///
    /// ```no_run
    /// # use std::sync::Arc;
    /// # use introspect::{Provider, ServiceInfo, Store};
    /// # async fn run(
    /// #     router: tonic::transport::server::Router, // Server::builder().add_service(..)
    /// #     store: Arc<dyn Store>,
    /// # ) -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
    /// let provider = Provider::builder("greeter", store)
    ///     .export(ServiceInfo::new("helloworld.Greeter")) // or export_service::<GreeterServer<_>>()
    ///     .build()?;
    /// // SIGINT or SIGTERM: disable, drain, deregister, then stop serving.
    /// provider.serve(router, listener, introspect::shutdown_signal()).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A store that cannot be reached at start (down, or not answering in time) does not
    /// stop it: it serves, logs one warning, and keeps trying to register in the background
    /// (with backoff; repeated warnings at most one per 10 s), so consumers find it once the
    /// store answers. Refused credentials or permissions still fail it at once.
    /// ([`Self::start`] instead returns only once registered, and fails when it cannot.)
    ///
    /// If the server fails before `signal`, the record is deleted at once and the error
    /// returned. Dropping the returned future before it completes stops serving without
    /// deregistering, as a crash would: the record stays until its lease expires.
    pub async fn serve<L, ResBody, F>(
        self,
        router: Router<L>,
        listener: TcpListener,
        signal: F,
    ) -> Result<()>
    where
        F: Future<Output = ()>,
        L: Layer<Routes>,
        L::Service: Service<Request<Body>, Response = Response<ResBody>> + Clone + Send + 'static,
        <L::Service as Service<Request<Body>>>::Future: Send,
        <L::Service as Service<Request<Body>>>::Error: Into<StdError> + Send,
        ResBody: tonic::codegen::Body<Data = Bytes> + Send + 'static,
        ResBody::Error: Into<StdError>,
    {
        if let MetadataServing::OwnPort(addr) = self.settings.serving {
            return Err(Error::config(format!(
                "`serve` adds MetadataService to your router, yet `serve_metadata_on({addr})` \
                 asks for a listener of its own: use one of the two"
            )));
        }
        self.check_identity()?;
        let local = listener.local_addr()?;
        self.learn_address(local, false).await;
        let service = self.metadata_service();
        let mut router = add_once(router, MetadataServiceV2Server::<()>::NAME, move |r| {
            r.add_service(service)
        })?;
        if self.settings.reflection {
            router = add_reflection(router)?;
        }
        // TCP_NODELAY on every accepted connection, as tonic does on listeners it binds.
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        let stop = CancellationToken::new();
        let server = router.serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
        let lifecycle = Box::pin(async {
            // `signal` is polled from the start, before the record is written: a signal
            // future installs its handler when first polled (`shutdown_signal` does), and a
            // SIGTERM before that ends the process the default way, its record left behind
            // until the lease expires. One that comes while registering is acted on once
            // registered.
            let mut signal = std::pin::pin!(signal);
            let mut register = std::pin::pin!(
                self.register_and_spawn(true)
                    .instrument(tracing::info_span!(parent: &self.span, "start"))
            );
            let signalled = tokio::select! {
                biased;
                () = &mut signal => true,
                registered = &mut register => {
                    registered?;
                    false
                }
            };
            if signalled {
                register.await?;
            } else {
                signal.await;
            }
            let stopped = self
                .shared
                .deregister_gracefully(self.shared.drain)
                .instrument(tracing::info_span!(parent: &self.span, "shutdown"))
                .await;
            // Still answering while consumers that only see the deletion move away.
            tokio::time::sleep(super::stop::linger(self.shared.drain)).await;
            stopped
        });
        tokio::pin!(server);
        let result = tokio::select! {
            result = lifecycle => {
                stop.cancel();
                let served = server.await.map_err(|e| Error::server(e.to_string()).caused_by(e));
                result.and(served)
            }
            served = &mut server => {
                let (reason, cause) = match served {
                    Ok(()) => ("the server stopped before the shutdown signal".to_owned(), None),
                    Err(e) => (e.to_string(), Some(e)),
                };
                tracing::error!(error = %reason, "server failed; deregistering at once");
                // It logs whether the record was deleted.
                let _ = self.shared.deregister_gracefully(Duration::ZERO).await;
                let error = Error::server(reason);
                Err(match cause {
                    Some(e) => error.caused_by(e),
                    None => error,
                })
            }
        };
        self.stop_tasks().await;
        result
    }

    /// Takes the host (when none was given) and the port (when none was set) from a
    /// listener at `local`. MetadataService is reached where the instance is, unless
    /// `own_listener` says it has a listener of its own.
    pub(super) async fn learn_address(&self, local: SocketAddr, own_listener: bool) {
        let mut state = self.shared.state.lock().await;
        if !self.settings.host_given {
            state.instance.host = address::default_host(local);
        }
        if state.instance.port == 0 {
            state.instance.port = local.port();
        }
        state.metadata_port = if own_listener {
            local.port()
        } else {
            state.instance.port
        };
    }
}
