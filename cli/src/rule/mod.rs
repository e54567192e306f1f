//! `introspect rule`: operators read, write, list and check governance rules where
//! dubbo-admin writes them (the registry's config centre, group `dubbo` unless given).
//!
//! * `form`: which rule a key (or a text) holds, and parsing it as that rule, so nothing
//!   a consumer would refuse is ever written.
//! * `file`: reading a rule file, bounded before it is parsed.
//! * `check`: how a parsed rule reads, item by item, for people and for scripts.
//! * `write`: compare-and-set writes and deletes: a change made by someone else between
//!   the read and the write is a conflict that shows the current rule, never an overwrite.
//! * `placement`: the config key a rule's document implies, and which keys present no
//!   known member reads; `readers`: who the registry knows, for that.
//! * `instance`: the edits of one instance's governance (disable, enable, weight, tag) as
//!   dubbo-admin writes them, merged into the rule already there.

pub mod check;
pub mod file;
pub mod form;
pub mod instance;
pub mod placement;
pub mod readers;
pub mod write;

pub use form::{MIGRATION_GROUP, ParsedRule, RuleForm};
