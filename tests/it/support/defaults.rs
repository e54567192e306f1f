//! The library's default settings that tests wait on or compare with. The options types
//! keep their values private behind `Default`; these mirror what their docs state.

use std::time::Duration;

/// `ProviderOptions`' lease TTL.
pub const LEASE_TTL: Duration = Duration::from_secs(10);
/// The deadline of one registry call (`ResolverOptions`, `ProviderOptions`).
pub const STORE_TIMEOUT: Duration = Duration::from_secs(5);
/// `ProtectionOptions`' longest hold of an expired instance.
pub const MAX_HOLD: Duration = Duration::from_secs(5 * 60);
/// `CoalesceOptions`' window.
pub const COALESCE_WINDOW: Duration = Duration::from_millis(100);
/// `HealthOptions`' interval between probes of an ejected provider.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);
/// `SubscribeOptions`' start timeout.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);
