//! Reading a rule document's values as Java reads the map SnakeYAML gives it
//! (`AbstractRouterRule.parseFromMap0`): flags through `Boolean.parseBoolean(toString())`,
//! numbers through `Integer.parseInt(toString())`, names cast to `String`.

use serde_yaml_ng::{Mapping, Value};

/// The entry `name` of `map`; `None` when absent or null, as Java's `map.get` is null.
pub(super) fn get<'a>(map: &'a Mapping, name: &str) -> Option<&'a Value> {
    map.get(name).filter(|v| !v.is_null())
}

/// A flag as Java reads it: true only for a YAML boolean true or a string `true` in any
/// case. SnakeYAML reads YAML 1.1, where a plain `yes` or `on` is also true; those strings
/// count as true here (a quoted `'yes'` would not in Java).
pub(super) fn flag(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::String(s) => {
            s.eq_ignore_ascii_case("true")
                || matches!(s.as_str(), "yes" | "Yes" | "YES" | "on" | "On" | "ON")
        }
        _ => false,
    }
}

/// A string field as Java's `(String)` cast: a string, else an error (a number or a list
/// where a name belongs would throw in Java, and the rule would not apply).
pub(super) fn string<'a>(value: &'a Value, field: &str) -> Result<&'a str, String> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(format!("{field} must be a string, not {}", kind(other))),
    }
}

/// A scalar as Java's `toString` would write it (for what Java converts to a string),
/// `None` for a list, a map or a tagged value.
pub(super) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => None,
    }
}

/// An `int` as `Integer.parseInt(toString())`: an integer in range, or a string of one
/// (optionally signed, ASCII digits).
pub(super) fn int(value: &Value, field: &str) -> Result<i32, String> {
    let parsed = match value {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.parse::<i32>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| match scalar_text(value) {
        Some(text) => format!("{field} {:?} is not an int", crate::Error::shorten(&text)),
        None => format!("{field} must be an int, not {}", kind(value)),
    })
}

/// A short name of a value's kind, for errors.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        serde_yaml_ng::from_str(text).expect("yaml")
    }

    #[test]
    fn flags_ints_and_strings_as_java_reads_them() {
        assert!(flag(&yaml("true")) && flag(&yaml("'TRUE'")) && flag(&yaml("yes")));
        assert!(!flag(&yaml("1")) && !flag(&yaml("'no'")) && !flag(&yaml("[true]")));
        assert_eq!(int(&yaml("7"), "priority"), Ok(7));
        assert_eq!(int(&yaml("'-7'"), "priority"), Ok(-7));
        assert!(int(&yaml("1.5"), "priority").is_err());
        assert!(int(&yaml("99999999999"), "priority").is_err());
        assert!(int(&yaml("{a: 1}"), "priority").is_err());
        assert_eq!(string(&yaml("v3.0"), "configVersion"), Ok("v3.0"));
        assert!(string(&yaml("3.0"), "configVersion").is_err());
    }
}
