//! [`IdentityCheck`]: the consumer's configuration of the check (the rule, the CAs it
//! trusts, how often a rejected endpoint is checked again), and the tonic endpoint of one
//! server dialled with the check.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tonic::transport::{ClientTlsConfig, Endpoint as TonicEndpoint};

use super::rule::IdentityRule;
use super::verifier::{AppVerifier, OnReject, TrustAnchors};
use crate::error::{Error, Result};

/// Checks that the server of each endpoint presents a certificate naming the app the
/// endpoint was resolved for, so that whoever can write the registry cannot send an app's
/// calls (or its metadata fetches) elsewhere. Set on
/// [`ResolverBuilder::identity`](crate::consumer::ResolverBuilder::identity); the module
/// docs of [`crate::identity`] say what it protects and how a rejected endpoint is treated.
///
/// It verifies the whole chain itself, against the CA certificates given here (the
/// `ClientTlsConfig` of the resolver must then name no CA: tonic refuses both at once),
/// for server authentication, then the name [`IdentityRule`] asks for. Cheap to clone.
#[derive(Clone)]
pub struct IdentityCheck {
    rule: IdentityRule,
    trust: Arc<TrustAnchors>,
    recheck_interval: Duration,
}

impl std::fmt::Debug for IdentityCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityCheck")
            .field("rule", &self.rule)
            .field("trust_anchors", &self.trust.roots.len())
            .field("recheck_interval", &self.recheck_interval)
            .finish()
    }
}

impl IdentityCheck {
    /// A check by `rule`, trusting the CA certificates in `ca_pem` (one or more PEM
    /// `CERTIFICATE` blocks). Fails when there is none or one does not parse.
    pub fn new(rule: IdentityRule, ca_pem: impl AsRef<[u8]>) -> Result<Self> {
        let unusable = |reason: String| Error::config(format!("identity check: {reason}"));
        let certificates = CertificateDer::pem_slice_iter(ca_pem.as_ref())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| unusable(format!("the CA certificates do not parse: {e}")).caused_by(e))?;
        if certificates.is_empty() {
            return Err(unusable("no CA certificate given".into()));
        }
        let roots = certificates
            .iter()
            .map(|der| webpki::anchor_from_trusted_cert(der).map(|a| a.to_owned()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| unusable(format!("a CA certificate is not usable: {e}")).caused_by(e))?;
        let algorithms = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        Ok(IdentityCheck {
            rule,
            trust: Arc::new(TrustAnchors { roots, algorithms }),
            recheck_interval: Duration::from_secs(5),
        })
    }

    /// Sets how often an endpoint the check rejected is checked again, with a TLS handshake
    /// (default 5 s, at least 10 ms).
    pub fn recheck_interval(mut self, interval: Duration) -> Self {
        self.recheck_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// The rule certificates are checked by.
    pub fn rule(&self) -> &IdentityRule {
        &self.rule
    }

    /// How often a rejected endpoint is checked again.
    pub(crate) fn recheck_every(&self) -> Duration {
        self.recheck_interval
    }

    /// `endpoint` (dialling `address`, resolved for `app`) speaking TLS with `tls` and this
    /// check: every handshake verifies the server's certificate, and each refusal is handed
    /// to `on_reject` before the handshake fails.
    pub(crate) fn apply(
        &self,
        endpoint: TonicEndpoint,
        tls: &ClientTlsConfig,
        app: &str,
        address: &str,
        on_reject: OnReject,
    ) -> std::result::Result<TonicEndpoint, tonic::transport::Error> {
        let verifier = AppVerifier {
            trust: self.trust.clone(),
            app: app.to_owned(),
            address: address.to_owned(),
            expected: self.rule.expected(app).map_err(|e| e.to_string()),
            on_reject,
        };
        endpoint.tls_config_with_verifier(tls.clone(), Arc::new(verifier))
    }
}
