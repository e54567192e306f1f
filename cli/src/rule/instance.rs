//! Governance of one provider instance, written as dubbo-admin writes it: disable it, enable
//! it again, set its weight, tag it. Each change is an edit of the rule document that holds
//! it, merged into what is there: the items and tags others wrote stay as they are.
//!
//! * **Disable** adds to `{app}.configurators` the item Dubbo's documentation gives for
//!   taking one provider out ("disable a provider"), a `side: provider` item naming the
//!   instance's `host:port`:
//!
//!   ```yaml
//!   configVersion: v3.0
//!   scope: application
//!   key: shop
//!   enabled: true
//!   configs:
//!   - addresses:
//!     - 10.0.0.7:20880
//!     side: provider
//!     parameters:
//!       disabled: true
//!   ```
//!
//!   **Enable** removes that item again, and deletes the key when no item is left (as
//!   dubbo-admin deletes a document whose last item goes).
//! * **Weight** adds the item dubbo-admin 0.6 writes for a weight (`OverrideUtils.
//!   weightDTOtoConfig`): `type: weight` and its own `enabled: true`, so it applies even in
//!   a document whose `enabled` is false, `side: provider`, the address, `parameters:
//!   {weight: N}`. Clearing the weight removes the item.
//! * **Tag** puts the address into the named tag of `{app}.tag-router` and takes it out of
//!   every other tag (a provider is in one tag); a new rule has the fields dubbo-admin 0.6
//!   writes (`enabled`, `force: false`, `key`, `priority: 0`, `runtime: false`, `tags`).
//!   Untagging takes the address out of every tag; a tag left without addresses goes, and
//!   the key is deleted when no tag is left (a rule without tags is no rule).
//!
//! A document is edited only when it parses as the rule its key names (the library's own
//! parsers, those consumers use): one that does not is refused, never overwritten. The
//! edited text is parsed again before it is returned. An item is this module's own, and
//! replaced or removed, only when it is exactly of the form above for that address (one
//! address, one parameter, no other condition); any other item naming the address is left
//! alone. New documents are `configVersion: v3.0` (what dubbo-admin's current console
//! writes, which Dubbo 3.3 reads; the item has no `match`, so it reads the same as v2.7).
//! The YAML is re-written from its parsed form, as dubbo-admin does: comments and anchors
//! of an existing document do not survive an edit.

use std::collections::BTreeMap;

use introspect::Error;
use introspect::governance::{Configurators, TagRule};
use serde_yaml_ng::{Mapping, Value};

use super::form::{ParsedRule, RuleForm};

/// The highest weight accepted. Dubbo's weight is a Java `int` that balancers add up across
/// providers; 100 is the default, so this leaves a hundredfold range.
pub const MAX_WEIGHT: u32 = 10_000;

/// The longest tag name accepted.
pub const MAX_TAG_LEN: usize = 64;

/// The configVersion of new configurator documents.
const CONFIG_VERSION: &str = "v3.0";

/// A change to one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Take it out: `disabled: true` for its address.
    Disable,
    /// Give it back: remove the item [`Change::Disable`] wrote.
    Enable,
    /// Set its weight; `None` removes the weight item.
    Weight(Option<u32>),
    /// Put it in this tag (out of every other); `None` takes it out of every tag.
    Tag(Option<String>),
}

impl Change {
    /// The action's name in logs and answers.
    pub fn name(&self) -> &'static str {
        match self {
            Change::Disable => "disable",
            Change::Enable => "enable",
            Change::Weight(Some(_)) => "weight",
            Change::Weight(None) => "clear-weight",
            Change::Tag(Some(_)) => "tag",
            Change::Tag(None) => "untag",
        }
    }

    /// The config key the change edits for `app`.
    pub fn key(&self, app: &str) -> String {
        match self {
            Change::Tag(_) => TagRule::key_for(app),
            _ => Configurators::key_for(app),
        }
    }

    /// Whether it adds to a rule (rather than only taking away).
    fn adds(&self) -> bool {
        matches!(
            self,
            Change::Disable | Change::Weight(Some(_)) | Change::Tag(Some(_))
        )
    }
}

/// What an edit comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edited {
    /// The document already says it: nothing to write.
    Unchanged,
    /// Write this text (parsed and valid as the key's rule).
    Put(String),
    /// Delete the key: nothing else was in it.
    Delete,
}

/// Checks a tag name: 1 to [`MAX_TAG_LEN`] letters, digits, `.`, `_` or `-`.
pub fn validate_tag(tag: &str) -> Result<(), Error> {
    let reason = if tag.is_empty() {
        Some("must not be empty")
    } else if tag.len() > MAX_TAG_LEN {
        Some("is longer than 64 characters")
    } else if !tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        Some("may hold only letters, digits and . _ -")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidName {
            kind: "tag",
            value: shorten(tag),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks an instance address as the actions take it: `host:port` with an IPv4 address or
/// a DNS name, a port from 1 to 65535, and never the any-host `0.0.0.0` (which would name
/// every host).
pub fn validate_address(address: &str) -> Result<(), Error> {
    let refuse = |reason: &'static str| {
        Err(Error::InvalidName {
            kind: "instance address",
            value: shorten(address),
            reason,
        })
    };
    let Some((host, port)) = address.rsplit_once(':') else {
        return refuse("must be host:port");
    };
    if host.contains(':') || host.starts_with('[') {
        return refuse("IPv6 hosts are not supported by these actions");
    }
    if host.is_empty()
        || host.len() > introspect::model::names::MAX_HOST_LEN
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        || host.starts_with(['.', '-'])
    {
        return refuse("the host must be an IPv4 address or a DNS name");
    }
    // All digits and dots is an IPv4 address or nothing (YAML 1.1 would even read
    // `1234:56` as a number).
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && host.parse::<std::net::Ipv4Addr>().is_err()
    {
        return refuse("the host must be an IPv4 address or a DNS name");
    }
    if host == "0.0.0.0"
        || host.parse::<std::net::Ipv4Addr>() == Ok(std::net::Ipv4Addr::UNSPECIFIED)
    {
        return refuse("0.0.0.0 stands for every host: name one instance");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => refuse("the port must be a number from 1 to 65535"),
    }
}

/// Edits `current` (the text under the change's key, `None`: absent) so that it says
/// `change` for the instance at `address` of `app`. Refuses a current document that does
/// not parse as its rule, or one the change cannot be merged into (see the module docs).
pub fn edit(
    app: &str,
    address: &str,
    change: &Change,
    current: Option<&str>,
) -> Result<Edited, Error> {
    let key = change.key(app);
    let form = RuleForm::of_key(&key).unwrap_or(RuleForm::Configurators);
    let doc = match current {
        None => None,
        Some(text) => {
            ParsedRule::parse_checked(form, &key, text).map_err(|e| unreadable(&key, e))?;
            match serde_yaml_ng::from_str::<Value>(text) {
                Ok(Value::Mapping(map)) => Some(map),
                _ => return Err(refuse(&key, "the current rule is not a YAML mapping")),
            }
        }
    };
    let edited = match change {
        Change::Tag(tag) => edit_tags(&key, app, address, tag.as_deref(), doc)?,
        _ => edit_configurators(&key, app, address, change, doc)?,
    };
    if let Edited::Put(text) = &edited {
        // What is written parses as its rule, as a consumer reads it.
        ParsedRule::parse_checked(form, &key, text)?;
    }
    Ok(edited)
}

/// A refused name as an error shows it: at most 64 characters, control characters escaped.
fn shorten(value: &str) -> String {
    let cut: String = value.chars().take(64).collect();
    let mut shown = cut.escape_debug().to_string();
    if value.chars().count() > 64 {
        shown.push('…');
    }
    shown
}

fn refuse(key: &str, reason: impl Into<String>) -> Error {
    Error::Rule {
        key: key.to_owned(),
        reason: reason.into(),
        source: None,
    }
}

fn unreadable(key: &str, error: Error) -> Error {
    let reason = match error {
        Error::Rule { reason, .. } => reason,
        other => other.to_string(),
    };
    refuse(
        key,
        format!(
            "the current rule does not parse ({reason}); fix or delete it first \
             (`introspect rule get|put|delete`)"
        ),
    )
}

fn text(value: &str) -> Value {
    Value::String(value.to_owned())
}

fn field<'a>(map: &'a Mapping, name: &str) -> Option<&'a Value> {
    map.get(name)
}

fn to_yaml(key: &str, map: Mapping) -> Result<String, Error> {
    serde_yaml_ng::to_string(&Value::Mapping(map))
        .map_err(|e| refuse(key, format!("cannot write the rule: {e}")).caused_by(e))
}

// ---- configurators ----

/// The parameter an item of `change` sets.
fn parameter(change: &Change) -> &'static str {
    match change {
        Change::Weight(_) => "weight",
        _ => "disabled",
    }
}

/// Whether `item` is exactly the item this module writes for `address` and `param`.
fn is_ours(item: &Value, address: &str, param: &str) -> bool {
    let Value::Mapping(item) = item else {
        return false;
    };
    let only_address = matches!(
        field(item, "addresses"),
        Some(Value::Sequence(list)) if list.len() == 1 && list[0].as_str() == Some(address)
    );
    let only_param = matches!(
        field(item, "parameters"),
        Some(Value::Mapping(p)) if p.len() == 1 && p.contains_key(param)
    );
    let kind = field(item, "type").and_then(Value::as_str);
    let kind_ok = match param {
        "weight" => kind.is_none_or(|k| k == "weight"),
        _ => kind.is_none_or(|k| k == "general"),
    };
    let narrower = ["providerAddresses", "services", "applications", "match"]
        .iter()
        .any(|k| item.contains_key(*k));
    field(item, "side").and_then(Value::as_str) == Some("provider")
        && only_address
        && only_param
        && kind_ok
        && !narrower
}

/// The item `change` writes for `address`, `None` when it writes none.
fn our_item(address: &str, change: &Change) -> Option<Value> {
    let mut item = Mapping::new();
    let addresses = Value::Sequence(vec![text(address)]);
    let mut parameters = Mapping::new();
    match change {
        Change::Disable => {
            item.insert(text("addresses"), addresses);
            item.insert(text("side"), text("provider"));
            parameters.insert(text("disabled"), Value::Bool(true));
            item.insert(text("parameters"), Value::Mapping(parameters));
        }
        Change::Weight(Some(weight)) => {
            // dubbo-admin's own order (its YAML writer sorts the fields).
            item.insert(text("addresses"), addresses);
            item.insert(text("enabled"), Value::Bool(true));
            parameters.insert(text("weight"), Value::Number((*weight).into()));
            item.insert(text("parameters"), Value::Mapping(parameters));
            item.insert(text("side"), text("provider"));
            item.insert(text("type"), text("weight"));
        }
        _ => return None,
    }
    Some(Value::Mapping(item))
}

/// Whether a configurators item follows the document's `enabled` (it has no `type`, or
/// `general`), rather than its own.
fn follows_document(item: &Value) -> bool {
    item.get("type")
        .and_then(Value::as_str)
        .is_none_or(|k| k == "general")
}

fn edit_configurators(
    key: &str,
    app: &str,
    address: &str,
    change: &Change,
    doc: Option<Mapping>,
) -> Result<Edited, Error> {
    let Some(mut doc) = doc else {
        let Some(item) = our_item(address, change) else {
            return Ok(Edited::Unchanged);
        };
        let mut doc = Mapping::new();
        doc.insert(text("configVersion"), text(CONFIG_VERSION));
        doc.insert(text("scope"), text("application"));
        doc.insert(text("key"), text(app));
        doc.insert(text("enabled"), Value::Bool(true));
        doc.insert(text("configs"), Value::Sequence(vec![item]));
        return Ok(Edited::Put(to_yaml(key, doc)?));
    };
    let scope = field(&doc, "scope").and_then(Value::as_str);
    let rule_key = field(&doc, "key").and_then(Value::as_str);
    if scope != Some("application") || rule_key != Some(app) {
        return Err(refuse(
            key,
            format!(
                "the current rule is not the application rule of {app} (scope {}, key {}): \
                 an item added to it would not apply",
                scope.unwrap_or("absent"),
                rule_key.unwrap_or("absent")
            ),
        ));
    }
    let Some(Value::Sequence(configs)) = doc.get_mut("configs") else {
        return Err(refuse(key, "the current rule has no configs list"));
    };
    let param = parameter(change);
    let before = configs.clone();
    let mut ours = configs
        .iter()
        .enumerate()
        .filter(|(_, item)| is_ours(item, address, param))
        .map(|(n, _)| n);
    let first = ours.next();
    let replacement = our_item(address, change);
    let keep_at = match (first, replacement.clone()) {
        (Some(at), Some(item)) => {
            configs[at] = item;
            Some(at)
        }
        (None, Some(item)) => {
            configs.push(item);
            Some(configs.len() - 1)
        }
        _ => None,
    };
    // Every other item of ours for the address goes (all of them, to take it away).
    let mut n = 0;
    configs.retain(|item| {
        let at = n;
        n += 1;
        !is_ours(item, address, param) || Some(at) == keep_at
    });
    if *configs == before {
        return Ok(Edited::Unchanged);
    }
    if configs.is_empty() {
        return Ok(Edited::Delete);
    }
    let untyped_others = configs
        .iter()
        .filter(|item| follows_document(item) && !is_ours(item, address, param))
        .count();
    let disabled_document = field(&doc, "enabled").is_some_and(|v| {
        !matches!(v, Value::Bool(true))
            && v.as_str().is_none_or(|s| !s.eq_ignore_ascii_case("true"))
    });
    if disabled_document && change.adds() && replacement.as_ref().is_some_and(follows_document) {
        if untyped_others > 0 {
            return Err(refuse(
                key,
                "the document is disabled (enabled: false) and holds other items that follow \
                 it: the item would not apply, and enabling the document would turn those on; \
                 decide with `introspect rule get|put`",
            ));
        }
        // Only self-enabled items (dubbo-admin 0.6 writes its weights so, in a disabled
        // document): enabling the document changes nothing for them, and makes ours apply.
        doc.insert(text("enabled"), Value::Bool(true));
    }
    Ok(Edited::Put(to_yaml(key, doc)?))
}

// ---- tag rules ----

fn addresses_of(tag: &Mapping) -> Vec<String> {
    match field(tag, "addresses") {
        Some(Value::Sequence(list)) => list
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn edit_tags(
    key: &str,
    app: &str,
    address: &str,
    tag: Option<&str>,
    doc: Option<Mapping>,
) -> Result<Edited, Error> {
    let mut doc = match doc {
        Some(doc) => doc,
        None if tag.is_none() => return Ok(Edited::Unchanged),
        None => {
            // dubbo-admin 0.6's fields, in its order.
            let mut doc = Mapping::new();
            doc.insert(text("enabled"), Value::Bool(true));
            doc.insert(text("force"), Value::Bool(false));
            doc.insert(text("key"), text(app));
            doc.insert(text("priority"), Value::Number(0.into()));
            doc.insert(text("runtime"), Value::Bool(false));
            doc.insert(text("tags"), Value::Sequence(Vec::new()));
            doc
        }
    };
    if tag.is_some() && field(&doc, "enabled").is_some_and(|v| v.as_bool() == Some(false)) {
        return Err(refuse(
            key,
            "the tag rule is disabled (enabled: false): a tag added to it would not apply; \
             enable it first (`introspect rule get|put`)",
        ));
    }
    let tags = match doc.get_mut("tags") {
        Some(Value::Sequence(tags)) => tags,
        None | Some(Value::Null) => {
            doc.insert(text("tags"), Value::Sequence(Vec::new()));
            match doc.get_mut("tags") {
                Some(Value::Sequence(tags)) => tags,
                _ => return Err(refuse(key, "cannot add a tags list")),
            }
        }
        Some(_) => return Err(refuse(key, "the current rule's tags is not a list")),
    };
    let before = tags.clone();
    let mut found = false;
    let mut emptied = Vec::new();
    for (n, item) in tags.iter_mut().enumerate() {
        let Value::Mapping(item) = item else {
            continue;
        };
        let name = field(item, "name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut addresses = addresses_of(item);
        if tag.is_some() && name.as_deref() == tag {
            found = true;
            if addresses.is_empty() && item.contains_key("match") {
                return Err(refuse(
                    key,
                    format!(
                        "tag {} picks its providers by match: adding an address would end \
                         that; edit it with `introspect rule put`",
                        name.unwrap_or_default()
                    ),
                ));
            }
            if !addresses.iter().any(|a| a == address) {
                addresses.push(address.to_owned());
                item.insert(
                    text("addresses"),
                    Value::Sequence(addresses.iter().map(|a| text(a)).collect()),
                );
            }
        } else if addresses.iter().any(|a| a == address) {
            addresses.retain(|a| a != address);
            if addresses.is_empty() && !item.contains_key("match") {
                emptied.push(n);
            }
            item.insert(
                text("addresses"),
                Value::Sequence(addresses.iter().map(|a| text(a)).collect()),
            );
        }
    }
    for n in emptied.into_iter().rev() {
        tags.remove(n);
    }
    if let (Some(tag), false) = (tag, found) {
        let mut item = Mapping::new();
        item.insert(text("addresses"), Value::Sequence(vec![text(address)]));
        item.insert(text("name"), text(tag));
        tags.push(Value::Mapping(item));
    }
    if *tags == before {
        return Ok(Edited::Unchanged);
    }
    if tags.is_empty() {
        return Ok(Edited::Delete);
    }
    Ok(Edited::Put(to_yaml(key, doc)?))
}

// ---- reading ----

/// What the rules of one app say per instance, in the forms this module writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceRules {
    /// The addresses a disable item names.
    pub disabled: Vec<String>,
    /// The weight a weight item sets per address.
    pub weights: BTreeMap<String, String>,
    /// The tag each address is in (by its exact `host:port`).
    pub tags: BTreeMap<String, String>,
}

impl InstanceRules {
    /// Reads the app's configurators text and tag rule text (either may be absent or
    /// unreadable: it then says nothing).
    pub fn read(configurators: Option<&str>, tags: Option<&str>) -> InstanceRules {
        let mut rules = InstanceRules::default();
        let map = |text: Option<&str>| match text.map(serde_yaml_ng::from_str::<Value>) {
            Some(Ok(Value::Mapping(map))) => Some(map),
            _ => None,
        };
        if let Some(doc) = map(configurators)
            && let Some(Value::Sequence(items)) = field(&doc, "configs")
        {
            for item in items {
                let Some(address) = item
                    .get("addresses")
                    .and_then(|a| a.as_sequence())
                    .and_then(|a| a.first())
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let value = |name: &str| item.get("parameters").and_then(|p| p.get(name)).cloned();
                if is_ours(item, address, "disabled")
                    && matches!(value("disabled"), Some(Value::Bool(true)))
                {
                    rules.disabled.push(address.to_owned());
                } else if is_ours(item, address, "weight")
                    && let Some(Value::Number(weight)) = value("weight")
                {
                    rules.weights.insert(address.to_owned(), weight.to_string());
                }
            }
        }
        if let Some(doc) = map(tags)
            && let Some(Value::Sequence(items)) = field(&doc, "tags")
        {
            for item in items.iter().filter_map(Value::as_mapping) {
                let Some(name) = field(item, "name").and_then(Value::as_str) else {
                    continue;
                };
                for address in addresses_of(item) {
                    rules.tags.entry(address).or_insert_with(|| name.to_owned());
                }
            }
        }
        rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use introspect::governance::Governed;

    const A: &str = "10.0.0.7:20880";
    const B: &str = "10.0.0.8:20880";

    fn put(edited: Edited) -> String {
        match edited {
            Edited::Put(text) => text,
            other => panic!("expected a write, got {other:?}"),
        }
    }

    #[test]
    fn disable_writes_the_documented_provider_item_and_enable_takes_it_away() {
        let text = put(edit("shop", A, &Change::Disable, None).unwrap());
        assert_eq!(
            text,
            "configVersion: v3.0\nscope: application\nkey: shop\nenabled: true\nconfigs:\n\
             - addresses:\n  - 10.0.0.7:20880\n  side: provider\n  parameters:\n    disabled: true\n"
        );
        let parsed = Configurators::parse("shop.configurators", &text).unwrap();
        assert_eq!(parsed.configs().len(), 1);
        assert_eq!(parsed.configs()[0].addresses, [A]);
        assert_eq!(
            parsed.configs()[0].parameters,
            [("disabled".to_owned(), "true".to_owned())]
        );
        // Again: nothing to write.
        assert_eq!(
            edit("shop", A, &Change::Disable, Some(&text)).unwrap(),
            Edited::Unchanged
        );
        let both = put(edit("shop", B, &Change::Disable, Some(&text)).unwrap());
        let rules = InstanceRules::read(Some(&both), None);
        assert_eq!(rules.disabled, [A, B]);
        let one = put(edit("shop", A, &Change::Enable, Some(&both)).unwrap());
        assert_eq!(InstanceRules::read(Some(&one), None).disabled, [B]);
        assert_eq!(
            edit("shop", B, &Change::Enable, Some(&one)).unwrap(),
            Edited::Delete
        );
        assert_eq!(
            edit("shop", B, &Change::Enable, None).unwrap(),
            Edited::Unchanged
        );
    }

    #[test]
    fn weight_is_dubbo_admins_weight_item_and_others_items_stay() {
        let theirs = "configVersion: v2.7\nscope: application\nkey: shop\nenabled: true\n\
                      configs:\n- addresses: [0.0.0.0]\n  side: consumer\n  parameters:\n    timeout: 3000\n\
                      - addresses: [\"10.0.0.7:20880\"]\n  side: provider\n  parameters:\n    disabled: true\n    weight: 5\n";
        let text = put(edit("shop", A, &Change::Weight(Some(300)), Some(theirs)).unwrap());
        let parsed = Configurators::parse("shop.configurators", &text).unwrap();
        assert_eq!(parsed.configs().len(), 3, "{text}");
        assert_eq!(
            parsed.config_version(),
            Some("v2.7"),
            "the document keeps its version"
        );
        let ours = &parsed.configs()[2];
        assert_eq!(ours.kind.as_deref(), Some("weight"));
        assert_eq!(ours.enabled, Some(true));
        assert_eq!(ours.side.as_deref(), Some("provider"));
        assert_eq!(ours.parameters, [("weight".to_owned(), "300".to_owned())]);
        assert!(text.contains("timeout: 3000"), "{text}");
        let again = put(edit("shop", A, &Change::Weight(Some(50)), Some(&text)).unwrap());
        assert_eq!(InstanceRules::read(Some(&again), None).weights[A], "50");
        assert_eq!(
            Configurators::parse("k.configurators", &again)
                .unwrap()
                .configs()
                .len(),
            3
        );
        // Enabling does not touch the item that is not of its form.
        assert_eq!(
            edit("shop", A, &Change::Enable, Some(&again)).unwrap(),
            Edited::Unchanged
        );
        let cleared = put(edit("shop", A, &Change::Weight(None), Some(&again)).unwrap());
        assert_eq!(
            Configurators::parse("k.configurators", &cleared)
                .unwrap()
                .configs()
                .len(),
            2
        );
    }

    #[test]
    fn a_disabled_document_takes_a_disable_item_only_when_nothing_else_follows_it() {
        // dubbo-admin 0.6 writes a weight alone in a document with `enabled: false`.
        let admin = "configs:\n- addresses: [\"10.0.0.8:20880\"]\n  enabled: true\n  parameters:\n    weight: 10\n  \
                     side: provider\n  type: weight\nenabled: false\nkey: shop\nscope: application\n";
        let text = put(edit("shop", A, &Change::Disable, Some(admin)).unwrap());
        let parsed = Configurators::parse("shop.configurators", &text).unwrap();
        assert!(parsed.enabled());
        assert_eq!(parsed.configs().len(), 2);
        let mixed = "scope: application\nkey: shop\nenabled: false\nconfigs:\n\
                     - side: consumer\n  parameters: {timeout: 1}\n";
        let err = edit("shop", A, &Change::Disable, Some(mixed))
            .unwrap_err()
            .to_string();
        assert!(err.contains("disabled (enabled: false)"), "{err}");
    }

    #[test]
    fn broken_or_foreign_documents_are_refused_not_overwritten() {
        for (text, says) in [
            ("configs: [", "does not parse"),
            (
                "scope: service\nkey: shop.Svc\nconfigs:\n- side: provider\n  parameters: {a: b}\n",
                "not the application rule",
            ),
            (
                "scope: application\nkey: other\nconfigs:\n- side: provider\n  parameters: {a: b}\n",
                "not the application rule",
            ),
            ("tags: []", "does not parse"),
        ] {
            let err = edit("shop", A, &Change::Disable, Some(text))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn tagging_moves_an_address_between_tags_and_untagging_empties_the_rule() {
        let text = put(edit("shop", A, &Change::Tag(Some("gray".into())), None).unwrap());
        assert_eq!(
            text,
            "enabled: true\nforce: false\nkey: shop\npriority: 0\nruntime: false\ntags:\n\
             - addresses:\n  - 10.0.0.7:20880\n  name: gray\n"
        );
        let rule = TagRule::parse("shop.tag-router", &text).unwrap();
        assert!(rule.is_valid());
        let b = put(edit("shop", B, &Change::Tag(Some("gray".into())), Some(&text)).unwrap());
        let moved = put(edit("shop", A, &Change::Tag(Some("blue".into())), Some(&b)).unwrap());
        let rules = InstanceRules::read(None, Some(&moved));
        assert_eq!(rules.tags[A], "blue");
        assert_eq!(rules.tags[B], "gray");
        assert_eq!(
            edit("shop", A, &Change::Tag(Some("blue".into())), Some(&moved)).unwrap(),
            Edited::Unchanged
        );
        // Untagging A leaves blue empty: it goes.
        let untagged = put(edit("shop", A, &Change::Tag(None), Some(&moved)).unwrap());
        let rule = TagRule::parse("shop.tag-router", &untagged).unwrap();
        assert_eq!(rule.tag_names().collect::<Vec<_>>(), ["gray"]);
        assert_eq!(
            edit("shop", B, &Change::Tag(None), Some(&untagged)).unwrap(),
            Edited::Delete
        );
        // A v3.0 tag chosen by match, and a disabled rule, are left to a person.
        let by_match = "configVersion: v3.0\nkey: shop\ntags:\n- name: gray\n  match:\n  - key: env\n    value: {exact: gray}\n";
        let err = edit("shop", A, &Change::Tag(Some("gray".into())), Some(by_match)).unwrap_err();
        assert!(err.to_string().contains("by match"), "{err}");
        let off = "enabled: false\nkey: shop\ntags:\n- name: x\n  addresses: [\"10.0.0.9:1\"]\n";
        let err = edit("shop", A, &Change::Tag(Some("gray".into())), Some(off)).unwrap_err();
        assert!(err.to_string().contains("disabled"), "{err}");
    }

    #[test]
    fn hostile_names_are_refused_with_the_reason() {
        for (address, says) in [
            ("10.0.0.7", "host:port"),
            ("0.0.0.0:20880", "every host"),
            ("10.0.0.7:0", "port"),
            ("10.0.0.7:99999", "port"),
            ("10.0.0.7:+80", "port"),
            ("::1:20880", "IPv6"),
            ("[::1]:20880", "IPv6"),
            ("a b:1", "IPv4 address or a DNS name"),
            ("evil\n:1", "IPv4 address or a DNS name"),
            (":80", "IPv4 address or a DNS name"),
            ("1234:56", "IPv4 address or a DNS name"),
            ("10.0.7:1", "IPv4 address or a DNS name"),
        ] {
            let err = validate_address(address).unwrap_err().to_string();
            assert!(err.contains(says), "{address:?}: {err}");
        }
        validate_address("10.0.0.7:20880").unwrap();
        validate_address("host-1.example:443").unwrap();
        for tag in ["", "a b", "x:y", &"t".repeat(65), "ü"] {
            assert!(validate_tag(tag).is_err(), "{tag:?}");
        }
        validate_tag("gray_v2.1-a").unwrap();
    }
}
