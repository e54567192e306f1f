//! The TLS configuration types, present with or without the `tls` feature.
//!
//! With `tls`, these are tonic's (and the identity check's, see [`crate::identity`]).
//! Without it they are uninhabited: the option fields that hold them stay `None`, the
//! setters that fill them are compiled out, and the code that applies them needs no
//! `#[cfg]` of its own.

use std::sync::{Arc, Mutex};

use crate::error::Error;

#[cfg(feature = "tls")]
pub(crate) use crate::identity::IdentityCheck;
#[cfg(feature = "tls")]
pub(crate) use tonic::transport::ClientTlsConfig;

/// Stands for tonic's client TLS configuration without the `tls` feature; no value exists.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum ClientTlsConfig {}

/// Stands for the identity check without the `tls` feature; no value exists.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum IdentityCheck {}

#[cfg(not(feature = "tls"))]
impl IdentityCheck {
    /// How often a rejected endpoint is checked again (no value exists).
    pub(crate) fn recheck_every(&self) -> std::time::Duration {
        match *self {}
    }
}

/// Makes `endpoint` speak TLS with `tls`.
#[cfg(feature = "tls")]
pub(crate) fn apply(
    endpoint: tonic::transport::Endpoint,
    tls: &ClientTlsConfig,
) -> Result<tonic::transport::Endpoint, tonic::transport::Error> {
    endpoint.tls_config(tls.clone())
}

/// Without the `tls` feature there is no configuration to apply.
#[cfg(not(feature = "tls"))]
pub(crate) fn apply(
    _endpoint: tonic::transport::Endpoint,
    tls: &ClientTlsConfig,
) -> Result<tonic::transport::Endpoint, tonic::transport::Error> {
    match *tls {}
}

/// Makes `endpoint` (dialling `address`, resolved for `app`) speak TLS with `tls` and check
/// the server's identity with `identity` at every handshake; each refusal is told to
/// `refusals`.
#[cfg(feature = "tls")]
pub(crate) fn apply_identity(
    endpoint: tonic::transport::Endpoint,
    tls: &ClientTlsConfig,
    identity: &IdentityCheck,
    app: &str,
    address: &str,
    refusals: Refusals,
) -> Result<tonic::transport::Endpoint, tonic::transport::Error> {
    identity.apply(endpoint, tls, app, address, refusals.0)
}

/// Without the `tls` feature there is no identity to check.
#[cfg(not(feature = "tls"))]
pub(crate) fn apply_identity(
    _endpoint: tonic::transport::Endpoint,
    _tls: &ClientTlsConfig,
    identity: &IdentityCheck,
    _app: &str,
    _address: &str,
    _refusals: Refusals,
) -> Result<tonic::transport::Endpoint, tonic::transport::Error> {
    match *identity {}
}

/// Where the identity check of one dialled server tells its refusals (each an
/// [`Error::IdentityRejected`]): a slot holding the last one.
#[derive(Clone)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) struct Refusals(Arc<dyn Fn(Error) + Send + Sync>);

impl Refusals {
    /// Refusals kept in a slot, the last one read with [`LastRefusal::take`]; `then` is
    /// called after each is kept (to say that one came).
    pub fn kept(then: impl Fn() + Send + Sync + 'static) -> (Self, LastRefusal) {
        let last = LastRefusal::default();
        let slot = last.0.clone();
        let refusals = Refusals(Arc::new(move |error| {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
            then();
        }));
        (refusals, last)
    }

    /// Tells a refusal, as the verifier of a handshake does.
    #[cfg(test)]
    pub fn tell(&self, error: Error) {
        (self.0)(error);
    }
}

/// The last refusal of an identity check; see [`Refusals::kept`].
#[derive(Clone, Default)]
pub(crate) struct LastRefusal(Arc<Mutex<Option<Error>>>);

impl LastRefusal {
    /// The last refusal, if there was one since the last `take`.
    pub fn take(&self) -> Option<Error> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
