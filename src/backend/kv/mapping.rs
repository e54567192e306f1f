//! The mapping: interface name → the apps that export it, under `/dubbo/mapping/{interface}`.
//!
//! The value is app names joined by `,`. Apps only ever add themselves, by compare-and-swap
//! retried with backoff and jitter, so concurrent providers never remove each other.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::model::names;
use crate::store::{CasOutcome, Store, Watch, WatchEvent};

/// How many compare-and-swap attempts [`Mapping::add`] makes before giving up.
const MAX_CAS_ATTEMPTS: u32 = 32;

/// Reads, watches and extends interface-to-app mappings.
#[derive(Clone)]
pub struct Mapping {
    store: Arc<dyn Store>,
    layout: Layout,
    limits: Limits,
}

/// The apps of one interface, read at one store revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MappingValue {
    /// The app names.
    pub apps: BTreeSet<String>,
    /// The store revision of the read.
    pub revision: i64,
}

impl Mapping {
    /// A mapping over `store`.
    pub fn new(store: Arc<dyn Store>, layout: Layout, limits: Limits) -> Self {
        Mapping {
            store,
            layout,
            limits,
        }
    }

    /// Adds `app` to the apps of `interface`; does nothing when it is there already.
    pub async fn add(&self, interface: &str, app: &str) -> Result<()> {
        names::validate_interface(interface)?;
        names::validate_app(app)?;
        let key = self.layout.mapping_key(interface);
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
        let mut current = self.store.get(&key).await?;
        for _ in 0..MAX_CAS_ATTEMPTS {
            let (mut apps, expected) = match &current {
                Some(kv) => (parse_apps(&kv.value, &self.limits), kv.mod_revision),
                None => (BTreeSet::new(), 0),
            };
            if !apps.insert(app.to_owned()) {
                return Ok(());
            }
            let value = join_apps(&apps);
            self.limits
                .check_size("mapping value", value.len(), self.limits.max_mapping_bytes)?;
            match self
                .store
                .compare_and_swap(&key, expected, value.into_bytes(), None)
                .await?
            {
                CasOutcome::Written { .. } => return Ok(()),
                CasOutcome::Conflict { current: now } => {
                    tracing::debug!(%interface, %app, "mapping changed under us; retrying");
                    tokio::time::sleep(backoff.next_delay()).await;
                    current = now;
                }
            }
        }
        Err(Error::Contended {
            key,
            attempts: MAX_CAS_ATTEMPTS,
        })
    }

    /// The apps exporting `interface` (empty when none is known).
    pub async fn get(&self, interface: &str) -> Result<MappingValue> {
        names::validate_interface(interface)?;
        let key = self.layout.mapping_key(interface);
        // A prefix read gives the store revision even when the key is absent.
        let range = self.store.get_prefix(&key).await?;
        let apps = range
            .kvs
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| parse_apps(&kv.value, &self.limits));
        Ok(MappingValue {
            apps: apps.unwrap_or_default(),
            revision: range.revision,
        })
    }

    /// Watches the mapping of `interface` from store revision `from_revision`.
    pub async fn watch(&self, interface: &str, from_revision: i64) -> Result<MappingWatch> {
        names::validate_interface(interface)?;
        let key = self.layout.mapping_key(interface);
        let watch = self.store.watch_prefix(&key, from_revision).await?;
        Ok(MappingWatch {
            key,
            watch,
            limits: self.limits.clone(),
        })
    }
}

/// A stream of new values of one interface's mapping. Dropping it cancels the watch.
pub struct MappingWatch {
    key: String,
    watch: Watch,
    limits: Limits,
}

impl MappingWatch {
    /// The next value of the mapping (empty when the key was deleted). An `Err` is final.
    pub async fn next(&mut self) -> Result<BTreeSet<String>> {
        loop {
            let events = self.watch.next().await?;
            // Only the last event for our exact key counts; the prefix may match longer keys.
            if let Some(event) = events.iter().rev().find(|e| e.key() == self.key) {
                return Ok(match event {
                    WatchEvent::Put(kv) => parse_apps(&kv.value, &self.limits),
                    WatchEvent::Delete { .. } => BTreeSet::new(),
                });
            }
        }
    }
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
