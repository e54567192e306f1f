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
use crate::backend::config::{self, ConfigCentre, ConfigFollow, ConfigItem, ConfigVersion};
use crate::backend::follow::forward_config;
use crate::error::Result;
use crate::store::{CasOutcome, KeyValue, WatchEvent};

/// An item as read from the store (its content checked).
fn item(key: &str, group: &str, kv: KeyValue) -> Result<ConfigItem> {
    Ok(ConfigItem {
        content: config::decode(key, group, kv.value)?,
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
fn current(key: &str, group: &str, kv: Option<KeyValue>) -> Result<Option<ConfigItem>> {
    kv.map(|kv| item(key, group, kv)).transpose()
}

#[async_trait]
impl ConfigCentre for KvBackend {
    async fn get(&self, key: &str, group: &str) -> Result<Option<ConfigItem>> {
        config::validate_names(key, group)?;
        let path = self.layout.config_key(group, key);
        current(key, group, self.store.get(&path).await?)
    }

    async fn follow(&self, key: &str, group: &str) -> Result<ConfigFollow> {
        config::validate_names(key, group)?;
        let path = self.layout.config_key(group, key);
        // A prefix read gives the store revision even when the key is absent.
        let range = self.store.get_prefix(&path).await?;
        let first = range.kvs.into_iter().find(|kv| kv.key == path);
        let mut last = first.as_ref().map(|kv| kv.mod_revision);
        let mut watch = self.store.watch_prefix(&path, range.revision + 1).await?;
        let (states, follow) = ConfigFollow::channel();
        let (key, group) = (key.to_owned(), group.to_owned());
        let _ = states.try_send(current(&key, &group, first));
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
                        WatchEvent::Put(kv) => {
                            (Some(kv.mod_revision), current(&key, &group, Some(kv)))
                        }
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

    async fn put(
        &self,
        key: &str,
        group: &str,
        content: &str,
        expected: Option<&ConfigVersion>,
    ) -> Result<ConfigVersion> {
        config::validate_names(key, group)?;
        config::check_content(key, group, content)?;
        let backend = self.store.backend();
        let expected = expected.map(|v| revision_of(v, backend)).transpose()?;
        let path = self.layout.config_key(group, key);
        let outcome = self
            .store
            .compare_and_swap(&path, expected.unwrap_or(0), content.into(), None)
            .await?;
        match outcome {
            CasOutcome::Written { revision } => Ok(revision_version(revision)),
            CasOutcome::Conflict { current: now } => {
                Err(config::conflict(key, group, current(key, group, now)?))
            }
        }
    }

    async fn delete(&self, key: &str, group: &str, expected: &ConfigVersion) -> Result<()> {
        config::validate_names(key, group)?;
        let expected = revision_of(expected, self.store.backend())?;
        let path = self.layout.config_key(group, key);
        match self.store.compare_and_delete(&path, expected).await? {
            CasOutcome::Written { .. } => Ok(()),
            CasOutcome::Conflict { current: now } => {
                Err(config::conflict(key, group, current(key, group, now)?))
            }
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
    use crate::backend::config::DEFAULT_GROUP;
    use crate::layout::Layout;
    use crate::store::{MemoryStore, Store};

    #[tokio::test]
    async fn the_part_survives_deadline_and_layout_and_keys_go_where_java_reads() {
        let store = Arc::new(MemoryStore::new());
        let backend =
            Backend::from(store.clone() as Arc<dyn Store>).with_deadline(Duration::from_secs(5));
        let version = backend
            .config()
            .put("shop.tag-router", DEFAULT_GROUP, "tags: []", None)
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
        assert_eq!(
            staged
                .config()
                .get("shop.tag-router", DEFAULT_GROUP)
                .await
                .unwrap(),
            None
        );
        staged
            .config()
            .put("shop.tag-router", DEFAULT_GROUP, "tags: []", None)
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
            .put("shop.configurators", DEFAULT_GROUP, "configs: []", None)
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
            staged
                .config()
                .delete("shop.tag-router", DEFAULT_GROUP, &foreign)
                .await,
            Err(crate::Error::InvalidName { .. })
        ));
    }
}
