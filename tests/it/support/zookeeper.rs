//! Throwaway Apache ZooKeeper servers for tests: a standalone server, or a three-server
//! ensemble for fail-over.
//!
//! [`ZooKeeperServer::start`] runs `java -cp … org.apache.zookeeper.server.ZooKeeperServerMain
//! zoo.cfg` (Debian's `zookeeper` package: `/usr/share/java/zookeeper.jar`; or the classpath
//! in `INTROSPECT_ZOOKEEPER_CLASSPATH`) on a free loopback port with a temporary data
//! directory, and waits until `srvr` answers `Zookeeper version` (not merely until the port
//! opens). It can be restarted on the same data or on an empty data dir, frozen, and killed;
//! it is killed when dropped. The tick is short (200 ms), so sessions negotiate 0.4 s to
//! 4 s and expire quickly.
//!
//! Without ZooKeeper installed, `start` panics when `CI` is set (the ZooKeeper tests are
//! mandatory there) and otherwise prints a loud `SKIPPED` line and returns `None`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use introspect::backend::Backend;
use introspect::backend::zookeeper::{ZooKeeperBackend, ZooKeeperOptions};
use rustix::process::Signal;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::etcd::send_signal;
use super::ports::{free_low_port, free_ports};

/// How long a (re)start may take: a JVM on a busy machine is slow to start.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// The server's tick: sessions negotiate 2 to 20 ticks.
pub const TICK: Duration = Duration::from_millis(200);
/// Where Debian's package puts the server.
const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The Java classpath of the server, if ZooKeeper is installed. Under CI its absence
/// panics; elsewhere it prints a loud SKIPPED line.
pub fn classpath() -> Option<String> {
    let found = std::env::var("INTROSPECT_ZOOKEEPER_CLASSPATH")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            std::path::Path::new(DEBIAN_JAR)
                .exists()
                .then(|| DEBIAN_JAR.to_owned())
        });
    let java = super::etcd::require_quiet("java");
    if let (Some(found), true) = (found, java) {
        return Some(found);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    if ci {
        panic!(
            "ZooKeeper is not installed but CI is set: the ZooKeeper tests are mandatory in \
             CI. Run scripts/setup.sh --with-zookeeper (Debian: apt-get install zookeeper)."
        );
    }
    eprintln!(
        "\n*** SKIPPED: ZooKeeper not installed (no {DEBIAN_JAR} or java; run \
         scripts/setup.sh --with-zookeeper). This ZooKeeper test did not run. ***\n"
    );
    None
}

/// One ZooKeeper server process, standalone or a member of an ensemble.
pub struct ZooKeeperServer {
    classpath: String,
    child: Option<Child>,
    dir: TempDir,
    client_port: u16,
    /// The ensemble's `server.N=` lines and this member's id, when a member.
    quorum: Option<(String, u32)>,
    /// The longest session granted, when not the default 20 ticks.
    max_session: Option<Duration>,
}

impl ZooKeeperServer {
    /// Starts a standalone server and waits until it answers; `None` (after a loud
    /// message) when ZooKeeper is not installed outside CI.
    pub async fn start() -> Option<ZooKeeperServer> {
        Self::start_granting(None).await
    }

    /// Like [`start`](Self::start), granting sessions up to `max_session` (the default is
    /// 20 ticks, 4 s).
    pub async fn start_with_max_session(max_session: Duration) -> Option<ZooKeeperServer> {
        Self::start_granting(Some(max_session)).await
    }

    async fn start_granting(max_session: Option<Duration>) -> Option<ZooKeeperServer> {
        let classpath = classpath()?;
        let (client_port, _) = free_ports();
        let mut server = ZooKeeperServer {
            classpath,
            child: None,
            dir: TempDir::with_prefix("introspect-zk-").expect("create a temporary dir"),
            client_port,
            quorum: None,
            max_session,
        };
        server
            .launch()
            .await
            .unwrap_or_else(|e| panic!("ZooKeeper did not start: {e}"));
        Some(server)
    }

    /// `host:port` of its client port.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// Its registry URL, `zookeeper://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("zookeeper://{}", self.address())
    }

    /// Options for this server with a short reading session (2 s) and connect timeout.
    pub fn options(&self) -> ZooKeeperOptions {
        Self::options_via(&self.address())
    }

    /// Like [`options`](Self::options), reaching the server at `address` (`host:port` of a
    /// fault proxy in front of it, say).
    pub fn options_via(address: &str) -> ZooKeeperOptions {
        ZooKeeperOptions::new([address.to_owned()])
            .with_session_timeout(Duration::from_secs(2))
            .with_connect_timeout(Duration::from_secs(5))
    }

    /// A backend connected to this server with [`options`](Self::options).
    pub async fn backend(&self) -> Backend {
        connect(self.options()).await
    }

    /// Kills the server at once (SIGKILL) and reaps it; its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Kills the server and starts it again on the same port and data.
    pub async fn restart(&mut self) {
        self.kill();
        self.launch()
            .await
            .unwrap_or_else(|e| panic!("ZooKeeper did not restart: {e}"));
    }

    /// Kills the server and starts a new, empty one on the same port: every node and
    /// session is gone, as after losing the ensemble.
    pub async fn restart_empty(&mut self) {
        self.kill();
        self.dir = TempDir::with_prefix("introspect-zk-").expect("create a temporary dir");
        self.launch()
            .await
            .unwrap_or_else(|e| panic!("ZooKeeper did not restart empty: {e}"));
    }

    /// Freezes the server (SIGSTOP); [`resume`](Self::resume) undoes it.
    pub fn pause(&mut self) {
        let child = self
            .child
            .as_ref()
            .expect("the test ZooKeeper is not running");
        send_signal(child, Signal::STOP, "SIGSTOP");
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&mut self) {
        let child = self
            .child
            .as_ref()
            .expect("the test ZooKeeper is not running");
        send_signal(child, Signal::CONT, "SIGCONT");
    }

    /// The answer to a four-letter command (`srvr`, `ruok`, `wchs`), empty when none.
    pub async fn four_letters(&self, command: &str) -> String {
        four_letters(self.client_port, command).await
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("zookeeper.log")).unwrap_or_default()
    }

    fn write_config(&self) -> PathBuf {
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data).expect("create the data dir");
        let mut config = format!(
            "tickTime={}\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok,wchs,cons\n\
             maxClientCnxns=0\nznode.container.checkIntervalMs=1000\n",
            TICK.as_millis(),
            data.display(),
            self.client_port,
        );
        if let Some(max) = self.max_session {
            config.push_str(&format!("maxSessionTimeout={}\n", max.as_millis()));
        }
        if let Some((servers, id)) = &self.quorum {
            config.push_str("initLimit=10\nsyncLimit=5\n");
            config.push_str(servers);
            std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
        }
        let path = self.dir.path().join("zoo.cfg");
        std::fs::write(&path, config).expect("write zoo.cfg");
        path
    }

    async fn launch(&mut self) -> Result<(), String> {
        let config = self.write_config();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("zookeeper.log"))
            .map_err(|e| format!("open the log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("open the log: {e}"))?;
        let main = if self.quorum.is_some() {
            "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        } else {
            "org.apache.zookeeper.server.ZooKeeperServerMain"
        };
        let child = Command::new("java")
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-cp")
            .arg(&self.classpath)
            .arg(main)
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("spawn java: {e}"))?;
        self.child = Some(child);
        if self.quorum.is_some() {
            return Ok(()); // an ensemble answers once a quorum runs: see `Ensemble`
        }
        self.wait_serving().await
    }

    /// Waits until `srvr` says the server serves (as standalone, leader or follower).
    async fn wait_serving(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "ZooKeeper exited with {status}; its log:\n{}",
                    self.log()
                ));
            }
            let answer = self.four_letters("srvr").await;
            if answer.contains("Zookeeper version") && answer.contains("Mode:") {
                return Ok(());
            }
            if started.elapsed() > START_DEADLINE {
                self.kill();
                return Err(format!(
                    "not serving after {START_DEADLINE:?}; its log:\n{}",
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The mode `srvr` reports: `standalone`, `leader`, `follower` (empty when none).
    pub async fn mode(&self) -> String {
        let answer = self.four_letters("srvr").await;
        answer
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A backend for `options`; panics when it cannot connect.
pub async fn connect(options: ZooKeeperOptions) -> Backend {
    ZooKeeperBackend::connect(options.clone())
        .await
        .unwrap_or_else(|e| panic!("connect to the test ZooKeeper {options:?}: {e}"))
        .into_backend()
}

/// Sends a four-letter command to `port`; the answer, empty on any failure.
async fn four_letters(port: u16, command: &str) -> String {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream.write_all(command.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// A three-server ensemble on loopback.
pub struct Ensemble {
    /// The members, by id 1..=3 at index 0..3.
    pub members: Vec<ZooKeeperServer>,
}

impl Ensemble {
    /// Starts three members and waits until one leads and the others follow.
    pub async fn start() -> Option<Ensemble> {
        let classpath = classpath()?;
        let taken: Vec<u16> = (0..9).map(|_| free_low_port(false)).collect();
        let ports: Vec<(u16, u16, u16)> = taken.chunks(3).map(|p| (p[0], p[1], p[2])).collect();
        let servers: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer, election))| {
                format!("server.{}=127.0.0.1:{peer}:{election}\n", i + 1)
            })
            .collect();
        let mut members = Vec::new();
        for (i, (client, _, _)) in ports.iter().enumerate() {
            let mut member = ZooKeeperServer {
                classpath: classpath.clone(),
                child: None,
                dir: TempDir::with_prefix("introspect-zk-").expect("create a temporary dir"),
                client_port: *client,
                quorum: Some((servers.clone(), i as u32 + 1)),
                max_session: None,
            };
            member
                .launch()
                .await
                .unwrap_or_else(|e| panic!("member did not start: {e}"));
            members.push(member);
        }
        let ensemble = Ensemble { members };
        ensemble.wait_quorum(3).await;
        Some(ensemble)
    }

    /// Waits until `serving` members answer as leader or follower.
    pub async fn wait_quorum(&self, serving: usize) {
        let started = Instant::now();
        loop {
            let mut up = 0;
            for m in &self.members {
                if matches!(m.mode().await.as_str(), "leader" | "follower") {
                    up += 1;
                }
            }
            if up >= serving {
                return;
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "the ensemble has {up} of {serving} serving members after {START_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The members' client addresses joined by `,`.
    pub fn connect_string(&self) -> Vec<String> {
        self.members.iter().map(ZooKeeperServer::address).collect()
    }

    /// The index of the leader, if one leads now.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.mode().await == "leader" {
                return Some(i);
            }
        }
        None
    }
}

/// A plain client of `server`'s own (not the backend's), for writing what a test needs
/// (hostile records, foreign records) and reading what the backend wrote.
pub async fn raw_client(server: &ZooKeeperServer) -> zookeeper_client::Client {
    zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(4))
        .connect(&server.address())
        .await
        .expect("connect a raw ZooKeeper client")
}

/// Creates a persistent node at `path` with `data`, creating missing parents.
pub async fn create_with_parents(client: &zookeeper_client::Client, path: &str, data: &[u8]) {
    let options =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    if let Some((parent, _)) = path.rsplit_once('/')
        && !parent.is_empty()
    {
        client
            .mkdir(parent, &options)
            .await
            .expect("create the parents");
    }
    client
        .create(path, data, &options)
        .await
        .expect("create the node");
}
