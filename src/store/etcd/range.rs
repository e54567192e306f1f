//! Prefix reads in pages: each range request returns at most a page of keys (sized by
//! bytes, see `pages.rs`), and every page after the first is read at the first page's store
//! revision, so a prefix of any length is read as one consistent view without a response
//! that grows with it (etcd's responses are bounded by the client's response limit).

use etcd_client::GetOptions;
use etcd_client::proto::PbKeyValue;

use super::EtcdStore;
use super::convert::{convert_kv, header_revision, prefix_range};
use super::errors::{is_compacted, map_error, too_large_response};
use super::pages::PageSizes;
use crate::error::{Error, Result};
use crate::store::{Page, Range};

/// One page of the keys under `prefix` after `after`, at store revision `revision`
/// (`0`: now). Keys that are not UTF-8 are skipped (see `convert_kv`); a page of nothing
/// but such keys is read past, so a page is empty only at the end of the prefix.
pub(super) async fn page(
    store: &EtcdStore,
    prefix: &str,
    after: Option<&str>,
    revision: i64,
) -> Result<Page> {
    let (first, end) = prefix_range(prefix);
    let mut start = match after {
        Some(after) => just_after(after.as_bytes()),
        None => first,
    };
    let mut revision = revision;
    let mut keys = store.pages.keys(prefix);
    loop {
        let answer = request(store, prefix, &start, &end, revision, keys).await;
        if let (Err(Error::TooLarge { .. }), Some(fewer)) =
            (&answer, PageSizes::after_too_large(keys))
        {
            keys = fewer;
            continue;
        }
        let (raw, more, read_at) = answer?;
        revision = read_at;
        let largest = raw.iter().map(|kv| kv.key.len() + kv.value.len()).max();
        store.pages.observe(prefix, largest.unwrap_or(0));
        let last = raw.last().map(|kv| kv.key.clone());
        let kvs: Vec<_> = raw.into_iter().filter_map(convert_kv).collect();
        match last {
            Some(last) if more && kvs.is_empty() => start = just_after(&last),
            _ => {
                return Ok(Page {
                    kvs,
                    revision,
                    more,
                });
            }
        }
    }
}

/// The smallest key after `key`: the key followed by a zero byte.
fn just_after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

/// One range request of `[start, end)` of at most `keys` keys: the keys, whether more
/// follow, and the store revision they were read at. A response over the client's limit
/// fails with [`Error::TooLarge`].
async fn request(
    store: &EtcdStore,
    prefix: &str,
    start: &[u8],
    end: &[u8],
    revision: i64,
    keys: usize,
) -> Result<(Vec<PbKeyValue>, bool, i64)> {
    let what = || format!("etcd get prefix {}", Error::shorten(prefix));
    let limit = i64::try_from(keys).unwrap_or(i64::MAX);
    store
        .timed(what, |client| {
            let start = start.to_vec();
            async move {
                let mut options = GetOptions::new().with_range(end).with_limit(limit);
                if revision > 0 {
                    options = options.with_revision(revision);
                }
                let mut response =
                    store
                        .kv(&client)
                        .get(start, Some(options))
                        .await
                        .map_err(|e| {
                            if let Some(found) = too_large_response(&e) {
                                Error::TooLarge {
                                    what: "etcd range response",
                                    size: found.unwrap_or(store.max_response_bytes),
                                    limit: store.max_response_bytes,
                                }
                            } else if is_compacted(&e) {
                                // etcd does not say how far it compacted; it is past `revision`.
                                Error::Compacted {
                                    requested: revision,
                                    compacted: revision + 1,
                                }
                            } else {
                                map_error(e, &what())
                            }
                        })?;
                // A pinned read answers with the current revision in its header; the keys
                // are of the pinned one.
                let read_at = if revision > 0 {
                    revision
                } else {
                    header_revision(response.header(), &what())?
                };
                let more = response.more();
                let raw = response.take_kvs().into_iter().map(|kv| kv.0).collect();
                Ok((raw, more, read_at))
            }
        })
        .await
}

/// Every key under `prefix`, page by page at one store revision. When that revision is
/// compacted away between pages, the read starts over once from a fresh first page.
pub(super) async fn read_all(store: &EtcdStore, prefix: &str) -> Result<Range> {
    match read_pages(store, prefix).await {
        Err(Error::Compacted { .. }) => read_pages(store, prefix).await,
        other => other,
    }
}

async fn read_pages(store: &EtcdStore, prefix: &str) -> Result<Range> {
    let first = page(store, prefix, None, 0).await?;
    let mut range = Range {
        kvs: first.kvs,
        revision: first.revision,
    };
    let mut more = first.more;
    while more {
        let Some(after) = range.kvs.last().map(|kv| kv.key.clone()) else {
            break;
        };
        let next = page(store, prefix, Some(&after), range.revision).await?;
        more = next.more && !next.kvs.is_empty();
        range.kvs.extend(next.kvs);
    }
    Ok(range)
}
