//! One term of a condition, `key=pattern,...` and/or `key!=pattern,...`, and what it reads,
//! as Java's condition matchers: `attachments[name]` (`AttachmentConditionMatcher`),
//! `arguments[i]` (`ArgumentConditionMatcher`), else a parameter (`UrlParamConditionMatcher`).

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::pattern::{self, Side};
use crate::governance::{CallFacts, ProviderFacts};

/// The value Java reads for a malformed `attachments`/`arguments` key, or for one on the
/// provider side (where Java has no call to read): a literal that patterns match against.
pub(super) const NOT_FOUND: &str = "dubbo_internal_not_found_argument_condition_value";

/// Where a term's key reads its value from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// A parameter: of the consumer or the call's method on `when`, of the provider on `then`.
    Param(String),
    /// The call attachment `name`; `None` when the key does not name one as Java reads it
    /// (`attachments[a.b]`: Java cuts the key at its first `.`), which reads [`NOT_FOUND`].
    Attachment(Option<String>),
    /// The call argument at an index; `None` when the key does not name one as Java reads
    /// it, which reads [`NOT_FOUND`].
    Argument(Option<u32>),
}

impl Source {
    /// The source of `key`, as Java's matcher factories choose in their order: a key
    /// starting `attachments`, then one starting `arguments`, else a parameter.
    pub(super) fn of(key: &str) -> Source {
        let head = key.split('.').next().unwrap_or("");
        if key.starts_with("attachments") {
            Source::Attachment(attachment_name(head).map(str::to_owned))
        } else if key.starts_with("arguments") {
            Source::Argument(argument_index(head))
        } else {
            Source::Param(key.to_owned())
        }
    }
}

/// The name `attachments\[(.+)\]` finds in `head`: the first `attachments[` that a `]` with
/// at least one character between follows on the same line, up to the last such `]`.
fn attachment_name(head: &str) -> Option<&str> {
    const OPEN: &str = "attachments[";
    let line_end = |s: &str| {
        s.find(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
            .unwrap_or(s.len())
    };
    let mut from = 0;
    while let Some(at) = head[from..].find(OPEN) {
        let rest = &head[from + at + OPEN.len()..];
        let line = &rest[..line_end(rest)];
        match line.rfind(']') {
            Some(close) if close > 0 => return Some(&line[..close]),
            _ => from += at + 1,
        }
    }
    None
}

/// The index `arguments\[([0-9]+)\]` finds in `head`: the first `arguments[` followed by
/// digits and `]`; `None` when there is none or it overflows an `int` (Java gives up then).
fn argument_index(head: &str) -> Option<u32> {
    const OPEN: &str = "arguments[";
    let mut from = 0;
    while let Some(at) = head[from..].find(OPEN) {
        let rest = &head[from + at + OPEN.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with(']') {
            return rest[..digits]
                .parse::<i32>()
                .ok()
                .and_then(|i| u32::try_from(i).ok());
        }
        from += at + 1;
    }
    None
}

/// What evaluating a `when` term gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Eval {
    /// The term holds.
    True,
    /// The term does not hold.
    False,
    /// The term reads a call argument, which is not known here.
    Unknown,
}

/// One term: its key, where the key reads, and the patterns it must and must not match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Term {
    /// The key as written (after Java's removal of `consumer.`/`provider.` in v3.0).
    pub(super) key: String,
    /// Where the key reads its value.
    pub(super) source: Source,
    /// Patterns after `=`: the value must match one.
    pub(super) matches: BTreeSet<String>,
    /// Patterns after `!=`: the value must match none (they win over `matches`).
    pub(super) mismatches: BTreeSet<String>,
}

impl Term {
    /// A term on `key` with no patterns yet.
    pub(super) fn new(key: &str) -> Term {
        Term {
            key: key.to_owned(),
            source: Source::of(key),
            matches: BTreeSet::new(),
            mismatches: BTreeSet::new(),
        }
    }

    /// The term as a rule writes it (`key=a,b&key!=c`, mismatches after the matches).
    pub(super) fn written(&self) -> String {
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        match (self.matches.is_empty(), self.mismatches.is_empty()) {
            (false, true) => format!("{}={}", self.key, join(&self.matches)),
            (true, false) => format!("{}!={}", self.key, join(&self.mismatches)),
            _ => format!(
                "{k}={} & {k}!={}",
                join(&self.matches),
                join(&self.mismatches),
                k = self.key
            ),
        }
    }

    /// Whether the term holds for `value`, as `AbstractConditionMatcher.isMatch`: an absent
    /// value never does, nor does a term without patterns; a mismatch pattern that matches
    /// excludes; otherwise a match pattern must match when there are any.
    fn holds<'c>(
        &self,
        value: Option<&str>,
        side: Side,
        consumer: &dyn Fn(&str) -> Option<Cow<'c, str>>,
    ) -> bool {
        let Some(value) = value else {
            return false;
        };
        let any = |set: &BTreeSet<String>| {
            set.iter()
                .any(|p| pattern::matches(p, value, side, consumer))
        };
        match (self.matches.is_empty(), self.mismatches.is_empty()) {
            (true, true) => false,
            (false, true) => any(&self.matches),
            (true, false) => !any(&self.mismatches),
            (false, false) => !any(&self.mismatches) && any(&self.matches),
        }
    }

    /// The term on the call side, reading the consumer's URL and the call as Java does
    /// ([`CallFacts::get`]). A term on an argument is [`Eval::Unknown`] unless it has
    /// no patterns (then it never holds, whatever the argument).
    pub(super) fn eval_when(&self, call: &CallFacts<'_>) -> Eval {
        let value: Option<Cow<'_, str>> = match &self.source {
            Source::Param(key) => call.get(key),
            Source::Attachment(Some(name)) => call.attachment(name).map(Cow::Borrowed),
            Source::Attachment(None) | Source::Argument(None) => Some(Cow::Borrowed(NOT_FOUND)),
            Source::Argument(Some(_)) => {
                if self.matches.is_empty() && self.mismatches.is_empty() {
                    return Eval::False;
                }
                return Eval::Unknown;
            }
        };
        let no_ref = |_: &str| None;
        if self.holds(value.as_deref(), Side::When, &no_ref) {
            Eval::True
        } else {
            Eval::False
        }
    }

    /// Whether the term holds for `provider`. Attachment and argument terms read
    /// [`NOT_FOUND`] here, as in Java, which has no call on this side; `$name` patterns read
    /// the consumer's own parameter from `call`.
    pub(super) fn holds_then(&self, provider: &ProviderFacts<'_>, call: &CallFacts<'_>) -> bool {
        let value = match &self.source {
            Source::Param(key) => provider.get(key),
            Source::Attachment(_) | Source::Argument(_) => Some(Cow::Borrowed(NOT_FOUND)),
        };
        let consumer = |name: &str| call.consumer(name);
        self.holds(value.as_deref(), Side::Then, &consumer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_where_java_reads_them() {
        assert_eq!(Source::of("method"), Source::Param("method".into()));
        assert_eq!(
            Source::of("attachments[x-user]"),
            Source::Attachment(Some("x-user".into()))
        );
        assert_eq!(
            Source::of("attachments[dubbo.tag]"),
            Source::Attachment(None),
            "Java cuts the key at its first dot"
        );
        assert_eq!(Source::of("attachments[]"), Source::Attachment(None));
        assert_eq!(
            Source::of("attachments[a]b]"),
            Source::Attachment(Some("a]b".into()))
        );
        assert_eq!(Source::of("attachmentsfoo"), Source::Attachment(None));
        assert_eq!(Source::of("arguments[0]"), Source::Argument(Some(0)));
        assert_eq!(Source::of("arguments[12].name"), Source::Argument(Some(12)));
        assert_eq!(Source::of("arguments[x]"), Source::Argument(None));
        assert_eq!(Source::of("arguments[99999999999]"), Source::Argument(None));
        assert_eq!(
            Source::of("arguments[arguments[3]"),
            Source::Argument(Some(3))
        );
        assert_eq!(Source::of("argumentsx"), Source::Argument(None));
    }
}
