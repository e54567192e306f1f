//! Following one app as the resolver sees it ([`Resolver::follow_app`]): the app's shared
//! view (the same watch and protections its subscriptions use) as [`AppSnapshot`]s, and
//! which of its instances consumer-side health sets aside.
//!
//! [`Resolver::follow_app`]: super::Resolver::follow_app

use std::sync::Arc;

use tokio::sync::watch;

use super::health::{EndpointKey, HealthRegistry};
use super::views::Membership;
use super::views::snapshot::AppSnapshot;
use crate::error::{Error, Result};
use crate::model::ServiceInstance;

/// A live view of one app: its registered records, the instances the protections hold, and
/// health's verdict on each. Made by [`Resolver::follow_app`](super::Resolver::follow_app);
/// dropping it stops following (the view itself stops once nothing follows it, after
/// [`VIEW_RELEASE_GRACE`](super::VIEW_RELEASE_GRACE)).
///
/// It holds only the latest snapshot: a follower that reads slowly skips intermediate
/// states, never falls behind.
pub struct AppFollow {
    app: String,
    snapshots: watch::Receiver<Arc<AppSnapshot>>,
    health: Arc<HealthRegistry>,
    health_changes: watch::Receiver<u64>,
    _membership: Membership,
}

impl std::fmt::Debug for AppFollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppFollow").field("app", &self.app).finish()
    }
}

impl AppFollow {
    pub(super) fn new(
        app: String,
        (membership, snapshots): (Membership, watch::Receiver<Arc<AppSnapshot>>),
        health: Arc<HealthRegistry>,
    ) -> Self {
        let health_changes = health.changes();
        AppFollow {
            app,
            snapshots,
            health,
            health_changes,
            _membership: membership,
        }
    }

    /// The app followed.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// The view's latest snapshot (empty and not [`synced`](AppSnapshot::synced) until the
    /// registry has been read).
    pub fn current(&self) -> Arc<AppSnapshot> {
        self.snapshots.borrow().clone()
    }

    /// Waits until the view applied an update or consumer-side health changed its mind about
    /// some address (then [`current`](Self::current) and [`is_set_aside`](Self::is_set_aside)
    /// may answer differently). Fails once the view stopped: with the registry's permanent
    /// error (credentials, permissions), or [`Error::Shutdown`].
    pub async fn changed(&mut self) -> Result<()> {
        if let Some(error) = &self.snapshots.borrow().failed {
            return Err(Error::clone(error));
        }
        tokio::select! {
            seen = self.snapshots.changed() => {
                seen.map_err(|_| Error::Shutdown)?;
                match &self.snapshots.borrow_and_update().failed {
                    Some(error) => Err(Error::clone(error)),
                    None => Ok(()),
                }
            }
            seen = self.health_changes.changed() => {
                // The health registry lives as long as the resolver; if it went, only the
                // view's own updates are left to wait for.
                if seen.is_err() {
                    self.snapshots.changed().await.map_err(|_| Error::Shutdown)?;
                }
                Ok(())
            }
        }
    }

    /// Whether consumer-side health sets `instance` aside: its address failed calls and is
    /// probed until it answers, or it is held and has not answered a probe yet.
    pub fn is_set_aside(&self, instance: &ServiceInstance) -> bool {
        let authority = instance.authority();
        self.health.is_endpoint_aside(&EndpointKey {
            address: authority.clone(),
            instance: authority,
        })
    }
}
