//! The I/O half of governance: rules read from the config centre.
//!
//! * `follow`: one key followed live, each state parsed, followed again after a backoff;
//! * `shared`: each key followed once for all its followers (a resolver's channels, a
//!   provider's own rules), the last good rule kept;
//! * `read`: one read of the same keys ([`Resolver::rules_now`](crate::Resolver::rules_now),
//!   route explanations).

pub(crate) mod follow;
mod read;
pub(crate) mod shared;

pub(crate) use read::read_rules;
