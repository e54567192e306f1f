//! What an app's shared view holds, as one picture: every registered record, enabled or
//! not, and the instances the protections keep though their records are gone, each with
//! when its hold ends. What [`Resolver::follow_app`](crate::consumer::Resolver::follow_app)
//! hands out. Pure data.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Instances;
use crate::error::Error;
use crate::model::ServiceInstance;

/// Why the resolver routes to an instance whose record is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldCause {
    /// Self-preservation: it expired with many others of its app within the window (see
    /// [`ProtectionOptions`](crate::consumer::ProtectionOptions)).
    SelfPreservation,
    /// The recovery bound: the registry was wiped or replaced, or the app's last instances
    /// went without a graceful stop (see
    /// [`ProtectionOptions::wipe_recovery`](crate::consumer::ProtectionOptions::wipe_recovery)).
    Recovery,
}

impl HoldCause {
    /// A short name for logs and JSON: `self-preservation` or `recovery`.
    pub fn as_str(self) -> &'static str {
        match self {
            HoldCause::SelfPreservation => "self-preservation",
            HoldCause::Recovery => "recovery",
        }
    }
}

/// One instance the resolver keeps routing to (probed) though its record is gone.
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    /// Its `{host}:{port}`, as the registry keyed it.
    pub address: String,
    /// Its record as last seen.
    pub instance: Arc<ServiceInstance>,
    /// When the hold ends unless the instance registers again first.
    pub until: Instant,
    /// Why it is held.
    pub cause: HoldCause,
}

impl Hold {
    /// How long until the hold ends (zero once it is due).
    pub fn time_left(&self) -> Duration {
        self.until.saturating_duration_since(Instant::now())
    }
}

/// One app as the resolver's shared view of it holds it at one moment.
#[derive(Clone, Debug, Default)]
pub struct AppSnapshot {
    /// The app.
    pub app: String,
    /// Whether the registry has been listed since the view started (before that, the
    /// snapshot is empty because nothing was read yet, not because the app is).
    pub synced: bool,
    /// Every registered record by `{host}:{port}`, enabled or not, healthy or not.
    pub registered: Instances,
    /// The instances kept though their records are gone, by address order within each cause.
    pub holds: Vec<Hold>,
    /// Whether removals are held (self-preservation or the recovery bound).
    pub protection_active: bool,
    /// Set when the registry refused for good (credentials, permissions): the view stopped
    /// and this snapshot is its last.
    pub failed: Option<Arc<Error>>,
}
