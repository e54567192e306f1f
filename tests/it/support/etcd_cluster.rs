//! A throwaway three-member etcd cluster on loopback, for fail-over tests.
//!
//! [`EtcdCluster::start`] runs three `etcd` processes (same skip rules as
//! [`EtcdServer`](super::etcd::EtcdServer): `None` after a loud message when etcd is not
//! installed outside CI) that form one cluster, and waits until every member is healthy.
//! A member can be killed (SIGKILL), restarted on its data, wiped and rejoined as a new
//! member, frozen (SIGSTOP) and resumed;
//! [`leader`](EtcdCluster::leader) says which member leads. Every signal that cannot be sent
//! fails the test. Members are killed when the cluster is dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use introspect::store::EtcdOptions;
use rustix::process::Signal;
use tempfile::TempDir;

use super::etcd::{healthy, require, send_signal};
use super::ports::free_ports;

/// Members in the cluster.
pub const MEMBERS: usize = 3;
/// How long a (re)start may take before the harness gives up.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// One member: its ports, data and process.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
    /// Whether it joins a running cluster (after [`EtcdCluster::wipe_and_rejoin`]).
    rejoining: bool,
}

/// A running three-member cluster; see the module docs.
pub struct EtcdCluster {
    binary: PathBuf,
    /// Holds each member's data directory and log.
    dir: TempDir,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts a fresh cluster and waits until every member is healthy; `None` (after a loud
    /// message) when `etcd` is not installed outside CI.
    pub async fn start() -> Option<EtcdCluster> {
        let binary = require("etcd", "etcd-server")?;
        let members = (0..MEMBERS)
            .map(|i| {
                let (client_port, peer_port) = free_ports();
                Member {
                    name: format!("member-{i}"),
                    client_port,
                    peer_port,
                    child: None,
                    rejoining: false,
                }
            })
            .collect();
        let mut cluster = EtcdCluster {
            binary,
            dir: TempDir::with_prefix("introspect-etcd-cluster-").expect("create a temporary dir"),
            members,
        };
        for i in 0..MEMBERS {
            cluster.spawn(i);
        }
        for i in 0..MEMBERS {
            cluster.wait_healthy(i).await;
        }
        Some(cluster)
    }

    /// The client URL of member `i`.
    pub fn endpoint(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    /// Options for the whole cluster, the members in the order `first` gives (so a test can
    /// make the store prefer a given member), with short timeouts (1 s connect, 2 s request).
    pub fn options_in_order(&self, first: &[usize]) -> EtcdOptions {
        let mut order: Vec<usize> = first.to_vec();
        order.extend((0..MEMBERS).filter(|i| !first.contains(i)));
        EtcdOptions::new(order.iter().map(|&i| self.endpoint(i)))
            .with_connect_timeout(Duration::from_secs(1))
            .with_request_timeout(Duration::from_secs(2))
    }

    /// The member that leads now, asked of the members in turn. Panics when none knows.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            for i in 0..MEMBERS {
                if let Some(found) = self.leader_seen_by(i).await {
                    return found;
                }
            }
            assert!(Instant::now() < deadline, "no member knows a leader");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The leader according to member `i`, if it answers and knows one.
    async fn leader_seen_by(&self, i: usize) -> Option<usize> {
        self.members[i].child.as_ref()?;
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_millis(500))
            .with_timeout(Duration::from_millis(500));
        let mut client = etcd_client::Client::connect([self.endpoint(i)], Some(options))
            .await
            .ok()?;
        let status = client.status().await.ok()?;
        let leader_id = status.leader();
        let members = client.member_list().await.ok()?;
        let name = members
            .members()
            .iter()
            .find(|m| m.id() == leader_id)?
            .name()
            .to_owned();
        self.members.iter().position(|m| m.name == name)
    }

    /// Kills member `i` at once (SIGKILL) and reaps it; its data stays for
    /// [`restart`](Self::restart).
    pub fn kill(&mut self, i: usize) {
        let mut child = self.members[i]
            .child
            .take()
            .unwrap_or_else(|| panic!("member {i} is not running"));
        send_signal(&child, Signal::KILL, "SIGKILL");
        child.wait().expect("reap a killed etcd member");
    }

    /// Starts member `i` again on its data and waits until it is healthy.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.members[i].child.is_none(), "member {i} is running");
        self.spawn(i);
        self.wait_healthy(i).await;
    }

    /// Replaces member `i` by an empty one of the same name, as an operator does after
    /// losing a member's disk: kills it, removes it from the cluster (asking a live member),
    /// deletes its data, adds it back and starts it with `--initial-cluster-state existing`;
    /// waits until it is healthy (it has caught up through a snapshot from the leader).
    pub async fn wipe_and_rejoin(&mut self, i: usize) {
        self.kill(i);
        let live = (0..MEMBERS)
            .find(|&j| j != i && self.members[j].child.is_some())
            .expect("a live member");
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(1))
            .with_timeout(Duration::from_secs(5));
        let mut client = etcd_client::Client::connect([self.endpoint(live)], Some(options))
            .await
            .expect("connect to a live member");
        let list = client.member_list().await.expect("member list");
        let id = list
            .members()
            .iter()
            .find(|m| m.name() == self.members[i].name)
            .map(|m| m.id())
            .expect("the member is listed");
        client.member_remove(id).await.expect("member removed");
        let data_dir = self.dir.path().join(format!("member-{i}.data"));
        std::fs::remove_dir_all(&data_dir).expect("wipe the member's data");
        let peer = format!("http://127.0.0.1:{}", self.members[i].peer_port);
        // etcd adds a member only once the leader has been connected to a quorum for a
        // few seconds ("unhealthy cluster" before that, e.g. right after the start).
        let deadline = Instant::now() + START_DEADLINE;
        while let Err(e) = client.member_add([peer.as_str()], None).await {
            assert!(Instant::now() < deadline, "member not added: {e}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.members[i].rejoining = true;
        self.spawn(i);
        self.wait_healthy(i).await;
    }

    /// Freezes member `i` (SIGSTOP). Panics when the signal cannot be sent.
    pub fn pause(&self, i: usize) {
        send_signal(self.child(i), Signal::STOP, "SIGSTOP");
        super::etcd::wait_stopped(self.child(i));
    }

    /// Lets a paused member `i` run again (SIGCONT). Panics when the signal cannot be sent.
    pub fn resume(&self, i: usize) {
        send_signal(self.child(i), Signal::CONT, "SIGCONT");
    }

    /// Waits until member `i` is healthy (it has a leader and serves reads).
    pub async fn wait_healthy(&self, i: usize) {
        let started = Instant::now();
        while !healthy(self.members[i].client_port).await {
            assert!(
                started.elapsed() < START_DEADLINE,
                "etcd member {i} not healthy after {START_DEADLINE:?}; its log:\n{}",
                self.log(i)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The log (errors only) of member `i`.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    fn child(&self, i: usize) -> &Child {
        self.members[i]
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("member {i} is not running"))
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("member-{i}.log"))
    }

    /// Spawns member `i` on its ports and data.
    fn spawn(&mut self, i: usize) {
        let peer_url = |m: &Member| format!("http://127.0.0.1:{}", m.peer_port);
        let initial_cluster = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, peer_url(m)))
            .collect::<Vec<_>>()
            .join(",");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("open an etcd member log");
        let log_err = log.try_clone().expect("open an etcd member log");
        let member = &self.members[i];
        let client_url = self.endpoint(i);
        let data_dir = self.dir.path().join(format!("member-{i}.data"));
        let child = Command::new(&self.binary)
            .arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url(member)])
            .args(["--initial-advertise-peer-urls", &peer_url(member)])
            .args(["--initial-cluster", &initial_cluster])
            .args([
                "--initial-cluster-state",
                if member.rejoining { "existing" } else { "new" },
            ])
            .args(["--initial-cluster-token", "introspect-test-cluster"])
            .args(["--heartbeat-interval", "50"])
            .args(["--election-timeout", "500"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(["--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.binary.display()));
        self.members[i].child = Some(child);
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut child) = member.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
