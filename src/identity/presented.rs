//! The names a certificate presents: its DNS and URI subject alternative names, read with
//! `x509-parser` (webpki does not expose URI SANs), and a bounded summary of them for logs
//! and errors.
//!
//! Only names are read, never a key or a signature: what a summary shows is what the
//! server announced to anyone who connected. The certificate may come from anyone (it is
//! read for the summary before its chain is known to be good), so the summary shows at
//! most [`SHOWN`] names, each shortened and with control characters escaped.

use std::fmt::Write as _;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

use crate::error::Error;

/// Names a summary shows at most; it counts the others.
pub(crate) const SHOWN: usize = 4;

/// See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Presented {
    /// DNS SANs.
    pub dns: Vec<String>,
    /// URI SANs.
    pub uris: Vec<String>,
    /// Other SANs (IP addresses, e-mail addresses, ...), counted.
    pub others: usize,
    /// The subject's common name, shown only when there is no SAN.
    pub common_name: Option<String>,
}

impl Presented {
    /// The names of the DER certificate `der`, or `None` when it does not parse.
    pub fn read(der: &[u8]) -> Option<Presented> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let mut presented = Presented {
            common_name: cert
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_owned),
            ..Presented::default()
        };
        // A certificate with two SAN extensions is malformed: it presents no name.
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(dns) => presented.dns.push((*dns).to_owned()),
                    GeneralName::URI(uri) => presented.uris.push((*uri).to_owned()),
                    _ => presented.others += 1,
                }
            }
        }
        Some(presented)
    }

    /// A summary for a log line or an error: `DNS:a, URI:spiffe://td/app/a`, at most
    /// [`SHOWN`] names and the count of the others; `no subject alternative name` (with the
    /// subject's common name, if any) when there is none.
    pub fn summary(&self) -> String {
        let names = self
            .dns
            .iter()
            .map(|d| ("DNS", d))
            .chain(self.uris.iter().map(|u| ("URI", u)));
        let mut text = String::new();
        for (kind, name) in names.take(SHOWN) {
            if !text.is_empty() {
                text.push_str(", ");
            }
            let _ = write!(text, "{kind}:{}", clean(name));
        }
        let named = self.dns.len() + self.uris.len();
        let more = named - named.min(SHOWN) + self.others;
        if text.is_empty() {
            text.push_str("no subject alternative name");
            if self.others > 0 {
                let _ = write!(text, " but {} other SAN(s)", self.others);
            }
            if let Some(cn) = &self.common_name {
                let _ = write!(text, " (subject CN={})", clean(cn));
            }
        } else if more > 0 {
            let _ = write!(text, " and {more} more");
        }
        text
    }
}

/// A summary of the names of `der`, or what to say when it does not parse.
pub(crate) fn summary_of(der: &[u8]) -> String {
    Presented::read(der).map_or_else(|| "an unreadable certificate".into(), |p| p.summary())
}

/// A name as it may be shown: control characters escaped, shortened.
fn clean(name: &str) -> String {
    Error::shorten(&name.escape_debug().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_bounded_and_say_when_there_is_no_name() {
        let many = Presented {
            dns: (0..10).map(|i| format!("n{i}")).collect(),
            uris: vec!["spiffe://td/app/x".into()],
            others: 1,
            common_name: None,
        };
        assert_eq!(many.summary(), "DNS:n0, DNS:n1, DNS:n2, DNS:n3 and 8 more");
        let none = Presented {
            common_name: Some("shop\u{7}".into()),
            ..Presented::default()
        };
        assert_eq!(
            none.summary(),
            "no subject alternative name (subject CN=shop\\u{7})"
        );
        let long = Presented {
            uris: vec!["u".repeat(1000)],
            ..Presented::default()
        };
        assert!(long.summary().len() < 120, "{}", long.summary());
        assert_eq!(summary_of(b"garbage"), "an unreadable certificate");
    }
}
