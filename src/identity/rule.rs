//! [`IdentityRule`]: which name the certificate of an app's server must carry (pure).

use std::fmt;

use crate::error::{Error, Result};

/// The placeholder a rule's template replaces with the app name.
const APP: &str = "{app}";
/// Longest suffix, trust domain or template accepted, in bytes.
const MAX_RULE_LEN: usize = 255;

/// Which name in a server's certificate says that the server is an app.
///
/// * [`IdentityRule::dns`]: a DNS subject alternative name (SAN) equal to the app name,
///   e.g. `shop-orders`; [`IdentityRule::dns_suffix`]: `{app}.{suffix}`, e.g.
///   `shop-orders.svc.example`. DNS names compare without regard to ASCII case (two apps
///   that differ only in case share an identity), and a wildcard SAN (`*.svc.example`)
///   names no app: it would name all of them.
/// * [`IdentityRule::spiffe`]: a URI SAN `spiffe://{trust-domain}/app/{app}`;
///   [`IdentityRule::uri_template`]: a URI SAN of any template holding `{app}`, e.g.
///   `spiffe://example.org/ns/prod/sa/{app}`. URIs compare exactly.
///
/// The subject's common name is never read: names are SANs, as RFC 6125 asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityRule(Kind);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A DNS SAN `{app}`, or `{app}.{suffix}`.
    Dns { suffix: Option<String> },
    /// A URI SAN: the template with `{app}` replaced.
    Uri { template: String },
}

/// The name one app's certificate must carry under a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expected {
    /// A DNS SAN, lowercase.
    Dns(String),
    /// A URI SAN.
    Uri(String),
}

impl IdentityRule {
    /// A DNS SAN equal to the app name: the certificate of `shop-orders` names
    /// `DNS:shop-orders`.
    pub fn dns() -> Self {
        IdentityRule(Kind::Dns { suffix: None })
    }

    /// A DNS SAN `{app}.{suffix}`: with suffix `svc.example`, the certificate of
    /// `shop-orders` names `DNS:shop-orders.svc.example`. Fails on a suffix that is no DNS
    /// name.
    pub fn dns_suffix(suffix: impl Into<String>) -> Result<Self> {
        let suffix = suffix.into();
        let suffix = suffix.strip_prefix('.').unwrap_or(&suffix).to_owned();
        if suffix.len() > MAX_RULE_LEN
            || rustls::pki_types::DnsName::try_from(suffix.as_str()).is_err()
        {
            return Err(invalid("DNS suffix", &suffix, "is not a DNS name"));
        }
        Ok(IdentityRule(Kind::Dns {
            suffix: Some(suffix.to_ascii_lowercase()),
        }))
    }

    /// A URI SAN `spiffe://{trust_domain}/app/{app}` (a SPIFFE ID). Fails on a trust
    /// domain SPIFFE does not allow (it holds lowercase letters, digits, `.`, `-` and `_`
    /// only).
    pub fn spiffe(trust_domain: impl Into<String>) -> Result<Self> {
        let domain = trust_domain.into();
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c);
        if domain.is_empty() || domain.len() > MAX_RULE_LEN || !domain.chars().all(allowed) {
            return Err(invalid(
                "SPIFFE trust domain",
                &domain,
                "holds other characters than lowercase letters, digits, '.', '-' and '_'",
            ));
        }
        Ok(IdentityRule(Kind::Uri {
            template: format!("spiffe://{domain}/app/{APP}"),
        }))
    }

    /// A URI SAN made from `template` by replacing every `{app}` with the app name, e.g.
    /// `spiffe://example.org/ns/prod/sa/{app}`. Fails on a template without `{app}`, without
    /// a scheme (`spiffe:`, `urn:`, ...), or with whitespace or control characters.
    pub fn uri_template(template: impl Into<String>) -> Result<Self> {
        let template = template.into();
        let scheme = template.split_once(':').map(|(scheme, _)| scheme);
        let scheme_ok = scheme.is_some_and(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
        let reason = if !template.contains(APP) {
            Some("has no {app}")
        } else if !scheme_ok {
            Some("has no URI scheme")
        } else if template
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
        {
            Some("contains whitespace or a control character")
        } else if template.len() > MAX_RULE_LEN {
            Some("is too long")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(invalid("URI template", &template, reason)),
            None => Ok(IdentityRule(Kind::Uri { template })),
        }
    }

    /// The SAN the certificate of `app` must carry under this rule, as `DNS:…` or `URI:…`,
    /// e.g. `DNS:shop-orders`: what to put in the certificates of the app's servers. Fails
    /// when the rule asks for a DNS name and the app's name cannot be one.
    pub fn name_for(&self, app: &str) -> Result<String> {
        self.expected(app).map(|e| e.to_string())
    }

    /// The name the certificate of `app` must carry.
    pub(crate) fn expected(&self, app: &str) -> Result<Expected> {
        match &self.0 {
            Kind::Dns { suffix } => {
                let name = match suffix {
                    Some(suffix) => format!("{app}.{suffix}"),
                    None => app.to_owned(),
                };
                if rustls::pki_types::DnsName::try_from(name.as_str()).is_err() {
                    return Err(invalid(
                        "app name",
                        app,
                        "cannot be a DNS name, which the identity rule asks for",
                    ));
                }
                Ok(Expected::Dns(name.to_ascii_lowercase()))
            }
            Kind::Uri { template } => Ok(Expected::Uri(template.replace(APP, app))),
        }
    }
}

impl fmt::Display for IdentityRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Dns { suffix: None } => write!(f, "DNS SAN {APP}"),
            Kind::Dns {
                suffix: Some(suffix),
            } => write!(f, "DNS SAN {APP}.{suffix}"),
            Kind::Uri { template } => write!(f, "URI SAN {template}"),
        }
    }
}

impl Expected {
    /// Whether a certificate presenting these DNS and URI SANs carries the name: an equal
    /// DNS SAN (ASCII case aside; a wildcard is no match), or an equal URI SAN.
    pub(crate) fn is_among<'a>(
        &self,
        dns: impl IntoIterator<Item = &'a str>,
        uris: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        match self {
            Expected::Dns(name) => dns.into_iter().any(|d| d.eq_ignore_ascii_case(name)),
            Expected::Uri(uri) => uris.into_iter().any(|u| u == uri),
        }
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Dns(name) => write!(f, "DNS:{name}"),
            Expected::Uri(uri) => write!(f, "URI:{uri}"),
        }
    }
}

fn invalid(what: &str, value: &str, reason: &str) -> Error {
    Error::config(format!(
        "identity rule: {what} {:?} {reason}",
        Error::shorten(value)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_names_the_app_its_own_way() {
        let app = "shop-orders";
        assert_eq!(
            IdentityRule::dns().name_for(app).unwrap(),
            "DNS:shop-orders"
        );
        let suffixed = IdentityRule::dns_suffix(".svc.Example").unwrap();
        assert_eq!(
            suffixed.name_for(app).unwrap(),
            "DNS:shop-orders.svc.example"
        );
        let spiffe = IdentityRule::spiffe("example.org").unwrap();
        assert_eq!(
            spiffe.name_for(app).unwrap(),
            "URI:spiffe://example.org/app/shop-orders"
        );
        let template = IdentityRule::uri_template("spiffe://td/ns/prod/sa/{app}").unwrap();
        assert_eq!(
            template.name_for(app).unwrap(),
            "URI:spiffe://td/ns/prod/sa/shop-orders"
        );
        assert_eq!(template.to_string(), "URI SAN spiffe://td/ns/prod/sa/{app}");
    }

    #[test]
    fn bad_rules_and_apps_that_cannot_be_dns_names_are_refused() {
        assert!(IdentityRule::dns_suffix("not a name").is_err());
        assert!(IdentityRule::spiffe("Example.org").is_err(), "uppercase");
        assert!(IdentityRule::spiffe("").is_err());
        assert!(
            IdentityRule::uri_template("spiffe://td/app").is_err(),
            "no {{app}}"
        );
        assert!(IdentityRule::uri_template("{app}").is_err(), "no scheme");
        assert!(IdentityRule::uri_template("spiffe://td/ {app}").is_err());
        let error = IdentityRule::dns().name_for("bad*name").unwrap_err();
        assert!(
            error.to_string().contains("cannot be a DNS name"),
            "{error}"
        );
    }

    #[test]
    fn dns_names_match_exactly_apart_from_case_and_never_by_wildcard() {
        let expected = IdentityRule::dns_suffix("svc")
            .unwrap()
            .expected("Shop")
            .unwrap();
        assert!(expected.is_among(["other.svc", "SHOP.svc"], []));
        assert!(
            !expected.is_among(["*.svc"], []),
            "a wildcard names every app"
        );
        assert!(!expected.is_among([], ["shop.svc"]), "a URI is no DNS name");
        let uri = IdentityRule::spiffe("td")
            .unwrap()
            .expected("shop")
            .unwrap();
        assert!(uri.is_among([], ["spiffe://td/app/shop"]));
        assert!(!uri.is_among(["spiffe://td/app/shop"], ["spiffe://td/app/shop2"]));
    }
}
