//! The config centre on a key-value store: each item is the key
//! `/dubbo/config/{group}/{key}` ([`Layout::config_key`]), as Dubbo's etcd config centre
//! keeps it; its version is the key's modification revision, and writes are the store's
//! compare-and-swap and compare-and-delete on it.
//!
//! A follow reads the key (with the store revision of the read), then watches it from the
//! next revision, so nothing falls between them; each put or delete of the exact key becomes
//! a state.
//!
//! [`Layout::config_key`]: super::layout::Layout::config_key

use async_trait::async_trait;

use super::KvBackend;
use crate::backend::config::{
    self, ConfigCentre, ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite,
};
use crate::backend::follow::forward_config;
use crate::error::Result;
use crate::store::{CasOutcome, KeyValue, WatchEvent};

/// An item as read from the store (its content checked).
fn item(key: &ConfigKey, kv: KeyValue) -> Result<ConfigItem> {
    Ok(ConfigItem {
        content: config::decode(key, kv.value)?,
        version: revision_version(kv.mod_revision),
    })
}

fn revision_version(revision: i64) -> ConfigVersion {
    ConfigVersion::new(revision.to_string())
}

/// The store revision a version stands for.
fn revision_of(version: &ConfigVersion, backend: &str) -> Result<i64> {
    version
        .as_str()
        .parse::<i64>()
        .ok()
        .filter(|r| *r > 0)
        .ok_or_else(|| crate::backend::config::foreign_version(version, backend))
}

/// The current item under `path`, for a conflict (unreadable content reads as its error).
fn current(key: &ConfigKey, kv: Option<KeyValue>) -> Result<Option<ConfigItem>> {
    kv.map(|kv| item(key, kv)).transpose()
}

impl KvBackend {
    /// Where the item under `key` is kept.
    fn path(&self, key: &ConfigKey) -> String {
        self.layout.config_key(key.group(), key.key())
    }
}

#[async_trait]
impl ConfigCentre for KvBackend {
    async fn get(&self, key: &ConfigKey) -> Result<Option<ConfigItem>> {
        let path = self.path(key);
        current(key, self.store.get(&path).await?)
    }

    async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow> {
        let path = self.path(key);
        // A prefix read gives the store revision even when the key is absent.
        let range = self.store.get_prefix(&path).await?;
        let first = range.kvs.into_iter().find(|kv| kv.key == path);
        let mut last = first.as_ref().map(|kv| kv.mod_revision);
        let mut watch = self.store.watch_prefix(&path, range.revision + 1).await?;
        let (states, follow) = ConfigFollow::channel();
        let key = key.clone();
        let _ = states.try_send(current(&key, first));
        tokio::spawn(async move {
            loop {
                let events = tokio::select! {
                    () = states.closed() => return,
                    events = watch.next() => events,
                };
                let events = match events {
                    Ok(events) => events,
                    Err(e) => {
                        let _ = states.try_send(Err(e));
                        return;
                    }
                };
                // The prefix also matches longer keys: only the exact one counts.
                for event in events.into_iter().filter(|e| e.key() == path) {
                    let (now, state) = match event {
                        WatchEvent::Put(kv) => (Some(kv.mod_revision), current(&key, Some(kv))),
                        WatchEvent::Delete { .. } => (None, Ok(None)),
                    };
                    if now == last {
                        continue;
                    }
                    last = now;
                    if !forward_config(&states, state) {
                        return;
                    }
                }
            }
        });
        Ok(follow)
    }

    async fn put(&self, key: &ConfigKey, write: ConfigWrite<'_>) -> Result<ConfigVersion> {
        write.check(key)?;
        let backend = self.store.backend();
        let expected = write.expected().map(|v| revision_of(v, backend));
        let outcome = self
            .store
            .compare_and_swap(
                &self.path(key),
                expected.transpose()?.unwrap_or(0),
                write.content().into(),
                None,
            )
            .await?;
        match outcome {
            CasOutcome::Written { revision } => Ok(revision_version(revision)),
            CasOutcome::Conflict { current: now } => Err(config::conflict(key, current(key, now)?)),
        }
    }

    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> Result<()> {
        let expected = revision_of(expected, self.store.backend())?;
        match self
            .store
            .compare_and_delete(&self.path(key), expected)
            .await?
        {
            CasOutcome::Written { .. } => Ok(()),
            CasOutcome::Conflict { current: now } => Err(config::conflict(key, current(key, now)?)),
        }
    }

    /// A prefix read of the group's keys, in pages pinned to the first one's revision;
    /// keys deeper than one segment are not the group's items and are left out.
    async fn list(&self, group: &str) -> Result<Vec<String>> {
        config::validate_group(group)?;
        let prefix = self.layout.config_key(group, "");
        let mut names = Vec::new();
        let mut page = self.store.get_prefix_page(&prefix, None, 0).await?;
        let revision = page.revision;
        loop {
            names.extend(
                page.kvs
                    .iter()
                    .filter_map(|kv| kv.key.strip_prefix(&prefix))
                    .map(str::to_owned),
            );
            if names.len() > config::MAX_LISTED_KEYS {
                break;
            }
            let Some(after) = page.next_after() else {
                break;
            };
            page = self
                .store
                .get_prefix_page(&prefix, Some(&after), revision)
                .await?;
        }
        config::listed(group, names)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::backend::Backend;
    use crate::backend::config::{ConfigKey, ConfigWrite, DEFAULT_GROUP};
    use crate::backend::kv::layout::Layout;
    use crate::store::{MemoryStore, Store};

    #[tokio::test]
    async fn the_part_survives_deadline_and_layout_and_keys_go_where_java_reads() {
        let store = Arc::new(MemoryStore::new());
        let tag_router = ConfigKey::new("shop.tag-router", DEFAULT_GROUP).unwrap();
        let backend =
            Backend::from(store.clone() as Arc<dyn Store>).with_deadline(Duration::from_secs(5));
        let version = backend
            .config()
            .put(&tag_router, ConfigWrite::create("tags: []"))
            .await
            .unwrap();
        let raw = store
            .get("/dubbo/config/dubbo/shop.tag-router")
            .await
            .unwrap();
        assert_eq!(
            raw.map(|kv| kv.mod_revision.to_string()),
            Some(version.to_string())
        );
        let staged = backend.with_layout(Layout::new("/staging").unwrap());
        assert_eq!(staged.config().get(&tag_router).await.unwrap(), None);
        staged
            .config()
            .put(&tag_router, ConfigWrite::create("tags: []"))
            .await
            .unwrap();
        assert!(
            store
                .get("/staging/dubbo/config/dubbo/shop.tag-router")
                .await
                .unwrap()
                .is_some()
        );
        staged
            .config()
            .put(
                &ConfigKey::new("shop.configurators", DEFAULT_GROUP).unwrap(),
                ConfigWrite::create("configs: []"),
            )
            .await
            .unwrap();
        // A deeper key is not an item of the group.
        store
            .put("/staging/dubbo/config/dubbo/a/b", b"x".to_vec(), None)
            .await
            .unwrap();
        assert_eq!(
            staged.config().list(DEFAULT_GROUP).await.unwrap(),
            ["shop.configurators", "shop.tag-router"]
        );
        assert!(staged.config().list("other").await.unwrap().is_empty());
        let foreign = crate::backend::ConfigVersion::new("a.b");
        assert!(matches!(
            staged.config().delete(&tag_router, &foreign).await,
            Err(crate::error::Error::InvalidName { .. })
        ));
    }
}
