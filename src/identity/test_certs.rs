//! Certificates made for the unit tests: a CA and leaves it signs, with rcgen.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SanType,
};
use rustls::pki_types::CertificateDer;

/// A throwaway CA.
pub struct Ca(CertifiedIssuer<'static, KeyPair>);

/// A leaf: its DER, PEM and key PEM.
pub struct Leaf {
    pub der: CertificateDer<'static>,
    pub pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new() -> Self {
        Ca::named("test CA")
    }

    /// A CA whose subject is `name`.
    pub fn named(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    pub fn pem(&self) -> String {
        self.0.pem()
    }

    /// A leaf with DNS SANs `dns` and URI SANs `uris`.
    pub fn leaf(&self, dns: &[&str], uris: &[&str]) -> Leaf {
        self.leaf_with(dns, uris, |_| {})
    }

    /// A leaf as [`Ca::leaf`], its parameters changed by `change` first.
    pub fn leaf_with(
        &self,
        dns: &[&str],
        uris: &[&str],
        change: impl FnOnce(&mut CertificateParams),
    ) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, "leaf");
        let dns = dns
            .iter()
            .map(|d| SanType::DnsName((*d).try_into().unwrap()));
        let uris = uris.iter().map(|u| SanType::URI((*u).try_into().unwrap()));
        params.subject_alt_names = dns.chain(uris).collect();
        change(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        Leaf {
            der: cert.der().clone(),
            pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// Client authentication only: no server may present it.
pub fn client_only(params: &mut CertificateParams) {
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
}

/// Valid in 2000 only.
pub fn expired(params: &mut CertificateParams) {
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    params.not_after = rcgen::date_time_ymd(2000, 12, 31);
}
