//! The top-level fields each rule kind reads, to name the ones a document holds that no
//! Java reader reads (a typo such as `condition:` for `conditions:`) with the known field
//! they are closest to. Java ignores them; so does the outcome here: they are notes.

use serde_yaml_ng::Mapping;

use super::RuleForm;
use crate::error::Error;
use crate::governance::rule_yaml::scalar_text;

/// What `AbstractRouterRule.parseFromMap0` reads for every router rule.
const ROUTER_FIELDS: [&str; 10] = [
    "rawRule",
    "runtime",
    "force",
    "valid",
    "enabled",
    "priority",
    "dynamic",
    "scope",
    "key",
    "configVersion",
];

/// What `ConfiguratorConfig.parseFromMap` reads.
const CONFIGURATOR_FIELDS: [&str; 5] = ["configVersion", "scope", "key", "enabled", "configs"];

/// At most this many unknown fields are named, so a hostile document's notes stay short.
const MAX_NOTES: usize = 8;

/// The fields `form` reads.
fn known(form: RuleForm) -> Vec<&'static str> {
    match form {
        RuleForm::Configurators => CONFIGURATOR_FIELDS.to_vec(),
        RuleForm::TagRule => [ROUTER_FIELDS.as_slice(), &["tags"]].concat(),
        RuleForm::ConditionRule => [ROUTER_FIELDS.as_slice(), &["conditions"]].concat(),
    }
}

/// One note per top-level field of `map` that `form` does not read, naming the closest
/// known field when one is near (a small edit away, or differing in case or a plural).
pub(super) fn unknown_fields(map: &Mapping, form: RuleForm) -> Vec<String> {
    let known = known(form);
    let mut notes: Vec<String> = map
        .keys()
        .filter_map(scalar_text)
        .filter(|name| !known.contains(&name.as_str()))
        .take(MAX_NOTES)
        .map(|name| {
            let shown = Error::shorten(&name);
            match closest(&name, &known) {
                Some(near) => {
                    format!("unknown field {shown:?}, which Java ignores: did you mean {near:?}?")
                }
                None => format!("unknown field {shown:?}, which Java ignores"),
            }
        })
        .collect();
    notes.sort();
    notes
}

/// The known field `name` is closest to, if any is within two edits of it ignoring case.
pub(crate) fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    if name.chars().count() > 64 {
        return None;
    }
    let name = name.to_lowercase();
    known
        .iter()
        .map(|k| (distance(&name, &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b`, by chars (both are short).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(yaml: &str, form: RuleForm) -> Vec<String> {
        let map: Mapping = serde_yaml_ng::from_str(yaml).expect("yaml");
        unknown_fields(&map, form)
    }

    #[test]
    fn a_misspelt_field_is_named_with_the_field_meant() {
        let found = notes(
            "condition: ['=> a = b']\nenabled: true",
            RuleForm::ConditionRule,
        );
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("\"condition\"") && found[0].contains("\"conditions\""));
        let tag = notes("tag: []\nforce: true", RuleForm::TagRule);
        assert!(tag[0].contains("did you mean \"tags\""), "{tag:?}");
        let configs = notes("config: []\nconfigversion: v3.0", RuleForm::Configurators);
        assert_eq!(configs.len(), 2, "{configs:?}");
        assert!(
            configs
                .iter()
                .any(|n| n.contains("did you mean \"configs\""))
        );
        assert!(
            configs
                .iter()
                .any(|n| n.contains("did you mean \"configVersion\""))
        );
    }

    #[test]
    fn known_fields_are_quiet_and_far_ones_name_no_field() {
        assert!(
            notes(
                "conditions: []\nforce: true\nrawRule: x",
                RuleForm::ConditionRule
            )
            .is_empty()
        );
        assert!(notes("configs: []\nforce: true", RuleForm::Configurators)[0].contains("force"));
        let far = notes("somethingelse: 1", RuleForm::TagRule);
        assert!(!far[0].contains("did you mean"), "{far:?}");
        let many: String = (0..50).map(|i| format!("f{i}: 1\n")).collect();
        assert_eq!(notes(&many, RuleForm::TagRule).len(), MAX_NOTES);
    }
}
