//! The I/O half of governance: rules read from the config centre.
//!
//! * `follow`: one key followed live, the last good text kept (the consumer's channels and
//!   the provider's own rules alike);
//! * `read`: one read of the same keys ([`Resolver::rules_now`](crate::Resolver::rules_now),
//!   route explanations).

pub(crate) mod follow;
mod read;

pub(crate) use read::read_rules;
