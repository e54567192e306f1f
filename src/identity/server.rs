//! [`ServerIdentity`]: the provider's side of the check, the certificate its servers present
//! for the identity of its app.

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Identity, ServerTlsConfig};

use super::presented::summary_of;
use super::rule::IdentityRule;
use super::verifier::{Refusal, names};
use crate::error::{Error, Result};

/// The certificate (and its key) a provider's servers present, and the rule by which it
/// names the provider's app: the provider's half of [`IdentityCheck`](super::IdentityCheck).
///
/// [`ServerIdentity::tls_config`] is the TLS configuration for the tonic servers of the
/// app (its own RPC server, and the MetadataService listener, which
/// [`ProviderBuilder::identity`](crate::provider::ProviderBuilder::identity) configures
/// by itself); [`ServerIdentity::check`] is what `Provider::start` and `Provider::serve`
/// run first, so that a provider whose certificate would be rejected by every consumer
/// fails at once, saying so, instead of registering.
///
/// Its `Debug` form shows the rule and the names of the certificate, never the key.
#[derive(Clone)]
pub struct ServerIdentity {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    leaf: CertificateDer<'static>,
    rule: IdentityRule,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("rule", &self.rule)
            .field("presents", &summary_of(&self.leaf))
            .finish_non_exhaustive()
    }
}

impl ServerIdentity {
    /// The certificate chain `cert_pem` (the app's certificate first, then any
    /// intermediates) with its private key `key_pem`, naming its app by `rule`. Fails when
    /// the chain holds no certificate, or it or the key does not parse.
    pub fn from_pem(
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
        rule: IdentityRule,
    ) -> Result<Self> {
        let leaf = CertificateDer::pem_slice_iter(cert_pem.as_ref())
            .next()
            .ok_or_else(|| Error::config("server identity: no certificate given"))?
            .map_err(|e| {
                Error::config(format!(
                    "server identity: the certificate does not parse: {e}"
                ))
                .caused_by(e)
            })?;
        // The parser's complaint is left out: it may quote the key's text.
        PrivateKeyDer::from_pem_slice(key_pem.as_ref()).map_err(|_| {
            Error::config("server identity: the key does not parse as a PEM private key")
        })?;
        Ok(ServerIdentity {
            cert_pem: cert_pem.as_ref().to_vec(),
            key_pem: key_pem.as_ref().to_vec(),
            leaf,
            rule,
        })
    }

    /// The rule the certificate names its app by.
    pub fn rule(&self) -> &IdentityRule {
        &self.rule
    }

    /// A tonic server TLS configuration presenting this certificate. Add client
    /// authentication to it as to any `ServerTlsConfig` (`client_ca_root`).
    pub fn tls_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(Identity::from_pem(&self.cert_pem, &self.key_pem))
    }

    /// Checks that the certificate names `app` under the rule, as a consumer checking
    /// identity will: fails with [`Error::IdentityMismatch`] (saying what it names instead)
    /// when it does not, or with [`Error::Config`] when the rule cannot name the app.
    pub fn check(&self, app: &str) -> Result<()> {
        let expected = self.rule.expected(app)?;
        let mismatch = || Error::IdentityMismatch {
            app: app.to_owned(),
            expected: expected.to_string(),
            presented: summary_of(&self.leaf),
        };
        let cert = webpki::EndEntityCert::try_from(&self.leaf).map_err(|_| mismatch())?;
        match names(&cert, &expected, &self.leaf) {
            Ok(()) => Ok(()),
            Err(Refusal::Unnameable) => Err(Error::config(format!(
                "server identity: {app:?} cannot be named by {}",
                self.rule
            ))),
            Err(_) => Err(mismatch()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_certs::Ca;

    #[test]
    fn a_provider_certificate_must_name_its_app() {
        let ca = Ca::new();
        let leaf = ca.leaf(&["shop-orders"], &[]);
        let identity =
            ServerIdentity::from_pem(&leaf.pem, &leaf.key_pem, IdentityRule::dns()).unwrap();
        identity.check("shop-orders").unwrap();
        let error = identity.check("shop-payments").unwrap_err();
        assert!(matches!(error, Error::IdentityMismatch { .. }));
        let text = error.to_string();
        assert!(
            text.contains("shop-payments") && text.contains("presents DNS:shop-orders"),
            "{text}"
        );
        assert!(!format!("{identity:?}").contains("PRIVATE KEY"));
        assert!(matches!(
            identity.check("bad*name"),
            Err(Error::Config { .. })
        ));
        assert!(ServerIdentity::from_pem("", "", IdentityRule::dns()).is_err());
        let no_key = ServerIdentity::from_pem(&leaf.pem, "", IdentityRule::dns());
        assert!(no_key.unwrap_err().to_string().contains("key"));
    }
}
