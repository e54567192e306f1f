//! The rules digest: a short, stable name of the rules a channel routes by, so that a
//! consumer's record and a console that reads the config centre itself can tell whether
//! they speak of the same rules. Pure.

use sha2::{Digest, Sha256};

use crate::model::consumer_record::DIGEST_LEN;

/// The digest of a set of rules, given as `(key, text)` pairs: the first [`DIGEST_LEN`]
/// lowercase hex characters of the SHA-256 of the pairs sorted in byte order (by key, then
/// text; duplicates removed), each written as two netstrings, `{len}:{key},{len}:{text},`
/// with lengths in bytes, so that no choice of keys and texts can make two sets read
/// alike.
///
/// The texts are the rules as the config centre holds them, byte for byte: two readers of
/// the same keys compute the same digest, whatever order they read them in. The empty set
/// has a digest too, `e3b0c44298fc1c14` (a consumer that routes by no rule says so, and
/// differs from the config centre once a rule is written).
pub fn rules_digest<'a>(rules: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut pairs: Vec<(&str, &str)> = rules.into_iter().collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut hash = Sha256::new();
    for (key, text) in pairs {
        for part in [key, text] {
            hash.update(part.len().to_string().as_bytes());
            hash.update(b":");
            hash.update(part.as_bytes());
            hash.update(b",");
        }
    }
    let mut digest = hex::encode(hash.finalize());
    digest.truncate(DIGEST_LEN);
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\n\
                        enabled: true\nconditions:\n  - '=> port != 50051'\n";
    const TAG: &str = "configVersion: v3.0\nforce: false\nenabled: true\nkey: greeter\n\
                       tags:\n  - name: gray\n    match:\n      - key: env\n        value:\n          exact: gray\n";

    #[test]
    fn the_empty_set_has_the_digest_of_nothing() {
        assert_eq!(rules_digest([]), "e3b0c44298fc1c14");
        assert_eq!(rules_digest([]).len(), DIGEST_LEN);
    }

    #[test]
    fn the_digest_is_the_documented_hash() {
        let key = "helloworld.Greeter::.condition-router";
        let text = format!("{}:{key},{}:{RULE},", key.len(), RULE.len());
        let full = hex::encode(Sha256::digest(text.as_bytes()));
        assert_eq!(rules_digest([(key, RULE)]), full[..DIGEST_LEN]);
    }

    #[test]
    fn order_and_duplicates_do_not_matter_and_every_byte_does() {
        let a = ("helloworld.Greeter::.condition-router", RULE);
        let b = ("greeter.tag-router", TAG);
        let one = rules_digest([a, b]);
        assert_eq!(one, rules_digest([b, a, b]));
        assert_ne!(one, rules_digest([a]));
        // One more space in a rule's text is another rule.
        let spaced = format!("{RULE} ");
        assert_ne!(one, rules_digest([(a.0, spaced.as_str()), b]));
        // The same text under another key is another set.
        assert_ne!(
            rules_digest([a]),
            rules_digest([("shop.condition-router", RULE)])
        );
    }

    #[test]
    fn no_split_of_keys_and_texts_reads_as_another() {
        // Without the lengths, these two would hash the same bytes.
        assert_ne!(rules_digest([("a", "bc")]), rules_digest([("ab", "c")]));
        assert_ne!(
            rules_digest([("k", "1:x,"), ("z", "")]),
            rules_digest([("k", "1:x,1:z,0:,")])
        );
    }
}
