//! The routing stage: which providers a call may go to, and with what weight, from what
//! the providers publish, as Dubbo Java 3.3 routes. Pure: no I/O, no clock of its own.
//!
//! Data flows one way: discovery publishes what the registries say, unfiltered; routing
//! (here) turns it into the routed, weighted subset for one call's input; health and
//! balancing (`balance/`) then leave out set-aside endpoints and pick one.
//!
//! * `params`: what one endpoint's service parameters and instance record say for
//!   routing (`dubbo.tag`, `disabled`/`enabled`, `weight`, `{method}.weight`, `warmup`,
//!   `timestamp`), parsed as Java parses them; values that do not parse are kept as
//!   findings, never a panic.
//! * `weight`: the effective weight, Java's `AbstractLoadBalance.getWeight` with warm-up.
//! * `tag`: a call's tag ([`CallTag`]) and Java's static-tag selection.
//! * `pick`: the weighted choice among the routed, healthy endpoints.
//! * `facts`: what rules match against, one provider and one call.
//! * `tag_rule`: dynamic tag rules (`{providerApp}.tag-router`, [`TagRule`]) and the tag
//!   stage of routing ([`route_by_tag`]), Java's `TagStateRouter`; static tags alone when
//!   there is no valid, enabled rule.
//! * `configurator`: override rules (`{app}.configurators`,
//!   `{interface}:{version}:{group}.configurators`, [`Configurators`]) applied to a
//!   provider's parameters as a consumer sees them, or to a provider's own.
//! * `rule_yaml`: a rule's YAML read as Java's SnakeYAML maps and casts read it.
//! * `string_match`: the v3.0 match forms rules share (`exact`, `prefix`, `wildcard`,
//!   `empty`, `noempty`, `oneof`, address and parameter matches).
//! * `ip_pattern`: Java's IP expressions (`host`, `host:port`, `*`, ranges, CIDR).
//!
//! Rules are pure values here: parsing one from its text, and evaluating it against the
//! providers and a call. Reading them from the config centre is the caller's.

mod configurator;
mod facts;
mod ip_pattern;
mod params;
mod pick;
mod rule_yaml;
mod string_match;
mod tag;
mod tag_rule;
mod weight;

pub use configurator::{
    CONFIGURATORS_SUFFIX, Configurators, configure_for_consumer, configure_for_provider,
};
pub use facts::{CallFacts, MAX_RULE_BYTES, ProviderFacts};
pub use params::{BadParam, RouteParams};
pub(crate) use pick::pick;
pub use tag::CallTag;
pub(crate) use tag::{TagSelection, select_by_tag};
pub use tag_rule::{TAG_RULE_SUFFIX, TagRoute, TagRule, route_by_tag};
pub use weight::{DEFAULT_WARMUP_MS, DEFAULT_WEIGHT, effective_weight};
