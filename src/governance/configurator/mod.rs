//! Override rules ("configurators", `{app}.configurators` and
//! `{interface}:{version}:{group}.configurators`) as Dubbo Java 3.3 parses and applies
//! them (`ConfigParser`, `AbstractConfigurator`, `OverrideConfigurator`).
//!
//! # The document
//!
//! ```yaml
//! configVersion: v3.0          # v2.7 (admin 0.6), v3.0 (new admin); absent, v3.1 read as v2.7
//! scope: application           # or service (the default for anything else)
//! key: shop-web                # the app, or the service `group/interface:version`
//! enabled: true                # the whole document, default true
//! configs:
//!   - side: consumer           # consumer or provider; an item without side never applies
//!     addresses: [10.0.0.9]    # the host it applies on; none (or 0.0.0.0) is every host
//!     providerAddresses: ["10.0.0.7:20880"]   # consumer side: which providers
//!     services: [helloworld.Greeter]          # application scope: which services
//!     applications: [shop-web]                # service scope: which applications
//!     parameters: {timeout: 3000, weight: 200}
//!     match:                   # v3.0 only
//!       address: {cird: 10.0.0.0/8}
//!       providerAddress: {exact: "10.0.0.7:20880"}
//!       service: {oneof: [{exact: helloworld.Greeter}]}
//!       app: {oneof: [{exact: shop-web}]}
//!       param: [{key: env, value: {exact: gray}}]
//! ```
//!
//! Java turns each item into one override URL per address (and per service, in application
//! scope; per application, in service scope), then sorts a document's URLs by host (as
//! text, so `0.0.0.0` before specific hosts, which are applied later and win) and then by a
//! `priority` parameter. What this model keeps of that:
//!
//! * **Enabled.** An item is enabled by the *document's* `enabled` unless it has a `type`
//!   other than `general`, when its own `enabled` decides (absent reads as false). So an
//!   item's `enabled: false` without a type changes nothing, as in Java.
//! * **Side and host.** An item applies on the consumer side when its `side` is `consumer`
//!   and its address's host is the consumer's own host or `0.0.0.0`; on the provider side
//!   when its `side` is `provider` and the host is the provider's or `0.0.0.0`. The port of
//!   an address does not count here.
//! * **providerAddresses** (consumer side): one must be the provider's `host:port`, its host,
//!   `0.0.0.0`, `0.0.0.0:*` or `0.0.0.0:{port}`. A provider-side item without them is
//!   narrowed by its own `addresses` the same way.
//! * **applications / key.** An application-scope document applies only where the
//!   application is its `key`; a service-scope item with `applications` only for those.
//!   The application compared is the consumer's on the consumer side (Java reads the
//!   consumer's own `application` first) and the provider's on the provider side.
//! * **services / key.** The item's service (`*` for none in application scope, else the
//!   key) must be `*` or the provider's service key `group/interface:version`.
//! * **v3.0 `match`**, all of it must hold: `address` against the consumer's host (provider
//!   side: the provider's), `providerAddress` against the provider's `host:port`, `service`
//!   against its service key, `app` against the application above, `param` against the
//!   provider's (current) parameters. Before v3.0, parameters named `~key` must equal the
//!   provider's `key` (and are not applied), and `application`/`side` parameters must match.
//! * **What is applied.** The item's parameters and `providerAddresses`, later items
//!   overriding earlier ones, never the keys Java keeps for conditions (`category`,
//!   `check`, `dynamic`, `enabled`, `group`, `version`, `application`, `side`,
//!   `configVersion`, `compatible_config`, `interfaces`) nor those it strips for safety
//!   (`router`, `rule`, `runtime`, `type`, `accesslog.fixed.path`). So a configurator can
//!   set `disabled`, `weight`, `timeout`, `loadbalance`, `dubbo.tag` and any other key, but
//!   not `enabled`: Java consumes that one as the rule's own switch. On the consumer side
//!   an empty value changes nothing (Java reads an empty override as absent).
//!
//! Java applies the consumer application's own document (`{consumerApp}.configurators`)
//! and then the reference's service document, to every provider URL; on the provider side
//! its application's then its service's. [`configure_for_consumer`] and
//! [`configure_for_provider`] apply several documents in that order.
//!
//! **Versions.** Java reads `configVersion` for one thing: whether the item's `match` is
//! read (`startsWith("v3.0")`, case-sensitive). So `v3.1`, `V3.0`, `v3` apply as `v2.7`
//! does (the `match` ignored, `~key` conditions read); an unquoted `3.0` (a YAML number)
//! fails Java's cast and is refused, the message saying to write `v3.0`. A version above
//! `v3.1` is refused (see `RuleHeader::is_v30`).
//!
//! **Addresses Java can never apply** (a CIDR such as `10.0.0.0/8`, a path, an empty
//! one): Java builds an override URL that matches no service and so drops that item
//! silently; here it is dropped alone too, the document's other items applying, and said
//! in its [`notes`](crate::governance::Governed::notes). **The legacy form** (a JSON list
//! of `override://` URLs) is read as Java reads it (see `legacy`).
//!
//! Deliberate differences, all refusing the document (the previous one stays): a document
//! with no items (Java keeps its previous configurators), a `match` that does not parse
//! (Java drops it and applies the item unconditionally), a `configVersion` above `v3.1`, a
//! `regex` Rust's engine does not take (see `string_match`), a non-integer `priority`, an
//! address with a user part (`user@host`). Where Java reads a parameter on the consumer
//! side it
//! prefers the consumer's own value for most keys; this model reads the provider's, except
//! `application`. Parameter values are taken literally, where Java would build and re-parse
//! a URL (a value holding `&` or `=` would be cut there).
//!
//! * `document`: the parsed document ([`Configurators`]), what it shows as written.
//! * `parse`: the items of a document turned into override URLs, as Java's `ConfigParser`.
//! * `matching`: one override URL against one provider URL (Java's v2.7 conditions and
//!   v3.0 `match`), and what it sets.
//! * `apply`: applying documents on the consumer's side and on the provider's own.
//! * `item`: one `configs` item as written ([`ConfiguratorItem`]).
//! * `legacy`: the legacy JSON list of override URLs.

mod apply;
mod document;
mod item;
mod legacy;
mod matching;
mod parse;

#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod tests;

pub use apply::{configure_for_consumer, configure_for_provider};
pub use document::{CONFIGURATORS_SUFFIX, Configurators};
pub use item::ConfiguratorItem;

/// The host of an address that stands for every host.
const ANYHOST: &str = "0.0.0.0";
