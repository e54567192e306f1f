//! The consumer side: resolving interfaces to endpoints, once ([`Resolver::resolve`]) or
//! live ([`Resolver::subscribe`]), and calling them through a balanced channel
//! ([`Resolver::balanced_channel`]), with the registry-center protections of the design's
//! section 8. Its layout is in the [crate docs](crate#layout).
//!
//! # Protections
//!
//! Each applies once per resolver and app (in the app's shared view) or per address (in the
//! resolver's health), however many subscriptions and channels there are; they are set on
//! the [`ResolverBuilder`] ([`ResolverBuilder::protection`], [`ResolverBuilder::health`]).
//!
//! * **Errors never empty a set**: a failed list, watch or mapping read keeps the last
//!   state; an instance whose new revision's metadata cannot be had keeps its endpoints.
//! * **Self-preservation** ([`ProtectionOptions`]): when more than a share of an app's
//!   instances expire within a window (a partition looks like that), the removals are
//!   held, the earlier expiries of the window too (retroactively), until the instances
//!   return or [`ProtectionOptions::max_hold`] passes. Releasing a hold is logged with the
//!   app and counts and counted (`hold_releases`). Graceful stops are never held.
//! * **A hold never sends calls to the dead**: every endpoint of a held instance is set
//!   aside in balanced channels, and the instance probed at once and then at the probe
//!   interval, until it answers. The retroactive rule is kept for partitions (whose
//!   expiries spread over the lease phases) because this guard keeps it from reviving a
//!   process that really died. [`SubscriptionHandle::current`] still lists a held
//!   instance; [`SubscriptionHandle::is_set_aside`] marks it.
//! * **Empty protection after a registry wipe**, for apps of every size: a re-list whose
//!   registry epoch changed or went (or whose revision is lower than the last one seen;
//!   or, on a backend with neither, that finds the app empty) means a wiped or replaced
//!   registry. Each app then keeps the instances the re-list misses until they re-register
//!   or [`ProtectionOptions::wipe_recovery`] passes (default 30 s). Graceful stops and deletions on a
//!   healthy registry still leave at once.
//! * **Consumer-side health** ([`HealthOptions`]): the balanced channel records every
//!   call's outcome (passive health); applications may report outcomes too. After
//!   [`HealthOptions::failure_threshold`] consecutive failures (a refused connection at
//!   once) an address is set aside (left out of the calls of balanced channels) and
//!   probed, with at most [`HealthOptions::probe_concurrency`] probes at once for the
//!   resolver, until it answers. One that left and registers again is probed at once. If
//!   every endpoint a call may go to is set aside, it goes to all of them (panic mode,
//!   logged and counted as `panic_routes`); [`route_around`] is that rule, written once.
//!   Health is its own view: [`SubscriptionHandle::current`] is what discovery found,
//!   [`SubscriptionHandle::healthy`] the same set as health leaves it.
//! * **Identity** (with the `tls` feature, [`ResolverBuilder::identity`]): every
//!   MetadataService call and every balanced channel's connection checks that the server's
//!   certificate names the app it was resolved for. A refused endpoint is removed, not set
//!   aside (no call, no panic mode, no health probe brings it back) and rejoins only when a
//!   TLS recheck passes; see [`crate::identity`].
//! * **Deadlines**: a call through a balanced channel with a deadline fails with
//!   UNAVAILABLE when no endpoint is ready by then, instead of waiting.
//! * **Notification storms** are coalesced ([`CoalesceOptions`]); the **local snapshot**
//!   ([`SnapshotOptions`]) serves a consumer that starts while the registry is unreachable.

mod balance;
mod builder;
mod channel;
mod endpoints;
mod explain;
mod follow;
mod health;
mod hosts;
mod interface_endpoints;
mod metadata;
// The early fetches' former path, still named by the views' source.
use metadata::early;
mod options;
mod resolver;
mod route_report;
pub(crate) mod rules;
mod rules_now;
mod seen;
// Wired into the balancer next.
#[allow(dead_code)]
mod select;
mod stats;
mod subscribe;
mod subscription;
mod timer;
mod views;

pub use crate::governance::migration::MigrationStep;
pub use crate::model::endpoint_digest;
pub use balance::{
    BalancedChannel, Change, ChannelOptions, Discovery, HASH_KEY_HEADER, ResponseFuture,
};
pub use builder::ResolverBuilder;
pub use channel::ChannelHandle;
pub use explain::{AppFindings, Explanation, InterfaceFindings};
pub use follow::AppFollow;
pub use health::{Ejection, EjectionReason, HealthOptions, Probe, route_around};
pub use options::ResolverOptions;
pub use resolver::Resolver;
pub use route_report::{
    CallReport, ProviderRoute, RouteProblem, RouteQuery, RouteReport, SettingReport,
};
pub use select::policy::{DEFAULT_FORKS, DEFAULT_RETRIES, RETRIES_HEADER};
pub use select::retry::IDEMPOTENT_RETRY_CODES;
pub use select::{
    CallPolicy, Cluster, ConsumerSettings, Idempotent, LoadBalance, MethodSettings, PolicyInputs,
    RetryBudget, Setting, Source,
};
pub use stats::{ResolverStats, RevisionChecks, RuleCounts};
pub use subscribe::coalesce::CoalesceOptions;
/// The snapshot file's reader and writer, for this crate's fuzz targets and property tests
/// (feature `internals`); not a supported API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use subscribe::snapshot;
pub use subscribe::snapshot::{MAX_SNAPSHOT_BYTES, SnapshotOptions};
pub use subscribe::{APP_RELEASE_GRACE, SubscribeOptions, SubscriptionHandle};
pub use subscription::Subscription;
pub use views::VIEW_RELEASE_GRACE;
pub use views::protection::ProtectionOptions;
pub use views::snapshot::{AppSnapshot, Hold, HoldCause};
