//! Override rules ("configurators", `{app}.configurators` and
//! `{interface}:{version}:{group}.configurators`) as Dubbo Java 3.3 parses and applies
//! them (`ConfigParser`, `AbstractConfigurator`, `OverrideConfigurator`).
//!
//! # The document
//!
//! ```yaml
//! configVersion: v3.0          # v2.7 (admin 0.6), v3.0 (new admin); absent reads as v2.7
//! scope: application           # or service (the default for anything else)
//! key: shop-web                # the app, or the service `group/interface:version`
//! enabled: true                # the whole document, default true
//! configs:
//!   - side: consumer           # consumer or provider; an item without side never applies
//!     addresses: [10.0.0.9]    # the host it applies on; none (or 0.0.0.0) is every host
//!     providerAddresses: ["10.0.0.7:20880"]   # consumer side: which providers
//!     services: [helloworld.Greeter]          # application scope: which services
//!     applications: [shop-web]                # service scope: which applications
//!     parameters: {timeout: 3000, weight: 200}
//!     match:                   # v3.0 only
//!       address: {cird: 10.0.0.0/8}
//!       providerAddress: {exact: "10.0.0.7:20880"}
//!       service: {oneof: [{exact: helloworld.Greeter}]}
//!       app: {oneof: [{exact: shop-web}]}
//!       param: [{key: env, value: {exact: gray}}]
//! ```
//!
//! Java turns each item into one override URL per address (and per service, in application
//! scope; per application, in service scope), then sorts a document's URLs by host (as
//! text, so `0.0.0.0` before specific hosts, which are applied later and win) and then by a
//! `priority` parameter. What this model keeps of that:
//!
//! * **Enabled.** An item is enabled by the *document's* `enabled` unless it has a `type`
//!   other than `general`, when its own `enabled` decides (absent reads as false). So an
//!   item's `enabled: false` without a type changes nothing, as in Java.
//! * **Side and host.** An item applies on the consumer side when its `side` is `consumer`
//!   and its address's host is the consumer's own host or `0.0.0.0`; on the provider side
//!   when its `side` is `provider` and the host is the provider's or `0.0.0.0`. The port of
//!   an address does not count here.
//! * **providerAddresses** (consumer side): one must be the provider's `host:port`, its host,
//!   `0.0.0.0`, `0.0.0.0:*` or `0.0.0.0:{port}`. A provider-side item without them is
//!   narrowed by its own `addresses` the same way.
//! * **applications / key.** An application-scope document applies only where the
//!   application is its `key`; a service-scope item with `applications` only for those.
//!   The application compared is the consumer's on the consumer side (Java reads the
//!   consumer's own `application` first) and the provider's on the provider side.
//! * **services / key.** The item's service (`*` for none in application scope, else the
//!   key) must be `*` or the provider's service key `group/interface:version`.
//! * **v3.0 `match`**, all of it must hold: `address` against the consumer's host (provider
//!   side: the provider's), `providerAddress` against the provider's `host:port`, `service`
//!   against its service key, `app` against the application above, `param` against the
//!   provider's (current) parameters. Before v3.0, parameters named `~key` must equal the
//!   provider's `key` (and are not applied), and `application`/`side` parameters must match.
//! * **What is applied.** The item's parameters and `providerAddresses`, later items
//!   overriding earlier ones, never the keys Java keeps for conditions (`category`,
//!   `check`, `dynamic`, `enabled`, `group`, `version`, `application`, `side`,
//!   `configVersion`, `compatible_config`, `interfaces`) nor those it strips for safety
//!   (`router`, `rule`, `runtime`, `type`, `accesslog.fixed.path`). So a configurator can
//!   set `disabled`, `weight`, `timeout`, `loadbalance`, `dubbo.tag` and any other key, but
//!   not `enabled`: Java consumes that one as the rule's own switch. On the consumer side
//!   an empty value changes nothing (Java reads an empty override as absent).
//!
//! Java applies the consumer application's own document (`{consumerApp}.configurators`)
//! and then the reference's service document, to every provider URL; on the provider side
//! its application's then its service's. [`configure_for_consumer`] and
//! [`configure_for_provider`] apply several documents in that order.
//!
//! Deliberate differences, all refusing the document (the previous one stays): the legacy
//! form (a JSON list of `override://` URLs), a document with no items (Java keeps its
//! previous configurators), a `match` that does not parse (Java drops it and applies the
//! item unconditionally), a `configVersion` other than none, `v2.7` or `v3.0…`, a `regex`
//! match, a non-integer `priority`. Where Java reads a parameter on the consumer side it
//! prefers the consumer's own value for most keys; this model reads the provider's, except
//! `application`. Parameter values are taken literally, where Java would build and re-parse
//! a URL (a value holding `&` or `=` would be cut there).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_yaml_ng::{Mapping, Value};

use super::configurator_item::ConfiguratorItem;
use super::facts::ProviderFacts;
use super::rule_yaml::{
    boolean, field, flow, kind, load, mapping, mappings, rule_error, scalar_text, string,
    string_list,
};
use super::string_match::{AddressMatch, ListStringMatch, ParamMatch};

/// The suffix of a configurator document's key in the config centre.
pub const CONFIGURATORS_SUFFIX: &str = ".configurators";

/// The host of an address that stands for every host.
const ANYHOST: &str = "0.0.0.0";

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

/// Keys Java strips from every override for safety.
const SECURITY_KEYS: [&str; 5] = ["accesslog.fixed.path", "router", "rule", "runtime", "type"];

/// One configurator document: its override items in the order Java applies them. See the
/// module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configurators {
    key: String,
    items: Vec<Override>,
    /// The document's own fields and items as written, to show it.
    config_version: Option<String>,
    scope: Option<String>,
    rule_key: Option<String>,
    enabled: bool,
    configs: Vec<ConfiguratorItem>,
}

/// One override URL: where it applies and what it sets.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Override {
    /// The URL's host (`0.0.0.0` for every host).
    host: String,
    /// The URL's path: the interface, or `*`.
    path: String,
    /// The URL's parameters (conditions and values together, as Java keeps them).
    params: BTreeMap<String, String>,
    /// The v3.0 conditions.
    condition: Option<ConditionMatch>,
}

/// Java's v3.0 `ConditionMatch`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ConditionMatch {
    address: Option<AddressMatch>,
    provider_address: Option<AddressMatch>,
    service: Option<ListStringMatch>,
    app: Option<ListStringMatch>,
    param: Option<Vec<ParamMatch>>,
}

/// What an override is matched against: a provider URL as Java's configurator sees it on
/// one side.
struct Target<'a> {
    /// The host an item's address must name: the consumer's own on the consumer side.
    match_host: &'a str,
    host: &'a str,
    port: u16,
    /// `consumer` or `provider`.
    side: &'static str,
    /// The application Java reads from the URL (the consumer's on the consumer side).
    app: &'a str,
    interface: &'a str,
    /// The provider's parameters as configured so far.
    params: &'a BTreeMap<String, String>,
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

/// Java's `String.compareTo`: UTF-16 code units in order.
fn java_compare(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

impl Configurators {
    /// The config-centre key of `app`'s document, or of a service's
    /// (`{interface}:{version}:{group}`, as the caller builds it).
    pub fn key_for(app_or_service: &str) -> String {
        format!("{app_or_service}{CONFIGURATORS_SUFFIX}")
    }

    /// Parses the document stored under `key`. Errors ([`crate::Error::Rule`]) are the
    /// cases where Java's parser throws and keeps the previous configurators (not YAML, not
    /// a mapping, no `configs`, an item without `parameters`, a service-scope document
    /// without `key`, a field of the wrong type, over
    /// [`MAX_RULE_BYTES`](super::MAX_RULE_BYTES)) plus the forms refused here (see the
    /// module docs).
    pub fn parse(key: &str, yaml: &str) -> crate::Result<Configurators> {
        if yaml.trim_start().starts_with('[') {
            return Err(rule_error(
                key,
                "the legacy list of override URLs is not supported; write configs",
            ));
        }
        let map = load(key, yaml)?;
        let version = string(key, &map, "configVersion")?;
        match version.as_deref() {
            None | Some("v2.7") => {}
            Some(v) if v.starts_with("v3.0") => {}
            Some(v) => {
                return Err(rule_error(
                    key,
                    format!(
                        "unknown configVersion {:?} (expected v2.7 or v3.0)",
                        crate::Error::shorten(v)
                    ),
                ));
            }
        }
        let scope = string(key, &map, "scope")?;
        let doc = Document {
            version: version.clone().unwrap_or_else(|| "null".to_owned()),
            app_scope: scope.as_deref() == Some("application"),
            key: string(key, &map, "key")?,
            enabled: boolean(&map, "enabled").unwrap_or(true),
        };
        let items = match field(&map, "configs") {
            Some(Value::Sequence(_)) => mappings(key, &map, "configs")?.unwrap_or_default(),
            _ => return Err(rule_error(key, "no configs list")),
        };
        if items.is_empty() {
            return Err(rule_error(
                key,
                "configs is empty (Java keeps the previous configurators)",
            ));
        }
        let items = items
            .into_iter()
            .map(|m| Item::parse(key, m))
            .collect::<crate::Result<Vec<_>>>()?;
        let mut overrides = Vec::new();
        for item in &items {
            doc.overrides(key, item, &mut overrides)?;
        }
        let mut keyed = overrides
            .into_iter()
            .map(|o| {
                let priority = match o.params.get("priority").map(String::as_str) {
                    None | Some("") => 0,
                    Some(p) => p.parse::<i32>().map_err(|_| {
                        rule_error(key, "the priority parameter must be an integer")
                    })?,
                };
                Ok((priority, o))
            })
            .collect::<crate::Result<Vec<_>>>()?;
        keyed.sort_by(|(pa, a), (pb, b)| java_compare(&a.host, &b.host).then(pa.cmp(pb)));
        Ok(Configurators {
            key: key.to_owned(),
            items: keyed.into_iter().map(|(_, o)| o).collect(),
            config_version: version,
            scope,
            rule_key: doc.key.clone(),
            enabled: doc.enabled,
            configs: items.into_iter().map(|item| item.written).collect(),
        })
    }

    /// The key the document was stored under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its `configVersion` as written (`v2.7`, `v3.0`; absent reads as v2.7).
    pub fn config_version(&self) -> Option<&str> {
        self.config_version.as_deref()
    }

    /// Its `scope` as written (`application`, else service scope).
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// Its own `key` field: the application, or the service `group/interface:version`.
    pub fn rule_key(&self) -> Option<&str> {
        self.rule_key.as_deref()
    }

    /// The document's `enabled` (default true).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Its `configs` items as written, in order, to show what each targets and sets.
    pub fn configs(&self) -> &[ConfiguratorItem] {
        &self.configs
    }

    /// How many override items the document holds (one per address and service or
    /// application of each `configs` item).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the document holds no override items (never, for a parsed one).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The consumer-side items that apply to `provider` for a consumer (`consumer_app`, its
    /// own `consumer_host`), applied in order to a copy of its params; `None` when none
    /// applies (no copy).
    pub fn apply_for_consumer(
        &self,
        consumer_app: &str,
        consumer_host: &str,
        provider: &ProviderFacts<'_>,
    ) -> Option<BTreeMap<String, String>> {
        configure_for_consumer(&[self], consumer_app, consumer_host, provider)
    }

    /// The provider-side items that apply to a provider itself (its `app`, `host`, `port`,
    /// `interface`), applied to `params`; whether any applied.
    pub fn apply_for_provider(
        &self,
        app: &str,
        host: &str,
        port: u16,
        interface: &str,
        params: &mut BTreeMap<String, String>,
    ) -> bool {
        configure_for_provider(&[self], app, host, port, interface, params)
    }

    /// Applies the items that match `target` to `working`, a copy of `target.params` made
    /// when the first one applies; later items see the parameters set by earlier ones.
    fn configure(&self, target: &Target<'_>, working: &mut Option<BTreeMap<String, String>>) {
        for item in &self.items {
            let current = working.as_ref().unwrap_or(target.params);
            let Some(changes) = item.changes_for(&Target {
                params: current,
                ..*target
            }) else {
                continue;
            };
            let keep_empty = target.side == "provider";
            let params = working.get_or_insert_with(|| target.params.clone());
            for (k, v) in changes {
                if keep_empty || !v.is_empty() {
                    params.insert(k, v);
                }
            }
        }
    }
}

/// Applies the consumer-side items of `documents` in order (Java: the consumer app's
/// `{app}.configurators`, then the reference's service document) to a copy of `provider`'s
/// params; `None` when no item applies.
pub fn configure_for_consumer(
    documents: &[&Configurators],
    consumer_app: &str,
    consumer_host: &str,
    provider: &ProviderFacts<'_>,
) -> Option<BTreeMap<String, String>> {
    let target = Target {
        match_host: consumer_host,
        host: provider.host,
        port: provider.port,
        side: "consumer",
        app: consumer_app,
        interface: provider.interface,
        params: provider.params,
    };
    let mut working = None;
    for doc in documents {
        doc.configure(&target, &mut working);
    }
    working
}

/// Applies the provider-side items of `documents` in order (Java: the provider app's
/// document, then the service's) to `params` of a provider (`app`, `host`, `port`,
/// `interface`); whether any applied.
pub fn configure_for_provider(
    documents: &[&Configurators],
    app: &str,
    host: &str,
    port: u16,
    interface: &str,
    params: &mut BTreeMap<String, String>,
) -> bool {
    let mut working = None;
    {
        let target = Target {
            match_host: host,
            host,
            port,
            side: "provider",
            app,
            interface,
            params,
        };
        for doc in documents {
            doc.configure(&target, &mut working);
        }
    }
    match working {
        Some(w) => {
            *params = w;
            true
        }
        None => false,
    }
}

impl Override {
    /// Java's `AbstractConfigurator.configure` for a URL on `target.side`: the parameters
    /// to set when this override applies.
    fn changes_for(&self, target: &Target<'_>) -> Option<Vec<(String, String)>> {
        let param = |k: &str| self.params.get(k).map(String::as_str);
        let enabled =
            param("enabled").is_none_or(|e| e.is_empty() || e.eq_ignore_ascii_case("true"));
        if !enabled || param("side") != Some(target.side) {
            return None;
        }
        if self.host != ANYHOST && self.host != target.match_host {
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
                    if v != "*" && Some(v.as_str()) != target.param(tilde.unwrap_or(k)) {
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
    fn parse(key: &str, map: &Mapping) -> crate::Result<ConditionMatch> {
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

    fn is_match(&self, target: &Target<'_>) -> bool {
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

/// The document-level fields every item's URLs carry.
struct Document {
    version: String,
    app_scope: bool,
    key: Option<String>,
    enabled: bool,
}

/// One `configs` item as Java's `ConfigItem` reads it.
struct Item {
    /// The item as written (also kept in the document, to show it).
    written: ConfiguratorItem,
    condition: Option<ConditionMatch>,
}

impl Item {
    fn parse(key: &str, map: &Mapping) -> crate::Result<Item> {
        let parameters = match field(map, "parameters") {
            Some(Value::Mapping(params)) => params
                .iter()
                .map(|(k, v)| {
                    let text = |value: &Value| {
                        scalar_text(value)
                            .filter(|_| !value.is_null())
                            .ok_or_else(|| {
                                rule_error(
                                    key,
                                    format!(
                                        "a parameter must be a plain value, found {}",
                                        kind(value)
                                    ),
                                )
                            })
                    };
                    Ok((text(k)?, text(v)?))
                })
                .collect::<crate::Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let condition = mapping(key, map, "match")?
            .map(|m| ConditionMatch::parse(key, m))
            .transpose()?;
        let list = |name| Ok::<_, crate::Error>(string_list(key, map, name)?.unwrap_or_default());
        let written = ConfiguratorItem {
            side: string(key, map, "side")?,
            addresses: list("addresses")?,
            provider_addresses: list("providerAddresses")?,
            services: list("services")?,
            applications: list("applications")?,
            parameters,
            match_text: field(map, "match").map(flow),
            kind: string(key, map, "type")?,
            enabled: boolean(map, "enabled"),
        };
        Ok(Item { written, condition })
    }

    /// The item's addresses, `0.0.0.0` when it names none.
    fn addresses(&self) -> Vec<&str> {
        if self.written.addresses.is_empty() {
            vec![ANYHOST]
        } else {
            self.written.addresses.iter().map(String::as_str).collect()
        }
    }
}

impl Document {
    /// The override URLs of `item`, as Java's `ConfigParser` builds them.
    fn overrides(&self, key: &str, item: &Item, out: &mut Vec<Override>) -> crate::Result<()> {
        if item.written.parameters.is_empty() {
            return Err(rule_error(
                key,
                "an item has no parameters (Java refuses the document)",
            ));
        }
        let enabled = match item.written.kind.as_deref() {
            None | Some("general") => self.enabled.to_string(),
            Some(_) => item
                .written
                .enabled
                .map_or_else(|| "null".to_owned(), |e| e.to_string()),
        };
        for address in item.addresses() {
            let host = override_host(key, address)?;
            let services: Vec<&str> = if !self.app_scope {
                vec![self.key.as_deref().unwrap_or("")]
            } else if item.written.services.is_empty() {
                vec!["*"]
            } else {
                item.written.services.iter().map(String::as_str).collect()
            };
            for service in services {
                let (path, mut params) = service_params(key, service)?;
                params.extend(self.item_params(item));
                if self.app_scope {
                    params.push((
                        "application".into(),
                        self.key.clone().unwrap_or_else(|| "null".into()),
                    ));
                }
                params.push(("enabled".into(), enabled.clone()));
                if self.app_scope {
                    params.push(("category".into(), "appdynamicconfigurators".into()));
                }
                params.push(("configVersion".into(), self.version.clone()));
                let apps: Vec<Option<&String>> =
                    if self.app_scope || item.written.applications.is_empty() {
                        vec![None]
                    } else {
                        item.written.applications.iter().map(Some).collect()
                    };
                for app in apps {
                    let mut all = params.clone();
                    if let Some(app) = app {
                        all.push(("application".into(), app.clone()));
                    }
                    let mut params: BTreeMap<String, String> = all.into_iter().collect();
                    for k in SECURITY_KEYS {
                        params.remove(k);
                    }
                    out.push(Override {
                        host: host.clone(),
                        path: path.clone(),
                        params,
                        condition: item.condition.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Java's `toParameterString`: category, side, the parameters, provider addresses.
    fn item_params(&self, item: &Item) -> Vec<(String, String)> {
        let mut params = vec![("category".to_owned(), "dynamicconfigurators".to_owned())];
        if let Some(side) = &item.written.side {
            params.push(("side".into(), side.clone()));
        }
        params.extend(item.written.parameters.iter().cloned());
        if !item.written.provider_addresses.is_empty() {
            params.push((
                "providerAddresses".into(),
                item.written.provider_addresses.join(","),
            ));
        } else if item.written.side.as_deref() == Some("provider") {
            params.push(("providerAddresses".into(), item.addresses().join(",")));
        }
        params
    }
}

/// Java's `appendService`: `group/interface:version` into the URL's path and its `group`
/// and `version` parameters.
fn service_params(key: &str, service: &str) -> crate::Result<(String, Vec<(String, String)>)> {
    if service.is_empty() {
        return Err(rule_error(key, "no service: the document needs its key"));
    }
    let mut params = Vec::new();
    let mut interface = service;
    if let Some(i) = interface.find('/').filter(|&i| i > 0) {
        params.push(("group".to_owned(), interface[..i].to_owned()));
        interface = &interface[i + 1..];
    }
    if let Some(j) = interface.find(':').filter(|&j| j > 0) {
        params.push(("version".to_owned(), interface[j + 1..].to_owned()));
        interface = &interface[..j];
    }
    Ok((interface.to_owned(), params))
}

/// The host of an override URL built on `address`, as Java's URL parser reads it (the part
/// before a `:port`; the port must be a number).
fn override_host(key: &str, address: &str) -> crate::Result<String> {
    let bad = || {
        rule_error(
            key,
            format!(
                "address {:?} is not host or host:port",
                crate::Error::shorten(address)
            ),
        )
    };
    if address.contains(['/', '?', '#', '@']) {
        return Err(bad());
    }
    let host = match address.rfind(':') {
        Some(i) if i > 0 && i < address.len() - 1 && !address[i..].contains('%') => {
            address[i + 1..].parse::<i32>().map_err(|_| bad())?;
            &address[..i]
        }
        _ => address,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok(host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn provider<'a>(
        host: &'a str,
        port: u16,
        params: &'a BTreeMap<String, String>,
    ) -> ProviderFacts<'a> {
        ProviderFacts {
            host,
            port,
            protocol: "tri",
            app: "shop-orders",
            interface: "shop.OrderService",
            params,
        }
    }

    fn doc(key: &str, yaml: &str) -> Configurators {
        Configurators::parse(key, yaml).unwrap()
    }

    /// What a consumer (shop-web on 10.0.1.1) sees of a provider at `host:20880`.
    fn seen(
        doc: &Configurators,
        host: &str,
        base: &BTreeMap<String, String>,
    ) -> Option<BTreeMap<String, String>> {
        doc.apply_for_consumer("shop-web", "10.0.1.1", &provider(host, 20880, base))
    }

    /// As Java admin 0.6 writes an application's dynamic config.
    const ADMIN_06_APP: &str = "\
configVersion: v2.7
scope: application
key: shop-web
enabled: true
configs:
  - addresses: [0.0.0.0]
    side: consumer
    parameters:
      timeout: 3000
      loadbalance: leastactive
  - addresses: [10.0.1.1]
    providerAddresses: [\"10.0.0.7:20880\"]
    side: consumer
    parameters:
      weight: 200
      dubbo.tag: gray
      disabled: true
      enabled: false
";

    #[test]
    fn an_application_document_applies_to_its_consumers_view_of_providers() {
        let d = doc("shop-web.configurators", ADMIN_06_APP);
        assert_eq!(d.key(), "shop-web.configurators");
        assert_eq!(d.len(), 2);
        assert!(!d.is_empty());
        let base = params(&[("timeout", "1000"), ("version", "1.0")]);
        let other = seen(&d, "10.0.0.8", &base).unwrap();
        assert_eq!(other["timeout"], "3000");
        assert_eq!(other["loadbalance"], "leastactive");
        assert_eq!(other["version"], "1.0");
        assert!(!other.contains_key("weight"));
        assert!(!other.contains_key("category") && !other.contains_key("configVersion"));
        let target = seen(&d, "10.0.0.7", &base).unwrap();
        assert_eq!(target["weight"], "200");
        assert_eq!(target["dubbo.tag"], "gray");
        assert_eq!(target["disabled"], "true");
        assert_eq!(target["providerAddresses"], "10.0.0.7:20880");
        assert!(
            !target.contains_key("enabled"),
            "enabled is the rule's own switch"
        );
        // Another consumer host: only the 0.0.0.0 item.
        let elsewhere = d
            .apply_for_consumer("shop-web", "10.0.1.2", &provider("10.0.0.7", 20880, &base))
            .unwrap();
        assert!(!elsewhere.contains_key("weight"));
        // Another consumer application: an application document is its key's alone.
        assert_eq!(
            d.apply_for_consumer(
                "shop-admin",
                "10.0.1.1",
                &provider("10.0.0.7", 20880, &base)
            ),
            None
        );
        // The whole document disabled.
        let off = doc(
            "k",
            &ADMIN_06_APP.replace("enabled: true", "enabled: false"),
        );
        assert_eq!(seen(&off, "10.0.0.7", &base), None);
    }

    #[test]
    fn specific_hosts_apply_after_every_host_and_priorities_order_the_rest() {
        let d = doc(
            "k",
            "\
scope: application
key: shop-web
configs:
  - addresses: [10.0.1.1]
    side: consumer
    parameters: {timeout: specific}
  - side: consumer
    parameters: {timeout: any, priority: 2}
  - side: consumer
    parameters: {timeout: first, priority: 1}
",
        );
        let seen = seen(&d, "10.0.0.7", &BTreeMap::new()).unwrap();
        assert_eq!(seen["timeout"], "specific");
        let no_specific = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs:\n  - {side: consumer, parameters: {timeout: b, priority: 2}}\n  - {side: consumer, parameters: {timeout: a, priority: 1}}\n",
        );
        assert_eq!(
            no_specific
                .apply_for_consumer("shop-web", "h", &provider("p", 1, &BTreeMap::new()))
                .unwrap()["timeout"],
            "b",
            "priority 2 applies last"
        );
    }

    /// As the admins write a service's dynamic config (service scope).
    const SERVICE: &str = "\
configVersion: v2.7
scope: service
key: shop.OrderService
enabled: true
configs:
  - side: consumer
    applications: [shop-web, shop-app]
    parameters: {timeout: 5000}
  - side: consumer
    addresses: [10.0.1.9]
    parameters: {retries: 0}
  - side: provider
    addresses: [\"10.0.0.7:20880\"]
    parameters: {weight: 50}
";

    #[test]
    fn a_service_document_narrows_by_application_service_and_address() {
        let d = doc("shop.OrderService::.configurators", SERVICE);
        let base = BTreeMap::new();
        assert_eq!(
            seen(&d, "10.0.0.7", &base).unwrap(),
            params(&[("timeout", "5000")])
        );
        assert_eq!(
            d.apply_for_consumer(
                "shop-admin",
                "10.0.1.1",
                &provider("10.0.0.7", 20880, &base)
            ),
            None,
            "not one of its applications"
        );
        // Another service: the document's key does not name it.
        let other = ProviderFacts {
            interface: "shop.PayService",
            ..provider("10.0.0.7", 20880, &base)
        };
        assert_eq!(d.apply_for_consumer("shop-web", "10.0.1.1", &other), None);
        // A versioned provider is another service key.
        let versioned = params(&[("version", "1.0")]);
        assert_eq!(seen(&d, "10.0.0.7", &versioned), None);
        let with_version = doc(
            "k",
            "key: g1/shop.OrderService:1.0\nconfigs: [{side: consumer, parameters: {timeout: 1}}]",
        );
        assert_eq!(
            seen(&with_version, "10.0.0.7", &versioned),
            None,
            "and its group"
        );
        let grouped = params(&[("version", "1.0"), ("group", "g1")]);
        assert_eq!(
            seen(&with_version, "10.0.0.7", &grouped).unwrap()["timeout"],
            "1"
        );
    }

    #[test]
    fn provider_side_items_apply_to_the_provider_itself() {
        let d = doc("k", SERVICE);
        let mut mine = params(&[("weight", "100")]);
        assert!(d.apply_for_provider(
            "shop-orders",
            "10.0.0.7",
            20880,
            "shop.OrderService",
            &mut mine
        ));
        assert_eq!(mine["weight"], "50");
        assert_eq!(mine["providerAddresses"], "10.0.0.7:20880");
        let mut other_port = params(&[("weight", "100")]);
        assert!(!d.apply_for_provider(
            "shop-orders",
            "10.0.0.7",
            20881,
            "shop.OrderService",
            &mut other_port
        ));
        assert_eq!(other_port["weight"], "100");
        let mut other_host = BTreeMap::new();
        assert!(!d.apply_for_provider(
            "shop-orders",
            "10.0.0.8",
            20880,
            "shop.OrderService",
            &mut other_host
        ));
        // Consumer-side items never apply to providers, nor provider-side ones to consumers.
        let base = BTreeMap::new();
        assert!(!seen(&d, "10.0.0.7", &base).unwrap().contains_key("weight"));
        // Every provider, any port.
        let all = doc(
            "k",
            "scope: application\nkey: shop-orders\nconfigs: [{side: provider, parameters: {warmup: 0}}]",
        );
        let mut p = BTreeMap::new();
        assert!(all.apply_for_provider("shop-orders", "10.9.9.9", 1, "x.Y", &mut p));
        assert_eq!(p["warmup"], "0");
        assert!(!all.apply_for_provider("shop-other", "10.9.9.9", 1, "x.Y", &mut p));
    }

    #[test]
    fn provider_addresses_match_as_java_compares_them() {
        let base = BTreeMap::new();
        let with = |list: &str| {
            doc(
                "k",
                &format!(
                    "scope: application\nkey: shop-web\nconfigs: [{{side: consumer, providerAddresses: {list}, parameters: {{x: y}}}}]"
                ),
            )
        };
        for (list, applies) in [
            ("['10.0.0.7:20880']", true),
            ("['10.0.0.7']", true),
            ("['0.0.0.0']", true),
            ("['0.0.0.0:*']", true),
            ("['0.0.0.0:20880']", true),
            ("['0.0.0.0:20881']", false),
            ("['10.0.0.7:20881']", false),
            ("['10.0.0.*']", false),
            ("['10.0.0.8', '10.0.0.7:20880']", true),
            ("[]", true),
        ] {
            assert_eq!(
                seen(&with(list), "10.0.0.7", &base).is_some(),
                applies,
                "{list}"
            );
        }
    }

    #[test]
    fn an_items_enabled_counts_only_with_a_type() {
        let base = BTreeMap::new();
        let general = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, enabled: false, parameters: {x: y}}]",
        );
        assert!(
            seen(&general, "10.0.0.7", &base).is_some(),
            "the document's enabled decides"
        );
        let typed_off = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, enabled: false, parameters: {weight: 1}}]",
        );
        assert_eq!(seen(&typed_off, "10.0.0.7", &base), None);
        let typed_unset = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, parameters: {weight: 1}}]",
        );
        assert_eq!(
            seen(&typed_unset, "10.0.0.7", &base),
            None,
            "absent reads as false"
        );
        let typed_on = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, enabled: true, parameters: {weight: 1}}]",
        );
        assert_eq!(seen(&typed_on, "10.0.0.7", &base).unwrap()["weight"], "1");
        let no_side = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{parameters: {x: y}}]",
        );
        assert_eq!(
            seen(&no_side, "10.0.0.7", &base),
            None,
            "no side never applies"
        );
    }

    #[test]
    fn tilde_conditions_before_v3() {
        let d = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {'~env': gray, timeout: 1}}]",
        );
        assert_eq!(seen(&d, "10.0.0.7", &params(&[("env", "prod")])), None);
        let gray = seen(&d, "10.0.0.7", &params(&[("env", "gray")])).unwrap();
        assert_eq!(gray["timeout"], "1");
        assert!(!gray.contains_key("~env"));
    }

    /// As the new admin writes a v3.0 document with a match block.
    const V3: &str = "\
configVersion: v3.0
scope: application
key: shop-web
configs:
  - side: consumer
    match:
      address: {cird: 10.0.1.0/24}
      providerAddress: {wildcard: '10.0.0.*'}
      service: {oneof: [{exact: shop.OrderService}, {prefix: shop.Pay}]}
      app: {oneof: [{exact: shop-web}]}
      param:
        - key: env
          value: {exact: gray}
    parameters: {timeout: 9}
";

    #[test]
    fn v3_matches_all_hold() {
        let d = doc("k", V3);
        let gray = params(&[("env", "gray")]);
        assert_eq!(seen(&d, "10.0.0.7", &gray).unwrap()["timeout"], "9");
        assert_eq!(
            seen(&d, "10.0.0.7", &params(&[("env", "prod")])),
            None,
            "param"
        );
        assert_eq!(seen(&d, "10.0.9.7", &gray), None, "providerAddress");
        assert_eq!(
            d.apply_for_consumer("shop-web", "10.0.2.1", &provider("10.0.0.7", 20880, &gray)),
            None,
            "address is the consumer's host"
        );
        let pay = ProviderFacts {
            interface: "shop.PayService",
            ..provider("10.0.0.7", 20880, &gray)
        };
        assert!(d.apply_for_consumer("shop-web", "10.0.1.1", &pay).is_some());
        let ship = ProviderFacts {
            interface: "shop.ShipService",
            ..provider("10.0.0.7", 20880, &gray)
        };
        assert_eq!(
            d.apply_for_consumer("shop-web", "10.0.1.1", &ship),
            None,
            "service"
        );
        // The same match ignored before v3.0.
        let v27 = doc("k", &V3.replace("v3.0", "v2.7"));
        assert!(seen(&v27, "10.0.9.7", &params(&[])).is_some());
    }

    #[test]
    fn documents_compose_in_order_and_later_items_see_earlier_ones() {
        let app = doc(
            "shop-web.configurators",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {timeout: 1, env: gray}}]",
        );
        let service = doc(
            "shop.OrderService::.configurators",
            "configVersion: v3.0\nkey: shop.OrderService\nconfigs: [{side: consumer, match: {param: [{key: env, value: {exact: gray}}]}, parameters: {timeout: 2}}]",
        );
        let base = BTreeMap::new();
        let p = provider("10.0.0.7", 20880, &base);
        let both = configure_for_consumer(&[&app, &service], "shop-web", "10.0.1.1", &p).unwrap();
        assert_eq!(both["timeout"], "2", "the service document applies last");
        assert_eq!(
            configure_for_consumer(&[&service], "shop-web", "10.0.1.1", &p),
            None
        );
        assert_eq!(
            configure_for_consumer(&[], "shop-web", "10.0.1.1", &p),
            None
        );
        let mut own = BTreeMap::new();
        assert!(!configure_for_provider(
            &[&app, &service],
            "shop-orders",
            "10.0.0.7",
            20880,
            "shop.OrderService",
            &mut own
        ));
        assert!(own.is_empty());
    }

    #[test]
    fn empty_values_change_nothing_a_consumer_sees() {
        let d = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {timeout: '', weight: 3}}]",
        );
        let seen = seen(&d, "10.0.0.7", &params(&[("timeout", "7")])).unwrap();
        assert_eq!(seen["timeout"], "7");
        assert_eq!(seen["weight"], "3");
        let provider_side = doc(
            "k",
            "scope: application\nkey: shop-orders\nconfigs: [{side: provider, parameters: {timeout: ''}}]",
        );
        let mut own = params(&[("timeout", "7")]);
        assert!(provider_side.apply_for_provider("shop-orders", "h", 1, "i", &mut own));
        assert_eq!(own["timeout"], "");
    }

    #[test]
    fn security_and_condition_keys_are_never_applied() {
        let d = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {router: x, rule: y, runtime: z, type: t, accesslog.fixed.path: p, check: c, dynamic: d, interfaces: i, compatible_config: c, w: 1}}]",
        );
        let seen_params = seen(&d, "10.0.0.7", &BTreeMap::new()).unwrap();
        assert_eq!(seen_params, params(&[("w", "1")]));
        // Condition keys among the parameters become conditions, as they do in Java's URL:
        // a version makes the item's service `*:2.0`, which names no provider.
        let narrowed = doc(
            "k",
            "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {version: '2.0', w: 1}}]",
        );
        assert_eq!(seen(&narrowed, "10.0.0.7", &BTreeMap::new()), None);
        let v2 = params(&[("version", "2.0")]);
        assert_eq!(seen(&narrowed, "10.0.0.7", &v2), None);
        let for_app = doc(
            "k",
            "key: shop.OrderService\nconfigs: [{side: consumer, parameters: {application: shop-app, w: 1}}]",
        );
        assert_eq!(seen(&for_app, "10.0.0.7", &BTreeMap::new()), None);
        let for_web = doc(
            "k",
            "key: shop.OrderService\nconfigs: [{side: consumer, parameters: {application: shop-web, w: 1}}]",
        );
        assert_eq!(
            seen(&for_web, "10.0.0.7", &BTreeMap::new()).unwrap()["w"],
            "1"
        );
    }

    #[test]
    fn malformed_documents_are_refused_as_rule_errors() {
        let refused = [
            "",
            "configs: [",
            "[\"override://0.0.0.0/shop.OrderService?timeout=1\"]",
            "- a",
            "key: k",
            "key: k\nconfigs: {}",
            "key: k\nconfigs: []",
            "key: k\nconfigs: [7]",
            "key: k\nconfigs: [{side: consumer}]",
            "key: k\nconfigs: [{side: consumer, parameters: {}}]",
            "key: k\nconfigs: [{side: consumer, parameters: [timeout]}]",
            "key: k\nconfigs: [{side: consumer, parameters: {timeout: [1]}}]",
            "key: k\nconfigs: [{side: consumer, parameters: {timeout: ~}}]",
            "configs: [{side: consumer, parameters: {a: b}}]",
            "key: ''\nconfigs: [{side: consumer, parameters: {a: b}}]",
            "configVersion: v9\nkey: k\nconfigs: [{side: consumer, parameters: {a: b}}]",
            "configVersion: 2.7\nkey: k\nconfigs: [{side: consumer, parameters: {a: b}}]",
            "key: [k]\nconfigs: [{side: consumer, parameters: {a: b}}]",
            "key: k\nconfigs: [{side: 1, parameters: {a: b}}]",
            "key: k\nconfigs: [{type: 1, parameters: {a: b}}]",
            "key: k\nconfigs: [{addresses: ['10.0.0.1:http'], parameters: {a: b}}]",
            "key: k\nconfigs: [{addresses: ['10.0.0.0/8'], parameters: {a: b}}]",
            "key: k\nconfigs: [{addresses: [''], parameters: {a: b}}]",
            "scope: application\nkey: k\nconfigs: [{services: [''], parameters: {a: b}}]",
            "key: k\nconfigs: [{parameters: {a: b, priority: high}}]",
            "key: k\nconfigs: [{match: 1, parameters: {a: b}}]",
            "key: k\nconfigs: [{match: {address: 10.0.0.1}, parameters: {a: b}}]",
            "key: k\nconfigs: [{match: {service: {exact: a}}, parameters: {a: b}}]",
            "key: k\nconfigs: [{match: {param: [{key: a, value: {regex: '.*'}}]}, parameters: {a: b}}]",
        ];
        for yaml in refused {
            match Configurators::parse("shop.OrderService::.configurators", yaml) {
                Err(Error::Rule { key, reason, .. }) => {
                    assert_eq!(key, "shop.OrderService::.configurators");
                    assert!(!reason.is_empty());
                }
                other => panic!("{yaml:?} should be refused, got {other:?}"),
            }
        }
        let big = format!(
            "key: k\nconfigs: [{{parameters: {{a: \"{}\"}}}}]",
            "x".repeat(MAX)
        );
        assert!(matches!(
            Configurators::parse("k", &big),
            Err(Error::Rule { .. })
        ));
    }

    const MAX: usize = super::super::MAX_RULE_BYTES;

    #[test]
    fn hostile_documents_never_panic() {
        let hostile = [
            "key: \"\\0/é:ü\"\nconfigs: [{side: consumer, addresses: ['[::1]:80', '::1', 'é'], providerAddresses: [',', ''], parameters: {'': '', '~': x, '~~': y, 'é': 'ü'}}]",
            "scope: application\nkey: k\nconfigs: [{side: consumer, services: ['/', ':', '/:', 'a/b:c/d'], applications: ['*'], parameters: {x: y}}]",
            "configVersion: v3.0\nkey: k\nconfigs: [{side: consumer, match: {address: {cird: '::/-1'}, providerAddress: {cird: '1.1.1.1/200'}, app: {oneof: []}, param: [{}, {key: x}]}, parameters: {x: y}}]",
            "configVersion: v3.0\nkey: k\nconfigs: [{side: provider, match: {address: {cird: '1-2-3.*.*.*'}}, parameters: {priority: '-2147483648'}}]",
        ];
        for yaml in hostile {
            let d = Configurators::parse("k", yaml).unwrap();
            let base = params(&[("x", "z")]);
            for host in ["10.0.0.7", "::1", "", "é", "[::1]"] {
                let _ = d.apply_for_consumer("k", host, &provider(host, 0, &base));
                let mut own = base.clone();
                let _ = d.apply_for_provider("k", host, 65535, "k", &mut own);
            }
        }
    }

    #[test]
    fn the_document_shows_as_written() {
        let text = "configVersion: v3.0\nscope: application\nkey: shop-web\nenabled: false\nconfigs:\n  - side: consumer\n    addresses: [10.0.0.9]\n    providerAddresses: ['10.0.0.7:20880']\n    services: [helloworld.Greeter]\n    parameters: {timeout: 3000, weight: 200}\n    match:\n      param: [{key: env, value: {exact: gray}}]\n  - side: provider\n    type: special\n    enabled: true\n    parameters: {disabled: true}\n";
        let doc = Configurators::parse("shop-web.configurators", text).unwrap();
        assert_eq!(doc.config_version(), Some("v3.0"));
        assert_eq!(doc.scope(), Some("application"));
        assert_eq!(doc.rule_key(), Some("shop-web"));
        assert!(!doc.enabled());
        let [first, second] = doc.configs() else {
            panic!("two items: {:?}", doc.configs());
        };
        assert_eq!(first.side.as_deref(), Some("consumer"));
        assert_eq!(first.addresses, ["10.0.0.9"]);
        assert_eq!(first.provider_addresses, ["10.0.0.7:20880"]);
        assert_eq!(first.services, ["helloworld.Greeter"]);
        assert_eq!(
            first.parameters,
            [
                ("timeout".to_owned(), "3000".to_owned()),
                ("weight".to_owned(), "200".to_owned())
            ]
        );
        assert_eq!(
            first.match_text.as_deref(),
            Some("{param: [{key: env, value: {exact: gray}}]}")
        );
        assert_eq!(second.kind.as_deref(), Some("special"));
        assert_eq!(second.enabled, Some(true));
        assert_eq!(second.match_text, None);
    }
}
