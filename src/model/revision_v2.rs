//! The revision rule `sha256-v2`: a framed, unambiguous encoding of what an app instance
//! exports, hashed with SHA-256.
//!
//! `sha256-v1` concatenates its fields without framing, so two different configurations can
//! share one text: one param `a` = `1, b=2` reads like two params `a` = `1` and `b` = `2`, and
//! port `10` with path `foo` reads like port `1` with path `0foo`. It also leaves "ascending"
//! undefined (UTF-8 byte order and Java's UTF-16 order differ on characters outside the Basic
//! Multilingual Plane). `sha256-v2` fixes both.
//!
//! # Encoding
//!
//! The canonical bytes are built from two primitives:
//!
//! * `u32(n)`: `n` as 4 bytes, big-endian;
//! * `str(s)`: `u32(byte length of s in UTF-8)` followed by the UTF-8 bytes of `s`.
//!
//! ```text
//! canonical := str("sha256-v2") str(app) u32(service count) service*
//! service   := str(name) str(group) str(version) str(protocol) u32(port) str(path)
//!              u32(param count) (str(key) str(value))*
//! ```
//!
//! * Services appear in ascending order of their match key, params in ascending order of
//!   their key; "ascending" is the lexicographic order of the keys' UTF-8 bytes (which is also
//!   the order of Unicode code points).
//! * Empty fields are written as `str("")` (four zero bytes); the port is the service's own
//!   port, `0` when it has none.
//! * Volatile params ([`crate::model::revision::VOLATILE_PARAMS`]) are left out and not
//!   counted, as in `sha256-v1`, so a restart with the same exports keeps its revision.
//! * The leading rule name separates the two rules: no `sha256-v2` encoding is also a
//!   `sha256-v1` text.
//!
//! Every field carries its length and every list its count, so the bytes decode back to
//! exactly one (app, services) value: two different exports never share canonical bytes.
//!
//! The revision is the lowercase hex SHA-256 (64 characters) of the canonical bytes; an app
//! exporting nothing has revision `0`, as under `sha256-v1`. Test vectors (inputs, canonical
//! bytes in hex, revision) are published with the project's tests, in
//! `tests/data/revision_v2.json`.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::model::ServiceInfo;
use crate::model::revision::{EMPTY_REVISION, is_volatile_param};

/// The name of this revision rule, declared by instances under
/// [`crate::model::keys::REVISION_RULE`].
pub const REVISION_RULE_SHA256_V2: &str = "sha256-v2";

/// The canonical bytes the revision hashes, or `None` for an empty service set.
///
/// `services` maps match keys to service infos; a `BTreeMap` of `String`s iterates in UTF-8
/// byte order, the order the rule asks for.
pub fn canonical_bytes<S: AsRef<ServiceInfo>>(
    app: &str,
    services: &BTreeMap<String, S>,
) -> Option<Vec<u8>> {
    if services.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(64 + services.len() * 128);
    put_str(&mut out, REVISION_RULE_SHA256_V2);
    put_str(&mut out, app);
    put_count(&mut out, services.len());
    for service in services.values() {
        let service = service.as_ref();
        put_str(&mut out, &service.name);
        put_str(&mut out, &service.group);
        put_str(&mut out, &service.version);
        put_str(&mut out, &service.protocol);
        out.extend_from_slice(&u32::from(service.port).to_be_bytes());
        put_str(&mut out, &service.path);
        let params: Vec<_> = service
            .params
            .iter()
            .filter(|(k, _)| !is_volatile_param(k))
            .collect();
        put_count(&mut out, params.len());
        for (key, value) in params {
            put_str(&mut out, key);
            put_str(&mut out, value);
        }
    }
    Some(out)
}

/// The `sha256-v2` revision of an app's services (keyed by match key).
pub fn revision<S: AsRef<ServiceInfo>>(app: &str, services: &BTreeMap<String, S>) -> String {
    match canonical_bytes(app, services) {
        None => EMPTY_REVISION.to_owned(),
        Some(bytes) => hex::encode(Sha256::digest(&bytes)),
    }
}

/// Appends `u32(n)`. Lengths and counts over `u32::MAX` cannot occur within the size limits;
/// they are saturated rather than wrapped, so they could never alias a smaller value.
fn put_count(out: &mut Vec<u8>, n: usize) {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_be_bytes());
}

/// Appends `str(s)`.
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_count(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(service: ServiceInfo) -> BTreeMap<String, std::sync::Arc<ServiceInfo>> {
        [(service.match_key(), std::sync::Arc::new(service))].into()
    }

    #[test]
    fn fields_are_framed() {
        let bytes = canonical_bytes("a", &one(ServiceInfo::new("x.Y").with_port(7))).unwrap();
        let mut expected = Vec::new();
        for s in ["sha256-v2", "a"] {
            expected.extend_from_slice(&(s.len() as u32).to_be_bytes());
            expected.extend_from_slice(s.as_bytes());
        }
        expected.extend_from_slice(&1u32.to_be_bytes());
        for s in ["x.Y", "", "", "tri"] {
            expected.extend_from_slice(&(s.len() as u32).to_be_bytes());
            expected.extend_from_slice(s.as_bytes());
        }
        expected.extend_from_slice(&7u32.to_be_bytes());
        expected.extend_from_slice(&3u32.to_be_bytes());
        expected.extend_from_slice(b"x.Y");
        expected.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn volatile_params_and_empty_sets() {
        let plain = one(ServiceInfo::new("x.Y"));
        let with_pid = one(ServiceInfo::new("x.Y").with_param("pid", "42"));
        assert_eq!(revision("a", &plain), revision("a", &with_pid));
        assert_eq!(
            revision::<std::sync::Arc<ServiceInfo>>("a", &BTreeMap::new()),
            "0"
        );
        assert_eq!(revision("a", &plain).len(), 64);
    }
}
