//! A call's tag and Dubbo Java 3.3's static-tag selection (`TagStateRouter` without a tag
//! rule): an untagged call goes only to untagged providers; a call tagged `T` goes to the
//! providers tagged `T`, else, unless forced, to the untagged ones. An empty tag is no
//! tag, on either side.

use std::sync::Arc;

use super::params::{FORCE_TAG_KEY, TAG_KEY, java_bool};

/// The tag of one call: the request's own (headers `dubbo.tag` and `dubbo.force.tag`, as
/// Dubbo's Triple consumers send these attachments), else the consumer's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallTag {
    /// The tag, `None` for an untagged call.
    pub tag: Option<Arc<str>>,
    /// Whether a tagged call may go only to providers of its tag.
    pub force: bool,
}

impl CallTag {
    /// An untagged call.
    pub fn none() -> CallTag {
        CallTag::default()
    }

    /// A call tagged `tag` (no tag when empty), forced or not.
    pub fn new(tag: &str, force: bool) -> CallTag {
        CallTag {
            tag: (!tag.is_empty()).then(|| Arc::from(tag)),
            force,
        }
    }

    /// The tag of a call with `headers`, given the consumer's `default`: the request's tag
    /// when it has a non-empty one, else the default's; the request's force flag when it
    /// has one (`true` in any case is true), else the default's.
    pub fn of_request(headers: &http::HeaderMap, default: &CallTag) -> CallTag {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let tag = match header(TAG_KEY) {
            Some(tag) if !tag.is_empty() => Some(Arc::from(tag)),
            _ => default.tag.clone(),
        };
        let force = header(FORCE_TAG_KEY).map_or(default.force, java_bool);
        CallTag { tag, force }
    }
}

/// Which providers a tag selection kept, for `explain` and the error of a call routed to
/// none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TagSelection {
    /// An untagged call: the untagged providers.
    Untagged,
    /// A tagged call: the providers of its tag.
    Tagged,
    /// A tagged, unforced call that no provider's tag matched: the untagged providers.
    FellBack,
}

/// The indices of the providers (given by their tags, in order) that a call tagged `call`
/// may go to, and how they were chosen.
pub(crate) fn select_by_tag<'a>(
    call: &CallTag,
    tags: impl Iterator<Item = Option<&'a str>> + Clone,
) -> (Vec<usize>, TagSelection) {
    let untagged = |tags: &mut dyn Iterator<Item = Option<&'a str>>| -> Vec<usize> {
        tags.enumerate()
            .filter(|(_, t)| t.is_none_or(str::is_empty))
            .map(|(i, _)| i)
            .collect()
    };
    let Some(tag) = call.tag.as_deref() else {
        return (untagged(&mut tags.clone()), TagSelection::Untagged);
    };
    let matching: Vec<usize> = tags
        .clone()
        .enumerate()
        .filter(|(_, t)| *t == Some(tag))
        .map(|(i, _)| i)
        .collect();
    if !matching.is_empty() || call.force {
        return (matching, TagSelection::Tagged);
    }
    (untagged(&mut tags.clone()), TagSelection::FellBack)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDERS: [Option<&str>; 4] = [None, Some("gray"), Some("blue"), None];

    fn select(call: CallTag) -> (Vec<usize>, TagSelection) {
        select_by_tag(&call, PROVIDERS.iter().copied())
    }

    #[test]
    fn an_untagged_call_goes_to_untagged_providers_only() {
        assert_eq!(
            select(CallTag::none()),
            (vec![0, 3], TagSelection::Untagged)
        );
        assert_eq!(
            select(CallTag::new("", true)).0,
            vec![0, 3],
            "empty is no tag"
        );
    }

    #[test]
    fn a_tagged_call_goes_to_its_tag_else_unforced_to_the_untagged() {
        assert_eq!(
            select(CallTag::new("gray", false)),
            (vec![1], TagSelection::Tagged)
        );
        assert_eq!(
            select(CallTag::new("gray", true)),
            (vec![1], TagSelection::Tagged)
        );
        assert_eq!(
            select(CallTag::new("red", false)),
            (vec![0, 3], TagSelection::FellBack)
        );
        assert_eq!(
            select(CallTag::new("red", true)),
            (vec![], TagSelection::Tagged)
        );
    }

    #[test]
    fn the_request_tag_wins_over_the_default_and_force_reads_as_java_reads_it() {
        let default = CallTag::new("blue", true);
        let mut headers = http::HeaderMap::new();
        assert_eq!(CallTag::of_request(&headers, &default), default);
        headers.insert("dubbo.tag", "gray".parse().unwrap());
        assert_eq!(
            CallTag::of_request(&headers, &default),
            CallTag::new("gray", true)
        );
        headers.insert("dubbo.force.tag", "no".parse().unwrap());
        assert_eq!(
            CallTag::of_request(&headers, &default),
            CallTag::new("gray", false)
        );
        headers.insert("dubbo.tag", "".parse().unwrap());
        headers.insert("dubbo.force.tag", "TRUE".parse().unwrap());
        assert_eq!(
            CallTag::of_request(&headers, &CallTag::none()),
            CallTag::new("", true),
            "an empty request tag is none: the default's (none) stands"
        );
    }
}
