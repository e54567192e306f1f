//! One `configs` item of a configurator document as written: where it applies and what
//! it sets. The parsed document ([`super::Configurators`]) keeps them so a tool can show an
//! operator how a rule reads (`introspect rule check`) without re-parsing the YAML.

/// One `configs` item as written (see [`super::Configurators`] for what each field means
/// to Java). Values are Java's `String.valueOf` of each YAML scalar.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfiguratorItem {
    /// `side`: `consumer` or `provider` (an item without one never applies).
    pub side: Option<String>,
    /// `addresses`: the hosts it applies on (none: every host).
    pub addresses: Vec<String>,
    /// `providerAddresses`: on the consumer side, which providers.
    pub provider_addresses: Vec<String>,
    /// `services`: in application scope, which services.
    pub services: Vec<String>,
    /// `applications`: in service scope, which applications.
    pub applications: Vec<String>,
    /// `parameters`, in the order written: what the item sets.
    pub parameters: Vec<(String, String)>,
    /// The v3.0 `match`, on one line in YAML's flow style.
    pub match_text: Option<String>,
    /// `type` (absent or `general`: the document's `enabled` decides).
    pub kind: Option<String>,
    /// The item's own `enabled`, which counts only with a `type` other than `general`.
    pub enabled: Option<bool>,
}
