//! A tag rule document as Java's `TagRouterRule` reads it, and each tag's group of
//! providers as its `init` builds them.

use serde_yaml_ng::Mapping;

use crate::governance::facts::ProviderFacts;
use crate::governance::rule_header::{Governed, RuleForm, RuleHeader};
use crate::governance::rule_yaml::{field, flow, load, mappings, rule_error, string, string_list};
use crate::governance::string_match::ParamMatch;

/// The suffix of a tag rule's key in the config centre.
pub const TAG_RULE_SUFFIX: &str = ".tag-router";

/// A parsed dynamic tag rule. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagRule {
    pub(super) key: String,
    header: RuleHeader,
    v3: bool,
    /// `valid` not false, and some tags.
    pub(super) valid: bool,
    tags: Vec<TagDef>,
}

/// One `tags` item.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TagDef {
    name: Option<String>,
    addresses: Vec<String>,
    /// The v3.0 matchers, `None` when the item has none (or the rule is not v3.0).
    matches: Option<Vec<ParamMatch>>,
    /// Its `match` on one line, as written (v3.0 only, as the matchers).
    match_text: Option<String>,
}

/// One tag of a rule as written, to show it: its name, its addresses and (v3.0) the
/// `match` that picks providers by their parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TagItem<'a> {
    /// `name` (the tag a call asks for).
    pub name: Option<&'a str>,
    /// `addresses`: Java's IP expressions of the providers in the tag.
    pub addresses: &'a [String],
    /// The v3.0 `match`, on one line in YAML's flow style.
    pub match_text: Option<&'a str>,
}

impl Governed for TagRule {
    fn header(&self) -> &RuleHeader {
        &self.header
    }
}

impl TagRule {
    /// The config-centre key of `app`'s tag rule (`{app}.tag-router`).
    pub fn key_for(app: &str) -> String {
        format!("{app}{TAG_RULE_SUFFIX}")
    }

    /// Parses the rule stored under `key`. Errors ([`crate::error::Error::Rule`]) are the cases
    /// where Java's parser throws and keeps the previous rule: not YAML, not a mapping, a
    /// field of the wrong type, over [`MAX_RULE_BYTES`](crate::governance::MAX_RULE_BYTES); plus the
    /// forms refused here (a `configVersion` above `v3.1`, a `regex` of Java-only syntax, a
    /// v3.0 tag with neither addresses nor match). A rule without tags parses, as invalid.
    pub fn parse(key: &str, yaml: &str) -> crate::error::Result<TagRule> {
        let map = load(key, yaml)?;
        let header = RuleHeader::read(key, &map, RuleForm::TagRule)?;
        let v3 = header.is_v30(key, "none, v2.7 or v3.0")?;
        // Java ignores a `tags` that is no list (the rule is then invalid), and fails on a
        // list item that is no mapping.
        let tags = match field(&map, "tags") {
            Some(serde_yaml_ng::Value::Sequence(_)) => mappings(key, &map, "tags")?
                .unwrap_or_default()
                .into_iter()
                .map(|item| TagDef::parse(key, item, v3))
                .collect::<crate::error::Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let valid = header.valid && !tags.is_empty();
        Ok(TagRule {
            key: key.to_owned(),
            header,
            v3,
            valid,
            tags,
        })
    }

    /// The key the rule was stored under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the rule routes at all: valid (it has tags) and enabled.
    pub fn is_active(&self) -> bool {
        self.valid && self.header.enabled
    }

    /// Whether it is valid: `valid` is not false and it has tags (an invalid rule routes
    /// as no rule).
    pub fn is_valid(&self) -> bool {
        self.valid
    }

    /// Its tags as written, in order, to show them.
    pub fn tags(&self) -> impl Iterator<Item = TagItem<'_>> {
        self.tags.iter().map(|t| TagItem {
            name: t.name.as_deref(),
            addresses: &t.addresses,
            match_text: t.match_text.as_deref(),
        })
    }

    /// The rule's tag names, in order (unnamed tags left out).
    pub fn tag_names(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().filter_map(|t| t.name.as_deref())
    }

    /// Each tag's group over `providers`, as Java's `TagRouterRule.init` builds its map:
    /// tags with addresses first, then (v3.0) the matched ones; a later tag of the same name
    /// replaces an earlier one; empty groups are left out.
    pub(super) fn groups<'a>(
        &'a self,
        providers: &[ProviderFacts<'_>],
    ) -> Vec<(Option<&'a str>, Vec<String>)> {
        let mut groups: Vec<(Option<&'a str>, Vec<String>)> = Vec::new();
        let mut put = |name: Option<&'a str>, addresses: Vec<String>| match groups
            .iter_mut()
            .find(|(n, _)| *n == name)
        {
            Some(slot) => slot.1 = addresses,
            None => groups.push((name, addresses)),
        };
        for tag in self.tags.iter().filter(|t| !t.addresses.is_empty()) {
            put(tag.name.as_deref(), tag.addresses.clone());
        }
        if self.v3 && !providers.is_empty() {
            for tag in self.tags.iter().filter(|t| t.addresses.is_empty()) {
                let matches = tag.matches.as_deref().unwrap_or_default();
                let mut addresses: Vec<String> = Vec::new();
                for p in providers {
                    let matched = matches.iter().all(|m| {
                        m.value_matches(m.key.as_deref().and_then(|k| p.get(k)).as_deref())
                    });
                    let address = p.address();
                    if matched && !addresses.contains(&address) {
                        addresses.push(address);
                    }
                }
                if !addresses.is_empty() {
                    put(tag.name.as_deref(), addresses);
                }
            }
        }
        groups
    }
}

impl TagDef {
    fn parse(key: &str, map: &Mapping, v3: bool) -> crate::error::Result<TagDef> {
        let name = string(key, map, "name")?;
        let matches = if v3 {
            ParamMatch::parse_list(key, map, "match")?
        } else {
            None
        };
        let addresses = string_list(key, map, "addresses")?.unwrap_or_default();
        if v3 && addresses.is_empty() && matches.is_none() {
            return Err(rule_error(
                key,
                format!(
                    "tag {:?} has neither addresses nor match",
                    crate::error::Error::shorten(name.as_deref().unwrap_or(""))
                ),
            ));
        }
        let match_text = if v3 {
            field(map, "match").map(flow)
        } else {
            None
        };
        Ok(TagDef {
            name,
            addresses,
            matches,
            match_text,
        })
    }
}
