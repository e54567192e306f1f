//! A load-balanced tonic [`Channel`] over a live subscription.
//!
//! [`Resolver::balanced_channel`] turns a [`SubscriptionHandle`] into a tonic channel built
//! with [`Channel::balance_channel`] (power-of-two-choices over the endpoints it is fed). A
//! small task follows the subscription's published endpoint sets and feeds the balancer
//! `Insert`/`Remove` changes keyed by the endpoint's `host:port`, so several services (or
//! protocols) on one address are one balancer endpoint.
//!
//! The balancer follows exactly what the subscription publishes, so it inherits its
//! protections: an instance marked `enabled: false` by a graceful stop leaves at once (its
//! server keeps answering during the provider's drain period, so no call fails), endpoints
//! set aside by consumer-side health leave and come back with the subscription's set,
//! removals held by self-preservation stay, and a failed store read never empties it.
//!
//! While the set is empty (nothing registered yet, or everything really gone) calls wait
//! for an endpoint: give them deadlines. Call outcomes are reported, when the caller knows
//! the endpoint that failed, through [`ChannelHandle::subscription`]; an address set aside
//! after consecutive failures leaves the balancer until a probe or a success brings it back.
//!
//! Each endpoint is dialled lazily with the connect timeout of [`ChannelOptions`] and the
//! resolver's TLS configuration (if it has one, unless the options say otherwise).
//!
//! The task stops when every clone of the channel has been dropped (the balancer is gone),
//! when the subscription ends, or on [`ChannelHandle::stop`]. Dropping the
//! [`ChannelHandle`] alone does not stop it: the channel keeps following the subscription.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint as TonicEndpoint};
use tracing::Instrument;

use super::resolver::Resolver;
use super::subscribe::SubscriptionHandle;
use crate::error::{Error, Result};
use crate::model::Endpoint;
use crate::rpc::authority;
use crate::tls::ClientTlsConfig;

/// Default deadline of one connection attempt to an endpoint.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of endpoint changes buffered between the task and the balancer.
pub const DEFAULT_CHANGE_CAPACITY: usize = 1024;

/// Which TLS configuration the channel's endpoints use.
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
enum TlsChoice {
    /// The resolver's (plaintext when it has none).
    #[default]
    FromResolver,
    /// This one.
    Use(Box<ClientTlsConfig>),
    /// None: plaintext whatever the resolver uses.
    Plaintext,
}

/// How a balanced channel dials its endpoints. Every part has a default.
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    connect_timeout: Duration,
    request_timeout: Option<Duration>,
    tls: TlsChoice,
    capacity: usize,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: None,
            tls: TlsChoice::FromResolver,
            capacity: DEFAULT_CHANGE_CAPACITY,
        }
    }
}

impl ChannelOptions {
    /// Sets the deadline of one connection attempt (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets a deadline on every request sent through the channel (default: none; set
    /// deadlines per call with `tonic::Request::set_timeout`).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Dials the endpoints over TLS with this configuration instead of the resolver's.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = TlsChoice::Use(Box::new(tls));
        self
    }

    /// Dials the endpoints in plaintext even when the resolver uses TLS.
    pub fn plaintext(mut self) -> Self {
        self.tls = TlsChoice::Plaintext;
        self
    }

    /// Sets how many endpoint changes are buffered for the balancer (default
    /// [`DEFAULT_CHANGE_CAPACITY`], at least 1).
    pub fn change_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }
}

/// Makes the tonic endpoint of one address.
#[derive(Clone, Debug)]
struct Dialer {
    connect_timeout: Duration,
    request_timeout: Option<Duration>,
    tls: Option<ClientTlsConfig>,
}

impl Dialer {
    fn endpoint(&self, address: &str) -> Result<TonicEndpoint> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let invalid = |reason: String| Error::Connect {
            address: address.to_owned(),
            reason,
        };
        let mut endpoint = TonicEndpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| invalid(e.to_string()))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        if let Some(timeout) = self.request_timeout {
            endpoint = endpoint.timeout(timeout);
        }
        if let Some(tls) = &self.tls {
            endpoint =
                crate::tls::apply(endpoint, tls).map_err(|e| invalid(format!("TLS: {e}")))?;
        }
        Ok(endpoint)
    }
}

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

impl Resolver {
    /// A tonic channel balancing calls over the live endpoints of `subscription`, with
    /// default [`ChannelOptions`]; see [`Resolver::balanced_channel_with`].
    pub fn balanced_channel(
        &self,
        subscription: &SubscriptionHandle,
    ) -> Result<(Channel, ChannelHandle)> {
        self.balanced_channel_with(subscription, ChannelOptions::default())
    }

    /// A tonic channel balancing calls over the live endpoints of `subscription`: each
    /// distinct `host:port` of its endpoint set is one balancer endpoint, added and removed
    /// as the subscription publishes changes (see the [module docs](self)). Endpoints are
    /// dialled lazily with the options' connect timeout and TLS (by default the resolver's).
    ///
    /// Must be called within a Tokio runtime. Fails only on a TLS configuration tonic
    /// rejects.
    pub fn balanced_channel_with(
        &self,
        subscription: &SubscriptionHandle,
        options: ChannelOptions,
    ) -> Result<(Channel, ChannelHandle)> {
        let tls = match options.tls {
            TlsChoice::FromResolver => self.tls().cloned(),
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
        let (channel, changes) = Channel::balance_channel::<String>(options.capacity);
        let (published, addresses) = watch::channel(Arc::new(BTreeSet::new()));
        let cancel = CancellationToken::new();
        let span = tracing::debug_span!(
            "balanced_channel",
            interface = %subscription.subscription().interface
        );
        let feeder = Feeder {
            endpoints: subscription.watch(),
            changes,
            dialer,
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

/// The addresses of an endpoint set, deduplicated.
fn addresses_of(endpoints: &[Endpoint]) -> BTreeSet<String> {
    endpoints
        .iter()
        .map(|e| authority(&e.host, e.port))
        .collect()
}

/// The task feeding the balancer.
struct Feeder {
    endpoints: watch::Receiver<Arc<Vec<Endpoint>>>,
    changes: mpsc::Sender<Change<String, TonicEndpoint>>,
    dialer: Dialer,
    published: watch::Sender<Arc<BTreeSet<String>>>,
    cancel: CancellationToken,
    /// What the balancer has been handed.
    current: BTreeSet<String>,
}

impl Feeder {
    async fn run(mut self) {
        loop {
            let set = self.endpoints.borrow_and_update().clone();
            if !self.sync(addresses_of(&set)).await {
                break;
            }
            tokio::select! {
                () = self.cancel.cancelled() => break,
                () = self.changes.closed() => break,
                changed = self.endpoints.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        tracing::debug!("balanced channel no longer follows its subscription");
    }

    /// Hands the balancer the difference between what it has and `next`: insertions
    /// first, so that a full replacement never leaves it empty. Returns `false` once the
    /// balancer is gone or the task is stopped.
    async fn sync(&mut self, next: BTreeSet<String>) -> bool {
        let added: Vec<String> = next.difference(&self.current).cloned().collect();
        let removed: Vec<String> = self.current.difference(&next).cloned().collect();
        for address in added {
            let endpoint = match self.dialer.endpoint(&address) {
                Ok(endpoint) => endpoint,
                Err(e) => {
                    tracing::warn!(%address, error = %e, "endpoint left out of the channel");
                    continue;
                }
            };
            tracing::debug!(%address, "endpoint added to the channel");
            if !self.send(Change::Insert(address.clone(), endpoint)).await {
                return false;
            }
            self.current.insert(address);
        }
        for address in removed {
            tracing::debug!(%address, "endpoint removed from the channel");
            if !self.send(Change::Remove(address.clone())).await {
                return false;
            }
            self.current.remove(&address);
        }
        self.published.send_if_modified(|published| {
            if **published == self.current {
                false
            } else {
                *published = Arc::new(self.current.clone());
                true
            }
        });
        true
    }

    async fn send(&self, change: Change<String, TonicEndpoint>) -> bool {
        tokio::select! {
            () = self.cancel.cancelled() => false,
            sent = self.changes.send(change) => sent.is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn endpoint(host: &str, port: u16, service: &str) -> Endpoint {
        Endpoint {
            app: "a".into(),
            host: host.into(),
            port,
            protocol: "tri".into(),
            revision: "r".into(),
            service: Arc::new(ServiceInfo::new(service)),
        }
    }

    #[test]
    fn services_on_one_address_are_one_balancer_endpoint() {
        let set = vec![
            endpoint("10.0.0.1", 50051, "a.A"),
            endpoint("10.0.0.1", 50051, "a.B"),
            endpoint("10.0.0.2", 50051, "a.A"),
            endpoint("::1", 7, "a.A"),
        ];
        let addresses: Vec<String> = addresses_of(&set).into_iter().collect();
        assert_eq!(addresses, ["10.0.0.1:50051", "10.0.0.2:50051", "[::1]:7"]);
    }

    #[test]
    fn dialer_applies_scheme_and_rejects_garbage() {
        let dialer = Dialer {
            connect_timeout: Duration::from_secs(1),
            request_timeout: None,
            tls: None,
        };
        let e = dialer.endpoint("127.0.0.1:80").unwrap();
        assert_eq!(e.uri().to_string(), "http://127.0.0.1:80/");
        assert!(dialer.endpoint("bad host:80").is_err());
    }
}
