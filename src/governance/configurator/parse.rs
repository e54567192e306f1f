//! A document's items turned into override URLs as Java's `ConfigParser` builds them: one
//! per address, and per service (application scope) or per application (service scope).

use std::collections::BTreeMap;

use serde_yaml_ng::{Mapping, Value};

use super::ANYHOST;
use super::item::ConfiguratorItem;
use super::matching::{ConditionMatch, Override};
use crate::governance::rule_yaml::{
    boolean, field, flow, kind, mapping, rule_error, scalar_text, string, string_list,
};

/// Keys Java strips from every override for safety.
const SECURITY_KEYS: [&str; 5] = ["accesslog.fixed.path", "router", "rule", "runtime", "type"];

/// The document-level fields every item's URLs carry.
pub(super) struct Document {
    pub(super) version: String,
    pub(super) app_scope: bool,
    pub(super) key: Option<String>,
    pub(super) enabled: bool,
}

/// One `configs` item as Java's `ConfigItem` reads it.
pub(super) struct Item {
    /// The item as written (also kept in the document, to show it).
    pub(super) written: ConfiguratorItem,
    pub(super) condition: Option<ConditionMatch>,
}

impl Item {
    pub(super) fn parse(key: &str, map: &Mapping) -> crate::error::Result<Item> {
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
                .collect::<crate::error::Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let condition = mapping(key, map, "match")?
            .map(|m| ConditionMatch::parse(key, m))
            .transpose()?;
        let list =
            |name| Ok::<_, crate::error::Error>(string_list(key, map, name)?.unwrap_or_default());
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
    /// Addresses Java can never apply are dropped alone, `dropped` saying why.
    pub(super) fn overrides(
        &self,
        key: &str,
        item: &Item,
        out: &mut Vec<Override>,
        dropped: &mut Vec<String>,
    ) -> crate::error::Result<()> {
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
            let host = match override_host(key, address)? {
                Ok(host) => host,
                Err(why) => {
                    dropped.push(why);
                    continue;
                }
            };
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
                        legacy_port: None,
                        absent: false,
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
fn service_params(
    key: &str,
    service: &str,
) -> crate::error::Result<(String, Vec<(String, String)>)> {
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

/// The host of an override URL built on `address`, as Java's `URL.valueOf` reads it (the
/// part before a `:port`; the port must be a number, or Java throws and the document is
/// refused). `Ok(Err(why))` for an address whose URL Java builds but can never apply: one
/// holding a `/` (a CIDR such as `10.0.0.0/8`, or a path: the rest lands in the URL's path,
/// so its service never matches), a `?` or `#` (the service is cut off), or an empty one
/// (no host, which Java's configurator skips). Java drops such an item silently; here it
/// is dropped alone too, and said why in the document's notes.
pub(super) fn override_host(
    key: &str,
    address: &str,
) -> crate::error::Result<Result<String, String>> {
    let shown = crate::error::Error::shorten(address);
    if address.contains('/') {
        let what = if address.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok()
        }) {
            "a CIDR, which Java does not match (write the hosts, or a v3.0 match: {address: {cird: ...}})"
        } else {
            "not host or host:port (the rest is read as the URL's path, so Java never applies it)"
        };
        return Ok(Err(format!("address {shown:?} is {what}")));
    }
    if address.contains(['?', '#']) {
        return Ok(Err(format!(
            "address {shown:?} holds a '?' or '#', which cuts off the URL Java builds on it"
        )));
    }
    if address.contains('@') {
        return Err(rule_error(
            key,
            format!("address {shown:?} is not host or host:port"),
        ));
    }
    let host = match address.rfind(':') {
        Some(i) if i > 0 && i < address.len() - 1 && !address[i..].contains('%') => {
            address[i + 1..].parse::<i32>().map_err(|_| {
                rule_error(
                    key,
                    format!("address {shown:?} has a port that is not a number (Java refuses the document)"),
                )
            })?;
            &address[..i]
        }
        _ => address,
    };
    if host.is_empty() {
        return Ok(Err(format!(
            "address {shown:?} names no host, which Java's configurator skips"
        )));
    }
    Ok(Ok(host.to_owned()))
}
