//! Consumer-side health: endpoints that fail, hang or answer far slower than the others
//! are ejected (set aside), each for a stated reason, and probed back; instances
//! self-preservation holds take no call until they answer a probe.
//!
//! Call outcomes are reported for an endpoint: by the balanced channel for every call it
//! routes (passive health), or by the application through a
//! [`crate::SubscriptionHandle`]; holds by self-preservation and instances that come and go,
//! by the apps' shared views. Each is one [`HealthInput`], fed through the one method
//! [`HealthRegistry::feed`]: `input.rs` lists everything that changes health from outside.
//!
//! An address is ejected ([`EjectionReason`]) when its connection is refused (nothing
//! listens there), after a number of consecutive failures, when its failure rate over a
//! window passes a threshold, or when a call waits past a bound and the provider does not
//! answer a liveness check (hung); a method is ejected at
//! one address when its recent latency there is a multiple of the other endpoints' median.
//! An instance that self-preservation holds is *suspect*: every endpoint of it is set aside
//! and its record's address probed at once, so that calls go to it only once it answers.
//! A probe that proves a gRPC answer brings an address back, after a wait that grows with
//! repeated ejections; an answered call brings back one that could not be reached. Outliers
//! are capped (at most a share of a call's providers). An instance that leaves is forgotten
//! after a grace; one that registers again is probed at once.
//!
//! A leaf: it knows addresses ([`Authority`](crate::model::Authority)), counters and the
//! clock, nothing of subscriptions, views or channels.
//!
//! * `fallback`: the one rule for a set whose endpoints are all set aside ([`route_around`]),
//!   and the cap on outliers;
//! * `options`: [`HealthOptions`] and the [`Probe`];
//! * `grpc_probe`: the default probe, proof of a gRPC answer;
//! * `outlier`: the detectors of outliers (a failure rate, a slow method), pure;
//! * `ejection`: why an endpoint is out ([`EjectionReason`], [`Ejection`]);
//! * `input`: everything that changes health from outside, one [`HealthInput`] each (call
//!   outcomes, waiting and lost calls, held, registered and departed instances), and the
//!   [`EndpointKey`] they name;
//! * `tracker`: the state per address (pure);
//! * `registry`: the resolver's one tracker behind a lock, fed only through
//!   [`HealthRegistry::feed`], with a generation counter for those who follow it;
//! * `prober`: the probe driver.

mod ejection;
mod fallback;
mod grpc_probe;
mod input;
mod options;
mod outlier;
mod prober;
mod registry;
mod tracker;

pub use ejection::{Ejection, EjectionReason};
pub(crate) use ejection::{Left, Standing};
pub use fallback::route_around;
pub(crate) use fallback::route_around_capped;
pub(crate) use input::{EndpointKey, HealthInput};
pub use options::{HealthOptions, Probe};
pub(crate) use registry::{HealthRegistry, ProviderHung};
pub(crate) use tracker::Outcome;
