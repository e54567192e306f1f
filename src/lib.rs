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
//! | `tls` | on | TLS for MetadataService, balanced channels and etcd (tonic's `tls-ring`, etcd-client's `tls`) |
//! | `reflection` | on | gRPC server reflection on a provider's own MetadataService listener ([`rpc::reflection_service`]) |
//!
//! `default-features = false` leaves an embedded-store library with plaintext gRPC. No
//! feature needs `protoc`: the generated MetadataService code is checked in (etcd-client's
//! own build still runs `protoc` when `etcd` is on).
//!
//! The library logs through [`tracing`] and publishes metrics through the [`::metrics`]
//! facade; installing a subscriber and a metrics exporter is up to the application. The
//! `introspect` command-line tool (crate `introspect-cli` in this workspace, directory
//! `cli/`) holds the demo, the argument parsing and the Prometheus exporter, so a service
//! that embeds the library never builds them.
//!
//! # Layout
//!
//! * [`model`]: service info and match key, metadata info, the revision rule, instances and
//!   endpoints. Pure: no I/O.
//! * [`store`]: the [`Store`] trait, the one seam to the outside, with the embedded
//!   [`MemoryStore`] and `EtcdStore` (feature `etcd`, with its `EtcdOptions`), which share
//!   one conformance suite. `store/etcd/` holds the etcd store, one file per concept:
//!   options, client (connecting, deadlines), members (fail-over), requests, watch,
//!   convert, errors; `store/memory/` the memory store (handle and calls, locked state).
//! * [`layout`]: the Dubbo 3 key layout; [`registry`], [`mapping`] and [`report`] are the
//!   typed layers over the store that alone know it and the JSON formats.
//! * [`rpc`]: the `MetadataServiceV2` contract (`proto/metadata_service_v2.proto`), its server
//!   and client.
//! * [`provider`]: what a Rust RPC server embeds: `builder` (settings), `record` (the
//!   instance record's metadata, pure), `lease`, `mappings`, `report_cleanup`, `serve` (the
//!   user's router), `own_server`, `reflection`, `check` (MetadataService answers at start)
//!   and `stop` (the graceful stop), one file each under `src/provider/`.
//! * [`consumer`]: what a Rust RPC client embeds: the [`Resolver`], live subscriptions and
//!   a load-balanced tonic channel over one ([`Resolver::balanced_channel`]).
//! * [`limits`]: size limits on everything read from the store or the network.
//! * [`metrics`]: resolver and provider counters and gauges, published through the
//!   `metrics` facade with bounded label values.
//!
//! # Store keys
//!
//! | key | value |
//! |---|---|
//! | `/services/{app}/{host}:{port}` | instance JSON in Dubbo's `DefaultServiceInstance` form, bound to a lease |
//! | `/dubbo/mapping/{interface}` | app names joined by `,` |
//! | `/dubbo/metadata/{app}/{revision}` | metadata info JSON (storage type `remote`) |
//!
//! # Revision rule `sha256-v1`
//!
//! Lowercase hex SHA-256 of the app name followed, for each service in ascending match-key
//! order, by `matchKey + port + path + {k1=v1, k2=v2}`; `0` for no services. Run-to-run
//! parameters (`pid`, `timestamp`, ...) never enter it. See [`mod@model::revision`].

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod consumer;
pub mod error;
pub mod layout;
pub mod limits;
pub mod mapping;
pub mod metrics;
pub mod model;
pub mod provider;
pub mod registry;
pub mod report;
pub mod rpc;
pub mod store;

mod backoff;
mod tls;

pub use consumer::{Resolver, ResolverStats, SubscribeOptions, Subscription, SubscriptionHandle};
pub use error::{Error, Result};
pub use layout::Layout;
pub use limits::Limits;
pub use model::{Endpoint, MetadataInfo, ServiceInfo, ServiceInstance};
pub use provider::Provider;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use store::{EtcdOptions, EtcdStore};
pub use store::{MemoryStore, Store};

/// The README's code examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
