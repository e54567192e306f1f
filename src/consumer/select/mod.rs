//! The select stage (Dubbo's Cluster and LoadBalance): after routing and health have said
//! which providers a call may go to, how the call is made. Pure: the balanced channel
//! (`consumer/balance`) does the I/O.
//!
//! * `policy`: a call's cluster, retries, forks, load balancer and timeout, read as Java
//!   reads them (consumer options, provider parameters, configurators, per method, per
//!   call), each with where it came from ([`CallPolicy`]).
//! * `loadbalance`: the load balancers by Java's names, and the default ([`LoadBalance`]).
//! * `retry`: which failed attempts may go to another provider: the safety rule.
//! * `budget`: how much retrying a channel may add ([`RetryBudget`]).

pub(crate) mod budget;
pub(crate) mod loadbalance;
pub(crate) mod policy;
pub(crate) mod retry;

pub use budget::RetryBudget;
pub use loadbalance::LoadBalance;
pub use policy::{
    CallPolicy, Cluster, ConsumerSettings, Idempotent, MethodSettings, PolicyInputs, Setting,
    Source,
};
