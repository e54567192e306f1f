//! The registry: one instance record per running process, under `/services/{app}/`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::model::{ServiceInstance, names};
use crate::store::{KeyValue, LeaseId, Store, Watch, WatchEvent};

pub use crate::backend::{EarlyInstances, InstanceChange, InstanceList, Instances};

/// Records parsed between two calls of a list's early hook: at ten revisions, the first
/// call already sees enough members of each to start its fetch.
const EARLY_CHUNK: usize = 256;

/// Registers, lists and watches instances.
#[derive(Clone)]
pub struct Registry {
    store: Arc<dyn Store>,
    layout: Layout,
    limits: Limits,
}

impl Registry {
    /// A registry over `store`.
    pub fn new(store: Arc<dyn Store>, layout: Layout, limits: Limits) -> Self {
        Registry {
            store,
            layout,
            limits,
        }
    }

    /// Writes an instance's record, bound to `lease` when given.
    pub async fn register(
        &self,
        instance: &ServiceInstance,
        lease: Option<LeaseId>,
    ) -> Result<i64> {
        instance.validate()?;
        let json = instance.to_json();
        self.limits.check_size(
            "instance record",
            json.len(),
            self.limits.max_instance_bytes,
        )?;
        let key = self
            .layout
            .instance_key(&instance.service_name, &instance.host, instance.port);
        self.store.put(&key, json, lease).await
    }

    /// Deletes an instance's record; returns whether it existed.
    pub async fn deregister(&self, app: &str, host: &str, port: u16) -> Result<bool> {
        names::validate_app(app)?;
        names::validate_host(host)?;
        self.store
            .delete(&self.layout.instance_key(app, host, port))
            .await
    }

    /// Every instance of `app`, skipping (and reporting) records that do not parse.
    ///
    /// Read in pages pinned to the store revision of the first one, so the list is one
    /// consistent view however long it is (watch from its `revision + 1` to miss nothing),
    /// and each page is parsed while the next one is read. When the pinned revision is
    /// compacted away between pages, the list starts over once from a fresh read.
    pub async fn list(&self, app: &str) -> Result<InstanceList> {
        self.list_early(app, None).await
    }

    /// [`Registry::list`], handing `early` the instances of each page once it is parsed.
    /// (A list started over after a compaction hands them again.)
    pub async fn list_early(
        &self,
        app: &str,
        early: Option<EarlyInstances<'_>>,
    ) -> Result<InstanceList> {
        names::validate_app(app)?;
        let prefix = self.layout.app_prefix(app);
        match self.list_pages(app, &prefix, early).await {
            Err(Error::Compacted { .. }) => self.list_pages(app, &prefix, early).await,
            other => other,
        }
    }

    /// [`Registry::list`]'s read: page by page, parsing one page while reading the next.
    async fn list_pages(
        &self,
        app: &str,
        prefix: &str,
        early: Option<EarlyInstances<'_>>,
    ) -> Result<InstanceList> {
        let mut page = self.store.get_prefix_page(prefix, None, 0).await?;
        let mut list = InstanceList {
            revision: page.revision,
            ..InstanceList::default()
        };
        // Parsed in key order, then built into the map in one go: a map built from sorted
        // entries has full nodes, one grown by appending keeps its nodes about half full.
        let mut parsed = Vec::with_capacity(page.kvs.len());
        loop {
            let after = match page.kvs.last() {
                Some(last) if page.more => last.key.clone(),
                _ => {
                    self.parse_page(app, prefix, &page.kvs, &mut parsed, &mut list, early);
                    list.instances = parsed.into_iter().collect();
                    return Ok(list);
                }
            };
            // The read is polled first, so its request is on its way before parsing starts.
            let read = self
                .store
                .get_prefix_page(prefix, Some(&after), list.revision);
            let parse = async {
                self.parse_page(app, prefix, &page.kvs, &mut parsed, &mut list, early);
            };
            let (next, ()) = tokio::join!(biased; read, parse);
            page = next?;
        }
    }

    /// Parses one page into `parsed` (records that do not parse into the list's skipped
    /// ones) and hands `early` its instances, [`EARLY_CHUNK`] records at a time: a page
    /// can hold a whole app, and what `early` starts should not wait for all of it.
    fn parse_page(
        &self,
        app: &str,
        prefix: &str,
        kvs: &[KeyValue],
        parsed: &mut Vec<(String, Arc<ServiceInstance>)>,
        list: &mut InstanceList,
        early: Option<EarlyInstances<'_>>,
    ) {
        let Some(early) = early else {
            return self.parse_into(app, prefix, kvs, parsed, &mut list.skipped);
        };
        for chunk in kvs.chunks(EARLY_CHUNK) {
            let from = parsed.len();
            self.parse_into(app, prefix, chunk, parsed, &mut list.skipped);
            let page: Vec<&Arc<ServiceInstance>> = parsed[from..].iter().map(|(_, i)| i).collect();
            early(&page);
        }
    }

    /// Parses records: instances into `parsed`, records that do not parse into `skipped`
    /// with the reason.
    fn parse_into(
        &self,
        app: &str,
        prefix: &str,
        kvs: &[KeyValue],
        parsed: &mut Vec<(String, Arc<ServiceInstance>)>,
        skipped: &mut Vec<(String, String)>,
    ) {
        for kv in kvs {
            match self.parse(app, prefix, kv) {
                Ok((address, instance)) => parsed.push((address, Arc::new(instance))),
                Err(refused) => skipped.push(refused),
            }
        }
    }

    /// Every app with at least one instance key, with its instances (records that do not
    /// parse are left out).
    pub async fn list_apps(&self) -> Result<BTreeMap<String, Instances>> {
        let range = self
            .store
            .get_prefix(&self.layout.services_prefix())
            .await?;
        let mut apps: BTreeMap<String, Instances> = BTreeMap::new();
        for kv in &range.kvs {
            let Some(app) = self.layout.app_of_instance_key(&kv.key) else {
                continue;
            };
            let prefix = self.layout.app_prefix(app);
            let entry = apps.entry(app.to_owned()).or_default();
            if let Ok((address, instance)) = self.parse(app, &prefix, kv) {
                entry.insert(address, Arc::new(instance));
            }
        }
        Ok(apps)
    }

    /// Watches `app`'s instances from store revision `from_revision`.
    pub async fn watch(&self, app: &str, from_revision: i64) -> Result<InstanceWatch> {
        names::validate_app(app)?;
        let prefix = self.layout.app_prefix(app);
        let watch = self.store.watch_prefix(&prefix, from_revision).await?;
        Ok(InstanceWatch {
            registry: self.clone(),
            app: app.to_owned(),
            prefix,
            watch,
        })
    }

    /// Parses one record; the key must be exactly the record's own key.
    fn parse(
        &self,
        app: &str,
        prefix: &str,
        kv: &KeyValue,
    ) -> Result<(String, ServiceInstance), (String, String)> {
        let address = kv.key.strip_prefix(prefix).unwrap_or(&kv.key).to_owned();
        let instance = ServiceInstance::from_json(&kv.value, &self.limits)
            .map_err(|e| (address.clone(), e.to_string()))?;
        if instance.service_name != app || !instance.is_at(&address) {
            let reason = format!(
                "record of {}/{} stored under another key",
                instance.service_name,
                instance.address()
            );
            return Err((address, reason));
        }
        Ok((address, instance))
    }
}

/// A stream of changes to one app's instances. Dropping it cancels the watch.
pub struct InstanceWatch {
    registry: Registry,
    app: String,
    prefix: String,
    watch: Watch,
}

impl InstanceWatch {
    /// The next batch of changes. An `Err` is final: re-list and watch again.
    pub async fn next(&mut self) -> Result<Vec<InstanceChange>> {
        let events = self.watch.next().await?;
        Ok(events
            .into_iter()
            .filter_map(|event| match event {
                WatchEvent::Put(kv) => {
                    Some(match self.registry.parse(&self.app, &self.prefix, &kv) {
                        Ok((_, instance)) => InstanceChange::Upsert(Arc::new(instance)),
                        Err((address, reason)) => InstanceChange::Skipped { address, reason },
                    })
                }
                WatchEvent::Delete { key, .. } => key
                    .strip_prefix(&self.prefix)
                    .map(|address| InstanceChange::Removed(address.to_owned())),
            })
            .collect())
    }
}
