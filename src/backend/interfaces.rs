//! The interface-level part of the seam: a provider's URLs where interface-level Dubbo
//! consumers read them (Dubbo 2.7, or Dubbo 3 consumers at `FORCE_INTERFACE`), one per
//! exported service, bound to the liveness of the provider's [`Registration`]: they go when
//! it goes (a ZooKeeper session, a Nacos connection), and a provider that registers again
//! writes them again.
//!
//! | backend | where a URL is written |
//! |---|---|
//! | ZooKeeper | the EPHEMERAL znode `/dubbo/{URL-encoded interface}/providers/{URL-encoded URL}` (root: the registry's `group`), persistent parents |
//! | Nacos | an ephemeral instance of service `providers:{interface}:{version}:{group}` in the registry's group, the URL's parameters plus `category`, `protocol`, `path` as its metadata |
//! | memory, etcd | none: a provider asking for one fails to build (on etcd only reading is verified, against dubbo-go) |
//!
//! See [`ProviderUrl`] for the URL itself.
//!
//! Consumers read them through [`InterfaceProviders`]: one interface's provider URLs
//! listed and followed (each event the whole set, as both registries hand it over), each
//! read strictly as untrusted input ([`crate::model::provider_url_read`]), a URL that does
//! not read skipped with its reason.
//!
//! | backend | what a consumer reads |
//! |---|---|
//! | ZooKeeper | the children of `/{root}/{URL-encoded interface}/providers` (root: the registry's `group`, default `dubbo`), followed with a persistent watch on that node |
//! | Nacos | the enabled instances of service `providers:{interface}:{version}:{group}` in the registry's group (default `DEFAULT_GROUP`), followed with a subscription |
//! | etcd | the keys under `{namespace}/dubbo/{URL-encoded interface}/providers/`, one per URL (the key's last segment), where dubbo-go's etcd registry writes them under its lease; followed with a watch from the read's revision |
//! | memory | none: every call fails with `Error::Config`, saying so |
//!
//! [`Registration`]: super::Registration

use async_trait::async_trait;

use super::follow::{Follow, Followed};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ProviderUrl;

/// The most provider URLs read for one interface; those beyond are skipped, counted.
pub const MAX_PROVIDER_URLS: usize = 100_000;

/// The interface-level service a consumer asks for: on Nacos it names the service
/// (`providers:{interface}:{version}:{group}`, empty slots kept, as a Java consumer
/// without a version or group asks for it); on ZooKeeper every URL of the interface is
/// read and the consumer matches version and group itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct InterfaceKey {
    /// The interface.
    pub interface: String,
    /// The version; empty for none.
    pub version: String,
    /// The group; empty for none.
    pub group: String,
}

impl InterfaceKey {
    /// The key of `interface` without version or group.
    pub fn new(interface: impl Into<String>) -> Self {
        InterfaceKey {
            interface: interface.into(),
            ..Default::default()
        }
    }
}

/// One interface's provider URLs as one read saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderUrls {
    /// The URLs that read, in the order read.
    pub urls: Vec<ProviderUrl>,
    /// Those that did not: what was read (shortened) and why.
    pub skipped: Vec<(String, String)>,
}

impl ProviderUrls {
    /// Adds what `read` gave for `raw`: the URL, or a skip with its reason (also when over
    /// [`MAX_PROVIDER_URLS`]).
    pub fn push(&mut self, raw: &str, read: Result<ProviderUrl>) {
        match read {
            Ok(_) if self.urls.len() >= MAX_PROVIDER_URLS => self.skipped.push((
                Error::shorten(raw),
                format!("over {MAX_PROVIDER_URLS} URLs for one interface"),
            )),
            Ok(url) => self.urls.push(url),
            Err(e) => self.skipped.push((Error::shorten(raw), e.to_string())),
        }
    }
}

/// A stream of one interface's provider URLs, each item the whole set; dropping it stops
/// following. Made and fed as [`Follow`] says: the first item from a fresh read, an `Err`
/// last (follow again), a follower 64 items behind ends it.
pub type ProviderUrlFollow = Follow<ProviderUrls>;

impl Followed for ProviderUrls {
    const BUFFER: usize = 64;
}

/// Reading interface-level providers, the consumer's side of this module. See the module
/// docs.
#[async_trait]
pub trait InterfaceProviders: Send + Sync + 'static {
    /// The provider URLs of `key`, read afresh.
    async fn list(&self, key: &InterfaceKey, limits: &Limits) -> Result<ProviderUrls>;

    /// Follows the provider URLs of `key`: the set from a fresh read first, then the set
    /// again at each change. Never writes anything.
    async fn follow(&self, key: &InterfaceKey, limits: &Limits) -> Result<ProviderUrlFollow>;
}

/// The part of a backend without an interface-level layout (memory, etcd): every call
/// fails with [`Error::Config`] saying so.
pub(crate) struct NoInterfaceProviders {
    /// The backend's name, for the error.
    pub(crate) backend: &'static str,
}

impl NoInterfaceProviders {
    fn refused(&self, key: &InterfaceKey) -> Error {
        Error::config(format!(
            "the {} backend has no interface-level providers to read (asked for {}): \
             Dubbo writes them on ZooKeeper, Nacos and etcd",
            self.backend, key.interface
        ))
    }
}

#[async_trait]
impl InterfaceProviders for NoInterfaceProviders {
    async fn list(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrls> {
        Err(self.refused(key))
    }

    async fn follow(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrlFollow> {
        Err(self.refused(key))
    }
}

/// One interface-level URL written under a [`Registration`](super::Registration)'s
/// liveness, as the provider holds it.
#[async_trait]
pub trait InterfaceRegistration: Send + Sync + 'static {
    /// Replaces the URL by `url` (the same service, its parameters changed): the new one is
    /// written, then the old one removed (on ZooKeeper the URL is the node's name).
    async fn update(&self, url: &ProviderUrl) -> Result<()>;

    /// Removes the URL. Its liveness stays (it is the instance registration's).
    async fn deregister(&self) -> Result<()>;

    /// Where the URL is written, for logs and tests: a znode path, a Nacos service.
    fn id(&self) -> String;
}
