//! What the rule kinds' tests share: checking that a document is refused, as each kind
//! refuses one (a rule error naming the key it is stored under, and why).

use crate::error::Error;

/// Why `parse` refused `yaml` stored under `key`: the test fails unless it is a rule error
/// that names `key` and gives a reason.
pub(crate) fn refusal<T>(
    parse: fn(&str, &str) -> crate::error::Result<T>,
    key: &str,
    yaml: &str,
) -> String {
    match parse(key, yaml) {
        Err(Error::Rule {
            key: named, reason, ..
        }) => {
            assert_eq!(named, key, "{yaml:?}");
            assert!(!reason.is_empty(), "{yaml:?} refused without a reason");
            reason
        }
        Err(other) => panic!("{yaml:?}: not a rule error: {other}"),
        Ok(_) => panic!("{yaml:?} should be refused, and was accepted"),
    }
}
