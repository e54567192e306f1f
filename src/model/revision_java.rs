//! Dubbo Java 3.2+'s revision rule, recomputed from served metadata so that a consumer can
//! check a Java provider's revision.
//!
//! Dubbo Java 3.2 and 3.3 compute a revision in `MetadataInfo#calAndGetRevision`
//! (module `dubbo-metadata-api`, class `org.apache.dubbo.metadata.MetadataInfo`): the app name
//! followed by `ServiceInfo#toDescString()` of every service, in the order of a `TreeMap` over
//! the match keys, where `toDescString()` is `matchKey + port + path + new TreeMap<>(params)`
//! and a `TreeMap`'s text is `{k1=v1, k2=v2}`. `RevisionResolver.calRevision` hashes that
//! string's UTF-8 bytes with MD5 and writes 32 lowercase hex digits; no services gives `0`.
//!
//! The text is the `sha256-v1` text with three differences: the hash (MD5), the order (a Java
//! `TreeMap` of `String`s compares UTF-16 code units, which differs from UTF-8 byte order for
//! characters outside the Basic Multilingual Plane), and the params (all served params enter
//! the text; Java's params filter chose them before they were served).
//!
//! Other Dubbo rules cannot be recomputed from served metadata: Dubbo Java 3.0 and 3.1 hashed
//! the method signatures of the interface classes, and dubbo-go hashes strings built from
//! method names. A revision that does not match this rule is therefore not evidence of
//! tampering, only of another rule.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use md5::{Digest, Md5};

use crate::model::ServiceInfo;
use crate::model::revision::{EMPTY_REVISION, text_of};

/// A name for this rule in counters and messages. Instances do not declare it: it is the rule
/// checked when an instance declares none.
pub const REVISION_RULE_JAVA_MD5: &str = "java-md5";

/// Java's `String.compareTo`: lexicographic over UTF-16 code units.
pub fn java_string_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The text Dubbo Java hashes, or `None` for an empty service set.
pub fn canonical_text<S: AsRef<ServiceInfo>>(
    app: &str,
    services: &BTreeMap<String, S>,
) -> Option<String> {
    let mut ordered: Vec<(&String, &ServiceInfo)> =
        services.iter().map(|(k, s)| (k, s.as_ref())).collect();
    ordered.sort_by(|a, b| java_string_order(a.0, b.0));
    text_of(app, ordered, |service| {
        let mut params: Vec<(&String, &String)> = service.params.iter().collect();
        params.sort_by(|a, b| java_string_order(a.0, b.0));
        params
    })
}

/// The revision Dubbo Java 3.2+ gives these services.
pub fn revision<S: AsRef<ServiceInfo>>(app: &str, services: &BTreeMap<String, S>) -> String {
    match canonical_text(app, services) {
        None => EMPTY_REVISION.to_owned(),
        Some(text) => hex::encode(Md5::digest(text.as_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_order_differs_from_byte_order_outside_the_bmp() {
        // U+FF61 is one UTF-16 unit 0xFF61; U+10000 is the pair 0xD800 0xDC00.
        let (bmp, astral) = ("\u{FF61}", "\u{10000}");
        assert_eq!(bmp.cmp(astral), Ordering::Less);
        assert_eq!(java_string_order(bmp, astral), Ordering::Greater);
    }

    #[test]
    fn text_keeps_every_param_in_java_order() {
        let service = ServiceInfo::new("x.Y")
            .with_param("\u{10000}", "astral")
            .with_param("\u{FF61}", "bmp")
            .with_param("pid", "1");
        let services = BTreeMap::from([(service.match_key(), std::sync::Arc::new(service))]);
        assert_eq!(
            canonical_text("a", &services).unwrap(),
            "ax.Y:tri0x.Y{pid=1, \u{10000}=astral, \u{FF61}=bmp}"
        );
        assert_eq!(revision("a", &services).len(), 32);
    }

    #[test]
    fn no_services_have_no_text_and_the_empty_revision() {
        let none: BTreeMap<String, std::sync::Arc<ServiceInfo>> = BTreeMap::new();
        assert_eq!(canonical_text("a", &none), None);
        assert_eq!(revision("a", &none), EMPTY_REVISION);
    }
}
