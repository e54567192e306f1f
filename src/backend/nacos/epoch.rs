//! The registry's epoch on Nacos: a config (`dataId` `introspect.epoch`, group
//! `introspect`, in the backend's namespace) holding a random id, created by providers when
//! it is absent (at registration and at every keep-alive) and read with every list. A
//! server that lost its configs (a new cluster, an empty data dir) forgets it: its change or
//! disappearance is what consumers see. No Dubbo reader looks there.
//!
//! A Nacos server restarted on the same data keeps its configs but forgets every ephemeral
//! instance: the epoch does not change then (see the backend's docs for what covers it).

use nacos_sdk::api::config::ConfigService;
use nacos_sdk::api::error::Error as SdkError;

use super::client::map_error;
use crate::error::Result;

/// The epoch's `dataId`.
pub const DATA_ID: &str = "introspect.epoch";
/// The epoch's group.
pub const GROUP: &str = "introspect";
/// The longest epoch read as it is (a longer one is shortened to its first bytes).
const MAX_LEN: usize = 256;

/// Reads the epoch, if any.
pub(super) async fn read(config: &ConfigService) -> Result<Option<String>> {
    match config.get_config(DATA_ID.into(), GROUP.into()).await {
        Ok(found) if found.content().is_empty() => Ok(None),
        Ok(found) => {
            let content = found.content();
            if content.len() <= MAX_LEN {
                Ok(Some(content.clone()))
            } else {
                Ok(Some(hex::encode(&content.as_bytes()[..32])))
            }
        }
        Err(SdkError::ConfigNotFound(_)) => Ok(None),
        Err(e) => Err(map_error(e, "read the Nacos epoch")),
    }
}

/// Creates the epoch with a fresh random id unless it exists (`casMd5` `"0"`: only when
/// absent, where the server enforces it).
pub(super) async fn ensure(config: &ConfigService) -> Result<()> {
    if read(config).await?.is_some() {
        return Ok(());
    }
    let id = hex::encode(rand::random::<[u8; 16]>());
    match config
        .publish_config_cas(DATA_ID.into(), GROUP.into(), id, None, "0".into())
        .await
    {
        Ok(_) => Ok(()),
        // Another provider created it first.
        Err(SdkError::ErrResponse(..)) if read(config).await?.is_some() => Ok(()),
        Err(e) => Err(map_error(e, "create the Nacos epoch")),
    }
}
