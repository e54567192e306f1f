//! Call deadlines in the balanced channel, and the bound on waiting for an endpoint.
//!
//! A call's deadline is its `grpc-timeout` header (what `tonic::Request::set_timeout`
//! writes), no later than [`super::ChannelOptions::request_timeout`]; a call without one
//! gets its policy's timeout when the balancer picks its provider (configurators, the
//! consumer's own, the provider's `timeout`: `select/policy.rs`). It bounds all the call's
//! attempts, and each attempt's `grpc-timeout` says the time left. An attempt still
//! waiting for an endpoint when its deadline passes, or when the channel's endpoint wait
//! ([`super::ChannelOptions::endpoint_wait`]) ends, whichever comes first, fails with
//! UNAVAILABLE: a call never waits forever for an endpoint that does not come. A
//! channel whose subscription resolves to nothing, or whose every endpoint the identity
//! check refused, fails calls at once, saying why ([`NoEndpoints`]); not while the metadata
//! of some instance is on its way (being fetched, or retried after a failure that may
//! pass): its calls wait for it within the bound above, and fail saying why when the bound
//! passes, or at once when the fetch fails for good meanwhile. A call handed to an
//! endpoint gets the endpoint's own answer; if none comes by its deadline plus
//! [`DISPATCHED_GRACE`] (a server that hangs), it fails with DEADLINE_EXCEEDED, and passive
//! health counts a failure of the endpoint (the mark tells it, see
//! [`Dispatched::timed_out`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, ready};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::sync::watch;
use tokio_util::sync::ReusableBoxFuture;

use crate::consumer::explain::Explanation;
use tokio::time::{Instant, Sleep};
use tower::BoxError;

/// How long past its deadline a call already handed to an endpoint waits for that
/// endpoint's own answer (its DEADLINE_EXCEEDED, say) before it fails by itself.
pub const DISPATCHED_GRACE: Duration = Duration::from_millis(200);

/// What a call's channel knows of one attempt, shared through a request extension: the
/// call's deadline (set by the balancer from the call's policy when the caller set none),
/// whether the attempt was handed to an endpoint, and whether it gave up waiting for that
/// endpoint's answer.
#[derive(Clone, Debug, Default)]
pub(super) struct Dispatched(Arc<Mark>);

#[derive(Debug, Default)]
struct Mark {
    deadline: Mutex<Option<Instant>>,
    dispatched: AtomicBool,
    timed_out: AtomicBool,
    /// The task bounding the attempt, woken when the balancer sets the deadline.
    bound: AtomicWaker,
}

impl Dispatched {
    /// The mark of an attempt due by `deadline`, if it has one.
    pub fn new(deadline: Option<Instant>) -> Self {
        Dispatched(Arc::new(Mark {
            deadline: Mutex::new(deadline),
            ..Mark::default()
        }))
    }

    /// The mark `request` carries, if any.
    pub fn of<B>(request: &http::Request<B>) -> Option<Dispatched> {
        request.extensions().get::<Dispatched>().cloned()
    }

    /// Marks `request` as handed to an endpoint, if it carries a mark.
    pub fn mark<B>(request: &http::Request<B>) {
        if let Some(mark) = request.extensions().get::<Dispatched>() {
            mark.0.dispatched.store(true, Ordering::Relaxed);
        }
    }

    fn is_set(&self) -> bool {
        self.0.dispatched.load(Ordering::Relaxed)
    }

    /// The call's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        *self.0.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the call `timeout` from now as its deadline if it has none; its deadline.
    /// The task bounding the attempt is woken to keep it.
    pub fn bound_by(&self, timeout: Duration) -> Instant {
        let mut deadline = self.0.deadline.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(deadline) = *deadline {
            return deadline;
        }
        let set = Instant::now() + timeout;
        *deadline = Some(set);
        drop(deadline);
        self.0.bound.wake();
        set
    }

    /// Whether the call gave up on its endpoint's answer (it hung past the deadline).
    pub fn timed_out(&self) -> bool {
        self.0.timed_out.load(Ordering::Relaxed)
    }

    /// Whether the call's deadline has passed.
    pub fn deadline_passed(&self) -> bool {
        self.deadline().is_some_and(|d| Instant::now() >= d)
    }
}

/// Parses a `grpc-timeout` header value: at most 8 digits and a unit (`H`, `M`, `S`, `m`,
/// `u`, `n`).
pub(super) fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 || !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.checked_mul(3600)?),
        "M" => Duration::from_secs(amount.checked_mul(60)?),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// The deadline a request with `headers` sets itself, from now: its `grpc-timeout`, no later than
/// `cap` (the consumer's own request timeout). `None` when it sets none: its policy's
/// timeout then applies.
pub(super) fn deadline_of(headers: &http::HeaderMap, cap: Option<Duration>) -> Option<Duration> {
    let header = headers
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)?;
    Some(cap.map_or(header, |cap| header.min(cap)))
}

/// Writes `deadline` into `headers` as the time left (what the server reads), in whole
/// milliseconds, at least one.
pub(super) fn write_grpc_timeout(headers: &mut http::HeaderMap, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    let millis = left.as_millis().clamp(1, 99_999_999);
    if let Ok(value) = http::HeaderValue::from_str(&format!("{millis}m")) {
        headers.insert("grpc-timeout", value);
    }
}

/// Where a bounded call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for an endpoint: the timer fires at the nearer of the deadline and the end
    /// of the endpoint wait.
    Waiting,
    /// Handed to an endpoint: the timer fires at the deadline, if there is one.
    Dispatched,
    /// Past the deadline: the endpoint has [`DISPATCHED_GRACE`] to answer.
    Graced,
}

/// A call's answer bounded by its deadline and the endpoint wait; see the module docs.
pub(super) struct Bounded<F> {
    inner: F,
    timer: Pin<Box<Sleep>>,
    /// The deadline as the timer knows it (the mark's may be set later, at dispatch).
    deadline: Option<Instant>,
    /// How long the call may wait for an endpoint (for the error's words).
    wait: Duration,
    dispatched: Dispatched,
    stage: Stage,
    /// Why the channel has no endpoint, when it has none.
    no_endpoints: NoEndpoints,
    /// For a call made while the channel had no endpoint: resolves when why changes, so
    /// that the call fails as soon as no endpoint can come.
    watching: Option<ReusableBoxFuture<'static, ()>>,
}

impl<F> Bounded<F> {
    /// `inner` bounded by the deadline of its mark `dispatched` and by `wait` for an
    /// endpoint.
    pub fn new(
        inner: F,
        wait: Duration,
        dispatched: Dispatched,
        no_endpoints: NoEndpoints,
    ) -> Self {
        let now = Instant::now();
        let deadline = dispatched.deadline();
        let first = deadline.map_or(now + wait, |d| d.min(now + wait));
        let watching = no_endpoints
            .why()
            .is_some()
            .then(|| ReusableBoxFuture::new(no_endpoints.changed()));
        Bounded {
            inner,
            timer: Box::pin(tokio::time::sleep_until(first)),
            deadline,
            wait,
            dispatched,
            stage: Stage::Waiting,
            no_endpoints,
            watching,
        }
    }

    /// The error of a call that no endpoint took.
    fn unavailable(&self) -> BoxError {
        let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        let when = if past_deadline {
            "before the call's deadline".to_owned()
        } else {
            format!("within {:?} (the channel's endpoint wait)", self.wait)
        };
        let why = match self.no_endpoints.why() {
            Some(reason @ NoEndpoint::Empty(_)) if self.no_endpoints.reason().is_none() => {
                format!("no endpoint came {when}: {reason}")
            }
            Some(reason) => format!("no endpoint: {reason}"),
            None => format!("no endpoint was ready {when}"),
        };
        Box::new(tonic::Status::unavailable(why))
    }

    /// The error of a waiting call whose channel can get no endpoint any more (the fetch
    /// it waited for failed for good), if that is so; else keeps watching.
    fn no_endpoint_can_come(&mut self, cx: &mut TaskContext<'_>) -> Option<BoxError> {
        let watching = self.watching.as_mut()?;
        while watching.poll(cx).is_ready() {
            watching.set(self.no_endpoints.changed());
        }
        let reason = self.no_endpoints.reason()?;
        let status = tonic::Status::unavailable(format!("no endpoint: {reason}"));
        Some(Box::new(status))
    }
}

impl<F, T> Future for Bounded<F>
where
    F: Future<Output = Result<T, BoxError>> + Unpin,
{
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(answer) = Pin::new(&mut self.inner).poll(cx) {
            return Poll::Ready(answer);
        }
        if self.stage == Stage::Waiting && self.deadline.is_none() {
            // The balancer may give the call its policy's deadline when it picks: it wakes
            // this task then (registered first, so that a deadline set meanwhile is read).
            self.dispatched.0.bound.register(cx.waker());
            if let Some(deadline) = self.dispatched.deadline() {
                self.deadline = Some(deadline);
                let first = deadline.min(self.timer.deadline());
                self.timer.as_mut().reset(first);
            }
        }
        if self.stage == Stage::Waiting && !self.dispatched.is_set() {
            if let Some(error) = self.no_endpoint_can_come(cx) {
                return Poll::Ready(Err(error));
            }
        } else {
            self.watching = None;
        }
        loop {
            if self.stage == Stage::Dispatched && self.deadline.is_none() {
                // No deadline: the endpoint's own answer is awaited.
                return Poll::Pending;
            }
            ready!(self.timer.as_mut().poll(cx));
            match self.stage {
                Stage::Waiting if !self.dispatched.is_set() => {
                    return Poll::Ready(Err(self.unavailable()));
                }
                Stage::Waiting => {
                    self.stage = Stage::Dispatched;
                    if let Some(deadline) = self.deadline {
                        self.timer.as_mut().reset(deadline);
                    }
                }
                Stage::Dispatched => {
                    self.stage = Stage::Graced;
                    let at = Instant::now() + DISPATCHED_GRACE;
                    self.timer.as_mut().reset(at);
                }
                Stage::Graced => {
                    self.dispatched.0.timed_out.store(true, Ordering::Relaxed);
                    return Poll::Ready(Err(Box::new(tonic::Status::deadline_exceeded(
                        "the endpoint did not answer before the call's deadline",
                    ))));
                }
            }
        }
    }
}

/// Why a channel has no endpoint to call, while it has none: its subscription resolves to
/// nothing, or the identity check refused every endpoint. Calls then fail at once with
/// UNAVAILABLE and these words, instead of waiting; unless the metadata of some instance
/// is on its way ([`Explanation::awaits_metadata`]): calls then wait for it, within their
/// bound. Followed from the subscription and the channel's feeder.
#[derive(Clone, Debug)]
pub(super) struct NoEndpoints {
    empty: watch::Receiver<Option<Arc<Explanation>>>,
    refused: watch::Receiver<Option<Arc<str>>>,
}

/// Why a channel has no endpoint to call.
#[derive(Clone, Debug)]
pub(super) enum NoEndpoint {
    /// The subscription resolves to nothing.
    Empty(Arc<Explanation>),
    /// Every endpoint was refused by the identity check.
    Refused(Arc<str>),
}

impl std::fmt::Display for NoEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoEndpoint::Empty(explanation) => explanation.fmt(f),
            NoEndpoint::Refused(why) => f.write_str(why),
        }
    }
}

impl NoEndpoints {
    /// Follows `empty` (`Some(explanation)` while the subscription resolves to nothing) and
    /// `refused` (`Some(why)` while every endpoint is refused).
    pub fn new(
        empty: watch::Receiver<Option<Arc<Explanation>>>,
        refused: watch::Receiver<Option<Arc<str>>>,
    ) -> Self {
        NoEndpoints { empty, refused }
    }

    /// Why calls fail at once, if they do: there is no endpoint, and none is on its way.
    /// `None` while the subscription resolves to nothing only because the metadata of
    /// some instance is still being fetched or retried: calls wait for it.
    pub fn reason(&self) -> Option<NoEndpoint> {
        self.why().filter(|why| match why {
            NoEndpoint::Empty(explanation) => !explanation.awaits_metadata(),
            NoEndpoint::Refused(_) => true,
        })
    }

    /// Why there is no endpoint, if there is none (also while one is on its way).
    pub fn why(&self) -> Option<NoEndpoint> {
        if let Some(explanation) = self.empty.borrow().clone() {
            return Some(NoEndpoint::Empty(explanation));
        }
        self.refused.borrow().clone().map(NoEndpoint::Refused)
    }

    /// Resolves at the next change of why there is no endpoint (never, once nobody can
    /// change it any more).
    fn changed(&self) -> impl Future<Output = ()> + Send + 'static {
        let (mut empty, mut refused) = (self.empty.clone(), self.refused.clone());
        async move {
            // Only changes from now on: what is known now is read by the caller.
            empty.borrow_and_update();
            refused.borrow_and_update();
            let empty = async {
                if empty.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let refused = async {
                if refused.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = empty => {}
                () = refused => {}
            }
        }
    }
}

impl Default for NoEndpoints {
    /// Endpoints, as far as anyone knows.
    fn default() -> Self {
        NoEndpoints::new(watch::channel(None).1, watch::channel(None).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_as_the_spec_writes_them() {
        assert_eq!(parse_grpc_timeout("1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(
            parse_grpc_timeout("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(parse_grpc_timeout("123456789S"), None, "more than 8 digits");
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout("10x"), None);
        assert_eq!(parse_grpc_timeout("-1S"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_waiting_for_an_endpoint_fails_unavailable_at_its_deadline() {
        let waiting = futures::future::pending::<Result<(), BoxError>>();
        let started = Instant::now();
        let bounded = Bounded::new(
            waiting,
            Duration::from_secs(3),
            Dispatched::new(Some(started + Duration::from_secs(1))),
            NoEndpoints::default(),
        );
        assert!(!Dispatched::default().timed_out());
        let error = bounded.await.unwrap_err();
        let status = error.downcast::<tonic::Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_without_a_deadline_waits_for_an_endpoint_only_the_endpoint_wait() {
        let waiting = futures::future::pending::<Result<(), BoxError>>();
        let started = Instant::now();
        let no_endpoints = NoEndpoints::default();
        let wait = Duration::from_secs(3);
        let bounded = Bounded::new(waiting, wait, Dispatched::default(), no_endpoints);
        let status = bounded
            .await
            .unwrap_err()
            .downcast::<tonic::Status>()
            .unwrap();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(
            status.message().contains("endpoint wait"),
            "{}",
            status.message()
        );
        assert_eq!(started.elapsed(), wait);
    }

    /// Why a subscription resolves to nothing: its one instance has no metadata known,
    /// `on_its_way` or not.
    fn no_metadata(on_its_way: bool) -> Option<Arc<Explanation>> {
        use crate::consumer::explain::AppFindings;
        let app = AppFindings::new("greeter", 1, 1, []);
        Some(Arc::new(Explanation {
            subscription: crate::Subscription::new("helloworld.Greeter"),
            read: true,
            from_mapping: true,
            apps: vec![app.with_metadata_on_its_way(usize::from(on_its_way))],
            interface_level: None,
            step: None,
        }))
    }

    /// Why a channel has no endpoint, following `empty`.
    fn following(empty: &watch::Sender<Option<Arc<Explanation>>>) -> NoEndpoints {
        NoEndpoints::new(empty.subscribe(), watch::channel(None).1)
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_waits_for_metadata_on_its_way_then_fails_saying_why() {
        let (empty, _) = watch::channel(no_metadata(true));
        let no_endpoints = following(&empty);
        assert!(
            no_endpoints.reason().is_none(),
            "calls are not failed at once"
        );
        let waiting = futures::future::pending::<Result<(), BoxError>>();
        let started = Instant::now();
        let wait = Duration::from_secs(3);
        let status = Bounded::new(waiting, wait, Dispatched::default(), no_endpoints)
            .await
            .unwrap_err()
            .downcast::<tonic::Status>()
            .unwrap();
        assert_eq!(started.elapsed(), wait);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        let message = status.message();
        assert!(message.contains("within 3s"), "{message}");
        assert!(message.contains("no metadata known yet"), "{message}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_call_fails_once_the_metadata_cannot_come() {
        let (empty, _) = watch::channel(no_metadata(true));
        let waiting = futures::future::pending::<Result<(), BoxError>>();
        let started = Instant::now();
        let wait = Duration::from_secs(3);
        let bounded = Bounded::new(waiting, wait, Dispatched::default(), following(&empty));
        let fails = tokio::spawn(bounded);
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Something else changes first: the call keeps waiting.
        empty.send_replace(no_metadata(true).map(|e| {
            let mut e = (*e).clone();
            e.apps[0].instances = 2;
            Arc::new(e)
        }));
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!fails.is_finished(), "still on its way");
        empty.send_replace(no_metadata(false));
        let status = fails
            .await
            .unwrap()
            .unwrap_err()
            .downcast::<tonic::Status>()
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(1500), "at once");
        assert!(status.message().starts_with("no endpoint: "), "{status}");
        assert!(
            status.message().contains("no metadata known yet"),
            "{status}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dispatched_call_without_a_deadline_waits_for_its_answer() {
        let dispatched = Dispatched::new(None);
        dispatched.0.dispatched.store(true, Ordering::Relaxed);
        let answer = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, BoxError>(7)
        };
        let bounded = Bounded::new(
            Box::pin(answer),
            Duration::from_secs(3),
            dispatched,
            NoEndpoints::default(),
        );
        assert_eq!(
            bounded.await.unwrap(),
            7,
            "the endpoint's own answer, however late"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dispatched_call_gets_a_grace_then_deadline_exceeded() {
        let started = Instant::now();
        let dispatched = Dispatched::new(Some(started + Duration::from_secs(1)));
        dispatched.0.dispatched.store(true, Ordering::Relaxed);
        let hung = futures::future::pending::<Result<(), BoxError>>();
        let wait = Duration::from_secs(3);
        let error = Bounded::new(hung, wait, dispatched.clone(), NoEndpoints::default())
            .await
            .unwrap_err();
        assert!(dispatched.timed_out(), "the endpoint is told it hung");
        assert!(dispatched.deadline_passed());
        let status = error.downcast::<tonic::Status>().unwrap();
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(started.elapsed(), Duration::from_secs(1) + DISPATCHED_GRACE);
    }
}
