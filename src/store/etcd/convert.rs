//! etcd's records (key-values, events, response headers) into the store's.

use etcd_client::proto::{PbEvent, PbKeyValue};

use crate::error::{Error, Result};
use crate::store::{KeyValue, WatchEvent, prefix_end};

/// etcd's watch event type for a deletion (`mvccpb.Event.EventType.DELETE`).
const EVENT_DELETE: i32 = 1;
/// etcd's watch event type for a put (`mvccpb.Event.EventType.PUT`).
const EVENT_PUT: i32 = 0;

/// The key range `[key, range_end)` of everything starting with `prefix`.
pub(super) fn prefix_range(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    if prefix.is_empty() {
        // etcd refuses an empty key; `\0` to `\0` means every key.
        (vec![0], vec![0])
    } else {
        (prefix.as_bytes().to_vec(), prefix_end(prefix))
    }
}

/// A key-value from etcd, or `None` (with a warning) when its key is not UTF-8: such a key
/// was not written by Introspect and must not spoil a whole listing.
pub(super) fn convert_kv(kv: PbKeyValue) -> Option<KeyValue> {
    match String::from_utf8(kv.key) {
        Ok(key) => Some(KeyValue {
            key,
            value: kv.value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            lease: kv.lease,
        }),
        Err(e) => {
            tracing::warn!(
                key = %String::from_utf8_lossy(e.as_bytes()),
                "skipping an etcd key that is not UTF-8"
            );
            None
        }
    }
}

/// A watch event from etcd; `None` for a key that is not UTF-8 or an unknown event type.
pub(super) fn convert_event(event: PbEvent) -> Option<WatchEvent> {
    let kv = convert_kv(event.kv?)?;
    match event.r#type {
        EVENT_PUT => Some(WatchEvent::Put(kv)),
        EVENT_DELETE => Some(WatchEvent::Delete {
            key: kv.key,
            mod_revision: kv.mod_revision,
        }),
        other => {
            tracing::warn!(event_type = other, "skipping an unknown etcd event type");
            None
        }
    }
}

/// The store revision of a response's header.
pub(super) fn header_revision(
    header: Option<&etcd_client::ResponseHeader>,
    what: &str,
) -> Result<i64> {
    header
        .map(|h| h.revision())
        .ok_or_else(|| Error::malformed("etcd response", format!("{what}: no header")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges() {
        assert_eq!(prefix_range(""), (vec![0], vec![0]));
        assert_eq!(prefix_range("/a/"), (b"/a/".to_vec(), b"/a0".to_vec()));
    }
}
