//! What one endpoint says for routing: its service's parameters and its instance's start
//! time, parsed once when the endpoint joins a channel, as Dubbo Java 3.3 reads them.
//!
//! Java reads these from the provider URL: `dubbo.tag` (`TagStateRouter`), `disabled` and
//! `enabled` (`ServiceDiscoveryRegistryDirectory`: `disabled` when present, else `enabled`,
//! each true only when it reads `true` in any case, as `Boolean.parseBoolean`), `weight`
//! and `{method}.weight` (`URL.getMethodParameter`, default 100), `warmup` (default
//! 600,000 ms) and `timestamp` (`AbstractLoadBalance.getWeight`). A number that does not
//! parse is read as its default here and kept as a [`BadParam`] for `explain`, where Java
//! would throw from every call that weighs the provider.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::weight::{DEFAULT_WARMUP_MS, DEFAULT_WEIGHT};
use crate::model::Endpoint;

/// The parameter of a provider's static tag.
pub const TAG_KEY: &str = "dubbo.tag";
/// The parameter of a request's force flag (and of a consumer's default one).
pub const FORCE_TAG_KEY: &str = "dubbo.force.tag";
const DISABLED_KEY: &str = "disabled";
const ENABLED_KEY: &str = "enabled";
const WEIGHT_KEY: &str = "weight";
const WARMUP_KEY: &str = "warmup";
/// The instance metadata key of a provider's start time (ms since the epoch).
pub const TIMESTAMP_KEY: &str = "timestamp";
/// The suffix of a method's own weight (`{method}.weight`).
const METHOD_WEIGHT_SUFFIX: &str = ".weight";

/// A parameter whose value does not parse, read as its default (Java throws instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadParam {
    /// The parameter's key.
    pub key: String,
    /// Its value as published.
    pub value: String,
}

/// What one endpoint says for routing. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteParams {
    /// The provider's static tag; `None` when absent or empty (an empty tag is no tag).
    pub tag: Option<Arc<str>>,
    /// Whether the provider takes calls (`disabled`, else `enabled`; default `true`).
    pub enabled: bool,
    /// The service's `weight` as published (default 100; a negative one weighs 0).
    pub weight: i32,
    /// Per-method weights (`{method}.weight`), which replace `weight` for that method.
    pub method_weights: BTreeMap<Box<str>, i32>,
    /// The warm-up period in ms (`warmup`, default 600,000).
    pub warmup_ms: i32,
    /// The instance's start time in ms since the epoch (`timestamp`), 0 when unknown: no
    /// warm-up then, as in Java.
    pub timestamp_ms: i64,
    /// Values that did not parse, read as their defaults.
    pub bad: Vec<BadParam>,
}

impl Default for RouteParams {
    fn default() -> Self {
        RouteParams {
            tag: None,
            enabled: true,
            weight: DEFAULT_WEIGHT,
            method_weights: BTreeMap::new(),
            warmup_ms: DEFAULT_WARMUP_MS,
            timestamp_ms: 0,
            bad: Vec::new(),
        }
    }
}

impl RouteParams {
    /// What `endpoint` says: its service's parameters and its instance's start time (the
    /// record's, else a `timestamp` service parameter, as Java looks in both).
    pub fn of(endpoint: &Endpoint) -> RouteParams {
        RouteParams::of_overridden(endpoint, endpoint.params())
    }

    /// What `endpoint` says when its service parameters read `overridden` (configurators
    /// applied).
    pub fn of_overridden(
        endpoint: &Endpoint,
        overridden: &BTreeMap<String, String>,
    ) -> RouteParams {
        let mut params = RouteParams::from_params(overridden);
        let started = match endpoint.timestamp {
            0 => endpoint
                .params()
                .get(TIMESTAMP_KEY)
                .and_then(|t| t.parse().ok())
                .unwrap_or(0),
            known => known,
        };
        params.timestamp_ms = i64::try_from(started).unwrap_or(i64::MAX);
        params
    }

    /// What service parameters say (no start time).
    pub fn from_params(params: &BTreeMap<String, String>) -> RouteParams {
        let mut out = RouteParams {
            tag: params
                .get(TAG_KEY)
                .filter(|t| !t.is_empty())
                .map(|t| Arc::from(t.as_str())),
            ..RouteParams::default()
        };
        out.enabled = match params.get(DISABLED_KEY) {
            Some(disabled) => !java_bool(disabled),
            None => params.get(ENABLED_KEY).is_none_or(|e| java_bool(e)),
        };
        out.weight = out.number(params, WEIGHT_KEY, DEFAULT_WEIGHT);
        out.warmup_ms = out.number(params, WARMUP_KEY, DEFAULT_WARMUP_MS);
        for (key, value) in params {
            let Some(method) = key.strip_suffix(METHOD_WEIGHT_SUFFIX) else {
                continue;
            };
            if method.is_empty() || method.contains('.') {
                continue;
            }
            let weight = out.number(params, key, DEFAULT_WEIGHT);
            if !value.is_empty() {
                out.method_weights.insert(method.into(), weight);
            }
        }
        out
    }

    /// The published weight for calls of `method` (its own, else the service's).
    pub fn weight_for(&self, method: Option<&str>) -> i32 {
        method
            .and_then(|m| self.method_weights.get(m))
            .copied()
            .unwrap_or(self.weight)
    }

    /// Whether the weight can differ per method.
    pub fn has_method_weights(&self) -> bool {
        !self.method_weights.is_empty()
    }

    /// `params[key]` as a Java `int` (an empty or absent value is the default; one that
    /// does not parse is the default and noted).
    fn number(&mut self, params: &BTreeMap<String, String>, key: &str, default: i32) -> i32 {
        match params.get(key).map(String::as_str) {
            None | Some("") => default,
            Some(value) => value.parse().unwrap_or_else(|_| {
                self.bad.push(BadParam {
                    key: key.to_owned(),
                    value: value.chars().take(64).collect(),
                });
                default
            }),
        }
    }
}

/// Java's `Boolean.parseBoolean`: `true` in any case is true, anything else false.
pub(crate) fn java_bool(value: &str) -> bool {
    value.eq_ignore_ascii_case("true")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> RouteParams {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RouteParams::from_params(&params)
    }

    #[test]
    fn nothing_published_is_an_enabled_untagged_provider_of_weight_100() {
        let params = of(&[]);
        assert_eq!(params, RouteParams::default());
        assert_eq!(params.weight_for(Some("SayHello")), 100);
        assert_eq!(params.warmup_ms, 600_000);
    }

    #[test]
    fn disabled_wins_over_enabled_and_reads_as_java_reads_booleans() {
        assert!(!of(&[("disabled", "true")]).enabled);
        assert!(!of(&[("disabled", "TRUE"), ("enabled", "true")]).enabled);
        assert!(of(&[("disabled", "false"), ("enabled", "false")]).enabled);
        // parseBoolean: anything but "true" is false.
        assert!(of(&[("disabled", "yes")]).enabled);
        assert!(!of(&[("enabled", "false")]).enabled);
        assert!(!of(&[("enabled", "nonsense")]).enabled);
        assert!(of(&[("enabled", "True")]).enabled);
    }

    #[test]
    fn an_empty_tag_is_no_tag() {
        assert_eq!(of(&[("dubbo.tag", "")]).tag, None);
        assert_eq!(of(&[("dubbo.tag", "gray")]).tag.as_deref(), Some("gray"));
    }

    #[test]
    fn weights_parse_as_java_ints_and_bad_ones_are_defaults_kept_as_findings() {
        let params = of(&[("weight", "300"), ("warmup", "60000")]);
        assert_eq!((params.weight, params.warmup_ms), (300, 60_000));
        assert!(params.bad.is_empty());
        assert_eq!(of(&[("weight", "+7")]).weight, 7);
        assert_eq!(of(&[("weight", "-5")]).weight, -5);
        assert_eq!(of(&[("weight", "")]).weight, 100);
        let bad = of(&[("weight", "heavy"), ("warmup", "99999999999")]);
        assert_eq!((bad.weight, bad.warmup_ms), (100, 600_000));
        assert_eq!(
            bad.bad.iter().map(|b| b.key.as_str()).collect::<Vec<_>>(),
            ["weight", "warmup"]
        );
        assert_eq!(
            of(&[("weight", " 3")]).weight,
            100,
            "no whitespace, as Java"
        );
    }

    #[test]
    fn a_method_weight_replaces_the_service_weight_for_that_method() {
        let params = of(&[
            ("weight", "50"),
            ("SayHello.weight", "400"),
            ("a.b.weight", "9"),
        ]);
        assert_eq!(params.weight_for(Some("SayHello")), 400);
        assert_eq!(params.weight_for(Some("Other")), 50);
        assert_eq!(params.weight_for(None), 50);
        assert!(params.has_method_weights());
        assert_eq!(
            params.method_weights.len(),
            1,
            "a dotted method is no method"
        );
    }
}
