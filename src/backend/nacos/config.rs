//! The config centre on Nacos, where Dubbo Java's `NacosDynamicConfiguration` keeps it: the
//! config `dataId={key}` in group `{group}` (both with `$` written `___` and `/` written
//! `-`, as `NacosConfigServiceWrapper`), in the registry's namespace (Java's config centre
//! made of a Nacos registry keeps the URL's `namespace`, and reads Dubbo's default
//! namespace `dubbo` as Nacos's `public`).
//!
//! Versions are the MD5 of the content (lowercase hex), as Java's `getConfigItem` gives
//! them. A write against a version is `publishConfigCas` with it, and against `None` with
//! `"0"` (no config hashes to it, so Nacos creates only). The content is read first and its
//! MD5 compared here too: the test server, rnacos, takes `casMd5` without enforcing it.
//! Nacos has no conditional delete: a delete compares the version read, then removes (a
//! write between the two is lost). The same content written again keeps its version.
//!
//! A follow is a config listener (on the client that never answers reads, see
//! `client::Reader`) whose notifications make the follow read the config from the server.
//! The SDK (0.8.3) notifies neither a config created while a listener waited for it to
//! exist nor a deletion (its read of a deleted config fails, and it drops the change), so
//! the follow also reads the config every [`POLL`]. A state goes out when its version
//! differs from the last.
//!
//! The SDK reads a config whole (the gRPC limit, 4 MiB, bounds it); content over the
//! bound is refused after the read.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::config::{ConfigChangeListener, ConfigResponse, ConfigService};
use tokio::sync::mpsc;

use super::NacosBackend;
use super::client::map_error;
use super::mapping::{ABSENT_MD5, ConfigStore, content_md5};
use super::names;
use crate::backend::config::{
    self, ConfigCentre, ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite,
};
use crate::backend::follow::forward_config;
use crate::error::{Error, Result};

/// How often a follow reads the config from the server (see the module docs).
pub(super) const POLL: Duration = Duration::from_secs(2);

/// The `dataId` and group of an item, as Dubbo writes them.
fn ids(key: &ConfigKey) -> (String, String) {
    (names::config_key(key.key()), names::config_key(key.group()))
}

/// Reads an item from the server: its content (checked) and version.
async fn read(config: &ConfigService, key: &ConfigKey) -> Result<Option<ConfigItem>> {
    let (data_id, nacos_group) = ids(key);
    read_raw(key, ConfigStore::get(config, &data_id, &nacos_group).await?)
}

/// The version as read, including of content that cannot be used.
fn state_of(read: &Result<Option<ConfigItem>>, raw: Option<&str>) -> Option<String> {
    match read {
        Ok(item) => item.as_ref().map(|i| i.version.as_str().to_owned()),
        Err(_) => raw.map(content_md5),
    }
}

/// Checks a version is an MD5 as this backend gives them.
fn check_version(version: &ConfigVersion) -> Result<&str> {
    let text = version.as_str();
    let md5 = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if md5 {
        Ok(text)
    } else {
        Err(crate::backend::config::foreign_version(version, "nacos"))
    }
}

/// The MD5 of what is there now (`None`: absent) and the error for a conflict with it.
async fn now(config: &ConfigService, key: &ConfigKey) -> Result<(Option<String>, Error)> {
    let (data_id, nacos_group) = ids(key);
    let raw = ConfigStore::get(config, &data_id, &nacos_group).await?;
    let md5 = raw.as_deref().map(content_md5);
    let current = read_raw(key, raw)?;
    Ok((md5, config::conflict(key, current)))
}

/// Wakes a follow when the SDK says a config changed; later wakes fold into a waiting one.
struct Changed(mpsc::Sender<()>);

impl ConfigChangeListener for Changed {
    fn notify(&self, _config: ConfigResponse) {
        let _ = self.0.try_send(());
    }
}

#[async_trait]
impl ConfigCentre for NacosBackend {
    async fn get(&self, key: &ConfigKey) -> Result<Option<ConfigItem>> {
        read(self.config().await?, key).await
    }

    async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow> {
        let listening = self.inner.reader.listening().await?.clone();
        let reader = self.config().await?.clone();
        let (data_id, nacos_group) = ids(key);
        let (signal, mut changed) = mpsc::channel(1);
        let listener: Arc<dyn ConfigChangeListener> = Arc::new(Changed(signal));
        listening
            .add_listener(data_id.clone(), nacos_group.clone(), listener.clone())
            .await
            .map_err(|e| map_error(e, &format!("listen to config {nacos_group}/{data_id}")))?;
        let raw = ConfigStore::get(&reader, &data_id, &nacos_group).await?;
        let first = read_raw(key, raw.clone());
        let mut last = state_of(&first, raw.as_deref());
        let (states, follow) = ConfigFollow::channel();
        let _ = states.try_send(first);
        let key = key.clone();
        tokio::spawn(async move {
            let mut poll = tokio::time::interval(POLL);
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            poll.reset();
            loop {
                tokio::select! {
                    () = states.closed() => break,
                    Some(()) = changed.recv() => {}
                    _ = poll.tick() => {}
                }
                let state = match ConfigStore::get(&reader, &data_id, &nacos_group).await {
                    Ok(raw) => {
                        let state = read_raw(&key, raw.clone());
                        let now = state_of(&state, raw.as_deref());
                        if now == last {
                            continue;
                        }
                        last = now;
                        state
                    }
                    Err(e) => Err(e.ending_follow()),
                };
                if !forward_config(&states, state) {
                    break;
                }
            }
            let _ = listening
                .remove_listener(data_id, nacos_group, listener)
                .await;
        });
        Ok(follow)
    }

    async fn put(&self, key: &ConfigKey, write: ConfigWrite<'_>) -> Result<ConfigVersion> {
        write.check(key)?;
        let expected = write.expected().map(check_version).transpose()?;
        let config = self.config().await?;
        let (md5, conflict) = now(config, key).await?;
        if md5.as_deref() != expected {
            return Err(conflict);
        }
        let (data_id, nacos_group) = ids(key);
        let cas = expected.unwrap_or(ABSENT_MD5);
        if config
            .publish_cas(&data_id, &nacos_group, write.content(), cas)
            .await?
        {
            Ok(ConfigVersion::new(content_md5(write.content())))
        } else {
            Err(now(config, key).await?.1)
        }
    }

    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> Result<()> {
        let expected = check_version(expected)?;
        let config = self.config().await?;
        let (md5, conflict) = now(config, key).await?;
        if md5.as_deref() != Some(expected) {
            return Err(conflict);
        }
        let (data_id, nacos_group) = ids(key);
        config
            .remove_config(data_id.clone(), nacos_group.clone())
            .await
            .map_err(|e| map_error(e, &format!("remove config {nacos_group}/{data_id}")))?;
        Ok(())
    }

    /// Not supported: the SDK (0.8.3) has no way to list a group's configs, and Java 3.3's
    /// Nacos config centre has none either.
    async fn list(&self, group: &str) -> Result<Vec<String>> {
        config::validate_group(group)?;
        Err(Error::config(
            "listing config keys is not supported on Nacos (its SDK cannot list a group's \
             configs); get a rule by its key instead",
        ))
    }
}

/// An item from content as the SDK read it.
fn read_raw(key: &ConfigKey, raw: Option<String>) -> Result<Option<ConfigItem>> {
    raw.map(|content| {
        let version = ConfigVersion::new(content_md5(&content));
        config::decode(key, content.into_bytes()).map(|content| ConfigItem { content, version })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_as_dubbo_writes_them_and_versions_are_md5() {
        let key = ConfigKey::new("org.Outer$Inner:1.0:ab.configurators", "dubbo").unwrap();
        assert_eq!(
            ids(&key),
            (
                "org.Outer___Inner:1.0:ab.configurators".to_owned(),
                "dubbo".to_owned()
            )
        );
        let md5 = ConfigVersion::new(content_md5("force: true"));
        assert!(check_version(&md5).is_ok());
        assert!(check_version(&ConfigVersion::new("12")).is_err());
        let big = "a".repeat(crate::config_item::MAX_RULE_BYTES + 1);
        let read = read_raw(&key, Some(big.clone()));
        assert!(matches!(read, Err(Error::Rule { .. })));
        assert_eq!(state_of(&read, Some(&big)), Some(content_md5(&big)));
        assert_eq!(state_of(&read_raw(&key, None), None), None);
    }
}
