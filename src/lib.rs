//! Introspect: application-level service discovery ("service introspection") for Rust RPC
//! services.

#![warn(missing_docs)]

pub mod consumer;
pub mod demo;
pub mod error;
pub mod limits;
pub mod model;
pub mod store;

pub use error::{Error, Result};
pub use layout::Layout;
pub use limits::Limits;
pub mod layout;
pub mod mapping;
pub mod provider;
pub mod registry;
pub mod report;
pub mod rpc;

mod backoff;

pub use consumer::{Resolver, ResolverStats, SubscribeOptions, Subscription, SubscriptionHandle};
pub use model::{Endpoint, MetadataInfo, ServiceInfo, ServiceInstance};
pub use provider::Provider;
pub use store::{MemoryStore, Store};
