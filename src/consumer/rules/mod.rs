//! The rules of the config centre, watched live for each balanced channel (the I/O half of
//! governance; the rule model and the routing chain are pure, in `consumer/routing`).
//!
//! * `watcher`: one per balanced channel, following each key;
//! * `report`: a channel's report of the rules it routes by, into the consumer record;
//! * `follow`: following one key, shared with the provider's own rules;
//! * `read`: one read of the same keys ([`Resolver::rules_now`](crate::Resolver::rules_now),
//!   route explanations).

pub(crate) mod follow;
mod read;
mod report;
mod watcher;

pub(crate) use read::read_rules;
pub(crate) use report::RulesReport;
pub(crate) use watcher::{RulesScope, watch_rules};
