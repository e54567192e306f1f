//! Which rule a config key holds, from its suffix (as Dubbo names its keys), or which one a
//! text looks like; and parsing a text as that rule with the library's own parsers, the
//! ones consumers use, so a rule is refused before it is written exactly when a consumer
//! would refuse it.

use introspect::Error;
use introspect::governance::{
    CONFIGURATORS_SUFFIX, ConditionRule, Configurators, MAX_RULE_BYTES, TAG_RULE_SUFFIX, TagRule,
};
use serde_yaml_ng::{Mapping, Value};

pub use introspect::governance::migration::MIGRATION_GROUP;
use introspect::governance::migration::{MIGRATION_SUFFIX, MigrationRule};

/// The suffix of a condition rule's key.
const CONDITION_SUFFIX: &str = ".condition-router";

/// The forms of rule the tool checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleForm {
    /// Override rules, `{app}.configurators` or `{service}.configurators`.
    Configurators,
    /// A tag rule, `{providerApp}.tag-router`.
    Tag,
    /// A condition rule, `{service|app}.condition-router`.
    Condition,
    /// An application's migration rule, `{app}.migration` in [`MIGRATION_GROUP`]: checked
    /// as YAML with a known `step` only.
    Migration,
}

impl RuleForm {
    /// The form a key's suffix names; `None` for any other key.
    pub fn of_key(key: &str) -> Option<RuleForm> {
        [
            (CONFIGURATORS_SUFFIX, RuleForm::Configurators),
            (TAG_RULE_SUFFIX, RuleForm::Tag),
            (CONDITION_SUFFIX, RuleForm::Condition),
            (MIGRATION_SUFFIX, RuleForm::Migration),
        ]
        .into_iter()
        .find(|(suffix, _)| key.len() > suffix.len() && key.ends_with(suffix))
        .map(|(_, form)| form)
    }

    /// The form a rule text looks like from its top-level fields (`configs`, `tags`,
    /// `conditions`, `step`); the error says why none could be told (not a YAML mapping,
    /// or none of those fields).
    pub fn guess(text: &str) -> Result<RuleForm, String> {
        let map = mapping(text)?;
        [
            ("configs", RuleForm::Configurators),
            ("tags", RuleForm::Tag),
            ("conditions", RuleForm::Condition),
            ("step", RuleForm::Migration),
        ]
        .into_iter()
        .find(|(field, _)| map.contains_key(*field))
        .map(|(_, form)| form)
        .ok_or_else(|| {
            "cannot tell which rule it is: it has no configs, tags, conditions or step \
             (give its key)"
                .to_owned()
        })
    }

    /// The form's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            RuleForm::Configurators => "configurators",
            RuleForm::Tag => "tag rule",
            RuleForm::Condition => "condition rule",
            RuleForm::Migration => "migration rule",
        }
    }

    /// A key for a text checked without one, so messages name what it was read as.
    pub fn sample_key(self) -> &'static str {
        match self {
            RuleForm::Configurators => "(file).configurators",
            RuleForm::Tag => "(file).tag-router",
            RuleForm::Condition => "(file).condition-router",
            RuleForm::Migration => "(file).migration",
        }
    }
}

/// A rule parsed as its form.
#[derive(Clone, Debug)]
pub enum ParsedRule {
    /// Override rules.
    Configurators(Configurators),
    /// A tag rule.
    Tag(TagRule),
    /// A condition rule.
    Condition(ConditionRule),
    /// A migration rule, parsed as consumers parse it.
    Migration(MigrationRule),
}

impl ParsedRule {
    /// Parses `text` as the rule `form` under `key`, as a consumer would; the error is the
    /// parser's, naming `key`.
    pub fn parse(form: RuleForm, key: &str, text: &str) -> Result<ParsedRule, Error> {
        Ok(match form {
            RuleForm::Configurators => ParsedRule::Configurators(Configurators::parse(key, text)?),
            RuleForm::Tag => ParsedRule::Tag(TagRule::parse(key, text)?),
            RuleForm::Condition => ParsedRule::Condition(ConditionRule::parse(key, text)?),
            RuleForm::Migration => ParsedRule::Migration(MigrationRule::parse(key, text)?),
        })
    }

    /// Parses `text` as [`ParsedRule::parse`] does, refusing first a text whose fields
    /// are another form's (a condition rule under a `.tag-router` key would parse there
    /// as a tag rule without tags, and route nothing).
    pub fn parse_checked(form: RuleForm, key: &str, text: &str) -> Result<ParsedRule, Error> {
        if let Ok(looks) = RuleForm::guess(text)
            && looks != form
        {
            return Err(Error::Rule {
                key: key.to_owned(),
                reason: format!(
                    "its fields are those of a {}, but the key names a {}",
                    looks.name(),
                    form.name()
                ),
                source: None,
            });
        }
        ParsedRule::parse(form, key, text)
    }

    /// The form it was parsed as.
    pub fn form(&self) -> RuleForm {
        match self {
            ParsedRule::Configurators(_) => RuleForm::Configurators,
            ParsedRule::Tag(_) => RuleForm::Tag,
            ParsedRule::Condition(_) => RuleForm::Condition,
            ParsedRule::Migration(_) => RuleForm::Migration,
        }
    }
}

/// The top-level mapping of a text, bounded before it is parsed.
fn mapping(text: &str) -> Result<Mapping, String> {
    if text.len() > MAX_RULE_BYTES {
        return Err(format!(
            "{} bytes, over the limit of {MAX_RULE_BYTES}",
            text.len()
        ));
    }
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(Value::Mapping(map)) => Ok(map),
        Ok(Value::Null) => Err("empty rule".to_owned()),
        Ok(_) => Err("expected a mapping of fields".to_owned()),
        Err(e) => Err(format!("not YAML: {}", short(&e.to_string()))),
    }
}

/// A parser's message cut to a line's length (it may quote the rule).
fn short(message: &str) -> String {
    const MAX: usize = 200;
    match message.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}

/// Checks `text` as the rule `key` names before it is written to `group`. A key of no
/// known form is refused unless `force_unknown`; so is a migration rule outside
/// [`MIGRATION_GROUP`], where Java never reads one. Returns the parsed rule, if checked.
pub fn check_for_write(
    key: &str,
    group: &str,
    text: &str,
    force_unknown: bool,
) -> Result<Option<ParsedRule>, Error> {
    let form = RuleForm::of_key(key).filter(|form| {
        // A migration rule is one only where Java reads it.
        *form != RuleForm::Migration || group == MIGRATION_GROUP
    });
    match form {
        Some(form) => ParsedRule::parse_checked(form, key, text).map(Some),
        None if force_unknown => Ok(None),
        None => Err(Error::Rule {
            key: key.to_owned(),
            reason: format!(
                "not a rule key this tool checks (.configurators, .tag-router, \
                 .condition-router in any group; .migration in group {MIGRATION_GROUP}); \
                 pass --force-unknown to write it unchecked"
            ),
            source: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_form_and_texts_are_guessed() {
        assert_eq!(
            RuleForm::of_key("shop.configurators"),
            Some(RuleForm::Configurators)
        );
        assert_eq!(
            RuleForm::of_key("com.foo.Svc:1.0:g.condition-router"),
            Some(RuleForm::Condition)
        );
        assert_eq!(RuleForm::of_key("shop.tag-router"), Some(RuleForm::Tag));
        assert_eq!(
            RuleForm::of_key("shop.migration"),
            Some(RuleForm::Migration)
        );
        assert_eq!(RuleForm::of_key(".tag-router"), None);
        assert_eq!(RuleForm::of_key("shop.script-router"), None);
        assert_eq!(RuleForm::guess("configs: []"), Ok(RuleForm::Configurators));
        assert_eq!(RuleForm::guess("key: a\ntags: []"), Ok(RuleForm::Tag));
        assert_eq!(
            RuleForm::guess("conditions: [a=b]"),
            Ok(RuleForm::Condition)
        );
        assert_eq!(
            RuleForm::guess("step: FORCE_INTERFACE"),
            Ok(RuleForm::Migration)
        );
        assert!(
            RuleForm::guess("key: a")
                .unwrap_err()
                .contains("cannot tell")
        );
        assert!(RuleForm::guess("[a").unwrap_err().contains("not YAML"));
    }

    #[test]
    fn writes_are_checked_as_the_key_says() {
        let tag = "key: shop\ntags:\n  - name: gray\n    addresses: [10.0.0.7]\n";
        assert!(matches!(
            check_for_write("shop.tag-router", "dubbo", tag, false),
            Ok(Some(ParsedRule::Tag(_)))
        ));
        // A tag rule under a condition key is refused, naming both forms.
        let err = check_for_write("shop.condition-router", "dubbo", tag, false).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("shop.condition-router") && err.contains("those of a tag rule"),
            "{err}"
        );
        let err = check_for_write("shop.tag-router", "dubbo", "force: 1\ntags: 3", false);
        assert!(
            err.is_ok(),
            "a tags that is no list leaves the rule invalid, as Java"
        );
        let err = check_for_write("shop.script-router", "dubbo", tag, false).unwrap_err();
        assert!(err.to_string().contains("--force-unknown"), "{err}");
        assert!(matches!(
            check_for_write("shop.script-router", "dubbo", tag, true),
            Ok(None)
        ));
        let step = "key: shop\nstep: FORCE_APPLICATION\n";
        assert!(matches!(
            check_for_write("shop.migration", MIGRATION_GROUP, step, false),
            Ok(Some(ParsedRule::Migration(_)))
        ));
        assert!(check_for_write("shop.migration", "dubbo", step, false).is_err());
        let bad = check_for_write("shop.migration", MIGRATION_GROUP, "step: SOMETIMES", false);
        assert!(bad.unwrap_err().to_string().contains("FORCE_INTERFACE"));
        assert!(check_for_write("shop.migration", MIGRATION_GROUP, "[1]", false).is_err());
    }
}
