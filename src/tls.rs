//! The TLS configuration types, present with or without the `tls` feature.
//!
//! With `tls`, these are tonic's. Without it they are uninhabited: the option fields that
//! hold them stay `None`, the setters that fill them are compiled out, and the code that
//! applies them needs no `#[cfg]` of its own.

#[cfg(feature = "tls")]
pub(crate) use tonic::transport::ClientTlsConfig;

/// Stands for tonic's client TLS configuration without the `tls` feature; no value exists.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum ClientTlsConfig {}

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
