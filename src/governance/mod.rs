//! Governance: which providers a call may go to, and with what weight, as Dubbo Java 3.3
//! governs a fleet: what providers publish for routing, the rules operators write into the
//! config centre (configurators, tag rules, condition rules, migration rules), the chain a
//! call is routed by, and the watching of those rules. Used alike by the consumer (its
//! balanced channels route each call by the chain), the provider (its own `disabled`, weight
//! and tag under configurators), the xDS server and the command-line tool.
//!
//! The rule model and the chain are pure: no I/O, no clock of their own. Data flows one
//! way: discovery publishes what the registries say, unfiltered; governance turns it into
//! the routed, weighted subset for one call's input; health and balancing then leave out
//! set-aside endpoints and pick one.
//!
//! * `params`: what one endpoint's service parameters and instance record say for
//!   routing (`dubbo.tag`, `disabled`/`enabled`, `weight`, `{method}.weight`, `warmup`,
//!   `timestamp`), parsed as Java parses them; values that do not parse are kept as
//!   findings, never a panic.
//! * `weight`: the effective weight, Java's `AbstractLoadBalance.getWeight` with warm-up.
//! * `tag`: a call's tag ([`CallTag`]) and Java's static-tag selection.
//! * `facts`: what rules match against, one provider and one call.
//! * `keys`: which config-centre keys a channel reads ([`RuleKey`]), as Java names them.
//!
//! Each rule kind is a folder of one concept a file: its document (where it is parsed),
//! its matching, its routing or applying, and its tests beside.
//!
//! * `rule_header`: the header every rule document starts with (`key`, `configVersion`,
//!   `scope`, `enabled`, `force`, `runtime`, `priority`, `valid`), read once for the three
//!   kinds below, in each kind's own words, and read back alike on each through
//!   [`Governed`].
//! * `condition`: condition rules ([`ConditionRule`]), v3.0 `when => then` and v3.1
//!   weighted destinations: `condition/rule.rs` parses the document, `grammar`, `v31`,
//!   `term` and `pattern` read and match its conditions, `route` runs them.
//! * `tag_rule`: tag rules (`{providerApp}.tag-router`, [`TagRule`]): `tag_rule/rule.rs`
//!   parses the document and builds each tag's group, `route` is the tag stage
//!   ([`route_by_tag`], Java's `TagStateRouter`); static tags alone when there is no valid,
//!   enabled rule.
//! * `configurator`: override rules (`{app}.configurators`,
//!   `{interface}:{version}:{group}.configurators`, [`Configurators`]) applied to a
//!   provider's parameters as a consumer sees them, or to a provider's own:
//!   `configurator/document.rs` parses the document, `parse` turns its items into Java's
//!   override URLs, `matching` matches one against a provider, `apply` applies documents on
//!   either side, `item` keeps each item as written ([`ConfiguratorItem`]).
//! * `rule_yaml`, `string_match`, `ip_pattern`: what the rules share: YAML read as Java's
//!   SnakeYAML maps read it (every field reader, once), the v3.0 match forms and Java's
//!   glob, Java's IP expressions.
//! * `rule_set`: the rules in force for one channel ([`RuleSet`]), one [`Rule`] per key,
//!   and those refused or not applied.
//! * `rules_digest`: a short, stable digest of rules by key and text ([`rules_digest()`]),
//!   what a consumer's record says it routes by.
//! * `chain`: the chain of one call input ([`route`]): `chain/mod.rs` holds the ordered
//!   list of steps (Java's router order: tag 100, then the condition rules of the service
//!   140, of the providers' app 145, of the consumer's app 150), one file a step; adding a
//!   rule kind is a step file and a line in that list.
//! * `watch`: the I/O half: one rule key followed live (shared by the consumer's channels
//!   and the provider's own rules), and the same keys read once.
//! * [`migration`]: which level of discovery a subscription reads (Java's migration steps)
//!   and the migration rule that steers it.

mod chain;
mod condition;
mod configurator;
mod facts;
mod ip_pattern;
mod keys;
mod params;
#[cfg(test)]
mod refusal;
mod rule_header;
mod rule_set;
pub(crate) mod rule_yaml;
mod rules_digest;
mod string_match;
mod tag;
mod tag_rule;
mod weight;

pub mod migration;
pub(crate) mod watch;

pub use chain::{Choice, Routing, route};
pub use condition::{
    CallReads, ConditionItem, ConditionRoute, ConditionRule, ConditionVersion, MAX_DESTINATIONS,
};
pub use configurator::{
    CONFIGURATORS_SUFFIX, ConfiguratorItem, Configurators, configure_for_consumer,
    configure_for_provider,
};
pub use facts::{CallFacts, ConsumerIdentity, MAX_RULE_BYTES, ProviderFacts};
pub use keys::{RuleKey, rule_keys, service_key};
pub use params::{BadParam, RouteParams};
pub use rule_header::{Governed, RuleHeader};
pub use rule_set::{Rule, RuleProblem, RuleSet};
pub use rules_digest::rules_digest;
pub use tag::CallTag;
pub use tag_rule::{TAG_RULE_SUFFIX, TagItem, TagRoute, TagRule, route_by_tag};
pub use weight::{DEFAULT_WARMUP_MS, DEFAULT_WEIGHT, effective_weight};
