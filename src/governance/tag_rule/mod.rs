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
//! A `configVersion` that starts with `v3.0` (case-sensitive, as Java's `startsWith`) is the
//! v3.0 form; any other up to `v3.1` is the addresses form, as Java reads it; one above
//! `v3.1`, which no Dubbo release defines, is refused (Java reads it as the addresses form:
//! a defect not copied). A `regex` match decides as Java's `String.matches`, anchored; a
//! pattern of Java-only syntax refuses the rule (see `string_match`).
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
//!
//! * `rule`: the document ([`TagRule`]), its tags as written ([`TagItem`]) and each tag's
//!   group of providers, as Java's `TagRouterRule` builds them.
//! * `route`: the tag stage of routing ([`route_by_tag`], [`TagRoute`]).

mod route;
mod rule;

#[cfg(test)]
mod tests;

pub use route::{TagRoute, route_by_tag};
pub use rule::{TAG_RULE_SUFFIX, TagItem, TagRule};
