//! The config-centre part of the seam: where governance rules (configurators, tag rules,
//! condition rules, migration rules) live, read, followed and written by compare-and-set.
//!
//! A Dubbo Java 3.3 member with no config centre of its own uses its registry as one
//! (`DefaultApplicationDeployer.useRegistryAsConfigCenterIfNecessary`), so every backend
//! keeps its config items where Java reads them from that registry:
//!
//! * etcd and the memory store: the key `/dubbo/config/{group}/{key}` (Dubbo's
//!   `EtcdDynamicConfiguration`), under the layout's namespace;
//! * ZooKeeper: the node `/{namespace}/config/{group}/{key}` (`TreePathDynamicConfiguration`;
//!   the namespace is `dubbo` unless the registry's names another);
//! * Nacos: the config `dataId={key}` in group `{group}` of the registry's namespace
//!   (`NacosDynamicConfiguration`, `$` written `___` and `/` written `-`).
//!
//! Rules are read under group [`DEFAULT_GROUP`] (`dubbo`). Content is untrusted: an item
//! over [`MAX_RULE_BYTES`] or not UTF-8 is refused with [`Error::Rule`] naming the key,
//! never a panic. Versions are opaque and per backend ([`ConfigVersion`]); a write against
//! a stale one fails with [`Error::Conflict`], which carries the current item.

use async_trait::async_trait;

use super::follow::{Follow, Followed};
use crate::error::{Error, Result};

/// The group Dubbo reads and writes governance rules in (`DynamicConfiguration.DEFAULT_GROUP`).
pub const DEFAULT_GROUP: &str = "dubbo";

/// The most keys [`ConfigCentre::list`] returns for one group: a group holding more is an
/// error rather than an unbounded answer.
pub const MAX_LISTED_KEYS: usize = 10_000;

pub(crate) use super::config_key::decode;
pub use super::config_key::{ConfigKey, ConfigWrite, validate_group, validate_key};
pub use crate::config_item::{ConfigItem, ConfigVersion, MAX_RULE_BYTES};

/// The error for a version this backend never gave out.
pub(crate) fn foreign_version(version: &ConfigVersion, backend: &str) -> Error {
    Error::InvalidName {
        kind: "config version",
        value: Error::shorten(version.as_str()),
        reason: match backend {
            "zookeeper" => "not a ZooKeeper config version (read the item first)",
            "nacos" => "not a Nacos config version (read the item first)",
            _ => "not a store revision (read the item first)",
        },
    }
}

/// A stream of one key's states: the current one first, then each change (`None`: the key
/// was deleted), in order. Changes that come faster than they are read may fold into the
/// newest; the same state never comes twice in a row. Dropping it stops following.
///
/// An [`Error::Rule`] says the key now holds content that cannot be read (over the size
/// bound, not UTF-8): the follow goes on, and the previous good state is the caller's to
/// keep. Any other `Err` is final: follow again.
pub type ConfigFollow = Follow<Option<ConfigItem>>;

impl Followed for Option<ConfigItem> {
    const BUFFER: usize = 64;
}

/// The config-centre part of a registry backend. See the module docs.
#[async_trait]
pub trait ConfigCentre: Send + Sync + 'static {
    /// The item under `key`, `None` when absent.
    async fn get(&self, key: &ConfigKey) -> Result<Option<ConfigItem>>;

    /// Follows one key: its current state first, then each change; see [`ConfigFollow`].
    async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow>;

    /// Writes the content if the item's version is still the one `write` expects (see
    /// [`ConfigWrite`]); returns the new version. A stale version fails with
    /// [`Error::Conflict`], empty or oversized content with [`Error::Rule`].
    async fn put(&self, key: &ConfigKey, write: ConfigWrite<'_>) -> Result<ConfigVersion>;

    /// Deletes the item if its version is still `expected`; a stale one (or an absent item)
    /// fails with [`Error::Conflict`].
    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> Result<()>;

    /// The keys present in `group`, sorted, so operators can see which rules exist (Java's
    /// `getConfigKeys`: the children of the group's node on ZooKeeper). Names that are not
    /// valid keys ([`validate_key`]) are left out; more than [`MAX_LISTED_KEYS`] is an error.
    /// Backends that cannot list (Nacos) fail with [`Error::Config`] saying so.
    async fn list(&self, group: &str) -> Result<Vec<String>>;

    /// The item some dubbo-admin versions write where no Dubbo member reads it (on
    /// ZooKeeper the flat `/dubbo/config/{key}`, without the group: apache/dubbo-admin#1523),
    /// if one is there: for tools to flag as "written where nobody reads it", never to
    /// apply. `None` on backends without such a place.
    async fn misplaced(&self, key: &str) -> Result<Option<ConfigItem>> {
        validate_key(key)?;
        Ok(None)
    }
}

/// The keys of a group as listed: valid ones only, sorted, refused over the bound.
pub(crate) fn listed(group: &str, names: impl IntoIterator<Item = String>) -> Result<Vec<String>> {
    let mut keys: Vec<String> = names
        .into_iter()
        .filter(|name| validate_key(name).is_ok())
        .collect();
    if keys.len() > MAX_LISTED_KEYS {
        return Err(Error::config(format!(
            "group {group} holds {} keys, over the {MAX_LISTED_KEYS} listed",
            keys.len()
        )));
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// The conflict of a write whose expected version is stale.
pub(crate) fn conflict(key: &ConfigKey, current: Option<ConfigItem>) -> Error {
    Error::Conflict {
        key: key.to_string(),
        current,
    }
}

/// The config part of a backend that keeps no config centre.
pub(crate) struct NoConfig {
    /// The backend's name, for the error.
    pub(crate) backend: &'static str,
}

impl NoConfig {
    fn refused(&self) -> Error {
        Error::config(format!(
            "the {} backend keeps no config centre",
            self.backend
        ))
    }
}

#[async_trait]
impl ConfigCentre for NoConfig {
    async fn get(&self, _: &ConfigKey) -> Result<Option<ConfigItem>> {
        Err(self.refused())
    }

    async fn follow(&self, _: &ConfigKey) -> Result<ConfigFollow> {
        Err(self.refused())
    }

    async fn put(&self, _: &ConfigKey, _: ConfigWrite<'_>) -> Result<ConfigVersion> {
        Err(self.refused())
    }

    async fn delete(&self, _: &ConfigKey, _: &ConfigVersion) -> Result<()> {
        Err(self.refused())
    }

    async fn list(&self, _: &str) -> Result<Vec<String>> {
        Err(self.refused())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dubbo_rule_keys_pass_and_path_breakers_do_not() {
        for key in [
            "shop.tag-router",
            "shop.condition-router",
            "shop.configurators",
            "com.foo.Svc:1.0:grp.configurators",
            "com.foo.Svc::.condition-router",
            "org.Outer$Inner.configurators",
            "shop.migration",
        ] {
            validate_key(key).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a b", "a\nb", "ä", &"k".repeat(257)] {
            assert!(
                matches!(validate_key(bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
        validate_group(DEFAULT_GROUP).unwrap();
        assert!(validate_group("a/b").is_err());
        assert!(validate_group("").is_err());
        assert!(ConfigKey::new("shop.tag-router", "a/b").is_err());
        assert!(ConfigKey::new("a/b", DEFAULT_GROUP).is_err());
        let key = ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap();
        assert_eq!((key.key(), key.group()), ("shop.tag-router", "dubbo"));
    }

    #[test]
    fn content_is_bounded_and_utf8() {
        let big = vec![b'a'; MAX_RULE_BYTES + 1];
        let key = ConfigKey::new("shop.tag-router", "dubbo").unwrap();
        let err = decode(&key, big).unwrap_err();
        assert!(matches!(&err, Error::Rule { key, .. } if key == "dubbo/shop.tag-router"));
        assert!(err.to_string().contains("65537 bytes"), "{err}");
        let err = decode(&key, vec![0xff, 0xfe]).unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        assert_eq!(decode(&key, b"tags: []".to_vec()).unwrap(), "tags: []");
        assert!(ConfigWrite::create("").check(&key).is_err());
        let over = "a".repeat(MAX_RULE_BYTES + 1);
        assert!(ConfigWrite::create(&over).check(&key).is_err());
        let version = ConfigVersion::new("1");
        let at_bound = "a".repeat(MAX_RULE_BYTES);
        ConfigWrite::replace(&at_bound, &version)
            .check(&key)
            .unwrap();
    }

    #[test]
    fn listed_keys_are_valid_sorted_and_bounded() {
        let names = [
            "b.tag-router",
            "a.configurators",
            "bad name",
            "b.tag-router",
        ];
        let keys = listed("dubbo", names.map(String::from)).unwrap();
        assert_eq!(keys, ["a.configurators", "b.tag-router"]);
        let many = (0..=MAX_LISTED_KEYS).map(|i| format!("k{i}"));
        let err = listed("dubbo", many).unwrap_err().to_string();
        assert!(err.contains("group dubbo"), "{err}");
    }

    #[test]
    fn a_conflict_shows_the_current_version() {
        let current = ConfigItem {
            content: "force: true".into(),
            version: ConfigVersion::new("7"),
        };
        let key = ConfigKey::new("shop.tag-router", "dubbo").unwrap();
        let err = conflict(&key, Some(current)).to_string();
        assert!(err.contains("dubbo/shop.tag-router"), "{err}");
        assert!(err.contains("version 7"), "{err}");
        let err = conflict(&key, None).to_string();
        assert!(err.contains("absent"), "{err}");
    }
}
