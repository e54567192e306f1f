//! ZooKeeper under the cold-resolve and propagation scenarios: a throwaway standalone
//! server of its own (the test suite's harness: `java -cp …zookeeper.jar`, free loopback
//! port, temporary data dir, killed when dropped), Introspect's ZooKeeper backend on it, and
//! a plain `zookeeper-client` session for the floors.
//!
//! * The cold-resolve floor's read: the children of `/services/{app}`, then every child's
//!   data with pipelined requests (all sent before the first answer is awaited), as the
//!   backend itself reads a list, without the epoch read and without parsing.
//! * The propagation floor: a `create` of a node under `/bench/raw` until the persistent
//!   recursive watch on it delivers the event and the node is read (events carry no data,
//!   so any consumer reads the node before it knows the record).
//! * Registrations go through the backend (ephemeral nodes under its shared session), the
//!   fleet through the plain session (persistent nodes, pipelined creates: a fleet of
//!   10,000 in seconds).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use introspect::backend::zookeeper::{Paths, record};
use introspect::backend::{Backend, RegisterOptions, Registration};
use introspect::model::ProviderUrl;
use zookeeper_client as zk;

use super::rig::Rig;

/// A provider's default lease TTL (`ProviderOptions::default`).
const LEASE_TTL: Duration = Duration::from_secs(10);
use super::*;
use crate::zookeeper_server::ZooKeeperServer;

/// The raw feed's node.
const RAW_NODE: &str = "/bench/raw";
/// Creates or reads in flight at once while writing a fleet.
const PIPELINE: usize = 1_000;

/// A ZooKeeper server with Introspect's backend and a plain session on it.
pub struct ZooKeeperRig {
    backend: Backend,
    client: zk::Client,
    paths: Paths,
    registrations: Registrations,
    /// Kept running while the rig is used (declared last: dropped after the sessions).
    server: ZooKeeperServer,
}

impl ZooKeeperRig {
    /// A fresh server; `None` when ZooKeeper (or Java) is not installed.
    pub async fn start() -> Option<ZooKeeperRig> {
        let server = ZooKeeperServer::start().await?;
        let backend = introspect::backend::connect(&server.url())
            .await
            .unwrap_or_else(|e| panic!("connect to the benchmark ZooKeeper: {e}"));
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .connect(&server.address())
            .await
            .unwrap_or_else(|e| panic!("a plain session on the benchmark ZooKeeper: {e}"));
        Some(ZooKeeperRig {
            backend,
            client,
            paths: Paths::default(),
            registrations: Registrations::default(),
            server,
        })
    }

    fn persistent() -> zk::CreateOptions<'static> {
        zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
    }

    /// Creates `path` and its missing parents (persistent).
    async fn mkdir(&self, path: &str) -> Result<()> {
        self.client
            .mkdir(path, &Self::persistent())
            .await
            .or_else(|e| match e {
                zk::Error::NodeExists => Ok(()),
                e => Err(e),
            })
            .map_err(|e| zk_error(e, path))
    }
}

impl ZooKeeperRig {
    /// Writes interface-level provider URLs as persistent nodes where a Dubbo provider
    /// writes them (`/dubbo/{interface}/providers/{URL}`), pipelined.
    pub async fn write_interface_urls(&self, urls: &[ProviderUrl]) -> Result<()> {
        let root = self.paths.interface_root();
        let nodes: Vec<String> = urls.iter().map(|u| u.zookeeper_node(root)).collect();
        for node in &nodes {
            let parent = &node[..node.rfind('/').unwrap_or(0)];
            self.mkdir(parent).await?;
        }
        let options = Self::persistent();
        for chunk in nodes.chunks(PIPELINE) {
            let creates: Vec<_> = chunk
                .iter()
                .map(|path| self.client.create(path, &[], &options))
                .collect();
            for (created, path) in join_all(creates).await.into_iter().zip(chunk) {
                created.map_err(|e| zk_error(e, &format!("create {path}")))?;
            }
        }
        Ok(())
    }

    /// Removes what [`write_interface_urls`](Self::write_interface_urls) wrote of `url`.
    pub async fn delete_interface_url(&self, url: &ProviderUrl) -> Result<()> {
        let node = url.zookeeper_node(self.paths.interface_root());
        self.client
            .delete(&node, None)
            .await
            .map_err(|e| zk_error(e, &format!("delete {node}")))
    }

    /// A backend on a connection of its own, whose requests the server's counters show.
    pub async fn fresh_backend(&self) -> Backend {
        introspect::backend::connect(&self.server.url())
            .await
            .unwrap_or_else(|e| panic!("connect to the benchmark ZooKeeper: {e}"))
    }

    /// Packets received on each session's connection (`cons`): its remote address, and the
    /// count. A connection's own count leaves out every other session's requests and
    /// pings.
    pub async fn received_per_connection(&self) -> Result<HashMap<String, u64>> {
        let answer = four_letters(&self.server.address(), "cons").await?;
        Ok(answer
            .lines()
            .filter_map(|line| {
                let line = line.trim();
                // Sessions only: the connection asking `cons` has no `sid`.
                if !line.contains("sid=") {
                    return None;
                }
                let (address, rest) = line.split_once('[')?;
                let received = rest
                    .split(',')
                    .find_map(|part| part.strip_prefix("recved="))?;
                Some((address.to_owned(), received.trim().parse().ok()?))
            })
            .collect())
    }

    /// Watches the server holds (`wchs`), persistent ones included.
    pub async fn watches(&self) -> Result<u64> {
        let answer = four_letters(&self.server.address(), "wchs").await?;
        answer
            .lines()
            .find_map(|line| line.trim().strip_prefix("Total watches:"))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| {
                introspect::Error::store_unavailable(format!("ZooKeeper wchs: {answer:?}"))
            })
    }
}

/// The answer to four-letter command `command`.
async fn four_letters(address: &str, command: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let failed =
        |why: String| introspect::Error::store_unavailable(format!("ZooKeeper {command}: {why}"));
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| failed(e.to_string()))?;
    stream
        .write_all(command.as_bytes())
        .await
        .map_err(|e| failed(e.to_string()))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .map_err(|e| failed(e.to_string()))?;
    Ok(answer)
}

/// A plain client's error as the crate's.
fn zk_error(e: zk::Error, what: &str) -> introspect::Error {
    introspect::Error::store_unavailable(format!("ZooKeeper {what}: {e}"))
}

impl Rig for ZooKeeperRig {
    type Read = Vec<(Vec<u8>, zk::Stat)>;
    type Raw = (String, Vec<u8>);

    fn label(&self) -> &'static str {
        "ZooKeeper"
    }

    fn backend(&self) -> Backend {
        self.backend.clone()
    }

    async fn write_fleet(&self, records: Vec<ServiceInstance>) -> Result<()> {
        self.mkdir(&self.paths.app(APP)).await?;
        let written: Vec<(String, Vec<u8>)> = records
            .iter()
            .map(|r| {
                (
                    self.paths.instance(APP, &r.key_address()),
                    record::to_json(r, 0),
                )
            })
            .collect();
        let options = Self::persistent();
        for chunk in written.chunks(PIPELINE) {
            let creates: Vec<_> = chunk
                .iter()
                .map(|(path, data)| self.client.create(path, data, &options))
                .collect();
            for (created, (path, _)) in join_all(creates).await.into_iter().zip(chunk) {
                created.map_err(|e| zk_error(e, &format!("create {path}")))?;
            }
        }
        let limits = Limits::default();
        for interface in INTERFACES {
            self.backend.mapping().add(interface, APP, &limits).await?;
        }
        Ok(())
    }

    async fn read_raw(&self) -> Result<Self::Read> {
        let app = self.paths.app(APP);
        let (children, _) = self
            .client
            .get_children(&app)
            .await
            .map_err(|e| zk_error(e, &format!("children of {app}")))?;
        let paths: Vec<String> = children
            .iter()
            .map(|child| self.paths.instance(APP, child))
            .collect();
        let reads: Vec<_> = paths.iter().map(|p| self.client.get_data(p)).collect();
        join_all(reads)
            .await
            .into_iter()
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| zk_error(e, &format!("read a child of {app}")))
    }

    fn read_len(read: &Self::Read) -> usize {
        read.len()
    }

    /// A ZooKeeper event carries no data: a consumer must read the node it names before it
    /// knows the record, so the floor's event for a created node is its read (as Curator's
    /// caches read it), the least any consumer of the registry does.
    async fn raw_feed(&self, _fleet: &[ServiceInstance]) -> Result<UpdateFeed> {
        self.mkdir(RAW_NODE).await?;
        let mut watcher = self
            .client
            .watch(RAW_NODE, zk::AddWatchMode::PersistentRecursive)
            .await
            .map_err(|e| zk_error(e, &format!("watch {RAW_NODE}")))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let client = self.client.clone();
        tokio::spawn(async move {
            loop {
                let event = watcher.changed().await;
                if event.event_type == zk::EventType::Session {
                    if event.session_state.is_terminated() {
                        return;
                    }
                    continue;
                }
                // A deletion needs no read (the trial's clean-up waits for it too).
                if event.event_type == zk::EventType::NodeCreated {
                    let read = client.get_data(&event.path).await;
                    black_box(read.ok());
                }
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    fn raw(&self, record: &ServiceInstance) -> Self::Raw {
        (
            format!("{RAW_NODE}/{}", record.key_address()),
            record::to_json(record, 0),
        )
    }

    async fn raw_put(&self, (path, data): &Self::Raw) -> Result<()> {
        self.client
            .create(path, data, &Self::persistent())
            .await
            .map(drop)
            .map_err(|e| zk_error(e, &format!("create {path}")))
    }

    async fn raw_delete(&self, (path, _): &Self::Raw) -> Result<()> {
        self.client
            .delete(path, None)
            .await
            .map_err(|e| zk_error(e, &format!("delete {path}")))
    }

    async fn register(&self, record: &ServiceInstance) -> Result<()> {
        self.registrations.register(&self.backend, record).await
    }

    async fn deregister(&self, record: &ServiceInstance) -> Result<()> {
        self.registrations.deregister(record).await
    }
}

/// Registrations made through a backend, kept until they are deregistered.
#[derive(Default)]
struct Registrations(Mutex<HashMap<String, Arc<dyn Registration>>>);

impl Registrations {
    /// Registers `record` on `backend` under the provider's default lease.
    async fn register(&self, backend: &Backend, record: &ServiceInstance) -> Result<()> {
        let registration = backend
            .instances()
            .register(record, &RegisterOptions::new(LEASE_TTL, &Limits::default()))
            .await?;
        self.0
            .lock()
            .expect("registrations lock")
            .insert(record.key_address(), registration);
        Ok(())
    }

    /// Deregisters `record`, if it was registered here.
    async fn deregister(&self, record: &ServiceInstance) -> Result<()> {
        let registration = self
            .0
            .lock()
            .expect("registrations lock")
            .remove(&record.key_address());
        match registration {
            Some(registration) => registration.deregister().await,
            None => Ok(()),
        }
    }
}
