//! Passive health: the balanced channel's per-endpoint layer, under the balancer, that
//! records every call's outcome into the resolver's health and keeps set-aside endpoints
//! out of the balancer's choice.
//!
//! An outcome is a failure when the call fails in transport (a refused connection sets the
//! address aside at once, see [`super::HealthOptions::refused_at_once`]), or when its
//! grpc-status is UNAVAILABLE or DEADLINE_EXCEEDED, read as tonic reads it: from the
//! response headers for a trailers-only answer, else from the trailers at the end of the
//! body. Anything else is a success, which resets the address's failure count.
//!
//! A set-aside address (failing, or held by self-preservation and not yet answering a
//! probe) is not ready: the balancer leaves it out and is woken when health changes. When
//! every endpoint of the channel is set aside, all of them are ready again (panic mode): a
//! call to a doubtful endpoint beats no call at all. Entering panic mode is logged and
//! counted (`panic_routes`).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use http_body::Frame;
use tonic::transport::Channel;
use tower::BoxError;

use super::context::Context;
use super::health::Outcome;
use super::probes::Readiness;
use super::stats::Counters;

type Request = http::Request<tonic::body::Body>;
type Response = http::Response<tonic::body::Body>;

/// What the endpoints of one balanced channel share: the addresses it routes to, and
/// whether it is in panic mode.
#[derive(Default)]
pub(super) struct ChannelHealth {
    addresses: Mutex<Vec<Arc<str>>>,
    panic: AtomicBool,
}

impl ChannelHealth {
    /// The balancer was handed `address`.
    pub fn insert(&self, address: &str) {
        let mut addresses = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        if !addresses.iter().any(|a| &**a == address) {
            addresses.push(address.into());
        }
    }

    /// `address` left the balancer.
    pub fn remove(&self, address: &str) {
        let mut addresses = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        addresses.retain(|a| &**a != address);
    }
}

/// One balancer endpoint: a tonic channel whose calls passive health sees.
pub(super) struct Guarded {
    inner: Channel,
    address: Arc<str>,
    context: Arc<Context>,
    channel: Arc<ChannelHealth>,
    /// Whether outcomes are recorded (readiness follows health either way).
    record: bool,
}

impl Guarded {
    pub fn new(
        inner: Channel,
        address: &str,
        context: Arc<Context>,
        channel: Arc<ChannelHealth>,
        record: bool,
    ) -> Self {
        Guarded {
            inner,
            address: address.into(),
            context,
            channel,
            record,
        }
    }
}

impl tower::Service<Request> for Guarded {
    type Response = Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        let readiness = {
            let addresses = self
                .channel
                .addresses
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.context
                .health
                .ready_or_wait(&self.address, &addresses, cx.waker())
        };
        match readiness {
            Readiness::Wait => return Poll::Pending,
            Readiness::Healthy => {
                if self.channel.panic.swap(false, Ordering::Relaxed) {
                    tracing::info!("an endpoint is healthy again: the channel leaves panic mode");
                }
            }
            Readiness::Panic => {
                if !self.channel.panic.swap(true, Ordering::Relaxed) {
                    Counters::bump(&self.context.counters.panic_routes);
                    tracing::warn!(
                        "every endpoint of the channel is set aside: routing to all of them \
                         (panic mode)"
                    );
                }
            }
        }
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let call = self.inner.call(request);
        if !self.record {
            return call.map(|r| r.map_err(Into::into)).boxed();
        }
        let reporter = Reporter {
            context: self.context.clone(),
            address: self.address.clone(),
        };
        async move {
            match call.await {
                Err(error) => {
                    reporter.report(error_outcome(&error));
                    Err(error.into())
                }
                Ok(response) => match status_outcome(response.headers()) {
                    Some(outcome) => {
                        reporter.report(outcome);
                        Ok(response)
                    }
                    None => Ok(response.map(|body| {
                        tonic::body::Body::new(ReportingBody {
                            inner: body,
                            reporter: Some(reporter),
                        })
                    })),
                },
            }
        }
        .boxed()
    }
}

/// Records one call's outcome for one address.
struct Reporter {
    context: Arc<Context>,
    address: Arc<str>,
}

impl Reporter {
    fn report(&self, outcome: Outcome) {
        if outcome != Outcome::Success {
            Counters::bump(&self.context.counters.call_failures);
        }
        self.context
            .health
            .record(&self.context, &self.address, outcome);
    }
}

/// The outcome of a call that failed in transport: a refused connection, or any other
/// transport failure.
pub(crate) fn error_outcome(error: &(dyn std::error::Error + 'static)) -> Outcome {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Outcome::Refused;
        }
        source = error.source();
    }
    Outcome::Failure
}

/// The outcome a grpc-status in `headers` (or trailers) says, if there is one.
pub(crate) fn status_outcome(headers: &http::HeaderMap) -> Option<Outcome> {
    let status = headers.get("grpc-status")?;
    let code = status
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let failed = [
        tonic::Code::Unavailable as i32,
        tonic::Code::DeadlineExceeded as i32,
    ];
    Some(match code {
        Some(code) if failed.contains(&code) => Outcome::Failure,
        _ => Outcome::Success,
    })
}

/// A response body that reports the call's outcome from its trailers (or its error).
struct ReportingBody {
    inner: tonic::body::Body,
    /// Taken when the outcome is reported.
    reporter: Option<Reporter>,
}

impl http_body::Body for ReportingBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let outcome = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame
                .trailers_ref()
                .map(|trailers| status_outcome(trailers).unwrap_or(Outcome::Success)),
            Poll::Ready(Some(Err(_))) => Some(Outcome::Failure),
            // The body ended without trailers: tonic reads that as an error of the
            // server's, not of the endpoint's reachability.
            Poll::Ready(None) => Some(Outcome::Success),
            Poll::Pending => None,
        };
        if let Some(outcome) = outcome
            && let Some(reporter) = self.reporter.take()
        {
            reporter.report(outcome);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_that_say_the_endpoint_is_unreachable_are_failures() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(status_outcome(&headers), None, "no status yet");
        headers.insert("grpc-status", "14".parse().unwrap());
        assert_eq!(status_outcome(&headers), Some(Outcome::Failure));
        headers.insert("grpc-status", "4".parse().unwrap());
        assert_eq!(status_outcome(&headers), Some(Outcome::Failure));
        headers.insert("grpc-status", "5".parse().unwrap());
        assert_eq!(status_outcome(&headers), Some(Outcome::Success));
        headers.insert("grpc-status", "0".parse().unwrap());
        assert_eq!(status_outcome(&headers), Some(Outcome::Success));
    }

    #[test]
    fn a_refused_connection_is_found_down_the_source_chain() {
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("connect error")
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let refused = Wrapper(std::io::ErrorKind::ConnectionRefused.into());
        assert_eq!(error_outcome(&refused), Outcome::Refused);
        let reset = Wrapper(std::io::ErrorKind::ConnectionReset.into());
        assert_eq!(error_outcome(&reset), Outcome::Failure);
    }
}
