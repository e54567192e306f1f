//! The v3.0 match forms that tag rules and configurators share, as Dubbo Java 3.3 defines
//! them: `StringMatch` (`exact`, `prefix`, `regex`, `wildcard`, `empty`, `noempty`),
//! `ListStringMatch` (`oneof`), `AddressMatch` (`cird`, `wildcard`, `exact`) and
//! `ParamMatch` (`key` and a `StringMatch` `value`).
//!
//! Java fills these with `PojoUtils.mapToPojo`: unknown fields are ignored, a null field is
//! unset. A form is evaluated in Java's order, the first set field deciding. `regex` is
//! Java's `String.matches`, anchored to the whole input: see `java_regex` for where the
//! engine differs from `java.util.regex`. A `regex` that would decide and does not compile
//! here refuses the rule when it is parsed (the previous rule stays); one that never
//! decides (an `exact` or `prefix` before it) is not compiled, as Java never reads it.

mod java_regex;

use serde_yaml_ng::{Mapping, Value};

use java_regex::JavaRegex;

use super::ip_pattern::{IpPatternError, match_ip_expression_address};
use super::rule_yaml::{field, kind, mappings, rule_error, scalar_text};

/// Java's `StringMatch`: the first set form decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StringMatch {
    exact: Option<String>,
    prefix: Option<String>,
    regex: Option<JavaRegex>,
    wildcard: Option<String>,
    empty: Option<String>,
    noempty: Option<String>,
}

/// One optional string field of a match form: a scalar's text (a number or boolean as Java
/// converts it), absent when null; a list or mapping fails the rule.
fn text_field(key: &str, map: &Mapping, name: &str) -> crate::error::Result<Option<String>> {
    match field(map, name) {
        None => Ok(None),
        Some(value) => scalar_text(value).map(Some).ok_or_else(|| {
            rule_error(
                key,
                format!(
                    "match field {name} must be a plain value, found {}",
                    kind(value)
                ),
            )
        }),
    }
}

/// `value` as a mapping, or the rule error naming `what`.
fn as_mapping<'a>(key: &str, value: &'a Value, what: &str) -> crate::error::Result<&'a Mapping> {
    match value {
        Value::Mapping(m) => Ok(m),
        other => Err(rule_error(
            key,
            format!("{what} must be a mapping, found {}", kind(other)),
        )),
    }
}

impl StringMatch {
    /// Reads a `StringMatch` mapping; refuses one whose deciding `regex` does not compile.
    pub(crate) fn parse(key: &str, map: &Mapping) -> crate::error::Result<StringMatch> {
        let exact = text_field(key, map, "exact")?;
        let prefix = text_field(key, map, "prefix")?;
        let regex = text_field(key, map, "regex")?;
        // Java reads the regex only when neither exact nor prefix is set.
        let regex = match regex {
            Some(pattern) if exact.is_none() && prefix.is_none() => {
                Some(JavaRegex::new(&pattern).map_err(|why| rule_error(key, why))?)
            }
            _ => None,
        };
        Ok(StringMatch {
            exact,
            prefix,
            regex,
            wildcard: text_field(key, map, "wildcard")?,
            empty: text_field(key, map, "empty")?,
            noempty: text_field(key, map, "noempty")?,
        })
    }

    /// Java's `StringMatch.isMatch`; `input` is `None` where Java's is null.
    pub(crate) fn is_match(&self, input: Option<&str>) -> bool {
        match (input, self) {
            (Some(i), StringMatch { exact: Some(e), .. }) => i == e,
            (
                Some(i),
                StringMatch {
                    prefix: Some(p), ..
                },
            ) => i.starts_with(p.as_str()),
            (Some(i), StringMatch { regex: Some(r), .. }) => r.is_match(i),
            (
                Some(i),
                StringMatch {
                    wildcard: Some(w), ..
                },
            ) => i == w || w == "*",
            (i, StringMatch { empty: Some(_), .. }) => i.is_none_or(str::is_empty),
            (
                i,
                StringMatch {
                    noempty: Some(_), ..
                },
            ) => i.is_some_and(|i| !i.is_empty()),
            _ => false,
        }
    }
}

/// Java's `ListStringMatch`: any of `oneof`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListStringMatch {
    oneof: Vec<StringMatch>,
}

impl ListStringMatch {
    /// Reads `{oneof: [StringMatch...]}`; a missing `oneof` is refused (Java fails on it at
    /// every match).
    pub(crate) fn parse(key: &str, map: &Mapping) -> crate::error::Result<ListStringMatch> {
        let items = mappings(key, map, "oneof")?
            .ok_or_else(|| rule_error(key, "a oneof match needs its oneof list"))?;
        let oneof = items
            .into_iter()
            .map(|m| StringMatch::parse(key, m))
            .collect::<crate::error::Result<_>>()?;
        Ok(ListStringMatch { oneof })
    }

    /// Whether any form matches `input`.
    pub(crate) fn is_match(&self, input: Option<&str>) -> bool {
        self.oneof.iter().any(|m| m.is_match(input))
    }
}

/// Java's `AddressMatch`: `cird` (an IP expression), then `wildcard` (`*`, `0.0.0.0` or a
/// glob), then `exact`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AddressMatch {
    cird: Option<String>,
    wildcard: Option<String>,
    exact: Option<String>,
}

impl AddressMatch {
    /// Reads an `AddressMatch` mapping.
    pub(crate) fn parse(key: &str, map: &Mapping) -> crate::error::Result<AddressMatch> {
        Ok(AddressMatch {
            cird: text_field(key, map, "cird")?,
            wildcard: text_field(key, map, "wildcard")?,
            exact: text_field(key, map, "exact")?,
        })
    }

    /// Java's `AddressMatch.isMatch`. A `cird` that is no IP expression for the input (a
    /// name) lets the other forms decide, as Java's `UnknownHostException` does; a malformed
    /// one is no match (Java throws out of the whole refresh there).
    pub(crate) fn is_match(&self, input: Option<&str>) -> bool {
        let Some(input) = input else {
            return false;
        };
        if let Some(cird) = &self.cird {
            if input == cird {
                return true;
            }
            match match_ip_expression_address(cird, input) {
                Ok(matched) => return matched,
                Err(IpPatternError::UnknownHost) => {}
                Err(IpPatternError::Invalid) => return false,
            }
        }
        if let Some(wildcard) = &self.wildcard {
            return wildcard == "0.0.0.0" || wildcard == "*" || glob_match(wildcard, input);
        }
        self.exact.as_deref() == Some(input)
    }
}

/// Java's `ParamMatch`: the value of `key` (read by the caller) against `value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamMatch {
    /// The parameter read; `None` never matches.
    pub(crate) key: Option<String>,
    value: Option<StringMatch>,
}

impl ParamMatch {
    /// Reads `{key, value: StringMatch}`.
    pub(crate) fn parse(key: &str, map: &Mapping) -> crate::error::Result<ParamMatch> {
        let value = match field(map, "value") {
            None => None,
            Some(v) => Some(StringMatch::parse(
                key,
                as_mapping(key, v, "a param match's value")?,
            )?),
        };
        Ok(ParamMatch {
            key: text_field(key, map, "key")?,
            value,
        })
    }

    /// Reads a list of `ParamMatch` mappings.
    pub(crate) fn parse_list(
        key: &str,
        map: &Mapping,
        name: &str,
    ) -> crate::error::Result<Option<Vec<ParamMatch>>> {
        mappings(key, map, name)?
            .map(|items| {
                items
                    .into_iter()
                    .map(|m| ParamMatch::parse(key, m))
                    .collect()
            })
            .transpose()
    }

    /// The configurators' `ParamMatch.isMatch`: whether `input` (the value of
    /// [`key`](Self::key)) matches; no key or no value never matches.
    pub(crate) fn is_match(&self, input: Option<&str>) -> bool {
        self.key.is_some() && self.value_matches(input)
    }

    /// The tag rules' `ParamMatch.isMatch`: the value alone decides (no key reads null);
    /// no value never matches.
    pub(crate) fn value_matches(&self, input: Option<&str>) -> bool {
        self.value.as_ref().is_some_and(|v| v.is_match(input))
    }
}

/// Java's `UrlUtils.isMatchGlobPattern`: `*` matches anything; an empty pattern matches
/// only an empty value; otherwise the last `*` splits the pattern into a prefix and a
/// suffix the value must start and end with (earlier `*`s are literal), and without `*` it
/// must be equal.
pub(crate) fn glob_match(pattern: &str, value: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if pattern.is_empty() || value.is_empty() {
        return pattern.is_empty() && value.is_empty();
    }
    match pattern.rfind('*') {
        None => value == pattern,
        Some(i) => {
            let (prefix, suffix) = (&pattern[..i], &pattern[i + 1..]);
            value.starts_with(prefix) && value.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_match(yaml: &str) -> crate::error::Result<StringMatch> {
        let map: Mapping = serde_yaml_ng::from_str(yaml).unwrap();
        StringMatch::parse("k", &map)
    }

    #[test]
    fn string_matches_decide_in_javas_order() {
        let exact = string_match("{exact: gray}").unwrap();
        assert!(exact.is_match(Some("gray")));
        assert!(!exact.is_match(Some("grey")));
        assert!(!exact.is_match(None));
        assert!(string_match("{prefix: gr}").unwrap().is_match(Some("gray")));
        let wildcard = string_match("{wildcard: '*'}").unwrap();
        assert!(wildcard.is_match(Some("x")));
        assert!(!wildcard.is_match(None));
        assert!(string_match("{wildcard: a}").unwrap().is_match(Some("a")));
        let empty = string_match("{empty: x}").unwrap();
        assert!(empty.is_match(None) && empty.is_match(Some("")));
        assert!(!empty.is_match(Some("a")));
        let noempty = string_match("{noempty: x}").unwrap();
        assert!(noempty.is_match(Some("a")) && !noempty.is_match(Some("")));
        assert!(!string_match("{}").unwrap().is_match(Some("a")));
        assert!(
            string_match("{exact: 8080}")
                .unwrap()
                .is_match(Some("8080"))
        );
        // With exact set, a null input falls through to the later forms, as in Java.
        assert!(string_match("{exact: a, empty: x}").unwrap().is_match(None));
        assert!(string_match("{exact: a, regex: '('}").is_ok(), "never read");
        let regex = string_match("{regex: 'gr[ae]y'}").unwrap();
        assert!(regex.is_match(Some("grey")) && !regex.is_match(Some("greyer")));
        assert!(!regex.is_match(None), "a null input matches no regex");
        assert!(matches!(
            string_match("{regex: 'a(?=b)'}"),
            Err(crate::error::Error::Rule { .. })
        ));
        assert!(string_match("{exact: [a]}").is_err());
    }

    #[test]
    fn address_matches_read_cird_wildcard_and_exact() {
        let cird = AddressMatch {
            cird: Some("10.0.0.0/24".into()),
            ..Default::default()
        };
        assert!(cird.is_match(Some("10.0.0.7")));
        assert!(!cird.is_match(Some("10.0.1.7")));
        assert!(!cird.is_match(None));
        let any = AddressMatch {
            wildcard: Some("0.0.0.0".into()),
            ..Default::default()
        };
        assert!(any.is_match(Some("10.0.0.7")));
        let glob = AddressMatch {
            wildcard: Some("10.0.*".into()),
            ..Default::default()
        };
        assert!(glob.is_match(Some("10.0.0.7")) && !glob.is_match(Some("10.1.0.7")));
        let exact = AddressMatch {
            cird: Some("not-a-host".into()),
            exact: Some("10.0.0.7:80".into()),
            ..Default::default()
        };
        assert!(exact.is_match(Some("10.0.0.7:80")));
    }

    #[test]
    fn globs_split_at_the_last_star() {
        assert!(glob_match("*", ""));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "a"));
        assert!(glob_match("a*", "abc"));
        assert!(glob_match("*c", "abc"));
        assert!(glob_match("a*c", "abc"));
        assert!(!glob_match("a*c", "abd"));
        assert!(!glob_match("a*b*c", "ab-xc"), "only the last star is one");
        assert!(glob_match("a*b*c", "a*b-c"));
        assert!(
            glob_match("é*", "éa"),
            "multi-byte text is sliced at char bounds"
        );
    }
}
