//! How many keys one page of a prefix read asks etcd for.
//!
//! etcd counts every key left in the range on each range request with a limit, so a prefix
//! read in small fixed pages costs time quadratic in its length: 100,000 instance records
//! took 6.5 s in pages of 500 against 1 s in one range. Pages are therefore sized by bytes:
//! after the first page of a prefix, a page asks for as many keys as fill a sixteenth of
//! the response limit (4 MiB by default) at the largest record last seen under that
//! prefix. A response over the limit anyway (records that grew) is asked again with half
//! the keys.
//!
//! Why a sixteenth: fewer, larger pages cost etcd less counting, but a page must arrive
//! within the request timeout over a slow link too (4 MiB take about 3.4 s at 10 Mbit/s,
//! against a default timeout of 5 s).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Keys of the first page of a prefix not read before: records at their default size
/// limit (64 KiB) keep it at half the default response limit.
pub(super) const FIRST_PAGE_KEYS: usize = 500;
/// Prefixes whose record size is remembered; past this many, the memory starts over.
const REMEMBERED_PREFIXES: usize = 4096;

/// See the module docs.
pub(super) struct PageSizes {
    /// A page size fixed by the options: every page asks for this many keys.
    fixed: Option<usize>,
    /// The bytes a page aims at: a sixteenth of the response limit.
    budget: usize,
    /// The largest record (key and value) of the last page read under each prefix.
    largest: Mutex<HashMap<String, usize>>,
}

impl PageSizes {
    /// Sizes for responses of at most `max_response_bytes`, or pages of `fixed` keys.
    pub(super) fn new(fixed: Option<usize>, max_response_bytes: usize) -> Self {
        PageSizes {
            fixed: fixed.map(|keys| keys.max(1)),
            budget: (max_response_bytes / 16).max(1),
            largest: Mutex::new(HashMap::new()),
        }
    }

    /// The keys the next page of `prefix` asks for.
    pub(super) fn keys(&self, prefix: &str) -> usize {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let largest = self.largest.lock().unwrap_or_else(PoisonError::into_inner);
        match largest.get(prefix) {
            Some(&bytes) => (self.budget / bytes.max(1)).max(1),
            None => FIRST_PAGE_KEYS,
        }
    }

    /// Remembers the largest record of a page just read under `prefix`.
    pub(super) fn observe(&self, prefix: &str, largest_record: usize) {
        if self.fixed.is_some() || largest_record == 0 {
            return;
        }
        let mut largest = self.largest.lock().unwrap_or_else(PoisonError::into_inner);
        if largest.len() >= REMEMBERED_PREFIXES && !largest.contains_key(prefix) {
            largest.clear();
        }
        largest.insert(prefix.to_owned(), largest_record);
    }

    /// The keys to ask for again after a page of `asked` keys was over the response
    /// limit; `None` when a single key already is.
    pub(super) fn after_too_large(asked: usize) -> Option<usize> {
        (asked > 1).then_some(asked / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_fill_a_sixteenth_of_the_response_limit_at_the_largest_record_seen() {
        let sizes = PageSizes::new(None, 64 * 1024 * 1024);
        assert_eq!(
            sizes.keys("/a/"),
            FIRST_PAGE_KEYS,
            "a prefix not read before"
        );
        sizes.observe("/a/", 650);
        assert_eq!(sizes.keys("/a/"), 4 * 1024 * 1024 / 650);
        sizes.observe("/a/", 64 * 1024);
        assert_eq!(sizes.keys("/a/"), 64, "records at the size limit");
        assert_eq!(sizes.keys("/b/"), FIRST_PAGE_KEYS, "sizes are per prefix");
        sizes.observe("/b/", usize::MAX);
        assert_eq!(sizes.keys("/b/"), 1, "never zero keys");
    }

    #[test]
    fn a_fixed_page_size_is_kept() {
        let sizes = PageSizes::new(Some(3), 4096);
        sizes.observe("/a/", 1);
        assert_eq!(sizes.keys("/a/"), 3);
        assert_eq!(PageSizes::new(Some(0), 4096).keys("/a/"), 1);
    }

    #[test]
    fn pages_over_the_limit_are_halved_down_to_one_key() {
        assert_eq!(PageSizes::after_too_large(500), Some(250));
        assert_eq!(PageSizes::after_too_large(1), None);
    }

    #[test]
    fn the_memory_of_prefixes_is_bounded() {
        let sizes = PageSizes::new(None, 4096);
        for i in 0..REMEMBERED_PREFIXES * 2 {
            sizes.observe(&format!("/{i}/"), 10);
        }
        let remembered = sizes.largest.lock().unwrap().len();
        assert!(remembered <= REMEMBERED_PREFIXES, "{remembered}");
    }
}
