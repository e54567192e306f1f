//! The mapping part of the seam: interface name → the apps that export it. Apps only ever
//! add themselves, by compare-and-set retried, so concurrent providers never remove each
//! other.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::follow::{Follow, Followed};
use crate::error::Result;
use crate::limits::Limits;

/// A stream of an interface's apps: the current value first, then each new value (empty
/// when the mapping was deleted). Dropping it stops following.
///
/// Implementers feed it as [`Follow`] says, ending the stream (an `Err` last) when the
/// watch breaks or the follower, 64 values behind, falls behind.
pub type MappingFollow = Follow<BTreeSet<String>>;

impl Followed for BTreeSet<String> {
    const BUFFER: usize = 64;
}

/// The mapping part of a registry backend. Values are read leniently (see
/// [`crate::mapping::parse_apps`]): invalid app names and empty segments are dropped, an
/// oversized value reads as no apps.
#[async_trait]
pub trait MappingRegistry: Send + Sync + 'static {
    /// The apps exporting `interface` (empty when none is known).
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>>;

    /// Adds `app` to the apps of `interface` by compare-and-set, retried with backoff on
    /// conflict; does nothing when it is there already. Fails with
    /// [`crate::Error::Contended`] when it keeps losing.
    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()>;

    /// Follows the mapping of `interface`: its current value, then each change.
    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow>;
}
