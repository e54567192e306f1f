//! The data plane: a load-balanced channel over a stream of endpoint changes (the stack is
//! drawn on [`BalancedChannel`]).
//!
//! A small feeder task (`feeder.rs`) follows a [`Discovery`] stream (one key per distinct
//! [`Authority`], so several services or protocols on one address are one balancer
//! endpoint) and hands the balancer (`balancer.rs`: routing, health, a weighted pick) its
//! changes, insertions first; `admission.rs` decides,
//! with an identity check, which addresses may join (dialled and checked first, refused
//! ones kept out until a TLS recheck passes); `passive.rs` records each call's outcome into
//! health; `deadline.rs` bounds calls; `cluster.rs` makes a call's attempts (failover: a
//! failed attempt that is safe to retry goes to a provider not tried yet), replaying its
//! body (`replay.rs`); `dial.rs` makes the tonic endpoint of one address. What a call's
//! attempts may be and which provider each picks is the select stage's
//! (`consumer/select`).
//! This module knows the resolver's health and a stream of changes, never the resolver nor
//! a subscription: it inherits the protections of whatever feeds it.

mod admission;
mod balancer;
mod cluster;
mod deadline;
mod dial;
mod discover;
mod feeder;
mod passive;
mod replay;
mod service_headers;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tower::BoxError;
use tower::buffer::Buffer;
use tower::util::BoxService;
use tracing::Instrument as _;

use crate::consumer::health::HealthRegistry;
use crate::consumer::metadata::Rejections;
use crate::consumer::select::budget::Budget;
use crate::consumer::select::policy::{ConsumerSettings, Idempotent, RETRIES_HEADER, call_retries};
use crate::consumer::stats::Counters;
use crate::error::{Error, Result};
use crate::model::Authority;
use crate::tls::{ClientTlsConfig, IdentityCheck, Refusals};
use admission::Admission;
use balancer::Balancer;
pub use balancer::HASH_KEY_HEADER;
use cluster::{Attempt, Call, CallRecord, Calls, Settled, Template};
use deadline::{Bounded, Dispatched, NoEndpoints, deadline_of, write_grpc_timeout};
pub use dial::ChannelOptions;
pub(crate) use dial::TlsChoice;
pub use discover::{Change, Discovery};
use feeder::{Feeder, Published};
use passive::Guarded;
use service_headers::ServiceHeaders;

/// Requests buffered in front of the balancer (tonic's own default).
const REQUEST_BUFFER: usize = 1024;

/// An HTTP request as tonic sends it.
type Request = http::Request<tonic::body::Body>;
/// An HTTP response as tonic reads it.
type Response = http::Response<tonic::body::Body>;
/// What the balancer's boxed service answers with.
type BoxedFuture = BoxFuture<'static, std::result::Result<Response, BoxError>>;

/// One balancer endpoint: marks each request handed to it (for [`Bounded`]) and names the
/// endpoint's service in its Triple headers, then calls it under passive health. Cheap to
/// clone: clones share the endpoint's connection.
#[derive(Clone)]
struct Marked(Guarded, ServiceHeaders);

impl tower::Service<Request> for Marked {
    type Response = Response;
    type Error = BoxError;
    type Future = BoxedFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<std::result::Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        Dispatched::mark(&request);
        self.1.apply(&mut request);
        self.0.call(request)
    }
}

/// A load-balanced channel over a subscription's endpoints, made by
/// [`crate::Resolver::balanced_channel`]. Generated tonic clients accept it
/// (`GreeterClient::new(channel)`): it is a `tower::Service` of HTTP requests, as tonic's
/// `GrpcService` asks. Cheap to clone; clones share one balancer.
///
/// ```text
/// BalancedChannel (Clone)      per call: its attempts (failover, retry budget, replayed
///                              body), each under the call's deadline, through a tower
///                              Buffer: clones share one balancer task
///   Balancer                   per attempt: routing (static tags, disabled providers,
///                              rules), less the providers the call tried, then health
///                              (set-aside endpoints out, panic mode), then the call's
///                              policy and its load balancer's pick
///     service headers          `tri-service-group` / `-version` of the endpoint's service
///     passive health           records each call's outcome
///       tonic Channel          one per address, connected lazily
/// ```
///
/// **Routing**, as Dubbo Java 3.3 routes with what providers publish in their
/// `ServiceInfo.params` (see [`crate::governance`]): a provider with `disabled=true`
/// (or `enabled=false`) takes no call; an untagged call goes only to providers without a
/// `dubbo.tag`, a call tagged `T` (request header `dubbo.tag`, else
/// [`ChannelOptions::tag`]) to providers tagged `T`, else, unless forced (`dubbo.force.tag`),
/// to the untagged ones. A call that routes to no provider fails at once with UNAVAILABLE
/// saying why.
///
/// **Weights**: each provider's share of calls follows its effective weight (`weight`,
/// default 100, or `{method}.weight`, reduced during its `warmup` after the instance's
/// `timestamp`), as with Java's weighted random balancing; of two providers drawn by weight,
/// the one with fewer calls in flight per unit of weight takes the call.
///
/// **Service headers**: a call names the group and version of the service its endpoint
/// was resolved for in the Triple headers Dubbo routes by (dubbo-go and Dubbo Java find a
/// grouped or versioned service only so), unless the request carries them already. One
/// address is one endpoint: where it exports the interface in several groups and the
/// subscription names none, the first in the set's order is the one called.
///
/// **Retries** (Dubbo's cluster stage, see [`ChannelOptions::retries`]): a failed attempt
/// that cannot have been processed (it never reached its provider, or the provider
/// declined it in a trailers-only `UNAVAILABLE` or `UNIMPLEMENTED`) goes to a provider the
/// call has not tried, inside its deadline and the channel's retry budget; timeouts and
/// other failures only for [idempotent](ChannelOptions::idempotent) calls.
///
/// **Passive health**: every call's outcome is recorded into the resolver's consumer-side
/// health. A refused connection sets the address aside at once; transport errors,
/// UNAVAILABLE, DEADLINE_EXCEEDED (from the headers of a trailers-only answer or from the
/// trailers), a CANCELLED answer after the call's deadline (what tonic servers answer then)
/// and a call that hung past its deadline count towards
/// [`HealthOptions::failure_threshold`](crate::consumer::HealthOptions::failure_threshold)
/// consecutive failures. The balancer routes around a set-aside endpoint at once, and it is
/// probed until it answers, then rejoins. Endpoints of instances that self-preservation
/// holds take no calls until the instance answers a probe. If every endpoint a call may go
/// to is set aside, the call goes to one of them anyway (panic mode, logged and counted as
/// `panic_routes`). [`ChannelOptions::passive_health`] turns the recording off.
///
/// **Identity** (with the `tls` feature and
/// [`ResolverBuilder::identity`](crate::consumer::ResolverBuilder::identity)): each
/// endpoint is dialled and its certificate checked for the app it was resolved for before
/// it joins; a refused one is removed (not set aside: no call, no panic mode) and joins only
/// once a TLS recheck passes. When every endpoint is refused, calls fail at once with
/// UNAVAILABLE saying why.
///
/// **No call waits forever**: while the subscription resolves to nothing (no app mapped,
/// no instance, nothing exported that matches), calls fail at once with UNAVAILABLE saying
/// which ([`crate::SubscriptionHandle::why_empty`]). A call waiting for a ready endpoint
/// fails with UNAVAILABLE at its deadline (its `grpc-timeout`, from `Request::set_timeout`,
/// or [`ChannelOptions::request_timeout`]) or after [`ChannelOptions::endpoint_wait`]
/// (default 3 s), whichever comes first.
#[derive(Clone)]
pub struct BalancedChannel {
    inner: Buffer<Request, BoxedFuture>,
    request_timeout: Option<std::time::Duration>,
    /// What the channel's calls share: the buffer again, the bounds, the retry budget.
    calls: Arc<Calls>,
    /// The consumer's own settings of calls (which methods may be processed twice).
    settings: Arc<ConsumerSettings>,
    /// Bytes of a request body kept for retries.
    replay_limit: usize,
}

impl std::fmt::Debug for BalancedChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancedChannel").finish_non_exhaustive()
    }
}

impl tower::Service<Request> for BalancedChannel {
    type Response = Response;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<std::result::Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if let Some(reason) = self.calls.no_endpoints.reason() {
            let status = tonic::Status::unavailable(format!("no endpoint: {reason}"));
            return ResponseFuture {
                inner: Answer::Failed(Some(Box::new(status))),
            };
        }
        let (parts, body) = request.into_parts();
        let http::request::Parts {
            method,
            uri,
            version,
            mut headers,
            extensions,
            ..
        } = parts;
        let replay = replay::Replay::new(body, self.replay_limit);
        let record = Arc::new(CallRecord::new(call_retries(&headers), &replay));
        headers.remove(RETRIES_HEADER);
        let idempotent = extensions.get::<Idempotent>().is_some()
            || self.settings.is_idempotent(balancer::method_of(uri.path()));
        let deadline = deadline_of(&headers, self.request_timeout)
            .map(|timeout| tokio::time::Instant::now() + timeout);
        if let Some(deadline) = deadline {
            write_grpc_timeout(&mut headers, deadline);
        }
        let mark = Dispatched::new(deadline);
        self.calls.budget.deposit();
        let attempt = Attempt {
            body: replay.again(),
            record: &record,
            mark: &mark,
        };
        let (template, first) = Template::first(method, uri, version, headers, attempt);
        let bounded = Bounded::new(
            self.inner.call(first),
            self.calls.wait,
            mark.clone(),
            self.calls.no_endpoints.clone(),
        );
        let call = Call::new(
            self.calls.clone(),
            template,
            replay,
            record,
            mark,
            idempotent,
        );
        ResponseFuture {
            inner: Answer::First {
                attempt: bounded,
                call: Some(call),
            },
        }
    }
}

/// The answer to a call through a [`BalancedChannel`].
pub struct ResponseFuture {
    inner: Answer,
}

// Inline on purpose: the future lives in the caller's own, and boxing the first attempt's
// state would cost every call an allocation (measured: `benches/channel.rs`).
#[allow(clippy::large_enum_variant)]
enum Answer {
    /// Its first attempt on its way, bounded, with what another attempt would need.
    First {
        attempt: Bounded<tower::buffer::future::ResponseFuture<BoxedFuture>>,
        /// Taken when the attempt answers.
        call: Option<Call>,
    },
    /// Attempts after the first.
    Retrying(BoxedFuture),
    /// Failed before it was sent (taken once polled).
    Failed(Option<BoxError>),
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl Future for ResponseFuture {
    type Output = std::result::Result<Response, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.inner {
                Answer::First { attempt, call } => {
                    let result = std::task::ready!(Pin::new(attempt).poll(cx));
                    let Some(call) = call.take() else {
                        return Poll::Ready(result);
                    };
                    match call.settle(result) {
                        Settled::Answered(answer) => return Poll::Ready(answer),
                        Settled::Retrying(next) => self.inner = Answer::Retrying(next),
                    }
                }
                Answer::Retrying(next) => return next.as_mut().poll(cx),
                Answer::Failed(error) => {
                    return Poll::Ready(Err(error
                        .take()
                        .unwrap_or_else(|| "the call was answered already".into())));
                }
            }
        }
    }
}

/// What follows and controls a channel's feeder.
#[derive(Debug)]
pub(crate) struct Feed {
    /// The addresses handed to the balancer.
    pub addresses: watch::Receiver<Arc<BTreeSet<Authority>>>,
    /// The addresses the identity check refused, with why.
    pub refused: watch::Receiver<Arc<BTreeMap<Authority, Arc<str>>>>,
    /// Stops the feeder.
    pub cancel: CancellationToken,
    /// The channel's retry budget.
    pub budget: Arc<Budget>,
}

/// What a resolver gives each of its balanced channels.
/// What routes a channel's calls besides what providers publish: who the consumer is, and
/// the rules in force (from the rules watcher).
pub(crate) struct Governance {
    /// The consumer URL of the channel's reference (its interface, tag, parameters).
    pub consumer: Arc<crate::governance::ConsumerIdentity>,
    pub rules: watch::Receiver<Arc<crate::governance::RuleSet>>,
    /// The channel's report of its rules in the consumer record, kept while the balancer
    /// routes (it routes by the last rules even once the watcher stopped).
    pub report: Option<Arc<crate::consumer::rules::RulesReport>>,
}

#[derive(Clone)]
pub(crate) struct ChannelParts {
    /// Which endpoints may take calls.
    pub health: Arc<HealthRegistry>,
    pub counters: Arc<Counters>,
    /// Where identity refusals are counted and logged.
    pub rejections: Arc<Rejections>,
    /// The TLS of channels whose options do not choose their own.
    pub tls: Option<ClientTlsConfig>,
    /// The identity check of every channel that speaks TLS.
    pub identity: Option<IdentityCheck>,
    /// Who the consumer is, for rules: the resolver's (each channel routes by its
    /// reference of it, see `ChannelOptions::consumer_of`).
    pub consumer: Arc<crate::governance::ConsumerIdentity>,
    /// Whether channels read rules from the config centre.
    pub rules: bool,
    /// The rule keys the resolver follows, each once for all its channels.
    pub rule_follows: crate::consumer::rules::SharedRules,
}

/// A channel balancing calls over the endpoints `discovery` yields, with `parts`' health
/// deciding which may take calls, dialled with `options` (their TLS choice falling back to
/// the parts'); `why_empty` says why there is no endpoint while there is none, the words
/// of the error of calls made meanwhile.
/// Must be called within a Tokio runtime. Fails only on a TLS configuration tonic rejects.
pub(crate) fn balanced_channel(
    discovery: Discovery,
    parts: ChannelParts,
    options: ChannelOptions,
    why_empty: watch::Receiver<Option<Arc<crate::consumer::explain::Explanation>>>,
    governance: Governance,
    cancel: CancellationToken,
    span: tracing::Span,
) -> Result<(BalancedChannel, Feed)> {
    let tls = match options.tls {
        TlsChoice::FromResolver => parts.tls,
        TlsChoice::Use(tls) => Some(*tls),
        TlsChoice::Plaintext => None,
    };
    let dialer = dial::Dialer {
        connect_timeout: options.connect_timeout,
        tls,
        identity: parts.identity.clone(),
    };
    // Check the TLS configuration once, so that a bad one fails here, not per endpoint.
    let probe = Authority::new("localhost", 1);
    let checked = if dialer.checks_identity() {
        dialer.checked(&probe, "app", Refusals::kept(|| {}).0)
    } else {
        dialer.endpoint(&probe)
    };
    checked.map_err(|e| Error::config(format!("balanced channel: {e}")).caused_by(e))?;
    let admission = match &parts.identity {
        Some(identity) if dialer.checks_identity() => Some(Admission::new(
            Arc::new(dialer.clone()),
            parts.rejections.clone(),
            identity.recheck_every(),
        )),
        _ => None,
    };
    let (changes, receiver) = mpsc::channel(options.capacity);
    let settings = Arc::new(options.calls.clone());
    let balancer = Balancer::new(
        receiver,
        settings.clone(),
        options.request_timeout,
        options.tag.clone(),
        governance.consumer,
        governance.rules,
        governance.report,
        parts.health.clone(),
        parts.counters.clone(),
    );
    let (all_refused, refused_why) = watch::channel(None);
    let buffer = Buffer::new(BoxService::new(balancer), REQUEST_BUFFER);
    let budget = Arc::new(Budget::new(options.retry_budget));
    let calls = Arc::new(Calls {
        buffer: buffer.clone(),
        wait: options.endpoint_wait,
        no_endpoints: NoEndpoints::new(why_empty, refused_why),
        budget: budget.clone(),
        counters: parts.counters.clone(),
    });
    let channel = BalancedChannel {
        inner: buffer,
        request_timeout: options.request_timeout,
        calls,
        settings,
        replay_limit: options.replay_limit,
    };
    let (addresses_tx, addresses) = watch::channel(Arc::new(BTreeSet::new()));
    let (refused_tx, refused) = watch::channel(Arc::new(BTreeMap::new()));
    let published = Published {
        addresses: addresses_tx,
        refused: refused_tx,
        all_refused,
    };
    let feeder = Feeder::new(
        discovery,
        changes,
        dialer,
        admission,
        passive::Recorder::new(parts.health, parts.counters, options.passive_health),
        published,
        cancel.clone(),
    );
    tokio::spawn(feeder.run().instrument(span));
    let feed = Feed {
        addresses,
        refused,
        cancel,
        budget,
    };
    Ok((channel, feed))
}
