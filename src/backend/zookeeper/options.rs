//! What [`ZooKeeperBackend`](super::ZooKeeperBackend) connects to and how: servers, the
//! root (`group`), digest credentials, timeouts.

use std::fmt;
use std::time::Duration;

use super::paths::Paths;
use crate::error::Result;

/// Connection options for the ZooKeeper backend.
///
/// ```
/// use introspect::backend::zookeeper::ZooKeeperOptions;
///
/// let options = ZooKeeperOptions::new(["10.0.0.1:2181", "10.0.0.2:2181"])
///     .with_group("dev")?
///     .with_digest("provider", "secret");
/// assert_eq!(options.servers().len(), 2);
/// # Ok::<(), introspect::Error>(())
/// ```
///
/// Defaults: no group (instances under `/services`, mapping and reports under `/dubbo`), no
/// credentials (nodes open to anyone, as Dubbo writes them without credentials), reading
/// session timeout 10 s, connect timeout 5 s, connect now.
#[derive(Clone)]
pub struct ZooKeeperOptions {
    pub(super) servers: Vec<String>,
    pub(super) paths: Paths,
    pub(super) digest: Option<(String, String)>,
    pub(super) session_timeout: Duration,
    pub(super) connect_timeout: Duration,
    pub(super) connect_in_background: bool,
}

impl fmt::Debug for ZooKeeperOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperOptions")
            .field("servers", &self.servers)
            .field("paths", &self.paths)
            .field("user", &self.digest.as_ref().map(|(user, _)| user))
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("connect_in_background", &self.connect_in_background)
            .finish()
    }
}

impl ZooKeeperOptions {
    /// Options for the ensemble at `servers` (`host:port` each).
    pub fn new(servers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ZooKeeperOptions {
            servers: servers.into_iter().map(Into::into).collect(),
            paths: Paths::default(),
            digest: None,
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            connect_in_background: false,
        }
    }

    /// Moves the root to `/{group}`, as Dubbo's registry `group` does: instances under
    /// `/{group}/{app}/`, the mapping under `/{group}/mapping/`, reports under
    /// `/{group}/metadata/` (and `/{group}/{app}/{revision}`, dubbo-go's), the epoch at
    /// `/{group}/introspect/epoch`, config items under `/{group}/config/`. A leading `/`
    /// is optional.
    pub fn with_group(mut self, group: &str) -> Result<Self> {
        self.paths = Paths::with_group(group)?;
        Ok(self)
    }

    /// Keeps config items under `/{namespace}/config/` (the registry URL's `namespace`
    /// parameter, which Dubbo Java's registry-as-config-centre carries over). Call it after
    /// [`with_group`](Self::with_group), which sets the group's own.
    pub fn with_config_namespace(mut self, namespace: &str) -> Result<Self> {
        self.paths = self.paths.with_config_namespace(namespace)?;
        Ok(self)
    }

    /// Authenticates with the `digest` scheme as `user`; nodes this backend creates are
    /// then readable and writable by that user only (`CREATOR_ALL_ACL`, as Dubbo Java with
    /// credentials).
    pub fn with_digest(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.digest = Some((user.into(), password.into()));
        self
    }

    /// Sets the session timeout the reading session (consumers, the tool) asks for (default
    /// 10 s; the server clamps it to 2 to 20 ticks). A registration asks for its provider's
    /// lease TTL instead.
    pub fn with_session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets how long connecting may take (default 5 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Returns the backend at once even while no server answers; the reading session is
    /// made on first use.
    pub fn with_connect_in_background(mut self, background: bool) -> Self {
        self.connect_in_background = background;
        self
    }

    /// The servers.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The connect string the client takes: the servers joined by `,`.
    pub(super) fn connect_string(&self) -> String {
        self.servers.join(",")
    }
}
