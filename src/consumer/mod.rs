//! The consumer side: resolving interfaces to endpoints.

mod resolver;
mod stats;
mod subscription;

pub use resolver::{Resolver, ResolverBuilder};
pub use stats::ResolverStats;
pub use subscription::Subscription;
