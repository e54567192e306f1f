//! The default probe: proof of a gRPC answer, not of a TCP accept.
//!
//! A stopped or wedged process still accepts TCP connections (the kernel does), so a
//! connect says nothing. This probe opens a new HTTP/2 connection (TLS when the resolver
//! uses it) and calls `grpc.health.v1.Health/Check` for the whole server, all within the
//! probe's deadline. Any answer proves a live gRPC server: `SERVING`, an unknown-service
//! status, `UNIMPLEMENTED` (Dubbo's Triple and most tonic servers serve no health service),
//! even an HTTP error or a TLS handshake refusing the certificate; only `NOT_SERVING`,
//! a refused or reset connection and silence do not. A new connection each time keeps
//! probes off the calls' own, and sends no HTTP/2 PING, which grpc-java and grpc-go servers
//! count against a client when it comes often.

use std::time::Duration;

use futures::FutureExt as _;
use futures::future::{BoxFuture, poll_fn};
use http_body::Body as _;
use tower::{Service as _, ServiceExt as _};

use super::options::Probe;

/// The health service's check method.
const CHECK_PATH: &str = "/grpc.health.v1.Health/Check";

/// A `HealthCheckRequest` for the whole server (empty), framed: not compressed, 0 bytes.
const EMPTY_REQUEST: &str = "\0\0\0\0\0";

/// `HealthCheckResponse.status` of a server that says it serves nothing.
const NOT_SERVING: u8 = 2;

/// See the module docs.
pub(crate) struct GrpcProbe {
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Option<crate::tls::ClientTlsConfig>,
}

impl GrpcProbe {
    /// A probe dialling in plaintext, or over `tls`.
    pub fn new(tls: Option<crate::tls::ClientTlsConfig>) -> Self {
        GrpcProbe { tls }
    }

    async fn answers(&self, address: String, timeout: Duration) -> bool {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("{scheme}://{address}"))
        else {
            return false;
        };
        let endpoint = endpoint.connect_timeout(timeout);
        let endpoint = match &self.tls {
            Some(tls) => match crate::tls::apply(endpoint, tls) {
                Ok(endpoint) => endpoint,
                Err(_) => return false,
            },
            None => endpoint,
        };
        let check = async move {
            let mut channel = match endpoint.connect().await {
                Ok(channel) => channel,
                // A TLS handshake the server answered, with a certificate this dialling does
                // not accept: it is alive (whom it may serve is the identity check's call).
                Err(error) => return Some(tls_answered(&error)),
            };
            let request = http::Request::builder()
                .method(http::Method::POST)
                .uri(format!("{scheme}://{address}{CHECK_PATH}"))
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header(http::header::TE, "trailers")
                .body(tonic::body::Body::new(EMPTY_REQUEST.to_owned()))
                .ok()?;
            let response = channel.ready().await.ok()?.call(request).await.ok()?;
            Some(says_serving(response).await)
        };
        tokio::time::timeout(timeout, check)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    }
}

impl Probe for GrpcProbe {
    fn probe(&self, address: String, timeout: Duration) -> BoxFuture<'static, bool> {
        let probe = GrpcProbe {
            tls: self.tls.clone(),
        };
        async move { probe.answers(address, timeout).await }.boxed()
    }
}

/// Whether a failed connection failed in a TLS handshake the server took part in (rustls
/// reports its errors as `InvalidData`), rather than on a refused, reset or silent socket.
fn tls_answered(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::InvalidData;
        }
        source = error.source();
    }
    false
}

/// Whether an answer to the check says the server serves: anything but a
/// `HealthCheckResponse` whose status is `NOT_SERVING`.
async fn says_serving(response: http::Response<tonic::body::Body>) -> bool {
    if !response.status().is_success() || response.headers().contains_key("grpc-status") {
        // An HTTP error or a trailers-only status: a server answered.
        return true;
    }
    let mut body = response.into_body();
    let mut message = Vec::new();
    // The answer is one small message: 5 bytes of frame, then `status` (field 1).
    while message.len() < 16 {
        let mut body = std::pin::Pin::new(&mut body);
        match poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => message.extend_from_slice(&data),
                Err(_) => break,
            },
            Some(Err(_)) | None => break,
        }
    }
    !(message.len() >= 7 && message[5] == 0x08 && message[6] == NOT_SERVING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_silent_listener_is_not_an_answer_and_a_closed_port_neither() {
        // Accepts TCP connections and never speaks: what a stopped process looks like.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let probe = GrpcProbe::new(None);
        assert!(
            !probe
                .probe(address.clone(), Duration::from_millis(300))
                .await
        );
        drop(listener);
        assert!(!probe.probe(address, Duration::from_millis(300)).await);
    }
}
