//! Dynamic tag rules (`{providerApp}.tag-router`) and the tag stage of routing, as Dubbo
//! Java 3.3's `TagStateRouter` routes.
//!
//! # The rule
//!
//! ```yaml
//! configVersion: v3.0        # absent as Java admin 0.6 writes it; v2.7 reads the same
//! key: shop-orders           # the provider application
//! enabled: true              # default true
//! force: false               # default false
//! runtime: true
//! tags:
//!   - name: gray
//!     addresses: ["10.0.0.7:20880", "10.0.0.8"]    # admin 0.6 and 2.7 form
//!   - name: blue                                     # v3.0 form: providers whose params match
//!     match:
//!       - key: env
//!         value: {exact: blue}
//! ```
//!
//! As Java's `TagRouterRule`: a rule with no tags is *invalid*; an invalid or disabled rule
//! routes by static tags only, exactly as no rule. A tag's `addresses` (when non-empty)
//! decide its group; in a `v3.0` rule a tag without addresses takes the addresses
//! (`host:port`) of the providers whose parameters match every `match` item. A tag whose
//! group is empty has no group. Addresses are Java's IP expressions (see `ip_pattern`:
//! `host` for every port, `host:port`, `*`, segment wildcards and ranges, CIDR), plus
//! `0.0.0.0:port` for every host on that port; a bare `0.0.0.0` matches no provider.
//!
//! A `configVersion` other than absent, `v2.7` or `v3.0…` is refused (Java would read such a
//! rule as the addresses form); so is a `regex` match (see `string_match`).
//!
//! # Routing ([`route_by_tag`])
//!
//! With a valid, enabled rule, a call tagged `T` (its own tag, else the consumer's) goes to:
//! 1. the providers in `T`'s group, when the group exists (a tag `a|b|c` that is not forced
//!    falls back to `a|b`, then `a`, to the first that has a group) and they are not
//!    none, or the rule is `force`;
//! 2. when `T` has no group at all, the providers statically tagged `T` (`dubbo.tag`), when
//!    there are any;
//! 3. nothing, when the call forces its tag (`dubbo.force.tag`);
//! 4. else the providers in no group that carry no static tag.
//!
//! A group that exists but matched no provider skips step 2, as in Java. An untagged call
//! goes to the providers in no group, then of those to the ones without a static tag; none
//! at all when every provider is in some group.
//!
//! # Whose rule
//!
//! Java's router subscribes to `{app}.tag-router` of one application per reference: the
//! `remote.application` of the *first* provider in its list, re-chosen whenever the list
//! changes; when an interface is served by several applications, that one rule routes all
//! of them (a rule's addresses only ever match its own app's providers). Callers here pass
//! the rule of the application whose providers they route.

use std::collections::BTreeSet;

use serde_yaml_ng::Mapping;

use super::facts::{CallFacts, ProviderFacts};
use super::ip_pattern::match_ip_expression;
use super::params::TAG_KEY;
use super::rule_yaml::{
    boolean, field, flow, int, load, mappings, rule_error, string, string_list,
};
use super::string_match::ParamMatch;
use super::tag::{CallTag, TagSelection, select_by_tag};

/// The suffix of a tag rule's key in the config centre.
pub const TAG_RULE_SUFFIX: &str = ".tag-router";

/// A parsed dynamic tag rule. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagRule {
    key: String,
    config_version: Option<String>,
    scope: Option<String>,
    rule_key: Option<String>,
    v3: bool,
    enabled: bool,
    force: bool,
    runtime: bool,
    priority: i32,
    valid: bool,
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

/// Where a call tagged one way may go, and why (for `explain` and for the error of a call
/// routed to none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagRoute {
    /// The providers kept, indices into `providers`, a subset of `input` in its order.
    pub indices: Vec<usize>,
    /// Which rule, tag or fallback decided.
    pub why: String,
}

impl TagRule {
    /// The config-centre key of `app`'s tag rule (`{app}.tag-router`).
    pub fn key_for(app: &str) -> String {
        format!("{app}{TAG_RULE_SUFFIX}")
    }

    /// Parses the rule stored under `key`. Errors ([`crate::Error::Rule`]) are the cases
    /// where Java's parser throws and keeps the previous rule: not YAML, not a mapping, a
    /// field of the wrong type, over [`MAX_RULE_BYTES`](super::MAX_RULE_BYTES); plus the
    /// forms refused here (unknown `configVersion`, `regex`, a v3.0 tag with neither
    /// addresses nor match). A rule without tags parses, as invalid.
    pub fn parse(key: &str, yaml: &str) -> crate::Result<TagRule> {
        let map = load(key, yaml)?;
        // Java casts these to String; a wrong type fails the rule.
        string(key, &map, "rawRule")?;
        let scope = string(key, &map, "scope")?;
        let rule_key = string(key, &map, "key")?;
        let version = string(key, &map, "configVersion")?;
        let v3 = match version.as_deref() {
            None | Some("v2.7") => false,
            Some(v) if v.starts_with("v3.0") => true,
            Some(v) => {
                return Err(rule_error(
                    key,
                    format!(
                        "unknown configVersion {:?} (expected none, v2.7 or v3.0)",
                        crate::Error::shorten(v)
                    ),
                ));
            }
        };
        let priority = int(key, &map, "priority")?.unwrap_or(0);
        // Java ignores a `tags` that is no list (the rule is then invalid), and fails on a
        // list item that is no mapping.
        let tags = match field(&map, "tags") {
            Some(serde_yaml_ng::Value::Sequence(_)) => mappings(key, &map, "tags")?
                .unwrap_or_default()
                .into_iter()
                .map(|item| TagDef::parse(key, item, v3))
                .collect::<crate::Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let valid = boolean(&map, "valid").unwrap_or(true) && !tags.is_empty();
        Ok(TagRule {
            key: key.to_owned(),
            config_version: version,
            scope,
            rule_key,
            v3,
            enabled: boolean(&map, "enabled").unwrap_or(true),
            force: boolean(&map, "force").unwrap_or(false),
            runtime: boolean(&map, "runtime").unwrap_or(true),
            priority,
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
        self.valid && self.enabled
    }

    /// Its `enabled` (default true).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether it is valid: `valid` is not false and it has tags (an invalid rule routes
    /// as no rule).
    pub fn is_valid(&self) -> bool {
        self.valid
    }

    /// Its `configVersion` as written (absent, `v2.7` or `v3.0…`).
    pub fn config_version(&self) -> Option<&str> {
        self.config_version.as_deref()
    }

    /// Its `scope` as written (Java does not check it).
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// Its own `key` field as written (the provider application).
    pub fn rule_key(&self) -> Option<&str> {
        self.rule_key.as_deref()
    }

    /// Its tags as written, in order, to show them.
    pub fn tags(&self) -> impl Iterator<Item = TagItem<'_>> {
        self.tags.iter().map(|t| TagItem {
            name: t.name.as_deref(),
            addresses: &t.addresses,
            match_text: t.match_text.as_deref(),
        })
    }

    /// Whether a tag's group that matched none of a call's providers routes the call to
    /// none (`force: true`) rather than falling back.
    pub fn force(&self) -> bool {
        self.force
    }

    /// The rule's `runtime` flag (whether Java re-routes on every call; informational).
    pub fn runtime(&self) -> bool {
        self.runtime
    }

    /// The rule's `priority` (informational: one tag rule applies per app).
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// The rule's tag names, in order (unnamed tags left out).
    pub fn tag_names(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().filter_map(|t| t.name.as_deref())
    }

    /// Each tag's group over `providers`, as Java's `TagRouterRule.init` builds its map:
    /// tags with addresses first, then (v3.0) the matched ones; a later tag of the same name
    /// replaces an earlier one; empty groups are left out.
    fn groups<'a>(
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
    fn parse(key: &str, map: &Mapping, v3: bool) -> crate::Result<TagDef> {
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
                    crate::Error::shorten(name.as_deref().unwrap_or(""))
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

/// Whether `provider` is at one of `addresses`, as Java's `TagStateRouter.addressMatches`:
/// an IP expression, or `0.0.0.0:{its port}`. A malformed address matches nothing.
fn at_any(addresses: &[String], provider: &ProviderFacts<'_>) -> bool {
    addresses.iter().any(
        |a| match match_ip_expression(a, provider.host, provider.port) {
            Ok(true) => true,
            Ok(false) => a.strip_prefix("0.0.0.0:") == Some(&provider.port.to_string()),
            Err(_) => false,
        },
    )
}

/// The group of a call's tag, Java's `selectAddressByTagLevel`: the tag itself when the
/// call forces it or it has no `|`; else the longest `|`-prefix that has a group.
fn group_of<'g>(
    groups: &'g [(Option<&str>, Vec<String>)],
    tag: &'g str,
    force: bool,
) -> Option<(&'g str, &'g [String])> {
    let get = |name: &str| {
        groups
            .iter()
            .find(|(n, _)| *n == Some(name))
            .map(|(_, a)| a.as_slice())
    };
    if force || !tag.contains('|') {
        return get(tag).map(|a| (tag, a));
    }
    let ends: Vec<usize> = tag
        .match_indices('|')
        .map(|(i, _)| i)
        .chain([tag.len()])
        .collect();
    ends.into_iter().rev().find_map(|end| {
        let level = &tag[..end];
        get(level).filter(|a| !a.is_empty()).map(|a| (level, a))
    })
}

/// Routes `input` (indices into `providers`, the whole list the rule's v3.0 matches are
/// computed over) for `call` by `rule` when it is valid and enabled, else by static tags
/// alone. Never returns an index outside `input`; indices past `providers` are dropped.
pub fn route_by_tag(
    rule: Option<&TagRule>,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    input: &[usize],
) -> TagRoute {
    let input: Vec<usize> = input
        .iter()
        .copied()
        .filter(|&i| i < providers.len())
        .collect();
    let route = |indices: Vec<usize>, why: String| TagRoute { indices, why };
    if input.is_empty() {
        return route(input, "no providers to route".to_owned());
    }
    let static_tag = |i: usize| {
        providers[i]
            .params
            .get(TAG_KEY)
            .map(String::as_str)
            .filter(|t| !t.is_empty())
    };
    let tag = call.tag.tag.as_deref().filter(|t| !t.is_empty());
    let call_force = call.tag.force;

    let Some(rule) = rule.filter(|r| r.is_active()) else {
        let context = match rule {
            None => "no tag rule".to_owned(),
            Some(r) if !r.valid => format!("tag rule {} has no tags", r.key),
            Some(r) => format!("tag rule {} is disabled", r.key),
        };
        // An empty tag is no tag, whichever way the call's tag was built.
        let untagged = CallTag::new("", call_force);
        let call_tag = if tag.is_none() { &untagged } else { call.tag };
        let (kept, how) = select_by_tag(call_tag, input.iter().map(|&i| static_tag(i)));
        let indices = kept.into_iter().map(|k| input[k]).collect();
        let why = match (how, tag) {
            (TagSelection::Untagged, _) | (_, None) => {
                format!("{context}: an untagged call goes to providers without a static tag")
            }
            (TagSelection::Tagged, Some(t)) => format!(
                "{context}: tag {t} goes to providers statically tagged {t}{}",
                if call_force { " (forced)" } else { "" }
            ),
            (TagSelection::FellBack, Some(t)) => format!(
                "{context}: no provider statically tagged {t}, so to providers without a tag"
            ),
        };
        return route(indices, why);
    };

    let groups = rule.groups(providers);
    let grouped: Vec<String> = {
        let mut seen = BTreeSet::new();
        groups
            .iter()
            .flat_map(|(_, a)| a.iter())
            .filter(|a| seen.insert(a.as_str()))
            .cloned()
            .collect()
    };
    let filter = |from: &[usize], keep: &dyn Fn(usize) -> bool| -> Vec<usize> {
        from.iter().copied().filter(|&i| keep(i)).collect()
    };
    let key = &rule.key;

    let Some(tag) = tag else {
        let mut result = input.clone();
        if !grouped.is_empty() {
            result = filter(&input, &|i| !at_any(&grouped, &providers[i]));
            if result.is_empty() {
                return route(
                    result,
                    format!(
                        "tag rule {key}: an untagged call, and every provider is in a tag group"
                    ),
                );
            }
        }
        let result = filter(&result, &|i| static_tag(i).is_none());
        return route(
            result,
            format!(
                "tag rule {key}: an untagged call goes to providers in no tag group and without a static tag"
            ),
        );
    };

    let result = match group_of(&groups, tag, call_force) {
        Some((level, addresses)) => {
            let result = filter(&input, &|i| at_any(addresses, &providers[i]));
            if !result.is_empty() || rule.force {
                let why = if result.is_empty() {
                    format!(
                        "tag rule {key}: no provider of tag {level}'s group, and the rule is forced"
                    )
                } else {
                    format!(
                        "tag rule {key}: tag {tag} goes to the providers of tag {level}'s group"
                    )
                };
                return route(result, why);
            }
            Vec::new()
        }
        None => filter(&input, &|i| static_tag(i) == Some(tag)),
    };
    if !result.is_empty() {
        return route(
            result,
            format!("tag rule {key} has no group for tag {tag}: providers statically tagged {tag}"),
        );
    }
    if call_force {
        return route(
            result,
            format!("tag rule {key}: no provider for tag {tag}, and the call forces its tag"),
        );
    }
    let rest = filter(&input, &|i| {
        !at_any(&grouped, &providers[i]) && static_tag(i).is_none()
    });
    route(
        rest,
        format!(
            "tag rule {key}: no provider for tag {tag}, so to providers in no group and without a tag"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Error;

    /// One provider: host, port, static tag, other params.
    type Spec<'a> = (&'static str, u16, &'a str, &'a [(&'a str, &'a str)]);

    /// Providers and their params, to route over.
    struct Fleet {
        params: Vec<BTreeMap<String, String>>,
        hosts: Vec<(&'static str, u16)>,
    }

    impl Fleet {
        fn new(spec: &[Spec<'_>]) -> Fleet {
            Fleet {
                params: spec
                    .iter()
                    .map(|(_, _, tag, extra)| {
                        let mut p: BTreeMap<String, String> = extra
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect();
                        if !tag.is_empty() {
                            p.insert("dubbo.tag".into(), tag.to_string());
                        }
                        p
                    })
                    .collect(),
                hosts: spec.iter().map(|(h, p, _, _)| (*h, *p)).collect(),
            }
        }

        fn facts(&self) -> Vec<ProviderFacts<'_>> {
            self.hosts
                .iter()
                .zip(&self.params)
                .map(|((host, port), params)| ProviderFacts {
                    host,
                    port: *port,
                    protocol: "tri",
                    app: "shop-orders",
                    interface: "shop.OrderService",
                    params,
                })
                .collect()
        }

        fn route(&self, rule: Option<&TagRule>, tag: &str, force: bool) -> Vec<usize> {
            self.route_input(rule, tag, force, &(0..self.hosts.len()).collect::<Vec<_>>())
        }

        fn route_input(
            &self,
            rule: Option<&TagRule>,
            tag: &str,
            force: bool,
            input: &[usize],
        ) -> Vec<usize> {
            let empty = BTreeMap::new();
            let call_tag = CallTag::new(tag, force);
            let call = CallFacts {
                consumer_app: "shop-web",
                consumer_host: "10.0.1.1",
                consumer_params: &empty,
                method: Some("Get"),
                attachments: &empty,
                tag: &call_tag,
            };
            let route = route_by_tag(rule, &call, &self.facts(), input);
            assert!(!route.why.is_empty());
            assert!(route.indices.iter().all(|i| input.contains(i)));
            route.indices
        }
    }

    fn rule(yaml: &str) -> TagRule {
        TagRule::parse("shop-orders.tag-router", yaml).unwrap()
    }

    /// 0 and 1 in the dynamic gray group, 2 statically blue, 3 untagged, 4 statically gray.
    fn fleet() -> Fleet {
        Fleet::new(&[
            ("10.0.0.1", 20880, "", &[]),
            ("10.0.0.2", 20880, "", &[]),
            ("10.0.0.3", 20880, "blue", &[]),
            ("10.0.0.4", 20880, "", &[]),
            ("10.0.0.5", 20880, "gray", &[]),
        ])
    }

    /// As Java admin 0.6 writes a tag rule: no configVersion, addresses per tag.
    const ADMIN_06: &str = "\
enabled: true
force: false
runtime: true
priority: 0
key: shop-orders
tags:
  - name: gray
    addresses: [\"10.0.0.1:20880\", \"10.0.0.2\"]
  - name: canary
    addresses: []
";

    #[test]
    fn the_admin_06_form_parses_with_javas_defaults() {
        let r = rule(ADMIN_06);
        assert!(r.is_active());
        assert!(!r.force());
        assert!(r.runtime());
        assert_eq!(r.priority(), 0);
        assert_eq!(r.key(), "shop-orders.tag-router");
        assert_eq!(r.tag_names().collect::<Vec<_>>(), ["gray", "canary"]);
        let minimal = rule("tags: [{name: a, addresses: [10.0.0.1]}]");
        assert!(minimal.is_active() && !minimal.force() && minimal.runtime());
        assert_eq!(TagRule::key_for("shop-orders"), "shop-orders.tag-router");
    }

    #[test]
    fn a_tagged_call_goes_to_its_dynamic_group() {
        let f = fleet();
        let r = rule(ADMIN_06);
        assert_eq!(f.route(Some(&r), "gray", false), [0, 1]);
        assert_eq!(f.route(Some(&r), "gray", true), [0, 1]);
        // Only some of the group in the input: those.
        assert_eq!(f.route_input(Some(&r), "gray", false, &[1, 3]), [1]);
    }

    #[test]
    fn a_group_that_matched_none_falls_over_unless_forced() {
        let f = fleet();
        let r = rule(ADMIN_06);
        // Group of gray exists but none of it is in the input: no static step (4 is
        // statically gray but is skipped), straight to the failover.
        assert_eq!(f.route_input(Some(&r), "gray", false, &[2, 3, 4]), [3]);
        // The call forces its tag: none.
        assert_eq!(
            f.route_input(Some(&r), "gray", true, &[2, 3, 4]),
            Vec::<usize>::new()
        );
        // The rule forces: none, whatever the call says.
        let forced = rule(&ADMIN_06.replace("force: false", "force: true"));
        assert_eq!(
            forced.route_input_helper(&f, "gray", &[2, 3, 4]),
            Vec::<usize>::new()
        );
    }

    impl TagRule {
        fn route_input_helper(&self, f: &Fleet, tag: &str, input: &[usize]) -> Vec<usize> {
            f.route_input(Some(self), tag, false, input)
        }
    }

    #[test]
    fn a_tag_without_a_group_uses_static_tags_then_falls_over() {
        let f = fleet();
        let r = rule(ADMIN_06);
        assert_eq!(f.route(Some(&r), "blue", false), [2]);
        // canary's addresses are empty: no group; nobody statically canary.
        assert_eq!(
            f.route(Some(&r), "canary", false),
            [3],
            "not in a group, untagged"
        );
        assert_eq!(f.route(Some(&r), "canary", true), Vec::<usize>::new());
        assert_eq!(f.route(Some(&r), "red", false), [3]);
    }

    #[test]
    fn an_untagged_call_avoids_groups_and_static_tags() {
        let f = fleet();
        let r = rule(ADMIN_06);
        assert_eq!(f.route(Some(&r), "", false), [3]);
        assert_eq!(
            f.route_input(Some(&r), "", false, &[0, 1]),
            Vec::<usize>::new()
        );
        let everyone = rule("tags: [{name: all, addresses: ['*']}]");
        assert_eq!(f.route(Some(&everyone), "", false), Vec::<usize>::new());
        assert_eq!(f.route(Some(&everyone), "all", false), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn no_rule_an_invalid_or_disabled_one_route_by_static_tags() {
        let f = fleet();
        let disabled = rule(&ADMIN_06.replace("enabled: true", "enabled: false"));
        let no_tags = rule("key: shop-orders\nenabled: true\n");
        let empty_tags = rule("tags: []");
        let not_a_list = rule("tags: gray");
        let invalid = rule(&format!("valid: false\n{ADMIN_06}"));
        for r in [
            None,
            Some(&disabled),
            Some(&no_tags),
            Some(&empty_tags),
            Some(&not_a_list),
            Some(&invalid),
        ] {
            assert!(r.is_none_or(|r| !r.is_active()));
            assert_eq!(f.route(r, "gray", false), [4]);
            assert_eq!(f.route(r, "red", false), [0, 1, 3]);
            assert_eq!(f.route(r, "red", true), Vec::<usize>::new());
            assert_eq!(f.route(r, "", false), [0, 1, 3]);
        }
    }

    #[test]
    fn tag_levels_fall_back_to_shorter_selectors_unless_forced() {
        let f = fleet();
        let r = rule(
            "tags: [{name: beta, addresses: [10.0.0.1]}, {name: 'beta|team1', addresses: [10.0.0.2]}]",
        );
        assert_eq!(f.route(Some(&r), "beta|team1|p1", false), [1]);
        assert_eq!(f.route(Some(&r), "beta|team2", false), [0]);
        // Forced: the whole selector only; no group, nobody statically so tagged.
        assert_eq!(f.route(Some(&r), "beta|team2", true), Vec::<usize>::new());
    }

    #[test]
    fn addresses_are_java_ip_expressions() {
        let f = Fleet::new(&[
            ("10.0.0.1", 20880, "", &[]),
            ("10.0.0.1", 20881, "", &[]),
            ("10.0.1.9", 20880, "", &[]),
            ("192.168.0.1", 20881, "", &[]),
        ]);
        let route = |addresses: &str| {
            f.route(
                Some(&rule(&format!(
                    "tags: [{{name: t, addresses: {addresses}}}]"
                ))),
                "t",
                true,
            )
        };
        assert_eq!(route("['10.0.0.1']"), [0, 1], "a host covers every port");
        assert_eq!(route("['10.0.0.1:20881']"), [1]);
        assert_eq!(route("['0.0.0.0:20881']"), [1, 3], "every host on a port");
        assert_eq!(route("['0.0.0.0']"), Vec::<usize>::new(), "no wildcard");
        assert_eq!(route("['*']"), [0, 1, 2, 3]);
        assert_eq!(route("['10.0.*.*']"), [0, 1, 2]);
        assert_eq!(route("['10.0.0.0/16']"), [0, 1, 2]);
        assert_eq!(route("['10.0.0.1-5:20880']"), [0]);
        assert_eq!(route("['not an address', '10.0', 12]"), Vec::<usize>::new());
    }

    /// As the new admin writes a v3.0 rule: match on provider params.
    const ADMIN_V3: &str = "\
configVersion: v3.0
force: false
enabled: true
key: shop-orders
tags:
  - name: gray
    match:
      - key: env
        value:
          exact: gray
  - name: zone-a
    match:
      - key: zone
        value: {prefix: a}
      - key: env
        value: {noempty: 'true'}
  - name: listed
    addresses: [10.0.0.4]
    match:
      - key: env
        value: {exact: never}
";

    #[test]
    fn v3_tags_group_the_providers_their_params_match() {
        let f = Fleet::new(&[
            ("10.0.0.1", 20880, "", &[("env", "gray"), ("zone", "a1")]),
            ("10.0.0.2", 20880, "", &[("env", "prod"), ("zone", "a2")]),
            ("10.0.0.3", 20880, "", &[("zone", "a3")]),
            ("10.0.0.4", 20880, "", &[]),
            ("10.0.0.5", 20880, "", &[]),
        ]);
        let r = rule(ADMIN_V3);
        assert_eq!(f.route(Some(&r), "gray", false), [0]);
        assert_eq!(f.route(Some(&r), "zone-a", false), [0, 1]);
        assert_eq!(
            f.route(Some(&r), "listed", false),
            [3],
            "addresses win over match"
        );
        assert_eq!(f.route(Some(&r), "", false), [2, 4]);
        // The group is computed over all providers: a call whose input lacks the group's
        // providers falls over, the group still exists.
        assert_eq!(f.route_input(Some(&r), "gray", false, &[1, 2]), [2]);
        // A v3.0 tag that matches nobody has no group.
        let none =
            rule("configVersion: v3.0\ntags: [{name: t, match: [{key: env, value: {exact: x}}]}]");
        assert!(none.is_active());
        assert_eq!(f.route(Some(&none), "t", false), [0, 1, 2, 3, 4]);
        // match is ignored before v3.0.
        let old = rule("tags: [{name: gray, match: [{key: env, value: {exact: gray}}]}]");
        assert_eq!(f.route(Some(&old), "gray", false), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn malformed_rules_are_refused_as_rule_errors() {
        let refused = [
            "",
            "tags: [",
            "- a\n- b\n",
            "configVersion: v4.0\ntags: [{name: a, addresses: [1.1.1.1]}]",
            "configVersion: 3.0\ntags: []",
            "key: 12\ntags: []",
            "priority: high\ntags: []",
            "tags: [gray]",
            "tags: [~]",
            "tags: [{name: [a], addresses: [1.1.1.1]}]",
            "tags: [{name: a, addresses: [[1.1.1.1]]}]",
            "configVersion: v3.0\ntags: [{name: a}]",
            "configVersion: v3.0\ntags: [{name: a, match: {key: env}}]",
            "configVersion: v3.0\ntags: [{name: a, match: [{key: env, value: {regex: 'g.*'}}]}]",
            "configVersion: v3.0\ntags: [{name: a, match: [{key: env, value: gray}]}]",
            "configVersion: v3.0\ntags: [{name: a, match: [7]}]",
        ];
        for yaml in refused {
            match TagRule::parse("shop-orders.tag-router", yaml) {
                Err(Error::Rule { key, .. }) => assert_eq!(key, "shop-orders.tag-router"),
                other => panic!("{yaml:?} should be refused, got {other:?}"),
            }
        }
        let big = format!(
            "tags: [{{name: a, addresses: [{}]}}]",
            "1.1.1.1, ".repeat(10_000)
        );
        assert!(matches!(TagRule::parse("k", &big), Err(Error::Rule { .. })));
    }

    #[test]
    fn hostile_rules_and_inputs_never_panic_nor_leave_the_input() {
        let f = fleet();
        let hostile = [
            "tags: [{name: \"\\0\", addresses: ['\u{202e}*', '[', ']:', '[::1]:x', '1.1.1.1/99', '::/-3', '%']}]",
            "tags: [{name: 'a|', addresses: ['|']}, {name: '', addresses: ['']}, {addresses: ['*']}]",
            "configVersion: v3.0\ntags: [{name: a, match: []}, {name: b, match: [{}]}, {name: c, match: [{value: {empty: x}}]}]",
            "a: &a [1, 2]\nb: *a\ntags: [{name: x, addresses: *a}]",
        ];
        assert!(
            TagRule::parse("k", "tags: [{name: '\u{0}'}]").is_err(),
            "raw control characters are no YAML"
        );
        for yaml in hostile {
            let r = TagRule::parse("k", yaml).unwrap();
            for tag in ["", "a", "a|", "|", "||", "\u{0}", "x|y|z"] {
                for force in [false, true] {
                    f.route_input(Some(&r), tag, force, &[4, 0, 99, 2, usize::MAX]);
                }
            }
        }
        // An empty match list matches every provider; a match item without a value none.
        let r = TagRule::parse("k", hostile[2]).unwrap();
        assert_eq!(f.route(Some(&r), "a", false), [0, 1, 2, 3, 4]);
        assert_eq!(
            f.route(Some(&r), "b", false),
            Vec::<usize>::new(),
            "b has no group, and every provider is in a's"
        );
        assert_eq!(
            f.route(Some(&r), "c", false),
            [0, 1, 2, 3, 4],
            "no key reads null"
        );
        assert_eq!(f.route_input(None, "", false, &[]), Vec::<usize>::new());
        assert_eq!(f.route_input(None, "", false, &[7, 8]), Vec::<usize>::new());
    }

    #[test]
    fn the_rule_shows_as_written() {
        let text = "configVersion: v3.0\nscope: application\nkey: shop\nforce: true\nenabled: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.7:20880']\n  - name: blue\n    match:\n      - key: env\n        value: {exact: blue}\n";
        let rule = TagRule::parse("shop.tag-router", text).unwrap();
        assert_eq!(rule.config_version(), Some("v3.0"));
        assert_eq!(rule.scope(), Some("application"));
        assert_eq!(rule.rule_key(), Some("shop"));
        assert!(rule.force() && !rule.enabled() && rule.is_valid() && !rule.is_active());
        let tags: Vec<TagItem<'_>> = rule.tags().collect();
        assert_eq!(tags.len(), 2);
        assert_eq!(tags[0].name, Some("gray"));
        assert_eq!(tags[0].addresses, ["10.0.0.7:20880"]);
        assert_eq!(tags[0].match_text, None);
        assert_eq!(
            tags[1].match_text,
            Some("[{key: env, value: {exact: blue}}]")
        );
        let empty = TagRule::parse("shop.tag-router", "key: shop\n").unwrap();
        assert!(!empty.is_valid() && empty.tags().next().is_none());
    }
}
