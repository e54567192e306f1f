//! The header every governance rule document starts with, as Java's `AbstractRouterRule`
//! and `ConfiguratorConfig` read it: `key`, `configVersion`, `scope`, `enabled`, `force`,
//! `runtime`, `priority`, `valid`. Read once here for configurators, tag rules and
//! condition rules alike; each kind then says which `configVersion`s it takes and what
//! `valid: false` means to it.
//!
//! Each kind reads the fields Java reads for it (configurators read no `rawRule` nor
//! `priority`), in the words its errors have always used.

mod fields;

use serde_yaml_ng::{Mapping, Value};

use super::rule_yaml::{self, boolean, field, int, int_value, rule_error, scalar_text, str_value};
use crate::error::Error;
use fields::unknown_fields;

/// Which kind of rule a header is read for: which fields it checks, and its errors' words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleForm {
    /// An override document (`{key}.configurators`).
    Configurators,
    /// A tag rule (`{app}.tag-router`).
    TagRule,
    /// A condition rule (`{key}.condition-router`).
    ConditionRule,
}

/// The common fields of one rule document, with Java's defaults: read once for every rule
/// kind, so that each reads them alike. Its fields read through [`Governed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleHeader {
    /// `key` as written: the application or service the rule is for.
    pub(crate) rule_key: Option<String>,
    /// `configVersion` as written.
    pub(crate) config_version: Option<String>,
    /// `scope` as written (`application` or `service`).
    pub(crate) scope: Option<String>,
    /// `enabled`, default true.
    pub(crate) enabled: bool,
    /// `force`, default false.
    pub(crate) force: bool,
    /// `runtime`, default true.
    pub(crate) runtime: bool,
    /// `priority`, default 0 (not read for configurators).
    pub(crate) priority: i32,
    /// `valid`, default true.
    pub(crate) valid: bool,
    /// What the operator should hear of that does not change the outcome: fields Java
    /// ignores, each named with the known one it is closest to.
    pub(crate) notes: Vec<String>,
}

impl RuleHeader {
    /// A document without a header of its own (the legacy list of override URLs): Java's
    /// defaults, no version.
    pub(crate) fn defaults() -> RuleHeader {
        RuleHeader {
            rule_key: None,
            config_version: None,
            scope: None,
            enabled: true,
            force: false,
            runtime: true,
            priority: 0,
            valid: true,
            notes: Vec::new(),
        }
    }

    /// Reads the header of the document `map` stored under `key`, as `form` reads it.
    /// A field Java casts and finds of the wrong type fails the rule.
    pub(crate) fn read(
        key: &str,
        map: &Mapping,
        form: RuleForm,
    ) -> crate::error::Result<RuleHeader> {
        let text = |name: &str| string(key, map, name, form);
        if form != RuleForm::Configurators {
            // Java casts it to a String, and fails on anything else.
            text("rawRule")?;
        }
        if let Some(number @ Value::Number(_)) = field(map, "configVersion") {
            // Java casts it to a String and throws: the previous rule stays there too.
            let written = scalar_text(number).unwrap_or_default();
            let reason = format!(
                "configVersion {written} is a number (YAML reads it unquoted as one, and Java \
                 refuses it); write configVersion: v{written}"
            );
            return Err(match form {
                RuleForm::ConditionRule => condition_error(key, reason),
                _ => rule_error(key, reason),
            });
        }
        let config_version = text("configVersion")?;
        let scope = text("scope")?;
        let rule_key = text("key")?;
        let priority = match form {
            RuleForm::Configurators => 0,
            RuleForm::TagRule => int(key, map, "priority")?.unwrap_or(0),
            RuleForm::ConditionRule => field(map, "priority")
                .map(|v| int_value(v, "priority"))
                .transpose()
                .map_err(|reason| condition_error(key, reason))?
                .unwrap_or(0),
        };
        Ok(RuleHeader {
            rule_key,
            config_version,
            scope,
            enabled: boolean(map, "enabled").unwrap_or(true),
            force: boolean(map, "force").unwrap_or(false),
            runtime: boolean(map, "runtime").unwrap_or(true),
            priority,
            valid: boolean(map, "valid").unwrap_or(true),
            notes: unknown_fields(map, form),
        })
    }

    /// Whether a configurator document or a tag rule is of the v3.0 form, as Java reads
    /// its version there (`AbstractConfigurator.configureIfMatch`, `Tag.parseFromMap`,
    /// `TagRouterRule.init`): `startsWith("v3.0")`, case-sensitive, so `v3.0.1` is and
    /// `V3.0`, `v3`, `v3.1`, `v2.7` and none are not (their `match` is not read; a
    /// configurator's items then take the pre-v3.0 `~key` conditions). Any such version is
    /// taken.
    ///
    /// A version above `v3.1` (see [`above_v31`]), which no Dubbo release defines, is
    /// refused, the previous rule staying. Java 3.3 applies it as a pre-v3.0 rule (neither
    /// reader checks an upper bound): a defect, which would read a later form's fields as
    /// this one's. (`_taken`, what a caller once said it took, is no longer read: every
    /// kind takes the same versions.)
    pub(crate) fn is_v30(&self, key: &str, _taken: &str) -> crate::error::Result<bool> {
        match self.config_version.as_deref() {
            Some(v) if above_v31(v) => Err(rule_error(
                key,
                format!(
                    "configVersion {:?} is above v3.1, which no Dubbo release defines \
                     (write v2.7, v3.0 or v3.1)",
                    Error::shorten(v)
                ),
            )),
            version => Ok(version.is_some_and(|v| v.starts_with("v3.0"))),
        }
    }
}

/// Whether `version` is above `v3.1` as Java's condition rules compare it
/// (`ConditionRuleParser.parse`): not `v3.1…` in any case, and after `v3.1` in
/// `compareToIgnoreCase` order. So `v2.7`, `v3`, `v3.0.2`, `V3.0` and `3.0` are not;
/// `v3.2`, `v4` and `v9.9` are.
pub(crate) fn above_v31(version: &str) -> bool {
    const V31: &str = "v3.1";
    let lower = |s: &str| -> Vec<u16> {
        s.chars()
            .flat_map(char::to_lowercase)
            .collect::<String>()
            .encode_utf16()
            .collect()
    };
    let (v, limit) = (lower(version), lower(V31));
    !v.starts_with(&limit) && v > limit
}

/// A rule document read with a [`RuleHeader`]: its header's fields, read the same way on
/// every rule kind ([`Configurators`](super::Configurators), [`TagRule`](super::TagRule),
/// [`ConditionRule`](super::ConditionRule)) and on the header itself.
pub trait Governed {
    /// The header the document was read with.
    fn header(&self) -> &RuleHeader;

    /// Its `configVersion` as written (absent, `v2.7`, `v3.0…`, `v3.1` as the kind takes).
    fn config_version(&self) -> Option<&str> {
        self.header().config_version.as_deref()
    }

    /// Its `scope` as written (`application` or `service`); only configurators act on it
    /// (`application`, else service scope), as Java.
    fn scope(&self) -> Option<&str> {
        self.header().scope.as_deref()
    }

    /// Its own `key` field as written: the application or the service
    /// (`group/interface:version`) it is for.
    fn rule_key(&self) -> Option<&str> {
        self.header().rule_key.as_deref()
    }

    /// Whether it applies at all (`enabled`, default true).
    fn enabled(&self) -> bool {
        self.header().enabled
    }

    /// Whether a rule that matches none of a call's providers leaves the call none rather
    /// than falling back (`force`, default false): a condition rule's `then`, a tag rule's
    /// tag group. Configurators read it and do not act on it, as Java.
    fn force(&self) -> bool {
        self.header().force
    }

    /// Its `runtime` flag (default true; informational: routing here is per call in any
    /// case).
    fn runtime(&self) -> bool {
        self.header().runtime
    }

    /// What was noticed in it that changes nothing: fields Java ignores, each with the
    /// known field it is closest to (`condition` for `conditions`), so a console can show
    /// an operator the likely typo.
    fn notes(&self) -> &[String] {
        &self.header().notes
    }

    /// Its `priority` (default 0; informational: one tag rule applies per application, and
    /// Java does not order condition rules by it; configurators do not read it).
    fn priority(&self) -> i32 {
        self.header().priority
    }
}

impl Governed for RuleHeader {
    fn header(&self) -> &RuleHeader {
        self
    }
}

/// `(String) map.get(name)`: absent, or a string; anything else fails the rule, in the
/// words of `form`.
fn string(
    key: &str,
    map: &Mapping,
    name: &str,
    form: RuleForm,
) -> crate::error::Result<Option<String>> {
    if form != RuleForm::ConditionRule {
        return rule_yaml::string(key, map, name);
    }
    field(map, name)
        .map(|v| str_value(v, name).map(str::to_owned))
        .transpose()
        .map_err(|reason| condition_error(key, reason))
}

/// A condition rule's error: its key as stored, not shortened.
fn condition_error(key: &str, reason: String) -> Error {
    Error::Rule {
        key: key.to_owned(),
        reason,
        source: None,
    }
}
