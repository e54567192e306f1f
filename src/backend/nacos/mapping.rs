//! The mapping on Nacos: a config with `dataId` = the interface (`$` → `___`, `/` → `-`),
//! group `mapping`, holding app names joined by `,`, as `NacosMetadataReport` writes it.
//! Apps only add themselves, by compare-and-set: `publishConfigCas` with the MD5 of the
//! value read (lowercase hex, as Dubbo's `MD5Utils`), or `"0"` when there is none
//! (Dubbo's `getConfigItem`); a refused write is a conflict, retried with backoff. A write
//! counts once a read shows the app: a server that takes `casMd5` without enforcing it
//! (rnacos), or answers reads from before a write, would otherwise lose an app to a
//! concurrent writer.
//!
//! The writes go through [`ConfigStore`], so the conflict path can be tested against a
//! scripted config service (the test server, rnacos, does not enforce `casMd5`).

use std::collections::BTreeSet;

use async_trait::async_trait;
use md5::{Digest, Md5};
use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::error::Error as SdkError;

use super::client::map_error;
use super::names;
use crate::backend::mapping::{add_app, parse_apps};
use crate::error::Result;
use crate::limits::Limits;

/// The ticket of an absent config (Dubbo's `casMd5` for "create").
pub const ABSENT_MD5: &str = "0";

/// The config operations the mapping needs.
#[async_trait]
pub trait ConfigStore: Send + Sync {
    /// The content of a config, if it exists.
    async fn get(&self, data_id: &str, group: &str) -> Result<Option<String>>;

    /// Writes `content` if the config's content still hashes to `cas_md5` ([`ABSENT_MD5`]:
    /// still absent); returns whether it was written.
    async fn publish_cas(
        &self,
        data_id: &str,
        group: &str,
        content: &str,
        cas_md5: &str,
    ) -> Result<bool>;
}

#[async_trait]
impl ConfigStore for ConfigService {
    async fn get(&self, data_id: &str, group: &str) -> Result<Option<String>> {
        match self.get_config(data_id.into(), group.into()).await {
            Ok(found) => Ok(Some(found.content().clone()).filter(|c| !c.is_empty())),
            Err(SdkError::ConfigNotFound(_)) => Ok(None),
            Err(e) => Err(map_error(e, &format!("read config {group}/{data_id}"))),
        }
    }

    async fn publish_cas(
        &self,
        data_id: &str,
        group: &str,
        content: &str,
        cas_md5: &str,
    ) -> Result<bool> {
        match self
            .publish_config_cas(
                data_id.into(),
                group.into(),
                content.into(),
                None,
                cas_md5.into(),
            )
            .await
        {
            Ok(written) => Ok(written),
            // The server refuses a write whose MD5 no longer matches with an error answer.
            Err(SdkError::ErrResponse(_, _, _, message))
                if message
                    .as_deref()
                    .is_some_and(|m| m.to_ascii_lowercase().contains("cas")) =>
            {
                Ok(false)
            }
            Err(e) => Err(map_error(e, &format!("write config {group}/{data_id}"))),
        }
    }
}

/// The MD5 of a config's content as Nacos compares it: lowercase hex of its UTF-8 bytes.
pub fn content_md5(content: &str) -> String {
    hex::encode(Md5::digest(content.as_bytes()))
}

/// A mapping value as read: the apps and the ticket to write it back.
pub struct Value {
    /// The apps.
    pub apps: BTreeSet<String>,
    /// The MD5 of the content read, or [`ABSENT_MD5`].
    pub cas_md5: String,
}

/// Reads the mapping of `interface` (leniently, see [`parse_apps`]).
pub async fn read(store: &dyn ConfigStore, interface: &str, limits: &Limits) -> Result<Value> {
    let data_id = names::config_key(interface);
    Ok(match store.get(&data_id, names::MAPPING_GROUP).await? {
        Some(content) => Value {
            apps: parse_apps(content.as_bytes(), limits),
            cas_md5: content_md5(&content),
        },
        None => Value {
            apps: BTreeSet::new(),
            cas_md5: ABSENT_MD5.to_owned(),
        },
    })
}

/// Adds `app` to the mapping of `interface`; see the module docs.
pub async fn add(
    store: &dyn ConfigStore,
    interface: &str,
    app: &str,
    limits: &Limits,
) -> Result<()> {
    let data_id = names::config_key(interface);
    let key = format!("{}/{data_id}", names::MAPPING_GROUP);
    let data_id = &data_id;
    add_app(
        app,
        &key,
        limits,
        move || async move {
            let current = read(store, interface, limits).await?;
            Ok((current.apps, current.cas_md5))
        },
        move |value, cas_md5| async move {
            Ok(store
                .publish_cas(data_id, names::MAPPING_GROUP, &value, &cas_md5)
                .await?
                && read(store, interface, limits).await?.apps.contains(app))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::backend::mapping::MAX_ADD_ATTEMPTS;
    use crate::error::Error;

    /// A config service that enforces `casMd5` as Nacos does, and lets a test write between
    /// a reader's read and its write.
    #[derive(Default)]
    struct Scripted {
        configs: Mutex<HashMap<(String, String), String>>,
        /// Writes of other providers to make just before each of the next CAS writes.
        interleaved: Mutex<Vec<String>>,
        cas_seen: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl ConfigStore for Scripted {
        async fn get(&self, data_id: &str, group: &str) -> Result<Option<String>> {
            let configs = self.configs.lock().unwrap();
            Ok(configs.get(&(data_id.into(), group.into())).cloned())
        }

        async fn publish_cas(
            &self,
            data_id: &str,
            group: &str,
            content: &str,
            cas_md5: &str,
        ) -> Result<bool> {
            self.cas_seen.lock().unwrap().push(cas_md5.to_owned());
            let mut configs = self.configs.lock().unwrap();
            let key = (data_id.to_owned(), group.to_owned());
            if let Some(other) = self.interleaved.lock().unwrap().pop() {
                configs.insert(key.clone(), other);
            }
            let matches = match configs.get(&key) {
                None => cas_md5 == ABSENT_MD5,
                Some(current) => content_md5(current) == cas_md5,
            };
            if matches {
                configs.insert(key, content.to_owned());
            }
            Ok(matches)
        }
    }

    #[test]
    fn md5_is_lowercase_hex_of_the_utf8_content() {
        assert_eq!(content_md5(""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(content_md5("shop"), hex::encode(Md5::digest(b"shop")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_compare_and_set_is_retried_and_keeps_the_other_writer() {
        let store = Scripted::default();
        let limits = Limits::default();
        // Another provider creates the mapping between our read and our write, then adds a
        // second app between our next read and write.
        store
            .interleaved
            .lock()
            .unwrap()
            .extend(["cart,other".to_owned(), "other".to_owned()]);
        add(&store, "org.Shop$Orders", "shop", &limits)
            .await
            .unwrap();
        let value = store
            .get("org.Shop___Orders", "mapping")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(value, "cart,other,shop");
        let seen = store.cas_seen.lock().unwrap().clone();
        assert_eq!(seen[0], ABSENT_MD5, "a first write creates");
        assert_eq!(seen[1], content_md5("other"));
        assert_eq!(seen[2], content_md5("cart,other"));
        // Already there: nothing written.
        add(&store, "org.Shop$Orders", "shop", &limits)
            .await
            .unwrap();
        assert_eq!(store.cas_seen.lock().unwrap().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_mapping_that_keeps_changing_is_contended() {
        let store = Scripted::default();
        let rivals: Vec<String> = (0..MAX_ADD_ATTEMPTS).map(|i| format!("app-{i}")).collect();
        store.interleaved.lock().unwrap().extend(rivals);
        let err = add(&store, "shop.Orders", "shop", &Limits::default())
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Contended {
                    attempts: MAX_ADD_ATTEMPTS,
                    ..
                }
            ),
            "{err}"
        );
    }
}
