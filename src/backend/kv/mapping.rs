//! The mapping: interface name → the apps that export it, under `/dubbo/mapping/{interface}`.
//!
//! The value is app names joined by `,`. Apps only ever add themselves, by compare-and-swap
//! retried with backoff and jitter, so concurrent providers never remove each other.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::kv::layout::Layout;
use crate::backend::mapping::{join_apps, parse_apps};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
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
