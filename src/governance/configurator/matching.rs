//! One override URL matched against one provider URL as Java's `AbstractConfigurator`
//! does on either side: the v2.7 conditions carried in its parameters, the v3.0 `match`,
//! and the parameters it sets when it applies.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::Mapping;

use super::ANYHOST;
use crate::governance::rule_yaml::mapping;
use crate::governance::string_match::{AddressMatch, ListStringMatch, ParamMatch};

/// Keys Java uses to decide whether an override applies, never applied themselves.
const CONDITION_KEYS: [&str; 11] = [
    "category",
    "check",
    "dynamic",
    "enabled",
    "group",
    "version",
    "application",
    "side",
    "configVersion",
    "compatible_config",
    "interfaces",
];

/// One override URL: where it applies and what it sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Override {
    /// The URL's host (`0.0.0.0` for every host).
    pub(super) host: String,
    /// The URL's port when it comes from the legacy list of URLs, which Java matches by the
    /// pre-v2.7 rules (`AbstractConfigurator.configureDeprecated`); `None` for a document's
    /// items.
    pub(super) legacy_port: Option<i32>,
    /// Whether it sets only parameters the URL lacks (`absent://`, Java's
    /// `AbsentConfigurator`) rather than overriding them.
    pub(super) absent: bool,
    /// The URL's path: the interface, or `*`.
    pub(super) path: String,
    /// The URL's parameters (conditions and values together, as Java keeps them).
    pub(super) params: BTreeMap<String, String>,
    /// The v3.0 conditions.
    pub(super) condition: Option<ConditionMatch>,
}

/// Java's v3.0 `ConditionMatch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ConditionMatch {
    pub(super) address: Option<AddressMatch>,
    pub(super) provider_address: Option<AddressMatch>,
    pub(super) service: Option<ListStringMatch>,
    pub(super) app: Option<ListStringMatch>,
    pub(super) param: Option<Vec<ParamMatch>>,
}

/// What an override is matched against: a provider URL as Java's configurator sees it on
/// one side.
pub(super) struct Target<'a> {
    /// The host an item's address must name: the consumer's own on the consumer side.
    pub(super) match_host: &'a str,
    pub(super) host: &'a str,
    pub(super) port: u16,
    /// `consumer` or `provider`.
    pub(super) side: &'static str,
    /// The application Java reads from the URL (the consumer's on the consumer side).
    pub(super) app: &'a str,
    pub(super) interface: &'a str,
    /// The provider's parameters as configured so far.
    pub(super) params: &'a BTreeMap<String, String>,
}

impl Target<'_> {
    /// Java's `url.getParameter(key)` for this URL.
    fn param(&self, key: &str) -> Option<&str> {
        match key {
            "application" => Some(self.app).filter(|a| !a.is_empty()),
            "side" => Some(self.side),
            "interface" => Some(self.interface),
            _ => self.params.get(key).map(String::as_str),
        }
    }

    fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn service_key(&self) -> String {
        service_key(
            self.interface,
            self.params.get("group").map(String::as_str),
            self.params.get("version").map(String::as_str),
        )
    }
}

/// Java's `URL.buildKey`: `group/interface:version`, each part only when non-empty.
fn service_key(interface: &str, group: Option<&str>, version: Option<&str>) -> String {
    let mut key = String::new();
    if let Some(g) = group.filter(|g| !g.is_empty()) {
        key.push_str(g);
        key.push('/');
    }
    key.push_str(interface);
    if let Some(v) = version.filter(|v| !v.is_empty()) {
        key.push(':');
        key.push_str(v);
    }
    key
}

impl Override {
    /// Java's `AbstractConfigurator.configure` for a URL on `target.side`: the parameters
    /// to set when this override applies.
    pub(super) fn changes_for(&self, target: &Target<'_>) -> Option<Vec<(String, String)>> {
        let param = |k: &str| self.params.get(k).map(String::as_str);
        let enabled =
            param("enabled").is_none_or(|e| e.is_empty() || e.eq_ignore_ascii_case("true"));
        if !enabled || !self.host_matches(target) {
            return None;
        }
        if !self.v27_conditions_hold(target) {
            return None;
        }
        let mut condition_keys: BTreeSet<&str> = CONDITION_KEYS.into_iter().collect();
        if param("configVersion").is_some_and(|v| v.starts_with("v3.0")) {
            if self.condition.as_ref().is_some_and(|m| !m.is_match(target)) {
                return None;
            }
        } else {
            for (k, v) in &self.params {
                let tilde = k.strip_prefix('~');
                if tilde.is_some() || k == "application" || k == "side" {
                    if tilde.is_some() {
                        condition_keys.insert(k);
                    }
                    // The legacy form's `side` too reads the target's side: a real Java 3.3
                    // consumer applies `side=consumer` override URLs (measured).
                    let current = target.param(tilde.unwrap_or(k));
                    if v != "*" && Some(v.as_str()) != current {
                        return None;
                    }
                }
            }
        }
        Some(
            self.params
                .iter()
                .filter(|(k, _)| !condition_keys.contains(k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// Java's side and host checks. From v2.7 (`configure`, `configureIfMatch`): the
    /// item's `side` must be the target's, and its host `0.0.0.0` or the target's match
    /// host. For the legacy list of URLs (`configureDeprecated`): a URL with a port applies
    /// to the providers on that port, its host `0.0.0.0` or theirs; one without applies
    /// only from `0.0.0.0` (Java configures the provider URL, whose side is `provider`, so
    /// its consumer-host branch is never taken).
    fn host_matches(&self, target: &Target<'_>) -> bool {
        match self.legacy_port {
            None => {
                self.params.get("side").map(String::as_str) == Some(target.side)
                    && (self.host == ANYHOST || self.host == target.match_host)
            }
            Some(0) => self.host == ANYHOST,
            Some(port) => {
                port == i32::from(target.port) && (self.host == ANYHOST || self.host == target.host)
            }
        }
    }

    /// Java's `isV27ConditionMatchOrUnset`: provider addresses, application, service.
    fn v27_conditions_hold(&self, target: &Target<'_>) -> bool {
        if let Some(providers) = self
            .params
            .get("providerAddresses")
            .filter(|p| !p.is_empty())
        {
            let address = target.address();
            let any_port = format!("{ANYHOST}:{}", target.port);
            let matched = providers.split(',').any(|a| {
                a == address
                    || a == ANYHOST
                    || a == "0.0.0.0:*"
                    || a == any_port
                    || a == target.host
            });
            if !matched {
                return false;
            }
        }
        if let Some(app) = self.params.get("application").filter(|a| !a.is_empty())
            && app != "*"
            && Some(app.as_str()) != target.param("application")
        {
            return false;
        }
        let interface = self
            .params
            .get("interface")
            .filter(|i| !i.is_empty())
            .unwrap_or(&self.path);
        let key = service_key(
            interface,
            self.params.get("group").map(String::as_str),
            self.params.get("version").map(String::as_str),
        );
        key == "*" || key == target.service_key()
    }
}

impl ConditionMatch {
    pub(super) fn parse(key: &str, map: &Mapping) -> crate::error::Result<ConditionMatch> {
        let address = |name| {
            mapping(key, map, name)?
                .map(|m| AddressMatch::parse(key, m))
                .transpose()
        };
        let list = |name| {
            mapping(key, map, name)?
                .map(|m| ListStringMatch::parse(key, m))
                .transpose()
        };
        Ok(ConditionMatch {
            address: address("address")?,
            provider_address: address("providerAddress")?,
            service: list("service")?,
            app: list("app")?,
            param: ParamMatch::parse_list(key, map, "param")?,
        })
    }

    pub(super) fn is_match(&self, target: &Target<'_>) -> bool {
        self.address
            .as_ref()
            .is_none_or(|m| m.is_match(Some(target.match_host)))
            && self
                .provider_address
                .as_ref()
                .is_none_or(|m| m.is_match(Some(&target.address())))
            && self
                .service
                .as_ref()
                .is_none_or(|m| m.is_match(Some(&target.service_key())))
            && self
                .app
                .as_ref()
                .is_none_or(|m| m.is_match(target.param("application")))
            && self.param.as_deref().is_none_or(|params| {
                params
                    .iter()
                    .all(|p| p.is_match(p.key.as_deref().and_then(|k| target.param(k))))
            })
    }
}
