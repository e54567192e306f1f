//! The migration rule an operator writes in the config centre for one consumer app:
//! key `{consumerApp}.migration`, group [`MIGRATION_GROUP`], read as Dubbo Java 3.3's
//! `MigrationRule` reads it:
//!
//! ```yaml
//! key: demo-consumer
//! step: APPLICATION_FIRST
//! threshold: 0.5
//! interfaces:
//!   - serviceKey: helloworld.Greeter:1.0.0   # {interface} or {interface}:{version}
//!     step: FORCE_INTERFACE
//! applications:
//!   - serviceKey: shop                       # a provider app
//!     step: FORCE_APPLICATION
//! ```
//!
//! The step of a subscription is, first found: its interface's entry, the entry of one of
//! its provider apps, the rule's `step`, then the consumer's own default (see
//! [`MigrationRule::step_for`]). `threshold`, `delay` and `force` are found the same way
//! ([`MigrationRule::settings_for`]) and applied as Java applies them to a move to a
//! `FORCE_*` step (see `subscribe/migration_move.rs`); `proportion` is read and checked
//! but not applied (`APPLICATION_FIRST` sends every call to the application level while it
//! has an endpoint).
//!
//! The text is untrusted: bounded before it is parsed, every field checked; a step Java
//! does not name (`MigrationStep.valueOf` throws) refuses the whole rule, and the
//! previous good rule stays.

use serde_yaml_ng::{Mapping, Value};

use super::MigrationStep;
use crate::error::Result;
use crate::governance::rule_yaml::{self, field, kind, rule_error, scalar_text};

/// The config-centre group Dubbo Java's `MigrationRuleListener` reads `{app}.migration`
/// from.
pub const MIGRATION_GROUP: &str = "DUBBO_SERVICEDISCOVERY_MIGRATION";

/// The suffix of a migration rule's key: `{consumerApp}.migration`.
pub const MIGRATION_SUFFIX: &str = ".migration";

/// The settings of a migration rule, for the whole rule or one of its entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MigrationSettings {
    /// `step`, when written.
    pub step: Option<MigrationStep>,
    /// `threshold`, when written.
    pub threshold: Option<f32>,
    /// `proportion`, when written.
    pub proportion: Option<i32>,
    /// `delay` (seconds), when written.
    pub delay: Option<i32>,
    /// `force`, when written.
    pub force: Option<bool>,
}

/// One entry of `interfaces` or `applications`: a `serviceKey` and its settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SubMigrationRule {
    /// `serviceKey`: `{interface}` or `{interface}:{version}` in `interfaces`, a provider
    /// app's name in `applications`. Absent when not written (the entry matches nothing).
    pub service_key: Option<String>,
    /// The entry's settings.
    pub settings: MigrationSettings,
}

/// A parsed migration rule. See the module docs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MigrationRule {
    /// `key`, as written (the consumer app, by convention; not checked, as in Java).
    pub key: Option<String>,
    /// The rule's own settings.
    pub settings: MigrationSettings,
    /// `interfaces`, in order.
    pub interfaces: Vec<SubMigrationRule>,
    /// `applications`, in order.
    pub applications: Vec<SubMigrationRule>,
}

impl MigrationRule {
    /// Parses `text`, the content of config key `key`, as Java's `MigrationRule.parse`
    /// would, refusing with [`Error::Rule`](crate::error::Error::Rule) what Java refuses (not a
    /// mapping, a `key` or `serviceKey` that is no string, an unknown step, a number that
    /// does not parse, an entry that is no mapping) and any text over the rule bound.
    pub fn parse(key: &str, text: &str) -> Result<MigrationRule> {
        let map = rule_yaml::load(key, text)?;
        Ok(MigrationRule {
            key: rule_yaml::string(key, &map, "key")?,
            settings: settings(key, &map, "")?,
            interfaces: entries(key, &map, "interfaces")?,
            applications: entries(key, &map, "applications")?,
        })
    }

    /// The step the rule gives a subscription to `service_key` (`{interface}` or
    /// `{interface}:{version}`, as [`display_service_key`] writes it) provided by
    /// `provider_apps`: the step of the interface's entry, else of the first of the apps
    /// with an entry that has one, else the rule's own; `None` when the rule says nothing
    /// for it (the consumer's default applies).
    pub fn step_for<'a>(
        &self,
        service_key: &str,
        provider_apps: impl IntoIterator<Item = &'a str>,
    ) -> Option<MigrationStep> {
        self.settings_for(service_key, provider_apps).step
    }

    /// The settings the rule gives a subscription, each field found as Java's
    /// `MigrationRule.getStep`, `getThreshold`, `getDelay`, `getForce` and
    /// `getProportion` find theirs: in the interface's entry, else in the first of the
    /// provider apps' entries that has it, else the rule's own.
    pub fn settings_for<'a>(
        &self,
        service_key: &str,
        provider_apps: impl IntoIterator<Item = &'a str>,
    ) -> MigrationSettings {
        let named =
            |entry: &&SubMigrationRule, key: &str| entry.service_key.as_deref() == Some(key);
        let mut layers: Vec<&MigrationSettings> = self
            .interfaces
            .iter()
            .filter(|e| named(e, service_key))
            .map(|e| &e.settings)
            .collect();
        for app in provider_apps {
            let entries = self.applications.iter().filter(|e| named(e, app));
            layers.extend(entries.map(|e| &e.settings));
        }
        layers.push(&self.settings);
        MigrationSettings {
            step: layers.iter().find_map(|s| s.step),
            threshold: layers.iter().find_map(|s| s.threshold),
            proportion: layers.iter().find_map(|s| s.proportion),
            delay: layers.iter().find_map(|s| s.delay),
            force: layers.iter().find_map(|s| s.force),
        }
    }
}

/// The key a migration rule's `interfaces` entry names a service by, as Java's
/// `URL.getDisplayServiceKey`: `{interface}`, or `{interface}:{version}` with a version.
pub fn display_service_key(interface: &str, version: Option<&str>) -> String {
    match version.filter(|v| !v.is_empty()) {
        Some(version) => format!("{interface}:{version}"),
        None => interface.to_owned(),
    }
}

/// The settings of `map`; `at` names the entry in messages.
fn settings(key: &str, map: &Mapping, at: &str) -> Result<MigrationSettings> {
    let step = match field(map, "step") {
        None => None,
        Some(Value::String(s)) => Some(step(key, s, at)?),
        Some(other) => {
            return Err(rule_error(
                key,
                format!("{at}step must be a step name, found {}", kind(other)),
            ));
        }
    };
    let threshold = match field(map, "threshold") {
        None => None,
        Some(value) => Some(
            scalar_text(value)
                .and_then(|t| t.trim().parse::<f32>().ok())
                .filter(|t| t.is_finite())
                .ok_or_else(|| rule_error(key, format!("{at}threshold must be a number")))?,
        ),
    };
    Ok(MigrationSettings {
        step,
        threshold,
        proportion: int(key, map, "proportion", at)?,
        delay: int(key, map, "delay", at)?,
        force: rule_yaml::boolean(map, "force"),
    })
}

/// `Integer.valueOf` of a field's text, when present.
fn int(key: &str, map: &Mapping, name: &str, at: &str) -> Result<Option<i32>> {
    rule_yaml::int(key, map, name)
        .map_err(|_| rule_error(key, format!("{at}{name} must be an integer")))
}

/// `MigrationStep.valueOf`: the exact names only.
fn step(key: &str, text: &str, at: &str) -> Result<MigrationStep> {
    [
        MigrationStep::ForceApplication,
        MigrationStep::ForceInterface,
        MigrationStep::ApplicationFirst,
    ]
    .into_iter()
    .find(|s| s.as_str() == text)
    .ok_or_else(|| {
        rule_error(
            key,
            format!(
                "{at}step {:?} is no step: FORCE_APPLICATION, FORCE_INTERFACE or \
                 APPLICATION_FIRST",
                crate::error::Error::shorten(text)
            ),
        )
    })
}

/// The entries of list `name`: absent or not a list reads as none (Java ignores it);
/// an item that is no mapping, or a `serviceKey` that is no string, refuses the rule.
fn entries(key: &str, map: &Mapping, name: &str) -> Result<Vec<SubMigrationRule>> {
    let Some(Value::Sequence(items)) = field(map, name) else {
        return Ok(Vec::new());
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{name}[{i}]: ");
            let Value::Mapping(entry) = item else {
                return Err(rule_error(
                    key,
                    format!("{at}expected a mapping, found {}", kind(item)),
                ));
            };
            let service_key = match field(entry, "serviceKey") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(rule_error(
                        key,
                        format!("{at}serviceKey must be a string, found {}", kind(other)),
                    ));
                }
            };
            Ok(SubMigrationRule {
                service_key,
                settings: settings(key, entry, &at)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    const KEY: &str = "shop.migration";

    fn parse(text: &str) -> Result<MigrationRule> {
        MigrationRule::parse(KEY, text)
    }

    #[test]
    fn a_full_rule_reads_as_java_reads_it() {
        let rule = parse(
            "key: shop\nstep: APPLICATION_FIRST\nthreshold: 0.5\nproportion: 60\ndelay: 30\n\
             force: false\ninterfaces:\n  - serviceKey: helloworld.Greeter:1.0.0\n    \
             step: FORCE_INTERFACE\n    threshold: 1\napplications:\n  - serviceKey: greeter-app\n    \
             step: FORCE_APPLICATION\n",
        )
        .unwrap();
        assert_eq!(rule.key.as_deref(), Some("shop"));
        assert_eq!(
            rule.settings,
            MigrationSettings {
                step: Some(MigrationStep::ApplicationFirst),
                threshold: Some(0.5),
                proportion: Some(60),
                delay: Some(30),
                force: Some(false),
            }
        );
        assert_eq!(rule.interfaces.len(), 1);
        assert_eq!(rule.interfaces[0].settings.threshold, Some(1.0));
        assert_eq!(
            rule.applications[0].service_key.as_deref(),
            Some("greeter-app")
        );
    }

    #[test]
    fn the_interface_entry_wins_then_an_app_entry_then_the_rule() {
        let rule = parse(
            "step: APPLICATION_FIRST\ninterfaces:\n  - serviceKey: a.A:1.0\n    step: FORCE_INTERFACE\n  \
             - serviceKey: b.B\n    threshold: 0.1\napplications:\n  - serviceKey: app-x\n    \
             step: FORCE_APPLICATION\n  - serviceKey: app-y\n    step: FORCE_INTERFACE\n",
        )
        .unwrap();
        let key = display_service_key("a.A", Some("1.0"));
        assert_eq!(
            rule.step_for(&key, ["app-x"]),
            Some(MigrationStep::ForceInterface)
        );
        // An entry without a step says nothing: the app's entry, then the rule, speak.
        assert_eq!(
            rule.step_for("b.B", ["app-y"]),
            Some(MigrationStep::ForceInterface)
        );
        assert_eq!(
            rule.step_for("b.B", ["other", "app-x", "app-y"]),
            Some(MigrationStep::ForceApplication)
        );
        assert_eq!(
            rule.step_for("b.B", []),
            Some(MigrationStep::ApplicationFirst)
        );
        // The version is part of the key; no version, no suffix.
        assert_eq!(display_service_key("a.A", None), "a.A");
        assert_eq!(display_service_key("a.A", Some("")), "a.A");
        assert_eq!(
            rule.step_for("a.A", []),
            Some(MigrationStep::ApplicationFirst)
        );
        let silent = parse("key: shop\nthreshold: 0.3").unwrap();
        assert_eq!(silent.step_for("a.A", ["app-x"]), None);
    }

    #[test]
    fn hostile_rules_are_refused_clearly() {
        let refused = |text: &str, says: &str| match parse(text) {
            Err(Error::Rule { key, reason, .. }) => {
                assert_eq!(key, KEY);
                assert!(reason.contains(says), "{text:?}: {reason}");
            }
            other => panic!("{text:?} was not refused: {other:?}"),
        };
        refused("step: SOMETIMES", "FORCE_INTERFACE");
        // Java's valueOf is exact.
        refused("step: force_interface", "is no step");
        refused("step: [FORCE_INTERFACE]", "step must be");
        refused(
            "interfaces:\n  - serviceKey: a\n    step: NEVER",
            "interfaces[0]: step",
        );
        refused(
            "interfaces:\n  - just-a-name",
            "interfaces[0]: expected a mapping",
        );
        refused(
            "applications:\n  - serviceKey: [a]",
            "serviceKey must be a string",
        );
        refused("key: [a]", "key must be a string");
        refused("threshold: half", "threshold must be a number");
        refused("threshold: .nan", "threshold must be a number");
        refused("delay: 1e99", "delay must be an integer");
        refused("proportion: 99999999999", "proportion must be an integer");
        refused("[1, 2]", "expected a mapping");
        refused("", "empty rule");
        refused("step: \"", "not YAML");
        let big = format!(
            "key: \"{}\"",
            "x".repeat(crate::config_item::MAX_RULE_BYTES)
        );
        refused(&big, "over the limit");
        let step = format!("step: {}", "X".repeat(10_000));
        match parse(&step) {
            Err(error) => assert!(error.to_string().len() < 1_000, "{error}"),
            Ok(_) => panic!("a long step was read"),
        }
        // Lists Java ignores (not lists) are ignored; unknown fields too.
        let rule =
            parse("interfaces: 3\napplications: {a: b}\nextra: 1\nstep: FORCE_INTERFACE").unwrap();
        assert!(rule.interfaces.is_empty() && rule.applications.is_empty());
        assert_eq!(rule.step_for("a", []), Some(MigrationStep::ForceInterface));
        // Alias bombs are bounded by the parser.
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n\
                    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n\
                    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n\
                    g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nstep: FORCE_INTERFACE";
        let _ = parse(bomb);
    }
}
