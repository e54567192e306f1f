//! The rules of the config centre, watched live for each balanced channel (the I/O half of
//! governance; the rule model and the routing chain are pure, in `consumer/routing`).

mod watcher;

pub(crate) use watcher::{RulesScope, watch_rules};
