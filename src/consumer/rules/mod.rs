//! The rules a balanced channel routes by, watched live (each key followed through
//! [`crate::governance`]'s watch, the rule model and the chain being pure there).
//!
//! * `watcher`: one per balanced channel, following each key through the resolver's shared
//!   rule follows;
//! * `report`: a channel's report of the rules it routes by, into the consumer record.

mod report;
mod watcher;

pub(crate) use report::RulesReport;
pub(crate) use watcher::{RulesScope, SharedRules, shared_rules, watch_rules};
