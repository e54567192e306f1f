//! The condition grammar of Dubbo Java 3.3 (`ConditionStateRouter.parseRule` and `init`):
//! `when => then`, each side terms `key=p1,p2` / `key!=p` joined by `&`.
//!
//! Java tokenises with the regular expression `([&!=,]*)\s*([^&!=,\s]+)`: each token is a
//! run of separator characters, blanks, then content. The separator says what the content
//! is: none starts a new term (replacing an earlier one of the same key), `&` starts or
//! continues a term, `=` and `!=` add a pattern the value must (not) match, `,` adds
//! another to the last list written (even one of an earlier term, as Java does). Any other
//! separator (`==`, `&=`, a `,` before any list) is an error. Characters the expression
//! never matches (a lone `!` before blanks) are skipped, as in Java.

use std::collections::BTreeMap;

use super::term::Term;

/// Java's `String.trim`: drops every character up to U+0020 at either end.
pub(super) fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Java's `StringUtils.isBlank`: empty or only `Character.isWhitespace` characters (which,
/// unlike Rust's, leaves out no-break spaces and U+0085).
pub(super) fn is_blank(s: &str) -> bool {
    s.chars().all(|c| {
        matches!(
            c,
            '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | '\u{1C}'..='\u{1F}'
        ) || matches!(
            c,
            ' ' | '\u{1680}' | '\u{2000}'..='\u{2006}' | '\u{2008}'..='\u{200A}'
                | '\u{2028}' | '\u{2029}' | '\u{205F}' | '\u{3000}'
        )
    })
}

/// A separator character of Java's tokeniser.
fn is_separator(c: char) -> bool {
    matches!(c, '&' | '!' | '=' | ',')
}

/// A blank of Java's tokeniser (`\s` without the Unicode flag: ASCII only).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// The next token of `rule` at or after byte `from`, as Java's `Matcher.find`:
/// `(start, separator, content, end)`.
fn next_token(rule: &str, from: usize) -> Option<(usize, &str, &str, usize)> {
    let span = |at: usize, pred: &dyn Fn(char) -> bool| -> usize {
        rule[at..]
            .char_indices()
            .find(|&(_, c)| !pred(c))
            .map_or(rule.len(), |(i, _)| at + i)
    };
    let mut at = from;
    while at < rule.len() {
        let sep_end = span(at, &is_separator);
        let blank_end = span(sep_end, &is_space);
        let content_end = span(blank_end, &|c| !is_separator(c) && !is_space(c));
        if content_end > blank_end {
            return Some((
                at,
                &rule[at..sep_end],
                &rule[blank_end..content_end],
                content_end,
            ));
        }
        // Every start before `blank_end` fails the same way (the character there is a
        // separator, or the end): the next try is there.
        at = if blank_end > at {
            blank_end
        } else {
            at + rule[at..].chars().next().map_or(1, char::len_utf8)
        };
    }
    None
}

/// Which list of a term the last `=`, `!=` wrote to.
#[derive(Clone, Copy)]
enum List {
    Matches,
    Mismatches,
}

/// The terms of one side (`key=...&key!=...`), as Java's `parseRule`; an error names the
/// separator Java refuses and where.
pub(super) fn parse_terms(rule: &str) -> Result<Vec<Term>, String> {
    // Every term ever started, and which one each key currently names: a key restarted
    // without `&` replaces its term, while `,` may still write to the replaced one.
    let mut terms: Vec<Term> = Vec::new();
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    let mut current: Option<usize> = None;
    let mut last_list: Option<(usize, List)> = None;
    let mut from = 0;
    while let Some((start, separator, content, end)) = next_token(rule, from) {
        from = end;
        let refused = || {
            format!(
                "illegal condition {:?}: the separator {:?} at byte {start} before {:?}",
                crate::error::Error::shorten(rule),
                separator,
                crate::error::Error::shorten(content)
            )
        };
        match separator {
            "" => {
                terms.push(Term::new(content));
                by_key.insert(content.to_owned(), terms.len() - 1);
                current = Some(terms.len() - 1);
            }
            "&" => {
                let at = match by_key.get(content) {
                    Some(&at) => at,
                    None => {
                        terms.push(Term::new(content));
                        by_key.insert(content.to_owned(), terms.len() - 1);
                        terms.len() - 1
                    }
                };
                current = Some(at);
            }
            "=" | "!=" => {
                let at = current.ok_or_else(refused)?;
                let list = if separator == "=" {
                    List::Matches
                } else {
                    List::Mismatches
                };
                add(&mut terms[at], list, content);
                last_list = Some((at, list));
            }
            "," => match last_list {
                Some((at, list)) if !list_of(&terms[at], list).is_empty() => {
                    add(&mut terms[at], list, content);
                }
                _ => return Err(refused()),
            },
            _ => return Err(refused()),
        }
    }
    let mut live = vec![false; terms.len()];
    for at in by_key.into_values() {
        live[at] = true;
    }
    Ok(terms
        .into_iter()
        .zip(live)
        .filter_map(|(term, live)| live.then_some(term))
        .collect())
}

fn list_of(term: &Term, list: List) -> &std::collections::BTreeSet<String> {
    match list {
        List::Matches => &term.matches,
        List::Mismatches => &term.mismatches,
    }
}

fn add(term: &mut Term, list: List, pattern: &str) {
    match list {
        List::Matches => term.matches.insert(pattern.to_owned()),
        List::Mismatches => term.mismatches.insert(pattern.to_owned()),
    };
}

/// One v3.0 condition, `when => then`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Condition {
    /// The condition as written in the rule.
    pub(super) text: String,
    /// The call must satisfy every term; none means every call.
    pub(super) when: Vec<Term>,
    /// The providers kept must satisfy every term; `None` (an empty or `false` side) keeps
    /// none: the consumer is blacklisted. Terms that turned out empty (`=> &`) keep none
    /// either, as Java's `matchThen` on an empty map.
    pub(super) then: Option<Vec<Term>>,
}

impl Condition {
    /// Parses one condition as `ConditionStateRouter.init`: `consumer.` and `provider.` are
    /// removed wherever they occur (values too, as Java does); without `=>` the whole text
    /// is the `then`; a blank or `true` `when` matches every call; a blank or `false`
    /// `then` blacklists. A blank condition is refused.
    pub(super) fn parse(text: &str) -> Result<Condition, String> {
        if java_trim(text).is_empty() {
            return Err("an empty condition".to_owned());
        }
        let rule = text.replace("consumer.", "").replace("provider.", "");
        let (when, then) = match rule.find("=>") {
            None => (None, java_trim(&rule)),
            Some(i) => (Some(java_trim(&rule[..i])), java_trim(&rule[i + 2..])),
        };
        let when = match when {
            Some(w) if !is_blank(w) && w != "true" => parse_terms(w)?,
            _ => Vec::new(),
        };
        let then = if is_blank(then) || then == "false" {
            None
        } else {
            Some(parse_terms(then)?)
        };
        Ok(Condition {
            text: text.to_owned(),
            when,
            then,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(rule: &str) -> Term {
        let mut terms = parse_terms(rule).expect("parses");
        assert_eq!(terms.len(), 1, "{rule}");
        terms.remove(0)
    }

    fn set(items: &[&str]) -> std::collections::BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn terms_with_lists_and_negations() {
        let t = one("method = sayHello,sayHi");
        assert_eq!(t.key, "method");
        assert_eq!(t.matches, set(&["sayHello", "sayHi"]));
        let t = one("host != 10.0.0.1 , 10.0.0.2");
        assert_eq!(t.mismatches, set(&["10.0.0.1", "10.0.0.2"]));
        let t = one("region=hz!=hz-a=bj");
        assert_eq!(t.matches, set(&["hz", "bj"]));
        assert_eq!(t.mismatches, set(&["hz-a"]));
    }

    #[test]
    fn conjunctions_merge_a_repeated_key() {
        let terms = parse_terms("method=a & region=hz & method=b").expect("parses");
        assert_eq!(terms.len(), 2);
        let m = terms.iter().find(|t| t.key == "method").expect("method");
        assert_eq!(m.matches, set(&["a", "b"]));
    }

    #[test]
    fn quirks_java_has() {
        // A key restarted without `&` replaces the earlier term; `,` then writes to the
        // replaced one.
        let t = one("a=1 a,2");
        assert!(t.matches.is_empty() && t.mismatches.is_empty());
        // `,` after a new key adds to the previous key's list.
        let terms = parse_terms("a=1&b,2").expect("parses");
        let a = terms.iter().find(|t| t.key == "a").expect("a");
        assert_eq!(a.matches, set(&["1", "2"]));
        // A lone `!` before blanks is skipped.
        assert_eq!(one("a ! = b").matches, set(&["b"]));
        // Trailing separators are ignored.
        assert_eq!(one("a=b,").matches, set(&["b"]));
    }

    #[test]
    fn refused_separators() {
        for bad in ["=a", "!=a", "a==b", "a&=b", ",a", "a,b", "a=b&&c", "a!b"] {
            assert!(parse_terms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn conditions_split_at_the_arrow() {
        let c = Condition::parse("method=a => region=hz").expect("parses");
        assert_eq!(c.when.len(), 1);
        assert_eq!(c.then.as_ref().map(Vec::len), Some(1));
        let c = Condition::parse("=> region=hz").expect("parses");
        assert!(c.when.is_empty());
        let c = Condition::parse("region=hz").expect("parses");
        assert!(c.when.is_empty() && c.then.is_some());
        let c = Condition::parse("method=a =>").expect("parses");
        assert_eq!(c.then, None);
        let c = Condition::parse("true => false").expect("parses");
        assert!(c.when.is_empty() && c.then.is_none());
        let c = Condition::parse("consumer.host=1.1.1.1 => provider.region=a.provider.b")
            .expect("parses");
        assert_eq!(c.when[0].key, "host");
        let then = c.then.expect("then");
        assert_eq!(then[0].key, "region");
        assert_eq!(then[0].matches, set(&["a.b"]), "Java strips values too");
        assert!(Condition::parse("  \t").is_err());
        assert!(Condition::parse("a==b => c=d").is_err());
    }

    #[test]
    fn blanks_are_javas() {
        assert!(is_blank("\u{2003}\t"));
        assert!(!is_blank("\u{A0}"), "a no-break space is not blank in Java");
        assert_eq!(java_trim("\u{1}a b\u{7f}"), "a b\u{7f}");
    }
}
