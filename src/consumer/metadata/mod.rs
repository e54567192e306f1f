//! Fetching the metadata of (app, revision): where a subscription's endpoints come from,
//! besides the instance records. One concept per file:
//!
//! * `source`: the resolver's metadata source: cached, loaded once per revision (the
//!   metadata report, then MetadataService calls), every answer verified;
//! * `early`: fetches started while an app's instance list is still being read, so that
//!   a cold resolve's calls overlap the read;
//! * `fetches`: a subscription's background fetches of the revisions it uses, retried
//!   with backoff and never blocking other revisions;
//! * `rejections`: servers the identity check refused, counted and logged once per cause
//!   whether a fetch or a balanced channel found them.

// `pub(super)`: the views' source still names it by its former path (`consumer::early`).
pub(super) mod early;
mod fetches;
mod rejections;
mod source;

pub(crate) use early::EarlyFetches;
pub(crate) use fetches::{AppRevisions, Ended, Fetching, Joined, Key};
pub(crate) use rejections::Rejections;
pub(crate) use source::{CacheSettings, MetadataSource};
