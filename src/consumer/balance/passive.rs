//! Passive health: the balanced channel's per-endpoint layer, under the balancer, that
//! records each call's outcome and latency into the resolver's health, asks health to
//! check a provider whose connection was lost or whose call waits too long, and gives up on
//! the calls waiting on a provider health finds hung. A channel with
//! [`passive_health`](crate::consumer::ChannelOptions::passive_health) off lets its calls
//! through untouched.
//!
//! An outcome is a failure when the call fails in transport (a refused connection sets the
//! address aside at once, see [`crate::consumer::HealthOptions::refused_at_once`]), or when its
//! grpc-status is UNAVAILABLE or DEADLINE_EXCEEDED (or CANCELLED after the call's deadline,
//! as tonic's servers answer a deadline they gave up on), read as tonic reads it: from the
//! response headers for a trailers-only answer, else from the trailers at the end of the
//! body; or when the channel gave up waiting for the endpoint's answer past the deadline.
//! Anything else is a success, which resets the address's failure count; its time to the
//! answer's headers is the method's latency at that endpoint.
//!
//! A call that waits past [`HealthOptions::hung_after`](crate::consumer::HealthOptions::hung_after)
//! asks health to check that its provider is alive; when health ejects the provider as
//! hung, every call waiting on it gives up at once with [`ProviderHung`] (a lost call,
//! retried elsewhere only when idempotent) rather than at its deadline.
//!
//! Where each endpoint stands (ejected and why, held by self-preservation, or slow at a
//! method) is the balancer's to read (`balancer.rs`): it leaves them out within the cap on
//! outliers, and routes to all of a call's endpoints when every one is out (panic mode).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use http_body::Frame;
use tokio::time::Instant;
use tonic::transport::Channel;
use tower::BoxError;

use super::deadline::Dispatched;
use crate::consumer::health::{EndpointKey, HealthInput, HealthRegistry, Outcome, ProviderHung};
use crate::consumer::stats::Counters;

type Request = http::Request<tonic::body::Body>;
type Response = http::Response<tonic::body::Body>;

/// What the endpoints of one balanced channel share: the resolver's health and counters.
pub(crate) struct Recorder {
    health: Arc<HealthRegistry>,
    counters: Arc<Counters>,
    /// Whether outcomes are recorded.
    record: bool,
}

impl Recorder {
    /// The recorder of a channel whose calls `health` sees (when `record`).
    pub fn new(health: Arc<HealthRegistry>, counters: Arc<Counters>, record: bool) -> Arc<Self> {
        Arc::new(Recorder {
            health,
            counters,
            record,
        })
    }

    fn report(&self, endpoint: &EndpointKey, outcome: Outcome, answered: Option<(&str, Duration)>) {
        if outcome != Outcome::Success {
            Counters::bump(&self.counters.call_failures);
        }
        self.health.feed(HealthInput::Called {
            endpoint,
            outcome,
            answered,
        });
    }
}

/// One balancer endpoint: a tonic channel whose calls passive health sees. Cheap to
/// clone: clones share the channel's connection.
#[derive(Clone)]
pub(super) struct Guarded {
    inner: Channel,
    key: EndpointKey,
    recorder: Arc<Recorder>,
}

impl Guarded {
    pub fn new(inner: Channel, key: EndpointKey, recorder: Arc<Recorder>) -> Self {
        Guarded {
            inner,
            key,
            recorder,
        }
    }
}

impl tower::Service<Request> for Guarded {
    type Response = Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let dispatched = Dispatched::of(&request);
        let path = request.uri().path_and_query().cloned();
        let call = self.inner.call(request);
        if !self.recorder.record {
            return call.map(|r| r.map_err(Into::into)).boxed();
        }
        let mut reporter = Reporter {
            recorder: self.recorder.clone(),
            key: self.key.clone(),
            dispatched,
            path,
            started: Instant::now(),
            answered_after: None,
            done: false,
        };
        async move {
            let answer = match reporter.recorder.health.hung_after() {
                None => call.await,
                Some(after) => {
                    tokio::pin!(call);
                    tokio::select! {
                        biased;
                        answer = &mut call => answer,
                        () = tokio::time::sleep(after) => {
                            match reporter.wait_alive(call, after).await {
                                Some(answer) => answer,
                                None => {
                                    reporter.done = true;
                                    let hung = ProviderHung(reporter.key.address.clone());
                                    return Err(Box::new(hung) as BoxError);
                                }
                            }
                        }
                    }
                }
            };
            match answer {
                Err(error) => {
                    let outcome = error_outcome(&error);
                    if outcome == Outcome::Failure {
                        // A lost connection: is the provider still there?
                        let lost = HealthInput::Lost(&reporter.key);
                        reporter.recorder.health.feed(lost);
                    }
                    reporter.report(outcome);
                    Err(error.into())
                }
                Ok(response) => {
                    reporter.answered_after = Some(reporter.started.elapsed());
                    match reporter.status_outcome(response.headers()) {
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
                    }
                }
            }
        }
        .boxed()
    }
}

/// Records one call's outcome for one endpoint, once. A call its channel gave up on (the
/// endpoint did not answer past the deadline) is a failure, reported when the call is
/// dropped unanswered.
struct Reporter {
    recorder: Arc<Recorder>,
    key: EndpointKey,
    /// The call's mark, if it came through a balanced channel.
    dispatched: Option<Dispatched>,
    /// The call's path, for its latency.
    path: Option<http::uri::PathAndQuery>,
    started: Instant,
    /// How long its answer's headers took to come.
    answered_after: Option<Duration>,
    done: bool,
}

impl Reporter {
    fn report(mut self, outcome: Outcome) {
        self.done = true;
        let answered = match (&self.path, self.answered_after) {
            (Some(path), Some(after)) if outcome == Outcome::Success => Some((path.path(), after)),
            _ => None,
        };
        self.recorder.report(&self.key, outcome, answered);
    }

    /// Waits for `call`, which waited `after` already, while health checks that its
    /// provider is alive: its answer, or `None` once health ejects the provider as hung.
    /// It asks again every `after` it keeps waiting: a check that answered just before the
    /// provider stopped proves nothing of now.
    async fn wait_alive<F: std::future::Future + Unpin>(
        &self,
        mut call: F,
        after: Duration,
    ) -> Option<F::Output> {
        let health = &self.recorder.health;
        let mut changes = health.changes();
        loop {
            health.feed(HealthInput::Waiting(&self.key));
            // Ejected already (by another call's check): no answer is coming.
            if health.is_hung(&self.key.address) {
                return None;
            }
            let again = tokio::time::sleep(after);
            tokio::pin!(again);
            loop {
                tokio::select! {
                    biased;
                    answer = &mut call => return Some(answer),
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return Some(call.await);
                        }
                        if health.is_hung(&self.key.address) {
                            return None;
                        }
                    }
                    () = &mut again => break,
                }
            }
        }
    }

    /// The outcome of an answer with this grpc-status: CANCELLED after the call's deadline
    /// is the server giving up on its deadline (tonic's servers answer so), a failure like
    /// DEADLINE_EXCEEDED.
    fn status_outcome(&self, headers: &http::HeaderMap) -> Option<Outcome> {
        let outcome = status_outcome(headers)?;
        let late = self
            .dispatched
            .as_ref()
            .is_some_and(Dispatched::deadline_passed);
        Some(
            if late && grpc_code(headers) == Some(tonic::Code::Cancelled as i32) {
                Outcome::Failure
            } else {
                outcome
            },
        )
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if !self.done && self.dispatched.as_ref().is_some_and(Dispatched::timed_out) {
            self.recorder.report(&self.key, Outcome::Failure, None);
        }
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

/// The grpc-status code in `headers` (or trailers), if there is a readable one.
fn grpc_code(headers: &http::HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")?
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
}

/// The outcome a grpc-status in `headers` (or trailers) says, if there is one.
pub(crate) fn status_outcome(headers: &http::HeaderMap) -> Option<Outcome> {
    headers.get("grpc-status")?;
    let code = grpc_code(headers);
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
            Poll::Ready(Some(Ok(frame))) => frame.trailers_ref().map(|trailers| {
                let reporter = self.reporter.as_ref();
                reporter
                    .and_then(|r| r.status_outcome(trailers))
                    .unwrap_or(Outcome::Success)
            }),
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
