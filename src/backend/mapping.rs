//! The mapping part of the seam: interface name → the apps that export it. Apps only ever
//! add themselves, by compare-and-set retried, so concurrent providers never remove each
//! other.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::follow::{Follow, Followed};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::names;

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
/// [`parse_apps`]): invalid app names and empty segments are dropped, an
/// oversized value reads as no apps.
#[async_trait]
pub trait MappingRegistry: Send + Sync + 'static {
    /// The apps exporting `interface` (empty when none is known).
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>>;

    /// Adds `app` to the apps of `interface` by compare-and-set, retried with backoff on
    /// conflict; does nothing when it is there already. Fails with
    /// [`crate::error::Error::Contended`] when it keeps losing.
    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()>;

    /// Follows the mapping of `interface`: its current value, then each change.
    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow>;
}

/// Parses a mapping value leniently: empty segments, surrounding spaces and invalid app
/// names are dropped (with a warning), never failing the read. An oversized value reads as
/// no apps.
pub fn parse_apps(value: &[u8], limits: &Limits) -> BTreeSet<String> {
    if value.len() > limits.max_mapping_bytes {
        tracing::warn!(
            size = value.len(),
            limit = limits.max_mapping_bytes,
            "mapping value over the limit; ignored"
        );
        return BTreeSet::new();
    }
    let text = String::from_utf8_lossy(value);
    let mut apps = BTreeSet::new();
    for segment in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match names::validate_app(segment) {
            Ok(()) => {
                apps.insert(segment.to_owned());
            }
            Err(e) => tracing::warn!(error = %e, "invalid app name in mapping value; skipped"),
        }
    }
    apps
}

/// Joins app names into a mapping value.
pub fn join_apps(apps: &BTreeSet<String>) -> String {
    apps.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// Compare-and-set rounds before [`add_app`] gives up.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
pub(crate) const MAX_ADD_ATTEMPTS: u32 = 32;

/// Adds `app` to the mapping value stored under `key`, by compare-and-set rounds, for a
/// backend whose conditional write takes a token of the value read: `read` gives the apps
/// and the token, `write` writes the joined apps (checked against `limits`) under the token
/// and answers whether it took; a round that did not is retried with backoff. Does
/// nothing when `app` is there already; fails with [`crate::error::Error::Contended`] naming `key` after
/// [`MAX_ADD_ATTEMPTS`] lost rounds.
#[cfg(any(feature = "zookeeper", feature = "nacos"))]
pub(crate) async fn add_app<T, R, RF, W, WF>(
    app: &str,
    key: &str,
    limits: &Limits,
    mut read: R,
    mut write: W,
) -> Result<()>
where
    R: FnMut() -> RF,
    RF: std::future::Future<Output = Result<(BTreeSet<String>, T)>>,
    W: FnMut(String, T) -> WF,
    WF: std::future::Future<Output = Result<bool>>,
{
    use std::time::Duration;
    let mut backoff =
        crate::backoff::Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
    for _ in 0..MAX_ADD_ATTEMPTS {
        let (mut apps, token) = read().await?;
        if !apps.insert(app.to_owned()) {
            return Ok(());
        }
        let value = join_apps(&apps);
        limits.check_size("mapping value", value.len(), limits.max_mapping_bytes)?;
        if write(value, token).await? {
            return Ok(());
        }
        tracing::debug!(%key, %app, "mapping changed under us; retrying");
        tokio::time::sleep(backoff.next_delay()).await;
    }
    Err(crate::error::Error::Contended {
        key: key.to_owned(),
        attempts: MAX_ADD_ATTEMPTS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cleans_hostile_values() {
        let limits = Limits::default();
        let apps = parse_apps(b"a,,b , ,../x,c\0d,a", &limits);
        assert_eq!(apps.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(parse_apps(b"", &limits).is_empty());
        assert!(parse_apps(&[0xff, 0xfe, b',', b'z'], &limits).contains("z"));
        let huge = "a,".repeat(limits.max_mapping_bytes);
        assert!(parse_apps(huge.as_bytes(), &limits).is_empty());
    }

    #[test]
    fn join_is_sorted_and_comma_separated() {
        let apps: BTreeSet<String> = ["b", "a"].into_iter().map(String::from).collect();
        assert_eq!(join_apps(&apps), "a,b");
    }
}
