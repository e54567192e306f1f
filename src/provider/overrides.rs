//! A provider's exports as its own configurators override them: the `side: provider` items
//! of `{app}.configurators` and of each service's `{interface}:{version}:{group}.configurators`,
//! applied to that service's parameters as Dubbo Java 3.3's provider applies them
//! (`RegistryProtocol`'s provider and service configuration listeners: the application's
//! document first, then the service's). Pure: the rules are given, nothing is read.
//!
//! An item applies when its address names the provider (`host`, `host:port` with the
//! service's port, or `0.0.0.0`), see [`Configurators`]. What it sets lands in the
//! service's parameters, so consumers see it in the fetched metadata and the revision
//! changes; with no item applying, the exports are the declared ones and so is the revision.

use std::collections::BTreeMap;

use crate::governance::{Configurators, configure_for_provider, service_key};
use crate::model::ServiceInfo;

/// The config-centre key of `app`'s own configurators.
pub(super) fn app_key(app: &str) -> String {
    Configurators::key_for(app)
}

/// The config-centre key of `service`'s configurators (Java's
/// `{interface}:{version}:{group}`, empty slots kept).
pub(super) fn service_rule_key(service: &ServiceInfo) -> String {
    Configurators::key_for(&service_key(
        &service.name,
        Some(&service.version),
        Some(&service.group),
    ))
}

/// Every key a provider of `app` exporting `services` follows, sorted, without repeats.
pub(super) fn rule_keys<'a>(
    app: &str,
    services: impl IntoIterator<Item = &'a ServiceInfo>,
) -> Vec<String> {
    let mut keys: Vec<String> = std::iter::once(app_key(app))
        .chain(services.into_iter().map(service_rule_key))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// `declared` as the documents in `rules` (by key) override them for a provider of `app`
/// at `host`, whose services without a port of their own listen on `instance_port`.
pub(super) fn overridden(
    declared: &[ServiceInfo],
    rules: &BTreeMap<String, &Configurators>,
    app: &str,
    host: &str,
    instance_port: u16,
) -> Vec<ServiceInfo> {
    let app_doc = rules.get(&app_key(app)).copied();
    declared
        .iter()
        .map(|service| {
            let documents: Vec<&Configurators> = app_doc
                .into_iter()
                .chain(rules.get(&service_rule_key(service)).copied())
                .collect();
            if documents.is_empty() {
                return service.clone();
            }
            let port = if service.port > 0 {
                service.port
            } else {
                instance_port
            };
            // Java matches a service document's `services` against `group/interface:version`,
            // read from the URL's parameters: lend them for the match only.
            let mut params = service.params.clone();
            let mut lent = Vec::new();
            for (key, value) in [("group", &service.group), ("version", &service.version)] {
                if !value.is_empty() && !params.contains_key(key) {
                    params.insert(key.to_owned(), value.clone());
                    lent.push(key);
                }
            }
            if !configure_for_provider(&documents, app, host, port, &service.name, &mut params) {
                return service.clone();
            }
            for key in lent {
                params.remove(key);
            }
            ServiceInfo {
                params,
                ..service.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(key: &str, yaml: &str) -> Configurators {
        Configurators::parse(key, yaml).unwrap()
    }

    fn declared() -> Vec<ServiceInfo> {
        vec![
            ServiceInfo::new("helloworld.Greeter").with_param("weight", "100"),
            ServiceInfo::new("shop.Orders")
                .with_group("g1")
                .with_version("1.0")
                .with_port(7001),
        ]
    }

    #[test]
    fn keys_are_the_apps_and_each_services() {
        assert_eq!(
            rule_keys("greeter", &declared()),
            [
                "greeter.configurators",
                "helloworld.Greeter::.configurators",
                "shop.Orders:1.0:g1.configurators",
            ]
        );
    }

    #[test]
    fn an_instance_rule_disables_only_the_instance_it_names() {
        let disable = doc(
            "greeter.configurators",
            "configVersion: v3.0\nscope: application\nkey: greeter\nenabled: true\n\
             configs:\n  - side: provider\n    addresses: ['10.0.0.7:50051']\n    \
             parameters: {disabled: 'true'}\n",
        );
        let rules = BTreeMap::from([("greeter.configurators".to_owned(), &disable)]);
        let mine = overridden(&declared(), &rules, "greeter", "10.0.0.7", 50051);
        assert_eq!(mine[0].params["disabled"], "true");
        assert_eq!(mine[0].params["weight"], "100");
        // The service on a port of its own is another address.
        assert_eq!(mine[1], declared()[1]);
        let other = overridden(&declared(), &rules, "greeter", "10.0.0.8", 50051);
        assert_eq!(other, declared());
        let other_app = overridden(&declared(), &rules, "shop", "10.0.0.7", 50051);
        assert_eq!(other_app, declared());
    }

    #[test]
    fn the_service_document_applies_after_the_apps_and_group_and_version_are_only_matched() {
        let app = doc(
            "greeter.configurators",
            "configVersion: v3.0\nscope: application\nkey: greeter\n\
             configs: [{side: provider, addresses: ['0.0.0.0'], parameters: {weight: 200, timeout: 5}}]\n",
        );
        let service = doc(
            "shop.Orders:1.0:g1.configurators",
            "configVersion: v3.0\nscope: service\nkey: g1/shop.Orders:1.0\n\
             configs: [{side: provider, addresses: ['0.0.0.0'], parameters: {weight: 50}}]\n",
        );
        let rules = BTreeMap::from([
            ("greeter.configurators".to_owned(), &app),
            ("shop.Orders:1.0:g1.configurators".to_owned(), &service),
        ]);
        let mine = overridden(&declared(), &rules, "greeter", "10.0.0.7", 50051);
        assert_eq!(mine[0].params["weight"], "200");
        assert_eq!(mine[1].params["weight"], "50");
        assert_eq!(mine[1].params["timeout"], "5");
        assert!(!mine[1].params.contains_key("group"));
        assert!(!mine[1].params.contains_key("version"));
    }

    #[test]
    fn consumer_side_items_change_nothing_here() {
        let consumer = doc(
            "greeter.configurators",
            "configVersion: v3.0\nscope: application\nkey: greeter\n\
             configs: [{side: consumer, addresses: ['0.0.0.0'], parameters: {weight: 1}}]\n",
        );
        let rules = BTreeMap::from([("greeter.configurators".to_owned(), &consumer)]);
        assert_eq!(
            overridden(&declared(), &rules, "greeter", "10.0.0.7", 50051),
            declared()
        );
    }
}
