//! One registry under the cold-resolve and propagation scenarios: how Introspect reaches it
//! (a [`Backend`] with default options) and the raw operations underneath it that the
//! floors are made of. The scenarios are written once against [`Rig`]; the memory store and
//! etcd are [`StoreRig`] (below), ZooKeeper and Nacos have files of their own
//! (`zookeeper.rs`, `nacos.rs`). The validating floor of the key-value stores is in
//! `validating.rs`.

use introspect::backend::Backend;

use super::*;

/// A registry the cold-resolve and propagation scenarios run on.
pub trait Rig {
    /// What the floor's read returns (dropped after the floor is timed, as a consumer would
    /// drop it after use).
    type Read;
    /// A raw record, prepared before a propagation trial's clock starts.
    type Raw;

    /// The registry's name in a row: `memory store`, `etcd`, `ZooKeeper`, `Nacos`.
    fn label(&self) -> &'static str;

    /// Introspect's backend on this registry (one connection, shared by every resolver of
    /// a measurement, as a process shares it).
    fn backend(&self) -> Backend;

    /// Writes `records` (instances of [`APP`]) and the mapping of every interface to it,
    /// the way that is quickest on this registry.
    async fn write_fleet(&self, records: Vec<ServiceInstance>) -> Result<()>;

    /// The floor's read: every instance record of [`APP`], raw, in the fewest requests the
    /// registry allows.
    async fn read_raw(&self) -> Result<Self::Read>;

    /// How many records a raw read found.
    fn read_len(read: &Self::Read) -> usize;

    /// The instance records' text in a raw read, for the validating floor
    /// (`validating.rs`); `None` (the default) where a read holds no instance JSON.
    fn record_values(_read: &Self::Read) -> Option<impl Iterator<Item = &[u8]>> {
        None::<std::iter::Empty<&[u8]>>
    }

    /// The propagation floor's consumer side: raw events of a key space of its own, as
    /// arrival instants. `fleet` is the app's fleet, for registries whose events carry the
    /// whole list (Nacos), so that the floor's events are as large as the app's.
    async fn raw_feed(&self, fleet: &[ServiceInstance]) -> Result<UpdateFeed>;

    /// `record` as the raw write of the floor writes it.
    fn raw(&self, record: &ServiceInstance) -> Self::Raw;

    /// The floor's write: `raw` into the raw feed's key space.
    async fn raw_put(&self, raw: &Self::Raw) -> Result<()>;

    /// Removes what [`Rig::raw_put`] wrote.
    async fn raw_delete(&self, raw: &Self::Raw) -> Result<()>;

    /// A provider's registration of `record`.
    async fn register(&self, record: &ServiceInstance) -> Result<()>;

    /// Removes the registration of `record`.
    async fn deregister(&self, record: &ServiceInstance) -> Result<()>;
}

/// The raw feed's key space on a key-value store.
const RAW_PREFIX: &str = "/bench/raw/";

/// The memory store or etcd: the key-value backend over a [`Store`]. The floor's read is
/// one prefix read; its write a `put` under a prefix of its own, watched.
pub struct StoreRig {
    label: &'static str,
    store: Arc<dyn Store>,
    /// Kept running while the rig is used.
    _etcd: Option<EtcdServer>,
}

impl StoreRig {
    /// A fresh memory store.
    pub async fn memory() -> Option<StoreRig> {
        Some(StoreRig {
            label: "memory store",
            store: Arc::new(MemoryStore::new()),
            _etcd: None,
        })
    }

    /// A rig over `store`, which its caller keeps running.
    pub fn over(label: &'static str, store: Arc<dyn Store>) -> StoreRig {
        StoreRig {
            label,
            store,
            _etcd: None,
        }
    }

    /// A fresh single-member etcd of its own; `None` when etcd is not installed.
    pub async fn etcd() -> Option<StoreRig> {
        let etcd = EtcdServer::start().await?;
        Some(StoreRig {
            label: "etcd",
            store: etcd_store(&etcd).await,
            _etcd: Some(etcd),
        })
    }
}

impl Rig for StoreRig {
    type Read = introspect::store::Range;
    type Raw = (String, Vec<u8>);

    fn label(&self) -> &'static str {
        self.label
    }

    fn backend(&self) -> Backend {
        Backend::from(self.store.clone())
    }

    async fn write_fleet(&self, records: Vec<ServiceInstance>) -> Result<()> {
        write_fleet(&self.store, records.into_iter()).await
    }

    async fn read_raw(&self) -> Result<Self::Read> {
        self.store
            .get_prefix(&Layout::default().app_prefix(APP))
            .await
    }

    fn read_len(read: &Self::Read) -> usize {
        read.kvs.len()
    }

    /// The values of the prefix read: the instance JSON, as providers wrote it.
    fn record_values(read: &Self::Read) -> Option<impl Iterator<Item = &[u8]>> {
        Some(read.kvs.iter().map(|kv| kv.value.as_slice()))
    }

    async fn raw_feed(&self, _fleet: &[ServiceInstance]) -> Result<UpdateFeed> {
        let mut watch = self.store.watch_prefix(RAW_PREFIX, 0).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(batch) = watch.next().await {
                black_box(batch);
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    fn raw(&self, record: &ServiceInstance) -> Self::Raw {
        (
            format!("{RAW_PREFIX}{}", record.key_address()),
            record.to_json(),
        )
    }

    async fn raw_put(&self, (key, bytes): &Self::Raw) -> Result<()> {
        self.store.put(key, bytes.clone(), None).await.map(drop)
    }

    async fn raw_delete(&self, (key, _): &Self::Raw) -> Result<()> {
        self.store.delete(key).await.map(drop)
    }

    async fn register(&self, record: &ServiceInstance) -> Result<()> {
        registry(&self.store).register(record, None).await.map(drop)
    }

    async fn deregister(&self, record: &ServiceInstance) -> Result<()> {
        registry(&self.store)
            .deregister(APP, &record.host, record.port)
            .await
            .map(drop)
    }
}
