//! The registry: one instance record per running process, under `/services/{app}/`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use super::registration::KvRecord;
use crate::backend::kv::layout::Layout;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ServiceInstance, names};
use crate::store::{KeyValue, LeaseId, Page, Store, Watch, WatchEvent};

pub use crate::backend::{EarlyInstances, InstanceChange, InstanceList, Instances};

/// Records parsed between two calls of a list's early hook: at ten revisions, the first
/// call already sees enough members of each to start its fetch.
const EARLY_CHUNK: usize = 256;

/// Records below which a page is parsed on one thread: a part parses in a few
/// milliseconds, well above the cost of starting a thread for it.
const PARSE_PART: usize = 1024;

/// Instances parsed, and records refused with the reason, as a list keeps them.
type Parsed = (Vec<(String, Arc<ServiceInstance>)>, Vec<(String, String)>);

/// How many parts a page of `records` is parsed in: one per core the process may use, each
/// of at least [`PARSE_PART`] records.
fn parse_parts(records: usize) -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    (records / PARSE_PART).clamp(1, cores)
}

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
        let json = instance.encode(&self.limits)?;
        self.store
            .put(&instance.key(&self.layout), json, lease)
            .await
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
        let beside = |_| std::future::ready(Ok(()));
        Ok(self.list_beside(app, early, beside).await?.0)
    }

    /// [`Registry::list_early`], running `beside(revision)` once the list's store revision
    /// is known (from its first page), while the rest is read and parsed: what must be read
    /// at the list's revision or follow it (the registry's epoch, the watch) costs no round
    /// trip after the list. Both must succeed; a list started over runs it again.
    pub async fn list_beside<T, F>(
        &self,
        app: &str,
        early: Option<EarlyInstances<'_>>,
        beside: impl Fn(i64) -> F,
    ) -> Result<(InstanceList, T)>
    where
        F: Future<Output = Result<T>>,
    {
        names::validate_app(app)?;
        let prefix = self.layout.app_prefix(app);
        match self.list_pages(app, &prefix, early, &beside).await {
            Err(Error::Compacted { .. }) => self.list_pages(app, &prefix, early, &beside).await,
            other => other,
        }
    }

    /// [`Registry::list_beside`]'s read: the first page, then the rest beside `beside`.
    async fn list_pages<T, F>(
        &self,
        app: &str,
        prefix: &str,
        early: Option<EarlyInstances<'_>>,
        beside: &impl Fn(i64) -> F,
    ) -> Result<(InstanceList, T)>
    where
        F: Future<Output = Result<T>>,
    {
        let first = self.store.get_prefix_page(prefix, None, 0).await?;
        let revision = first.revision;
        // `beside` is polled first, so its requests are on their way before parsing starts.
        let (side, list) = tokio::join!(
            biased;
            beside(revision),
            self.read_pages(app, prefix, first, early)
        );
        Ok((list?, side?))
    }

    /// The rest of a list from its `first` page: page by page, parsing one page while
    /// reading the next.
    async fn read_pages(
        &self,
        app: &str,
        prefix: &str,
        mut page: Page,
        early: Option<EarlyInstances<'_>>,
    ) -> Result<InstanceList> {
        let mut list = InstanceList {
            revision: page.revision,
            ..InstanceList::default()
        };
        // Parsed in key order, then built into the map in one go: a map built from sorted
        // entries has full nodes, one grown by appending keeps its nodes about half full.
        let mut parsed = Vec::with_capacity(page.kvs.len());
        loop {
            let after = match page.next_after() {
                Some(after) => after,
                None => {
                    self.parse_page(app, prefix, &page.kvs, &mut parsed, &mut list, early);
                    list.instances = parsed.into_iter().collect();
                    let records = page.kvs.len();
                    crate::drop_later::drop_later(page, records);
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
            let records = page.kvs.len();
            crate::drop_later::drop_later(std::mem::replace(&mut page, next?), records);
        }
    }

    /// Parses one page into `parsed` (records that do not parse into the list's skipped
    /// ones), in key order.
    ///
    /// A page can hold a whole app, and parsing is most of a cold list's own work: a page
    /// of at least twice [`PARSE_PART`] records is cut into parts parsed side by side on as
    /// many cores as the process may use, this thread taking the first. (On etcd, while
    /// the next page is read; the last page has nothing to overlap it but the other cores.)
    fn parse_page(
        &self,
        app: &str,
        prefix: &str,
        kvs: &[KeyValue],
        parsed: &mut Vec<(String, Arc<ServiceInstance>)>,
        list: &mut InstanceList,
        early: Option<EarlyInstances<'_>>,
    ) {
        let part = kvs.len().div_ceil(parse_parts(kvs.len()));
        let mut parts = kvs.chunks(part.max(1));
        let Some(first) = parts.next() else {
            return;
        };
        // What `early` starts is spawned on the caller's runtime, from whichever thread.
        let runtime = tokio::runtime::Handle::try_current().ok();
        std::thread::scope(|scope| {
            let helpers: Vec<_> = parts
                .map(|part| {
                    let helper = std::thread::Builder::new().name("introspect-parse".into());
                    let runtime = runtime.clone();
                    let parse = move || {
                        let _entered = runtime.as_ref().map(|r| r.enter());
                        self.parse_part(app, prefix, part, early)
                    };
                    match helper.spawn_scoped(scope, parse) {
                        Ok(helper) => Ok(helper),
                        // No thread to be had: this one parses the part after its own.
                        Err(_) => Err(part),
                    }
                })
                .collect();
            let mut append = |(instances, skipped): Parsed| {
                parsed.extend(instances);
                list.skipped.extend(skipped);
            };
            append(self.parse_part(app, prefix, first, early));
            for helper in helpers {
                append(match helper {
                    Ok(helper) => helper
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    Err(part) => self.parse_part(app, prefix, part, early),
                });
            }
        });
    }

    /// Parses records: the instances and the records that do not parse, with the reason.
    /// `early` is handed the instances [`EARLY_CHUNK`] at a time, so that what it starts
    /// does not wait for the whole page.
    fn parse_part(
        &self,
        app: &str,
        prefix: &str,
        kvs: &[KeyValue],
        early: Option<EarlyInstances<'_>>,
    ) -> Parsed {
        let (mut parsed, mut skipped) = (Vec::with_capacity(kvs.len()), Vec::new());
        for chunk in kvs.chunks(EARLY_CHUNK) {
            let from = parsed.len();
            for kv in chunk {
                match self.parse(app, prefix, kv) {
                    Ok((address, instance)) => parsed.push((address, Arc::new(instance))),
                    Err(refused) => skipped.push(refused),
                }
            }
            if let Some(early) = early {
                let seen: Vec<&Arc<ServiceInstance>> =
                    parsed[from..].iter().map(|(_, i)| i).collect();
                early(&seen);
            }
        }
        (parsed, skipped)
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
                instance.key_address()
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::MemoryStore;

    /// A page large enough to be parsed in parts reads as one parsed in one go: every
    /// instance, the refused records in key order, and every instance handed to `early`.
    #[tokio::test]
    async fn a_page_parsed_in_parts_reads_as_one() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let registry = Registry::new(store.clone(), Layout::default(), Limits::default());
        let bad = [1u16, 2600, 4999];
        for port in 1..=5000u16 {
            let key = registry.layout.instance_key("shop", "127.0.0.1", port);
            let record = if bad.contains(&port) {
                b"{not json".to_vec()
            } else {
                ServiceInstance::new("shop", "127.0.0.1", port).to_json()
            };
            store.put(&key, record, None).await.unwrap();
        }
        let seen = Mutex::new(Vec::new());
        let early = |page: &[&Arc<ServiceInstance>]| {
            seen.lock().unwrap().extend(page.iter().map(|i| i.port));
        };
        let list = registry.list_early("shop", Some(&early)).await.unwrap();
        assert_eq!(list.instances.len(), 4997);
        let mut refused: Vec<String> = bad.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        refused.sort();
        let skipped: Vec<&str> = list.skipped.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(skipped, refused);
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        let listed: Vec<u16> = (1..=5000).filter(|p| !bad.contains(p)).collect();
        assert_eq!(seen, listed);
    }

    /// What runs beside a list is given the list's revision, and its failure fails the list.
    #[tokio::test]
    async fn what_runs_beside_a_list_reads_at_its_revision() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let registry = Registry::new(store.clone(), Layout::default(), Limits::default());
        let key = registry.layout.instance_key("shop", "127.0.0.1", 1);
        let record = ServiceInstance::new("shop", "127.0.0.1", 1).to_json();
        store.put(&key, record, None).await.unwrap();
        let at = |revision| std::future::ready(Ok(revision));
        let (list, revision) = registry.list_beside("shop", None, at).await.unwrap();
        assert_eq!(list.instances.len(), 1);
        assert_eq!(revision, list.revision);
        let refuse = |_| std::future::ready(Err::<(), _>(Error::from(std::io::Error::other("no"))));
        let failed = registry.list_beside("shop", None, refuse).await;
        assert!(matches!(failed, Err(Error::Io(_))), "{failed:?}");
    }
}
