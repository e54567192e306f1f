//! The cluster stage of one call (Dubbo's `Cluster`): its attempts, each to a provider not
//! tried yet, while the call's policy, the safety rule (`select/retry.rs`), its deadline,
//! its body and the channel's retry budget allow another.
//!
//! The first attempt goes through the channel's buffer like any call; the balancer picks
//! its provider, leaving out those in the call's [`CallRecord`], and writes there what it
//! picked and the call's policy. A failed attempt that may be retried is sent again through
//! the buffer, its body replayed (`replay.rs`), until one answers or a rule says stop; the
//! caller then gets the last attempt's answer or error. An attempt that never reached its
//! provider does not count as one of the call's tries (Java's pick passes over a provider
//! it has no connection to, so such a call never fails in Java either), but costs budget.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tower::buffer::Buffer;
use tower::{BoxError, Service as _, ServiceExt as _};

use super::deadline::{Bounded, Dispatched, NoEndpoints, write_grpc_timeout};
use super::replay::Replay;
use super::{BoxedFuture, Request, Response};
use crate::consumer::select::budget::Budget;
use crate::consumer::select::policy::CallPolicy;
use crate::consumer::select::retry::{self, Attempted};
use crate::consumer::stats::Counters;
use crate::model::Authority;

/// Attempts of one call at most, whatever its policy says (each goes to another provider).
const MAX_ATTEMPTS: usize = 16;

/// What the attempts of one call share with the balancer, through a request extension:
/// the providers tried, the call's own retries, and its policy once the first pick read it.
#[derive(Default)]
pub(super) struct CallRecord {
    picks: Mutex<Picks>,
    /// The retries the call asks for itself (its `retries` header).
    pub call_retries: Option<u32>,
    /// The call's body, for copies of an attempt (forking).
    body: Mutex<Option<Replay>>,
}

impl std::fmt::Debug for CallRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRecord")
            .field("picks", &*self.picks())
            .field("call_retries", &self.call_retries)
            .finish_non_exhaustive()
    }
}

impl CallRecord {
    /// The record of a call with `body`, asking for `call_retries` itself.
    pub fn new(call_retries: Option<u32>, body: &Replay) -> CallRecord {
        CallRecord {
            call_retries,
            body: Mutex::new(Some(body.again())),
            ..CallRecord::default()
        }
    }

    /// Whether the call's whole body is at hand (a unary call's is), within the replay
    /// bound: only then can an attempt be copied.
    pub fn body_complete(&self) -> bool {
        let body = self.body.lock().unwrap_or_else(|e| e.into_inner());
        body.as_ref().is_some_and(Replay::read_all_now)
    }

    /// `n` copies of the attempt `request` (its parts and the call's body).
    pub fn copies(&self, request: &Request, n: usize) -> Vec<Request> {
        let body = self.body.lock().unwrap_or_else(|e| e.into_inner());
        let Some(body) = body.as_ref() else {
            return Vec::new();
        };
        (0..n)
            .map(|_| {
                let mut copy = http::Request::new(tonic::body::Body::new(body.again()));
                *copy.method_mut() = request.method().clone();
                *copy.uri_mut() = request.uri().clone();
                *copy.version_mut() = request.version();
                *copy.headers_mut() = request.headers().clone();
                *copy.extensions_mut() = request.extensions().clone();
                copy
            })
            .collect()
    }

    /// The record `request` carries, if it came through a balanced channel.
    pub fn of<B>(request: &http::Request<B>) -> Option<Arc<CallRecord>> {
        request.extensions().get::<Arc<CallRecord>>().cloned()
    }

    /// The providers the call went to, and its policy.
    pub fn picks(&self) -> std::sync::MutexGuard<'_, Picks> {
        self.picks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many providers the call went to.
    pub fn tried_count(&self) -> usize {
        self.picks().len()
    }

    /// The balancer picked `address` for an attempt, under `policy`.
    pub fn picked(&self, address: &Authority, policy: &Arc<CallPolicy>) {
        let mut picks = self.picks();
        picks.push(address.clone());
        picks.policy.get_or_insert_with(|| policy.clone());
    }

    /// The call's policy, once a pick read it.
    pub fn policy(&self) -> Option<Arc<CallPolicy>> {
        self.picks().policy.clone()
    }
}

/// The providers a call went to (the first kept inline: most calls make one attempt),
/// and its policy once the first pick read it.
#[derive(Debug, Default)]
pub(super) struct Picks {
    first: Option<Authority>,
    more: Vec<Authority>,
    policy: Option<Arc<CallPolicy>>,
}

impl Picks {
    /// Whether the call went to `address` already.
    pub fn contains(&self, address: &Authority) -> bool {
        self.first.as_ref() == Some(address) || self.more.contains(address)
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    fn push(&mut self, address: Authority) {
        if self.first.is_none() {
            self.first = Some(address);
        } else {
            self.more.push(address);
        }
    }
}

/// The balancer's answer to an attempt for which every routed provider was tried already:
/// the call's last answer stands.
#[derive(Debug)]
pub(super) struct NoProviderLeft;

impl std::fmt::Display for NoProviderLeft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("every provider the call may go to was tried")
    }
}

impl std::error::Error for NoProviderLeft {}

/// What a channel's calls share: the balancer's buffer, the bounds, the budget.
pub(super) struct Calls {
    pub buffer: Buffer<Request, BoxedFuture>,
    /// How long an attempt waits for an endpoint.
    pub wait: Duration,
    pub no_endpoints: NoEndpoints,
    pub budget: Arc<Budget>,
    pub counters: Arc<Counters>,
}

/// The parts of a call's request each attempt is made of. The caller's request extensions
/// are not among them: the channel reads what it needs of them when the call comes in,
/// and nothing below it reads them (an attempt carries only its record and mark).
pub(super) struct Template {
    pub method: http::Method,
    pub uri: http::Uri,
    pub version: http::Version,
    pub headers: http::HeaderMap,
}

impl Template {
    /// The template of a call of these parts, and its first attempt's request. The attempt
    /// takes the caller's own parts (room for the headers the layers below add) and the
    /// template keeps copies, for attempts after it.
    pub fn first(
        method: http::Method,
        uri: http::Uri,
        version: http::Version,
        headers: http::HeaderMap,
        attempt: Attempt<'_>,
    ) -> (Template, Request) {
        let template = Template {
            method: method.clone(),
            uri: uri.clone(),
            version,
            headers: headers.clone(),
        };
        let request = attempt.request(method, uri, version, headers);
        (template, request)
    }

    /// A later attempt's request: copies of the call's parts.
    pub fn request(&self, attempt: Attempt<'_>) -> Request {
        let (method, uri) = (self.method.clone(), self.uri.clone());
        attempt.request(method, uri, self.version, self.headers.clone())
    }
}

/// What an attempt carries besides the call's parts: the body it sends, the call's record
/// and its own mark.
pub(super) struct Attempt<'a> {
    pub body: Replay,
    pub record: &'a Arc<CallRecord>,
    pub mark: &'a Dispatched,
}

impl Attempt<'_> {
    fn request(
        self,
        method: http::Method,
        uri: http::Uri,
        version: http::Version,
        headers: http::HeaderMap,
    ) -> Request {
        let mut request = http::Request::new(tonic::body::Body::new(self.body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.version_mut() = version;
        *request.headers_mut() = headers;
        request.extensions_mut().insert(self.record.clone());
        request.extensions_mut().insert(self.mark.clone());
        request
    }
}

/// What a call keeps for attempts after its first: its parts, body and record, its mark,
/// whether the caller allows it to be processed twice, and the tries it made.
pub(super) struct Call {
    calls: Arc<Calls>,
    template: Template,
    replay: Replay,
    record: Arc<CallRecord>,
    mark: Dispatched,
    idempotent: bool,
    /// Tries that reached, or may have reached, a provider.
    tries: u32,
}

/// A call after one of its attempts answered: its answer, or its next attempts under way.
pub(super) enum Settled {
    Answered(Result<Response, BoxError>),
    Retrying(BoxedFuture),
}

impl Call {
    /// A call made of `template`, `replay` and `record`, its first attempt marked `mark`;
    /// `idempotent` when the caller allows it to be processed twice.
    pub fn new(
        calls: Arc<Calls>,
        template: Template,
        replay: Replay,
        record: Arc<CallRecord>,
        mark: Dispatched,
        idempotent: bool,
    ) -> Call {
        Call {
            calls,
            template,
            replay,
            record,
            mark,
            idempotent,
            tries: 0,
        }
    }

    /// The call once an attempt answered `result`: the answer, when no rule of the module
    /// docs allows another attempt (most calls: nothing is allocated for them), else the
    /// attempts that follow (boxed only then).
    pub fn settle(mut self, result: Result<Response, BoxError>) -> Settled {
        if self.another(&result) {
            Settled::Retrying(Box::pin(Box::new(self).retries(result)))
        } else {
            Settled::Answered(result.map_err(deadline_exceeded))
        }
    }

    /// Counts the attempt that answered `result`; whether another may follow (and then
    /// takes its retry from the budget).
    fn another(&mut self, result: &Result<Response, BoxError>) -> bool {
        let attempted = match result {
            Ok(response) => retry::of_headers(response.headers()),
            Err(error) => retry::of_error(error.as_ref()),
        };
        let counters = &self.calls.counters;
        count(counters, &attempted);
        let sent = !matches!(attempted, Attempted::NotSent(_));
        if sent {
            self.tries += 1;
        }
        if !attempted.may_retry(self.idempotent) {
            return false;
        }
        let Some(policy) = self.record.policy() else {
            return false;
        };
        if (sent && self.tries >= policy.tries()) || self.record.tried_count() >= MAX_ATTEMPTS {
            return false;
        }
        if self.mark.deadline().is_some_and(|d| d <= Instant::now()) {
            return false;
        }
        if !self.replay.replayable() {
            tracing::debug!("a failed call's body is over the replay bound: not retried");
            return false;
        }
        if !self.calls.budget.withdraw() {
            Counters::bump(&counters.retries_over_budget);
            tracing::debug!("the retry budget is spent: a failed call is not retried");
            return false;
        }
        Counters::bump(&counters.retries);
        true
    }

    /// The attempts after one that answered `last` and may be followed: each to a
    /// provider the call has not tried, until one answers or a rule says stop.
    async fn retries(
        mut self: Box<Self>,
        mut last: Result<Response, BoxError>,
    ) -> Result<Response, BoxError> {
        loop {
            let deadline = self.mark.deadline();
            let mark = Dispatched::new(deadline);
            let mut request = self.template.request(Attempt {
                body: self.replay.again(),
                record: &self.record,
                mark: &mark,
            });
            if let Some(deadline) = deadline {
                write_grpc_timeout(request.headers_mut(), deadline);
            }
            let mut buffer = self.calls.buffer.clone();
            let sent = match buffer.ready().await {
                Ok(buffer) => buffer.call(request),
                Err(error) => return Err(error),
            };
            let calls = &self.calls;
            let next = Bounded::new(sent, calls.wait, mark, calls.no_endpoints.clone()).await;
            if let Err(error) = &next
                && error.is::<NoProviderLeft>()
            {
                return last.map_err(deadline_exceeded);
            }
            if !self.another(&next) {
                return next.map_err(deadline_exceeded);
            }
            last = next;
        }
    }
}

/// An error as gRPC says it to the caller: a deadline that passed (tonic's
/// `TimeoutExpired`, which it would turn into CANCELLED) as DEADLINE_EXCEEDED, a provider
/// ejected as hung while the call waited as UNAVAILABLE.
fn deadline_exceeded(error: BoxError) -> BoxError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error.as_ref());
    while let Some(e) = source {
        if e.is::<tonic::TimeoutExpired>() {
            return Box::new(tonic::Status::deadline_exceeded(
                "the provider did not answer before the call's deadline",
            ));
        }
        if let Some(hung) = e.downcast_ref::<crate::consumer::health::ProviderHung>() {
            return Box::new(tonic::Status::unavailable(hung.to_string()));
        }
        source = e.source();
    }
    error
}

/// The first of `attempts` (sent at once: forking) to answer, else the last failure.
pub(super) async fn first_answer(attempts: Vec<BoxedFuture>) -> Result<Response, BoxError> {
    use futures::StreamExt as _;
    let mut pending: futures::stream::FuturesUnordered<_> = attempts.into_iter().collect();
    let mut last = None;
    while let Some(result) = pending.next().await {
        let answered = match &result {
            Ok(response) => retry::of_headers(response.headers()) == Attempted::Answered,
            Err(_) => false,
        };
        if answered {
            return result;
        }
        last = Some(result);
    }
    last.unwrap_or_else(|| Err(Box::new(NoProviderLeft)))
}

/// Counts an attempt by what became of it.
fn count(counters: &Counters, attempted: &Attempted) {
    match attempted {
        Attempted::NotSent(_) => Counters::bump(&counters.attempts_not_sent),
        Attempted::Declined(_) => Counters::bump(&counters.attempts_declined),
        Attempted::Failed(..) => Counters::bump(&counters.attempts_failed),
        Attempted::Answered => {}
        Attempted::Channel => return,
    }
    Counters::bump(&counters.call_attempts);
}
