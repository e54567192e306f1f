//! Whether a rule sits where it is read. Consumers and providers read rules by config key
//! only, as Dubbo Java does (a service's rules under `{interface}:{version}:{group}`, an
//! application's under its name), whatever the document's own `key` and `scope` say: a
//! rule written under another key is never read, silently. This says which key a document
//! implies (so a write under another one is refused), and which keys present in the config
//! centre no known member reads (a misplaced key, or one of an interface or app nobody
//! knows).

use std::collections::BTreeSet;

use introspect::governance::service_key;
use serde_yaml_ng::Value;

use super::RuleForm;

/// The config key a rule document names by its `key` and `scope`, as Java would key it:
/// scope `service`, key `[group/]interface[:version]` → `interface:version:group` plus the
/// form's suffix; scope `application` (a tag or migration rule is one always), key `app`
/// → `app` plus the suffix. `None` when the document names no key (nothing to compare).
/// The error says why no key can hold it (a tag rule of scope `service`).
pub fn implied_key(form: RuleForm, text: &str) -> Result<Option<String>, String> {
    let Ok(Value::Mapping(map)) = serde_yaml_ng::from_str::<Value>(text) else {
        return Ok(None);
    };
    let field = |name: &str| {
        map.get(name)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let Some(key) = field("key") else {
        return Ok(None);
    };
    let scope = field("scope");
    let suffix = suffix(form);
    let by_service = match (form, scope) {
        (RuleForm::Tag | RuleForm::Migration, Some("service")) => {
            return Err(format!(
                "it says scope service, but a {} is read per application only",
                form.name()
            ));
        }
        (RuleForm::Tag | RuleForm::Migration, _) => false,
        (_, Some("service")) => true,
        (_, Some("application")) => false,
        // No scope, or one Java does not know: a key that reads as a service's is one.
        (_, _) => key.contains('/') || key.contains(':'),
    };
    Ok(Some(if by_service {
        format!("{}{suffix}", document_service_key(key))
    } else {
        format!("{key}{suffix}")
    }))
}

/// A document's service key (`[group/]interface[:version]`, as dubbo-admin writes it) as
/// Java's rule key `interface:version:group`; a key already in that form is kept.
pub fn document_service_key(key: &str) -> String {
    if key.matches(':').count() >= 2 && !key.contains('/') {
        return key.to_owned();
    }
    let (group, rest) = match key.split_once('/') {
        Some((group, rest)) => (Some(group).filter(|g| !g.is_empty()), rest),
        None => (None, key),
    };
    let (interface, version) = match rest.split_once(':') {
        Some((interface, version)) => (interface, Some(version).filter(|v| !v.is_empty())),
        None => (rest, None),
    };
    service_key(interface, version, group)
}

/// The suffix of a form's keys.
fn suffix(form: RuleForm) -> &'static str {
    match form {
        RuleForm::Configurators => ".configurators",
        RuleForm::Tag => ".tag-router",
        RuleForm::Condition => ".condition-router",
        RuleForm::Migration => ".migration",
    }
}

/// A key's form and its stem (the key without the form's suffix); `None` for a key of no
/// form the tool judges.
pub fn stem(key: &str) -> Option<(RuleForm, &str)> {
    let form = RuleForm::of_key(key)?;
    Some((form, &key[..key.len() - suffix(form).len()]))
}

/// Refuses a rule written under `key` when its document implies another key: nobody would
/// read it there. The error names the key the document implies.
pub fn check(key: &str, form: RuleForm, text: &str) -> Result<(), String> {
    let implied = implied_key(form, text)?;
    match implied {
        Some(implied) if implied != key => Err(format!(
            "the document's key and scope name {implied}: consumers and providers read a \
             rule by its config key only, so none would read it under {key}"
        )),
        _ => Ok(()),
    }
}

/// What the registry knows of its members: the apps of providers and consumer records,
/// and the interfaces of the mapping and of consumer subscriptions.
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// Apps with providers or consumer records.
    pub apps: BTreeSet<String>,
    /// Interfaces mapped to an app or subscribed to by a consumer.
    pub interfaces: BTreeSet<String>,
}

/// Whom a key's stem (the key without its form's suffix) names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A service, keyed `interface:version:group`.
    Service(String),
    /// An application.
    App(String),
    /// Neither: a stem with one colon, or more than two (`helloworld.Greeter:`); the
    /// interface it seems to mean.
    Malformed(String),
}

impl Subject {
    /// Whom `stem` names, as Java keys rules.
    pub fn of(stem: &str) -> Subject {
        match stem.matches(':').count() {
            0 => Subject::App(stem.to_owned()),
            2 => Subject::Service(stem.split(':').next().unwrap_or_default().to_owned()),
            _ => Subject::Malformed(stem.split(':').next().unwrap_or_default().to_owned()),
        }
    }
}

/// A rule present in the config centre that no known member reads, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Unread {
    /// Its config key.
    pub key: String,
    /// Why nobody reads it, with the key meant where one can be told.
    pub why: String,
}

/// Why no member `known` reads the rule under `key`; `None` when one may (or the key is
/// of no form the tool judges).
pub fn unread_why(key: &str, known: &Known) -> Option<String> {
    let (form, stem) = stem(key)?;
    let service_form = matches!(form, RuleForm::Condition | RuleForm::Configurators);
    let meant = |interface: &str| {
        format!(
            "the service key is {}{}",
            service_key(interface, None, None),
            suffix(form)
        )
    };
    match Subject::of(stem) {
        Subject::App(app) if known.apps.contains(&app) => None,
        Subject::App(name) if service_form && known.interfaces.contains(&name) => {
            Some(meant(&name))
        }
        Subject::App(app) => Some(format!("no provider, consumer or mapping knows {app}")),
        Subject::Service(interface) if service_form => (!known.interfaces.contains(&interface))
            .then(|| format!("no provider, consumer or mapping knows {interface}")),
        Subject::Service(_) => Some(format!("a {} is read per application only", form.name())),
        Subject::Malformed(interface) if service_form => {
            Some(format!("not a key Java reads; {}", meant(&interface)))
        }
        Subject::Malformed(_) => Some("not a key Java reads".to_owned()),
    }
}

/// The rules of `keys` that no member `known` reads, in key order.
pub fn unread(keys: &[String], known: &Known) -> Vec<Unread> {
    let mut unread: Vec<Unread> = keys
        .iter()
        .filter_map(|key| {
            unread_why(key, known).map(|why| Unread {
                key: key.clone(),
                why,
            })
        })
        .collect();
    unread.sort_by(|a, b| a.key.cmp(&b.key));
    unread
}

/// The line `route` and `rule list` print: `None` when every rule is read.
pub fn line(unread: &[Unread]) -> Option<String> {
    (!unread.is_empty()).then(|| {
        let items: Vec<String> = unread
            .iter()
            .map(|u| format!("{} ({})", u.key, u.why))
            .collect();
        format!("rules nobody reads: {}", items.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONDITION: &str =
        "scope: service\nkey: helloworld.Greeter\nconditions:\n  - '=> host != 10.0.0.1'\n";

    fn implied(form: RuleForm, text: &str) -> String {
        implied_key(form, text).unwrap().unwrap()
    }

    #[test]
    fn documents_imply_the_keys_java_reads() {
        let f = RuleForm::Condition;
        assert_eq!(
            implied(f, CONDITION),
            "helloworld.Greeter::.condition-router"
        );
        for (key, expected) in [
            ("grp/helloworld.Greeter:1.0", "helloworld.Greeter:1.0:grp"),
            ("grp/helloworld.Greeter", "helloworld.Greeter::grp"),
            ("helloworld.Greeter:1.0", "helloworld.Greeter:1.0:"),
            ("helloworld.Greeter:1.0:grp", "helloworld.Greeter:1.0:grp"),
        ] {
            let text = format!("scope: service\nkey: {key}\nconditions: []\n");
            assert_eq!(implied(f, &text), format!("{expected}.condition-router"));
            let text = format!("scope: service\nkey: {key}\nconfigs: []\n");
            assert_eq!(
                implied(RuleForm::Configurators, &text),
                format!("{expected}.configurators")
            );
        }
        let app = "scope: application\nkey: shop\nconditions: []\n";
        assert_eq!(implied(f, app), "shop.condition-router");
        let app = "scope: application\nkey: shop\nconfigs: []\n";
        assert_eq!(implied(RuleForm::Configurators, app), "shop.configurators");
        assert_eq!(
            implied(RuleForm::Tag, "key: shop\ntags: []\n"),
            "shop.tag-router"
        );
        assert_eq!(
            implied(RuleForm::Migration, "key: shop\nstep: FORCE_INTERFACE\n"),
            "shop.migration"
        );
        let err = implied_key(RuleForm::Tag, "scope: service\nkey: a.B\ntags: []\n");
        assert!(err.unwrap_err().contains("per application only"));
        assert_eq!(implied_key(f, "conditions: []\n"), Ok(None));
    }

    #[test]
    fn misplaced_keys_are_refused_naming_the_key_read() {
        for key in [
            "helloworld.Greeter.condition-router",
            "helloworld.Greeter:.condition-router",
            "helloworld.Greter::.condition-router",
        ] {
            let err = check(key, RuleForm::Condition, CONDITION).unwrap_err();
            assert!(
                err.contains("helloworld.Greeter::.condition-router") && err.contains(key),
                "{err}"
            );
        }
        assert!(
            check(
                "helloworld.Greeter::.condition-router",
                RuleForm::Condition,
                CONDITION
            )
            .is_ok()
        );
        assert!(check("x.condition-router", RuleForm::Condition, "conditions: []").is_ok());
    }

    #[test]
    fn keys_nobody_reads_are_named_with_why() {
        let known = Known {
            apps: ["shop".to_owned(), "greeter".to_owned()].into(),
            interfaces: ["helloworld.Greeter".to_owned()].into(),
        };
        let keys: Vec<String> = [
            "helloworld.Greeter::.condition-router",
            "helloworld.Greeter.condition-router",
            "helloworld.Greeter:.condition-router",
            "helloworld.Greter::.condition-router",
            "greeter.tag-router",
            "ghost.tag-router",
            "shop.configurators",
            "shop.script-router",
        ]
        .map(str::to_owned)
        .into();
        let unread = unread(&keys, &known);
        let named: Vec<&str> = unread.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(
            named,
            [
                "ghost.tag-router",
                "helloworld.Greeter.condition-router",
                "helloworld.Greeter:.condition-router",
                "helloworld.Greter::.condition-router",
            ]
        );
        let line = line(&unread).unwrap();
        assert!(
            line.contains(
                "helloworld.Greeter.condition-router (the service key is \
                 helloworld.Greeter::.condition-router)"
            ),
            "{line}"
        );
        assert!(line.contains("no provider, consumer or mapping knows helloworld.Greter"));
        assert_eq!(super::line(&[]), None);
    }
}
