//! How a balanced channel dials its endpoints: the options (connect and request timeouts,
//! TLS) and the tonic endpoint of one address, with the identity check when there is one.

use std::time::Duration;

use tonic::transport::Endpoint as TonicEndpoint;

use crate::consumer::routing::CallTag;
use crate::error::{Error, Result};
use crate::model::Authority;
use crate::tls::{ClientTlsConfig, IdentityCheck, Refusals};

/// Which TLS configuration the channel's endpoints use.
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) enum TlsChoice {
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
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Option<Duration>,
    pub(super) tls: TlsChoice,
    pub(super) capacity: usize,
    pub(super) passive_health: bool,
    pub(super) endpoint_wait: Duration,
    pub(super) tag: CallTag,
}

impl Default for ChannelOptions {
    fn default() -> Self {
        ChannelOptions {
            connect_timeout: ChannelOptions::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: None,
            tls: TlsChoice::FromResolver,
            capacity: ChannelOptions::DEFAULT_CHANGE_CAPACITY,
            passive_health: true,
            endpoint_wait: ChannelOptions::DEFAULT_ENDPOINT_WAIT,
            tag: CallTag::none(),
        }
    }
}

impl ChannelOptions {
    /// Default deadline of one connection attempt to an endpoint.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

    /// Default number of endpoint changes buffered between the task and the balancer.
    pub const DEFAULT_CHANGE_CAPACITY: usize = 1024;

    /// Default longest wait of a call for an endpoint (see [`ChannelOptions::endpoint_wait`]).
    pub const DEFAULT_ENDPOINT_WAIT: Duration = Duration::from_secs(3);

    /// Sets the deadline of one connection attempt (default [`Self::DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets a deadline on every request sent through the channel (default: none; set
    /// deadlines per call with `tonic::Request::set_timeout`). A call's deadline also
    /// bounds its wait for an endpoint: still waiting when it passes, it fails with
    /// UNAVAILABLE.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Dials the endpoints over TLS with this configuration instead of the resolver's. The
    /// resolver's identity check still applies (this configuration then names no CA).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = TlsChoice::Use(Box::new(tls));
        self
    }

    /// Dials the endpoints in plaintext even when the resolver uses TLS. No identity can be
    /// checked then.
    pub fn plaintext(mut self) -> Self {
        self.tls = TlsChoice::Plaintext;
        self
    }

    /// Sets whether the channel records each call's outcome into the resolver's
    /// consumer-side health (default `true`: passive health). Off, endpoints are still left
    /// out while health sets them aside (on the application's reports, or while a held
    /// instance does not answer its probe), but calls through the channel never do so.
    pub fn passive_health(mut self, on: bool) -> Self {
        self.passive_health = on;
        self
    }

    /// Sets how long a call waits for the balancer to have an endpoint that may take it
    /// (default [`Self::DEFAULT_ENDPOINT_WAIT`]), whatever its deadline: one still waiting then
    /// fails with UNAVAILABLE, so a call without a deadline never hangs because no endpoint
    /// comes. While the subscription resolves to nothing, calls fail at once instead,
    /// saying why. A call handed to an endpoint whose connection cannot be made fails after
    /// the connect timeout; one whose server accepts it waits for its answer up to its own
    /// deadline (set one, or [`request_timeout`](Self::request_timeout)).
    pub fn endpoint_wait(mut self, wait: Duration) -> Self {
        self.endpoint_wait = wait;
        self
    }

    /// Tags the calls that carry no `dubbo.tag` header of their own with `tag` (default:
    /// none), as a Dubbo consumer's own `dubbo.tag`: they go to providers of that tag, else
    /// to untagged ones. An empty tag is no tag.
    pub fn tag(mut self, tag: &str) -> Self {
        self.tag = CallTag::new(tag, self.tag.force);
        self
    }

    /// Sets whether tagged calls go only to providers of their tag, never falling back to
    /// untagged ones (default `false`; Dubbo's `dubbo.force.tag`). A request's own
    /// `dubbo.force.tag` header wins.
    pub fn force_tag(mut self, force: bool) -> Self {
        self.tag.force = force;
        self
    }

    /// Sets how many endpoint changes are buffered for the balancer (default
    /// [`Self::DEFAULT_CHANGE_CAPACITY`], at least 1).
    pub fn change_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }
}

/// Makes the tonic endpoint of one address.
#[derive(Clone, Debug)]
pub(super) struct Dialer {
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Option<Duration>,
    pub(super) tls: Option<ClientTlsConfig>,
    /// The identity check of every TLS connection, if any.
    pub(super) identity: Option<IdentityCheck>,
}

impl Dialer {
    /// Whether endpoints are checked before they join (TLS with an identity check).
    pub(super) fn checks_identity(&self) -> bool {
        self.tls.is_some() && self.identity.is_some()
    }

    /// The endpoint of `address` (TLS without an identity check, or plaintext).
    pub(super) fn endpoint(&self, address: &Authority) -> Result<TonicEndpoint> {
        self.endpoint_with(address, None)
    }

    /// The endpoint of `address`, resolved for `app`, whose every TLS handshake checks the
    /// server's identity and tells each refusal to `refusals`.
    pub(super) fn checked(
        &self,
        address: &Authority,
        app: &str,
        refusals: Refusals,
    ) -> Result<TonicEndpoint> {
        self.endpoint_with(address, Some((app, refusals)))
    }

    fn endpoint_with(
        &self,
        address: &Authority,
        checked: Option<(&str, Refusals)>,
    ) -> Result<TonicEndpoint> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let invalid = |reason: String| Error::Connect {
            address: address.to_string(),
            reason,
            source: None,
        };
        let mut endpoint = TonicEndpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| invalid(e.to_string()))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        if let Some(timeout) = self.request_timeout {
            endpoint = endpoint.timeout(timeout);
        }
        let applied = match (&self.tls, &self.identity, checked) {
            (Some(tls), Some(identity), Some((app, refusals))) => {
                let at = address.as_str();
                crate::tls::apply_identity(endpoint, tls, identity, app, at, refusals)
            }
            (Some(tls), _, _) => crate::tls::apply(endpoint, tls),
            (None, _, _) => Ok(endpoint),
        };
        applied.map_err(|e| invalid(format!("TLS: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialer_applies_scheme_and_rejects_garbage() {
        let dialer = Dialer {
            connect_timeout: Duration::from_secs(1),
            request_timeout: None,
            tls: None,
            identity: None,
        };
        let e = dialer.endpoint(&Authority::new("127.0.0.1", 80)).unwrap();
        assert_eq!(e.uri().to_string(), "http://127.0.0.1:80/");
        let v6 = dialer.endpoint(&Authority::new("::1", 80)).unwrap();
        assert_eq!(v6.uri().to_string(), "http://[::1]:80/");
        assert!(dialer.endpoint(&Authority::new("bad host", 80)).is_err());
    }
}
