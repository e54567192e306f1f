//! Which config-centre keys a consumer's channel reads, as a Dubbo Java 3.3 consumer reads
//! them (group `dubbo`): the consumer app's and the service's configurators, each provider
//! app's tag rule, and the condition rules of the service, of each provider app (not the
//! consumer's own) and of the consumer app. Script and mesh rules of the provider apps are
//! read only to say they are not applied.

/// The role of one rule key: what it holds and whom it concerns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleKey {
    /// `{consumerApp}.configurators`.
    ConsumerConfigurators(String),
    /// `{interface}:{version}:{group}.configurators`.
    ServiceConfigurators(String),
    /// `{providerApp}.tag-router`.
    TagRule(String),
    /// `{interface}:{version}:{group}.condition-router`.
    ServiceConditions(String),
    /// `{providerApp}.condition-router`.
    ProviderAppConditions(String),
    /// `{consumerApp}.condition-router`.
    ConsumerAppConditions(String),
    /// `{providerApp}.script-router`: not applied.
    Script(String),
    /// `{providerApp}.MESHAPPRULE`: not applied.
    Mesh(String),
}

impl RuleKey {
    /// The key in the config centre.
    pub fn key(&self) -> String {
        match self {
            RuleKey::ConsumerConfigurators(app) | RuleKey::ServiceConfigurators(app) => {
                format!("{app}.configurators")
            }
            RuleKey::TagRule(app) => format!("{app}.tag-router"),
            RuleKey::ServiceConditions(service)
            | RuleKey::ProviderAppConditions(service)
            | RuleKey::ConsumerAppConditions(service) => format!("{service}.condition-router"),
            RuleKey::Script(app) => format!("{app}.script-router"),
            RuleKey::Mesh(app) => format!("{app}.MESHAPPRULE"),
        }
    }
}

/// Java's service key of rules: `{interface}:{version}:{group}`, empty slots kept
/// (`helloworld.Greeter::`).
pub fn service_key(interface: &str, version: Option<&str>, group: Option<&str>) -> String {
    format!(
        "{interface}:{}:{}",
        version.unwrap_or_default(),
        group.unwrap_or_default()
    )
}

/// The keys a channel of `service` (a [`service_key`]) reads for a consumer of
/// `consumer_app` (empty: unknown, its keys not read) with providers of `provider_apps`.
pub fn rule_keys<'a>(
    consumer_app: &str,
    service: &str,
    provider_apps: impl IntoIterator<Item = &'a str>,
) -> Vec<RuleKey> {
    let mut keys = vec![
        RuleKey::ServiceConfigurators(service.to_owned()),
        RuleKey::ServiceConditions(service.to_owned()),
    ];
    if !consumer_app.is_empty() {
        keys.push(RuleKey::ConsumerConfigurators(consumer_app.to_owned()));
        keys.push(RuleKey::ConsumerAppConditions(consumer_app.to_owned()));
    }
    for app in provider_apps {
        keys.push(RuleKey::TagRule(app.to_owned()));
        if app != consumer_app {
            keys.push(RuleKey::ProviderAppConditions(app.to_owned()));
        }
        keys.push(RuleKey::Script(app.to_owned()));
        keys.push(RuleKey::Mesh(app.to_owned()));
    }
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_as_java_names_them() {
        let service = service_key("helloworld.Greeter", None, None);
        assert_eq!(service, "helloworld.Greeter::");
        assert_eq!(
            service_key("com.foo.Svc", Some("1.0"), Some("grp")),
            "com.foo.Svc:1.0:grp"
        );
        let keys: Vec<String> = rule_keys("shop", &service, ["greeter"])
            .iter()
            .map(RuleKey::key)
            .collect();
        for expected in [
            "shop.configurators",
            "helloworld.Greeter::.configurators",
            "greeter.tag-router",
            "helloworld.Greeter::.condition-router",
            "greeter.condition-router",
            "shop.condition-router",
            "greeter.script-router",
            "greeter.MESHAPPRULE",
        ] {
            assert!(keys.iter().any(|k| k == expected), "{expected} in {keys:?}");
        }
    }

    #[test]
    fn the_consumers_own_app_is_not_read_as_a_provider_app_and_an_unknown_consumer_reads_no_app_keys()
     {
        let keys = rule_keys("greeter", "S::", ["greeter"]);
        assert_eq!(
            keys.iter()
                .filter(|k| k.key() == "greeter.condition-router")
                .count(),
            1,
            "read once, as the consumer's"
        );
        assert!(keys.contains(&RuleKey::ConsumerAppConditions("greeter".into())));
        let anonymous = rule_keys("", "S::", ["greeter"]);
        assert!(
            !anonymous
                .iter()
                .any(|k| matches!(k, RuleKey::ConsumerConfigurators(_)))
        );
    }
}
