//! The verifier of one dialled server: the whole chain of its certificate (webpki, against
//! the identity check's own trust anchors, for server authentication) and then the name
//! its app's rule asks for. A rustls [`ServerCertVerifier`], handed to tonic with
//! `Endpoint::tls_config_with_verifier`.
//!
//! The dialled host is not checked: the registry chose it, and the registry is what the
//! check does not trust. What counts is that the certificate names the app the endpoint was
//! resolved for. Every refusal is handed to the verifier's `on_reject` as an
//! [`Error::IdentityRejected`] before the handshake fails.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, TrustAnchor, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

use super::presented::{Presented, summary_of};
use super::rule::Expected;
use crate::error::Error;

/// What is told of each refused certificate.
pub(crate) type OnReject = Arc<dyn Fn(Error) + Send + Sync>;

/// The CA certificates an identity check trusts, and the signature algorithms it accepts
/// (the ring provider's).
#[derive(Debug)]
pub(crate) struct TrustAnchors {
    pub roots: Vec<TrustAnchor<'static>>,
    pub algorithms: WebPkiSupportedAlgorithms,
}

/// Why a certificate is refused.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Its chain does not verify (webpki's reason).
    Chain(webpki::Error),
    /// Its chain verifies but it does not name the app.
    Name,
    /// The rule cannot name the app (its name is no DNS name).
    Unnameable,
}

impl Refusal {
    /// What it says of the certificate, for the error and the log line: the rest of a
    /// sentence that begins "its certificate" ([`Error::IdentityRejected`]).
    pub fn cause(&self) -> String {
        use webpki::Error as W;
        match self {
            Refusal::Name => "does not name the app".into(),
            Refusal::Unnameable => {
                "cannot be checked, as the identity rule cannot name this app".into()
            }
            Refusal::Chain(W::UnknownIssuer) => "is not issued by a trusted CA".into(),
            Refusal::Chain(W::CertExpired { .. }) => "has expired".into(),
            Refusal::Chain(W::InvalidCertValidity) => {
                "has a validity period that ends before it begins".into()
            }
            Refusal::Chain(W::CertNotValidYet { .. }) => "is not valid yet".into(),
            Refusal::Chain(W::RequiredEkuNotFoundContext(_)) => {
                "is not for server authentication".into()
            }
            Refusal::Chain(W::InvalidSignatureForPublicKey) => {
                "is not signed by a trusted CA's key".into()
            }
            Refusal::Chain(W::CaUsedAsEndEntity) => "is a CA certificate".into(),
            Refusal::Chain(other) => format!("does not verify ({other})"),
        }
    }

    /// The TLS error the handshake fails with.
    fn tls_error(self) -> rustls::Error {
        use webpki::Error as W;
        let error = match self {
            Refusal::Name | Refusal::Unnameable => CertificateError::NotValidForName,
            Refusal::Chain(W::UnknownIssuer) => CertificateError::UnknownIssuer,
            Refusal::Chain(W::CertExpired { .. } | W::InvalidCertValidity) => {
                CertificateError::Expired
            }
            Refusal::Chain(W::CertNotValidYet { .. }) => CertificateError::NotValidYet,
            Refusal::Chain(W::InvalidSignatureForPublicKey) => CertificateError::BadSignature,
            Refusal::Chain(W::BadDer | W::BadDerTime) => CertificateError::BadEncoding,
            Refusal::Chain(other) => CertificateError::Other(OtherError(Arc::new(other))),
        };
        error.into()
    }
}

/// Checks `end_entity` (with the `intermediates` the server sent) at `now`: its chain to
/// one of `trust`'s anchors, for server authentication, then that it names `expected`.
pub(crate) fn verify(
    trust: &TrustAnchors,
    expected: &Expected,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
) -> Result<(), Refusal> {
    let cert = webpki::EndEntityCert::try_from(end_entity).map_err(Refusal::Chain)?;
    cert.verify_for_usage(
        trust.algorithms.all,
        &trust.roots,
        intermediates,
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(Refusal::Chain)?;
    names(&cert, expected, end_entity)
}

/// Whether `cert` (whose DER is `der`) names `expected`. A DNS name must be valid for the
/// certificate as webpki reads it and be one of its DNS SANs exactly (no wildcard); a URI
/// must be one of its URI SANs.
pub(crate) fn names(
    cert: &webpki::EndEntityCert<'_>,
    expected: &Expected,
    der: &[u8],
) -> Result<(), Refusal> {
    if let Expected::Dns(name) = expected {
        let name = ServerName::try_from(name.as_str()).map_err(|_| Refusal::Unnameable)?;
        cert.verify_is_valid_for_subject_name(&name)
            .map_err(|_| Refusal::Name)?;
    }
    let presented = Presented::read(der).ok_or(Refusal::Name)?;
    let dns = presented.dns.iter().map(String::as_str);
    let uris = presented.uris.iter().map(String::as_str);
    if expected.is_among(dns, uris) {
        Ok(())
    } else {
        Err(Refusal::Name)
    }
}

/// The verifier of one dialled server; see the module docs.
pub(crate) struct AppVerifier {
    pub trust: Arc<TrustAnchors>,
    /// The app the server was resolved for.
    pub app: String,
    /// Where it was dialled, for the error.
    pub address: String,
    /// The name its certificate must carry, or why the rule cannot name the app.
    pub expected: Result<Expected, String>,
    pub on_reject: OnReject,
}

impl std::fmt::Debug for AppVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppVerifier")
            .field("app", &self.app)
            .field("address", &self.address)
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

impl AppVerifier {
    fn refuse(&self, refusal: Refusal, end_entity: &CertificateDer<'_>) -> rustls::Error {
        let expected = match &self.expected {
            Ok(expected) => expected.to_string(),
            Err(why) => why.clone(),
        };
        (self.on_reject)(Error::IdentityRejected {
            address: self.address.clone(),
            app: self.app.clone(),
            expected,
            presented: summary_of(end_entity),
            cause: refusal.cause(),
        });
        refusal.tls_error()
    }
}

impl ServerCertVerifier for AppVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked = match &self.expected {
            Ok(expected) => verify(&self.trust, expected, end_entity, intermediates, now),
            Err(_) => Err(Refusal::Unnameable),
        };
        match checked {
            Ok(()) => Ok(ServerCertVerified::assertion()),
            Err(refusal) => Err(self.refuse(refusal, end_entity)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.trust.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.trust.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.trust.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::IdentityRule;
    use crate::identity::test_certs::{Ca, client_only, expired};

    fn trust(ca: &Ca) -> TrustAnchors {
        let der = CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap();
        TrustAnchors {
            roots: vec![webpki::anchor_from_trusted_cert(&der).unwrap().to_owned()],
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }

    fn check(trust: &TrustAnchors, rule: &IdentityRule, cert: &CertificateDer<'_>) -> String {
        let expected = rule.expected("pay").unwrap();
        match verify(trust, &expected, cert, &[], UnixTime::now()) {
            Ok(()) => "ok".into(),
            Err(refusal) => refusal.cause(),
        }
    }

    use rustls::pki_types::pem::PemObject as _;

    #[test]
    fn only_a_certificate_of_the_cas_naming_the_app_for_servers_passes() {
        let ca = Ca::new();
        let trust = trust(&ca);
        let dns = IdentityRule::dns();
        assert_eq!(check(&trust, &dns, &ca.leaf(&["pay"], &[]).der), "ok");
        assert_eq!(check(&trust, &dns, &ca.leaf(&["PAY", "x"], &[]).der), "ok");
        let named_other = ca.leaf(&["orders"], &[]).der;
        assert_eq!(check(&trust, &dns, &named_other), "does not name the app");
        let no_san = ca.leaf(&[], &[]).der;
        assert_eq!(check(&trust, &dns, &no_san), "does not name the app");
        let elsewhere = Ca::named("another CA").leaf(&["pay"], &[]).der;
        assert_eq!(
            check(&trust, &dns, &elsewhere),
            "is not issued by a trusted CA"
        );
        let forged = Ca::new().leaf(&["pay"], &[]).der;
        let cause = check(&trust, &dns, &forged);
        assert_eq!(
            cause, "is not signed by a trusted CA's key",
            "same name, other key"
        );
        let old = ca.leaf_with(&["pay"], &[], expired).der;
        assert_eq!(check(&trust, &dns, &old), "has expired");
        let client = ca.leaf_with(&["pay"], &[], client_only).der;
        assert_eq!(
            check(&trust, &dns, &client),
            "is not for server authentication"
        );
        assert!(check(&trust, &dns, &CertificateDer::from(vec![1, 2, 3])).contains("verify"));
    }

    #[test]
    fn suffixes_and_uris_name_the_app_and_wildcards_do_not() {
        let ca = Ca::new();
        let trust = trust(&ca);
        let suffix = IdentityRule::dns_suffix("svc").unwrap();
        assert_eq!(
            check(&trust, &suffix, &ca.leaf(&["pay.svc"], &[]).der),
            "ok"
        );
        let wildcard = ca.leaf(&["*.svc"], &[]).der;
        assert_eq!(check(&trust, &suffix, &wildcard), "does not name the app");
        let spiffe = IdentityRule::spiffe("td").unwrap();
        let id = ca.leaf(&[], &["spiffe://td/app/pay"]).der;
        assert_eq!(check(&trust, &spiffe, &id), "ok");
        assert_eq!(
            check(&trust, &IdentityRule::dns(), &id),
            "does not name the app"
        );
        let other = ca.leaf(&["pay"], &["spiffe://td/app/orders"]).der;
        assert_eq!(check(&trust, &spiffe, &other), "does not name the app");
    }

    #[test]
    fn a_refusal_names_the_app_expected_and_what_was_presented() {
        let ca = Ca::new();
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = told.clone();
        let verifier = AppVerifier {
            trust: Arc::new(trust(&ca)),
            app: "pay".into(),
            address: "10.0.0.1:1".into(),
            expected: IdentityRule::dns()
                .expected("pay")
                .map_err(|e| e.to_string()),
            on_reject: Arc::new(move |e: Error| sink.lock().unwrap().push(e.to_string())),
        };
        let name = ServerName::try_from("10.0.0.1").unwrap();
        let rogue = ca.leaf(&["orders"], &[]).der;
        let refused = verifier.verify_server_cert(&rogue, &[], &name, &[], UnixTime::now());
        assert_eq!(
            refused.unwrap_err(),
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName)
        );
        let honest = ca.leaf(&["pay"], &[]).der;
        assert!(
            verifier
                .verify_server_cert(&honest, &[], &name, &[], UnixTime::now())
                .is_ok()
        );
        let told = told.lock().unwrap();
        assert_eq!(told.len(), 1);
        assert_eq!(
            told[0],
            "the server at 10.0.0.1:1 is refused as app \"pay\": its certificate does not \
             name the app; expected DNS:pay, presented DNS:orders"
        );
    }

    #[test]
    fn every_cause_ends_the_sentence_its_certificate_begins() {
        use webpki::Error as W;
        let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1));
        let causes = [
            Refusal::Name,
            Refusal::Unnameable,
            Refusal::Chain(W::UnknownIssuer),
            Refusal::Chain(W::CertExpired {
                time,
                not_after: time,
            }),
            Refusal::Chain(W::InvalidCertValidity),
            Refusal::Chain(W::CertNotValidYet {
                time,
                not_before: time,
            }),
            Refusal::Chain(W::InvalidSignatureForPublicKey),
            Refusal::Chain(W::CaUsedAsEndEntity),
            Refusal::Chain(W::BadDer),
        ]
        .map(|refusal| refusal.cause());
        for cause in &causes {
            let verb = cause.split(' ').next().unwrap();
            assert!(
                ["does", "is", "has", "cannot"].contains(&verb),
                "\"its certificate {cause}\""
            );
        }
        assert_eq!(causes[3], "has expired");
        assert_eq!(
            causes[1],
            "cannot be checked, as the identity rule cannot name this app"
        );
    }
}
