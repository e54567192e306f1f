//! MetadataService on a listener of the provider's own (`serve_metadata_on`).

use std::net::SocketAddr;

use super::Provider;
use super::reflection::add_reflection;
#[cfg(feature = "tls")]
use crate::error::Error;
use crate::error::Result;

impl Provider {
    /// Binds `addr`, learns the port (the instance's too when none was set, and the host
    /// when none was given) and serves MetadataService with reflection there until the
    /// provider stops.
    pub(super) async fn serve_own_port(&self, addr: SocketAddr) -> Result<()> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.learn_address(listener.local_addr()?, true).await;
        let service = self.metadata_service();
        let cancel = self.shared.cancel.clone();
        // TCP_NODELAY on every accepted connection: tonic applies its own socket options
        // only to listeners it binds itself, and without it Nagle's algorithm holds part of
        // an answer back until the client's delayed ACK (~40 ms on Linux).
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        #[allow(unused_mut)]
        let mut server = tonic::transport::Server::builder();
        #[cfg(feature = "tls")]
        if let Some(tls) = (self.settings.tls.clone())
            .or_else(|| self.settings.identity.as_ref().map(|i| i.tls_config()))
        {
            server = server
                .tls_config(tls)
                .map_err(|e| Error::server(format!("TLS: {e}")).caused_by(e))?;
        }
        let mut router = server.add_service(service);
        if self.settings.reflection {
            router = add_reflection(router)?;
        }
        self.spawn(async move {
            let served = router
                .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "metadata service stopped");
            }
        });
        Ok(())
    }
}
