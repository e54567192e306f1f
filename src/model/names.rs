//! Validation of every name that goes into a store key or a match key.
//!
//! Names come from users and, on the consumer side, from other processes: a `/` would move a
//! record to another key, a `,` would split a mapping value, a `:` would make a match key
//! ambiguous, control characters break logs and terminals, and absurd lengths cost memory.

use crate::error::{Error, Result};

/// Longest app name accepted, in bytes.
pub const MAX_APP_LEN: usize = 255;
/// Longest interface name accepted, in bytes.
pub const MAX_INTERFACE_LEN: usize = 512;
/// Longest group, version or protocol accepted, in bytes.
pub const MAX_QUALIFIER_LEN: usize = 128;
/// Longest host accepted, in bytes (a DNS name is at most 253).
pub const MAX_HOST_LEN: usize = 253;
/// Longest revision accepted, in bytes.
pub const MAX_REVISION_LEN: usize = 128;
/// Longest config-centre rule key accepted in a record: an interface, a version and a
/// group with a suffix fit well within it.
pub const MAX_RULE_KEY_LEN: usize = 1024;

struct Rule {
    kind: &'static str,
    max_len: usize,
    may_be_empty: bool,
    forbidden: &'static [char],
}

fn check(rule: &Rule, value: &str) -> Result<()> {
    let fail = |reason| {
        Err(Error::InvalidName {
            kind: rule.kind,
            value: Error::shorten(value),
            reason,
        })
    };
    if value.is_empty() {
        return if rule.may_be_empty {
            Ok(())
        } else {
            fail("must not be empty")
        };
    }
    if value.len() > rule.max_len {
        return fail("too long");
    }
    if let Some(reason) = offence(rule, value) {
        return fail(reason);
    }
    if value == "." || value == ".." {
        return fail("is a relative path component");
    }
    Ok(())
}

/// What is wrong with the characters of `value`, in the order the checks are reported:
/// control characters, whitespace, then reserved characters.
fn offence(rule: &Rule, value: &str) -> Option<&'static str> {
    // The fast path, one table lookup per byte: names are read from every record a
    // consumer lists, and nearly all are plain ASCII with nothing to report.
    let reserved_ascii = rule
        .forbidden
        .iter()
        .filter(|c| c.is_ascii())
        .fold(0u128, |mask, c| mask | 1 << u32::from(*c));
    // Control characters (0x00-0x1f, 0x7f) and the space; the other ASCII whitespace is
    // control too.
    let refused = reserved_ascii | 0xffff_ffff | 1 << 0x7f | 1 << u32::from(b' ');
    if value.bytes().all(|b| b < 0x80 && refused >> b & 1 == 0) {
        return None;
    }
    plain_offence(rule, value)
}

/// [`offence`] the plain way, a pass over the characters per check.
fn plain_offence(rule: &Rule, value: &str) -> Option<&'static str> {
    if value.chars().any(char::is_control) {
        Some("contains a control character")
    } else if value.chars().any(char::is_whitespace) {
        Some("contains whitespace")
    } else if value.contains(rule.forbidden) {
        Some("contains a character reserved by the key layout")
    } else {
        None
    }
}

/// Checks an application name: non-empty, at most [`MAX_APP_LEN`] bytes, no `/`, `,`, `:`,
/// whitespace or control characters. Non-ASCII letters are fine.
pub fn validate_app(app: &str) -> Result<()> {
    check(
        &Rule {
            kind: "app name",
            max_len: MAX_APP_LEN,
            may_be_empty: false,
            forbidden: &['/', ',', ':'],
        },
        app,
    )
}

/// Checks an interface (service) name such as `shop.OrderService`.
pub fn validate_interface(interface: &str) -> Result<()> {
    check(
        &Rule {
            kind: "interface name",
            max_len: MAX_INTERFACE_LEN,
            may_be_empty: false,
            forbidden: &['/', ',', ':'],
        },
        interface,
    )
}

/// Checks a group, version or protocol qualifier; empty means "none".
pub fn validate_qualifier(kind: &'static str, value: &str) -> Result<()> {
    check(
        &Rule {
            kind,
            max_len: MAX_QUALIFIER_LEN,
            may_be_empty: true,
            forbidden: &['/', ',', ':'],
        },
        value,
    )
}

/// Checks a host name or IP address (IPv6 literals keep their `:`).
pub fn validate_host(host: &str) -> Result<()> {
    check(
        &Rule {
            kind: "host",
            max_len: MAX_HOST_LEN,
            may_be_empty: false,
            forbidden: &['/', ','],
        },
        host,
    )
}

/// Checks a revision string (opaque: other implementations use other hashes).
pub fn validate_revision(revision: &str) -> Result<()> {
    check(
        &Rule {
            kind: "revision",
            max_len: MAX_REVISION_LEN,
            may_be_empty: false,
            forbidden: &['/', ',', ':'],
        },
        revision,
    )
}

/// Checks the names a metadata report is stored under: its app and revision.
pub fn validate_report_key(app: &str, revision: &str) -> Result<()> {
    validate_app(app)?;
    validate_revision(revision)
}

/// Checks a config-centre rule key as a consumer record lists it
/// (`helloworld.Greeter:1.0:grp.condition-router`): non-empty, at most
/// [`MAX_RULE_KEY_LEN`] bytes, no `/`, `,`, whitespace or control characters.
pub fn validate_rule_key(key: &str) -> Result<()> {
    check(
        &Rule {
            kind: "rule key",
            max_len: MAX_RULE_KEY_LEN,
            may_be_empty: false,
            forbidden: &['/', ','],
        },
        key,
    )
}

/// Checks a port that must be a real one (`1..=65535`).
pub fn validate_port(port: i64) -> Result<u16> {
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(Error::InvalidPort(port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The one-pass check reports what three passes over the characters report.
        #[test]
        fn the_fast_check_finds_what_a_plain_one_finds(value in "[ -~]{0,12}|\\PC{0,6}|[\\x00-\\x7f]{0,8}") {
            let rule = Rule { kind: "app name", max_len: 255, may_be_empty: true, forbidden: &['/', ',', ':'] };
            let plain = plain_offence(&rule, &value);
            proptest::prop_assert_eq!(offence(&rule, &value), plain);
        }
    }

    #[test]
    fn accepts_ordinary_and_non_ascii_names() {
        validate_app("shop-orders").unwrap();
        validate_app("catálogo").unwrap();
        validate_interface("shop.OrderService").unwrap();
        validate_host("10.0.0.7").unwrap();
        validate_host("::1").unwrap();
        validate_qualifier("group", "").unwrap();
    }

    #[test]
    fn rejects_hostile_names() {
        let long = "a".repeat(10_000);
        for bad in [
            "",
            "a/b",
            "../x",
            "..",
            "a\0b",
            "a\nb",
            "a,b",
            "a b",
            long.as_str(),
        ] {
            assert!(validate_app(bad).is_err(), "app {bad:?} accepted");
            assert!(
                validate_interface(bad).is_err(),
                "interface {bad:?} accepted"
            );
        }
        assert!(validate_interface("a:b").is_err());
        assert!(validate_qualifier("group", "x/y").is_err());
        assert!(validate_host("a/b").is_err());
        let err = validate_app(&long).unwrap_err().to_string();
        assert!(err.len() < 200, "error message not shortened: {err}");
    }

    #[test]
    fn ports() {
        assert_eq!(validate_port(50051).unwrap(), 50051);
        assert!(validate_port(0).is_err());
        assert!(validate_port(-1).is_err());
        assert!(validate_port(65536).is_err());
    }
}
