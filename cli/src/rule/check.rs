//! How a parsed rule reads: its settings, then per item, tag or condition what it targets
//! and what it changes, as a table for people ([`text`]) and as JSON for scripts
//! ([`json()`]). The two show the same fields.

use std::fmt::Write as _;

use introspect::governance::migration::{MigrationSettings, SubMigrationRule};
use introspect::governance::{
    ConditionRule, ConditionVersion, ConfiguratorItem, Configurators, Governed, TagRule,
};
use serde_json::{Value, json};

use super::form::ParsedRule;

/// The rule as JSON: `form`, its settings, and its `items`, `tags` or `conditions`.
pub fn json(rule: &ParsedRule) -> Value {
    match rule {
        ParsedRule::Configurators(doc) => json!({
            "form": "configurators",
            "configVersion": doc.config_version(),
            "scope": doc.scope(),
            "key": doc.rule_key(),
            "enabled": doc.enabled(),
            "items": doc.configs().iter().map(item_json).collect::<Vec<_>>(),
        }),
        ParsedRule::Tag(rule) => json!({
            "form": "tag rule",
            "configVersion": rule.config_version(),
            "scope": rule.scope(),
            "key": rule.rule_key(),
            "enabled": rule.enabled(),
            "force": rule.force(),
            "valid": rule.is_valid(),
            "tags": rule.tags().map(|t| json!({
                "name": t.name, "addresses": t.addresses, "match": t.match_text,
            })).collect::<Vec<_>>(),
        }),
        ParsedRule::Condition(rule) => json!({
            "form": "condition rule",
            "configVersion": version(rule),
            "scope": rule.scope(),
            "key": rule.rule_key(),
            "enabled": rule.enabled(),
            "force": rule.force(),
            "conditions": rule.conditions().iter().map(|c| json!({
                "when": c.when,
                "then": c.then.iter().map(|(then, weight)| json!({"match": then, "weight": weight})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }),
        ParsedRule::Migration(rule) => {
            let mut out = settings_json(&rule.settings);
            out["form"] = json!("migration rule");
            out["key"] = json!(rule.key);
            let entries = |entries: &[SubMigrationRule]| {
                entries
                    .iter()
                    .map(|e| {
                        let mut entry = settings_json(&e.settings);
                        entry["serviceKey"] = json!(e.service_key);
                        entry
                    })
                    .collect::<Vec<_>>()
            };
            out["interfaces"] = json!(entries(&rule.interfaces));
            out["applications"] = json!(entries(&rule.applications));
            out
        }
    }
}

/// A migration rule's settings (the rule's or an entry's), as written.
fn settings_json(settings: &MigrationSettings) -> Value {
    json!({
        "step": settings.step.map(|s| s.as_str()),
        "threshold": settings.threshold,
        "proportion": settings.proportion,
        "delay": settings.delay,
        "force": settings.force,
    })
}

fn item_json(item: &ConfiguratorItem) -> Value {
    let parameters: serde_json::Map<String, Value> = item
        .parameters
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "side": item.side,
        "addresses": item.addresses,
        "providerAddresses": item.provider_addresses,
        "services": item.services,
        "applications": item.applications,
        "match": item.match_text,
        "type": item.kind,
        "enabled": item.enabled,
        "parameters": parameters,
    })
}

/// The form of a condition rule's conditions, as its `configVersion` names it.
fn version(rule: &ConditionRule) -> &'static str {
    match rule.version() {
        ConditionVersion::V31 => "v3.1",
        _ => "v3.0",
    }
}

/// The rule as lines for people: a header of its settings, then one block per item.
pub fn text(rule: &ParsedRule) -> String {
    let mut t = String::new();
    match rule {
        ParsedRule::Configurators(doc) => configurators(&mut t, doc),
        ParsedRule::Tag(rule) => tag_rule(&mut t, rule),
        ParsedRule::Condition(rule) => condition_rule(&mut t, rule),
        ParsedRule::Migration(rule) => {
            let _ = writeln!(
                t,
                "migration rule  key {}  step {}",
                shown(rule.key.as_deref()),
                rule.settings
                    .step
                    .map_or("(absent: the consumer's own default)", |s| s.as_str())
            );
            let lists = [
                ("interface", &rule.interfaces),
                ("application", &rule.applications),
            ];
            for (what, entries) in lists {
                for entry in entries {
                    let _ = writeln!(
                        t,
                        "  {what} {}  step {}",
                        shown(entry.service_key.as_deref()),
                        entry.settings.step.map_or("(the rule's)", |s| s.as_str())
                    );
                }
            }
        }
    }
    t
}

/// An optional field as shown: `-` when absent.
fn shown(value: Option<&str>) -> &str {
    value.unwrap_or("-")
}

fn configurators(t: &mut String, doc: &Configurators) {
    let _ = writeln!(
        t,
        "configurators  configVersion {}  scope {}  key {}  enabled {}",
        doc.config_version().unwrap_or("(absent: v2.7)"),
        doc.scope().unwrap_or("(absent: service)"),
        shown(doc.rule_key()),
        doc.enabled()
    );
    for (i, item) in doc.configs().iter().enumerate() {
        let _ = writeln!(
            t,
            "item {}: side {}",
            i + 1,
            item.side.as_deref().unwrap_or("(absent: never applies)")
        );
        let list = |values: &[String], none: &str| {
            if values.is_empty() {
                none.to_owned()
            } else {
                values.join(", ")
            }
        };
        let _ = writeln!(
            t,
            "  addresses: {}",
            list(&item.addresses, "(none: every host)")
        );
        for (name, values) in [
            ("providerAddresses", &item.provider_addresses),
            ("services", &item.services),
            ("applications", &item.applications),
        ] {
            if !values.is_empty() {
                let _ = writeln!(t, "  {name}: {}", values.join(", "));
            }
        }
        if let Some(matched) = &item.match_text {
            let _ = writeln!(t, "  match: {matched}");
        }
        if let Some(kind) = &item.kind {
            let enabled = item
                .enabled
                .map_or("(absent: false)".to_owned(), |e| e.to_string());
            let _ = writeln!(t, "  type: {kind}  enabled: {enabled}");
        }
        let sets: Vec<String> = item
            .parameters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(t, "  sets: {}", sets.join(", "));
    }
}

fn tag_rule(t: &mut String, rule: &TagRule) {
    let _ = writeln!(
        t,
        "tag rule  configVersion {}  scope {}  key {}  enabled {}  force {}  valid {}",
        rule.config_version().unwrap_or("(absent)"),
        shown(rule.scope()),
        shown(rule.rule_key()),
        rule.enabled(),
        rule.force(),
        rule.is_valid()
    );
    if !rule.is_active() {
        let _ = writeln!(
            t,
            "  (not routing: {}; static tags alone apply)",
            if rule.is_valid() {
                "disabled"
            } else {
                "no tags"
            }
        );
    }
    for tag in rule.tags() {
        let _ = write!(t, "tag {}:", tag.name.unwrap_or("(unnamed)"));
        if !tag.addresses.is_empty() {
            let _ = write!(t, " addresses {}", tag.addresses.join(", "));
        }
        if let Some(matched) = tag.match_text {
            let _ = write!(t, " match {matched}");
        }
        let _ = writeln!(t);
    }
}

fn condition_rule(t: &mut String, rule: &ConditionRule) {
    let _ = writeln!(
        t,
        "condition rule  configVersion {}  scope {}  key {}  enabled {}  force {}",
        version(rule),
        shown(rule.scope()),
        shown(rule.rule_key()),
        rule.enabled(),
        rule.force()
    );
    if !rule.enabled() && rule.version() == ConditionVersion::V30 {
        let _ = writeln!(t, "  (disabled: its conditions are not read)");
    }
    for (i, condition) in rule.conditions().iter().enumerate() {
        let when = match condition.when.trim() {
            "" | "true" => "(every call)",
            when => when,
        };
        let then: Vec<String> = condition
            .then
            .iter()
            .map(|(then, weight)| {
                let then = match then.trim() {
                    "" | "false" => "(every provider)",
                    then => then,
                };
                match weight {
                    Some(w) => format!("{then} (weight {w})"),
                    None => then.to_owned(),
                }
            })
            .collect();
        let then = if then.is_empty() {
            "(no provider)".to_owned()
        } else {
            then.join("; ")
        };
        let _ = writeln!(t, "condition {}: when {when}  then {then}", i + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::RuleForm;

    fn read(form: RuleForm, text: &str) -> ParsedRule {
        ParsedRule::parse(form, form.sample_key(), text).unwrap()
    }

    #[test]
    fn configurators_show_targets_and_changes() {
        let rule = read(
            RuleForm::Configurators,
            "configVersion: v3.0\nscope: application\nkey: shop-web\nenabled: true\nconfigs:\n  - side: consumer\n    addresses: [10.0.0.9]\n    providerAddresses: ['10.0.0.7:20880']\n    parameters:\n      weight: 200\n",
        );
        let shown = text(&rule);
        assert!(
            shown.contains("configVersion v3.0  scope application  key shop-web  enabled true"),
            "{shown}"
        );
        assert!(shown.contains("item 1: side consumer"), "{shown}");
        assert!(shown.contains("addresses: 10.0.0.9"), "{shown}");
        assert!(
            shown.contains("providerAddresses: 10.0.0.7:20880"),
            "{shown}"
        );
        assert!(shown.contains("sets: weight=200"), "{shown}");
        let value = json(&rule);
        assert_eq!(value["items"][0]["parameters"]["weight"], "200");
        assert_eq!(value["items"][0]["providerAddresses"][0], "10.0.0.7:20880");
    }

    #[test]
    fn tag_and_condition_rules_show_their_tags_and_conditions() {
        let rule = read(
            RuleForm::Tag,
            "force: true\nkey: shop\ntags:\n  - name: gray\n    addresses: ['10.0.0.7:20880']\n",
        );
        let shown = text(&rule);
        assert!(shown.contains("force true"), "{shown}");
        assert!(
            shown.contains("tag gray: addresses 10.0.0.7:20880"),
            "{shown}"
        );
        let rule = read(
            RuleForm::Condition,
            "scope: service\nkey: helloworld.Greeter\nconditions:\n  - method = SayHello => port != 50052\n  - host = 10.0.0.9 =>\n",
        );
        let shown = text(&rule);
        assert!(
            shown.contains("condition 1: when method = SayHello  then port != 50052"),
            "{shown}"
        );
        assert!(
            shown.contains("condition 2: when host = 10.0.0.9  then (no provider)"),
            "{shown}"
        );
        assert_eq!(
            json(&rule)["conditions"][0]["then"][0]["match"],
            "port != 50052"
        );
        let rule = read(
            RuleForm::Condition,
            "configVersion: v3.1\nconditions:\n  - from: {match: env=gray}\n    to:\n      - {match: env=gray, weight: 20}\n",
        );
        assert!(text(&rule).contains("when env=gray  then env=gray (weight 20)"));
    }
}
