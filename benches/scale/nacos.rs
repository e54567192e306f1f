//! Nacos under the cold-resolve and propagation scenarios: a throwaway rnacos of its own
//! (the test suite's harness: free loopback ports, temporary data dir, killed when
//! dropped), Introspect's Nacos backend on it, and naming clients of the SDK's own
//! (`nacos-sdk`) for the floors and the fleet.
//!
//! * The cold-resolve floor's read: one `getAllInstances` of the app (asked of the server,
//!   not of the SDK's cache), as the backend itself reads a list, without the epoch read
//!   and without parsing the records. A fleet whose answer is over the SDK's 4 MiB gRPC
//!   limit is read with one `GET /nacos/v1/ns/instance/list` instead (the answer decoded
//!   into the SDK's instances), the cheapest read of it a client has.
//! * The propagation floor: a registration through a connected naming client until the
//!   SDK's own subscribe callback fires on another client. A Nacos push carries the whole
//!   list of the service, so the floor's service (`bench-raw`) holds a copy of the app's
//!   fleet and its pushes are as large as the app's; for a fleet over the SDK's limit (whose
//!   pushes no SDK client receives) it holds none, so the floor is the server's push delay
//!   alone, a bound below any client's.
//! * Registrations of the timed trials go through one connected naming client too, with
//!   the record Introspect's provider writes (`record::to_nacos`): Introspect's own
//!   provider opens a connection per registration (Nacos keys a client's registrations by
//!   service), which is not propagation and is left out of both sides.
//! * The fleet: Nacos keeps one registration per service per connection, so it goes in
//!   batches (`batchRegisterInstance`) of [`BATCH`] instances, each batch on a client of
//!   its own, the clients kept connected while the rig lives.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use introspect::backend::Backend;
use introspect::backend::nacos::{names, record};
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, NamingServiceBuilder,
    ServiceInstance as NacosInstance,
};
use nacos_sdk::api::props::ClientProps;
use tempfile::TempDir;

use super::rig::Rig;
use super::*;
use crate::nacos_server::NacosServer;

/// The propagation floor's service.
const RAW_SERVICE: &str = "bench-raw";
/// Instances per batch registration (one client each).
const BATCH: usize = 500;
/// How long the floor's subscription may take to show the fleet.
const FIRST_PUSH: Duration = Duration::from_secs(30);
/// The most the SDK receives in one gRPC message: tonic's default decoding limit, which
/// nacos-sdk 0.8 leaves as it is. A `getAllInstances` answer is one message.
pub const MESSAGE_LIMIT: usize = 4 * 1024 * 1024;
/// What the server adds to each record of a list beside the fields the SDK writes (an
/// instance id with the group, the grouped service name, heartbeat settings): a generous
/// bound.
const SERVER_FIELDS: usize = 250;

/// The estimated size of the `getAllInstances` answer listing `records`.
fn answer_size(records: &[ServiceInstance]) -> usize {
    records
        .iter()
        .map(|r| serde_json::to_vec(&record::to_nacos(r)).map_or(0, |v| v.len()) + SERVER_FIELDS)
        .sum()
}

/// The answer of `GET /nacos/v1/ns/instance/list`, the part read.
#[derive(serde::Deserialize)]
struct HttpList {
    hosts: Vec<NacosInstance>,
}

/// An rnacos server with Introspect's backend and plain naming clients on it.
pub struct NacosRig {
    backend: Backend,
    address: String,
    /// The timed trials' registrations (app and floor).
    writer: NamingService,
    /// The floor's subscriber.
    subscriber: NamingService,
    /// The fleet's batch clients, kept connected (their instances live as long).
    fleet: Mutex<Vec<NamingService>>,
    clients: AtomicUsize,
    /// Whether the fleet's list is over [`MESSAGE_LIMIT`] (read over HTTP, not pushed).
    over_limit: AtomicBool,
    http: reqwest::Client,
    cache: TempDir,
    /// Kept running while the rig is used (declared last: dropped after the clients).
    _server: NacosServer,
}

impl NacosRig {
    /// A fresh server; `None` when rnacos is not installed.
    pub async fn start() -> Option<NacosRig> {
        let server = NacosServer::start().await?;
        let backend = server.backend().await;
        let cache = TempDir::with_prefix("introspect-bench-nacos-")
            .unwrap_or_else(|e| panic!("a cache dir for the benchmark's Nacos clients: {e}"));
        let address = server.address();
        let writer = naming(&address, &cache, "bench-writer").await;
        let subscriber = naming(&address, &cache, "bench-subscriber").await;
        Some(NacosRig {
            backend,
            address,
            writer,
            subscriber,
            fleet: Mutex::default(),
            clients: AtomicUsize::new(0),
            over_limit: AtomicBool::new(false),
            http: reqwest::Client::new(),
            cache,
            _server: server,
        })
    }

    /// Registers `records` into `service` in batches, each on a new client of its own.
    async fn register_batches(&self, service: &str, records: &[ServiceInstance]) -> Result<()> {
        let batches = records.chunks(BATCH).map(|chunk| async move {
            let id = self.clients.fetch_add(1, Ordering::Relaxed);
            let client = naming(&self.address, &self.cache, &format!("bench-fleet-{id}")).await;
            let instances: Vec<NacosInstance> = chunk.iter().map(record::to_nacos).collect();
            client
                .batch_register_instance(
                    service.to_owned(),
                    Some(names::DEFAULT_GROUP.to_owned()),
                    instances,
                )
                .await
                .map_err(|e| nacos_error(e, &format!("batch registration into {service}")))?;
            Ok::<_, introspect::Error>(client)
        });
        let mut batches = futures::stream::iter(batches).buffer_unordered(4);
        while let Some(client) = batches.next().await {
            self.fleet.lock().expect("fleet lock").push(client?);
        }
        Ok(())
    }
}

/// A connected naming client of the SDK's own, named `name` to the server.
async fn naming(address: &str, cache: &TempDir, name: &str) -> NamingService {
    let props = ClientProps::new()
        .server_addr(address)
        .env_first(false)
        .naming_push_empty_protection(false)
        .load_cache_at_start(false)
        .cache_dir(cache.path().join(name))
        .app_name(name);
    NamingServiceBuilder::new(props)
        .build()
        .await
        .unwrap_or_else(|e| panic!("a naming client on the benchmark Nacos: {e}"))
}

/// An SDK error as the crate's.
fn nacos_error(e: nacos_sdk::api::error::Error, what: &str) -> introspect::Error {
    introspect::Error::store_unavailable(format!("Nacos {what}: {e}"))
}

/// The floor's subscribe callback: the instant of each push that changes the number of
/// instances (the SDK may call again with an unchanged list).
struct Feed {
    tx: mpsc::UnboundedSender<Instant>,
    count: AtomicUsize,
}

impl NamingEventListener for Feed {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let at = Instant::now();
        let count = event.instances.as_ref().map_or(0, Vec::len);
        if self.count.swap(count, Ordering::SeqCst) != count {
            let _ = self.tx.send(at);
        }
    }
}

impl Rig for NacosRig {
    type Read = Vec<NacosInstance>;
    type Raw = (String, NacosInstance);

    fn label(&self) -> &'static str {
        "Nacos"
    }

    fn backend(&self) -> Backend {
        self.backend.clone()
    }

    async fn write_fleet(&self, records: Vec<ServiceInstance>) -> Result<()> {
        self.over_limit.store(
            answer_size(&records) > MESSAGE_LIMIT * 85 / 100,
            Ordering::Relaxed,
        );
        self.register_batches(&names::service_name(APP), &records)
            .await?;
        let limits = Limits::default();
        for interface in INTERFACES {
            self.backend.mapping().add(interface, APP, &limits).await?;
        }
        Ok(())
    }

    async fn read_raw(&self) -> Result<Self::Read> {
        if self.over_limit.load(Ordering::Relaxed) {
            let url = format!("http://{}/nacos/v1/ns/instance/list", self.address);
            let query = [
                ("serviceName", names::service_name(APP)),
                ("groupName", names::DEFAULT_GROUP.to_owned()),
                ("healthyOnly", "false".to_owned()),
            ];
            let http_error =
                |e: reqwest::Error| introspect::Error::store_unavailable(format!("HTTP list: {e}"));
            let body = self
                .http
                .get(url)
                .query(&query)
                .send()
                .await
                .map_err(http_error)?
                .bytes()
                .await
                .map_err(http_error)?;
            let list: HttpList = serde_json::from_slice(&body).map_err(|e| {
                introspect::Error::store_unavailable(format!("HTTP list answer: {e}"))
            })?;
            return Ok(list.hosts);
        }
        self.writer
            .get_all_instances(
                names::service_name(APP),
                Some(names::DEFAULT_GROUP.to_owned()),
                Vec::new(),
                false,
            )
            .await
            .map_err(|e| nacos_error(e, "getAllInstances"))
    }

    fn read_len(read: &Self::Read) -> usize {
        read.len()
    }

    async fn raw_feed(&self, fleet: &[ServiceInstance]) -> Result<UpdateFeed> {
        let copied = if answer_size(fleet) > MESSAGE_LIMIT * 85 / 100 {
            &[]
        } else {
            fleet
        };
        let copy: Vec<ServiceInstance> = copied
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.service_name = RAW_SERVICE.to_owned();
                r
            })
            .collect();
        if !copy.is_empty() {
            self.register_batches(RAW_SERVICE, &copy).await?;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let feed = Arc::new(Feed {
            tx,
            count: AtomicUsize::new(0),
        });
        self.subscriber
            .subscribe(
                RAW_SERVICE.to_owned(),
                Some(names::DEFAULT_GROUP.to_owned()),
                Vec::new(),
                feed.clone(),
            )
            .await
            .map_err(|e| nacos_error(e, "subscribe"))?;
        // The first pushes show the fleet; the trials' pushes come after.
        let deadline = tokio::time::Instant::now() + FIRST_PUSH;
        while feed.count.load(Ordering::SeqCst) != copy.len() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(_)) => {}
                _ => panic!(
                    "the floor's subscription did not show the fleet of {} within {FIRST_PUSH:?}",
                    copy.len()
                ),
            }
        }
        while rx.try_recv().is_ok() {}
        Ok(rx)
    }

    fn raw(&self, record: &ServiceInstance) -> Self::Raw {
        let mut instance = record::to_nacos(record);
        instance.service_name = Some(RAW_SERVICE.to_owned());
        (RAW_SERVICE.to_owned(), instance)
    }

    async fn raw_put(&self, (service, instance): &Self::Raw) -> Result<()> {
        self.writer
            .register_instance(
                service.clone(),
                Some(names::DEFAULT_GROUP.to_owned()),
                instance.clone(),
            )
            .await
            .map_err(|e| nacos_error(e, "register"))
    }

    async fn raw_delete(&self, (service, instance): &Self::Raw) -> Result<()> {
        self.writer
            .deregister_instance(
                service.clone(),
                Some(names::DEFAULT_GROUP.to_owned()),
                instance.clone(),
            )
            .await
            .map_err(|e| nacos_error(e, "deregister"))
    }

    async fn register(&self, record: &ServiceInstance) -> Result<()> {
        self.writer
            .register_instance(
                names::service_name(APP),
                Some(names::DEFAULT_GROUP.to_owned()),
                record::to_nacos(record),
            )
            .await
            .map_err(|e| nacos_error(e, "register"))
    }

    async fn deregister(&self, record: &ServiceInstance) -> Result<()> {
        self.writer
            .deregister_instance(
                names::service_name(APP),
                Some(names::DEFAULT_GROUP.to_owned()),
                record::to_nacos(record),
            )
            .await
            .map_err(|e| nacos_error(e, "deregister"))
    }
}
