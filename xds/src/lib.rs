//! An xDS server over Introspect's registry, so that any gRPC client (Python, Go, Java,
//! C++, Node: their proxyless `xds:///NAME` resolvers) and Envoy can call the services a
//! Rust fleet registers, without a Dubbo implementation of their own.
//!
//! It serves the Aggregated Discovery Service, state-of-the-world protocol
//! (`StreamAggregatedResources`), with the version, nonce, ACK and NACK handling kept per
//! stream and per resource type, and pushes a new version of the resources a change
//! touches as soon as the registry, consumer-side health or a rule changes them. For each
//! gRPC service (exported over `tri` or `grpc`, serialized with protobuf) it serves the
//! routing a Dubbo consumer of the fleet applies, expressed in xDS ([`translate`]):
//!
//! | type | name | what it says |
//! |---|---|---|
//! | Listener | the service | an `api_listener` HttpConnectionManager, routes over RDS through ADS, router filter last |
//! | RouteConfiguration | the service | routes on the gRPC path and the headers `dubbo.tag`, `dubbo.force.tag` and those condition rules read, to a cluster or weighted clusters, with retries and timeout |
//! | Cluster | the service (an untagged call's providers), `{service}/{digest}` (another subset), `{service}/none` | EDS over ADS, HTTP/2 upstream, load balancer, outlier detection |
//! | ClusterLoadAssignment | as its cluster | its providers, weighted (configurators, warm-up) |
//!
//! The rules are the config centre's (configurators, tag rules, condition rules v3.0 and
//! v3.1), followed live through the resolver's shared rule follows
//! ([`Resolver::rules_watch`](introspect::Resolver::rules_watch)) and evaluated by the
//! library's own chain, once per class of calls the rules tell apart: a client is sent
//! what a balanced channel of the same consumer would do with the same call. The consumer
//! is the resolver's, unless a client's node says who it is ([`NodeFacts`]: its
//! `application`, `host` and other metadata, its locality, the address it calls from) and
//! the rules read who the consumer is: then that client gets routes and assignments of its
//! own. What xDS cannot express (a condition on an argument or by a pattern, latency
//! ejection, `random` or `consistenthash` balancing, per-method weights) is listed by
//! [`XdsServer::explain`] and `introspect xds --explain`, never approximated silently.
//!
//! The endpoints come from the library's own [`introspect::Resolver`] subscriptions, one per
//! service, created when a client first asks for it: they share the resolver's per-app
//! views and protections, so the registry as the resolver sees it and the xDS state cannot
//! disagree. What the consumer-side health checks set aside (an endpoint failing, or an
//! instance self-preservation holds that has not answered a probe yet) is left out, unless
//! that would leave none, as a balanced channel does. A name that is no known gRPC service
//! "does not exist": it is left out of every response (for LDS and CDS the protocol's way of
//! saying so). Responses a client rejects are counted per node ([`NackCounts`], and the
//! metric [`NACKS_METRIC`]). The server is read-only and takes TLS, with optional client
//! certificates (feature `tls`, on by default). Incremental (delta) xDS is not served.
//!
//! ```no_run
//! use std::sync::Arc;
//! use introspect::{MemoryStore, Resolver, Store};
//! use introspect_xds::XdsServer;
//!
//! # async fn demo() -> introspect::Result<()> {
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let server = XdsServer::builder(Resolver::new(store))
//!     .service("helloworld.Greeter") // listed for wildcard (Envoy CDS) clients from the start
//!     .build();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:18000").await?;
//! server.serve(listener, std::future::pending()).await?; // or a shutdown signal
//! # Ok(())
//! # }
//! ```
//!
//! A gRPC client names the server in its bootstrap file (`GRPC_XDS_BOOTSTRAP`) and dials
//! `xds:///helloworld.Greeter`. Envoy takes the routes, clusters and endpoints over ADS (it
//! does not take `api_listener` Listeners): a static listener whose HttpConnectionManager
//! takes the route configuration `helloworld.Greeter` over RDS, with `cds_config` on ADS.
//! Each stream is served as its client balances: a node whose `user_agent_name` says Envoy
//! gets endpoint weights within one locality, its load balancers and Envoy's retry
//! conditions; any other gets gRPC's (a locality per provider, of its weight).
//!
//! # Layout
//!
//! * `types.rs`: the type URLs, and which types take wildcards and omission as absence;
//! * `translate/`: a consumer's routing of one service in xDS terms: routes, clusters,
//!   weights, call policy, what cannot be expressed (pure);
//! * `callable.rs`: which endpoints a gRPC client can call;
//! * `resources.rs`: the resources of one service from its translation, for one kind of
//!   client (pure);
//! * `protocol.rs`: one stream's state-of-the-world bookkeeping per type: subscriptions,
//!   ACK, NACK, stale nonces, versions, when a response is due (pure);
//! * `catalog.rs`: the followed services, one resolver subscription and rules watch each,
//!   their translations, and the change signal every stream waits on;
//! * `nacks.rs`: the responses clients rejected, per node;
//! * `node.rs`: who a client is, as rules see a consumer, from its node (pure);
//! * `stream.rs`: the task running one ADS stream;
//! * `server.rs`: [`XdsServer`], its builder, the ADS service and serving it.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod callable;
mod catalog;
mod nacks;
pub mod node;
pub mod protocol;
pub mod resources;
mod server;
mod stream;
pub mod translate;
#[cfg(test)]
mod translation_tests;
pub mod types;

pub use envoy_types;
pub use nacks::{MAX_COUNTED_NODES, MAX_NODE_ID, NACKS_METRIC, NackCounts, OTHER_NODES};
pub use node::NodeFacts;
pub use server::{Ads, DEFAULT_MAX_SERVICES, XdsServer, XdsServerBuilder};
pub use translate::Translation;
