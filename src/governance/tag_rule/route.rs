//! The tag stage of routing, as Java's `TagStateRouter.doRoute` routes one call.

use std::collections::BTreeSet;

use super::rule::TagRule;
use crate::governance::facts::{CallFacts, ProviderFacts};
use crate::governance::ip_pattern::match_ip_expression;
use crate::governance::params::TAG_KEY;
use crate::governance::rule_header::Governed;
use crate::governance::tag::{CallTag, TagSelection, select_by_tag};

/// Where a call tagged one way may go, and why (for `explain` and for the error of a call
/// routed to none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagRoute {
    /// The providers kept, indices into `providers`, a subset of `input` in its order.
    pub indices: Vec<usize>,
    /// Which rule, tag or fallback decided.
    pub why: String,
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
            if !result.is_empty() || rule.force() {
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
