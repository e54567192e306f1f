//! A governance rule's YAML read as Dubbo Java 3.3 reads it: SnakeYAML loads the text into
//! plain maps and lists, and the rule classes cast fields out of them. A field of the wrong
//! type where Java casts (`(String) map.get("key")`) fails the whole rule, as the cast
//! throws there; booleans are `Boolean.parseBoolean` of the value's text; list items are
//! `String.valueOf` of each. Unknown fields are ignored, as Java ignores them.
//!
//! The text is bounded ([`MAX_RULE_BYTES`]) before it is parsed; the parser bounds nesting
//! and alias expansion. Nothing here panics on any input.

use serde_yaml_ng::{Mapping, Value};

use super::facts::MAX_RULE_BYTES;
use crate::error::Error;

/// A rule error for `key` (the config-centre key), its reason shortened when it quotes the
/// rule.
pub(crate) fn rule_error(key: &str, reason: impl Into<String>) -> Error {
    Error::Rule {
        key: Error::shorten(key),
        reason: reason.into(),
        source: None,
    }
}

/// The top-level mapping of a rule text, or why there is none (too large, not YAML, not a
/// mapping: Java's cast of the loaded object to a map fails on anything else).
pub(crate) fn load(key: &str, text: &str) -> crate::error::Result<Mapping> {
    if text.len() > MAX_RULE_BYTES {
        return Err(rule_error(
            key,
            format!(
                "{} bytes, over the limit of {MAX_RULE_BYTES}; the previous rule stays",
                text.len()
            ),
        ));
    }
    let value: Value = serde_yaml_ng::from_str(text).map_err(|e| {
        rule_error(key, format!("not YAML: {}", Error::shorten(&e.to_string()))).caused_by(e)
    })?;
    match value {
        Value::Mapping(map) => Ok(map),
        Value::Null => Err(rule_error(key, "empty rule")),
        other => Err(rule_error(
            key,
            format!("expected a mapping, found {}", kind(&other)),
        )),
    }
}

/// What kind of YAML value `value` is, for messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// [`kind`] as condition rules word it (`a map`, not `a mapping`).
pub(crate) fn short_kind(value: &Value) -> &'static str {
    match value {
        Value::Mapping(_) => "a map",
        other => kind(other),
    }
}

/// `map[field]`, absent when missing or null (Java's `map.get` returns null for both).
pub(crate) fn field<'a>(map: &'a Mapping, field: &str) -> Option<&'a Value> {
    map.get(field).filter(|v| !v.is_null())
}

/// `(String) map.get(field)`: absent, or a string; anything else fails the rule.
pub(crate) fn string(key: &str, map: &Mapping, name: &str) -> crate::error::Result<Option<String>> {
    match field(map, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(rule_error(
            key,
            format!("{name} must be a string, found {}", kind(other)),
        )),
    }
}

/// `Boolean.parseBoolean(map.get(field).toString())` when present (see [`flag`]).
pub(crate) fn boolean(map: &Mapping, name: &str) -> Option<bool> {
    field(map, name).map(flag)
}

/// A flag as Java reads it: true only for a YAML boolean true or a string `true` in any
/// case. SnakeYAML reads the YAML 1.1 booleans `yes`/`on` (and their capitalised forms)
/// as true, so those strings are true here (a quoted `'yes'` would not be in Java).
pub(crate) fn flag(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::String(s) => {
            s.eq_ignore_ascii_case("true")
                || matches!(s.as_str(), "yes" | "Yes" | "YES" | "on" | "On" | "ON")
        }
        _ => false,
    }
}

/// `Integer.parseInt(map.get(field).toString())` when present; one that does not parse
/// fails the rule, as Java throws.
pub(crate) fn int(key: &str, map: &Mapping, name: &str) -> crate::error::Result<Option<i32>> {
    let Some(value) = field(map, name) else {
        return Ok(None);
    };
    int_of(value)
        .map(Some)
        .ok_or_else(|| rule_error(key, format!("{name} must be an integer")))
}

/// `Integer.parseInt(value.toString())`: an integer in range, or a string of one
/// (optionally signed, ASCII digits); `None` for anything else.
pub(crate) fn int_of(value: &Value) -> Option<i32> {
    match value {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.parse::<i32>().ok(),
        _ => None,
    }
}

/// An `int` read from `value` as condition rules word its errors (`weight "x" is not an
/// int`), for a `field` Java parses with `Integer.parseInt(toString())`.
pub(crate) fn int_value(value: &Value, field: &str) -> Result<i32, String> {
    int_of(value).ok_or_else(|| match scalar_text(value) {
        Some(text) => format!("{field} {:?} is not an int", Error::shorten(&text)),
        None => format!("{field} must be an int, not {}", short_kind(value)),
    })
}

/// A string read from `value` as condition rules word its errors: Java's `(String)` cast,
/// which throws on a number or a list where a name belongs.
pub(crate) fn str_value<'a>(value: &'a Value, field: &str) -> Result<&'a str, String> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(format!(
            "{field} must be a string, not {}",
            short_kind(other)
        )),
    }
}

/// A list field read as Java reads one: absent when missing or not a list (Java ignores
/// it), else `String.valueOf` of each item. A nested list or mapping as an item fails the
/// rule (Java would keep its `toString`, which no address or name can equal).
pub(crate) fn string_list(
    key: &str,
    map: &Mapping,
    name: &str,
) -> crate::error::Result<Option<Vec<String>>> {
    let Some(Value::Sequence(items)) = field(map, name) else {
        return Ok(None);
    };
    items
        .iter()
        .map(|item| {
            scalar_text(item).ok_or_else(|| {
                rule_error(
                    key,
                    format!("{name} holds {}, expected plain values", kind(item)),
                )
            })
        })
        .collect::<crate::error::Result<Vec<_>>>()
        .map(Some)
}

/// A scalar's text as Java's `String.valueOf` writes it (`null`, `true`, `42`, `1.5`);
/// `None` for a list, mapping or tagged value.
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e7 {
                format!("{f:.1}")
            } else if f.is_nan() {
                "NaN".to_owned()
            } else if f.is_infinite() {
                if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
            } else {
                f.to_string()
            }
        }),
        Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => None,
    }
}

/// A value on one line in YAML's flow style (`{cird: 10.0.0.0/8}`), to show a `match` as
/// written. The value comes from a bounded text, so the line is bounded too.
pub(crate) fn flow(value: &Value) -> String {
    let mut out = String::new();
    write_flow(value, &mut out);
    out
}

fn write_flow(value: &Value, out: &mut String) {
    match value {
        Value::Sequence(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_flow(item, out);
            }
            out.push(']');
        }
        Value::Mapping(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_flow(k, out);
                out.push_str(": ");
                write_flow(v, out);
            }
            out.push('}');
        }
        Value::Tagged(tagged) => {
            out.push_str(&tagged.tag.to_string());
            out.push(' ');
            write_flow(&tagged.value, out);
        }
        scalar => out.push_str(&scalar_text(scalar).unwrap_or_default()),
    }
}

/// `map[field]` as a mapping when present; anything else but null fails the rule.
pub(crate) fn mapping<'a>(
    key: &str,
    map: &'a Mapping,
    name: &str,
) -> crate::error::Result<Option<&'a Mapping>> {
    match field(map, name) {
        None => Ok(None),
        Some(Value::Mapping(m)) => Ok(Some(m)),
        Some(other) => Err(rule_error(
            key,
            format!("{name} must be a mapping, found {}", kind(other)),
        )),
    }
}

/// `map[field]` as a list of mappings when present (Java casts each item to a map).
pub(crate) fn mappings<'a>(
    key: &str,
    map: &'a Mapping,
    name: &str,
) -> crate::error::Result<Option<Vec<&'a Mapping>>> {
    match field(map, name) {
        None => Ok(None),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|item| match item {
                Value::Mapping(m) => Ok(m),
                other => Err(rule_error(
                    key,
                    format!("{name} holds {}, expected mappings", kind(other)),
                )),
            })
            .collect::<crate::error::Result<Vec<_>>>()
            .map(Some),
        Some(other) => Err(rule_error(
            key,
            format!("{name} must be a list, found {}", kind(other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_as_java_casts_them() {
        let map = load(
            "k",
            "a: text\nb: 7\nc: yes\nd: TRUE\ne: [1, x, 1.5, true, ~]\nf: 2.0\n",
        )
        .unwrap();
        assert_eq!(string("k", &map, "a").unwrap().as_deref(), Some("text"));
        assert!(string("k", &map, "b").is_err(), "an int is no String");
        assert_eq!(string("k", &map, "zz").unwrap(), None);
        assert_eq!(boolean(&map, "c"), Some(true));
        assert_eq!(boolean(&map, "d"), Some(true));
        assert_eq!(boolean(&map, "a"), Some(false));
        assert_eq!(boolean(&map, "zz"), None);
        assert_eq!(int("k", &map, "b").unwrap(), Some(7));
        assert!(int("k", &map, "a").is_err());
        assert!(int("k", &map, "f").is_err(), "parseInt(\"2.0\") throws");
        assert_eq!(
            string_list("k", &map, "e").unwrap().unwrap(),
            ["1", "x", "1.5", "true", "null"]
        );
        assert_eq!(
            string_list("k", &map, "a").unwrap(),
            None,
            "not a list: ignored"
        );
    }

    #[test]
    fn a_match_shows_on_one_line() {
        let map = load("k", "m:\n  address:\n    cird: 10.0.0.0/8\n  p: [1, x]\n").unwrap();
        let shown = flow(field(&map, "m").unwrap());
        assert_eq!(shown, "{address: {cird: 10.0.0.0/8}, p: [1, x]}");
    }

    #[test]
    fn texts_that_are_no_mapping_are_refused() {
        for text in [
            "",
            "~",
            "[1, 2]",
            "just text",
            "a: [",
            "a: 1\n---\nb: 2\n",
            "!custom {a: 1}",
        ] {
            assert!(
                matches!(load("k", text), Err(Error::Rule { .. })),
                "{text:?} should be refused"
            );
        }
        let big = format!("a: \"{}\"", "x".repeat(MAX_RULE_BYTES));
        let err = load("k", &big).unwrap_err().to_string();
        assert!(err.contains("over the limit"), "{err}");
    }

    #[test]
    fn flags_ints_and_strings_as_java_reads_them() {
        let yaml = |text: &str| -> Value { serde_yaml_ng::from_str(text).expect("yaml") };
        assert!(flag(&yaml("true")) && flag(&yaml("'TRUE'")) && flag(&yaml("yes")));
        assert!(!flag(&yaml("1")) && !flag(&yaml("'no'")) && !flag(&yaml("[true]")));
        assert_eq!(int_value(&yaml("7"), "priority"), Ok(7));
        assert_eq!(int_value(&yaml("'-7'"), "priority"), Ok(-7));
        assert!(int_value(&yaml("1.5"), "priority").is_err());
        assert!(int_value(&yaml("99999999999"), "priority").is_err());
        assert!(int_value(&yaml("{a: 1}"), "priority").is_err());
        assert_eq!(str_value(&yaml("v3.0"), "configVersion"), Ok("v3.0"));
        assert!(str_value(&yaml("3.0"), "configVersion").is_err());
    }

    #[test]
    fn a_text_that_is_not_yaml_keeps_the_parser_error() {
        use std::error::Error as _;
        let err = load("k", "a: [").unwrap_err();
        let source = err
            .source()
            .and_then(|s| s.downcast_ref::<serde_yaml_ng::Error>());
        let source = source.expect("the YAML parser's error");
        assert!(
            err.to_string()
                .contains(&Error::shorten(&source.to_string()))
        );
        assert!(load("k", "").unwrap_err().source().is_none());
    }
}
