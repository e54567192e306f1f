//! Consumer-side health: endpoints that keep failing calls are set aside and probed, and
//! instances self-preservation holds take no call until they answer a probe.
//!
//! Call outcomes are reported for an endpoint: by the balanced channel for every call it
//! routes (passive health), or by the application through a
//! [`crate::SubscriptionHandle`]. After a number of consecutive failures its address is set
//! aside and probed at an interval; a refused connection sets it aside at once (nothing
//! listens there). An instance that self-preservation holds is *suspect*: every endpoint of
//! it is set aside and its record's address probed at once, so that calls go to it only
//! once it answers. The first probe (or reported call) that succeeds brings an address
//! back. An instance that leaves is forgotten after a grace; one that registers again is
//! probed at once.
//!
//! A leaf: it knows addresses ([`Authority`](crate::model::Authority)), counters and the
//! clock, nothing of subscriptions, views or channels.
//!
//! * `fallback`: the one rule for a set whose endpoints are all set aside ([`route_around`]);
//! * `options`: [`HealthOptions`] and the [`Probe`];
//! * `tracker`: the state per address (pure);
//! * `registry`: the resolver's one tracker behind a lock, with a generation counter for
//!   those who follow it;
//! * `prober`: the probe driver.

mod fallback;
mod options;
mod prober;
mod registry;
mod tracker;

pub use fallback::route_around;
pub use options::{HealthOptions, Probe};
pub(crate) use registry::{EndpointKey, HealthRegistry};
pub(crate) use tracker::Outcome;
