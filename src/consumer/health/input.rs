//! Everything that changes consumer-side health from outside it, in one type: the
//! resolver's health is fed only through [`HealthInput`], by
//! [`HealthRegistry::feed`](super::HealthRegistry::feed).
//!
//! Its writers:
//! * the balanced channel's passive health (`balance/passive.rs`), for every call it routes:
//!   the call's outcome ([`HealthInput::Called`]), a call that waits past the bound
//!   ([`HealthInput::Waiting`]), a lost connection ([`HealthInput::Lost`]);
//! * the application, through a [`crate::SubscriptionHandle`]: the outcomes of its own calls
//!   ([`HealthInput::Called`]);
//! * an app's shared view (`views/task.rs`): instances self-preservation holds
//!   ([`HealthInput::Held`]), records written again ([`HealthInput::Registered`]) and
//!   instances that left ([`HealthInput::Left`]).
//!
//! The rest of what moves health is its own doing, inside the registry: the answers to the
//! probes it sends (`prober.rs`), to the liveness checks an input asks for, and the grace
//! after which an instance that left is forgotten.
//!
//! An input borrows what it names: feeding one allocates nothing (the balanced channel
//! feeds one per call).

use std::time::Duration;

use super::tracker::Outcome;
use crate::model::{Authority, ServiceInstance};

/// One balancer endpoint as health knows it: where it is, and whose record it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EndpointKey {
    /// Where calls go.
    pub address: Authority,
    /// The authority of its instance's record.
    pub instance: Authority,
}

/// One thing health is told; see the module docs.
pub(crate) enum HealthInput<'a> {
    /// A call to `endpoint` ended with `outcome`; `answered` is the method's path and its
    /// time to an answer, when it got one.
    Called {
        /// The endpoint called.
        endpoint: &'a EndpointKey,
        /// How the call went.
        outcome: Outcome,
        /// The method's path and the time to its answer's headers.
        answered: Option<(&'a str, Duration)>,
    },
    /// A call to this endpoint has waited past the bound: its provider's liveness is
    /// checked (once at a time per address); one that does not answer is ejected as hung.
    Waiting(&'a EndpointKey),
    /// A call to this endpoint lost its connection: its provider's liveness is checked at
    /// once; one that does not answer is ejected as lost.
    Lost(&'a EndpointKey),
    /// This instance (the authority of its record) is held by self-preservation: every
    /// endpoint of it is set aside until a probe, at once, answers.
    Held(&'a Authority),
    /// The records of these instances were written (again): whatever of them is set aside
    /// is probed at once. Read only when something is set aside.
    Registered(&'a mut dyn Iterator<Item = &'a ServiceInstance>),
    /// This instance (the authority of its record) is no endpoint any more.
    Left(&'a Authority),
}
