//! An xDS server over Introspect's registry, so that any gRPC client (Python, Go, Java,
//! C++, Node: their proxyless `xds:///NAME` resolvers) and Envoy can call the services a
//! Rust fleet registers, without a Dubbo implementation of their own.
//!
//! It serves the Aggregated Discovery Service, state-of-the-world protocol
//! (`StreamAggregatedResources`), with the version, nonce, ACK and NACK handling kept per
//! stream and per resource type, and pushes a new version of each subscribed resource as
//! soon as the registry changes it. For each gRPC service (exported over `tri` or `grpc`,
//! serialized with protobuf) it serves four resources, all named after the service:
//!
//! | type | what it says |
//! |---|---|
//! | Listener | an `api_listener` HttpConnectionManager, routes over RDS through ADS, router filter last |
//! | RouteConfiguration | every path of every host to the service's cluster |
//! | Cluster | EDS over ADS, round robin, HTTP/2 upstream |
//! | ClusterLoadAssignment | one locality of weight 1 with each instance serving it |
//!
//! The endpoints come from the library's own [`introspect::Resolver`] subscriptions, one per
//! service, created when a client first asks for it: they share the resolver's per-app
//! views and protections, so the registry as the resolver sees it and the xDS state cannot
//! disagree. What the consumer-side health checks set aside (an endpoint failing, or an
//! instance self-preservation holds that has not answered a probe yet) is left out, unless
//! that would leave none, as a balanced channel does. A name that is no known gRPC service "does not exist": it is left out
//! of every response (for LDS and CDS the protocol's way of saying so). The server is
//! read-only and takes TLS, with optional client certificates (feature `tls`, on by
//! default). Incremental (delta) xDS is not served.
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
//! `xds:///helloworld.Greeter`. Envoy takes the clusters and endpoints over ADS (it does
//! not take `api_listener` Listeners): a static listener routing to the cluster
//! `helloworld.Greeter`, with `cds_config` and the cluster's `eds_config` on ADS.
//!
//! # Layout
//!
//! * `types.rs`: the type URLs, and which types take wildcards and omission as absence;
//! * `resources.rs`: the four resources of one service from its endpoints (pure), and
//!   which endpoints a gRPC client can call;
//! * `protocol.rs`: one stream's state-of-the-world bookkeeping per type: subscriptions,
//!   ACK, NACK, stale nonces, versions, when a response is due (pure);
//! * `catalog.rs`: the followed services, one resolver subscription each, and the change
//!   signal every stream waits on;
//! * `stream.rs`: the task running one ADS stream;
//! * `server.rs`: [`XdsServer`], its builder, the ADS service and serving it.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod catalog;
pub mod protocol;
pub mod resources;
mod server;
mod stream;
pub mod types;

pub use envoy_types;
pub use server::{Ads, DEFAULT_MAX_SERVICES, XdsServer, XdsServerBuilder};
