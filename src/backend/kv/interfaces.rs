//! Reading interface-level provider URLs on etcd, where dubbo-go's `etcdv3` registry writes
//! them: one key per provider URL, `{namespace}/dubbo/{URL-encoded interface}/providers/{URL-encoded URL}`,
//! with an empty value, bound to the provider's lease (dubbo-go also writes each parent key,
//! `/dubbo`, `/dubbo/{interface}`, with an empty value; they are not under the prefix read
//! here). Listing reads the prefix once; following reads it and watches it from the
//! revision after the read, so no change falls between the two, and hands over the whole
//! set after every batch of changes.
//!
//! A key whose last segment does not read as a URL ([`ProviderUrl::from_zookeeper_node`]:
//! the same `URLEncoder` form as ZooKeeper's node names) is skipped with its reason and
//! costs no other URL. A watch that ends (compaction, a lost connection) ends the follow
//! with an `Err`; whoever follows follows again.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::layout::Layout;
use crate::backend::follow::forward;
use crate::backend::{InterfaceKey, InterfaceProviders, ProviderUrlFollow, ProviderUrls};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ProviderUrl, names};
use crate::store::{Store, WatchEvent};

/// The interface-level part of a key-value backend. See the module docs.
pub(crate) struct KvInterfaceProviders {
    store: Arc<dyn Store>,
    layout: Layout,
}

impl KvInterfaceProviders {
    pub(crate) fn new(store: Arc<dyn Store>, layout: Layout) -> Self {
        KvInterfaceProviders { store, layout }
    }
}

/// The URLs known under one prefix, by key suffix (the encoded URL), each read once.
#[derive(Default)]
struct Known(BTreeMap<String, std::result::Result<ProviderUrl, String>>);

impl Known {
    /// Takes the key `key` (under `prefix`) as present.
    fn put(&mut self, prefix: &str, key: &str) {
        let Some(name) = key.strip_prefix(prefix) else {
            return;
        };
        if self.0.contains_key(name) {
            return;
        }
        let read = if name.contains('/') {
            Err("a key below a provider URL's, not a URL".to_owned())
        } else {
            ProviderUrl::from_zookeeper_node(name).map_err(|e| e.to_string())
        };
        self.0.insert(name.to_owned(), read);
    }

    /// The set as a consumer reads it.
    fn urls(&self) -> ProviderUrls {
        let mut urls = ProviderUrls::default();
        for (name, read) in &self.0 {
            match read {
                Ok(url) => urls.push(name, Ok(url.clone())),
                Err(reason) => urls.skipped.push((Error::shorten(name), reason.clone())),
            }
        }
        urls
    }
}

#[async_trait]
impl InterfaceProviders for KvInterfaceProviders {
    async fn list(&self, key: &InterfaceKey, _limits: &Limits) -> Result<ProviderUrls> {
        names::validate_interface(&key.interface)?;
        let prefix = self.layout.interface_providers_prefix(&key.interface);
        let range = self.store.get_prefix(&prefix).await?;
        let mut known = Known::default();
        for kv in &range.kvs {
            known.put(&prefix, &kv.key);
        }
        Ok(known.urls())
    }

    async fn follow(&self, key: &InterfaceKey, _limits: &Limits) -> Result<ProviderUrlFollow> {
        names::validate_interface(&key.interface)?;
        let prefix = self.layout.interface_providers_prefix(&key.interface);
        let range = self.store.get_prefix(&prefix).await?;
        let mut watch = self.store.watch_prefix(&prefix, range.revision + 1).await?;
        let mut known = Known::default();
        for kv in &range.kvs {
            known.put(&prefix, &kv.key);
        }
        let (sets, follow) = ProviderUrlFollow::channel();
        let _ = sets.try_send(Ok(known.urls()));
        tokio::spawn(async move {
            loop {
                let batch = tokio::select! {
                    () = sets.closed() => return,
                    batch = watch.next() => batch,
                };
                let item = batch.map(|events| {
                    for event in events {
                        match event {
                            WatchEvent::Put(kv) => known.put(&prefix, &kv.key),
                            WatchEvent::Delete { key, .. } => {
                                if let Some(name) = key.strip_prefix(prefix.as_str()) {
                                    known.0.remove(name);
                                }
                            }
                        }
                    }
                    known.urls()
                });
                if !forward(&sets, item) {
                    return;
                }
            }
        });
        Ok(follow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::provider_url::form_encode;
    use crate::store::MemoryStore;

    const URL: &str =
        "tri://10.0.0.2:50051/helloworld.Greeter?application=go&interface=helloworld.Greeter";

    #[tokio::test]
    async fn urls_are_listed_and_followed_and_bad_keys_skipped() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let providers = KvInterfaceProviders::new(store.clone(), Layout::default());
        let key = InterfaceKey::new("helloworld.Greeter");
        let prefix = "/dubbo/helloworld.Greeter/providers/";
        // What dubbo-go writes besides: the parents, empty, outside the prefix.
        store
            .put("/dubbo/helloworld.Greeter", Vec::new(), None)
            .await
            .unwrap();
        let good = format!("{prefix}{}", form_encode(URL));
        store.put(&good, Vec::new(), None).await.unwrap();
        store
            .put(&format!("{prefix}%zz"), Vec::new(), None)
            .await
            .unwrap();
        store
            .put(&format!("{prefix}a/b"), Vec::new(), None)
            .await
            .unwrap();
        let listed = providers.list(&key, &Limits::default()).await.unwrap();
        assert_eq!(listed.urls.len(), 1, "{listed:?}");
        assert_eq!(listed.urls[0].port, 50051);
        assert_eq!(listed.skipped.len(), 2, "{listed:?}");

        let mut follow = providers.follow(&key, &Limits::default()).await.unwrap();
        assert_eq!(follow.next().await.unwrap(), listed);
        let other = URL.replace("50051", "50052");
        store
            .put(
                &format!("{prefix}{}", form_encode(&other)),
                Vec::new(),
                None,
            )
            .await
            .unwrap();
        assert_eq!(follow.next().await.unwrap().urls.len(), 2);
        store.delete(&good).await.unwrap();
        let now = follow.next().await.unwrap();
        assert_eq!(now.urls.len(), 1);
        assert_eq!(now.urls[0].port, 50052);
        assert!(
            providers
                .list(&InterfaceKey::new("bad interface/"), &Limits::default())
                .await
                .is_err(),
            "an interface name that is no name is refused"
        );
    }
}
