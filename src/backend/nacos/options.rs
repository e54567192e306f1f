//! What [`NacosBackend`](super::NacosBackend) connects to and how: servers, namespace,
//! group, credentials, the SDK's cache directory, timeouts.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::names;
use crate::error::{Error, Result};

/// Connection options for the Nacos backend.
///
/// ```
/// use introspect::backend::nacos::NacosOptions;
///
/// let options = NacosOptions::new(["10.0.0.1:8848"])
///     .with_namespace("dev")?
///     .with_group("shop")?
///     .with_credentials("nacos", "secret");
/// assert_eq!(options.group(), "shop");
/// # Ok::<(), introspect::Error>(())
/// ```
///
/// Defaults: the `public` namespace, group `DEFAULT_GROUP`, no credentials, the SDK's
/// cache in a directory of its own under the system's temporary directory (see
/// [`NacosOptions::with_cache_dir`]), connect timeout 5 s, connect now.
#[derive(Clone)]
pub struct NacosOptions {
    pub(super) servers: Vec<String>,
    pub(super) namespace: String,
    pub(super) group: String,
    pub(super) credentials: Option<(String, String)>,
    pub(super) cache_dir: Option<PathBuf>,
    pub(super) connect_timeout: Duration,
    pub(super) connect_in_background: bool,
}

impl fmt::Debug for NacosOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NacosOptions")
            .field("servers", &self.servers)
            .field("namespace", &self.namespace)
            .field("group", &self.group)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("cache_dir", &self.cache_dir)
            .field("connect_timeout", &self.connect_timeout)
            .field("connect_in_background", &self.connect_in_background)
            .finish()
    }
}

/// The longest namespace or group accepted.
const MAX_NAME: usize = 128;

fn check_name(kind: &'static str, value: &str) -> Result<()> {
    let bad = |reason: &'static str| {
        Err(Error::InvalidName {
            kind,
            value: Error::shorten(value),
            reason,
        })
    };
    if value.len() > MAX_NAME {
        return bad("longer than 128 bytes");
    }
    if value
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '/' || c == '@')
    {
        return bad("holds whitespace, control characters, '/' or '@'");
    }
    Ok(())
}

impl NacosOptions {
    /// Options for the servers at `servers` (`host:port` each, the HTTP port: the gRPC port
    /// is that port + 1000, as Nacos 2.x has it).
    pub fn new(servers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        NacosOptions {
            servers: servers.into_iter().map(Into::into).collect(),
            namespace: String::new(),
            group: names::DEFAULT_GROUP.to_owned(),
            credentials: None,
            cache_dir: None,
            connect_timeout: Duration::from_secs(5),
            connect_in_background: false,
        }
    }

    /// Registers and reads in `namespace` (its id; empty: `public`), as Dubbo's
    /// `namespace` parameter.
    pub fn with_namespace(mut self, namespace: &str) -> Result<Self> {
        check_name("namespace", namespace)?;
        self.namespace = namespace.to_owned();
        Ok(self)
    }

    /// Registers and reads instances in `group` (default `DEFAULT_GROUP`), as Dubbo's
    /// registry `group` (or `nacos.group`) parameter. The mapping and the metadata reports
    /// keep their own groups (`mapping`, the revision), as Dubbo writes them.
    pub fn with_group(mut self, group: &str) -> Result<Self> {
        check_name("group", group)?;
        if group.is_empty() {
            return Err(Error::InvalidName {
                kind: "group",
                value: String::new(),
                reason: "empty",
            });
        }
        self.group = group.to_owned();
        Ok(self)
    }

    /// Logs in as `user` (Nacos's username/password authentication). The password is never
    /// logged or repeated in an error.
    pub fn with_credentials(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// Keeps the SDK's on-disk cache of naming and config data under `dir` (the SDK's
    /// default is `~/nacos`). Without it, each backend uses a fresh directory under the
    /// system's temporary directory, removed when the process ends normally.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Sets how long connecting may take (default 5 s).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Returns the backend at once even while no server answers; the reading clients are
    /// made on first use.
    pub fn with_connect_in_background(mut self, background: bool) -> Self {
        self.connect_in_background = background;
        self
    }

    /// The servers.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The namespace (empty: `public`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The group of instances.
    pub fn group(&self) -> &str {
        &self.group
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_secrets_stay_out_of_debug() {
        let o = NacosOptions::new(["h:8848"]).with_credentials("alice", "s3cret");
        let debug = format!("{o:?}");
        assert!(
            debug.contains("alice") && !debug.contains("s3cret"),
            "{debug}"
        );
        assert!(o.clone().with_namespace("dev").is_ok());
        assert!(o.clone().with_namespace("").is_ok());
        assert!(o.clone().with_group("").is_err());
        assert!(o.clone().with_group("a b").is_err());
        assert!(o.clone().with_group("a@@b").is_err());
        assert!(o.with_namespace(&"n".repeat(200)).is_err());
    }
}
