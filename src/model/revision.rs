//! The revision rule `sha256-v1`: a hash of what an app instance exports.
//!
//! Lowercase hex SHA-256 of a canonical text: the app name, then for each service in
//! ascending match-key order `matchKey + port + path + params`, params sorted by key and
//! written `{k1=v1, k2=v2}`. No services: revision `0`. Volatile parameters never enter it, so
//! a restart with the same exports yields the same revision; the host never enters it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::model::ServiceInfo;

/// The revision of an instance that exports nothing.
pub const EMPTY_REVISION: &str = "0";

/// The name of this revision rule, declared by instances under
/// [`crate::model::keys::REVISION_RULE`] so that consumers can verify revisions.
pub const REVISION_RULE_SHA256_V1: &str = "sha256-v1";

/// Parameters that change from run to run and so are not service parameters.
pub const VOLATILE_PARAMS: &[&str] = &[
    "pid",
    "timestamp",
    "heartbeat.timeout",
    "ipv6",
    "bind.ip",
    "bind.port",
    "anyhost",
    "register.ip",
    "qos.port",
    "qos.enable",
];

/// Whether a parameter is volatile (see [`VOLATILE_PARAMS`]).
pub fn is_volatile_param(key: &str) -> bool {
    VOLATILE_PARAMS.contains(&key)
}

/// The canonical text the revision hashes, or `None` for an empty service set.
///
/// `services` maps match keys to service infos; a `BTreeMap` iterates in the ascending
/// match-key order the rule asks for.
pub fn canonical_text<S: AsRef<ServiceInfo>>(
    app: &str,
    services: &BTreeMap<String, S>,
) -> Option<String> {
    text_of(
        app,
        services.iter().map(|(k, s)| (k, s.as_ref())),
        |service| service.params.iter().filter(|(k, _)| !is_volatile_param(k)),
    )
}

/// The text of `app` and `services` (match key, service), `None` for none: each service
/// as `{matchKey}{port}{path}{params}`, with `params` of a service as it gives them. What
/// the `sha256-v1` and Dubbo Java's MD5 rules share; each orders services and params in
/// its own way.
pub(crate) fn text_of<'a, P>(
    app: &str,
    services: impl IntoIterator<Item = (&'a String, &'a ServiceInfo)>,
    params: impl Fn(&'a ServiceInfo) -> P,
) -> Option<String>
where
    P: IntoIterator<Item = (&'a String, &'a String)>,
{
    let mut services = services.into_iter().peekable();
    services.peek()?;
    let mut text = String::from(app);
    for (match_key, service) in services {
        text.push_str(match_key);
        let _ = write!(text, "{}", service.port);
        text.push_str(&service.path);
        push_params(&mut text, params(service));
    }
    Some(text)
}

/// Appends params as `{k1=v1, k2=v2}`, in the order given: the params part of a service's
/// text.
fn push_params<'a>(text: &mut String, params: impl IntoIterator<Item = (&'a String, &'a String)>) {
    text.push('{');
    for (i, (k, v)) in params.into_iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(k);
        text.push('=');
        text.push_str(v);
    }
    text.push('}');
}

/// The `sha256-v1` revision of an app's services (keyed by match key).
pub fn revision<S: AsRef<ServiceInfo>>(app: &str, services: &BTreeMap<String, S>) -> String {
    match canonical_text(app, services) {
        None => EMPTY_REVISION.to_owned(),
        Some(text) => hex::encode(Sha256::digest(text.as_bytes())),
    }
}
