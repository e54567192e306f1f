//! Introspect: application-level service discovery ("service introspection") for Rust RPC
//! services, compatible with Apache Dubbo 3.
//!
//! Interface-level discovery registers one URL per exported interface per instance, so the
//! registry and every consumer pay for instances × interfaces. Here each running instance
//! registers **one record** for its app carrying a **revision** (a SHA-256 hash of what it
//! exports); consumers fetch the list of exported services from a provider's gRPC
//! **MetadataService** once per distinct revision, not once per instance. Cost grows with the
//! number of configurations, not with the size of the fleet.
//!
//! # Quickstart
//!
//! ```no_run
//! use std::sync::Arc;
//! use introspect::{MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription};
//!
//! # async fn demo() -> introspect::Result<()> {
//! // One store for the whole process (use `EtcdStore` across machines).
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//!
//! // Provider: serve MetadataService on a port of its own and register one instance.
//! let provider = Provider::builder("shop-orders", store.clone())
//!     .serve_metadata_on("127.0.0.1:0".parse().unwrap())
//!     .export(ServiceInfo::new("shop.OrderService").with_version("1.0"))
//!     .start()
//!     .await?;
//!
//! // Consumer: interface -> apps -> instances -> metadata (once per revision) -> endpoints.
//! let resolver = Resolver::new(store);
//! let endpoints = resolver.resolve(&Subscription::new("shop.OrderService")).await?;
//! for e in &endpoints {
//!     println!("{} {}://{}", e.app, e.protocol, e.address());
//! }
//! provider.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A tonic server hands its router to [`Provider::serve`], which adds MetadataService,
//! registers once the server runs and deregisters gracefully before it stops; see the
//! [`provider`] module for the other ways to run one.
//!
//! A consumer that calls a gRPC service turns a live subscription into a load-balanced
//! tonic channel that follows the endpoints as they come and go:
//!
//! ```no_run
//! # async fn demo(resolver: introspect::Resolver) -> introspect::Result<()> {
//! let subscription = resolver.subscribe(introspect::Subscription::new("helloworld.Greeter")).await?;
//! let (channel, _handle) = resolver.balanced_channel(&subscription)?;
//! // let mut client = GreeterClient::new(channel);
//! # drop(channel);
//! # Ok(())
//! # }
//! ```
//!
//! The examples `greeter`, `greeter_provider` and `greeter_consumer` show the whole path,
//! with tracing (`RUST_LOG`) and metrics (`--metrics ADDR`).
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `etcd` | on | [`store::EtcdStore`] and its options, through `etcd-client` |
//! | `tls` | on | TLS for MetadataService, balanced channels and etcd (tonic's `tls-ring`, etcd-client's `tls`), and the [`identity`] check (rustls and webpki verify, x509-parser reads URI SANs) |
//! | `reflection` | on | gRPC server reflection (`v1` and `v1alpha`) wherever a provider serves MetadataService (`Provider::serve`, its own listener) |
//! | `zookeeper` | off | the ZooKeeper backend (`backend::zookeeper`) and `zookeeper://` URLs, as Dubbo Java 3.3 and dubbo-go write ZooKeeper |
//! | `nacos` | off | the Nacos backend (`backend::nacos`) and `nacos://` URLs, as Dubbo Java 3.3 and dubbo-go write Nacos 2.x, through `nacos-sdk` |
//!
//! `default-features = false` leaves an embedded-store library with plaintext gRPC, which
//! builds without `protoc`: the generated MetadataService code is checked in. The `etcd`
//! feature does need `protoc` (with its well-known types), for etcd-client's own build.
//!
//! The library logs through [`tracing`] and publishes metrics through the [`::metrics`]
//! facade; installing a subscriber and a metrics exporter is up to the application. The
//! `introspect` command-line tool (crate `introspect-cli` in this workspace, directory
//! `cli/`) holds the demo, the argument parsing and the Prometheus exporter, so a service
//! that embeds the library never builds them. The xDS server that lets any gRPC client or
//! Envoy reach the fleet is its own crate too (`introspect-xds`, directory `xds/`), built
//! on this library's resolver.
//!
//! # Layout
//!
//! The one map of the source tree; each module's own docs say what it does. A call's data
//! flows one way, and each stage only reads the one before it
//! (`scripts/check-cycles.py` checks that no module imports another in a cycle):
//!
//! ```text
//!  registries ──▶ backend/ (the seam: one set of traits, a module per registry)
//!                    │
//!  discovery      consumer/views ──▶ consumer/subscribe ◀── consumer/metadata
//!  (unfiltered)      what the registries say, per app      fetched once per revision
//!                    │ endpoints
//!  governance     governance/chain ◀── governance/watch ◀── the config centre
//!  (pure)            which providers this call may reach,   each rule key followed
//!                    with what weight, and why              once per resolver
//!                    │ routed subset
//!  health         consumer/health        ejected for a reason, probed; the cap and
//!                    │                   the fallback when all are out (fallback.rs)
//!  select         consumer/select        cluster, retries, loadbalance (pure)
//!                    │
//!  the call       consumer/balance       applies the three per attempt; feeds health
//! ```
//!
//! Governance is its own house, used alike by the consumer, the provider (its own rules),
//! the xDS server and the tool; the consumer keeps discovery, the channel and health.
//!
//! ```text
//! error               the one Error type: what went wrong, its source, permanent or not
//! model/              pure data: service info and match key, metadata info, revision rules
//!                     (revision, revision_v2, revision_java, revision_rule, verification,
//!                     revision_diff), instances, their metadata map (one string, sorted
//!                     index) and their record shapes, endpoints, the Authority address
//!                     type, names and keys (a metadata report's ReportKey), provider URLs,
//!                     the consumer record and its endpoint digest
//! backend/            the seam: instances (list, follow as reset/changes), registration
//!                     (one lease-bound Registration<R> for instance and consumer records,
//!                     RegisterOptions), mapping, reports, consumers (optional records),
//!                     interfaces (interface-level URLs), config (the config centre's
//!                     reader: get, follow, compare-and-set by key) traits; config_key
//!                     (an item's key and a write, checked once, pure);
//!                     Backend; follow (Follow<T>, the stream every follow hands its
//!                     follower, and how a task feeds it); url
//!                     (Dubbo registry URLs, pure), connect, deadline (a bound on every
//!                     call of any backend)
//!   kv/               the backend over a Store: layout (Dubbo's keys), registry, mapping,
//!                     report (the typed layers that alone know the keys and the JSON),
//!                     registration (a record under a lease, instance or consumer), follow
//!                     (list + watch), consumers, config, interfaces
//!   zookeeper/        feature `zookeeper`: options, paths, record (Curator's JSON, pure),
//!                     session, node (an ephemeral node a registration holds),
//!                     registration, reads, follow, mapping, reports, epoch, consumers,
//!                     config, interfaces
//!   nacos/            feature `nacos`: options, names, record (pure), client, http,
//!                     naming_instance (a naming instance a registration holds),
//!                     subscription (a naming push subscription), registration, reads,
//!                     follow, mapping, reports, epoch, consumers, config, interfaces
//! store/              the etcd-shaped Store trait, deadline; memory/ (handle, locked
//!                     state); etcd/ (options, client, members, requests, pages, range,
//!                     watch, convert, errors)
//! rpc                 the MetadataServiceV2 contract, its server and client
//! identity/           (tls) the certificate must name the app: rule (pure), presented,
//!                     verifier (webpki chain and name, the rustls verifier), check (the
//!                     consumer's), server (the provider's)
//! tls                 TLS and identity types present without the feature, refusals
//! governance/         pure but for watch/: rule_header (the header every rule kind shares:
//!                     key, configVersion, scope, enabled, force, runtime, priority),
//!                     rule_yaml (YAML read as Java's SnakeYAML reads it), string_match and
//!                     ip_pattern (the match forms), params (what providers publish),
//!                     weight (with warm-up), tag (a call's tag), facts (what rules match
//!                     against), keys (which rule keys a channel reads), rule_set (the
//!                     rules in force), rules_digest
//!   condition/        condition rules: rule (parsing), grammar, term, pattern, v31
//!                     (weighted destinations), item, route
//!   tag_rule/         tag rules: rule (parsing), route (Java's TagStateRouter)
//!   configurator/     override rules: document, parse (Java's ConfigParser), item,
//!                     matching, apply (consumer side and provider side)
//!   chain/            the chain of one call input: mod (the steps, in Java's order),
//!                     one file per step (tag, condition), walk, routing (the result)
//!   watch/            follow (one key, with backoff), shared (each key followed once per
//!                     resolver, parsed once per change), read (the same keys read once)
//!   migration/        Java's migration steps, the migration rule, choice (which level)
//! provider/           builder, options (tag, weight, warm-up), timing (ProviderOptions),
//!                     address, record (pure), overrides (its own rules applied, pure),
//!                     rules (followed live, republished), lease, mappings, interfaces and
//!                     register_mode (interface-level URLs), report_cleanup, serve,
//!                     own_server, routes, reflection, check, signal, stop
//! consumer/           resolver (the facade), builder and options (how the parts are put
//!                     together), subscription, stats (one table of counters), endpoints
//!                     (pure), interface_endpoints (interface-level URLs as endpoints),
//!                     hosts, channel (a balanced channel over a subscription), follow (one
//!                     app's view, observed), route_report (where a call would go, and
//!                     why), explain (why a service has no endpoint), rules_now (the rules
//!                     written now, read once), timer
//!   metadata/         source (cache, single flight, verification), fetches (a
//!                     subscription's fetches), early (fetched while a list is read),
//!                     rejections (identity refusals counted and logged)
//!   rules/            a channel's rules: watcher (the keys its providers need, through
//!                     governance/watch), report (into the consumer record)
//!   seen/             the optional consumer record: table (what the subscriptions see),
//!                     pace (when it is rewritten, pure), task (lease, rewrites, deletion)
//!   views/            one shared follow and parsed view per app and per mapping: source
//!                     (follow with retries), app and protection (pure), snapshot (what
//!                     an observer sees, pure data), task (fan-out)
//!   subscribe/        one task per subscription: task (the select loop), migration (its
//!                     level state), migration_follow and migration_move (the rule
//!                     followed, a move between levels), apps, interfaces, assemble (pure),
//!                     publish, coalesce (pure), snapshot (the file), restore, handle,
//!                     options
//!   health/           a leaf: input (the one way in: outcomes, holds, liveness checks),
//!                     registry (the table), tracker (pure), fallback (the one rule and the
//!                     cap on outliers, pure), options, outlier (failure rate and latency
//!                     detectors, pure), ejection (why an endpoint is out), prober,
//!                     grpc_probe (the default probe: a gRPC answer, not a TCP accept)
//!   select/           pure, Dubbo's Cluster and LoadBalance: policy (cluster, retries,
//!                     forks, loadbalance, timeout, each with its source), loadbalance/
//!                     (p2c, random, round_robin, least_active, shortest_response and its
//!                     response_time, consistent_hash), retry (what is safe to retry),
//!                     budget (the retry budget)
//!   balance/          the data plane: discover, feeder, admission (identity: checked
//!                     before joining, refused ones rechecked), balancer (routing per call
//!                     input, health, select), cluster (a call's attempts), replay (bodies
//!                     sent again), passive (passive health), service_headers, deadline,
//!                     dial (ChannelOptions); knows health, governance, select and a stream
//!                     of changes, never the resolver
//! limits, warnings    size limits; aggregated warnings
//! config_item         a config-centre item and its version (plain values)
//! backoff             the one follow-again-after-a-backoff loop (views and rules)
//! setters             the macros that write the options types' setters and readers
//! drop_later          large values (a cold list's pages) freed off the caller's path
//! outward_ip          the local IP outward traffic leaves from (provider host, consumer host)
//! metrics/            the published series, bounded labels
//! ```
//!
//! # Store keys
//!
//! | key | value |
//! |---|---|
//! | `/services/{app}/{host}:{port}` | instance JSON in Dubbo's `DefaultServiceInstance` form, bound to a lease |
//! | `/dubbo/mapping/{interface}` | app names joined by `,` |
//! | `/dubbo/metadata/{app}/{revision}` | metadata info JSON (storage type `remote`) |
//! | `/introspect/consumers/{app}/{id}` | consumer record JSON (optional, [`consumer::ResolverBuilder::register_consumer`]), bound to a lease |
//!
//! Instance records are read in both shapes Dubbo writes: Dubbo Java's camel-case names and
//! dubbo-go's Go field names (`ServiceName`, `Host`, `Port`, `Enable`, `Healthy`, `Metadata`,
//! `null` for nil maps); see [`mod@model::instance_record`]. Records that still fail are skipped
//! with the reason.
//!
//! # Revision rules
//!
//! * `sha256-v1`: lowercase hex SHA-256 of the app name followed, for each service in
//!   ascending match-key order, by `matchKey + port + path + {k1=v1, k2=v2}`; `0` for no
//!   services. Run-to-run parameters (`pid`, `timestamp`, ...) never enter it. Unframed, so
//!   two configurations can share a text. See [`mod@model::revision`].
//! * `sha256-v2`: SHA-256 of a framed encoding: every string as a 4-byte big-endian UTF-8
//!   length and its bytes, every list preceded by its count, services by match key and
//!   params by key in UTF-8 byte order. Two different exports never share an encoding. The
//!   full definition is in [`mod@model::revision_v2`]; vectors in `tests/data/revision_v2.json`.
//! * Dubbo Java 3.2+'s rule: the `sha256-v1` text over all served params in Java's UTF-16
//!   order, hashed with MD5 (see [`mod@model::revision_java`]).
//!
//! An instance declares its rule under `introspect.revision-rule`; providers of this crate
//! write `sha256-v2`, and consumers verify `sha256-v1` and `sha256-v2` alike, so a fleet can
//! roll over. A consumer checks every
//! answer for an (app, revision) under the rule any of its instances declares: a mismatch is
//! rejected. With no rule declared it checks Dubbo Java's rule: a match is verified, a
//! mismatch is merely unverifiable (dubbo-go and older Java use other rules) and the answer is
//! used. See [`mod@model::verification`]; [`ResolverStats::revision_checks`] counts outcomes.
//!
//! A consumer speaks `MetadataServiceV2` over Triple or gRPC. An instance advertising another
//! MetadataService (Dubbo's default: V1 over `dubbo`) is not dialled; the error names what it
//! found and the next instance is tried (see [`mod@model::metadata_service`]).

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
pub mod consumer;
pub mod error;
pub mod governance;
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub mod identity;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod provider;
pub mod rpc;
pub mod store;

mod backoff;
mod config_item;
mod drop_later;
mod outward_ip;
mod setters;
mod tls;
mod warnings;

pub use backend::Backend;
pub use backend::kv::layout::Layout;
pub use consumer::{
    MigrationStep, Resolver, ResolverStats, SubscribeOptions, Subscription, SubscriptionHandle,
};
pub use error::{Error, Result};
pub use limits::Limits;
pub use model::{Endpoint, MetadataInfo, ServiceInfo, ServiceInstance};
pub use provider::{Provider, shutdown_signal};
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use store::{EtcdOptions, EtcdStore};
pub use store::{MemoryStore, Store};

/// The README's code examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// The guide's pages (`docs/guide/`), compiled as doctests like the README.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/guide/README.md")]
    struct GuideIndex;

    #[doc = include_str!("../docs/guide/providers-and-consumers.md")]
    struct ProvidersAndConsumersGuide;

    #[doc = include_str!("../docs/guide/dubbo-fleets-and-registries.md")]
    struct DubboFleetsGuide;

    #[doc = include_str!("../docs/guide/governance.md")]
    struct GovernanceGuide;

    #[doc = include_str!("../docs/guide/calls-and-failures.md")]
    struct CallsAndFailuresGuide;

    #[doc = include_str!("../docs/guide/xds.md")]
    struct XdsGuide;

    #[doc = include_str!("../docs/guide/console.md")]
    struct ConsoleGuide;

    #[doc = include_str!("../docs/guide/security.md")]
    struct SecurityGuide;

    #[doc = include_str!("../docs/guide/operations.md")]
    struct OperationsGuide;

    #[doc = include_str!("../docs/guide/benchmarks.md")]
    struct BenchmarksGuide;
}
