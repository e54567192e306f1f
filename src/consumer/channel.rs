//! A load-balanced channel over a live subscription: a tower balancer over its
//! [`Discovery`] stream.
//!
//! [`Resolver::balanced_channel`] turns a [`SubscriptionHandle`] into a [`BalancedChannel`],
//! which generated tonic clients accept (it is a `tower::Service` of HTTP requests, as
//! tonic's `GrpcService` asks). Inside:
//!
//! ```text
//! BalancedChannel (Clone)      call deadlines (see below), then a tower Buffer: clones
//!                              share one balancer task
//!   p2c::Balance               power of two choices by pending requests
//!     PendingRequests          the load measure
//!       passive health         records each call's outcome; not ready while set aside
//!         tonic Channel        one per address, connected lazily
//! ```
//!
//! A small feeder task follows the subscription's [`Discovery`] stream (one key per
//! distinct dialable `host:port`, so several services or protocols on one address are one
//! balancer endpoint) and hands the balancer its changes, insertions first.
//!
//! The balancer follows what the subscription publishes, so it inherits its protections:
//! an instance marked `enabled: false` by a graceful stop leaves at once (its server keeps
//! answering during the provider's drain period, so no call fails), removals held by
//! self-preservation stay, and a failed store read never empties it.
//!
//! **Passive health**: every call's outcome is recorded into the resolver's consumer-side
//! health, so the application reports nothing. A refused connection sets the address
//! aside at once; transport errors, UNAVAILABLE and DEADLINE_EXCEEDED (from the headers of
//! a trailers-only answer or from the trailers) count towards
//! [`HealthOptions::failure_threshold`](super::HealthOptions::failure_threshold)
//! consecutive failures. A set-aside endpoint is not ready, so the balancer routes around
//! it at once, and it is probed until it answers, then rejoins. Instances that
//! self-preservation holds are probed at once and take no calls until they answer: the
//! registry view may hold the dead, the channel does not call them. If every endpoint is
//! set aside, the channel routes to all of them (panic mode, logged and counted as
//! `panic_routes`). [`ChannelOptions::passive_health`] turns the recording off.
//!
//! **Deadlines**: a call's deadline (its `grpc-timeout`, from `Request::set_timeout`, or
//! [`ChannelOptions::request_timeout`]) also bounds its wait for an endpoint: when no
//! endpoint is ready (nothing registered yet, everything really gone) it fails with
//! UNAVAILABLE once its deadline passes. A call without a deadline waits.
//!
//! Each endpoint is dialled lazily with the connect timeout of [`ChannelOptions`], its
//! request timeout, and the resolver's TLS configuration (if it has one, unless the options
//! say otherwise).
//!
//! The feeder stops when every clone of the channel has been dropped (the balancer is
//! gone), when the subscription ends, or on [`ChannelHandle::stop`]; the channel then keeps
//! the endpoints it has. Dropping the [`ChannelHandle`] alone does not stop it: the channel
//! keeps following the subscription.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use futures::future::BoxFuture;
use futures::{FutureExt as _, Stream, StreamExt as _};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tower::BoxError;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::util::BoxService;
use tracing::Instrument;

use super::context::Context;
use super::deadline::{Bounded, Dispatched, deadline_of};
pub use super::dial::{ChannelOptions, DEFAULT_CHANGE_CAPACITY, DEFAULT_CONNECT_TIMEOUT};
use super::dial::{Dialer, TlsChoice};
use super::discover::{Change as DiscoveryChange, Discovery};
use super::passive::{ChannelHealth, Guarded};
use super::resolver::Resolver;
use super::subscribe::SubscriptionHandle;
use crate::error::{Error, Result};
use crate::model::Endpoint;

/// Follows and controls the task feeding a balanced channel. See the module docs.
#[derive(Debug)]
pub struct ChannelHandle {
    subscription: SubscriptionHandle,
    addresses: watch::Receiver<Arc<BTreeSet<String>>>,
    cancel: CancellationToken,
}

impl ChannelHandle {
    /// The subscription the channel follows (for its endpoint set, health reports and
    /// flags).
    pub fn subscription(&self) -> &SubscriptionHandle {
        &self.subscription
    }

    /// The addresses (`host:port`) handed to the balancer, sorted. The balancer applies
    /// them when it next routes a call.
    pub fn addresses(&self) -> Arc<BTreeSet<String>> {
        self.addresses.borrow().clone()
    }

    /// Waits until the addresses handed to the balancer change and returns them. Fails
    /// with [`Error::Shutdown`] once the task has stopped.
    pub async fn changed(&mut self) -> Result<Arc<BTreeSet<String>>> {
        self.addresses
            .changed()
            .await
            .map_err(|_| Error::Shutdown)?;
        Ok(self.addresses.borrow_and_update().clone())
    }

    /// Whether the task still follows the subscription.
    pub fn is_running(&self) -> bool {
        self.addresses.has_changed().is_ok()
    }

    /// Stops following the subscription: the channel keeps the endpoints it has.
    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

/// Requests buffered in front of the balancer (tonic's own default).
const REQUEST_BUFFER: usize = 1024;

/// An HTTP request as tonic sends it.
type Request = http::Request<tonic::body::Body>;
/// An HTTP response as tonic reads it.
type Response = http::Response<tonic::body::Body>;
/// What the balancer's boxed service answers with.
type BoxedFuture = BoxFuture<'static, std::result::Result<Response, BoxError>>;

/// One balancer endpoint: the tonic channel of one address under passive health,
/// measured by its pending requests.
type EndpointService = PendingRequests<Marked, CompleteOnResponse>;

/// Marks each request handed to the endpoint (for [`Bounded`]), then calls it.
struct Marked(Guarded);

impl tower::Service<Request> for Marked {
    type Response = Response;
    type Error = BoxError;
    type Future = BoxedFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<std::result::Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Dispatched::mark(&request);
        self.0.call(request)
    }
}

/// The stack of one endpoint, built when the balancer is handed its address.
fn endpoint_service(guarded: Guarded) -> EndpointService {
    PendingRequests::new(Marked(guarded), CompleteOnResponse::default())
}

/// A load-balanced channel over a subscription's endpoints. Generated tonic clients accept
/// it (`GreeterClient::new(channel)`); see the [module docs](self).
///
/// Cheap to clone; clones share one balancer.
#[derive(Clone)]
pub struct BalancedChannel {
    inner: Buffer<Request, BoxedFuture>,
    request_timeout: Option<std::time::Duration>,
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

    fn call(&mut self, mut request: Request) -> Self::Future {
        let deadline = deadline_of(&request, self.request_timeout);
        let dispatched = Dispatched::default();
        request.extensions_mut().insert(dispatched.clone());
        ResponseFuture {
            inner: Bounded::new(self.inner.call(request), deadline, dispatched),
        }
    }
}

/// The answer to a call through a [`BalancedChannel`].
pub struct ResponseFuture {
    inner: Bounded<tower::buffer::future::ResponseFuture<BoxedFuture>>,
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl Future for ResponseFuture {
    type Output = std::result::Result<Response, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// The balancer's side of the feeder's changes. When the feeder stops, the stream stays
/// pending, so the balancer keeps the endpoints it has.
struct Changes {
    receiver: mpsc::Receiver<Change<String, EndpointService>>,
}

impl Stream for Changes {
    type Item = std::result::Result<Change<String, EndpointService>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some(change)) => Poll::Ready(Some(Ok(change))),
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }
}

impl Resolver {
    /// A channel balancing calls over the live endpoints of `subscription`, with default
    /// [`ChannelOptions`]; see [`Resolver::balanced_channel_with`].
    pub fn balanced_channel(
        &self,
        subscription: &SubscriptionHandle,
    ) -> Result<(BalancedChannel, ChannelHandle)> {
        self.balanced_channel_with(subscription, ChannelOptions::default())
    }

    /// A channel balancing calls over the live endpoints of `subscription`: each distinct
    /// dialable `host:port` of its endpoint set is one balancer endpoint, added and removed
    /// as the subscription publishes changes (see the [module docs](self)). Endpoints are
    /// dialled lazily with the options' connect timeout and TLS (by default the resolver's).
    ///
    /// Must be called within a Tokio runtime. Fails only on a TLS configuration tonic
    /// rejects.
    pub fn balanced_channel_with(
        &self,
        subscription: &SubscriptionHandle,
        options: ChannelOptions,
    ) -> Result<(BalancedChannel, ChannelHandle)> {
        let tls = match options.tls {
            TlsChoice::FromResolver => self.context().tls.clone(),
            TlsChoice::Use(tls) => Some(*tls),
            TlsChoice::Plaintext => None,
        };
        let dialer = Dialer {
            connect_timeout: options.connect_timeout,
            request_timeout: options.request_timeout,
            tls,
        };
        // Check the TLS configuration once, so that a bad one fails here, not per endpoint.
        dialer
            .endpoint("localhost:1")
            .map_err(|e| Error::Config(format!("balanced channel: {e}")))?;
        let (changes, receiver) = mpsc::channel(options.capacity);
        let balance: Balance<Changes, Request> = Balance::new(Changes { receiver });
        let channel = BalancedChannel {
            inner: Buffer::new(BoxService::new(balance), REQUEST_BUFFER),
            request_timeout: options.request_timeout,
        };
        let (published, addresses) = watch::channel(Arc::new(BTreeSet::new()));
        let cancel = CancellationToken::new();
        let span = tracing::debug_span!(
            "balanced_channel",
            interface = %subscription.subscription().interface
        );
        let feeder = Feeder {
            discovery: subscription.discover(),
            changes,
            dialer,
            context: self.context().clone(),
            health: Arc::new(ChannelHealth::default()),
            record: options.passive_health,
            published,
            cancel: cancel.clone(),
            current: BTreeSet::new(),
        };
        tokio::spawn(feeder.run().instrument(span));
        let handle = ChannelHandle {
            subscription: subscription.clone(),
            addresses,
            cancel,
        };
        Ok((channel, handle))
    }
}

/// The task feeding the balancer.
struct Feeder {
    discovery: Discovery,
    changes: mpsc::Sender<Change<String, EndpointService>>,
    dialer: Dialer,
    context: Arc<Context>,
    /// What the channel's endpoints share for passive health.
    health: Arc<ChannelHealth>,
    /// Whether calls' outcomes are recorded.
    record: bool,
    published: watch::Sender<Arc<BTreeSet<String>>>,
    cancel: CancellationToken,
    /// What the balancer has been handed.
    current: BTreeSet<String>,
}

impl Feeder {
    async fn run(mut self) {
        loop {
            let next = tokio::select! {
                () = self.cancel.cancelled() => break,
                () = self.changes.closed() => break,
                next = self.discovery.next() => next,
            };
            let Some(Ok(change)) = next else { break };
            if !self.hand_over(change).await {
                break;
            }
            // Publish once the changes of one set are all handed over.
            while let Some(Some(Ok(change))) = self.discovery.next().now_or_never() {
                if !self.hand_over(change).await {
                    return;
                }
            }
            self.published.send_if_modified(|published| {
                if **published == self.current {
                    false
                } else {
                    *published = Arc::new(self.current.clone());
                    true
                }
            });
        }
        tracing::debug!("balanced channel no longer follows its subscription");
    }

    /// Hands one change to the balancer, dialling an inserted address lazily. Returns
    /// `false` once the balancer is gone or the task is stopped.
    async fn hand_over(&mut self, change: DiscoveryChange<String, Endpoint>) -> bool {
        let change = match change {
            DiscoveryChange::Insert(address, _) => {
                let endpoint = match self.dialer.endpoint(&address) {
                    Ok(endpoint) => endpoint,
                    Err(e) => {
                        tracing::warn!(%address, error = %e, "endpoint left out of the channel");
                        return true;
                    }
                };
                tracing::debug!(%address, "endpoint added to the channel");
                self.current.insert(address.clone());
                self.health.insert(&address);
                let guarded = Guarded::new(
                    endpoint.connect_lazy(),
                    &address,
                    self.context.clone(),
                    self.health.clone(),
                    self.record,
                );
                Change::Insert(address, endpoint_service(guarded))
            }
            DiscoveryChange::Remove(address) => {
                if !self.current.remove(&address) {
                    return true;
                }
                tracing::debug!(%address, "endpoint removed from the channel");
                self.health.remove(&address);
                Change::Remove(address)
            }
        };
        tokio::select! {
            () = self.cancel.cancelled() => false,
            sent = self.changes.send(change) => sent.is_ok(),
        }
    }
}
