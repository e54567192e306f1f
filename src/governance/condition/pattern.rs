//! How one pattern of a term matches one value, as Java's `ValuePattern`s do: a pattern
//! with `~` is an integer range (`RangeValuePattern`), anything else a glob with at most
//! one effective `*` (`WildcardValuePattern`, `UrlUtils.isMatchGlobPattern`), where a
//! `then` pattern `$name` stands for the consumer's own parameter `name`.

use std::borrow::Cow;

use crate::governance::string_match::glob_match;

/// Which side of a condition a pattern is on: it decides what a range that cannot be read
/// yields (false on `when`, true on `then`) and whether `$name` is resolved (`then` only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The call side, left of `=>` (v3.0) or `from` (v3.1).
    When,
    /// The provider side, right of `=>` (v3.0) or `to` (v3.1).
    Then,
}

/// Whether `value` matches `pattern` on `side`; `consumer` reads the consumer's own
/// parameter that a `then` pattern `$name` stands for.
pub(super) fn matches<'c>(
    pattern: &str,
    value: &str,
    side: Side,
    consumer: &dyn Fn(&str) -> Option<Cow<'c, str>>,
) -> bool {
    if pattern.contains('~') {
        return range_matches(pattern, value, side);
    }
    match pattern.strip_prefix('$') {
        Some(name) if side == Side::Then => glob_matches(consumer(name).as_deref(), value),
        _ => glob_matches(Some(pattern), value),
    }
}

/// Java's glob (see [`glob_match`]), where an absent pattern reads as empty: it matches
/// only an empty value.
pub(super) fn glob_matches(pattern: Option<&str>, value: &str) -> bool {
    glob_match(pattern.unwrap_or(""), value)
}

/// Java's range `start~end` (either side may be empty) on an integer value. Whatever does
/// not read as Java reads it (an overflowing number, `1~` whose empty end Java's `split`
/// drops, `~`) yields the side's default: no match on `when`, a match on `then`. A value
/// that is not all digits reads as 0, as `StringUtils.parseInteger`.
fn range_matches(pattern: &str, value: &str, side: Side) -> bool {
    let default = side == Side::Then;
    let Some(value) = parse_integer(value) else {
        return default;
    };
    let parts = java_split(pattern, '~');
    let (start, end) = match parts.as_slice() {
        [start, end, ..] => (*start, *end),
        _ => return default,
    };
    if start.is_empty() && end.is_empty() {
        return default;
    }
    let bound = |s: &str| parse_integer(s);
    match (start.is_empty(), end.is_empty()) {
        (true, _) => match bound(end) {
            Some(end) => value <= end,
            None => default,
        },
        (_, true) => match bound(start) {
            Some(start) => value >= start,
            None => default,
        },
        _ => match (bound(start), bound(end)) {
            (Some(start), Some(end)) => start <= value && value <= end,
            _ => default,
        },
    }
}

/// `StringUtils.parseInteger`: all ASCII digits parse as an `int` (`None` when that
/// overflows, where Java throws), anything else is 0.
fn parse_integer(s: &str) -> Option<i32> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        Some(0)
    }
}

/// Java's `String.split` on one character: the pieces, trailing empty ones dropped.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() && s.contains(sep) {
        parts.clear();
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_consumer(_: &str) -> Option<Cow<'static, str>> {
        None
    }

    fn on(side: Side, pattern: &str, value: &str) -> bool {
        matches(pattern, value, side, &no_consumer)
    }

    #[test]
    fn globs_take_the_last_star_only() {
        assert!(glob_matches(Some("*"), ""));
        assert!(glob_matches(Some("hello*"), "hello world"));
        assert!(glob_matches(Some("*world"), "hello world"));
        assert!(glob_matches(Some("h*d"), "hello world"));
        assert!(
            glob_matches(Some("a*a"), "a"),
            "prefix and suffix may overlap, as Java"
        );
        assert!(
            !glob_matches(Some("a*b*c"), "axbyc"),
            "the first star is literal"
        );
        assert!(glob_matches(Some("a*b*c"), "a*bzc"));
        assert!(glob_matches(Some("10.0.0.7"), "10.0.0.7"));
        assert!(!glob_matches(Some("10.0.0.7"), "10.0.0.70"));
        assert!(glob_matches(None, ""));
        assert!(!glob_matches(None, "x"));
        assert!(!glob_matches(Some("x"), ""));
    }

    #[test]
    fn ranges_as_java_reads_them() {
        assert!(on(Side::When, "1~100", "50"));
        assert!(on(Side::When, "1~100", "1") && on(Side::When, "1~100", "100"));
        assert!(!on(Side::When, "1~100", "101"));
        assert!(on(Side::When, "~100", "7") && !on(Side::When, "~100", "107"));
        assert!(!on(Side::When, "1~100", "abc"), "a non-number reads as 0");
        assert!(on(Side::When, "~5", "abc"), "0 is at most 5");
        // `1~` splits to one piece in Java: the side's default.
        assert!(!on(Side::When, "1~", "7"));
        assert!(on(Side::Then, "1~", "7"));
        assert!(!on(Side::When, "~", "7") && on(Side::Then, "~", "7"));
        assert!(!on(Side::When, "~~5", "1"), "empty start and end");
        assert!(!on(Side::When, "1~99999999999", "5"), "overflow: default");
        assert!(on(Side::Then, "1~99999999999", "5"));
        assert!(!on(Side::When, "1~5", "99999999999"));
        assert!(on(Side::When, "1~5~9", "5"), "the third piece is ignored");
        assert!(on(Side::When, "-5~5", "3"), "a signed bound reads as 0");
    }

    #[test]
    fn references_resolve_on_then_only() {
        let consumer = |name: &str| (name == "region").then_some(Cow::Borrowed("hz"));
        assert!(matches("$region", "hz", Side::Then, &consumer));
        assert!(!matches("$region", "bj", Side::Then, &consumer));
        assert!(!matches("$zone", "hz", Side::Then, &consumer));
        assert!(
            matches("$zone", "", Side::Then, &consumer),
            "absent is empty"
        );
        assert!(!matches("$region", "hz", Side::When, &consumer));
        assert!(matches("$region", "$region", Side::When, &consumer));
    }
}
