//! A `StringMatch`'s `regex`, evaluated as Java's `String.matches` does: the whole input
//! must match (the pattern is anchored at both ends here, as `matches` is).
//!
//! The engine is Rust's `regex` crate, not `java.util.regex`. They agree on the common
//! syntax (classes, alternation, groups, greedy and lazy quantifiers, `(?i)`), and differ
//! where it matters to an operator:
//!
//! * Java's lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`), backreferences (`\1`, `\k<name>`),
//!   possessive quantifiers (`a*+`) and atomic groups (`(?>`) are refused: the rule is
//!   refused with the parser's reason and the previous one stays, rather than evaluated
//!   differently.
//! * `\w`, `\d`, `\s`, `\b` and `(?i)` are Unicode-aware here and ASCII-only in Java by
//!   default: they agree on ASCII input, which addresses, applications and parameter
//!   values are in practice.
//! * A pattern is bounded ([`MAX_COMPILED_BYTES`] compiled): a hostile one is refused, and
//!   matching takes time linear in the input, where Java's backtracking may not.

use regex::{Regex, RegexBuilder};

/// The most memory one compiled pattern (and its lazy DFA) may take.
pub(crate) const MAX_COMPILED_BYTES: usize = 1 << 20;

/// A compiled `regex` match; equal when written alike.
#[derive(Clone, Debug)]
pub(crate) struct JavaRegex {
    written: String,
    compiled: Regex,
}

impl PartialEq for JavaRegex {
    fn eq(&self, other: &JavaRegex) -> bool {
        self.written == other.written
    }
}

impl Eq for JavaRegex {}

impl JavaRegex {
    /// Compiles `pattern` anchored to the whole input; why not, in words for an operator.
    pub(crate) fn new(pattern: &str) -> Result<JavaRegex, String> {
        if has_possessive_quantifier(pattern) {
            return Err(format!(
                "regex {:?} is not taken: it has a possessive quantifier (`*+`, `++`, `?+`, \
                 `}}+`), which Java takes and this engine would read as a repeated repetition",
                crate::error::Error::shorten(pattern)
            ));
        }
        let compiled = RegexBuilder::new(&format!(r"\A(?:{pattern})\z"))
            .size_limit(MAX_COMPILED_BYTES)
            .dfa_size_limit(MAX_COMPILED_BYTES)
            .build()
            .map_err(|e| {
                let why = match e {
                    regex::Error::CompiledTooBig(_) => {
                        format!("it compiles to over {MAX_COMPILED_BYTES} bytes")
                    }
                    other => other
                        .to_string()
                        .lines()
                        .last()
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                };
                format!(
                    "regex {:?} is not taken: {why} (lookaround, backreferences, possessive \
                     quantifiers and atomic groups, which Java takes, are not)",
                    crate::error::Error::shorten(pattern)
                )
            })?;
        Ok(JavaRegex {
            written: pattern.to_owned(),
            compiled,
        })
    }

    /// Java's `input.matches(pattern)`.
    #[must_use]
    pub(crate) fn is_match(&self, input: &str) -> bool {
        self.compiled.is_match(input)
    }
}

/// Whether `pattern` holds a quantifier followed by `+` outside an escape or a class:
/// Java's possessive form, which Rust's parser takes as a repetition of a repetition
/// (matching what a greedy one would, where Java's gives up backtracking).
fn has_possessive_quantifier(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    let mut previous_quantifier = false;
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
                previous_quantifier = false;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '+' if !in_class && previous_quantifier => return true,
            _ => {}
        }
        previous_quantifier = !in_class && matches!(c, '*' | '+' | '?' | '}');
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_input_must_match_as_in_javas_matches() {
        let gray = JavaRegex::new("gr[ae]y").unwrap();
        assert!(gray.is_match("gray") && gray.is_match("grey"));
        assert!(!gray.is_match("grayish") && !gray.is_match("a gray"));
        let alt = JavaRegex::new("a|b").unwrap();
        assert!(alt.is_match("a") && alt.is_match("b") && !alt.is_match("ab"));
        assert!(JavaRegex::new("10\\.0\\..*").unwrap().is_match("10.0.3.4"));
        assert!(JavaRegex::new("").unwrap().is_match(""));
        assert_eq!(
            JavaRegex::new("a.*").unwrap(),
            JavaRegex::new("a.*").unwrap()
        );
    }

    #[test]
    fn javas_own_syntax_and_hostile_patterns_are_refused_with_a_reason() {
        for pattern in ["a(?=b)", "(?!x).*", "(a)\\1", "a*+", "(?>a)", "(", "[z-a]"] {
            let why = JavaRegex::new(pattern).unwrap_err();
            assert!(why.contains("is not taken"), "{pattern}: {why}");
        }
        let huge = JavaRegex::new("(\\w{100}){100}").unwrap_err();
        assert!(huge.contains("compiles to over"), "{huge}");
    }
}
